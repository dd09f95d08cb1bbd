/* eventfd and eventfd2: the counter's read and write semantics (8-byte
 * buffers, EFD_SEMAPHORE, EAGAIN, EINVAL for short buffers and
 * 0xffffffffffffffff), readv/writev, flags, a blocking read ended by
 * another thread, by another process that inherited the descriptor and by
 * signals (EINTR, or a restart under SA_RESTART), a write that blocks
 * while the counter would overflow, and poll/select/ppoll readiness. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static volatile int usr1;
static void on_usr1(int sig) { (void)sig; usr1++; }

static int efd_shared;
static pthread_t main_thread;

/* After a pause: writes `arg` to the shared eventfd. */
static void *writer(void *arg)
{
	nomu_sleep_ms(100);
	uint64_t v = (uintptr_t)arg;
	return (void *)(intptr_t)write(efd_shared, &v, 8);
}

/* After a pause: reads the shared eventfd once. */
static void *reader(void *arg)
{
	(void)arg;
	nomu_sleep_ms(100);
	uint64_t v = 0;
	if (read(efd_shared, &v, 8) != 8)
		return (void *)-1;
	return (void *)(uintptr_t)v;
}

/* After a pause: SIGUSR1 to the main thread; then, after another, writes 5. */
static void *signaller(void *arg)
{
	nomu_sleep_ms(100);
	pthread_kill(main_thread, SIGUSR1);
	if (arg) {
		nomu_sleep_ms(100);
		uint64_t v = 5;
		write(efd_shared, &v, 8);
	}
	return NULL;
}

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

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "child-writes")) {
		/* A process that inherited the eventfd adds 42 to it. */
		nomu_sleep_ms(100);
		return wr(atoi(argv[2]), 42) == 8 ? 0 : 1;
	}
	main_thread = pthread_self();

	printf("== counter semantics\n");
	int fd = eventfd(3, 0);
	CHECK(fd >= 0);
	CHECK_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	CHECK_EQ(rd(fd), 3);
	CHECK_EQ(wr(fd, 1), 8);
	CHECK_EQ(wr(fd, 2), 8);
	CHECK_EQ(wr(fd, 0), 8);
	CHECK_EQ(rd(fd), 3);
	char small[8];
	CHECK_ERR(read(fd, small, 7), EINVAL);
	CHECK_ERR(write(fd, small, 7), EINVAL);
	uint64_t all = UINT64_MAX;
	CHECK_ERR(write(fd, &all, 8), EINVAL);
	CHECK_ERR(write(fd, (void *)8, 8), EFAULT);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 0);
	CHECK_ERR(pread(fd, small, 8, 0), ESPIPE);
	CHECK_ERR(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED ? -1 : 0, ENODEV);
	struct stat st;
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_mode & 0777, 0600);
	/* A larger buffer reads 8 bytes. */
	char big[16];
	memset(big, 0x55, sizeof(big));
	CHECK_EQ(wr(fd, 9), 8);
	CHECK_EQ(read(fd, big, sizeof(big)), 8);
	CHECK_EQ(*(uint64_t *)big, 9);
	CHECK_EQ((unsigned char)big[8], 0x55);
	/* A bad buffer: the counter is consumed anyway (EFAULT), as on Linux. */
	CHECK_EQ(wr(fd, 4), 8);
	CHECK_ERR(read(fd, (void *)8, 8), EFAULT);
	CHECK_OK(fcntl(fd, F_SETFL, O_NONBLOCK));
	CHECK_ERR(read(fd, big, 8), EAGAIN);
	/* The counter stops one short of 2^64-1. */
	CHECK_EQ(wr(fd, UINT64_MAX - 1), 8);
	CHECK_ERR(wr(fd, 1), EAGAIN);
	CHECK_EQ(wr(fd, 0), 8);
	CHECK_EQ(rd(fd), UINT64_MAX - 1);
	CHECK_EQ(close(fd), 0);

	printf("== readv and writev\n");
	fd = eventfd(0, EFD_NONBLOCK);
	uint32_t halves[2] = { 7, 0 };
	struct iovec two_halves[2] = { { &halves[0], 4 }, { &halves[1], 4 } };
	/* write has no iterator: each buffer is one write. */
	CHECK_ERR(writev(fd, two_halves, 2), EINVAL);
	uint64_t x = 1, y = 2;
	struct iovec two[2] = { { &x, 8 }, { &y, 8 } };
	CHECK_EQ(writev(fd, two, 2), 16);
	struct iovec bad_second[2] = { { &x, 8 }, { (void *)8, 8 } };
	CHECK_EQ(writev(fd, bad_second, 2), 8);
	/* read does: 8 bytes across buffers. */
	halves[0] = halves[1] = 0;
	CHECK_EQ(readv(fd, two_halves, 2), 8);
	CHECK_EQ(halves[0], 4);
	CHECK_EQ(halves[1], 0);
	close(fd);

	printf("== EFD_SEMAPHORE\n");
	fd = eventfd(2, EFD_SEMAPHORE | EFD_NONBLOCK);
	CHECK_EQ(rd(fd), 1);
	CHECK_EQ(rd(fd), 1);
	CHECK_ERR(read(fd, big, 8), EAGAIN);
	CHECK_EQ(wr(fd, 3), 8);
	CHECK_EQ(rd(fd), 1);
	close(fd);

	printf("== flags\n");
	CHECK_ERR(eventfd(0, 2), EINVAL);
	CHECK_ERR(syscall(SYS_eventfd2, 0, O_APPEND), EINVAL);
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
	close(fd);
	/* eventfd(2): no flags; the count is an unsigned int. */
	fd = syscall(SYS_eventfd, 0x100000005ULL);
	CHECK(fd >= 0);
	CHECK_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	CHECK_EQ(rd(fd), 5);
	close(fd);

	printf("== a blocking read ended by another thread's write\n");
	efd_shared = eventfd(0, 0);
	pthread_t t;
	void *ret;
	pthread_create(&t, NULL, writer, (void *)6);
	CHECK_EQ(rd(efd_shared), 6);
	pthread_join(t, &ret);
	CHECK_EQ((long)ret, 8);

	printf("== a blocking read ended by another process\n");
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", efd_shared);
	char *cargs[] = { argv[0], "child-writes", fdarg, NULL };
	pid_t child;
	CHECK_EQ(posix_spawn(&child, argv[0], NULL, NULL, cargs, environ), 0);
	CHECK_EQ(rd(efd_shared), 42);
	int status;
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	printf("== a signal ends a blocking read: EINTR, or a restart\n");
	nomu_handle(SIGUSR1, on_usr1, 0);
	pthread_create(&t, NULL, signaller, NULL);
	CHECK_ERR(read(efd_shared, &x, 8), EINTR);
	pthread_join(t, NULL);
	CHECK_EQ(usr1, 1);
	nomu_handle(SIGUSR1, on_usr1, SA_RESTART);
	pthread_create(&t, NULL, signaller, (void *)1);
	CHECK_EQ(rd(efd_shared), 5);
	pthread_join(t, NULL);
	CHECK_EQ(usr1, 2);

	printf("== a write blocks while the counter would overflow\n");
	CHECK_EQ(wr(efd_shared, UINT64_MAX - 2), 8);
	pthread_create(&t, NULL, reader, NULL);
	CHECK_EQ(wr(efd_shared, 7), 8);
	pthread_join(t, &ret);
	CHECK_EQ((uint64_t)(uintptr_t)ret, UINT64_MAX - 2);
	CHECK_EQ(rd(efd_shared), 7);
	/* A signal ends that wait too. */
	CHECK_EQ(wr(efd_shared, UINT64_MAX - 1), 8);
	nomu_handle(SIGUSR1, on_usr1, 0);
	pthread_create(&t, NULL, signaller, NULL);
	CHECK_ERR(wr(efd_shared, 1), EINTR);
	pthread_join(t, NULL);
	CHECK_EQ(rd(efd_shared), UINT64_MAX - 1);

	printf("== poll, select, ppoll\n");
	struct pollfd p = { efd_shared, POLLIN | POLLOUT, 0 };
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(p.revents, POLLOUT);
	CHECK_EQ(wr(efd_shared, 1), 8);
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(p.revents, POLLIN | POLLOUT);
	CHECK_EQ(rd(efd_shared), 1);
	CHECK_EQ(wr(efd_shared, UINT64_MAX - 1), 8);
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(p.revents, POLLIN);
	CHECK_EQ(rd(efd_shared), UINT64_MAX - 1);
	p.events = POLLIN;
	CHECK_EQ(poll(&p, 1, 50), 0);
	/* poll waits until another thread writes. */
	pthread_create(&t, NULL, writer, (void *)2);
	CHECK_EQ(poll(&p, 1, 5000), 1);
	CHECK_EQ(p.revents, POLLIN);
	pthread_join(t, NULL);
	/* With a pipe in the same set: the pipe stays quiet, the eventfd wakes it. */
	CHECK_EQ(rd(efd_shared), 2);
	int pp[2];
	CHECK_OK(pipe(pp));
	struct pollfd both[2] = { { pp[0], POLLIN, 0 }, { efd_shared, POLLIN, 0 } };
	pthread_create(&t, NULL, writer, (void *)3);
	CHECK_EQ(poll(both, 2, 5000), 1);
	CHECK_EQ(both[0].revents, 0);
	CHECK_EQ(both[1].revents, POLLIN);
	pthread_join(t, NULL);
	CHECK_EQ(write(pp[1], "x", 1), 1);
	CHECK_EQ(poll(both, 2, 0), 2);
	fd_set rs, ws;
	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_SET(efd_shared, &rs);
	FD_SET(efd_shared, &ws);
	struct timeval tv = { 0, 0 };
	CHECK_EQ(select(efd_shared + 1, &rs, &ws, NULL, &tv), 2);
	CHECK_EQ(rd(efd_shared), 3);
	FD_ZERO(&rs);
	FD_SET(efd_shared, &rs);
	tv.tv_usec = 20000;
	CHECK_EQ(select(efd_shared + 1, &rs, NULL, NULL, &tv), 0);
	/* A signal ends a poll that waits on the eventfd alone. */
	nomu_handle(SIGUSR1, on_usr1, SA_RESTART);
	pthread_create(&t, NULL, signaller, NULL);
	CHECK_ERR(poll(&p, 1, 5000), EINTR);
	pthread_join(t, NULL);
	/* ppoll's mask lets a blocked signal in for the wait. */
	sigset_t block, none;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigemptyset(&none);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	int before = usr1;
	pthread_create(&t, NULL, signaller, NULL);
	struct timespec ts = { 5, 0 };
	CHECK_ERR(ppoll(&p, 1, &ts, &none), EINTR);
	pthread_join(t, NULL);
	CHECK_EQ(usr1, before + 1);
	pthread_sigmask(SIG_UNBLOCK, &block, NULL);
	close(pp[0]);
	close(pp[1]);
	close(efd_shared);
	return checks_done();
}
