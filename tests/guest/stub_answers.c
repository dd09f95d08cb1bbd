/* getpid and gettid answer with the caller's own ids, whoever and wherever
 * it is, and leave every register as `syscall` does.
 *
 * Under nomu the zpoline and rewrite paths answer both in their entry stub,
 * from ids the kernel leaves in the thread's stub state at each trap. So
 * what must hold there: a thread's ids are its own (threads, a vfork child
 * that runs on its parent's host thread, a forked child); after a
 * non-leader thread's execve the survivor's tid is the pid (a stale tid
 * would show up at the new image's first gettid, from a site rewritten in
 * the first image); rcx is the address after the syscall, r11 the flags,
 * and the flags themselves come back as they went in (the stub compares and
 * tests before it knows whether it answers). getppid, which always goes
 * through the kernel, is checked the same way for comparison.
 *
 * Independent witnesses for the ids: /proc/self, the task's comm set with
 * PR_SET_NAME, and what fork/vfork returned to the parent. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define ROUNDS 1000
#define THREADS 4

static long raw0(long nr)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");
	return r;
}

/* Calls `nr` from one site ROUNDS times; -1 if the answers differ. */
static long same_answer(long nr)
{
	long first = raw0(nr);
	for (int i = 1; i < ROUNDS; i++)
		if (raw0(nr) != first)
			return -1;
	return first;
}

static long proc_self_pid(void)
{
	char buf[64];
	ssize_t n = readlink("/proc/self", buf, sizeof buf - 1);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return atol(buf);
}

/* Whether /proc/self/task/TID/comm says NAME. */
static int task_named(long tid, const char *name)
{
	char path[64], buf[32] = {0};
	snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	return n == (ssize_t)strlen(name) + 1 && !strncmp(buf, name, strlen(name)) && buf[n - 1] == '\n';
}

