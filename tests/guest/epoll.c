/* epoll: epoll_create/create1, epoll_ctl's checks (EEXIST, ENOENT, EBADF,
 * EINVAL, ELOOP, EPERM, EFAULT) in Linux's order, level- and edge-
 * triggered and one-shot interest over pipes and eventfds, EPOLLEXCLUSIVE,
 * interest keyed by (descriptor, open file) with dup'ed descriptors and
 * closes, nested epolls and poll on an epoll descriptor, maxevents, hangups,
 * epoll_wait ended by another thread, another process, a timer and
 * signals (EINTR even under SA_RESTART), epoll_pwait's mask, epoll_pwait2's
 * timeout, pipes, an eventfd, a timerfd and a signalfd in one set, and
 * hundreds ready at once (each returned once per call, all of them when
 * maxevents allows: nomu gave at most 256). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static volatile int usr1;
static void on_usr1(int sig) { (void)sig; usr1++; }

static int add(int ep, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event e = { .events = events, .data.u64 = data };
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

static int mod(int ep, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event e = { .events = events, .data.u64 = data };
	return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e);
}

/* The events epoll_wait returns, sorted by data, as "data:events,..." */
static char got[256];
static int wait_str(int ep, int max, int timeout)
{
	struct epoll_event ev[16];
	int n = epoll_wait(ep, ev, max, timeout);
	got[0] = 0;
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (ev[j].data.u64 < ev[i].data.u64) {
				struct epoll_event t = ev[i];
				ev[i] = ev[j];
				ev[j] = t;
			}
	for (int i = 0; i < n; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%llu:%x", i ? "," : "",
			 (unsigned long long)ev[i].data.u64, ev[i].events);
	return n;
}

#define CHECK_GOT(ep, max, timeout, want)                                     \
	do {                                                                  \
		wait_str(ep, max, timeout);                                   \
		nomu_checks++;                                                \
		if (strcmp(got, want))                                        \
			NOMU_FAIL("epoll_wait: \"%s\", want \"%s\"", got, want); \
	} while (0)

static uint64_t rd(int fd)
{
	uint64_t v = 0;
	if (read(fd, &v, 8) != 8)
		return (uint64_t)-1;
	return v;
}

static int wr(int fd, uint64_t v)
{
	return write(fd, &v, 8);
}

static int efd_shared, pipe_w;
static pthread_t main_thread;

static void *write_eventfd(void *arg)
{
	(void)arg;
	nomu_sleep_ms(100);
	wr(efd_shared, 1);
	return NULL;
}

static void *write_pipe(void *arg)
{
	(void)arg;
	nomu_sleep_ms(100);
	write(pipe_w, "p", 1);
	return NULL;
}

