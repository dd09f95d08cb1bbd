# The scripted demo `make run` plays without a terminal: a busybox userland
# at work inside nomu, every process and pipe below emulated in one host process.
echo "nomu demo: busybox $(busybox | head -n 1 | cut -d' ' -f2) hush, running as pid $$ in one host process"
echo "uname: $(uname -sm)"
echo "pipeline: $(seq 1 10 | awk '{ s += $1 } END { print s }') is the sum of 1..10"
d=$(mktemp -d)
for w in nomu runs linux programs; do echo "$w" >> "$d/words"; done
echo "sorted words: $(sort "$d/words" | tr '\n' ' ')"
sleep 0.1 & bg=$!; wait "$bg"; echo "background job $bg finished with status $?"
tar czf "$d/w.tgz" -C "$d" words && echo "tar+gzip: $(tar tzf "$d/w.tgz")"
echo "md5: $(md5sum < "$d/words" | cut -c1-12)..."
rm -r "$d"
echo "demo done: try it interactively with 'make run' on a terminal"
