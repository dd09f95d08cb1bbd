/* Signal-driven I/O: O_ASYNC (F_SETFL, FIOASYNC), F_SETOWN(_EX) and
 * F_SETSIG. nomu had none of it: FIOASYNC was ENOTTY and F_SETOWN EINVAL,
 * so nginx could not start its workers (regression).
 *
 * - a socket, a pipe: data arriving sends SIGIO to the owner;
 * - F_SETSIG: that signal, with si_code POLL_IN, si_fd and si_band;
 * - O_ASYNC off (FIOASYNC 0): no signal; no owner: no signal;
 * - owners: the process, its group (F_SETOWN -pgrp), one thread
 *   (F_SETOWN_EX F_OWNER_TID), a forked child;
 * - F_GETOWN, F_GETOWN_EX, F_GETSIG, F_GETFL show what was set;
 * - bad arguments: ESRCH, EINVAL. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static atomic_int sigio, rt, rt_code, rt_fd, rt_tid;
static atomic_long rt_band;

static void on_sigio(int sig)
{
	(void)sig;
	sigio++;
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	rt_code = si->si_code;
	rt_fd = si->si_fd;
	rt_band = si->si_band;
	rt_tid = (int)syscall(SYS_gettid);
	rt++;
}

/* Waits up to a second for *count to reach `want`. */
static int wait_for(atomic_int *count, int want)
{
	for (int i = 0; i < 200 && *count < want; i++)
		nomu_sleep_ms(5);
	return *count;
}

static void drain(int fd)
{
	char buf[64];
	while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
		;
}

static void socket_sigio(void)
{
	int sv[2];
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	CHECK_EQ(fcntl(sv[0], F_GETOWN), 0);
	struct f_owner_ex ex = { .type = -1, .pid = -1 };
	CHECK_OK(fcntl(sv[0], F_GETOWN_EX, &ex));
	CHECK_EQ(ex.type, F_OWNER_TID);
	CHECK_EQ(ex.pid, 0);
	/* O_ASYNC with no owner: nothing. */
	CHECK_OK(fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_ASYNC));
	CHECK(fcntl(sv[0], F_GETFL) & O_ASYNC);
	CHECK_EQ(write(sv[1], "a", 1), 1);
	nomu_sleep_ms(50);
	CHECK_EQ(sigio, 0);
	drain(sv[0]);
	/* The process as owner. */
	CHECK_OK(fcntl(sv[0], F_SETOWN, getpid()));
	CHECK_EQ(fcntl(sv[0], F_GETOWN), getpid());
	CHECK_OK(fcntl(sv[0], F_GETOWN_EX, &ex));
	CHECK_EQ(ex.type, F_OWNER_PID);
	CHECK_EQ(ex.pid, getpid());
	CHECK_EQ(write(sv[1], "b", 1), 1);
	CHECK_EQ(wait_for(&sigio, 1), 1);
	drain(sv[0]);
	/* FIOASYNC off: no more. */
	int off = 0, on = 1;
	CHECK_OK(ioctl(sv[0], FIOASYNC, &off));
	CHECK(!(fcntl(sv[0], F_GETFL) & O_ASYNC));
	CHECK_EQ(write(sv[1], "c", 1), 1);
	nomu_sleep_ms(50);
	CHECK_EQ(sigio, 1);
	drain(sv[0]);
	CHECK_OK(ioctl(sv[0], FIOASYNC, &on));
	CHECK(fcntl(sv[0], F_GETFL) & O_ASYNC);
	/* The process group as owner. */
	CHECK_OK(fcntl(sv[0], F_SETOWN, -getpgrp()));
	CHECK_EQ(fcntl(sv[0], F_GETOWN), -getpgrp());
	CHECK_EQ(write(sv[1], "d", 1), 1);
	CHECK_EQ(wait_for(&sigio, 2), 2);
	drain(sv[0]);

	/* F_SETSIG: a real-time signal with the descriptor and the band. */
	int sig = SIGRTMIN + 1;
	CHECK_OK(fcntl(sv[0], F_SETOWN, getpid()));
	CHECK_OK(fcntl(sv[0], F_SETSIG, sig));
	CHECK_EQ(fcntl(sv[0], F_GETSIG), sig);
	CHECK_EQ(write(sv[1], "e", 1), 1);
	CHECK_EQ(wait_for(&rt, 1), 1);
	CHECK_EQ(rt_code, POLL_IN);
	CHECK_EQ(rt_fd, sv[0]);
	CHECK(rt_band & POLLIN);
	CHECK_EQ(sigio, 2);
	drain(sv[0]);
	close(sv[0]);
	close(sv[1]);
}

