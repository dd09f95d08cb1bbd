/* A process ends while its other threads run guest code, block in host
 * calls and fault, round after round, by each way a process ends:
 * exit_group, SIGKILL from its parent, a fatal signal it sends itself, and
 * another thread's execve. What the parent may count on once wait()
 * reports it (kernel/exit.rs states the order that makes it so):
 *  - no page of the child's was freed while one of its threads could still
 *    touch it: the parent maps as much memory right after the wait (on a
 *    no-MMU nomu it gets the child's pages back) and finds it zero, and
 *    still zero after a moment, though the child's spinning threads wrote
 *    to theirs without pause;
 *  - its threads blocked in read() are gone: data the parent then writes
 *    to their pipe is all still there for the parent to read;
 *  - every page is free: under nomu (argument "nomu"; natively the host's
 *    /proc/meminfo moves with everything else on the machine) MemFree is
 *    back where it was before the child started, at the moment the wait
 *    returns. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 16
#define SPINNERS 4
#define BLOCKERS 4
#define FAULTERS 4
#define COPIERS 2
#define FILE_LEN (2 << 20)
#define MEM (16 << 20)
#define EXEC_STATUS 7

/* The descriptors the child gets, at fixed numbers. */
#define READY_FD 100
#define DATA_FD 101
#define GO_FD 102
#define FILE_FD 103

extern char **environ;

static char *mem;
static char *guard;
static volatile int started;
static __thread sigjmp_buf fault_jmp;
static __thread volatile unsigned long faults;
static char *self_path;

static void ready_one(void)
{
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
}

/* Writes its own megabyte of the mapping without pause. */
static void *spinner(void *arg)
{
	volatile char *p = mem + (long)arg * (1 << 20);
	ready_one();
	for (unsigned long i = 0;; i++)
		p[(i * 4096) % (1 << 20)] = (char)(i | 1);
	return NULL;
}

/* Reads a file into its own part of the mapping over and over (host
 * calls that write guest memory, which a kick does not cut short). */
static void *copier(void *arg)
{
	char *p = mem + (8 << 20) + (long)arg * FILE_LEN;
	ready_one();
	for (;;)
		if (pread(FILE_FD, p, FILE_LEN, 0) <= 0)
			return NULL;
	return NULL;
}

/* Blocks in read() into the mapping (a host call under nomu). */
static void *blocker(void *arg)
{
	char *p = mem + MEM - (long)arg * 65536 - 65536;
	ready_one();
	for (;;)
		if (read(DATA_FD, p, 65536) <= 0)
			return NULL;
	return NULL;
}

static void on_segv(int sig)
{
	(void)sig;
	faults++;
	siglongjmp(fault_jmp, 1);
}

/* Faults on the guard page over and over (each fault a trap and a
 * signal delivered). */
static void *faulter(void *arg)
{
	(void)arg;
	sigsetjmp(fault_jmp, 1);
	if (faults == 1)
		ready_one();
	(void)*(volatile char *)guard;
	return NULL;
}

static void *execer(void *arg)
{
	(void)arg;
	char *args[] = {self_path, "exec-done", NULL};
	execve(self_path, args, environ);
	_exit(3);
}

/* The child: starts its threads, says so, and ends as `how` says. */
static int child(const char *how)
{
	mem = mmap(NULL, MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || guard == MAP_FAILED)
		return 2;
	memset(mem, 0x5a, MEM);
	nomu_handle(SIGSEGV, on_segv, SA_NODEFER);
	pthread_t t;
	for (long i = 0; i < SPINNERS; i++)
		if (pthread_create(&t, NULL, spinner, (void *)i))
			return 2;
	for (long i = 0; i < BLOCKERS; i++)
		if (pthread_create(&t, NULL, blocker, (void *)i))
			return 2;
	for (long i = 0; i < FAULTERS; i++)
		if (pthread_create(&t, NULL, faulter, NULL))
			return 2;
	for (long i = 0; i < COPIERS; i++)
		if (pthread_create(&t, NULL, copier, (void *)i))
			return 2;
	while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < SPINNERS + BLOCKERS + FAULTERS + COPIERS)
		sched_yield();
	char c;
	if (write(READY_FD, "r", 1) != 1 || read(GO_FD, &c, 1) != 1)
		return 2;
	if (!strcmp(how, "exit"))
		_exit(0); /* exit_group */
	if (!strcmp(how, "signal"))
		kill(getpid(), SIGTERM); /* fatal: default action */
	if (!strcmp(how, "exec")) {
		if (pthread_create(&t, NULL, execer, NULL))
			return 2;
	}
	/* "kill" (the parent's SIGKILL), "signal" and "exec" end it here. */
	for (;;)
		pause();
}

static long mem_free_kb(void)
{
	static char buf[4096];
	int fd = open("/proc/meminfo", O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strstr(buf, "MemFree:");
	return p ? strtol(p + 8, NULL, 10) : -1;
}

static int all_zero(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i += 64)
		if (*(const unsigned long *)(p + i))
			return 0;
	return 1;
}

/* While a child ends: maps memory over and over (on nomu it may get pages
 * the child just freed), and finds it zero and then holding what it wrote
 * there, unless something of the child's still writes to its old pages. */
static volatile int checking;
static int spoiled;

#define PIECE (256 << 10)
#define PIECES 128

