/* A process's shared pending signals (Linux's signal->shared_pending): a
 * process-directed signal (kill, sigqueue, a timer's SIGEV_SIGNAL, SIGCHLD)
 * that every thread blocks waits for the process, and any thread takes it:
 * sigwait in a second thread, sigpending in a thread that was not picked,
 * a thread that unblocks it, a signalfd read by another thread; real-time
 * ones queue in order; SIG_IGN, SIGCONT and stop signals flush it; execve
 * keeps it. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static pid_t tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static sigset_t one(int sig)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	return s;
}

static int pending(int sig)
{
	sigset_t s;
	sigemptyset(&s);
	if (sigpending(&s) != 0)
		return -1;
	return sigismember(&s, sig);
}

/* Takes `sig` if pending, without waiting: 1 if it was. */
static int take(int sig)
{
	sigset_t s = one(sig);
	struct timespec zero = { 0, 0 };
	return sigtimedwait(&s, NULL, &zero) == sig;
}

static pthread_t start(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	if (pthread_create(&t, NULL, fn, arg) != 0) {
		printf("pthread_create failed\n");
		exit(2);
	}
	return t;
}

static void *join(pthread_t t)
{
	void *r;
	pthread_join(t, &r);
	return r;
}

/* 1. sigwait in the second thread, every thread blocking the signal (the
 * daemon pattern): it gets the process's signal, with the sender's
 * siginfo. */
static void *sigwait_thread(void *arg)
{
	sigset_t s = one(SIGUSR1);
	siginfo_t si;
	int sig = sigwaitinfo(&s, &si);
	CHECK_EQ(sig, SIGUSR1);
	CHECK_EQ(si.si_code, SI_USER);
	CHECK_EQ(si.si_pid, getpid());
	return NULL;
}

