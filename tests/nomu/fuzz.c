/* nomu's own syscall fuzzer: seeded random syscalls with hostile arguments
 * (bad and good pointers, paths that try to leave the root and reach
 * nomu's own nodes, odd sizes, all-ones), made by children of this program
 * in batches, each child killed if it is still running after a while (a
 * call may block, or undo the alarm). Only nomu's survival is judged here;
 * the test around it (tests/cli.rs) checks the root's surroundings and
 * the host's device nodes afterwards. Run only under nomu with --root: the
 * calls are real. Usage: fuzz SEED CALLS */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define BATCH 500

static uint64_t rng;

static uint64_t next(void)
{
	/* xorshift64*: the same calls for the same seed. */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1DULL;
}

/* Calls a batch never makes: ones that signal other processes (the fuzzer
 * itself is pid 1), make processes or replace the program. */
static int excluded(long nr)
{
	static const long no[] = {
		SYS_kill, SYS_tkill, SYS_tgkill, SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo,
		SYS_clone, SYS_fork, SYS_vfork, SYS_clone3, SYS_execve, SYS_execveat,
		424 /* pidfd_send_signal */,
	};
	for (unsigned i = 0; i < sizeof no / sizeof no[0]; i++)
		if (no[i] == nr)
			return 1;
	return 0;
}

static char scratch[8192];
static const char *const paths[] = {
	"/", "/..", "/../..", "..", ".", "/dir", "/dir/file", "/dir/..", "/dir/../..", "/link-up",
	"/link-up/..", "/dev/null", "/dev/zero", "/dev/urandom", "/dev/tty", "/dev/full", "/proc/self",
	"/proc/self/fd/0", "/proc/self/exe", "/proc/1/cwd", "/new", "/dir/new", "",
};

static long argument(void)
{
	switch (next() % 12) {
	case 0: return 0;
	case 1: return next() % 8; /* descriptors, small flags */
	case 2: return -1;
	case 3: return 0x7fffffff;
	case 4: return (long)0xffffffffUL;
	case 5: return (long)0x8000000000000000UL;
	case 6: return 0xdeadbeef000L;
	case 7: return (long)(scratch + next() % 4096); /* writable, maybe unaligned */
	case 8: return (long)paths[next() % (sizeof paths / sizeof paths[0])];
	case 9: return 4096L << (next() % 20);
	case 10: return (long)next();
	default: return (long)(next() % 0x1000);
	}
}

static void batch(uint64_t seed)
{
	rng = seed | 1;
	for (int i = 0; i < BATCH; i++) {
		long nr = next() % 460;
		if (excluded(nr))
			continue;
		long a[6];
		for (int k = 0; k < 6; k++)
			a[k] = argument();
		syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "batch")) {
		alarm(2);
		batch(strtoull(argv[2], NULL, 0));
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: fuzz SEED CALLS\n");
		return 2;
	}
	uint64_t seed = strtoull(argv[1], NULL, 0);
	long calls = atol(argv[2]), batches = (calls + BATCH - 1) / BATCH, signalled = 0;
	for (long b = 0; b < batches; b++) {
		char arg[32];
		snprintf(arg, sizeof arg, "%llu", (unsigned long long)(seed * 1000003 + b));
		char *args[] = {argv[0], "batch", arg, NULL};
		/* Its standard descriptors are /dev/null (nomu's own node, which
		 * the calls then also hit): random writes stay out of the report. */
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		for (int fd = 0; fd < 3; fd++)
			posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
		pid_t c;
		int failed = posix_spawn(&c, argv[0], &fa, NULL, args, environ);
		posix_spawn_file_actions_destroy(&fa);
		if (failed) {
			printf("spawn failed at batch %ld\n", b);
			return 1;
		}
		/* Five seconds at most: a batch may block or cancel its alarm. */
		int st = 0;
		for (int t = 0; waitpid(c, &st, WNOHANG) == 0; t++) {
			if (t == 500)
				kill(c, SIGKILL);
			struct timespec ms10 = {0, 10000000};
			nanosleep(&ms10, NULL);
		}
		if (WIFSIGNALED(st))
			signalled++;
		/* Reap whatever a batch may have left behind. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	printf("survived %ld batches of %d calls (seed %llu, %ld ended by a signal)\n", batches, BATCH,
	       (unsigned long long)seed, signalled);
	return 0;
}
