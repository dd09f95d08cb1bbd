/* Timers on a process's CPU time: ITIMER_VIRTUAL (SIGVTALRM), ITIMER_PROF
 * (SIGPROF) and RLIMIT_CPU (SIGXCPU, then SIGKILL). nomu had none of them:
 * setitimer and getitimer were EINVAL for both itimers, and RLIMIT_CPU was
 * kept but never enforced, so `ulimit -t` bounded nothing and a gprof'd
 * program collected no samples.
 *
 * - the itimers fire after the process has used that much CPU, again at
 *   each interval, with si_code SI_KERNEL, and stop when set to zero;
 * - time asleep does not count; another thread's CPU time does;
 * - getitimer shows the CPU time left; setitimer's old value is it;
 * - bad arguments: EINVAL;
 * - a forked child starts with no itimer; execve keeps them;
 * - POSIX timers on CPU clocks (they were EINVAL): the process's, the
 *   calling thread's (another thread's CPU does not move it), another
 *   thread's (pthread_getcpuclockid), absolute; clocks of no thread or
 *   process: EINVAL;
 * - clock_nanosleep on the process's CPU clock (it was EINVAL) sleeps
 *   until the other threads used that much; on the caller's own thread
 *   clock: EINVAL;
 * - `rlimit` mode (its own case: it burns 2 s of CPU): a child with
 *   RLIMIT_CPU 1 s soft, 2 s hard gets SIGXCPU at 1 s and sees its soft
 *   limit raised to 2, then dies of SIGKILL at 2 s. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>

static atomic_int vtalrm, prof, prof_code = -1, usr1, usr2;

/* Linux's CPU clock ids: (~id << 3) | per-thread (4) | which (2: run time). */
#define CPU_CLOCK(id, flags) ((clockid_t)((~(unsigned)(id) << 3) | (flags)))

static void on_usr(int sig)
{
	if (sig == SIGUSR1)
		usr1++;
	else
		usr2++;
}

static void on_vtalrm(int sig)
{
	(void)sig;
	vtalrm++;
}

static void on_prof(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	prof_code = si->si_code;
	prof++;
}

static long long now_ms(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1000ll + t.tv_nsec / 1000000;
}

/* Burns CPU until *count reaches `want` or `wall_ms` have passed; the CPU
 * time it took (ms). */
static long long burn_until(atomic_int *count, int want, int wall_ms)
{
	long long start = now_ms(CLOCK_PROCESS_CPUTIME_ID), end = now_ms(CLOCK_MONOTONIC) + wall_ms;
	volatile unsigned long x = 0;
	while (*count < want && now_ms(CLOCK_MONOTONIC) < end)
		for (int i = 0; i < 20000; i++)
			x += i;
	return now_ms(CLOCK_PROCESS_CPUTIME_ID) - start;
}

static long long tv_ms(struct timeval t)
{
	return t.tv_sec * 1000ll + t.tv_usec / 1000;
}

static struct itimerval itv(long value_ms, long interval_ms)
{
	struct itimerval v = {
		.it_interval = { interval_ms / 1000, interval_ms % 1000 * 1000 },
		.it_value = { value_ms / 1000, value_ms % 1000 * 1000 },
	};
	return v;
}

static void virtual_timer(void)
{
	struct itimerval v = itv(60, 30), old, cur;
	CHECK_OK(setitimer(ITIMER_VIRTUAL, &v, &old));
	CHECK(old.it_value.tv_sec == 0 && old.it_value.tv_usec == 0);
	CHECK_OK(getitimer(ITIMER_VIRTUAL, &cur));
	CHECK_EQ(tv_ms(cur.it_interval), 30);
	/* Left: 60 ms of CPU, give or take a 4 ms tick (Linux adds one). */
	CHECK(tv_ms(cur.it_value) > 40 && tv_ms(cur.it_value) <= 70);
	long long used = burn_until(&vtalrm, 3, 10000);
	CHECK(vtalrm >= 3);
	/* 60 + 30 + 30 ms of user time: not much before that (Linux counts
	 * user time a tick at a time, which may run ahead of the run time). */
	CHECK(used >= 80);
	/* Off: no more signals, and getitimer shows it off. */
	v = itv(0, 0);
	CHECK_OK(setitimer(ITIMER_VIRTUAL, &v, &old));
	CHECK_EQ(tv_ms(old.it_interval), 30);
	CHECK(tv_ms(old.it_value) <= 40);
	int before = vtalrm;
	burn_until(&vtalrm, 1000, 150);
	CHECK_EQ(vtalrm, before);
	CHECK_OK(getitimer(ITIMER_VIRTUAL, &cur));
	CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0 && cur.it_interval.tv_usec == 0);
}

static void prof_timer(void)
{
	struct itimerval v = itv(50, 0), cur;
	CHECK_OK(setitimer(ITIMER_PROF, &v, NULL));
	burn_until(&prof, 1, 10000);
	CHECK_EQ(prof, 1);
	CHECK_EQ(prof_code, SI_KERNEL);
	/* A one-shot timer is off once it fired. */
	CHECK_OK(getitimer(ITIMER_PROF, &cur));
	CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0);
	burn_until(&prof, 2, 120);
	CHECK_EQ(prof, 1);
}

