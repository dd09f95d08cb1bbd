/* pidfds: pidfd_open (and PIDFD_THREAD, PIDFD_NONBLOCK), pidfd_send_signal
 * (its scopes and siginfo rules), pidfd_getfd, poll and epoll of a pidfd
 * (readable at exit, hung up once reaped), waitid(P_PIDFD). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#define PIDFD_NONBLOCK_ O_NONBLOCK
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x1000
#endif
#define PIDFD_SIGNAL_THREAD 1
#define PIDFD_SIGNAL_THREAD_GROUP 2
#define PIDFD_SIGNAL_PROCESS_GROUP 4
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static int pidfd_open(pid_t pid, unsigned flags)
{
	return syscall(SYS_pidfd_open, pid, flags);
}

static int pidfd_send_signal(int fd, int sig, siginfo_t *info, unsigned flags)
{
	return syscall(SYS_pidfd_send_signal, fd, sig, info, flags);
}

static int pidfd_getfd(int fd, int target, unsigned flags)
{
	return syscall(SYS_pidfd_getfd, fd, target, flags);
}

static short revents(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 0) < 0)
		return -1;
	return p.revents;
}

/* A child whose stdin is a pipe from the caller: "reads" exits with the
 * value of the byte it reads there, "pauses" waits for a signal. */
static pid_t spawn_child(int *to_child, char *mode)
{
	int p[2];
	pid_t pid;
	char *args[] = {"pidfd", mode, NULL};
	posix_spawn_file_actions_t fa;

	if (pipe(p) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[0], 0);
	posix_spawn_file_actions_addclose(&fa, p[1]);
	if (posix_spawn(&pid, "/proc/self/exe", &fa, NULL, args, environ) != 0)
		pid = -1;
	posix_spawn_file_actions_destroy(&fa);
	close(p[0]);
	*to_child = p[1];
	return pid;
}

/* The "Pid:" line of a pidfd's /proc/self/fdinfo (-2 if none). */
static long fdinfo_pid(int fd)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	int f = open(path, O_RDONLY);
	if (f < 0)
		return -2;
	ssize_t n = read(f, buf, sizeof buf - 1);
	close(f);
	if (n <= 0)
		return -2;
	buf[n] = 0;
	char *p = strstr(buf, "\nPid:\t");
	return p ? strtol(p + 6, NULL, 10) : -2;
}

static volatile sig_atomic_t got_usr1, usr1_code, usr1_value;

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	got_usr1++;
	usr1_code = si->si_code;
	usr1_value = si->si_value.sival_int;
}

static pid_t thread_tid;
static int thread_go[2];

static void *thread_main(void *arg)
{
	char c;
	(void)arg;
	thread_tid = syscall(SYS_gettid);
	if (read(thread_go[0], &c, 1) != 1)
		return NULL;
	return NULL;
}

static void test_errors(void)
{
	int p[2];

	CHECK_ERR(pidfd_open(getpid(), 1), EINVAL);
	CHECK_ERR(pidfd_open(0, 0), EINVAL);
	CHECK_ERR(pidfd_open(-1, 0), EINVAL);
	CHECK_ERR(pidfd_open(4194303, 0), ESRCH);
	CHECK_OK(pipe(p));
	CHECK_ERR(pidfd_send_signal(p[0], 0, NULL, 0), EBADF);
	CHECK_ERR(pidfd_send_signal(999, 0, NULL, 0), EBADF);
	/* PIDFD_SELF_THREAD and _GROUP name the caller (pidfd_send_signal
	 * only); other negative numbers are bad descriptors. */
	CHECK_EQ(pidfd_send_signal(-10000, 0, NULL, 0), 0);
	CHECK_EQ(pidfd_send_signal(-10001, 0, NULL, 0), 0);
	CHECK_ERR(pidfd_send_signal(-10002, 0, NULL, 0), EBADF);
	CHECK_ERR(pidfd_getfd(-10000, 0, 0), EBADF);
	CHECK_ERR(pidfd_getfd(p[0], 0, 0), EBADF);
	siginfo_t si;
	CHECK_ERR(waitid(P_PIDFD, p[0], &si, WEXITED), EBADF);
	close(p[0]);
	close(p[1]);
}

