/* Waiting as Linux does it: a futex wait compares the word once and then
 * sleeps until a wake, a signal or its timeout (a word changed without a
 * wake is no reason to return); the last thread of a process releases its
 * robust locks and clears its clear_child_tid word; waitid without WEXITED
 * neither reports nor reaps an exited child; every blocking call a signal
 * from another thread ends (sigsuspend, pause, sigtimedwait, futex, wait4)
 * returns when it comes, and a process
 * whose threads all wait in pause() ends at once on exit_group; select,
 * pselect6 and ppoll write back the time left. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/select.h>
#include <stddef.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* From linux/futex.h (musl's headers do not carry it). */
#define FUTEX_WAIT_PRIVATE 128
#define FUTEX_WAKE_PRIVATE 129

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

static uint32_t word;

static void *change_without_wake(void *arg)
{
	struct timespec t = {0, 30000000};
	nanosleep(&t, NULL);
	__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
	return arg;
}

static void futex_compares_once(void)
{
	printf("== futex: one comparison, then only a wake, a signal or the timeout\n");
	word = 0;
	pthread_t th;
	CHECK_EQ(pthread_create(&th, NULL, change_without_wake, NULL), 0);
	struct timespec limit = {0, 300000000};
	/* Natively ETIMEDOUT after 300 ms; nomu used to compare again every
	 * 20 ms and return EAGAIN once the word had changed. */
	CHECK_ERR(futex(&word, FUTEX_WAIT_PRIVATE, 0, &limit), ETIMEDOUT);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_ERR(futex(&word, FUTEX_WAIT_PRIVATE, 0, &limit), EAGAIN);
}

static int spawn_self(const char *self, const char *mode, const char *arg)
{
	pid_t p;
	char *args[] = {(char *)self, (char *)mode, (char *)arg, NULL};
	return posix_spawn(&p, self, NULL, NULL, args, environ) ? -1 : p;
}

/* A robust list of one lock, kept by hand as libc keeps it. */
struct robust_head {
	void *list_next;
	long futex_offset;
	void *pending;
};
struct robust_lock {
	void *next;
	uint32_t word;
};
static struct robust_head head;
static struct robust_lock lock;
static volatile int32_t child_tid = -1;

/* A process of its own (CLONE_VM, no CLONE_THREAD) with one thread: it
 * takes the lock, registers it, and exits holding it. */
static int lock_and_exit(void *arg)
{
	lock.next = &head;
	head.list_next = &lock;
	head.futex_offset = offsetof(struct robust_lock, word);
	head.pending = NULL;
	syscall(SYS_set_robust_list, &head, sizeof head);
	lock.word = syscall(SYS_gettid);
	syscall(SYS_exit, 0);
	return 0;
}

static void robust_lock_of_a_dead_process(void)
{
	printf("== a process whose only thread dies holding a robust lock\n");
	size_t size = 64 * 1024;
	char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(stack != MAP_FAILED);
	int c = clone(lock_and_exit, stack + size, CLONE_VM | CLONE_CHILD_CLEARTID | SIGCHLD, NULL, NULL, NULL,
		      &child_tid);
	CHECK(c > 0);
	int st;
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* Its last thread's exit marked the lock owner-dead and cleared its
	 * clear_child_tid word (regression: nomu skipped both for the last
	 * thread of a process). */
	CHECK_EQ(lock.word, 0x40000000 /* FUTEX_OWNER_DIED */);
	CHECK_EQ(child_tid, 0);
	munmap(stack, size);
}

static void waitid_without_wexited(const char *self)
{
	printf("== waitid without WEXITED leaves an exited child alone\n");
	int c = spawn_self(self, "quick", NULL);
	CHECK(c > 0);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	CHECK_OK(waitid(P_PID, c, &si, WEXITED | WNOWAIT));
	CHECK_EQ(si.si_pid, c);
	memset(&si, 0, sizeof si);
	/* A zombie is no child for it: ECHILD, as no other child matches. */
	CHECK_ERR(waitid(P_PID, c, &si, WSTOPPED | WCONTINUED | WNOHANG), ECHILD);
	int st;
	CHECK_EQ(waitpid(c, &st, 0), c); /* still there to reap */
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}

/* The wake-ups: a helper thread sends the signal (or wakes the futex)
 * once the main thread is about to wait; each wait must end with it. */
static volatile sig_atomic_t got;
static void on_usr1(int sig) { got = sig; }

enum how { BY_SIGNAL, BY_FUTEX_WAKE };
struct poke {
	pthread_t target;
	enum how how;
	volatile int done;
};

/* A signal is sent again every 30 ms until the waiter is done: one that
 * lands before the wait began (a loaded machine) must not hang the test. */
static void *poke(void *arg)
{
	struct poke *p = arg;
	struct timespec t = {0, 30000000};
	if (p->how == BY_FUTEX_WAKE) {
		nanosleep(&t, NULL);
		__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
		futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL);
		return NULL;
	}
	while (!p->done) {
		nanosleep(&t, NULL);
		if (!p->done)
			pthread_kill(p->target, SIGUSR1);
	}
	return NULL;
}

static pthread_t start_poke(struct poke *p, enum how how)
{
	pthread_t th;
	p->target = pthread_self();
	p->how = how;
	p->done = 0;
	got = 0;
	pthread_create(&th, NULL, poke, p);
	return th;
}

static void end_poke(struct poke *p, pthread_t th)
{
	p->done = 1;
	pthread_join(th, NULL);
}

