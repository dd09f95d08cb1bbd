# exec redirections, inherited by subshells, jobs and commands with their
# offsets (a fork shares open file descriptions).
d=$(mktemp -d)
exec 3> "$d/log"
echo one >&3
(echo two >&3)
{ echo three >&3; } & wait
sh -c 'echo four >&3'
exec 3>&-
cat "$d/log"
echo bad 2>/dev/null >&3 || echo "fd 3 closed"
exec 4< "$d/log"
read a <&4; (read b <&4; echo "the subshell read $b"); read c <&4; echo "the shell read $a then $c"
exec 4<&-
(exec > "$d/sub"; echo "into the subshell's file"); echo "stdout back"; cat "$d/sub"
exec 5>&1; out=$(echo "to fd 5, the real stdout" >&5; echo inner); echo "out=$out"; exec 5>&-
(exec 1>/dev/null); echo "still visible"
exec 6<> "$d/rw"; echo written >&6; exec 6>&-; cat "$d/rw"
exec 7>&2 2>/dev/null; ls /no/such/file; exec 2>&7 7>&-; echo "stderr back" >&2
rm -r "$d"
exec echo "exec replaced the shell"
echo "not reached"
