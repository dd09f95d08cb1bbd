/* Threads: mutexes and condition variables under contention, TLS, join,
 * per-thread signals, robust mutexes, exit_group from a thread. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NTHREADS 8
#define NINCR 20000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long counter;
static __thread long tls_value;
static volatile pid_t handler_tid;

static void *incrementer(void *arg)
{
	tls_value = (long)(intptr_t)arg;
	for (int i = 0; i < NINCR; i++) {
		pthread_mutex_lock(&lock);
		counter++;
		pthread_mutex_unlock(&lock);
	}
	return (void *)(intptr_t)(tls_value * 10);
}

static int turn, rounds_done;
static void *ping(void *arg)
{
	int me = (int)(intptr_t)arg;
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&lock);
		while (turn != me)
			pthread_cond_wait(&cond, &lock);
		turn = !me;
		rounds_done++;
		pthread_cond_broadcast(&cond);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	handler_tid = (pid_t)syscall(SYS_gettid);
}

static volatile pid_t waiter_tid;
static volatile int waiter_go;
static void *waiter(void *arg)
{
	(void)arg;
	waiter_tid = (pid_t)syscall(SYS_gettid);
	while (!handler_tid)
		usleep(1000);
	return NULL;
}

static pthread_mutex_t robust;
static void *die_holding(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&robust);
	return NULL; /* exits without unlocking */
}

static void *exit_process(void *arg)
{
	(void)arg;
	usleep(10000);
	exit(7);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "exit-from-thread")) {
		pthread_t t;
		pthread_create(&t, NULL, exit_process, NULL);
		for (;;)
			pause();
	}
	printf("== mutex contention\n");
	pthread_t t[NTHREADS];
	for (long i = 0; i < NTHREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, incrementer, (void *)(intptr_t)(i + 1)), 0);
	long sum = 0;
	for (int i = 0; i < NTHREADS; i++) {
		void *ret;
		CHECK_EQ(pthread_join(t[i], &ret), 0);
		sum += (long)(intptr_t)ret;
	}
	CHECK_EQ(counter, NTHREADS * NINCR);
	CHECK_EQ(sum, 10 * NTHREADS * (NTHREADS + 1) / 2);
	CHECK_EQ(tls_value, 0);

	printf("== condition variable ping-pong\n");
	pthread_t a, b;
	CHECK_EQ(pthread_create(&a, NULL, ping, (void *)0), 0);
	CHECK_EQ(pthread_create(&b, NULL, ping, (void *)1), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	CHECK_EQ(rounds_done, 2000);

	printf("== many short threads\n");
	for (int i = 0; i < 100; i++) {
		pthread_t s;
		CHECK_EQ(pthread_create(&s, NULL, incrementer, (void *)1), 0);
		CHECK_EQ(pthread_join(s, NULL), 0);
	}

	printf("== a signal for one thread\n");
	signal(SIGUSR1, on_usr1);
	pthread_t w;
	CHECK_EQ(pthread_create(&w, NULL, waiter, NULL), 0);
	while (!waiter_tid)
		usleep(1000);
	CHECK_EQ(pthread_kill(w, SIGUSR1), 0);
	pthread_join(w, NULL);
	CHECK_EQ(handler_tid, waiter_tid);
	CHECK(syscall(SYS_gettid) != waiter_tid);

	printf("== robust mutex of a dead thread\n");
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&robust, &ma);
	pthread_t d;
	pthread_create(&d, NULL, die_holding, NULL);
	pthread_join(d, NULL);
	CHECK_EQ(pthread_mutex_lock(&robust), EOWNERDEAD);
	CHECK_EQ(pthread_mutex_consistent(&robust), 0);
	CHECK_EQ(pthread_mutex_unlock(&robust), 0);

	printf("== exit from a thread ends the process\n");
	fflush(stdout);
	return checks_done();
}