static void wakeups(const char *self)
{
	printf("== a signal or a wake from another thread ends each wait\n");
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	struct poke p;
	pthread_t th;

	th = start_poke(&p, BY_SIGNAL);
	CHECK_ERR(pause(), EINTR);
	CHECK_EQ(got, SIGUSR1);
	end_poke(&p, th);

	CHECK_OK(sigprocmask(SIG_BLOCK, &usr1, &old));
	th = start_poke(&p, BY_SIGNAL);
	CHECK_ERR(sigsuspend(&old), EINTR);
	CHECK_EQ(got, SIGUSR1);
	end_poke(&p, th);

	th = start_poke(&p, BY_SIGNAL);
	struct timespec ten = {10, 0};
	CHECK_EQ(sigtimedwait(&usr1, NULL, &ten), SIGUSR1);
	end_poke(&p, th);
	/* Later pokes may be pending still: take them while blocked. */
	struct timespec zero = {0, 0};
	while (sigtimedwait(&usr1, NULL, &zero) == SIGUSR1)
		;
	CHECK_OK(sigprocmask(SIG_SETMASK, &old, NULL));

	word = 0;
	th = start_poke(&p, BY_FUTEX_WAKE);
	long r = 0;
	while (__atomic_load_n(&word, __ATOMIC_SEQ_CST) == 0 && (r = futex(&word, FUTEX_WAIT_PRIVATE, 0, &ten)) == 0)
		;
	CHECK(r == 0 || errno == EAGAIN);
	end_poke(&p, th);

	/* wait4 in the parent while its child sleeps: the signal ends it. */
	int c = spawn_self(self, "nap", NULL);
	th = start_poke(&p, BY_SIGNAL);
	CHECK_ERR(waitpid(c, NULL, 0), EINTR);
	end_poke(&p, th);
	CHECK_OK(kill(c, SIGKILL));
	int st;
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	/* A stopped child continuing on SIGCONT: tests/guest/jobctl.c. */
}

static void *pauser(void *arg)
{
	for (;;)
		pause();
	return arg;
}

/* Child: 32 threads in pause(), then exit_group from main. */
static int many_pausers(void)
{
	pthread_t th;
	for (int i = 0; i < 32; i++)
		if (pthread_create(&th, NULL, pauser, NULL))
			return 5;
	struct timespec t = {0, 20000000};
	nanosleep(&t, NULL);
	exit(6);
}

static void exit_with_paused_threads(const char *self)
{
	printf("== exit_group ends threads that wait in pause()\n");
	int c = spawn_self(self, "pausers", NULL);
	int st;
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 6);
}

/* select, pselect6 and ppoll write the time left back into the timeout
 * (poll_select_finish), but not a zero one; poll and epoll have no place. */
static void time_left_written_back(void)
{
	printf("== select, pselect6 and ppoll write back the time left\n");
	int p[2];
	CHECK_OK(pipe(p));
	CHECK_EQ(write(p[1], "x", 1), 1);
	struct pollfd pfd = {p[0], POLLIN, 0};
	struct timespec ts = {5, 0};
	CHECK_EQ(syscall(SYS_ppoll, &pfd, 1, &ts, NULL, 8), 1);
	CHECK(ts.tv_sec == 4 && ts.tv_nsec > 0);
	fd_set in;
	FD_ZERO(&in);
	FD_SET(p[0], &in);
	ts = (struct timespec){5, 0};
	CHECK_EQ(syscall(SYS_pselect6, p[0] + 1, &in, NULL, NULL, &ts, NULL), 1);
	CHECK(ts.tv_sec == 4 && ts.tv_nsec > 0);
	struct timeval tv = {5, 0};
	FD_SET(p[0], &in);
	CHECK_EQ(syscall(SYS_select, p[0] + 1, &in, NULL, NULL, &tv), 1);
	CHECK(tv.tv_sec == 4 && tv.tv_usec > 0);
	/* A zero timeout is left alone, as is everything on a timeout that
	 * expired (zero left: written back as zero). */
	CHECK_OK(close(p[1]));
	CHECK_EQ(read(p[0], &(char){0}, 1), 1);
	int q[2];
	CHECK_OK(pipe(q));
	pfd.fd = q[0];
	ts = (struct timespec){0, 0};
	CHECK_EQ(syscall(SYS_ppoll, &pfd, 1, &ts, NULL, 8), 0);
	CHECK(ts.tv_sec == 0 && ts.tv_nsec == 0);
	ts = (struct timespec){0, 1000};
	CHECK_EQ(syscall(SYS_ppoll, &pfd, 1, &ts, NULL, 8), 0);
	CHECK(ts.tv_sec == 0 && ts.tv_nsec == 0);
	/* A timeout in read-only memory: the call still succeeds. */
	struct timespec *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	ro->tv_sec = 0;
	ro->tv_nsec = 1000;
	CHECK_OK(mprotect(ro, 4096, PROT_READ));
	CHECK_EQ(syscall(SYS_ppoll, &pfd, 1, ro, NULL, 8), 0);
	CHECK(ro->tv_nsec == 1000);
	CHECK_OK(munmap(ro, 4096));
	close(p[0]);
	close(q[0]);
	close(q[1]);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "quick"))
		return 7;
	if (argc > 1 && !strcmp(argv[1], "nap")) {
		struct timespec t = {30, 0};
		while (nanosleep(&t, &t) && errno == EINTR)
			;
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "pausers"))
		return many_pausers();
	futex_compares_once();
	robust_lock_of_a_dead_process();
	waitid_without_wexited(argv[0]);
	wakeups(argv[0]);
	exit_with_paused_threads(argv[0]);
	time_left_written_back();
	return checks_done();
}
