/* Scheduling calls: getpriority/setpriority (per thread, inherited),
 * sched_get/setscheduler, sched_get/setparam, sched_get_priority_max/min,
 * sched_get/setaffinity (a thread pinned to one CPU runs there, as getcpu
 * says; children and threads inherit the mask) and getcpu, with Linux's
 * errors and, when it starts as root, an unprivileged child's limits.
 * Prints section names and each child's check count only. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <time.h>

#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

#define RESET_ON_FORK 0x40000000

static const char *self;

static int run_self(const char *arg, const char *arg2)
{
	char *argv[] = { (char *)self, (char *)arg, (char *)arg2, NULL };
	pid_t pid;
	fflush(stdout);
	if (posix_spawn(&pid, self, NULL, NULL, argv, environ))
		return -1;
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The raw call: 20 - nice. */
static long raw_prio(int which, int who)
{
	return syscall(SYS_getpriority, which, who);
}

/* The raw call fills only the bytes it returns: the rest is zeroed. */
static long raw_getaffinity(int pid, unsigned len, cpu_set_t *set)
{
	CPU_ZERO(set);
	return syscall(SYS_sched_getaffinity, pid, len, set);
}

static int only_cpu(int cpu)
{
	cpu_set_t set;
	if (raw_getaffinity(0, sizeof(set), &set) <= 0)
		return 0;
	unsigned c, node;
	return CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set) && syscall(SYS_getcpu, &c, &node, NULL) == 0 &&
	       (int)c == cpu;
}

static void *nice_thread(void *arg)
{
	int *seen = arg;
	seen[0] = raw_prio(PRIO_PROCESS, 0);
	seen[1] = syscall(SYS_setpriority, PRIO_PROCESS, 0, 7);
	seen[2] = raw_prio(PRIO_PROCESS, 0);
	return NULL;
}

static void *cpu_thread(void *arg)
{
	*(int *)arg = only_cpu(*(int *)arg);
	return NULL;
}

static void priorities(void)
{
	printf("== nice values\n");
	/* A group of its own: PRIO_PGRP answers for every process in it. */
	if (getsid(0) != getpid() && setpgid(0, 0))
		printf("setpgid failed\n");
	int nice0 = 20 - raw_prio(PRIO_PROCESS, 0);
	CHECK_EQ(raw_prio(PRIO_PROCESS, getpid()), 20 - nice0);
	CHECK_EQ(raw_prio(PRIO_PGRP, 0), 20 - nice0);
	CHECK_ERR(syscall(SYS_getpriority, 3, 0), EINVAL);
	CHECK_ERR(syscall(SYS_getpriority, -1, 0), EINVAL);
	CHECK_ERR(syscall(SYS_getpriority, PRIO_PROCESS, 0x7ffffff0), ESRCH);
	CHECK_ERR(syscall(SYS_setpriority, PRIO_PROCESS, 0x7ffffff0, 0), ESRCH);
	CHECK_ERR(syscall(SYS_setpriority, 3, 0, 0), EINVAL);
	CHECK_ERR(syscall(SYS_getpriority, PRIO_USER, 54321), ESRCH);
	CHECK_OK(syscall(SYS_setpriority, PRIO_PROCESS, 0, nice0 + 3));
	CHECK_EQ(getpriority(PRIO_PROCESS, 0), nice0 + 3);
	/* Past 19 is 19. */
	CHECK_OK(syscall(SYS_setpriority, PRIO_PROCESS, 0, 100));
	CHECK_EQ(raw_prio(PRIO_PROCESS, 0), 1);
	CHECK_OK(syscall(SYS_setpriority, PRIO_PGRP, 0, nice0 + 3));
	CHECK_EQ(raw_prio(PRIO_PROCESS, 0), 17 - nice0);
	/* Each thread has its own; a new one starts with its creator's. */
	int seen[3];
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, nice_thread, seen), 0);
	pthread_join(t, NULL);
	CHECK_EQ(seen[0], 17 - nice0);
	CHECK_EQ(seen[1], 0);
	CHECK_EQ(seen[2], 13);
	CHECK_EQ(raw_prio(PRIO_PROCESS, 0), 17 - nice0);
	/* A child starts with it. */
	char want[16];
	snprintf(want, sizeof(want), "%d", nice0 + 3);
	CHECK_EQ(run_self("nice", want), 0);
	if (getuid() == 0) {
		CHECK_OK(syscall(SYS_setpriority, PRIO_PROCESS, 0, -100));
		CHECK_EQ(raw_prio(PRIO_PROCESS, 0), 40);
	}
	CHECK_OK(setpriority(PRIO_PROCESS, 0, nice0));
}

