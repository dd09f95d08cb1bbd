/* A process's CPU time is its own threads', all of them (regression: nomu
 * answered CLOCK_PROCESS_CPUTIME_ID with its own host process's time,
 * every guest's; getrusage(RUSAGE_SELF) and a zombie's rusage with one
 * thread's; a clock of pthread_getcpuclockid or clock_getcpuclockid went
 * to the host, which read the guest's ids as host ids: EINVAL).
 *
 * - two threads burn CPU; afterwards the process's CPU time (its clock,
 *   getrusage, times) is at least what each thread measured of its own;
 * - another thread's clock, read while it runs, shows what it has burnt,
 *   and a thread's own clock what its getrusage(RUSAGE_THREAD) counts;
 * - a child with two busy threads: the parent's clock does not move
 *   meanwhile, and wait4's rusage has all the child's time;
 * - clocks of no such thread or process are errors. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <sys/wait.h>

#define BURN_MS 120

/* Linux's CPU clock ids: (~id << 3) | per-thread (4) | which (2: run time). */
#define CPU_CLOCK(id, flags) ((clockid_t)((~(unsigned)(id) << 3) | (flags)))

static long long ns_of(struct timespec t)
{
	return t.tv_sec * 1000000000ll + t.tv_nsec;
}

static long long tv_ns(struct timeval t)
{
	return t.tv_sec * 1000000000ll + t.tv_usec * 1000ll;
}

static long long clock_ns(clockid_t c)
{
	struct timespec t = {0};
	if (clock_gettime(c, &t) != 0)
		return -1;
	return ns_of(t);
}

/* The calling thread's CPU time as getrusage(RUSAGE_THREAD) counts it. */
static long long own_thread_ns(void)
{
	struct rusage r;
	getrusage(RUSAGE_THREAD, &r);
	return tv_ns(r.ru_utime) + tv_ns(r.ru_stime);
}

/* Spins until this thread has used `ms` of CPU (or 5 s have passed). */
static long long burn(int ms)
{
	long long end = clock_ns(CLOCK_MONOTONIC) + 5000000000ll;
	volatile unsigned long x = 0;
	while (own_thread_ns() < ms * 1000000ll && clock_ns(CLOCK_MONOTONIC) < end)
		for (int i = 0; i < 100000; i++)
			x += i;
	return own_thread_ns();
}

static atomic_int burnt_half;
static atomic_int may_end;

static void *burner(void *arg)
{
	long long *used = arg;
	burn(BURN_MS / 2);
	atomic_store(&burnt_half, 1);
	*used = burn(BURN_MS);
	while (!atomic_load(&may_end))
		usleep(1000);
	return NULL;
}

static void *plain_burner(void *arg)
{
	*(long long *)arg = burn(BURN_MS);
	return NULL;
}

/* The child: burns in two threads, then writes its total to `out`. */
static int child(int out)
{
	long long other = 0;
	pthread_t t;
	if (pthread_create(&t, NULL, plain_burner, &other) != 0)
		return 1;
	long long mine = burn(BURN_MS);
	pthread_join(t, NULL);
	long long total = mine + other;
	return write(out, &total, sizeof total) == sizeof total ? 0 : 2;
}

int main(void)
{
	/* Threads of this process. */
	long long used = 0, used2 = 0;
	pthread_t t, t2;
	CHECK_EQ(pthread_create(&t, NULL, burner, &used), 0);
	CHECK_EQ(pthread_create(&t2, NULL, plain_burner, &used2), 0);
	clockid_t tc;
	CHECK_EQ(pthread_getcpuclockid(t, &tc), 0);
	while (!atomic_load(&burnt_half))
		usleep(1000);
	/* Its clock, read from here while it runs: what it had burnt. */
	long long seen = clock_ns(tc);
	CHECK(seen >= (BURN_MS / 2 - 2) * 1000000ll);
	atomic_store(&may_end, 1);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(pthread_join(t2, NULL), 0);
	long long mine = own_thread_ns();
	long long sum = used + used2 + mine - 2000000;
	/* The thread's own clock counts what its getrusage does. */
	long long burnt = burn(BURN_MS / 4);
	CHECK(clock_ns(CLOCK_THREAD_CPUTIME_ID) >= burnt - 2000000);
	CHECK(used >= BURN_MS * 1000000ll - 2000000);
	CHECK(clock_ns(CLOCK_PROCESS_CPUTIME_ID) >= sum);
	clockid_t pc;
	CHECK_EQ(clock_getcpuclockid(0, &pc), 0);
	CHECK(clock_ns(pc) >= sum);
	CHECK_EQ(clock_getcpuclockid(getpid(), &pc), 0);
	CHECK(clock_ns(pc) >= sum);
	struct rusage r;
	CHECK_OK(getrusage(RUSAGE_SELF, &r));
	CHECK(tv_ns(r.ru_utime) + tv_ns(r.ru_stime) >= sum);
	struct tms tms;
	CHECK(times(&tms) != (clock_t)-1);
	long hz = sysconf(_SC_CLK_TCK);
	/* Each field is truncated to a tick. */
	CHECK((long long)(tms.tms_utime + tms.tms_stime + 2) * (1000000000ll / hz) >= sum);

	/* A child's CPU time is not its parent's, and all of it is in wait4's
	 * rusage. */
	int p[2];
	CHECK_OK(pipe(p));
	long long before = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	pid_t c = fork();
	if (c == 0)
		_exit(child(p[1]));
	clockid_t cc;
	CHECK_EQ(clock_getcpuclockid(c, &cc), 0);
	int status = -1;
	CHECK_EQ(wait4(c, &status, 0, &r), c);
	CHECK_EQ(status, 0);
	long long child_total = 0;
	CHECK_EQ(read(p[0], &child_total, sizeof child_total), sizeof child_total);
	CHECK(child_total >= 2 * BURN_MS * 1000000ll - 4000000);
	CHECK(tv_ns(r.ru_utime) + tv_ns(r.ru_stime) >= child_total - 2000000);
	CHECK(clock_ns(CLOCK_PROCESS_CPUTIME_ID) - before < child_total / 2);
	CHECK_OK(getrusage(RUSAGE_CHILDREN, &r));
	CHECK(tv_ns(r.ru_utime) + tv_ns(r.ru_stime) >= child_total - 2000000);

	/* No such thread, no such process. */
	struct timespec ts;
	CHECK_ERR(clock_gettime(cc, &ts), EINVAL); /* the child is reaped */
	CHECK_ERR(clock_gettime(CPU_CLOCK(999999, 4 | 2), &ts), EINVAL);
	CHECK_ERR(clock_gettime(CPU_CLOCK(0, 3), &ts), EINVAL);
	CHECK_OK(clock_getres(CPU_CLOCK(0, 2), &ts));
	CHECK(ts.tv_sec == 0 && ts.tv_nsec == 1);
	return checks_done();
}
