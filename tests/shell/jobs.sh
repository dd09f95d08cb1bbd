# Background jobs, wait, exit statuses, subshells, traps.
# a outlives b by far: a job that ends while the shell waits for another
# is reaped and forgotten by busybox's hush (natively too, on a loaded
# machine: "wait: pid N is not a child of this shell").
sleep 1 & a=$!
(sleep 0.1; exit 3) & b=$!
wait $b; echo "b exited $?"
wait $a; echo "a exited $?"
(exit 42); echo "subshell $?"
false || echo "or runs"; true && echo "and runs"
trap 'echo caught USR1' USR1
kill -USR1 $$
echo "after trap"
sh -c 'kill -TERM $$; echo not reached'; echo "child killed: $?"
{ for i in 1 2 3; do (echo "job $i") & done; wait; } | sort
echo done
