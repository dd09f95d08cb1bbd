# Pipelines, redirections and command substitution.
echo "one two three" | tr ' ' '\n' | sort -r | head -n 2
printf 'b\na\nc\na\n' | sort | uniq -c | sed 's/^ *//'
seq 1 100 | awk '{ s += $1 } END { print "sum", s }'
yes nomu | head -n 3
x=$(echo inner | tr a-z A-Z); echo "substituted: $x"
nested=$(echo $(echo deep) level); echo "$nested"
d=$(mktemp -d)
echo first > "$d/f"
echo second >> "$d/f"
wc -l < "$d/f"
cat "$d/f" 2>/dev/null | grep -c e
(cd "$d" && ls f no-such-file > out 2> err); echo "ls status $?"
cat "$d/out"; grep -c "No such file" "$d/err"
{ echo grouped; echo lines; } | wc -l
rm -r "$d"
