# Pipelines of builtins and functions: each element a forked shell.
up() { while read -r l; do echo "$l!"; done; }
printf '%s\n' a b c | up | while read -r l; do echo "got $l"; done
n=0; printf '1\n2\n3\n' | while read -r v; do n=$((n + v)); echo "n=$n in the pipe"; done; echo "n=$n after it"
echo hi | read v; echo "v=${v:-unset}"
f() { echo "$1"; return 3; }; f x | f y; echo "status $?"
echo 1 | { read a; echo $((a + 1)); } | { read a; echo $((a * 10)); } | { read a; echo "three builtins: $a"; }
countdown() { [ "$1" -gt 0 ] || return 0; echo "$1"; countdown $(($1 - 1)) | sed 's/^/ /'; }
countdown 3
set -o pipefail; false | true; echo "pipefail $?"; set +o pipefail; false | true; echo "no pipefail $?"
! true | false; echo "negated $?"
i=0; while [ $i -lt 20 ]; do echo $i; i=$((i + 1)); done | { s=0; while read -r k; do s=$((s + k)); done; echo "sum $s"; }