static atomic_int thread_ready, thread_done;
static atomic_int thread_tid;

static void *waiting_thread(void *arg)
{
	(void)arg;
	sigset_t rtset;
	sigemptyset(&rtset);
	sigaddset(&rtset, SIGRTMIN + 1);
	pthread_sigmask(SIG_UNBLOCK, &rtset, NULL);
	thread_tid = (int)syscall(SYS_gettid);
	thread_ready = 1;
	while (!thread_done)
		nomu_sleep_ms(5);
	return NULL;
}

/* F_OWNER_TID: the signal goes to that thread (the others block it). */
static void thread_owner(void)
{
	int p[2];
	CHECK_OK(pipe(p));
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, waiting_thread, NULL), 0);
	while (!thread_ready)
		nomu_sleep_ms(1);
	struct f_owner_ex ex = { .type = F_OWNER_TID, .pid = thread_tid };
	CHECK_OK(fcntl(p[0], F_SETOWN_EX, &ex));
	CHECK_OK(fcntl(p[0], F_SETSIG, SIGRTMIN + 1));
	CHECK_OK(fcntl(p[0], F_SETFL, O_ASYNC));
	struct f_owner_ex got;
	CHECK_OK(fcntl(p[0], F_GETOWN_EX, &got));
	CHECK_EQ(got.type, F_OWNER_TID);
	CHECK_EQ(got.pid, thread_tid);
	int before = rt;
	CHECK_EQ(write(p[1], "x", 1), 1);
	CHECK_EQ(wait_for(&rt, before + 1), before + 1);
	CHECK_EQ(rt_tid, thread_tid);
	CHECK_EQ(rt_fd, p[0]);
	thread_done = 1;
	pthread_join(t, NULL);
	close(p[0]);
	close(p[1]);
}

static void on_child_sigio(int sig)
{
	(void)sig;
	_exit(7);
}

/* A forked child as the owner of its parent's pipe. */
static void child_owner(void)
{
	int p[2], ready[2];
	CHECK_OK(pipe(p));
	CHECK_OK(pipe(ready));
	pid_t pid = fork();
	if (pid == 0) {
		nomu_handle(SIGIO, on_child_sigio, 0);
		write(ready[1], "r", 1);
		for (int i = 0; i < 400; i++)
			nomu_sleep_ms(5);
		_exit(1);
	}
	char c;
	CHECK_EQ(read(ready[0], &c, 1), 1);
	CHECK_OK(fcntl(p[0], F_SETOWN, pid));
	CHECK_OK(fcntl(p[0], F_SETFL, O_ASYNC));
	CHECK_EQ(write(p[1], "y", 1), 1);
	int status = 0;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);
	close(p[0]);
	close(p[1]);
	close(ready[0]);
	close(ready[1]);
}

static void bad_arguments(void)
{
	int p[2];
	CHECK_OK(pipe(p));
	CHECK_ERR(fcntl(p[0], F_SETOWN, 999999), ESRCH);
	struct f_owner_ex ex = { .type = 7, .pid = getpid() };
	CHECK_ERR(fcntl(p[0], F_SETOWN_EX, &ex), EINVAL);
	ex.type = F_OWNER_PID;
	ex.pid = 999999;
	CHECK_ERR(fcntl(p[0], F_SETOWN_EX, &ex), ESRCH);
	CHECK_ERR(fcntl(p[0], F_SETSIG, 65), EINVAL);
	CHECK_ERR(fcntl(p[0], F_GETOWN_EX, (void *)8), EFAULT);
	/* Owner 0: nobody. */
	CHECK_OK(fcntl(p[0], F_SETOWN, getpid()));
	CHECK_OK(fcntl(p[0], F_SETOWN, 0));
	CHECK_EQ(fcntl(p[0], F_GETOWN), 0);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	/* A group of its own: F_SETOWN -pgrp signals the whole group. */
	setpgid(0, 0);
	nomu_handle(SIGIO, on_sigio, SA_RESTART);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_rt;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGRTMIN + 1, &sa, NULL);
	socket_sigio();
	/* From here the main thread blocks the real-time signal, so only the
	 * owner thread can take it. */
	sigset_t rtset;
	sigemptyset(&rtset);
	sigaddset(&rtset, SIGRTMIN + 1);
	pthread_sigmask(SIG_BLOCK, &rtset, NULL);
	thread_owner();
	pthread_sigmask(SIG_UNBLOCK, &rtset, NULL);
	child_owner();
	bad_arguments();
	return checks_done();
}