static void sigwait_in_second_thread(void)
{
	sigset_t s = one(SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	pthread_t t = start(sigwait_thread, NULL);
	nomu_sleep_ms(50); /* most likely in sigwait by now; either way works */
	CHECK_OK(kill(getpid(), SIGUSR1));
	join(t);
	CHECK_EQ(pending(SIGUSR1), 0);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

/* 2. sigpending: a blocked process-directed signal shows in every thread;
 * one sent to a thread only in that thread's. */
static void *pending_thread(void *arg)
{
	int *seen = arg;
	seen[0] = pending(seen[1]);
	return NULL;
}

static void sigpending_in_other_thread(void)
{
	sigset_t s = one(SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	int seen[2] = { 0, SIGUSR2 };
	CHECK_OK(kill(getpid(), SIGUSR2));
	join(start(pending_thread, seen));
	CHECK_EQ(seen[0], 1);
	CHECK_EQ(pending(SIGUSR2), 1);
	CHECK(take(SIGUSR2));
	join(start(pending_thread, seen));
	CHECK_EQ(seen[0], 0);
	/* Sent to this thread: another thread does not see it. */
	CHECK_OK(syscall(SYS_tgkill, getpid(), tid(), SIGUSR2));
	join(start(pending_thread, seen));
	CHECK_EQ(seen[0], 0);
	CHECK_EQ(pending(SIGUSR2), 1);
	CHECK(take(SIGUSR2));
	CHECK_EQ(pending(SIGUSR2), 0);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

/* 3. Blocked by every thread, then unblocked by the second: its handler
 * runs in the second thread, before pthread_sigmask returns. */
static volatile pid_t handler_tid;
static volatile int handled;

static void on_usr1(int sig)
{
	handler_tid = tid();
	handled++;
}

static void *unblock_thread(void *arg)
{
	pid_t *me = arg;
	*me = tid();
	CHECK_EQ(pending(SIGUSR1), 1);
	sigset_t s = one(SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	CHECK_EQ(handled, 1);
	CHECK(handler_tid == tid());
	return NULL;
}

static void unblocked_by_second_thread(void)
{
	nomu_handle(SIGUSR1, on_usr1, 0);
	sigset_t s = one(SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	handled = 0;
	CHECK_OK(kill(getpid(), SIGUSR1));
	CHECK_EQ(handled, 0);
	pid_t second = 0;
	join(start(unblock_thread, &second));
	CHECK_EQ(handled, 1);
	CHECK(handler_tid == second && second != tid());
	CHECK_EQ(pending(SIGUSR1), 0);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	CHECK_EQ(handled, 1);
	signal(SIGUSR1, SIG_DFL);
}

/* 4. A signalfd read by the second thread: poll sees the process's
 * signal, read takes it; a blocking read is woken by one sent later. */
static void *signalfd_thread(void *arg)
{
	int fd = *(int *)arg;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(p.revents, POLLIN);
	struct signalfd_siginfo si;
	CHECK_EQ(read(fd, &si, sizeof(si)), sizeof(si));
	CHECK_EQ(si.ssi_signo, SIGUSR1);
	CHECK_EQ(si.ssi_pid, getpid());
	CHECK_EQ(poll(&p, 1, 0), 0);
	return NULL;
}

static void *signalfd_blocking_thread(void *arg)
{
	int fd = *(int *)arg;
	int flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	struct signalfd_siginfo si;
	CHECK_EQ(read(fd, &si, sizeof(si)), sizeof(si));
	CHECK_EQ(si.ssi_signo, SIGUSR2);
	return NULL;
}

static void signalfd_in_second_thread(void)
{
	sigset_t s = one(SIGUSR1);
	sigaddset(&s, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	int fd = signalfd(-1, &s, SFD_NONBLOCK);
	CHECK(fd >= 0);
	CHECK_OK(kill(getpid(), SIGUSR1));
	join(start(signalfd_thread, &fd));
	CHECK_EQ(pending(SIGUSR1), 0);
	pthread_t t = start(signalfd_blocking_thread, &fd);
	nomu_sleep_ms(50);
	CHECK_OK(kill(getpid(), SIGUSR2));
	join(t);
	CHECK_EQ(pending(SIGUSR2), 0);
	close(fd);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

/* 5. sigqueue'd real-time signals wait for the process in order, lower
 * numbers first; a thread takes its own before the process's. */
static void *rt_thread(void *arg)
{
	int rt = SIGRTMIN + 1;
	sigset_t s = one(rt);
	sigaddset(&s, rt + 1);
	sigaddset(&s, rt + 2);
	siginfo_t si;
	/* Its own first, whatever the number. */
	CHECK_EQ(sigwaitinfo(&s, &si), rt + 2);
	CHECK_EQ(si.si_value.sival_int, 100);
	for (int v = 1; v <= 5; v++) {
		CHECK_EQ(sigwaitinfo(&s, &si), rt);
		CHECK_EQ(si.si_code, SI_QUEUE);
		CHECK_EQ(si.si_value.sival_int, v);
	}
	for (int v = 6; v <= 7; v++) {
		CHECK_EQ(sigwaitinfo(&s, &si), rt + 1);
		CHECK_EQ(si.si_value.sival_int, v);
	}
	struct timespec zero = { 0, 0 };
	CHECK_ERR(sigtimedwait(&s, &si, &zero), EAGAIN);
	return NULL;
}

static volatile int rt_go;
static volatile pid_t rt_tid;

static void *rt_thread_after_queueing(void *arg)
{
	rt_tid = tid();
	while (!rt_go)
		nomu_sleep_ms(1);
	return rt_thread(arg);
}

static void rt_signals_in_order(void)
{
	int rt = SIGRTMIN + 1;
	sigset_t s = one(rt);
	sigaddset(&s, rt + 1);
	sigaddset(&s, rt + 2);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	pthread_t t = start(rt_thread_after_queueing, NULL);
	union sigval v;
	v.sival_int = 6;
	CHECK_OK(sigqueue(getpid(), rt + 1, v));
	for (int i = 1; i <= 5; i++) {
		v.sival_int = i;
		CHECK_OK(sigqueue(getpid(), rt, v));
	}
	v.sival_int = 7;
	CHECK_OK(sigqueue(getpid(), rt + 1, v));
	CHECK_EQ(pending(rt), 1);
	/* One for the second thread itself. */
	while (!rt_tid)
		nomu_sleep_ms(1);
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	si.si_signo = rt + 2;
	si.si_code = SI_QUEUE;
	si.si_pid = getpid();
	si.si_uid = getuid();
	si.si_value.sival_int = 100;
	CHECK_OK(syscall(SYS_rt_tgsigqueueinfo, getpid(), rt_tid, rt + 2, &si));
	/* Not this thread's. */
	CHECK_EQ(pending(rt + 2), 0);
	rt_go = 1;
	join(t);
	CHECK_EQ(pending(rt), 0);
	CHECK_EQ(pending(rt + 1), 0);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

/* 6. A blocked process-directed SIGTERM, then SIG_IGN: flushed (from the
 * process's set, so from every thread's view). */
static void ignore_flushes(void)
{
	sigset_t s = one(SIGTERM);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	int seen[2] = { 0, SIGTERM };
	CHECK_OK(kill(getpid(), SIGTERM));
	CHECK_EQ(pending(SIGTERM), 1);
	join(start(pending_thread, seen));
	CHECK_EQ(seen[0], 1);
	signal(SIGTERM, SIG_IGN);
	CHECK_EQ(pending(SIGTERM), 0);
	join(start(pending_thread, seen));
	CHECK_EQ(seen[0], 0);
	signal(SIGTERM, SIG_DFL);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL); /* nothing left to kill us */
	CHECK_EQ(pending(SIGTERM), 0);
}

/* 7. Job control in the process's set: SIGCONT drops a pending stop
 * signal, a stop signal drops a pending SIGCONT. */
static void job_control_flushes(void)
{
	sigset_t s = one(SIGCONT);
	sigaddset(&s, SIGTSTP);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	CHECK_OK(kill(getpid(), SIGCONT));
	CHECK_EQ(pending(SIGCONT), 1);
	CHECK_OK(kill(getpid(), SIGTSTP));
	CHECK_EQ(pending(SIGCONT), 0);
	CHECK_EQ(pending(SIGTSTP), 1);
	CHECK_OK(kill(getpid(), SIGCONT));
	CHECK_EQ(pending(SIGTSTP), 0);
	CHECK_EQ(pending(SIGCONT), 1);
	CHECK(take(SIGCONT));
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

/* 8. SIGCHLD of a child that exits, every thread blocking it: the second
 * thread's sigwaitinfo gets it. */
static void *sigchld_thread(void *arg)
{
	sigset_t s = one(SIGCHLD);
	siginfo_t si;
	CHECK_EQ(sigwaitinfo(&s, &si), SIGCHLD);
	CHECK_EQ(si.si_code, CLD_EXITED);
	CHECK_EQ(si.si_status, 3);
	*(pid_t *)arg = si.si_pid;
	return NULL;
}

static void sigchld_to_second_thread(void)
{
	sigset_t s = one(SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	pid_t from = 0;
	pthread_t t = start(sigchld_thread, &from);
	pid_t child = vfork();
	if (child == 0)
		_exit(3);
	CHECK(child > 0);
	join(t);
	CHECK(from == child);
	int status;
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

/* 9. A timer's SIGEV_SIGNAL every thread blocks is queued once, and its
 * expirations meanwhile are overruns the taker sees. */
static void *timer_thread(void *arg)
{
	sigset_t s = one(SIGRTMIN + 4);
	siginfo_t si;
	CHECK_EQ(sigwaitinfo(&s, &si), SIGRTMIN + 4);
	CHECK_EQ(si.si_code, SI_TIMER);
	CHECK(si.si_overrun > 0);
	return NULL;
}

static void timer_signal_queued_once(void)
{
	sigset_t s = one(SIGRTMIN + 4);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	struct sigevent ev;
	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = SIGEV_SIGNAL;
	ev.sigev_signo = SIGRTMIN + 4;
	timer_t timer;
	CHECK_OK(timer_create(CLOCK_MONOTONIC, &ev, &timer));
	struct itimerspec its = { { 0, 1000000 }, { 0, 1000000 } };
	CHECK_OK(timer_settime(timer, 0, &its, NULL));
	nomu_sleep_ms(30);
	join(start(timer_thread, NULL));
	CHECK_OK(timer_delete(timer));
	take(SIGRTMIN + 4);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

/* 10. execve keeps the process's pending signals: sent while every thread
 * blocks it, then a second thread execs. */
static char *self;

static void *exec_thread(void *arg)
{
	execl(self, self, "after-exec", (char *)NULL);
	printf("execl failed\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "after-exec")) {
		CHECK_EQ(pending(SIGUSR1), 1);
		CHECK(take(SIGUSR1));
		CHECK_EQ(pending(SIGUSR1), 0);
		printf("after exec: pending kept\n");
		return checks_done();
	}
	sigwait_in_second_thread();
	sigpending_in_other_thread();
	unblocked_by_second_thread();
	signalfd_in_second_thread();
	rt_signals_in_order();
	ignore_flushes();
	job_control_flushes();
	sigchld_to_second_thread();
	timer_signal_queued_once();
	printf("shared_pending: %d checks, %d failed before exec\n", nomu_checks, nomu_failed);
	fflush(stdout);
	if (nomu_failed)
		return 1;
	self = argv[0];
	sigset_t s = one(SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	CHECK_OK(kill(getpid(), SIGUSR1));
	join(start(exec_thread, NULL));
	return 1;
}
