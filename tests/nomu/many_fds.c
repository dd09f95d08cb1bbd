/* Two processes at once, each holding ~2000 descriptors after raising its
 * soft RLIMIT_NOFILE to the hard limit, as a server or a test suite does.
 * tests/cli.rs runs it natively and under nomu with the soft limit lowered
 * to 256 first (Debian's is 1024): every guest's descriptors are host
 * descriptors of nomu's one process, and nomu kept the soft limit it was
 * started with, so all guests together got EMFILE after ~250 however high
 * each had set its own (regression: CPython's test_selectors, and a
 * second python started beside one that held ~1000 sockets died at
 * startup of EMFILE).
 *
 *   many_fds          the parent: opens its share, spawns the child,
 *                     checks both held theirs at once
 *   many_fds child    opens its share while the parent holds its own
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define EACH 2000

static int fds[EACH];

/* Opens `want` descriptors of `path` (a regular file: a host descriptor
 * under nomu) into fds[] and returns how many it got. */
static int open_many(const char *path, int want)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) != 0) {
		perror("getrlimit");
		return -1;
	}
	r.rlim_cur = r.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &r) != 0) {
		perror("setrlimit");
		return -1;
	}
	if (r.rlim_max < (rlim_t)want + 64) {
		fprintf(stderr, "hard RLIMIT_NOFILE %llu is too low for this test\n",
			(unsigned long long)r.rlim_max);
		return -1;
	}
	for (int i = 0; i < want; i++) {
		if ((fds[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			fprintf(stderr, "open number %d: %s\n", i + 1, strerror(errno));
			return i;
		}
	}
	return want;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return open_many(argv[0], EACH) == EACH ? 0 : 1;
	int got = open_many(argv[0], EACH);
	if (got != EACH) {
		printf("parent opened %d of %d\n", got, EACH);
		return 1;
	}
	char *args[] = {argv[0], "child", NULL};
	pid_t pid;
	int err = posix_spawn(&pid, argv[0], NULL, NULL, args, environ);
	if (err) {
		printf("posix_spawn: %s\n", strerror(err));
		return 1;
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("the child could not open its %d beside the parent's\n", EACH);
		return 1;
	}
	/* And the parent's are all still there. */
	for (int i = 0; i < EACH; i++) {
		if (fcntl(fds[i], F_GETFD) != FD_CLOEXEC) {
			printf("descriptor %d is gone\n", fds[i]);
			return 1;
		}
	}
	printf("two processes held %d descriptors each\n", EACH);
	return 0;
}
