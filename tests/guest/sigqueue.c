/* sigqueue and its system calls (rt_sigqueueinfo, rt_tgsigqueueinfo): the
 * handler and sigwaitinfo see SI_QUEUE, the sender and the value; queued
 * real-time signals keep their order and values; a process may send a
 * siginfo claiming to be the kernel's or tkill's only to itself (EPERM);
 * ESRCH, EINVAL and EFAULT as Linux orders them (regression: all ENOSYS). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static volatile int got_sig, got_code, got_value, got_pid;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	got_sig = sig;
	got_code = si->si_code;
	got_value = si->si_value.sival_int;
	got_pid = si->si_pid;
}

static siginfo_t queue_info(int code, int value)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_code = code;
	si.si_pid = getpid();
	si.si_uid = getuid();
	si.si_value.sival_int = value;
	return si;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "receiver")) {
		/* SIGRTMIN is blocked from the start (posix_spawn's mask). */
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGRTMIN);
		siginfo_t si;
		if (write(3, "r", 1) != 1) /* ready */
			return 2;
		if (sigwaitinfo(&set, &si) != SIGRTMIN || si.si_code != SI_QUEUE || si.si_pid != getppid())
			return 1;
		return si.si_value.sival_int;
	}

	printf("== sigqueue to itself reaches the handler with its value\n");
	struct sigaction sa = {0};
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO;
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	CHECK_OK(sigqueue(getpid(), SIGUSR1, (union sigval){.sival_int = 42}));
	CHECK_EQ(got_sig, SIGUSR1);
	CHECK_EQ(got_code, SI_QUEUE);
	CHECK_EQ(got_value, 42);
	CHECK_EQ(got_pid, getpid());

	printf("== queued real-time signals keep their order and values\n");
	sigset_t rt;
	sigemptyset(&rt);
	sigaddset(&rt, SIGRTMIN);
	CHECK_OK(sigprocmask(SIG_BLOCK, &rt, NULL));
	for (int v = 1; v <= 3; v++)
		CHECK_OK(sigqueue(getpid(), SIGRTMIN, (union sigval){.sival_int = v}));
	for (int v = 1; v <= 3; v++) {
		siginfo_t si;
		CHECK_EQ(sigwaitinfo(&rt, &si), SIGRTMIN);
		CHECK_EQ(si.si_code, SI_QUEUE);
		CHECK_EQ(si.si_value.sival_int, v);
	}

	printf("== rt_tgsigqueueinfo to one thread\n");
	got_sig = got_value = 0;
	siginfo_t si = queue_info(SI_QUEUE, 7);
	CHECK_OK(syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGUSR1, &si));
	CHECK_EQ(got_sig, SIGUSR1);
	CHECK_EQ(got_value, 7);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, getpid() + 1000, gettid(), SIGUSR1, &si), ESRCH);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, getpid(), 0, SIGUSR1, &si), EINVAL);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, 0, gettid(), SIGUSR1, &si), EINVAL);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), 65, &si), EINVAL);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGUSR1, (void *)8), EFAULT);

	printf("== to another process, with its value; what only the sender itself may claim\n");
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	posix_spawnattr_setsigmask(&attr, &rt);
	/* The child says when it is running its own code: a signal sent in
	 * the moments after its exec hits a nomu crash not yet understood
	 * (see the issue note), which this test is not about. */
	int ready[2];
	CHECK_OK(pipe(ready));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, ready[1], 3);
	pid_t c;
	char *args[] = {argv[0], "receiver", NULL};
	CHECK_EQ(posix_spawn(&c, argv[0], &fa, &attr, args, environ), 0);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	close(ready[1]);
	char byte;
	CHECK_EQ(read(ready[0], &byte, 1), 1);
	close(ready[0]);
	siginfo_t user = queue_info(SI_USER, 1), tkill = queue_info(SI_TKILL, 1);
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, c, SIGRTMIN, &user), EPERM);
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, c, SIGRTMIN, &tkill), EPERM);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, c, c, SIGRTMIN, &user), EPERM);
	/* EPERM comes before the signal number's check. */
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, c, 65, &user), EPERM);
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, c, 65, &si), EINVAL);
	CHECK_OK(syscall(SYS_rt_sigqueueinfo, c, 0, &si)); /* it exists */
	CHECK_OK(sigqueue(c, SIGRTMIN, (union sigval){.sival_int = 77}));
	int st;
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 77);

	printf("== errors\n");
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, c, SIGUSR1, &si), ESRCH); /* reaped */
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, 0, SIGUSR1, &si), ESRCH);
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, getpid(), SIGUSR1, (void *)8), EFAULT);
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, getpid(), 65, &si), EINVAL);
	/* To itself a process may claim anything. */
	got_sig = 0;
	CHECK_OK(syscall(SYS_rt_sigqueueinfo, getpid(), SIGUSR1, &user));
	CHECK_EQ(got_sig, SIGUSR1);
	CHECK_EQ(got_code, SI_USER);
	return checks_done();
}