static void policies(void)
{
	printf("== policies\n");
	CHECK_EQ(sched_get_priority_max(SCHED_FIFO), 99);
	CHECK_EQ(sched_get_priority_min(SCHED_RR), 1);
	CHECK_EQ(sched_get_priority_max(SCHED_OTHER), 0);
	CHECK_EQ(sched_get_priority_min(SCHED_BATCH), 0);
	CHECK_EQ(sched_get_priority_max(SCHED_IDLE), 0);
	CHECK_EQ(syscall(SYS_sched_get_priority_max, 6), 0); /* SCHED_DEADLINE */
	CHECK_ERR(syscall(SYS_sched_get_priority_max, 4), EINVAL);
	CHECK_ERR(syscall(SYS_sched_get_priority_min, -1), EINVAL);
	CHECK_EQ(syscall(SYS_sched_get_priority_min, 7), 0); /* SCHED_EXT */
	CHECK_ERR(syscall(SYS_sched_get_priority_min, 8), EINVAL);

	struct sched_param p = { 0 };
	CHECK_EQ(syscall(SYS_sched_getscheduler, 0), SCHED_OTHER);
	CHECK_OK(syscall(SYS_sched_getparam, 0, &p));
	CHECK_EQ(p.sched_priority, 0);
	CHECK_ERR(syscall(SYS_sched_getscheduler, -1), EINVAL);
	CHECK_ERR(syscall(SYS_sched_getscheduler, 0x7ffffff0), ESRCH);
	CHECK_ERR(syscall(SYS_sched_getparam, 0, NULL), EINVAL);
	CHECK_ERR(syscall(SYS_sched_getparam, 0, (void *)8), EFAULT);
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0, SCHED_FIFO, &p), EINVAL);
	p.sched_priority = 1;
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &p), EINVAL);
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0, 4, &p), EINVAL);
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0, -1, &p), EINVAL);
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0, 6, &p), EINVAL);
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0, SCHED_RR, NULL), EINVAL);
	CHECK_ERR(syscall(SYS_sched_setscheduler, -1, SCHED_RR, &p), EINVAL);
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0, SCHED_RR, (void *)8), EFAULT);
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0x7ffffff0, SCHED_OTHER, &p), ESRCH);
	p.sched_priority = 100;
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0, SCHED_FIFO, &p), EINVAL);
	p.sched_priority = 0;
	CHECK_OK(syscall(SYS_sched_setscheduler, 0, SCHED_BATCH, &p));
	CHECK_EQ(syscall(SYS_sched_getscheduler, 0), SCHED_BATCH);
	p.sched_priority = 5;
	CHECK_ERR(syscall(SYS_sched_setparam, 0, &p), EINVAL);
	p.sched_priority = 0;
	CHECK_OK(syscall(SYS_sched_setscheduler, 0, SCHED_OTHER | RESET_ON_FORK, &p));
	CHECK_EQ(syscall(SYS_sched_getscheduler, 0), SCHED_OTHER | RESET_ON_FORK);
	CHECK_OK(syscall(SYS_sched_setparam, 0, &p)); /* keeps the flag */
	CHECK_EQ(syscall(SYS_sched_getscheduler, 0), SCHED_OTHER | RESET_ON_FORK);
	/* sched_rr_get_interval: a fair thread's slice (the host's, under a
	 * second), Linux's order of errors. */
	struct timespec ts = { -1, -1 };
	CHECK_OK(syscall(SYS_sched_rr_get_interval, 0, &ts));
	CHECK(ts.tv_sec == 0 && ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000);
	CHECK_OK(syscall(SYS_sched_rr_get_interval, syscall(SYS_gettid), &ts));
	CHECK_ERR(syscall(SYS_sched_rr_get_interval, -1, &ts), EINVAL);
	CHECK_ERR(syscall(SYS_sched_rr_get_interval, 0x7ffffff0, &ts), ESRCH);
	CHECK_ERR(syscall(SYS_sched_rr_get_interval, 0, (void *)8), EFAULT);
	if (getuid() == 0) {
		/* Root may drop the flag and take a real-time policy. */
		CHECK_OK(syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &p));
		CHECK_EQ(run_self("realtime", NULL), 0);
	}
}

