/* A signal sent to a thread that blocks it waits, pending, until the thread
 * lets it in, and then arrives at once: before the call that unblocked it
 * returns (sigprocmask, the sigreturn of a handler whose sa_mask held it,
 * sigsuspend). A wait for it (sigtimedwait) still ends, and a blocking read
 * it cannot interrupt is not interrupted (no EINTR, even without
 * SA_RESTART).
 *
 * Under nomu a thread that blocks the signal and runs (no wait) is not
 * kicked when it is sent, as Linux's complete_signal wakes no such thread:
 * each case checks that the signal is still taken where it must be. The
 * target spins in user code (no syscall) while the signal is sent. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>

static _Atomic int ready, go, target_tid;
static volatile int usr1_seen, usr1_in_usr2;
static volatile int usr2_running;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_seen++;
	if (usr2_running)
		usr1_in_usr2 = 1;
}

/* Tells the sender which thread to signal, and that it may. */
static void announce(void)
{
	target_tid = (int)syscall(SYS_gettid);
	atomic_store(&ready, 1);
}

/* Announces itself, then spins without a syscall until told to go on. */
static void wait_for_go(void)
{
	announce();
	while (!atomic_load(&go))
		__asm__ volatile("pause");
}

static void on_usr2(int sig)
{
	(void)sig;
	usr2_running = 1;
	wait_for_go();
	usr2_running = 0;
	/* Its sigreturn unblocks SIGUSR1 (sa_mask held it). */
}

static sigset_t only(int sig)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	return s;
}

/* Sends SIGUSR1 to the spinning target, gives it time to take it (it must
 * not: it blocks it), then lets it go on. */
static void send_while_spinning(void)
{
	while (!atomic_load(&ready))
		sched_yield();
	CHECK_OK(syscall(SYS_tgkill, getpid(), target_tid, SIGUSR1));
	nomu_sleep_ms(20);
	CHECK_EQ(usr1_seen, 0);
	atomic_store(&go, 1);
}

static void reset(void)
{
	atomic_store(&ready, 0);
	atomic_store(&go, 0);
	usr1_seen = usr1_in_usr2 = 0;
}

static int seen_after_unblock = -1, seen_after_raise = -1, suspend_errno = -1;

static void *unblock_by_sigprocmask(void *arg)
{
	(void)arg;
	sigset_t s = only(SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	wait_for_go();
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	seen_after_unblock = usr1_seen;
	return NULL;
}

static void *unblock_by_sigreturn(void *arg)
{
	(void)arg;
	syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR2);
	seen_after_raise = usr1_seen;
	return NULL;
}

static void *unblock_by_sigsuspend(void *arg)
{
	(void)arg;
	sigset_t s = only(SIGUSR1), open;
	pthread_sigmask(SIG_BLOCK, &s, &open);
	sigdelset(&open, SIGUSR1);
	wait_for_go();
	errno = 0;
	sigsuspend(&open);
	suspend_errno = errno;
	seen_after_unblock = usr1_seen;
	return NULL;
}

static long waited_sig = -1;

static void *wait_for_it(void *arg)
{
	(void)arg;
	sigset_t s = only(SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	announce();
	struct timespec t = {10, 0};
	waited_sig = sigtimedwait(&s, NULL, &t);
	return NULL;
}

static int pipe_fds[2];
static long read_result = -1;
static int read_errno;

static void *read_blocked(void *arg)
{
	(void)arg;
	sigset_t s = only(SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	announce();
	char c;
	errno = 0;
	read_result = read(pipe_fds[0], &c, 1);
	read_errno = errno;
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	seen_after_unblock = usr1_seen;
	return NULL;
}

static void run(void *(*fn)(void *), void (*send)(void))
{
	pthread_t t;
	reset();
	CHECK_EQ(pthread_create(&t, NULL, fn, NULL), 0);
	send();
	CHECK_EQ(pthread_join(t, NULL), 0);
}

static void send_and_write(void)
{
	while (!atomic_load(&ready))
		sched_yield();
	nomu_sleep_ms(20); /* in its read by now */
	CHECK_OK(syscall(SYS_tgkill, getpid(), target_tid, SIGUSR1));
	nomu_sleep_ms(20);
	CHECK_EQ(write(pipe_fds[1], "x", 1), 1);
}

static void send_to_waiter(void)
{
	while (!atomic_load(&ready))
		sched_yield();
	nomu_sleep_ms(20);
	CHECK_OK(syscall(SYS_tgkill, getpid(), target_tid, SIGUSR1));
}

int main(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	sa.sa_handler = on_usr2;
	sigaddset(&sa.sa_mask, SIGUSR1);
	CHECK_OK(sigaction(SIGUSR2, &sa, NULL));

	run(unblock_by_sigprocmask, send_while_spinning);
	CHECK_EQ(seen_after_unblock, 1);
	printf("sigprocmask: taken before it returned\n");

	run(unblock_by_sigreturn, send_while_spinning);
	CHECK_EQ(seen_after_raise, 1);
	CHECK_EQ(usr1_in_usr2, 0);
	printf("a handler's sigreturn: taken before the interrupted code went on\n");

	run(unblock_by_sigsuspend, send_while_spinning);
	CHECK_EQ(suspend_errno, EINTR);
	CHECK_EQ(seen_after_unblock, 1);
	printf("sigsuspend: returned EINTR at once\n");

	run(wait_for_it, send_to_waiter);
	CHECK_EQ(waited_sig, SIGUSR1);
	CHECK_EQ(usr1_seen, 0);
	printf("sigtimedwait: woken\n");

	CHECK_OK(pipe(pipe_fds));
	run(read_blocked, send_and_write);
	CHECK_EQ(read_result, 1);
	CHECK_EQ(read_errno, 0);
	CHECK_EQ(seen_after_unblock, 1);
	printf("a blocking read: not interrupted, the signal taken at the unblock\n");
	return checks_done();
}