static void *checker(void *arg)
{
	(void)arg;
	static char *piece[PIECES];
	while (checking) {
		/* In pieces, so that it fills whatever holes the allocator has. */
		int n = 0;
		for (; n < PIECES; n++) {
			piece[n] = mmap(NULL, PIECE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (piece[n] == MAP_FAILED)
				break;
			if (!all_zero(piece[n], PIECE))
				spoiled++;
			memset(piece[n], 0x11, PIECE);
		}
		sched_yield();
		for (int i = 0; i < n; i++) {
			for (size_t o = 0; o < PIECE; o += 4096)
				if (piece[n - 1 - i][o] != 0x11) {
					spoiled++;
					break;
				}
			munmap(piece[n - 1 - i], PIECE);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	self_path = argv[0];
	if (argc > 1 && !strcmp(argv[1], "exec-done"))
		return EXEC_STATUS;
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	int under_nomu = argc > 1 && !strcmp(argv[1], "nomu");

	static const char *hows[] = {"exit", "kill", "signal", "exec"};
	int ended[4] = {0};
	printf("%d rounds of %d threads spinning, %d blocked in read, %d faulting, %d reading a file\n", ROUNDS,
	       SPINNERS, BLOCKERS, FAULTERS, COPIERS);
	fflush(stdout);
	/* The copiers' file: 2 MiB of 0x33. */
	char file[] = "/tmp/nomu-exit-threads-XXXXXX";
	int file_fd = mkstemp(file);
	CHECK(file_fd >= 0);
	static char chunk[65536];
	memset(chunk, 0x33, sizeof chunk);
	for (int i = 0; i < FILE_LEN / (int)sizeof chunk; i++)
		CHECK(write(file_fd, chunk, sizeof chunk) == sizeof chunk);
	unlink(file);
	for (int round = 0; round < ROUNDS; round++) {
		const char *how = hows[round % 4];
		/* The first half of the rounds looks at /proc/meminfo the moment
		 * the wait returns; the second has memory mapped meanwhile. */
		int check_meanwhile = round >= ROUNDS / 2;
		int ready[2], data[2], go[2];
		CHECK_OK(pipe2(ready, O_CLOEXEC));
		CHECK_OK(pipe2(data, O_CLOEXEC));
		CHECK_OK(pipe2(go, O_CLOEXEC));
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, ready[1], READY_FD);
		posix_spawn_file_actions_adddup2(&fa, data[0], DATA_FD);
		posix_spawn_file_actions_adddup2(&fa, go[0], GO_FD);
		posix_spawn_file_actions_adddup2(&fa, file_fd, FILE_FD);
		char *args[] = {argv[0], "child", (char *)how, NULL};
		pid_t pid;
		/* What the parent holds now stays so until the wait is done. */
		long before = mem_free_kb();
		CHECK(before > 0);
		CHECK(posix_spawn(&pid, argv[0], &fa, NULL, args, environ) == 0);
		close(ready[1]);
		close(go[0]);
		char c;
		CHECK(read(ready[0], &c, 1) == 1);
		pthread_t t;
		checking = check_meanwhile;
		if (check_meanwhile)
			CHECK(pthread_create(&t, NULL, checker, NULL) == 0);
		if (!strcmp(how, "kill"))
			CHECK_OK(kill(pid, SIGKILL));
		else
			CHECK(write(go[1], "g", 1) == 1);
		int status;
		CHECK(waitpid(pid, &status, 0) == pid);
		long after = mem_free_kb();
		if (check_meanwhile) {
			checking = 0;
			CHECK(pthread_join(t, NULL) == 0);
		}
		posix_spawn_file_actions_destroy(&fa);
		if (under_nomu && !check_meanwhile && after != before)
			CHECK(!"the child's memory is free when its parent's wait returns");

		if (!strcmp(how, "exit"))
			ended[0] += WIFEXITED(status) && WEXITSTATUS(status) == 0;
		else if (!strcmp(how, "kill"))
			ended[1] += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		else if (!strcmp(how, "signal"))
			ended[2] += WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
		else
			ended[3] += WIFEXITED(status) && WEXITSTATUS(status) == EXEC_STATUS;

		/* Nobody reads the pipe any more: what goes in stays. */
		static char out[4096], in[4096];
		memset(out, 'd', sizeof out);
		CHECK(write(data[1], out, sizeof out) == sizeof out);
		CHECK(read(data[0], in, sizeof in) == sizeof in && !memcmp(in, out, sizeof in));
		close(data[0]);
		close(data[1]);
		close(ready[0]);
		close(go[1]);

		/* The child's pages, as the next user gets them: zero, and left so. */
		char *p = mmap(NULL, MEM + 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(p != MAP_FAILED);
		if (p == MAP_FAILED)
			break;
		if (!all_zero(p, MEM + 65536))
			CHECK(!"memory mapped after the wait is zero");
		for (int i = 0; i < 20; i++)
			sched_yield();
		nomu_sleep_ms(2);
		if (!all_zero(p, MEM + 65536))
			CHECK(!"nothing of the child writes to memory after its wait");
		munmap(p, MEM + 65536);
	}
	CHECK_EQ(spoiled, 0);
	for (int i = 0; i < 4; i++)
		printf("ended by %s: %d\n", hows[i], ended[i]);
	return checks_done();
}
