/* Many forked children of a big parent fit in --mem (mem=256M in CASES)
 * when each touches little of its copy: a parent that touched 48 MiB forks
 * 16 children, each reading a byte of every MiB and writing one. nomu
 * charges a child's copy as it is made, as Linux's default overcommit lets
 * COW pages be shared; charging every copy whole at fork (16 x 48 MiB)
 * refused the fifth fork. Every child sees the parent's bytes as they were
 * at fork and its own writes, and the parent never sees a child's; each
 * child's own forked child sees both (a child's copy-on-access mapping was
 * not copied to it once).
 *
 * With argv[1] == "oom" (tests/cli.rs, nomu --mem 64M only) the parent
 * touches 24 MiB and its children write their whole copy, one child at a
 * time: the first fits and waits; each of the next three does not, and is
 * killed (SIGKILL); the parent prints how many of each. */
#include "nomu_test.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define MIB (1024UL * 1024UL)
#define CHILDREN 16

static size_t touched = 48 * MIB;

static int check_pattern(const unsigned char *p, size_t step)
{
	for (size_t off = 0; off < touched; off += step)
		if (p[off] != (unsigned char)(off / MIB + 1))
			return 0;
	return 1;
}

static int child(unsigned char *mem, int ready, int gate, int id, int write_all)
{
	if (!check_pattern(mem, MIB))
		return 2;
	if (write_all)
		memset(mem, id, touched);
	else
		for (size_t off = 0; off < touched; off += MIB)
			mem[off + 1] = (unsigned char)id;
	if (!write_all && id == 1) {
		/* A grandchild's copy is its parent's, writes included (the
		 * first child's only: a fork copies all its copy first). */
		pid_t g = fork();
		if (g == 0) {
			for (size_t off = 0; off < touched; off += MIB)
				if (mem[off] != (unsigned char)(off / MIB + 1) || mem[off + 1] != id)
					_exit(1);
			_exit(0);
		}
		int st = -1;
		if (g < 0 || waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 5;
	}
	char c = 'r';
	if (write(ready, &c, 1) != 1)
		return 3;
	while (read(gate, &c, 1) > 0)
		;
	for (size_t off = 0; off < touched; off += MIB) {
		if (write_all ? mem[off] != id : (mem[off] != (unsigned char)(off / MIB + 1) || mem[off + 1] != id))
			return 4;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int oom = argc > 1 && strcmp(argv[1], "oom") == 0;
	if (oom)
		touched = 24 * MIB;
	unsigned char *mem = mmap(NULL, touched, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(mem != MAP_FAILED);
	for (size_t off = 0; off < touched; off += 4096)
		memset(mem + off, (int)(off / MIB + 1), 4096);
	int ready[2], gate[2];
	CHECK_OK(pipe(ready));
	CHECK_OK(pipe(gate));
	fflush(stdout);

	pid_t kids[CHILDREN];
	int n = 0;
	for (; n < (oom ? 4 : CHILDREN); n++) {
		pid_t p = fork();
		if (p < 0)
			break;
		if (p == 0) {
			close(ready[0]);
			close(gate[1]);
			_exit(child(mem, ready[1], gate[0], n + 1, oom));
		}
		kids[n] = p;
		if (oom) {
			/* The first waits with its copy; the others die making theirs. */
			char c;
			if (n == 0)
				CHECK_EQ(read(ready[0], &c, 1), 1);
			else
				CHECK_OK(waitid(P_PID, p, &(siginfo_t){0}, WEXITED | WNOWAIT));
		}
	}
	close(ready[1]);
	close(gate[0]);
	if (!oom) {
		CHECK_EQ(n, CHILDREN);
		printf("%d children forked\n", n);
		char c;
		int got = 0;
		while (got < n && read(ready[0], &c, 1) == 1)
			got++;
		CHECK_EQ(got, n);
		printf("every child read its copy and wrote to it\n");
	}
	CHECK(check_pattern(mem, 4096));
	for (size_t off = 0; off < touched; off += MIB)
		CHECK_EQ(mem[off + 1], (unsigned char)(off / MIB + 1));
	printf("the parent's memory is its own\n");
	close(gate[1]);
	int clean = 0, killed = 0;
	for (int i = 0; i < n; i++) {
		int st = 0;
		CHECK_EQ(waitpid(kids[i], &st, 0), kids[i]);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			clean++;
		else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			killed++;
	}
	if (oom) {
		printf("forked %d: %d exited, %d killed\n", n, clean, killed);
		CHECK_EQ(clean + killed, n);
	} else {
		CHECK_EQ(clean, n);
		printf("every child kept its own copy and was reaped\n");
	}
	return checks_done();
}
