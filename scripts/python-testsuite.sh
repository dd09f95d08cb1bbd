#!/bin/sh
# Runs CPython's own regression tests (Debian's libpython3.11-testsuite) natively
# and under nomu, and prints per module the counts of ok/FAIL/ERROR/skipped tests
# and the tests whose outcome differs. See docs/python-testsuite.md.
#
#   scripts/python-testsuite.sh [-e ENTRY] [-m MEM] [-t SECONDS] [-o OUTDIR] [-s] MODULE...
#
# -s starts python3 under nomu from /bin/sh -c (not exec'd), as a program
# another started: a non-PIE program then runs where nomu keeps its range
# free (not as the first program).
# MEM is nomu's --mem (default 1G): test_multiprocessing_fork's 100 forked
# children of the test process each hold ~10 MiB of copies (natively ~1.5 MiB
# shared copy-on-write), 2G is what it needs.
# Each run gets a TMPDIR of its own: regrtest works in $TMPDIR/test_python_PID,
# and every nomu guest's first process is pid 1, so two runs sharing /tmp
# would share (and remove) each other's working directory.
# MODULE may carry regrtest options after a colon, e.g. test_socketserver:-unetwork.
#
# Needs: apt-get install -y libpython3.11-testsuite; target/release/nomu built.
set -u
entry=seccomp
mem=1G
limit=600
out=/tmp/python-testsuite
via_shell=
while getopts e:m:t:o:s opt; do
	case $opt in
	e) entry=$OPTARG ;;
	m) mem=$OPTARG ;;
	t) limit=$OPTARG ;;
	o) out=$OPTARG ;;
	s) via_shell=1 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
nomu=$(cd "$(dirname "$0")/.." && pwd)/target/release/nomu
mkdir -p "$out"
cd "$out" || exit 1
# One line per test: "STATUS name (class)"
outcomes() {
	sed -n 's/^\(test[^ ]* ([^)]*)\).* \.\.\. *\(ok\|FAIL\|ERROR\|skipped\|expected failure\|unexpected success\).*$/\2 \1/p' "$1" |
		sed 's/^skipped/skip/; s/^expected failure/xfail/; s/^unexpected success/xpass/' |
		awk '{ s = $1; $1 = ""; gsub(/ /, ""); print s, $0 }' | sort -k2
}
counts() {
	awk '{ n[$1]++ } END { printf "ok %d fail %d error %d skip %d", n["ok"], n["FAIL"], n["ERROR"], n["skip"] }' "$1"
}
for spec in "$@"; do
	m=${spec%%:*}
	opts=
	[ "$spec" = "$m" ] || opts=$(echo "${spec#*:}" | tr ',' ' ')
	rm -rf "tmp.$m.native" "tmp.$m.nomu"
	mkdir -p "tmp.$m.native" "tmp.$m.nomu"
	# shellcheck disable=SC2086
	TMPDIR=$PWD/tmp.$m.native timeout -k 10 "$limit" /usr/bin/python3 -m test -v $opts "$m" >"$m.native.log" 2>&1
	echo "native rc=$?" >>"$m.native.log"
	if [ -n "$via_shell" ]; then
		set -- /bin/sh -c '/usr/bin/python3 "$@"; exit $?' sh
	else
		set -- /usr/bin/python3
	fi
	# shellcheck disable=SC2086
	TMPDIR=$PWD/tmp.$m.nomu timeout -k 10 "$limit" "$nomu" run --entry "$entry" --mem "$mem" -- "$@" -m test -v $opts "$m" >"$m.nomu.log" 2>&1
	echo "nomu rc=$?" >>"$m.nomu.log"
	outcomes "$m.native.log" >"$m.native.res"
	outcomes "$m.nomu.log" >"$m.nomu.res"
	summary() { echo "$(grep -E '^(Ran [0-9]+ test|OK|FAILED)' "$1" | tr '\n' ' ')$(tail -1 "$1")"; }
	printf '%s\n  native: %s [%s]\n  nomu:   %s [%s]\n' "$m" "$(counts "$m.native.res")" \
		"$(summary "$m.native.log")" "$(counts "$m.nomu.res")" "$(summary "$m.nomu.log")"
	join -j 2 -a 1 -a 2 -e MISSING -o 0,1.1,2.1 "$m.native.res" "$m.nomu.res" 2>/dev/null |
		awk '$2 != $3 { print "    differs: " $1 " native " $2 " nomu " $3 }'
done