/* Sleeping uses no CPU: the timer neither fires nor moves. */
static void asleep_does_not_count(void)
{
	struct itimerval v = itv(100, 0), cur;
	int before = vtalrm;
	CHECK_OK(setitimer(ITIMER_VIRTUAL, &v, NULL));
	nomu_sleep_ms(300);
	CHECK_EQ(vtalrm, before);
	CHECK_OK(getitimer(ITIMER_VIRTUAL, &cur));
	CHECK(tv_ms(cur.it_value) >= 80);
	v = itv(0, 0);
	CHECK_OK(setitimer(ITIMER_VIRTUAL, &v, NULL));
}

static atomic_int spin_stop;

static void *spinner(void *arg)
{
	(void)arg;
	volatile unsigned long x = 0;
	while (!spin_stop)
		x++;
	return NULL;
}

/* The process's CPU time is every thread's: the main thread sleeps while
 * another spins, and ITIMER_PROF fires all the same. */
static void other_threads_count(void)
{
	pthread_t t;
	struct itimerval v = itv(80, 0);
	int before = prof;
	CHECK_OK(setitimer(ITIMER_PROF, &v, NULL));
	CHECK_EQ(pthread_create(&t, NULL, spinner, NULL), 0);
	for (int i = 0; i < 200 && prof == before; i++)
		nomu_sleep_ms(50);
	spin_stop = 1;
	pthread_join(t, NULL);
	CHECK_EQ(prof, before + 1);
}

static long long ts_ms(struct timespec t)
{
	return t.tv_sec * 1000ll + t.tv_nsec / 1000000;
}

static struct itimerspec its(long value_ms, long interval_ms)
{
	struct itimerspec v = {
		.it_interval = { interval_ms / 1000, interval_ms % 1000 * 1000000 },
		.it_value = { value_ms / 1000, value_ms % 1000 * 1000000 },
	};
	return v;
}

static void posix_cpu_timers(void)
{
	timer_t t;
	struct itimerspec v = its(50, 20), cur;
	struct sigevent sev;
	memset(&sev, 0, sizeof sev);
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = SIGUSR1;

	/* The process's CPU clock, with an interval. */
	CHECK_OK(timer_create(CLOCK_PROCESS_CPUTIME_ID, &sev, &t));
	CHECK_OK(timer_settime(t, 0, &v, NULL));
	CHECK_OK(timer_gettime(t, &cur));
	CHECK(cur.it_value.tv_sec == 0 && ts_ms(cur.it_value) > 30 && ts_ms(cur.it_value) <= 50);
	CHECK_EQ(ts_ms(cur.it_interval), 20);
	long long used = burn_until(&usr1, 3, 10000);
	CHECK(usr1 >= 3);
	CHECK(used >= 85);
	v = its(0, 0);
	CHECK_OK(timer_settime(t, 0, &v, NULL));
	CHECK_OK(timer_delete(t));

	/* The calling thread's: another thread's CPU does not move it. */
	sev.sigev_signo = SIGUSR2;
	CHECK_OK(timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &t));
	v = its(60, 0);
	CHECK_OK(timer_settime(t, 0, &v, NULL));
	pthread_t th;
	spin_stop = 0;
	CHECK_EQ(pthread_create(&th, NULL, spinner, NULL), 0);
	nomu_sleep_ms(250);
	CHECK_EQ(usr2, 0);
	CHECK_OK(timer_gettime(t, &cur));
	CHECK(ts_ms(cur.it_value) > 40);
	/* Another thread's clock. */
	clockid_t other;
	timer_t t2;
	CHECK_EQ(pthread_getcpuclockid(th, &other), 0);
	CHECK_OK(timer_create(other, &sev, &t2));
	v = its(60, 0);
	CHECK_OK(timer_settime(t2, 0, &v, NULL));
	for (int i = 0; i < 200 && usr2 == 0; i++)
		nomu_sleep_ms(20);
	CHECK_EQ(usr2, 1);
	/* clock_nanosleep on the process's clock: the spinner's CPU. */
	struct timespec a, b, req = { 0, 80 * 1000000 };
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	CHECK_EQ(clock_nanosleep(CLOCK_PROCESS_CPUTIME_ID, 0, &req, NULL), 0);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	CHECK(ts_ms(b) - ts_ms(a) >= 78);
	/* Absolute, on the other thread's clock. */
	clock_gettime(other, &a);
	a.tv_nsec += 50 * 1000000;
	if (a.tv_nsec >= 1000000000) {
		a.tv_sec++;
		a.tv_nsec -= 1000000000;
	}
	CHECK_EQ(clock_nanosleep(other, TIMER_ABSTIME, &a, NULL), 0);
	clock_gettime(other, &b);
	CHECK(ts_ms(b) >= ts_ms(a));
	spin_stop = 1;
	pthread_join(th, NULL);
	CHECK_OK(timer_delete(t2));
	/* The caller's own thread clock fires on its own CPU time. */
	burn_until(&usr2, 2, 10000);
	CHECK_EQ(usr2, 2);
	CHECK_OK(timer_delete(t));

	CHECK_EQ(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &req, NULL), EINVAL);
	clockid_t mine;
	CHECK_EQ(pthread_getcpuclockid(pthread_self(), &mine), 0);
	CHECK_EQ(clock_nanosleep(mine, 0, &req, NULL), EINVAL);
	CHECK_ERR(timer_create(CPU_CLOCK(999999, 4 | 2), &sev, &t), EINVAL);
	CHECK_ERR(timer_create(CPU_CLOCK(999999, 2), &sev, &t), EINVAL);
	CHECK_ERR(timer_create(CPU_CLOCK(0, 4 | 3), &sev, &t), EINVAL);
	/* A descriptor clock (PTP devices) keeps no timers. */
	CHECK_ERR(timer_create(CPU_CLOCK(0, 3), &sev, &t), EOPNOTSUPP);
}