static void test_self(void)
{
	int fd = pidfd_open(getpid(), 0);
	CHECK(fd >= 0);
	CHECK_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
	char buf[8];
	CHECK_ERR(read(fd, buf, sizeof buf), EINVAL);
	CHECK_ERR(write(fd, buf, sizeof buf), EINVAL);
	CHECK_EQ(revents(fd), 0);
	CHECK_ERR(pidfd_send_signal(fd, 0, NULL, 8), EINVAL);
	CHECK_ERR(pidfd_send_signal(fd, 0, NULL, PIDFD_SIGNAL_THREAD | PIDFD_SIGNAL_THREAD_GROUP), EINVAL);
	CHECK_ERR(pidfd_send_signal(fd, 65, NULL, 0), EINVAL);
	CHECK_EQ(pidfd_send_signal(fd, 0, NULL, 0), 0);

	struct sigaction sa = {.sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO};
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	CHECK_EQ(pidfd_send_signal(fd, SIGUSR1, NULL, 0), 0);
	CHECK_EQ(got_usr1, 1);
	CHECK_EQ(usr1_code, SI_USER);
	CHECK_EQ(pidfd_send_signal(fd, SIGUSR1, NULL, PIDFD_SIGNAL_THREAD), 0);
	CHECK_EQ(got_usr1, 2);
	CHECK_EQ(usr1_code, SI_TKILL);

	/* A caller may send itself any siginfo, but its signo must match. */
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = SIGUSR1;
	si.si_code = SI_QUEUE;
	si.si_value.sival_int = 77;
	CHECK_EQ(pidfd_send_signal(fd, SIGUSR1, &si, 0), 0);
	CHECK_EQ(got_usr1, 3);
	CHECK_EQ(usr1_code, SI_QUEUE);
	CHECK_EQ(usr1_value, 77);
	si.si_code = 5; /* a kernel code: allowed to oneself */
	CHECK_EQ(pidfd_send_signal(fd, SIGUSR1, &si, 0), 0);
	CHECK_EQ(got_usr1, 4);
	CHECK_ERR(pidfd_send_signal(fd, SIGUSR2, &si, 0), EINVAL);
	CHECK_ERR(pidfd_send_signal(fd, SIGUSR1, (siginfo_t *)8, 0), EFAULT);
	close(fd);
}