static void *signal_main(void *arg)
{
	(void)arg;
	nomu_sleep_ms(100);
	pthread_kill(main_thread, SIGUSR1);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "child-writes")) {
		nomu_sleep_ms(100);
		return wr(atoi(argv[2]), 1) == 8 ? 0 : 1;
	}
	main_thread = pthread_self();

	printf("== create and ctl errors\n");
	CHECK_ERR(syscall(SYS_epoll_create, 0), EINVAL);
	CHECK_ERR(epoll_create1(1), EINVAL);
	int ep = epoll_create(1);
	CHECK(ep >= 0);
	int ep1 = epoll_create1(EPOLL_CLOEXEC);
	CHECK_EQ(fcntl(ep1, F_GETFD), FD_CLOEXEC);
	close(ep1);
	int efd = eventfd(0, EFD_NONBLOCK);
	int reg = open("/proc/self/exe", O_RDONLY);
	int null = open("/dev/null", O_RDWR);
	struct epoll_event e = { .events = EPOLLIN };
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, reg, &e), EPERM);
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, null, &e), EPERM);
	CHECK_ERR(epoll_ctl(efd, EPOLL_CTL_ADD, reg, &e), EPERM);
	CHECK_ERR(epoll_ctl(efd, EPOLL_CTL_ADD, efd, &e), EINVAL);
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, ep, &e), EINVAL);
	CHECK_ERR(epoll_ctl(ep, 7, efd, &e), EINVAL);
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, efd, NULL), ENOENT);
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_MOD, efd, &e), ENOENT);
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, efd, (void *)8), EFAULT);
	CHECK_ERR(epoll_ctl(ep, 7, efd, (void *)8), EFAULT);
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, efd, (void *)8), ENOENT);
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, 999, &e), EBADF);
	CHECK_ERR(epoll_ctl(999, EPOLL_CTL_ADD, efd, &e), EBADF);
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, 999, (void *)8), EFAULT);
	int opath = open("/", O_PATH);
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, opath, &e), EBADF);
	close(opath);
	e.events = EPOLLIN | EPOLLEXCLUSIVE | EPOLLONESHOT;
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &e), EINVAL);
	e.events = EPOLLIN | EPOLLEXCLUSIVE;
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_MOD, efd, &e), EINVAL);
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &e));
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &e), EEXIST);
	/* An exclusive interest cannot be modified. */
	CHECK_ERR(mod(ep, efd, EPOLLIN, 0), EINVAL);
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, efd, NULL));
	int inner = epoll_create1(0);
	e.events = EPOLLIN | EPOLLEXCLUSIVE;
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, inner, &e), EINVAL);
	CHECK_OK(add(ep, inner, EPOLLIN, 0));
	CHECK_ERR(add(inner, ep, EPOLLIN, 0), ELOOP);
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, inner, NULL));
	struct epoll_event evs[4];
	CHECK_ERR(epoll_wait(ep, evs, 0, 0), EINVAL);
	CHECK_ERR(epoll_wait(ep, evs, -1, 0), EINVAL);
	CHECK_ERR(epoll_wait(999, evs, 1, 0), EBADF);
	CHECK_ERR(epoll_wait(efd, evs, 1, 0), EINVAL);
	CHECK_ERR(epoll_wait(ep, (void *)-4096L, 4, 0), EFAULT);
	/* Nothing ready: the buffer is never touched. */
	CHECK_EQ(epoll_wait(ep, NULL, 1, 0), 0);
	CHECK_ERR(read(ep, evs, 8), EINVAL);
	CHECK_ERR(write(ep, evs, 8), EINVAL);

	printf("== level-triggered, edge-triggered, one-shot: a pipe\n");
	int p[2];
	CHECK_OK(pipe(p));
	CHECK_OK(add(ep, p[0], EPOLLIN, 1));
	CHECK_GOT(ep, 4, 0, "");
	CHECK_EQ(write(p[1], "ab", 2), 2);
	CHECK_GOT(ep, 4, 0, "1:1");
	CHECK_GOT(ep, 4, 0, "1:1");
	CHECK_OK(mod(ep, p[0], EPOLLIN | EPOLLET, 2));
	CHECK_GOT(ep, 4, 0, "2:1");
	CHECK_GOT(ep, 4, 0, "");
	CHECK_EQ(write(p[1], "c", 1), 1);
	CHECK_GOT(ep, 4, 0, "2:1");
	CHECK_GOT(ep, 4, 0, "");
	CHECK_OK(mod(ep, p[0], EPOLLIN | EPOLLONESHOT, 3));
	CHECK_GOT(ep, 4, 0, "3:1");
	CHECK_EQ(write(p[1], "d", 1), 1);
	CHECK_GOT(ep, 4, 0, "");
	CHECK_OK(mod(ep, p[0], EPOLLIN, 4));
	CHECK_GOT(ep, 4, 0, "4:1");
	char buf[16];
	CHECK_EQ(read(p[0], buf, sizeof(buf)), 4);
	CHECK_GOT(ep, 4, 0, "");
	/* The write end: EPOLLOUT; a closed peer: EPOLLHUP unasked. */
	CHECK_OK(add(ep, p[1], EPOLLOUT, 5));
	CHECK_GOT(ep, 4, 0, "5:4");
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, p[1], NULL));
	CHECK_OK(close(p[1]));
	CHECK_GOT(ep, 4, 0, "4:10");
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL));
	close(p[0]);

	printf("== level-triggered, edge-triggered, one-shot: an eventfd\n");
	CHECK_OK(add(ep, efd, EPOLLIN, 10));
	CHECK_GOT(ep, 4, 0, "");
	CHECK_EQ(wr(efd, 1), 8);
	CHECK_GOT(ep, 4, 0, "10:1");
	CHECK_GOT(ep, 4, 0, "10:1");
	CHECK_EQ(rd(efd), 1);
	CHECK_GOT(ep, 4, 0, "");
	CHECK_OK(mod(ep, efd, EPOLLIN | EPOLLOUT | EPOLLET, 11));
	CHECK_GOT(ep, 4, 0, "11:4");
	CHECK_GOT(ep, 4, 0, "");
	CHECK_EQ(wr(efd, 1), 8);
	CHECK_GOT(ep, 4, 0, "11:5");
	CHECK_GOT(ep, 4, 0, "");
	/* Each write is a new edge, even of 0. */
	CHECK_EQ(wr(efd, 0), 8);
	CHECK_GOT(ep, 4, 0, "11:5");
	CHECK_OK(mod(ep, efd, EPOLLIN | EPOLLONESHOT, 12));
	CHECK_GOT(ep, 4, 0, "12:1");
	CHECK_EQ(wr(efd, 1), 8);
	CHECK_GOT(ep, 4, 0, "");
	CHECK_OK(mod(ep, efd, EPOLLIN, 13));
	CHECK_GOT(ep, 4, 0, "13:1");
	CHECK_EQ(rd(efd), 2);
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, efd, NULL));
	/* An exclusive interest is reported like any other. */
	CHECK_OK(add(ep, efd, EPOLLIN | EPOLLEXCLUSIVE, 14));
	CHECK_EQ(wr(efd, 1), 8);
	CHECK_GOT(ep, 4, 0, "14:1");
	CHECK_EQ(rd(efd), 1);
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, efd, NULL));

	printf("== maxevents\n");
	int e3[3];
	for (int i = 0; i < 3; i++) {
		e3[i] = eventfd(1, EFD_NONBLOCK);
		CHECK_OK(add(ep, e3[i], EPOLLIN | EPOLLET, 20 + i));
	}
	CHECK_EQ(wait_str(ep, 2, 0), 2);
	CHECK_EQ(wait_str(ep, 2, 0), 1);
	CHECK_EQ(wait_str(ep, 2, 0), 0);
	for (int i = 0; i < 3; i++)
		close(e3[i]);
	CHECK_GOT(ep, 4, 0, "");

	printf("== interest keyed by descriptor and open file\n");
	CHECK_OK(pipe(p));
	int d = dup(p[0]);
	CHECK_OK(add(ep, p[0], EPOLLIN, 30));
	CHECK_OK(add(ep, d, EPOLLIN, 31));
	CHECK_EQ(write(p[1], "x", 1), 1);
	CHECK_GOT(ep, 4, 0, "30:1,31:1");
	/* Closing one descriptor leaves its interest: the file is still open. */
	CHECK_OK(close(p[0]));
	CHECK_GOT(ep, 4, 0, "30:1,31:1");
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL), EBADF);
	/* The same file at that number is the same key; another file is not. */
	int again = dup(d);
	CHECK_EQ(again, p[0]);
	CHECK_ERR(add(ep, again, EPOLLIN, 32), EEXIST);
	close(again);
	int r[2];
	CHECK_OK(pipe(r));
	CHECK_EQ(r[0], p[0]);
	CHECK_OK(add(ep, r[0], EPOLLIN, 32));
	CHECK_EQ(write(r[1], "r", 1), 1);
	CHECK_GOT(ep, 4, 0, "30:1,31:1,32:1");
	close(r[0]);
	close(r[1]);
	/* The last descriptor closed: every interest in the file goes. */
	CHECK_OK(close(d));
	CHECK_GOT(ep, 4, 0, "");
	int neweventfd = eventfd(1, 0);
	CHECK_EQ(neweventfd, d < p[0] ? d : p[0]);
	CHECK_GOT(ep, 4, 0, "");
	CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, neweventfd, NULL), ENOENT);
	close(neweventfd);
	close(p[1]);
	/* The same for one of nomu's own files. */
	int e1 = eventfd(1, 0);
	int e1d = dup(e1);
	CHECK_OK(add(ep, e1, EPOLLIN, 33));
	CHECK_OK(add(ep, e1d, EPOLLIN, 34));
	CHECK_GOT(ep, 4, 0, "33:1,34:1");
	close(e1);
	CHECK_GOT(ep, 4, 0, "33:1,34:1");
	close(e1d);
	CHECK_GOT(ep, 4, 0, "");

	printf("== nested epolls, poll on an epoll\n");
	CHECK_OK(add(inner, efd, EPOLLIN, 40));
	CHECK_OK(add(ep, inner, EPOLLIN, 41));
	struct pollfd pi = { inner, POLLIN, 0 };
	CHECK_EQ(poll(&pi, 1, 0), 0);
	CHECK_GOT(ep, 4, 0, "");
	CHECK_EQ(wr(efd, 1), 8);
	CHECK_EQ(poll(&pi, 1, 0), 1);
	CHECK_EQ(pi.revents, POLLIN);
	CHECK_GOT(ep, 4, 0, "41:1");
	CHECK_GOT(inner, 4, 0, "40:1");
	/* No longer ready once read: neither poll nor the outer epoll says so. */
	CHECK_EQ(rd(efd), 1);
	CHECK_GOT(ep, 4, 0, "");
	CHECK_EQ(poll(&pi, 1, 0), 0);
	/* A pipe inside the inner one. */
	CHECK_OK(pipe(p));
	CHECK_OK(add(inner, p[0], EPOLLIN, 42));
	CHECK_EQ(write(p[1], "y", 1), 1);
	CHECK_GOT(ep, 4, 0, "41:1");
	CHECK_GOT(inner, 4, 0, "42:1");
	CHECK_EQ(read(p[0], buf, 1), 1);
	CHECK_GOT(ep, 4, 0, "");
	/* The outer epoll waits until the inner one has something. */
	efd_shared = efd;
	pthread_t t;
	pthread_create(&t, NULL, write_eventfd, NULL);
	CHECK_GOT(ep, 4, 5000, "41:1");
	pthread_join(t, NULL);
	CHECK_EQ(rd(efd), 1);
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, inner, NULL));

	printf("== epoll_wait ended by a thread, a process, a timer\n");
	CHECK_OK(add(ep, efd, EPOLLIN, 50));
	CHECK_OK(add(ep, p[0], EPOLLIN, 51));
	pthread_create(&t, NULL, write_eventfd, NULL);
	CHECK_GOT(ep, 4, 5000, "50:1");
	pthread_join(t, NULL);
	CHECK_EQ(rd(efd), 1);
	pipe_w = p[1];
	pthread_create(&t, NULL, write_pipe, NULL);
	CHECK_GOT(ep, 4, 5000, "51:1");
	pthread_join(t, NULL);
	CHECK_EQ(read(p[0], buf, 1), 1);
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", efd);
	char *cargs[] = { argv[0], "child-writes", fdarg, NULL };
	pid_t child;
	CHECK_EQ(posix_spawn(&child, argv[0], NULL, NULL, cargs, environ), 0);
	CHECK_GOT(ep, 4, 5000, "50:1");
	int status;
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(rd(efd), 1);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	CHECK_OK(add(ep, tfd, EPOLLIN, 52));
	struct itimerspec its = { { 0, 0 }, { 0, 100000000 } };
	CHECK_OK(timerfd_settime(tfd, 0, &its, NULL));
	CHECK_GOT(ep, 4, 5000, "52:1");
	CHECK_EQ(rd(tfd), 1);
	/* A timeout with nothing ready. */
	CHECK_GOT(ep, 4, 30, "");
	struct timespec ts = { 0, 30000000 };
	CHECK_EQ(syscall(SYS_epoll_pwait2, ep, evs, 4, &ts, NULL, 8), 0);
	ts.tv_nsec = 1000000000;
	CHECK_ERR(syscall(SYS_epoll_pwait2, ep, evs, 4, &ts, NULL, 8), EINVAL);
	CHECK_ERR(syscall(SYS_epoll_pwait2, ep, evs, 4, (void *)8, NULL, 8), EFAULT);

	printf("== signals end epoll_wait: EINTR, never restarted\n");
	nomu_handle(SIGUSR1, on_usr1, SA_RESTART);
	pthread_create(&t, NULL, signal_main, NULL);
	CHECK_ERR(epoll_wait(ep, evs, 4, 5000), EINTR);
	pthread_join(t, NULL);
	CHECK_EQ(usr1, 1);
	/* Ready events go out even with a signal pending. */
	sigset_t block, none, old;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigemptyset(&none);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	pthread_kill(main_thread, SIGUSR1);
	CHECK_EQ(wr(efd, 1), 8);
	CHECK_EQ(syscall(SYS_epoll_pwait, ep, evs, 4, 0, &none, 8), 1);
	CHECK_EQ(rd(efd), 1);
	/* The mask was put back: the signal is still pending, blocked. */
	CHECK_EQ(usr1, 1);
	CHECK_OK(sigpending(&old));
	CHECK(sigismember(&old, SIGUSR1));
	/* Now it ends a wait whose mask lets it in; the handler runs. */
	CHECK_ERR(syscall(SYS_epoll_pwait, ep, evs, 4, 5000, &none, 8), EINTR);
	CHECK_EQ(usr1, 2);
	CHECK_OK(pthread_sigmask(SIG_SETMASK, NULL, &old));
	CHECK(sigismember(&old, SIGUSR1));
	CHECK_ERR(syscall(SYS_epoll_pwait, ep, evs, 4, 0, &none, 4), EINVAL);
	CHECK_ERR(syscall(SYS_epoll_pwait, ep, evs, 4, 0, (void *)8, 8), EFAULT);
	pthread_sigmask(SIG_UNBLOCK, &block, NULL);

	printf("== pipes, an eventfd, a timerfd and a signalfd together\n");
	int q[2];
	CHECK_OK(pipe(q));
	CHECK_OK(add(ep, q[1], EPOLLOUT, 53));
	sigemptyset(&block);
	sigaddset(&block, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	int sfd = signalfd(-1, &block, SFD_NONBLOCK);
	CHECK_OK(add(ep, sfd, EPOLLIN, 54));
	CHECK_GOT(ep, 8, 0, "53:4");
	CHECK_EQ(write(p[1], "z", 1), 1);
	CHECK_EQ(wr(efd, 2), 8);
	its.it_value.tv_nsec = 1000000;
	CHECK_OK(timerfd_settime(tfd, 0, &its, NULL));
	nomu_sleep_ms(20);
	raise(SIGUSR2);
	CHECK_GOT(ep, 8, 0, "50:1,51:1,52:1,53:4,54:1");
	struct signalfd_siginfo si;
	CHECK_EQ(read(sfd, &si, sizeof(si)), sizeof(si));
	CHECK_EQ(si.ssi_signo, SIGUSR2);
	CHECK_EQ(read(p[0], buf, 1), 1);
	CHECK_EQ(rd(efd), 2);
	CHECK_EQ(rd(tfd), 1);
	CHECK_GOT(ep, 8, 0, "53:4");
	/* A signal sent while epoll_wait waits wakes it through the signalfd. */
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, q[1], NULL));
	pthread_create(&t, NULL, signal_main, NULL);
	nomu_handle(SIGUSR1, on_usr1, 0);
	sigaddset(&block, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	CHECK_OK(signalfd(sfd, &block, 0));
	CHECK_GOT(ep, 8, 5000, "54:1");
	pthread_join(t, NULL);
	CHECK_EQ(read(sfd, &si, sizeof(si)), sizeof(si));
	CHECK_EQ(si.ssi_signo, SIGUSR1);
	CHECK_EQ(si.ssi_code, SI_TKILL);
	CHECK_GOT(ep, 8, 0, "");
	CHECK_EQ(usr1, 2);
	close(sfd);
	close(tfd);
	close(q[0]);
	close(q[1]);
	close(p[0]);
	close(p[1]);
	close(efd);
	close(inner);
	close(ep);
	close(reg);
	close(null);

	/* 700 ready at once, level- and edge-triggered: one call returns as
	 * many as maxevents allows, each item once. */
	enum { MANY = 700 };
	static int many[MANY];
	static struct epoll_event batch[1000];
	static char seen[MANY];
	int lt = epoll_create1(0), et = epoll_create1(0);
	CHECK(lt >= 0 && et >= 0);
	for (int i = 0; i < MANY; i++) {
		many[i] = socket(AF_UNIX, SOCK_DGRAM, 0);
		CHECK(many[i] >= 0);
		CHECK_OK(add(lt, many[i], EPOLLOUT, i));
		CHECK_OK(add(et, many[i], EPOLLOUT | EPOLLET, i));
	}
	for (int round = 0; round < 2; round++) {
		int n = epoll_wait(lt, batch, 1000, 0);
		CHECK_EQ(n, MANY);
		memset(seen, 0, sizeof seen);
		int once = 1;
		for (int i = 0; i < n && i < MANY; i++) {
			uint64_t d = batch[i].data.u64;
			once &= d < MANY && !seen[d] && batch[i].events == EPOLLOUT;
			if (d < MANY)
				seen[d] = 1;
		}
		CHECK(once);
	}
	int n = epoll_wait(lt, batch, 300, 0);
	CHECK_EQ(n, 300);
	memset(seen, 0, sizeof seen);
	int distinct = 1;
	for (int i = 0; i < n; i++) {
		uint64_t d = batch[i].data.u64;
		distinct &= d < MANY && !seen[d];
		if (d < MANY)
			seen[d] = 1;
	}
	CHECK(distinct);
	CHECK_EQ(epoll_wait(et, batch, 1000, 0), MANY);
	CHECK_EQ(epoll_wait(et, batch, 1000, 0), 0);
	for (int i = 0; i < MANY; i++)
		close(many[i]);
	close(lt);
	close(et);
	return checks_done();
}
