/* signalfd and signalfd4: the usual use (block signals, read them from the
 * descriptor), struct signalfd_siginfo for kill, tkill, sigqueue and
 * SIGCHLD, several signals in one read, the mask changed on an existing
 * descriptor, the checks in Linux's order, EAGAIN, a blocking read ended by
 * a signal from another thread and from another process, and by a signal
 * outside its mask (EINTR, or a restart under SA_RESTART), and poll. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static volatile int usr2;
static void on_usr2(int sig) { (void)sig; usr2++; }
static pthread_t main_thread;

/* After a pause: `arg` (a signal number) to the main thread. */
static void *signal_main(void *arg)
{
	nomu_sleep_ms(100);
	pthread_kill(main_thread, (int)(intptr_t)arg);
	return NULL;
}

/* The same after a longer pause. */
static void *signal_main_later(void *arg)
{
	nomu_sleep_ms(300);
	pthread_kill(main_thread, (int)(intptr_t)arg);
	return NULL;
}

static sigset_t set_of(int a, int b)
{
	sigset_t s;
	sigemptyset(&s);
	if (a)
		sigaddset(&s, a);
	if (b)
		sigaddset(&s, b);
	return s;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "kill-parent")) {
		nomu_sleep_ms(100);
		return kill(atoi(argv[2]), SIGUSR1) == 0 ? 0 : 1;
	}
	if (argc == 2 && !strcmp(argv[1], "exit-3"))
		return 3;
	main_thread = pthread_self();
	struct signalfd_siginfo si[3];

	printf("== checks\n");
	sigset_t usr1 = set_of(SIGUSR1, 0);
	CHECK_ERR(syscall(SYS_signalfd4, -1, &usr1, 4, 0), EINVAL);
	CHECK_ERR(syscall(SYS_signalfd4, -1, (void *)8, 4, 0), EINVAL);
	CHECK_ERR(syscall(SYS_signalfd4, -1, (void *)8, 8, 1), EFAULT);
	CHECK_ERR(syscall(SYS_signalfd4, -1, &usr1, 8, 1), EINVAL);
	CHECK_ERR(syscall(SYS_signalfd4, 999, &usr1, 8, 0), EBADF);
	CHECK_ERR(syscall(SYS_signalfd4, -2, &usr1, 8, 0), EBADF);
	CHECK_ERR(signalfd(1, &usr1, 0), EINVAL);
	CHECK_ERR(syscall(SYS_signalfd, -1, &usr1, 4), EINVAL);

	printf("== block, then read\n");
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	int fd = signalfd(-1, &usr1, SFD_NONBLOCK | SFD_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
	CHECK_EQ(fcntl(fd, F_GETFL), O_RDWR | O_NONBLOCK);
	CHECK_ERR(read(fd, si, sizeof(si[0]) - 1), EINVAL);
	CHECK_ERR(read(fd, si, sizeof(si[0])), EAGAIN);
	CHECK_ERR(write(fd, si, sizeof(si[0])), EINVAL);
	raise(SIGUSR1);
	struct pollfd p = { fd, POLLIN, 0 };
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(p.revents, POLLIN);
	memset(si, 0x55, sizeof(si));
	CHECK_EQ(read(fd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(si[0].ssi_signo, SIGUSR1);
	CHECK_EQ(si[0].ssi_code, SI_TKILL);
	CHECK_EQ(si[0].ssi_pid, getpid());
	CHECK_EQ(si[0].ssi_uid, getuid());
	CHECK_EQ(si[0].ssi_errno, 0);
	CHECK_EQ(si[0].ssi_int, 0);
	CHECK_EQ(si[0].ssi_ptr, 0);
	CHECK_EQ(si[0].ssi_status, 0);
	CHECK_EQ(si[1].ssi_signo, 0x55555555);
	/* Read, it is no longer pending. */
	sigset_t pending;
	sigpending(&pending);
	CHECK(!sigismember(&pending, SIGUSR1));
	CHECK_EQ(poll(&p, 1, 0), 0);
	CHECK_ERR(read(fd, si, sizeof(si)), EAGAIN);
	kill(getpid(), SIGUSR1);
	CHECK_EQ(read(fd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(si[0].ssi_code, SI_USER);
	CHECK_EQ(si[0].ssi_pid, getpid());
	union sigval v = { .sival_int = 1234 };
	CHECK_OK(sigqueue(getpid(), SIGUSR1, v));
	CHECK_EQ(read(fd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(si[0].ssi_code, SI_QUEUE);
	CHECK_EQ(si[0].ssi_int, 1234);
	CHECK_EQ(si[0].ssi_ptr, 1234);

	printf("== a signal outside the mask stays pending\n");
	sigset_t both = set_of(SIGUSR1, SIGUSR2);
	sigprocmask(SIG_BLOCK, &both, NULL);
	raise(SIGUSR2);
	CHECK_ERR(read(fd, si, sizeof(si)), EAGAIN);
	CHECK_EQ(poll(&p, 1, 0), 0);
	/* Another mask on the same descriptor. */
	CHECK_EQ(signalfd(fd, &both, 0), fd);
	CHECK_EQ(poll(&p, 1, 0), 1);
	raise(SIGUSR1);
	/* Both in one read, lowest first. */
	CHECK_EQ(read(fd, si, sizeof(si)), 2 * sizeof(si[0]));
	CHECK_EQ(si[0].ssi_signo, SIGUSR1);
	CHECK_EQ(si[1].ssi_signo, SIGUSR2);
	/* Real-time signals queue, each with its value. */
	sigset_t rt = set_of(SIGRTMIN + 1, 0);
	sigprocmask(SIG_BLOCK, &rt, NULL);
	CHECK_EQ(signalfd(fd, &rt, 0), fd);
	for (int i = 0; i < 3; i++) {
		v.sival_int = 10 + i;
		sigqueue(getpid(), SIGRTMIN + 1, v);
	}
	CHECK_EQ(read(fd, si, 2 * sizeof(si[0])), 2 * sizeof(si[0]));
	CHECK_EQ(si[0].ssi_int, 10);
	CHECK_EQ(si[1].ssi_int, 11);
	CHECK_EQ(read(fd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(si[0].ssi_int, 12);
	/* SIGKILL and SIGSTOP are never in a mask; an empty mask reads nothing. */
	sigset_t killstop = set_of(SIGKILL, SIGSTOP);
	CHECK_EQ(signalfd(fd, &killstop, 0), fd);
	raise(SIGUSR1);
	CHECK_ERR(read(fd, si, sizeof(si)), EAGAIN);
	CHECK_EQ(signalfd(fd, &usr1, 0), fd);
	CHECK_EQ(read(fd, si, sizeof(si)), sizeof(si[0]));

	printf("== SIGCHLD\n");
	sigset_t chld = set_of(SIGCHLD, 0);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int cfd = signalfd(-1, &chld, 0);
	char *cargs[] = { argv[0], "exit-3", NULL };
	pid_t child;
	CHECK_EQ(posix_spawn(&child, argv[0], NULL, NULL, cargs, environ), 0);
	CHECK_EQ(read(cfd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(si[0].ssi_signo, SIGCHLD);
	CHECK_EQ(si[0].ssi_code, CLD_EXITED);
	CHECK_EQ(si[0].ssi_status, 3);
	CHECK_EQ(si[0].ssi_pid, child);
	int status;
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);

	printf("== a blocking read ended by another thread, another process\n");
	int bfd = signalfd(-1, &usr1, 0);
	pthread_t t;
	pthread_create(&t, NULL, signal_main, (void *)(intptr_t)SIGUSR1);
	CHECK_EQ(read(bfd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(si[0].ssi_signo, SIGUSR1);
	CHECK_EQ(si[0].ssi_code, SI_TKILL);
	pthread_join(t, NULL);
	char pidarg[16];
	snprintf(pidarg, sizeof(pidarg), "%d", (int)getpid());
	char *kargs[] = { argv[0], "kill-parent", pidarg, NULL };
	CHECK_EQ(posix_spawn(&child, argv[0], NULL, NULL, kargs, environ), 0);
	CHECK_EQ(read(bfd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(si[0].ssi_signo, SIGUSR1);
	CHECK_EQ(si[0].ssi_code, SI_USER);
	CHECK_EQ(si[0].ssi_pid, child);
	CHECK_EQ(waitpid(child, &status, 0), child);
	/* The SIGCHLD of that child waits on cfd. */
	CHECK_EQ(read(cfd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(si[0].ssi_pid, child);

	printf("== a signal outside the mask ends it: EINTR, or a restart\n");
	nomu_handle(SIGUSR2, on_usr2, 0);
	sigset_t usr2set = set_of(SIGUSR2, 0);
	sigprocmask(SIG_UNBLOCK, &usr2set, NULL);
	pthread_create(&t, NULL, signal_main, (void *)(intptr_t)SIGUSR2);
	CHECK_ERR(read(bfd, si, sizeof(si)), EINTR);
	pthread_join(t, NULL);
	CHECK_EQ(usr2, 1);
	nomu_handle(SIGUSR2, on_usr2, SA_RESTART);
	pthread_create(&t, NULL, signal_main, (void *)(intptr_t)SIGUSR2);
	/* Restarted after the handler, then the SIGUSR1 below ends it. */
	pthread_t t2;
	pthread_create(&t2, NULL, signal_main_later, (void *)(intptr_t)SIGUSR1);
	CHECK_EQ(read(bfd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(si[0].ssi_signo, SIGUSR1);
	CHECK_EQ(usr2, 2);
	pthread_join(t, NULL);
	pthread_join(t2, NULL);

	printf("== select and poll wait for it\n");
	pthread_create(&t, NULL, signal_main, (void *)(intptr_t)SIGUSR1);
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(bfd, &rs);
	struct timeval tv = { 5, 0 };
	CHECK_EQ(select(bfd + 1, &rs, NULL, NULL, &tv), 1);
	CHECK(FD_ISSET(bfd, &rs));
	pthread_join(t, NULL);
	p.fd = bfd;
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(read(bfd, si, sizeof(si)), sizeof(si[0]));
	CHECK_EQ(poll(&p, 1, 20), 0);
	close(fd);
	close(cfd);
	close(bfd);
	return checks_done();
}