/* As root in a child: real time, its inheritance, and what an
 * unprivileged user may not do. */
static int realtime(void)
{
	struct sched_param p = { .sched_priority = 10 };
	CHECK_OK(syscall(SYS_sched_setscheduler, 0, SCHED_FIFO | RESET_ON_FORK, &p));
	CHECK_EQ(syscall(SYS_sched_getscheduler, 0), SCHED_FIFO | RESET_ON_FORK);
	p.sched_priority = 20;
	CHECK_OK(syscall(SYS_sched_setparam, 0, &p));
	p.sched_priority = 0;
	CHECK_OK(syscall(SYS_sched_getparam, 0, &p));
	CHECK_EQ(p.sched_priority, 20);
	/* RESET_ON_FORK: the child is back to SCHED_OTHER. */
	CHECK_EQ(run_self("policy", "0"), 0);
	/* SCHED_FIFO has no round-robin interval; SCHED_RR's is 100 ms. */
	struct timespec ts = { -1, -1 };
	CHECK_OK(syscall(SYS_sched_rr_get_interval, 0, &ts));
	CHECK(ts.tv_sec == 0 && ts.tv_nsec == 0);
	p.sched_priority = 10;
	CHECK_OK(syscall(SYS_sched_setscheduler, 0, SCHED_RR, &p));
	CHECK_OK(syscall(SYS_sched_rr_get_interval, 0, &ts));
	CHECK(ts.tv_sec == 0 && ts.tv_nsec == 100000000);
	p.sched_priority = 0;
	CHECK_OK(syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &p));
	struct rlimit none = { 0, 0 };
	CHECK_OK(setrlimit(RLIMIT_RTPRIO, &none));
	CHECK_OK(setrlimit(RLIMIT_NICE, &none));
	CHECK_OK(setpriority(PRIO_PROCESS, 0, 5));
	CHECK_OK(setresuid(1000, 1000, 1000));
	p.sched_priority = 1;
	CHECK_ERR(syscall(SYS_sched_setscheduler, 0, SCHED_FIFO, &p), EPERM);
	CHECK_ERR(setpriority(PRIO_PROCESS, 0, 4), EACCES);
	CHECK_OK(setpriority(PRIO_PROCESS, 0, 6));
	/* Someone else's: its parent, root's. */
	CHECK_ERR(syscall(SYS_setpriority, PRIO_PROCESS, getppid(), 19), EPERM);
	cpu_set_t set;
	CHECK(raw_getaffinity(0, sizeof(set), &set) > 0);
	CHECK_ERR(sched_setaffinity(getppid(), sizeof(set), &set), EPERM);
	p.sched_priority = 0;
	CHECK_ERR(syscall(SYS_sched_setscheduler, getppid(), SCHED_BATCH, &p), EPERM);
	return checks_done();
}

