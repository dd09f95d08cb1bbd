/* fork's copy of a large private mapping, whoever touches it first and
 * however: nomu copies such mappings on access (src/mm/space/cow.rs), so
 * each way the parent or the child can change or read a page before the
 * other has must leave each with its own contents.
 *
 * - the parent writes pages before the child reads them, the child writes
 *   pages the parent then reads;
 * - read() into the buffer (a host call writes it) in parent and child;
 * - the parent's munmap, mprotect and MADV_DONTNEED before the child reads;
 * - a child that forks before it touched anything (its child copies from it);
 * - read() into the buffer after the child has exited untouched;
 * - a parent that exits before its child touched anything (exec'd as
 *   "middle": a process of its own whose child outlives it).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PAGES 1024 /* 4 MiB */
#define PAGE 4096

static int failures;

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL: %s\n", what);
		failures++;
	}
}

static void fill(unsigned char *buf, int from, int to, int tag)
{
	for (int p = from; p < to; p++)
		memset(buf + (size_t)p * PAGE, (tag + p) & 0xff, PAGE);
}

/* Every byte of pages [from, to) is (tag + page) & 0xff. */
static int holds(const unsigned char *buf, int from, int to, int tag)
{
	for (int p = from; p < to; p++)
		for (int i = 0; i < PAGE; i += 509)
			if (buf[(size_t)p * PAGE + i] != ((tag + p) & 0xff))
				return 0;
	return 1;
}

