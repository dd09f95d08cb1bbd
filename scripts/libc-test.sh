#!/bin/sh
# Runs musl's libc-test (git.musl-libc.org/libc-test; not a Debian package,
# so bring a checkout yourself) natively and under nomu, and prints the
# tests whose outcome differs (exit status 0 or not) per entry path.
#
#   scripts/libc-test.sh [-e ENTRIES] [-t SECONDS] [-o OUTDIR] LIBC_TEST_DIR
#
# ENTRIES is a comma-separated list (default rewrite,seccomp). The suite is
# built in a copy under OUTDIR with musl-gcc (apt-get install -y
# musl-tools), as static PIEs (the -static.exe variants and the dlopen tests
# are built as the suite's Makefile does). Each test runs from OUTDIR's copy
# with SECONDS as its limit; OUTDIR/ENTRY.tsv holds one line per test
# (name, exit status, the start of its output). Needs target/release/nomu.
set -u
entries=rewrite,seccomp
limit=60
out=/tmp/libc-test
while getopts e:t:o: opt; do
	case $opt in
	e) entries=$OPTARG ;;
	t) limit=$OPTARG ;;
	o) out=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { echo "usage: $0 [-e ENTRIES] [-t SECONDS] [-o OUTDIR] LIBC_TEST_DIR" >&2; exit 2; }
nomu=$(cd "$(dirname "$0")/.." && pwd)/target/release/nomu
command -v musl-gcc >/dev/null || { echo "$0: needs musl-gcc (apt-get install -y musl-tools)" >&2; exit 1; }
[ -x "$nomu" ] || { echo "$0: build nomu first (cargo build --release)" >&2; exit 1; }
mkdir -p "$out/src" && cp -a "$1/." "$out/src/" || exit 1
cd "$out/src" || exit 1
cat >config.mak <<'EOF'
CFLAGS += -pipe -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wno-unused-function -Wno-missing-braces -Wno-unused -Wno-overflow
CFLAGS += -Wno-unknown-pragmas -fno-builtin -frounding-math -fPIE
CFLAGS += -Werror=implicit-function-declaration -Werror=implicit-int -Werror=pointer-sign -Werror=pointer-arith
CFLAGS += -g
LDFLAGS += -g -static-pie
LDLIBS += -lpthread -lm -lrt
CC = musl-gcc
EOF
# The suite's Makefile builds and runs every test (natively); its report
# is not used here.
make -k -j"$(nproc)" >"$out/build.log" 2>&1
tests=$(find src -name '*.exe' ! -name runtest.exe ! -name '*_dso*' | sort)
run_all() { # $1: native or an entry path
	: >"$out/$1.tsv"
	for t in $tests; do
		if [ "$1" = native ]; then
			timeout "$limit" "./$t" >"$out/output" 2>&1
		else
			timeout "$limit" "$nomu" run --entry "$1" -- "$PWD/$t" >"$out/output" 2>&1
		fi
		printf '%s\t%s\t%s\n' "$t" "$?" "$(head -c 300 "$out/output" | tr '\n\t' '  ')" >>"$out/$1.tsv"
	done
}
run_all native
echo "natively: $(awk -F'\t' '$2 != 0' "$out/native.tsv" | wc -l) of $(wc -l <"$out/native.tsv") tests fail"
for e in $(echo "$entries" | tr , ' '); do
	run_all "$e"
	echo "== $e: tests whose outcome differs from native (name, native status, nomu status, nomu output)"
	awk -F'\t' 'NR == FNR { ok[$1] = $2; next } (ok[$1] == 0) != ($2 == 0) { print "  " $1, ok[$1], $2, $3 }' \
		"$out/native.tsv" "$out/$e.tsv"
done