static void test_child(void)
{
	int to_child, fd, fd_nb;
	pid_t pid = spawn_child(&to_child, "pauses");
	CHECK(pid > 0);
	fd = pidfd_open(pid, 0);
	CHECK(fd >= 0);
	fd_nb = pidfd_open(pid, PIDFD_NONBLOCK_);
	CHECK(fd_nb >= 0);
	CHECK_EQ(fdinfo_pid(fd), pid);
	CHECK_EQ(revents(fd), 0);

	/* A nonblocking pidfd's wait: EAGAIN while the child runs; WNOHANG
	 * is the usual 0 with no pid. */
	siginfo_t si;
	memset(&si, 0, sizeof si);
	CHECK_ERR(waitid(P_PIDFD, fd_nb, &si, WEXITED), EAGAIN);
	memset(&si, 0, sizeof si);
	CHECK_EQ(waitid(P_PIDFD, fd_nb, &si, WEXITED | WNOHANG), 0);
	CHECK_EQ(si.si_pid, 0);

	/* Another process's descriptor, through the pidfd: the child's stdin
	 * is the pipe's read end. */
	int got = pidfd_getfd(fd, 0, 0);
	CHECK(got >= 0);
	CHECK_EQ(fcntl(got, F_GETFD), FD_CLOEXEC);
	CHECK_ERR(pidfd_getfd(fd, 0, 1), EINVAL);
	CHECK_ERR(pidfd_getfd(fd, 999, 0), EBADF);
	CHECK_EQ(write(to_child, "a", 1), 1);
	char c = 0;
	CHECK_EQ(read(got, &c, 1), 1); /* the child's very description */
	CHECK_EQ(c, 'a');
	close(got);

	/* A /proc/PID directory serves pidfd_send_signal (only it). */
	char dir[32];
	snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
	int procfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(procfd >= 0);
	CHECK_EQ(pidfd_send_signal(procfd, 0, NULL, 0), 0);
	CHECK_ERR(pidfd_getfd(procfd, 0, 0), EBADF);
	CHECK_ERR(waitid(P_PIDFD, procfd, &si, WEXITED | WNOHANG), EBADF);
	int procsub = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
	CHECK_ERR(pidfd_send_signal(procsub, 0, NULL, 0), EBADF);
	close(procsub);

	/* Siginfo claiming the kernel sent it: only to oneself. */
	memset(&si, 0, sizeof si);
	si.si_signo = SIGTERM;
	si.si_code = SI_USER;
	CHECK_ERR(pidfd_send_signal(fd, SIGTERM, &si, 0), EPERM);
	/* The child leads no process group. */
	CHECK_ERR(pidfd_send_signal(fd, 0, NULL, PIDFD_SIGNAL_PROCESS_GROUP), ESRCH);
	si.si_code = SI_TKILL;
	CHECK_ERR(pidfd_send_signal(fd, SIGTERM, &si, 0), EPERM);

	/* epoll sees it end. */
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7}, out;
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	CHECK_EQ(epoll_wait(ep, &out, 1, 0), 0);

	CHECK_EQ(pidfd_send_signal(fd, SIGTERM, NULL, 0), 0);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	CHECK_EQ(poll(&p, 1, -1), 1);
	CHECK_EQ(p.revents, POLLIN); /* exited, not reaped: no POLLHUP */
	CHECK_EQ(epoll_wait(ep, &out, 1, -1), 1);
	CHECK_EQ(out.data.u32, 7);
	/* A zombie takes signals to no effect, and can be opened. */
	CHECK_EQ(pidfd_send_signal(fd, SIGKILL, NULL, 0), 0);
	int late = pidfd_open(pid, 0);
	CHECK(late >= 0);
	CHECK_ERR(pidfd_getfd(fd, 0, 0), ESRCH);

	memset(&si, 0, sizeof si);
	CHECK_EQ(waitid(P_PIDFD, fd, &si, WEXITED | WNOWAIT), 0);
	CHECK_EQ(si.si_code, CLD_KILLED);
	CHECK_EQ(si.si_status, SIGTERM);
	CHECK_EQ(si.si_pid, pid);
	memset(&si, 0, sizeof si);
	CHECK_EQ(waitid(P_PIDFD, late, &si, WEXITED), 0);
	CHECK_EQ(si.si_pid, pid);
	CHECK_EQ(si.si_status, SIGTERM);

	/* Reaped: hung up, and gone for signals and getfd. */
	CHECK_EQ(revents(fd), POLLIN | POLLHUP);
	CHECK_EQ(fdinfo_pid(fd), -1);
	CHECK_ERR(pidfd_send_signal(fd, 0, NULL, 0), ESRCH);
	CHECK_ERR(pidfd_send_signal(procfd, 0, NULL, 0), ESRCH);
	close(procfd);
	CHECK_ERR(pidfd_getfd(fd, 0, 0), ESRCH);
	CHECK_ERR(waitid(P_PIDFD, fd, &si, WEXITED), ECHILD);
	CHECK_ERR(pidfd_open(pid, 0), ESRCH);
	close(late);
	close(ep);
	close(fd_nb);
	close(fd);
	close(to_child);
}

static void test_exit_status(void)
{
	int to_child;
	pid_t pid = spawn_child(&to_child, "reads");
	CHECK(pid > 0);
	int fd = pidfd_open(pid, 0);
	CHECK(fd >= 0);
	CHECK_EQ(write(to_child, "\x2a", 1), 1);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	CHECK_EQ(waitid(P_PIDFD, fd, &si, WEXITED), 0);
	CHECK_EQ(si.si_code, CLD_EXITED);
	CHECK_EQ(si.si_status, 42);
	close(fd);
	close(to_child);
}