static unsigned char *fresh(int tag)
{
	unsigned char *buf = mmap(NULL, (size_t)PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	fill(buf, 0, PAGES, tag);
	return buf;
}

static void go(int fd)
{
	char c = 1;
	if (write(fd, &c, 1) != 1)
		_exit(3);
}

static void await(int fd)
{
	char c;
	if (read(fd, &c, 1) != 1)
		_exit(3);
}

static int reap(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Both sides write, each before the other has read. */
static void writes_both_ways(void)
{
	unsigned char *buf = fresh(1);
	int to_child[2], to_parent[2];
	if (pipe(to_child) || pipe(to_parent))
		exit(2);
	pid_t pid = fork();
	if (pid == 0) {
		await(to_child[0]);
		int ok = holds(buf, 0, PAGES, 1);
		fill(buf, PAGES / 4, 3 * PAGES / 4, 3);
		ok &= holds(buf, 0, PAGES / 4, 1) && holds(buf, PAGES / 4, 3 * PAGES / 4, 3) && holds(buf, 3 * PAGES / 4, PAGES, 1);
		go(to_parent[1]);
		_exit(ok ? 0 : 1);
	}
	fill(buf, 0, PAGES / 2, 2); /* before the child has read anything */
	go(to_child[1]);
	await(to_parent[0]); /* the child has written its half */
	check(holds(buf, 0, PAGES / 2, 2) && holds(buf, PAGES / 2, PAGES, 1), "parent sees only its own writes");
	check(reap(pid) == 0, "child saw the pages as at fork, then its own writes");
	munmap(buf, (size_t)PAGES * PAGE);
	close(to_child[0]), close(to_child[1]), close(to_parent[0]), close(to_parent[1]);
}

/* read(2) into the buffer: the host call writes it, on either side. */
static void reads_into_it(void)
{
	unsigned char *buf = fresh(5);
	int p[2], q[2], to_child[2];
	if (pipe(p) || pipe(q) || pipe(to_child))
		exit(2);
	static unsigned char data[3 * PAGE];
	memset(data, 0xA5, sizeof data);
	pid_t pid = fork();
	if (pid == 0) {
		await(to_child[0]);
		int ok = holds(buf, 0, PAGES, 5);
		/* The child reads into pages 100..102 (not yet touched by it). */
		ok &= read(q[0], buf + 100 * PAGE, sizeof data) == (ssize_t)sizeof data;
		ok &= memcmp(buf + 100 * PAGE, data, sizeof data) == 0;
		ok &= holds(buf, 0, 100, 5) && holds(buf, 103, PAGES, 5);
		_exit(ok ? 0 : 1);
	}
	if (write(p[1], data, sizeof data) != (ssize_t)sizeof data)
		exit(2);
	check(read(p[0], buf + 10 * PAGE, sizeof data) == (ssize_t)sizeof data, "parent read() into a copied-on-access page");
	check(memcmp(buf + 10 * PAGE, data, sizeof data) == 0, "parent read() data");
	go(to_child[1]);
	if (write(q[1], data, sizeof data) != (ssize_t)sizeof data)
		exit(2);
	check(reap(pid) == 0, "child: parent's read() invisible, its own read() in place");
	check(holds(buf, 0, 10, 5) && holds(buf, 13, PAGES, 5), "parent: the rest untouched");
	munmap(buf, (size_t)PAGES * PAGE);
	close(p[0]), close(p[1]), close(q[0]), close(q[1]), close(to_child[0]), close(to_child[1]);
}

/* The parent unmaps, protects and discards pages before the child reads. */
static void parent_changes_mappings(void)
{
	unsigned char *buf = fresh(7);
	int to_child[2];
	if (pipe(to_child))
		exit(2);
	pid_t pid = fork();
	if (pid == 0) {
		await(to_child[0]);
		_exit(holds(buf, 0, PAGES, 7) ? 0 : 1);
	}
	munmap(buf + 600 * PAGE, 100 * PAGE);
	mprotect(buf + 200 * PAGE, 100 * PAGE, PROT_READ);
	madvise(buf + 400 * PAGE, 100 * PAGE, MADV_DONTNEED);
	check(buf[400 * PAGE] == 0, "MADV_DONTNEED zeroes the parent's page");
	mprotect(buf + 200 * PAGE, 100 * PAGE, PROT_READ | PROT_WRITE);
	fill(buf, 200, 300, 9);
	go(to_child[1]);
	check(reap(pid) == 0, "child sees the pages as at fork");
	check(holds(buf, 200, 300, 9) && holds(buf, 0, 200, 7), "parent sees its own");
	munmap(buf, 600 * PAGE);
	munmap(buf + 700 * PAGE, (PAGES - 700) * (size_t)PAGE);
	close(to_child[0]), close(to_child[1]);
}

/* A child forks before it touched anything: its child copies from it. */
static void child_forks_again(void)
{
	unsigned char *buf = fresh(11);
	pid_t pid = fork();
	if (pid == 0) {
		pid_t g = fork();
		if (g == 0)
			_exit(holds(buf, 0, PAGES, 11) ? 0 : 1);
		fill(buf, 0, 10, 12);
		_exit(reap(g) == 0 && holds(buf, 0, 10, 12) && holds(buf, 10, PAGES, 11) ? 0 : 1);
	}
	fill(buf, 0, PAGES, 13);
	check(reap(pid) == 0, "a grandchild sees the pages as at the first fork");
	munmap(buf, (size_t)PAGES * PAGE);
}

/* The child exits before the parent writes anything: read() into
 * several parts of the buffer afterwards (a host call writes them) works.
 * Regression: once the first one had found the child gone, the others
 * were still write-protected for its sake and read() gave EFAULT. */
static void child_gone_first(void)
{
	unsigned char *buf = fresh(31);
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	check(reap(pid) == 0, "the child exits");
	int p[2];
	if (pipe(p))
		exit(2);
	for (int page = 0; page < PAGES; page += 100) {
		unsigned char byte = (unsigned char)page;
		if (write(p[1], &byte, 1) != 1)
			exit(2);
		check(read(p[0], buf + (size_t)page * PAGE, 1) == 1, "read() into the buffer after the child is gone");
		check(buf[(size_t)page * PAGE] == byte, "read() data");
	}
	check(holds(buf, 1, 100, 31), "the rest untouched");
	munmap(buf, (size_t)PAGES * PAGE);
	close(p[0]), close(p[1]);
}

/* exec'd as "middle": forks, writes, and exits before its child reads. */
static int middle(int result_fd)
{
	unsigned char *buf = fresh(21);
	int to_child[2];
	if (pipe(to_child))
		return 2;
	pid_t pid = fork();
	if (pid == 0) {
		close(to_child[1]);
		await(to_child[0]); /* the parent has written its pages */
		char c;
		if (read(to_child[0], &c, 1) != 0) /* EOF: the parent has exited */
			_exit(3);
		char r = holds(buf, 0, PAGES, 21) ? 'y' : 'n';
		if (write(result_fd, &r, 1) != 1)
			_exit(3);
		_exit(0);
	}
	fill(buf, 0, PAGES, 22);
	go(to_child[1]);
	return 0; /* exit: the child has not read yet, or is reading */
}

static void parent_exits_first(const char *self)
{
	int res[2];
	if (pipe(res))
		exit(2);
	char fd[16];
	snprintf(fd, sizeof fd, "%d", res[1]);
	pid_t pid = vfork();
	if (pid == 0) {
		execl(self, self, "middle", fd, (char *)NULL);
		_exit(127);
	}
	close(res[1]);
	check(reap(pid) == 0, "the middle process exits");
	char r = 0;
	check(read(res[0], &r, 1) == 1 && r == 'y', "an orphan sees its dead parent's pages as at fork");
	close(res[0]);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "middle"))
		return middle(atoi(argv[2]));
	for (int round = 0; round < 3; round++) {
		writes_both_ways();
		reads_into_it();
		parent_changes_mappings();
		child_forks_again();
		child_gone_first();
		parent_exits_first(argv[0]);
	}
	printf("fork_cow: %s\n", failures ? "FAILED" : "ok");
	return failures != 0;
}
