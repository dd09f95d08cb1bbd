# Traps in subshells: a subshell has its own, the parent's are reset (except
# ignored signals), and a signal to a subshell runs the subshell's.
trap 'echo parent EXIT' EXIT
trap 'echo parent USR1' USR1
(echo "a subshell does not run the parent's EXIT trap")
(trap 'echo sub EXIT' EXIT; echo "in sub")
(trap 'echo sub USR1' USR1; sh -c 'kill -USR1 $PPID'; echo "sub after USR1")
(sh -c 'kill -USR1 $PPID'; echo "not reached"); echo "sub without a trap died: $?"
trap '' USR2
(sh -c 'kill -USR2 $PPID'; echo "USR2 stays ignored in a subshell")
trap - USR2
d=$(mktemp -d)
(trap 'echo "bg got TERM"; exit 9' TERM; echo ready > "$d/ready"; while :; do sleep 0.05; done) & p=$!
while [ ! -s "$d/ready" ]; do sleep 0.01; done
kill $p; wait $p; echo "bg $?"
rm -r "$d"
kill -USR1 $$; echo "parent after USR1"
