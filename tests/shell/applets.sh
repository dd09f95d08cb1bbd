# The everyday applets, on files in a scratch directory.
d=$(mktemp -d); cd "$d" || exit 1
mkdir -p a/b; echo hello > a/b/file; ln -s a/b/file link; cp a/b/file copy; mv copy moved
chmod 600 moved; ls -l moved | cut -c1-10
cat link; find . -type f | sort; find . -name 'f*' | sort
echo "k=v" | cut -d= -f2; echo "hello world" | sed 's/world/nomu/'
echo "3 4" | awk '{ print $1 * $2 }'; printf '%05d|%s\n' 42 str
test -d a && test -f moved && test -L link && echo "tests pass"
tar cf t.tar a && tar tf t.tar | sort
echo data | gzip | gunzip; echo abc | md5sum
seq 3 | xargs echo args:; env | grep -c '^PWD='
basename /x/y/z.txt .txt; dirname /x/y/z.txt; expr 6 \* 7
date -d @0 -u +%Y-%m-%d
head -c 5 /dev/zero | od -An -tx1 | tr -s ' '
rm -rf a link moved t.tar; ls | wc -l
cd /; rmdir "$d" && echo cleaned
