/* Priority-inheritance futexes: the raw FUTEX_LOCK_PI, FUTEX_LOCK_PI2,
 * FUTEX_TRYLOCK_PI and FUTEX_UNLOCK_PI protocol and its errnos, a PI mutex
 * contended by several threads, and robust mutexes (PI and not) whose owner
 * thread exits holding them. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdint.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* <linux/futex.h> (musl-gcc has no kernel headers) */
#define FUTEX_LOCK_PI 6
#define FUTEX_UNLOCK_PI 7
#define FUTEX_TRYLOCK_PI 8
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_CMP_REQUEUE_PI 12
#define FUTEX_LOCK_PI2 13
#define FUTEX_CLOCK_REALTIME 256
#define FUTEX_WAITERS 0x80000000u
#define FUTEX_OWNER_DIED 0x40000000u
#define FUTEX_TID_MASK 0x3fffffffu

static long futex(volatile uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

static uint32_t tid(void)
{
	return (uint32_t)syscall(SYS_gettid);
}

static struct timespec in_ms(clockid_t clock, int ms)
{
	struct timespec t;
	clock_gettime(clock, &t);
	t.tv_nsec += ms * 1000000L;
	t.tv_sec += t.tv_nsec / 1000000000L;
	t.tv_nsec %= 1000000000L;
	return t;
}

/* A thread that takes `word` and holds it until `release` is set. */
static volatile uint32_t word;
static volatile int held, release, holder_tid;

static void *holder(void *arg)
{
	holder_tid = tid();
	if (futex(&word, FUTEX_LOCK_PI, 0, NULL) != 0)
		return (void *)1;
	held = 1;
	while (!release)
		nomu_sleep_ms(1);
	long r = futex(&word, FUTEX_UNLOCK_PI, 0, NULL);
	held = 0;
	return (void *)r;
}

static pthread_t start_holder(void)
{
	pthread_t t;
	held = release = 0;
	pthread_create(&t, NULL, holder, NULL);
	while (!held)
		nomu_sleep_ms(1);
	return t;
}

static void stop_holder(pthread_t t)
{
	void *r;
	release = 1;
	pthread_join(t, &r);
	CHECK_EQ((long)r, 0);
}

static volatile int handled;
static void on_usr1(int sig)
{
	handled++;
}

static pthread_t main_thread;

/* Signals the main thread while it waits, then lets the holder go. */
static void *poker(void *arg)
{
	nomu_sleep_ms(50);
	pthread_kill(main_thread, SIGUSR1);
	nomu_sleep_ms(50);
	release = 1;
	return NULL;
}

/* Waits for the lock behind the holder, then lets it go. */
static void *waiter(void *arg)
{
	if (futex(&word, FUTEX_LOCK_PI, 0, NULL) != 0)
		return (void *)1;
	return (void *)futex(&word, FUTEX_UNLOCK_PI, 0, NULL);
}

static void raw_protocol(void)
{
	uint32_t me = tid();

	/* A free word is taken by LOCK_PI itself: it holds the TID. */
	word = 0;
	CHECK_EQ(futex(&word, FUTEX_LOCK_PI, 0, NULL), 0);
	CHECK_EQ(word, me);
	CHECK_ERR(futex(&word, FUTEX_LOCK_PI, 0, NULL), EDEADLK);
	CHECK_ERR(futex(&word, FUTEX_TRYLOCK_PI, 0, NULL), EDEADLK);
	CHECK_EQ(futex(&word, FUTEX_UNLOCK_PI, 0, NULL), 0);
	CHECK_EQ(word, 0);
	/* Unlocking a lock not ours. */
	CHECK_ERR(futex(&word, FUTEX_UNLOCK_PI, 0, NULL), EPERM);
	word = FUTEX_WAITERS | 0x3ffffff0;
	CHECK_ERR(futex(&word, FUTEX_UNLOCK_PI, 0, NULL), EPERM);
	/* An owner that does not exist: ESRCH, with FUTEX_WAITERS set. */
	word = 0x3ffffff0;
	CHECK_ERR(futex(&word, FUTEX_LOCK_PI, 0, NULL), ESRCH);
	CHECK_EQ(word, FUTEX_WAITERS | 0x3ffffff0);
	CHECK_ERR(futex(&word, FUTEX_TRYLOCK_PI, 0, NULL), ESRCH);
	/* Only the bits: the lock is free, and FUTEX_OWNER_DIED stays. */
	word = FUTEX_WAITERS | FUTEX_OWNER_DIED;
	CHECK_EQ(futex(&word, FUTEX_TRYLOCK_PI, 0, NULL), 0);
	CHECK_EQ(word, FUTEX_OWNER_DIED | me);
	CHECK_EQ(futex(&word, FUTEX_UNLOCK_PI, 0, NULL), 0);
	CHECK_EQ(word, 0);
	/* Bad arguments. */
	CHECK_ERR(futex((volatile uint32_t *)((char *)&word + 1), FUTEX_LOCK_PI, 0, NULL), EINVAL);
	struct timespec bad = { 0, 2000000000L };
	CHECK_ERR(futex(&word, FUTEX_LOCK_PI, 0, &bad), EINVAL);
	CHECK_ERR(futex(&word, FUTEX_LOCK_PI | FUTEX_CLOCK_REALTIME, 0, NULL), ENOSYS);
	CHECK_ERR(futex((volatile uint32_t *)8, FUTEX_LOCK_PI, 0, NULL), EFAULT);

	/* Held by another thread. */
	pthread_t t = start_holder();
	CHECK_EQ(word, (uint32_t)holder_tid);
	CHECK_ERR(futex(&word, FUTEX_TRYLOCK_PI, 0, NULL), EAGAIN);
	CHECK_EQ(word, FUTEX_WAITERS | (uint32_t)holder_tid);
	CHECK_ERR(futex(&word, FUTEX_UNLOCK_PI, 0, NULL), EPERM);
	struct timespec rt = in_ms(CLOCK_REALTIME, 30);
	CHECK_ERR(futex(&word, FUTEX_LOCK_PI, 0, &rt), ETIMEDOUT);
	struct timespec mono = in_ms(CLOCK_MONOTONIC, 30);
	CHECK_ERR(futex(&word, FUTEX_LOCK_PI2, 0, &mono), ETIMEDOUT);
	rt = in_ms(CLOCK_REALTIME, 30);
	CHECK_ERR(futex(&word, FUTEX_LOCK_PI2 | FUTEX_CLOCK_REALTIME, 0, &rt), ETIMEDOUT);
	/* A timeout already past. */
	struct timespec past = { 1, 0 };
	CHECK_ERR(futex(&word, FUTEX_LOCK_PI, 0, &past), ETIMEDOUT);
	/* The holder's unlock hands the lock to this waiter: the word names
	 * it, with FUTEX_WAITERS. A signal meanwhile (a handler without
	 * SA_RESTART) does not end the wait: LOCK_PI starts again. */
	nomu_handle(SIGUSR1, on_usr1, 0);
	handled = 0;
	main_thread = pthread_self();
	pthread_t p;
	pthread_create(&p, NULL, poker, NULL);
	CHECK_EQ(futex(&word, FUTEX_LOCK_PI, 0, NULL), 0);
	CHECK_EQ(handled, 1);
	CHECK_EQ(word, FUTEX_WAITERS | me);
	pthread_join(p, NULL);
	void *r;
	pthread_join(t, &r);
	CHECK_EQ((long)r, 0);
	CHECK_EQ(futex(&word, FUTEX_UNLOCK_PI, 0, NULL), 0);
	CHECK_EQ(word, 0);

	/* A word whose owner does not match the waiters already queued. */
	t = start_holder();
	pthread_create(&p, NULL, waiter, NULL);
	nomu_sleep_ms(50);
	uint32_t saved = word;
	CHECK_EQ(saved, FUTEX_WAITERS | (uint32_t)holder_tid);
	word = FUTEX_WAITERS | me;
	CHECK_ERR(futex(&word, FUTEX_UNLOCK_PI, 0, NULL), EINVAL);
	word = FUTEX_WAITERS | 0x3ffffff0;
	CHECK_ERR(futex(&word, FUTEX_LOCK_PI, 0, NULL), EINVAL);
	word = saved;
	stop_holder(t);
	pthread_join(p, &r);
	CHECK_EQ((long)r, 0);
	CHECK_EQ(word, 0);
}

/* Requeueing from a plain futex to a PI futex (what a PI condition
 * variable does): FUTEX_WAIT_REQUEUE_PI and FUTEX_CMP_REQUEUE_PI. */
static volatile uint32_t cond, pi_lock, other_pi;
static volatile int requeue_owned;

static long requeue(volatile uint32_t *from, int nr_wake, int nr_requeue, volatile uint32_t *to, uint32_t cmp)
{
	return syscall(SYS_futex, from, FUTEX_CMP_REQUEUE_PI, nr_wake, (long)nr_requeue, to, cmp);
}

/* Waits on `cond` to be requeued to `pi_lock`; returns owning it. */
static void *cond_waiter(void *arg)
{
	long r = syscall(SYS_futex, &cond, FUTEX_WAIT_REQUEUE_PI, 0, NULL, &pi_lock, 0);
	if (r != 0 || (pi_lock & FUTEX_TID_MASK) != tid())
		return (void *)1;
	requeue_owned++;
	return (void *)futex(&pi_lock, FUTEX_UNLOCK_PI, 0, NULL);
}

static void requeue_pi(void)
{
	uint32_t me = tid();
	cond = 0;
	pi_lock = 0;
	/* Errors. */
	CHECK_ERR(requeue(&cond, 2, 0, &pi_lock, 0), EINVAL);
	CHECK_ERR(requeue(&cond, 1, -1, &pi_lock, 0), EINVAL);
	CHECK_ERR(requeue(&cond, 1, 0, &cond, 0), EINVAL);
	CHECK_ERR(requeue(&cond, 1, 0, &pi_lock, 5), EAGAIN);
	CHECK_EQ(requeue(&cond, 1, 0, &pi_lock, 0), 0);
	CHECK_ERR(syscall(SYS_futex, &cond, FUTEX_WAIT_REQUEUE_PI, 1, NULL, &pi_lock, 0), EAGAIN);
	CHECK_ERR(syscall(SYS_futex, &cond, FUTEX_WAIT_REQUEUE_PI, 0, NULL, &cond, 0), EINVAL);
	struct timespec t = in_ms(CLOCK_MONOTONIC, 20);
	CHECK_ERR(syscall(SYS_futex, &cond, FUTEX_WAIT_REQUEUE_PI, 0, &t, &pi_lock, 0), ETIMEDOUT);
	t = in_ms(CLOCK_REALTIME, 20);
	CHECK_ERR(syscall(SYS_futex, &cond, FUTEX_WAIT_REQUEUE_PI | FUTEX_CLOCK_REALTIME, 0, &t, &pi_lock, 0),
		  ETIMEDOUT);

	/* Three waiters; the lock is held: all three move to it, and each
	 * unlock hands it to the next. */
	pthread_t w[3];
	requeue_owned = 0;
	for (int i = 0; i < 3; i++)
		pthread_create(&w[i], NULL, cond_waiter, NULL);
	nomu_sleep_ms(50);
	CHECK_EQ(futex(&pi_lock, FUTEX_LOCK_PI, 0, NULL), 0);
	/* A waiter meant for another PI futex. */
	CHECK_ERR(requeue(&cond, 1, 3, &other_pi, 0), EINVAL);
	cond = 1;
	CHECK_EQ(requeue(&cond, 1, 3, &pi_lock, 1), 3);
	CHECK_EQ(pi_lock, FUTEX_WAITERS | me);
	CHECK_EQ(requeue_owned, 0);
	CHECK_EQ(futex(&pi_lock, FUTEX_UNLOCK_PI, 0, NULL), 0);
	int bad = 0;
	for (int i = 0; i < 3; i++) {
		void *r;
		pthread_join(w[i], &r);
		bad += r != NULL;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(requeue_owned, 3);
	CHECK_EQ(pi_lock, 0);

	/* The lock is free: the first waiter takes it at once, one more is
	 * moved, the third stays. */
	cond = 0;
	requeue_owned = 0;
	CHECK_EQ(futex(&pi_lock, FUTEX_LOCK_PI, 0, NULL), 0);
	for (int i = 0; i < 3; i++)
		pthread_create(&w[i], NULL, cond_waiter, NULL);
	nomu_sleep_ms(50);
	CHECK_EQ(futex(&pi_lock, FUTEX_UNLOCK_PI, 0, NULL), 0);
	cond = 1;
	CHECK_EQ(requeue(&cond, 1, 1, &pi_lock, 1), 2);
	nomu_sleep_ms(50);
	CHECK_EQ(requeue_owned, 2);
	CHECK_EQ(requeue(&cond, 1, 0, &pi_lock, 1), 1);
	for (int i = 0; i < 3; i++) {
		void *r;
		pthread_join(w[i], &r);
		bad += r != NULL;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(requeue_owned, 3);
	CHECK_EQ(pi_lock, 0);
}

/* A PI mutex several threads take turns at. */
static pthread_mutex_t pi_mutex;
static long counter;
#define ROUNDS 20000
#define WORKERS 4

static void *worker(void *arg)
{
	for (int i = 0; i < ROUNDS; i++) {
		if (pthread_mutex_lock(&pi_mutex))
			return (void *)1;
		long c = counter;
		if (i % 1000 == 0)
			sched_yield();
		counter = c + 1;
		if (pthread_mutex_unlock(&pi_mutex))
			return (void *)1;
	}
	return NULL;
}

static void contended_pi_mutex(void)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	CHECK_EQ(pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT), 0);
	CHECK_EQ(pthread_mutex_init(&pi_mutex, &a), 0);
	pthread_t t[WORKERS];
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	int bad = 0;
	for (int i = 0; i < WORKERS; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += r != NULL;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(counter, (long)ROUNDS * WORKERS);
	/* Locking a PI mutex one holds: EDEADLK for an error-checking one. */
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_t m;
	CHECK_EQ(pthread_mutex_init(&m, &a), 0);
	CHECK_EQ(pthread_mutex_lock(&m), 0);
	CHECK_EQ(pthread_mutex_lock(&m), EDEADLK);
	/* The library's answer, not the kernel's: musl EBUSY, glibc EDEADLK. */
	int r = pthread_mutex_trylock(&m);
	CHECK(r == EBUSY || r == EDEADLK);
	CHECK_EQ(pthread_mutex_unlock(&m), 0);
	CHECK_EQ(pthread_mutex_unlock(&m), EPERM);
}

/* Robust mutexes: the owner thread exits holding the mutex. */
static pthread_mutex_t robust;
static volatile int robust_held;

static void *lock_and_exit(void *arg)
{
	pthread_mutex_lock(&robust);
	robust_held = 1;
	if (arg)
		nomu_sleep_ms(100); /* the main thread waits for it meanwhile */
	return NULL;
}

static void robust_owner_dies(int protocol, int waiting)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	CHECK_EQ(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST), 0);
	CHECK_EQ(pthread_mutexattr_setprotocol(&a, protocol), 0);
	CHECK_EQ(pthread_mutex_init(&robust, &a), 0);
	robust_held = 0;
	pthread_t t;
	pthread_create(&t, NULL, lock_and_exit, waiting ? "wait" : NULL);
	if (waiting) {
		while (!robust_held)
			nomu_sleep_ms(1);
	} else {
		pthread_join(t, NULL);
	}
	/* Its death makes the next owner see EOWNERDEAD. */
	CHECK_EQ(pthread_mutex_lock(&robust), EOWNERDEAD);
	CHECK_EQ(pthread_mutex_consistent(&robust), 0);
	CHECK_EQ(pthread_mutex_unlock(&robust), 0);
	CHECK_EQ(pthread_mutex_lock(&robust), 0);
	CHECK_EQ(pthread_mutex_unlock(&robust), 0);
	if (waiting)
		pthread_join(t, NULL);
	/* Unlocked without pthread_mutex_consistent: unusable for good. */
	robust_held = 0;
	pthread_create(&t, NULL, lock_and_exit, NULL);
	pthread_join(t, NULL);
	CHECK_EQ(pthread_mutex_lock(&robust), EOWNERDEAD);
	CHECK_EQ(pthread_mutex_unlock(&robust), 0);
	CHECK_EQ(pthread_mutex_lock(&robust), ENOTRECOVERABLE);
	pthread_mutex_destroy(&robust);
}

