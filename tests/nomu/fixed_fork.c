/* A fixed-address (non-PIE) program that touched 40 MiB keeps four forked
 * children alive at once, as Linux's default overcommit lets it. Built
 * non-PIE (build/guest/exec/fixed_fork) and run by tests/cli.rs under
 * `--mem 128M`, as the first program and started by a shell: there its
 * range was taken by the shell's image and its libraries, so it ran in a
 * host process of its own, where a fork copies everything at once, and
 * the second fork was ENOMEM (regression: python3.11 started by a shell,
 * 20 threads each making a multiprocessing.Pool). */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (40 << 20)
#define CHILDREN 4

int main(void)
{
	char *m = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(m, 1, SIZE);
	int p[2];
	if (pipe(p) < 0)
		return 1;
	int forked = 0;
	for (int i = 0; i < CHILDREN; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			break;
		}
		if (pid == 0) {
			char c;
			close(p[1]);
			read(p[0], &c, 1); /* until the parent has made them all */
			_exit(m[i << 12] == 1 ? 0 : 1);
		}
		forked++;
	}
	close(p[1]);
	int ok = 0, status;
	while (wait(&status) > 0)
		ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	printf("forked %d, %d exited well\n", forked, ok);
	return forked == CHILDREN && ok == CHILDREN ? 0 : 1;
}
