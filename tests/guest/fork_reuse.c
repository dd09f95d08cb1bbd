/* One forked child's memory is never another's: nomu runs the next
 * forked child in the host process of one whose guest is gone
 * (src/entry/split.rs, zygote::keep), which must show none of the old
 * guest's mappings. A child maps and fills memory, reports where and
 * exits; the next children find nothing there (SIGSEGV), and the parent's
 * own memory there, if any, is its own. Repeated, with children that
 * also exec, so that several host processes come back. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define LEN (64 * 1024)

static sigjmp_buf env;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

/* In a child: whether `at` reads as unmapped (1), or shows `tag` (2), or
 * something else (3). */
static int probe(volatile unsigned char *at, unsigned char tag)
{
	struct sigaction sa = {.sa_handler = on_segv, .sa_flags = SA_NODEFER};
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	if (sigsetjmp(env, 1))
		return 1;
	unsigned char v = at[0];
	return v == tag ? 2 : 3;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "exec"))
		return 0;
	for (int round = 0; round < 6; round++) {
		int p[2];
		CHECK_OK(pipe(p));
		unsigned char tag = 0xa0 + round;
		fflush(stdout);
		pid_t a = fork();
		if (a == 0) {
			unsigned char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				_exit(1);
			memset(m, tag, LEN);
			uintptr_t at = (uintptr_t)m;
			if (write(p[1], &at, sizeof at) != sizeof at)
				_exit(2);
			_exit(0);
		}
		CHECK(a > 0);
		uintptr_t at = 0;
		CHECK_EQ(read(p[0], &at, sizeof at), (ssize_t)sizeof at);
		int st;
		CHECK_EQ(waitpid(a, &st, 0), a);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		close(p[0]);
		close(p[1]);
		/* Whatever the parent has there is what the next child sees. */
		int want = 1;
		unsigned char mine = 0;
		if (msync((void *)(at & ~(uintptr_t)4095), 4096, MS_ASYNC) == 0) {
			want = 3; /* mapped in the parent: its own bytes, not the tag */
			mine = *(volatile unsigned char *)at;
			if (mine == tag)
				want = 2;
		}
		for (int i = 0; i < 2; i++) {
			fflush(stdout);
			pid_t b = fork();
			if (b == 0)
				_exit(probe((volatile unsigned char *)at, tag));
			CHECK(b > 0);
			CHECK_EQ(waitpid(b, &st, 0), b);
			CHECK(WIFEXITED(st));
			CHECK_EQ(WEXITSTATUS(st), want);
		}
		/* A child that execs gives its host process back too. */
		fflush(stdout);
		pid_t c = fork();
		if (c == 0) {
			char *args[] = {argv[0], "exec", NULL};
			execv(argv[0], args);
			_exit(127);
		}
		CHECK_EQ(waitpid(c, &st, 0), c);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	return checks_done();
}