/* After execve the robust list of the old program is gone. */
static void exec_forgets_robust_list(const char *self)
{
	/* An empty list (its head's next is itself), set by the child. */
	static void *list[3] = { list, 0, 0 };
	pid_t pid = vfork();
	if (pid == 0) {
		if (syscall(SYS_set_robust_list, list, sizeof list))
			_exit(126);
		char old[32];
		snprintf(old, sizeof(old), "%p", (void *)list);
		execl(self, self, "after-exec", old, (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "after-exec")) {
		void *head = (void *)1, *old = NULL;
		size_t len;
		sscanf(argv[2], "%p", &old);
		CHECK_OK(syscall(SYS_get_robust_list, 0, &head, &len));
#ifdef __GLIBC__
		/* glibc sets its own at start; the old program's is gone. */
		return head != NULL && head != old ? 0 : 1;
#else
		/* musl sets none until a robust mutex is used. */
		return head == NULL ? 0 : 1;
#endif
	}
	raw_protocol();
	requeue_pi();
	contended_pi_mutex();
	robust_owner_dies(PTHREAD_PRIO_NONE, 0);
	robust_owner_dies(PTHREAD_PRIO_NONE, 1);
	robust_owner_dies(PTHREAD_PRIO_INHERIT, 0);
	robust_owner_dies(PTHREAD_PRIO_INHERIT, 1);
	exec_forgets_robust_list(argv[0]);
	return checks_done();
}
