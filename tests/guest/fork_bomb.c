/* A fork bomb held by --mem (mem=64M in CASES): a process that touched
 * 4 MiB forks children that each write their copy and wait, until fork
 * fails. Under nomu --strict-fork each fork is charged its whole copy at
 * fork, so fork fails with ENOMEM (to the forking parent; nomu and the
 * host go on); natively copy-on-write lets all MAX_FORKS through. (Without
 * --strict-fork the copies are charged as they are made and the children
 * whose copy does not fit are killed: tests/cli.rs.) Either way every
 * child's copy and the parent's memory stay intact, every child is reaped,
 * and fork works again afterwards.
 *
 * argv[1]: "nomu" (fork must fail with ENOMEM before MAX_FORKS) or
 * "native" (all MAX_FORKS succeed). Nothing printed depends on which. */
#include "nomu_test.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define MIB (1024UL * 1024UL)
#define TOUCHED (4 * MIB)
#define MAX_FORKS 48

static int intact(const unsigned char *p, unsigned char v)
{
	for (size_t off = 0; off < TOUCHED; off += 4096)
		if (p[off] != v)
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	int under_nomu = argc > 1 && strcmp(argv[1], "nomu") == 0;
	unsigned char *mem = mmap(NULL, TOUCHED, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(mem != MAP_FAILED);
	memset(mem, 0xaa, TOUCHED);
	int gate[2];
	CHECK_OK(pipe(gate));
	fflush(stdout);

	pid_t kids[MAX_FORKS];
	int n = 0, err = 0;
	while (n < MAX_FORKS) {
		pid_t p = fork();
		if (p < 0) {
			err = errno;
			break;
		}
		if (p == 0) {
			close(gate[1]);
			if (!intact(mem, 0xaa))
				_exit(2);
			memset(mem, n + 1, TOUCHED);
			char c;
			while (read(gate[0], &c, 1) > 0)
				;
			_exit(intact(mem, (unsigned char)(n + 1)) ? 0 : 3);
		}
		kids[n++] = p;
	}
	if (under_nomu) {
		CHECK_EQ(err, ENOMEM);
		CHECK(n >= 1 && n < MAX_FORKS);
	} else {
		CHECK_EQ(err, 0);
		CHECK_EQ(n, MAX_FORKS);
	}
	printf("the fork bomb stopped\n");
	CHECK(intact(mem, 0xaa));
	close(gate[1]);
	int clean = 0;
	for (int i = 0; i < n; i++) {
		int st = 0;
		if (waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			clean++;
	}
	CHECK_EQ(clean, n);
	printf("every child kept its own copy and was reaped\n");

	pid_t p = fork();
	if (p == 0)
		_exit(intact(mem, 0xaa) ? 0 : 1);
	CHECK(p > 0);
	int st = 0;
	CHECK_EQ(waitpid(p, &st, 0), p);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("fork works again\n");
	return nomu_checks_done("fork_bomb");
}