static int task_count(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ---- registers ------------------------------------------------------- */

struct regs_out {
	uint64_t rcx, r11, flags_after, after, rdx, rsi, rdi, r8, r9, r10;
};

/* One syscall with the flags set to `flags_in` and known values in the
 * argument registers. */
static void regs_across(long nr, uint64_t flags_in, struct regs_out *o)
{
	__asm__ volatile(
		"lea -128(%%rsp), %%rsp\n\t" /* off the red zone */
		"push %[fl]\n\t"
		"popfq\n\t"
		"mov $0x1111, %%edx\n\t"
		"mov $0x2222, %%esi\n\t"
		"mov $0x3333, %%edi\n\t"
		"mov $0x4444, %%r8d\n\t"
		"mov $0x5555, %%r9d\n\t"
		"mov $0x6666, %%r10d\n\t"
		"syscall\n"
		"1:\n\t"
		"pushfq\n\t"
		"pop %%rax\n\t"
		"mov %%rax, 16(%[o])\n\t"
		"mov %%rcx, 0(%[o])\n\t"
		"mov %%r11, 8(%[o])\n\t"
		"lea 1b(%%rip), %%rax\n\t"
		"mov %%rax, 24(%[o])\n\t"
		"mov %%rdx, 32(%[o])\n\t"
		"mov %%rsi, 40(%[o])\n\t"
		"mov %%rdi, 48(%[o])\n\t"
		"mov %%r8, 56(%[o])\n\t"
		"mov %%r9, 64(%[o])\n\t"
		"mov %%r10, 72(%[o])\n\t"
		"lea 128(%%rsp), %%rsp\n\t"
		"cld\n\t"
		: "+a"(nr)
		: [o] "b"(o), [fl] "r"(flags_in)
		: "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc");
}

static void test_registers(void)
{
	/* CF PF AF ZF SF OF and DF: every combination of the status flags
	 * (sahf gives back five of them, OF takes its own step), DF on and off. */
	static const uint64_t bits[] = {0x1, 0x4, 0x10, 0x40, 0x80, 0x800, 0x400};
	static const long nrs[] = {SYS_getpid, SYS_gettid, SYS_getppid};
	int bad = 0;
	for (unsigned n = 0; n < 3; n++) {
		for (unsigned m = 0; m < 128; m++) {
			uint64_t in = 0x202;
			for (unsigned b = 0; b < 7; b++)
				if (m & 1u << b)
					in |= bits[b];
			struct regs_out o;
			regs_across(nrs[n], in, &o);
			if (o.rcx != o.after || (o.r11 & 0xcd5) != (in & 0xcd5) || (o.flags_after & 0xcd5) != (in & 0xcd5) ||
			    o.rdx != 0x1111 || o.rsi != 0x2222 || o.rdi != 0x3333 || o.r8 != 0x4444 || o.r9 != 0x5555 ||
			    o.r10 != 0x6666) {
				if (bad++ < 4)
					NOMU_FAIL("nr %ld flags %#lx: rcx %s, r11 %#lx, flags after %#lx", nrs[n],
						  (unsigned long)in, o.rcx == o.after ? "ok" : "wrong",
						  (unsigned long)o.r11, (unsigned long)o.flags_after);
			}
		}
	}
	nomu_checks++;
	printf("registers across getpid, gettid, getppid: %s\n", bad ? "CHANGED" : "as syscall leaves them");
}

/* ---- threads ----------------------------------------------------------- */

static long thread_tid[THREADS], thread_pid[THREADS];
static int thread_named[THREADS];

static void *thread_main(void *arg)
{
	long i = (long)arg;
	char name[16];
	snprintf(name, sizeof name, "stub-t%ld", i);
	prctl(PR_SET_NAME, name);
	thread_tid[i] = same_answer(SYS_gettid);
	thread_pid[i] = same_answer(SYS_getpid);
	thread_named[i] = task_named(thread_tid[i], name);
	return NULL;
}

static void test_threads(long pid)
{
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, thread_main, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	for (int i = 0; i < THREADS; i++) {
		CHECK_EQ(thread_pid[i], pid);
		CHECK(thread_tid[i] > 0 && thread_tid[i] != pid);
		CHECK(thread_named[i]);
		for (int j = 0; j < i; j++)
			CHECK(thread_tid[i] != thread_tid[j]);
	}
	/* The main thread's own again, on the host thread it ran on before. */
	CHECK_EQ(same_answer(SYS_gettid), pid);
	printf("threads: own tids, the process's pid\n");
}

/* ---- vfork and fork ------------------------------------------------------ */

static volatile long vfork_pid, vfork_tid, vfork_ppid;

static void test_vfork_fork(long pid)
{
	/* Warm the sites in this process first. */
	CHECK_EQ(same_answer(SYS_getpid), pid);
	CHECK_EQ(same_answer(SYS_gettid), pid);
	pid_t child = vfork();
	if (child == 0) {
		vfork_pid = same_answer(SYS_getpid);
		vfork_tid = same_answer(SYS_gettid);
		vfork_ppid = raw0(SYS_getppid);
		_exit(0);
	}
	CHECK(child > 0);
	int status = -1;
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK_EQ(vfork_pid, child);
	CHECK_EQ(vfork_tid, child);
	CHECK_EQ(vfork_ppid, pid);
	/* The parent's ids again, after its child ran on its host thread. */
	CHECK_EQ(same_answer(SYS_getpid), pid);
	CHECK_EQ(same_answer(SYS_gettid), pid);

	int p[2];
	CHECK_OK(pipe(p));
	child = fork();
	if (child == 0) {
		long ids[3] = {same_answer(SYS_getpid), same_answer(SYS_gettid), raw0(SYS_getppid)};
		_exit(write(p[1], ids, sizeof ids) == sizeof ids ? 0 : 1);
	}
	CHECK(child > 0);
	long ids[3] = {0};
	CHECK_EQ(read(p[0], ids, sizeof ids), (long)sizeof ids);
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK_EQ(status, 0);
	CHECK_EQ(ids[0], child);
	CHECK_EQ(ids[1], child);
	CHECK_EQ(ids[2], pid);
	close(p[0]);
	close(p[1]);
	CHECK_EQ(same_answer(SYS_getpid), pid);
	printf("vfork and fork children: their own ids\n");
}

/* ---- execve from a thread that is not the leader ----------------------- */

static char *self_path;

static void *exec_thread(void *arg)
{
	(void)arg;
	/* This thread's tid in the stub state first. */
	long tid = same_answer(SYS_gettid);
	char pid[32], checks[32], failed[32];
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	snprintf(checks, sizeof checks, "%d", nomu_checks + (tid != getpid()));
	snprintf(failed, sizeof failed, "%d", nomu_failed + (tid == getpid()));
	execl(self_path, "stub_answers", "after-exec", pid, checks, failed, (char *)NULL);
	printf("FAIL: execl: %s\n", strerror(errno));
	exit(1);
}

static int after_exec(char **argv)
{
	nomu_checks = atoi(argv[3]);
	nomu_failed = atoi(argv[4]);
	long pid = atol(argv[2]);
	CHECK_EQ(same_answer(SYS_gettid), pid);
	CHECK_EQ(same_answer(SYS_getpid), pid);
	CHECK_EQ(proc_self_pid(), pid);
	CHECK_EQ(task_count(), 1);
	printf("after a thread's execve: tid = pid\n");
	return checks_done();
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "after-exec"))
		return after_exec(argv);
	long pid = proc_self_pid();
	CHECK(pid > 0);
	CHECK_EQ(same_answer(SYS_getpid), pid);
	CHECK_EQ(same_answer(SYS_gettid), pid);
	CHECK_EQ(same_answer(SYS_getppid), (long)getppid());
	test_registers();
	test_threads(pid);
	test_vfork_fork(pid);
	/* Last: the thread's execve replaces this image, which then reports. */
	self_path = argv[0];
	fflush(stdout);
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, exec_thread, NULL), 0);
	pthread_join(t, NULL);
	printf("FAIL: the execve did not replace the process\n");
	return 1;
}
