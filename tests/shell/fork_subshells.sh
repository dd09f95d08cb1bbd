# Subshells and command substitutions are forked children (ash): what they
# change (variables, functions, the directory, options, umask) stays theirs.
x=outer
f() { echo "f sees $x"; }
d0=$(pwd); m0=$(umask)
(x=inner; f; cd /; set -u; umask 077; unset -f f; type f >/dev/null 2>&1 || echo "f gone inside")
echo "x=$x"; f
[ "$(pwd)" = "$d0" ] && echo "directory kept"
[ "$(umask)" = "$m0" ] && echo "umask kept"
echo "${unset_var:-nounset not inherited}"
r=$(x=5; echo $((x + 1))); echo "r=$r x=$x"
count=0; for i in 1 2 3; do : $(count=$((count + 1))); done; echo "count=$count"
# A subshell that touches much memory: the parent's stays as it was.
big=$(i=0; s=; while [ $i -lt 3000 ]; do s="$s$i,"; i=$((i + 1)); done; echo ${#s})
echo "big=$big s=${s:-unset}"
echo $(echo $(echo $(($(echo 2) * 3))))
read self _ < /proc/self/stat; [ "$self" = "$$" ] && echo "the shell is \$\$"
(read sub _ < /proc/self/stat; [ "$sub" != "$$" ] && echo "a subshell is another process, \$\$ still the shell's")
(exit 3); echo "subshell status $?"
( (exit 4) ); echo "nested status $?"
v=$( (echo nested; exit 1) ); echo "v=$v status $?"
# A here-document longer than a pipe's buffer is written by a forked child.
i=0; doc=; while [ $i -lt 1000 ]; do doc="$doc line $i
"; i=$((i + 1)); done
wc -l <<END
$doc
END
(exec sh -c 'echo "exec in a subshell: $0"' from-sub); echo "the shell goes on"
eval '(e=1; echo "eval subshell $e")'; echo "e=${e:-unset}"
