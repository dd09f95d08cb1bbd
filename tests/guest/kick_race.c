/* Signals sent to a thread while it is on its way back from a syscall.
 *
 * The target makes a burst of syscalls, then spins without any until its
 * handler has run; the sender sends each signal once the target is about to
 * make the burst, after a delay that varies from signal to signal. So the
 * signals land all over the target's syscalls, their ways back into user
 * code and its spin; one that is noticed only at the next syscall is never
 * noticed at all, and the test fails on its deadline instead of hanging. Under nomu that is where a kernel-side
 * note of the kick, and the last instructions before guest code, must not
 * drop it. The syscall is getppid, then getpid, then gettid: the zpoline and
 * rewrite paths answer the last two in their entry stub, without the kernel,
 * and must not drop a kick there either. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SIGNALS 60000
#define BURST 64

static volatile unsigned long handled;
static volatile int target_tid, stop, armed;
static volatile long target_nr = SYS_getppid;

static void on_usr1(int sig)
{
	(void)sig;
	handled++;
}

static void *target(void *arg)
{
	(void)arg;
	target_tid = (int)syscall(SYS_gettid);
	while (!stop) {
		unsigned long seen = handled;
		armed = 1;
		/* A burst: signals land in one of its syscalls or after it. */
		for (int k = 0; k < BURST; k++)
			syscall(target_nr);
		/* Spin, with no syscall, until the signal is handled. */
		while (handled == seen && !stop)
			__asm__ volatile("pause");
		armed = 0;
	}
	return NULL;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The sender's waits spin, yielding now and then (true then) so that on a
 * loaded machine the target gets the CPU. */
static int relax(unsigned spins)
{
	if (spins % 64)
		__asm__ volatile("pause");
	else
		sched_yield();
	return spins % 64 == 0;
}

int main(void)
{
	signal(SIGUSR1, on_usr1);
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, target, NULL), 0);
	while (!target_tid)
		sched_yield();
	/* Up to SIGNALS, for at most 3 seconds: on a loaded machine each
	 * hand-off to the spinning target can take a time slice. A third of
	 * each (whichever third ends first) for every syscall the target makes. */
	static const long nrs[] = {SYS_getppid, SYS_getpid, SYS_gettid};
	double start = now(), end = start + 3;
	unsigned long sent = 0;
	int lost = 0, send_failed = 0;
	while (sent < SIGNALS && !lost && now() < end) {
		unsigned by_count = sent * 3 / SIGNALS, by_time = (unsigned)(now() - start);
		target_nr = nrs[by_count > by_time ? by_count : by_time > 2 ? 2 : by_time];
		/* Once the target is about to make its syscall, a delay that
		 * sweeps through the syscall and its way back. */
		for (unsigned spins = 1; !armed; spins++)
			relax(spins);
		for (volatile unsigned long d = (sent * 7919) % 3000; d; d--)
			;
		if (syscall(SYS_tgkill, getpid(), target_tid, SIGUSR1) < 0)
			send_failed++;
		sent++;
		double deadline = now() + 5;
		for (unsigned spins = 1; handled < sent && !lost; spins++)
			if (relax(spins) && now() > deadline)
				lost = 1;
	}
	CHECK_EQ(send_failed, 0);
	CHECK_EQ(lost, 0);
	CHECK_EQ(handled, sent);
	CHECK(sent >= 10);
	stop = 1;
	CHECK_EQ(pthread_join(t, NULL), 0);
	return checks_done();
}
