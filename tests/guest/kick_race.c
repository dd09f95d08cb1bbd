/* Signals sent to a thread while it is on its way back from a syscall.
 *
 * The target makes one syscall, then spins without any until its handler
 * has run; the sender sends each signal once the target is about to make
 * that syscall, after a delay that varies from signal to signal. So the
 * signals land all over the target's syscall, its way back into user code
 * and its spin; one that is noticed only at the next syscall is never
 * noticed at all, and the test fails on its deadline instead of hanging. Under nomu that is where a kernel-side
 * note of the kick, and the last instructions before guest code, must not
 * drop it. */
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

static volatile unsigned long handled;
static volatile int target_tid, stop, armed;

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
		syscall(SYS_getppid);
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
	 * hand-off to the spinning target can take a time slice. */
	double end = now() + 3;
	unsigned long sent = 0;
	int lost = 0, send_failed = 0;
	while (sent < SIGNALS && !lost && now() < end) {
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
