# Background jobs of builtins, functions and subshells: $!, wait, kill.
d=$(mktemp -d)
sleep 0.2 & p=$!
[ "$p" -gt 0 ] && [ "$p" != "$$" ] && echo "\$! is the job's pid"
kill -0 $p && echo "it runs"
wait $p; echo "sleep $?"
f() { return $1; }
f 7 & wait $!; echo "function job $?"
(exit 5) & a=$!; (exit 6) & b=$!
wait $b; echo "b $?"; wait $a; echo "a $?"
x=1; { x=2; echo "x=$x in the job"; } & wait; echo "x=$x after it"
for i in 1 2 3; do { echo "job $i"; } > "$d/$i" & done; wait; cat "$d/1" "$d/2" "$d/3"
# (Where the shell notices a job's death and says "Terminated" depends on
# timing: its stderr is left out.)
{ sleep 5 & k=$!; kill $k; wait $k; echo "killed $?"; } 2>/dev/null
loop() { while :; do sleep 0.05; done; }
{ loop & l=$!; kill -0 $l && echo "function loop runs"; kill $l; wait $l; echo "function loop killed $?"; } 2>/dev/null
wait; echo "nothing left: $?"
rm -r "$d"