/* struct clone_args, and a CLONE_VM|CLONE_VFORK clone3 whose child exits
 * at once with status 3, touching no memory. */
struct clone3_args {
	unsigned long long flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
		set_tid_size, cgroup;
};

static long clone3_exit3(struct clone3_args *a)
{
	long ret;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "mov $3, %%edi\n\t"
			 "mov $60, %%eax\n\t"
			 "syscall\n\t"
			 "1:"
			 : "=a"(ret)
			 : "a"((long)SYS_clone3), "D"(a), "S"(sizeof(*a))
			 : "rcx", "r11", "memory");
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

static void test_clone_pidfd(void)
{
	int pidfd = -1;
	struct clone3_args a = {.flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD,
				.pidfd = (unsigned long)&pidfd,
				.exit_signal = SIGCHLD};
	long pid = clone3_exit3(&a);
	CHECK(pid > 0);
	CHECK(pidfd >= 0);
	CHECK_EQ(fcntl(pidfd, F_GETFD), FD_CLOEXEC);
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	CHECK_EQ(poll(&p, 1, -1), 1);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	CHECK_EQ(waitid(P_PIDFD, pidfd, &si, WEXITED), 0);
	CHECK_EQ(si.si_pid, pid);
	CHECK_EQ(si.si_status, 3);
	close(pidfd);

	/* A bad pidfd pointer fails the clone: no child, no descriptor. */
	int before = dup(0);
	close(before);
	a.pidfd = 8;
	CHECK_ERR(clone3_exit3(&a), EFAULT);
	int after = dup(0);
	CHECK_EQ(after, before);
	close(after);
	CHECK_ERR(waitpid(-1, NULL, WNOHANG), ECHILD);

	/* clone(2) writes it where CLONE_PARENT_SETTID would: not both. */
	CHECK_ERR(syscall(SYS_clone, CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_PARENT_SETTID | SIGCHLD, 0,
			  &pidfd, 0, 0),
		  EINVAL);
}

static void test_thread(void)
{
	pthread_t th;
	CHECK_OK(pipe(thread_go));
	CHECK_EQ(pthread_create(&th, NULL, thread_main, NULL), 0);
	while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
		nomu_sleep_ms(1);
	/* A thread's id names no thread group. */
	CHECK_ERR(pidfd_open(thread_tid, 0), ENOENT);
	int fd = pidfd_open(thread_tid, PIDFD_THREAD);
	CHECK(fd >= 0);
	int leader = pidfd_open(getpid(), PIDFD_THREAD);
	CHECK(leader >= 0);
	CHECK_EQ(revents(fd), 0);
	/* A thread pidfd's signals go to that thread. */
	got_usr1 = 0;
	CHECK_EQ(pidfd_send_signal(fd, 0, NULL, 0), 0);
	CHECK_EQ(write(thread_go[1], "x", 1), 1);
	CHECK_EQ(pthread_join(th, NULL), 0);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	CHECK_EQ(poll(&p, 1, -1), 1);
	CHECK(p.revents & POLLIN);
	/* Linux reports the exit (POLLIN) a moment before it unhashes the
	 * thread, when signals start to fail: seen natively on a loaded host. */
	for (int i = 0; i < 1000 && pidfd_send_signal(fd, 0, NULL, 0) == 0; i++)
		nomu_sleep_ms(1);
	CHECK_ERR(pidfd_send_signal(fd, 0, NULL, 0), ESRCH);
	CHECK_EQ(revents(leader), 0);
	close(fd);
	close(leader);
	close(thread_go[0]);
	close(thread_go[1]);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "reads")) {
		unsigned char c;
		return read(0, &c, 1) == 1 ? c : 1;
	}
	if (argc == 2 && !strcmp(argv[1], "pauses")) {
		pause();
		return 0;
	}
	test_errors();
	test_self();
	test_child();
	test_exit_status();
	test_thread();
	test_clone_pidfd();
	return checks_done();
}