static void bad_arguments(void)
{
	struct itimerval v = itv(10, 0), cur;
	CHECK_ERR(setitimer(3, &v, NULL), EINVAL);
	CHECK_ERR(getitimer(3, &cur), EINVAL);
	v.it_value.tv_usec = 1000000;
	CHECK_ERR(setitimer(ITIMER_PROF, &v, NULL), EINVAL);
	v = itv(10, 0);
	v.it_interval.tv_usec = -1;
	CHECK_ERR(setitimer(ITIMER_VIRTUAL, &v, NULL), EINVAL);
}

/* A forked child has no itimer; an exec'd program keeps them. */
static void fork_and_exec(const char *self)
{
	struct itimerval v = itv(20000, 0), cur;
	CHECK_OK(setitimer(ITIMER_PROF, &v, NULL));
	CHECK_OK(setitimer(ITIMER_VIRTUAL, &v, NULL));
	pid_t pid = fork();
	if (pid == 0) {
		getitimer(ITIMER_PROF, &cur);
		int clear = cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0;
		getitimer(ITIMER_VIRTUAL, &cur);
		clear &= cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0;
		_exit(clear ? 0 : 1);
	}
	int status = 0;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	pid = fork();
	if (pid == 0) {
		execl(self, self, "exec-child", (char *)NULL);
		_exit(3);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	v = itv(0, 0);
	CHECK_OK(setitimer(ITIMER_PROF, &v, NULL));
	CHECK_OK(setitimer(ITIMER_VIRTUAL, &v, NULL));
}

/* fork_and_exec's child, exec'd: it has no itimers (forked), so it sets
 * one, execs again (exec_child) and finds it after (after_exec). */
static int after_exec(void)
{
	struct itimerval cur;
	getitimer(ITIMER_PROF, &cur);
	return tv_ms(cur.it_value) > 10000 ? 0 : 1;
}

static int exec_child(const char *self)
{
	struct itimerval v = itv(20000, 0);
	setitimer(ITIMER_PROF, &v, NULL);
	execl(self, self, "after-exec", (char *)NULL);
	return 3;
}

static void on_xcpu(int sig)
{
	(void)sig;
	struct rlimit r;
	getrlimit(RLIMIT_CPU, &r);
	/* What the parent checks: the soft limit was raised by a second. */
	char c = r.rlim_cur == 2 && r.rlim_max == 2 ? 'x' : '?';
	write(1, &c, 1);
}

/* RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one. */
static void cpu_limit(void)
{
	int fds[2];
	CHECK_OK(pipe(fds));
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		nomu_handle(SIGXCPU, on_xcpu, 0);
		struct rlimit r = { 1, 2 };
		setrlimit(RLIMIT_CPU, &r);
		atomic_int never = 0;
		burn_until(&never, 1, 20000);
		_exit(0);
	}
	close(fds[1]);
	int status = 0;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	char got[8] = {0};
	CHECK_EQ(read(fds[0], got, sizeof got), 1);
	CHECK_EQ(got[0], 'x');
	close(fds[0]);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "after-exec") == 0)
		return after_exec();
	if (argc > 1 && strcmp(argv[1], "exec-child") == 0)
		return exec_child(argv[0]);
	if (argc > 1 && strcmp(argv[1], "rlimit") == 0) {
		cpu_limit();
		return checks_done();
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_prof;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	nomu_handle(SIGVTALRM, on_vtalrm, SA_RESTART);
	nomu_handle(SIGUSR1, on_usr, SA_RESTART);
	nomu_handle(SIGUSR2, on_usr, SA_RESTART);
	virtual_timer();
	prof_timer();
	asleep_does_not_count();
	other_threads_count();
	posix_cpu_timers();
	bad_arguments();
	fork_and_exec(argv[0]);
	return checks_done();
}