static void affinity(void)
{
	printf("== CPU affinity\n");
	cpu_set_t all, set;
	long n = raw_getaffinity(0, sizeof(all), &all);
	CHECK(n >= 8 && n % 8 == 0);
	CHECK(CPU_COUNT(&all) >= 1);
	CHECK_EQ(raw_getaffinity(getpid(), sizeof(set), &set), n);
	CHECK(CPU_EQUAL(&all, &set));
	CHECK_ERR(raw_getaffinity(0, 4, &set), EINVAL);
	CHECK_ERR(raw_getaffinity(0, 0, &set), EINVAL);
	CHECK_ERR(raw_getaffinity(0x7ffffff0, sizeof(set), &set), ESRCH);
	CHECK_ERR(syscall(SYS_sched_getaffinity, 0, sizeof(set), (void *)8), EFAULT);
	CPU_ZERO(&set);
	CHECK_ERR(sched_setaffinity(0, sizeof(set), &set), EINVAL);
	CHECK_ERR(syscall(SYS_sched_setaffinity, 0, sizeof(set), (void *)8), EFAULT);
	CHECK_ERR(sched_setaffinity(0x7ffffff0, sizeof(all), &all), ESRCH);
	int last = -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all))
			last = c;
	/* Each CPU in turn: the thread runs there. */
	int ok = 1;
	for (int c = 0; c <= last; c++) {
		if (!CPU_ISSET(c, &all))
			continue;
		CPU_ZERO(&set);
		CPU_SET(c, &set);
		if (sched_setaffinity(0, sizeof(set), &set) || !only_cpu(c))
			ok = 0;
	}
	CHECK(ok);
	/* Pinned to its last CPU: threads and children start there. */
	int cpu = last;
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, cpu_thread, &cpu), 0);
	pthread_join(t, NULL);
	CHECK_EQ(cpu, 1);
	char want[16];
	snprintf(want, sizeof(want), "%d", last);
	CHECK_EQ(run_self("cpu", want), 0);
	CHECK(only_cpu(last));
	/* And it stays there through many syscalls (regression: the split
	 * path, which pins its two sides to one CPU, loosened them every
	 * 50 ms to all of nomu's CPUs, and getcpu left the guest's mask). */
	int stayed = 1;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		stayed &= only_cpu(last);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - t0.tv_sec) * 1000000000L + (now.tv_nsec - t0.tv_nsec) < 300000000L);
	CHECK(stayed);
	CHECK_OK(sched_setaffinity(0, sizeof(all), &all));
	CHECK_EQ(raw_getaffinity(0, sizeof(set), &set), n);
	CHECK(CPU_EQUAL(&all, &set));
	unsigned c, node;
	CHECK_OK(syscall(SYS_getcpu, &c, &node, NULL));
	CHECK(CPU_ISSET(c, &all));
	CHECK_OK(syscall(SYS_getcpu, NULL, NULL, NULL));
	CHECK_ERR(syscall(SYS_getcpu, (void *)8, NULL, NULL), EFAULT);
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc > 2 && !strcmp(argv[1], "nice"))
		return raw_prio(PRIO_PROCESS, 0) == 20 - atoi(argv[2]) ? 0 : 1;
	if (argc > 2 && !strcmp(argv[1], "policy"))
		return syscall(SYS_sched_getscheduler, 0) == atoi(argv[2]) ? 0 : 1;
	if (argc > 2 && !strcmp(argv[1], "cpu"))
		return only_cpu(atoi(argv[2])) ? 0 : 1;
	if (argc > 1 && !strcmp(argv[1], "realtime"))
		return realtime();
	/* The number of CPUs, asked first thing (as nproc does): the host's
	 * mask when nomu started, not the one CPU its split path pins its
	 * threads to while a guest thread runs. */
	cpu_set_t first;
	CHECK(raw_getaffinity(0, sizeof(first), &first) > 0);
	printf("CPUs in the affinity mask: %d\n", CPU_COUNT(&first));
	priorities();
	policies();
	affinity();
	return checks_done();
}
