/* Guest memory in memfd_secret pages as the buffer of syscalls: what the
 * kernel copies (read, pread, readv into two secret iovecs at once, write,
 * writev, send, recv, a path argument of open, larger than one 2 MiB
 * mermap slot) works, as copy_to_user/copy_from_user go through the
 * user's mapping; what Linux does by pinning the pages (get_user_pages:
 * a shared futex, vmsplice into a pipe, O_DIRECT I/O)
 * is refused, as GUP refuses secretmem pages (EFAULT), while a private
 * futex (keyed by address, the word read by a copy) works. Under nomu
 * the copies and host calls reach the pages only through the mermap
 * (run with NOMU_MERMAP_CHECK=1: no mermap mapping outlives a syscall). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_WAIT_PRIVATE (FUTEX_WAIT | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAKE_PRIVATE (FUTEX_WAKE | FUTEX_PRIVATE_FLAG)

#ifndef SYS_memfd_secret
#define SYS_memfd_secret 447
#endif

static unsigned char *secret_map(size_t len)
{
	int fd = syscall(SYS_memfd_secret, 0);
	if (fd < 0 || ftruncate(fd, len) != 0)
		return NULL;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static long futex(void *w, int op, int val)
{
	struct timespec ts = { 0, 0 };
	return syscall(SYS_futex, w, op, val, &ts, NULL, 0);
}

int main(void)
{
	const size_t pg = 4096, len = 4 * pg;
	unsigned char *p = secret_map(len);
	CHECK(p != NULL);
	if (!p)
		return checks_done();
	char buf[64] = { 0 };

	/* read() from a pipe, write() to it. */
	int pfd[2];
	CHECK_OK(pipe(pfd));
	CHECK_EQ(write(pfd[1], "from a pipe", 11), 11);
	CHECK_EQ(read(pfd[0], p + 100, 11), 11);
	CHECK(memcmp(p + 100, "from a pipe", 11) == 0);
	CHECK_EQ(write(pfd[1], p + 100, 11), 11);
	CHECK_EQ(read(pfd[0], buf, 11), 11);
	CHECK(memcmp(buf, "from a pipe", 11) == 0);

	/* A read that crosses pages of the secret mapping. */
	char big[6000];
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = 'a' + i % 26;
	CHECK_EQ(write(pfd[1], big, sizeof big), (long)sizeof big);
	CHECK_EQ(read(pfd[0], p + pg - 10, sizeof big), (long)sizeof big);
	CHECK(memcmp(p + pg - 10, big, sizeof big) == 0);

	/* pread and pwrite of a file. */
	char tmpl[] = "/tmp/secret_io.XXXXXX";
	int fd = mkstemp(tmpl);
	CHECK(fd >= 0);
	unlink(tmpl);
	CHECK_EQ(pwrite(fd, "0123456789abcdef", 16, 0), 16);
	CHECK_EQ(pread(fd, p + 3 * pg, 10, 6), 10);
	CHECK(memcmp(p + 3 * pg, "6789abcdef", 10) == 0);
	memcpy(p + 2 * pg, "SECRET", 6);
	CHECK_EQ(pwrite(fd, p + 2 * pg, 6, 2), 6);
	CHECK_EQ(pread(fd, buf, 16, 0), 16);
	CHECK(memcmp(buf, "01SECRET89abcdef", 16) == 0);

	/* readv into two secret iovecs (two ranges held at once), writev from
	 * secret and ordinary memory. */
	struct iovec iov[2] = { { p + 10, 4 }, { p + 2 * pg + 500, 6 } };
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(readv(fd, iov, 2), 10);
	CHECK(memcmp(p + 10, "01SE", 4) == 0 && memcmp(p + 2 * pg + 500, "CRET89", 6) == 0);
	struct iovec out[3] = { { p + 2 * pg + 500, 6 }, { "+", 1 }, { p + 10, 4 } };
	CHECK_EQ(writev(pfd[1], out, 3), 11);
	memset(buf, 0, sizeof buf);
	CHECK_EQ(read(pfd[0], buf, 11), 11);
	CHECK(strcmp(buf, "CRET89+01SE") == 0);

	/* send and recv. */
	int sv[2];
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	CHECK_EQ(send(sv[0], "by socket", 9, 0), 9);
	CHECK_EQ(recv(sv[1], p + 200, 9, 0), 9);
	CHECK(memcmp(p + 200, "by socket", 9) == 0);
	CHECK_EQ(send(sv[1], p + 200, 9, 0), 9);
	memset(buf, 0, sizeof buf);
	CHECK_EQ(recv(sv[0], buf, 9, 0), 9);
	CHECK(strcmp(buf, "by socket") == 0);
	struct msghdr mh = { 0 };
	struct iovec miov[2] = { { p + 300, 3 }, { p + 3 * pg + 1000, 5 } };
	mh.msg_iov = miov;
	mh.msg_iovlen = 2;
	CHECK_EQ(send(sv[0], "sendmsg!", 8, 0), 8);
	CHECK_EQ(recvmsg(sv[1], &mh, 0), 8);
	CHECK(memcmp(p + 300, "sen", 3) == 0 && memcmp(p + 3 * pg + 1000, "dmsg!", 5) == 0);
	CHECK_EQ(sendmsg(sv[1], &mh, 0), 8);
	memset(buf, 0, sizeof buf);
	CHECK_EQ(recv(sv[0], buf, 8, 0), 8);
	CHECK(strcmp(buf, "sendmsg!") == 0);

	/* A path argument in secret memory, across a page boundary. */
	strcpy((char *)p + pg - 3, "/dev/null");
	int nfd = open((char *)p + pg - 3, O_RDONLY);
	CHECK(nfd >= 0);
	close(nfd);
	strcpy((char *)p + 5, "/no/such/file");
	CHECK_ERR(open((char *)p + 5, O_RDONLY), ENOENT);
	/* fstat's buffer there. */
	struct stat *st = (struct stat *)(p + 3 * pg + 2048);
	CHECK_OK(fstat(pfd[0], st));
	CHECK(S_ISFIFO(st->st_mode));

	/* Larger than a 2 MiB mermap slot: a file read in a loop, whatever
	 * the host's counts. */
	size_t blen = 3 << 20;
	unsigned char *b = secret_map(blen);
	CHECK(b != NULL);
	if (b) {
		char name[] = "/tmp/secret_io_big.XXXXXX";
		int bfd = mkstemp(name);
		unlink(name);
		for (size_t i = 0; i < blen; i += sizeof big)
			CHECK(write(bfd, big, blen - i < sizeof big ? blen - i : sizeof big) > 0);
		CHECK_EQ(lseek(bfd, 0, SEEK_SET), 0);
		size_t got = 0;
		while (got < blen) {
			ssize_t n = read(bfd, b + got, blen - got);
			if (n <= 0)
				break;
			got += n;
		}
		CHECK_EQ(got, blen);
		int same = 1;
		for (size_t i = 0; i < blen; i++)
			same &= b[i] == (unsigned char)big[i % sizeof big];
		CHECK(same);
		/* And written back out of it. */
		CHECK_EQ(lseek(bfd, 0, SEEK_SET), 0);
		size_t put = 0;
		while (put < blen) {
			ssize_t n = write(bfd, b + put, blen - put);
			if (n <= 0)
				break;
			put += n;
		}
		CHECK_EQ(put, blen);
		CHECK_EQ(pread(bfd, buf, 26, 6000 * 100), 26);
		CHECK(memcmp(buf, big, 26) == 0);
		close(bfd);
		CHECK_OK(munmap(b, blen));
	}

	/* Direct I/O pins the pages (GUP): EFAULT, where the filesystem does
	 * it (tmpfs copies instead: not checked there). */
	char dname[] = "/tmp/secret_io_direct.XXXXXX";
	int dfd = mkstemp(dname);
	CHECK(dfd >= 0);
	CHECK_EQ(pwrite(dfd, big, 4096, 0), 4096);
	close(dfd);
	dfd = open(dname, O_RDWR | O_DIRECT);
	unlink(dname);
	struct statfs sfs;
	if (dfd >= 0 && fstatfs(dfd, &sfs) == 0 && sfs.f_type != 0x01021994) {
		CHECK_ERR(pread(dfd, p, 4096, 0), EFAULT);
		CHECK_ERR(pwrite(dfd, p, 4096, 0), EFAULT);
		CHECK_ERR(read(dfd, p, 4096), EFAULT);
		struct iovec div = { p, 4096 };
		CHECK_ERR(writev(dfd, &div, 1), EFAULT);
	}
	if (dfd >= 0)
		close(dfd);

	/* Futexes: a private one is keyed by the address and works; a shared
	 * one pins the page (GUP), which secretmem refuses. */
	int *w = (int *)(p + 3 * pg + 64);
	*w = 7;
	CHECK_ERR(futex(w, FUTEX_WAIT_PRIVATE, 8), EAGAIN);
	CHECK_ERR(futex(w, FUTEX_WAIT_PRIVATE, 7), ETIMEDOUT);
	CHECK_EQ(futex(w, FUTEX_WAKE_PRIVATE, 1), 0);
	CHECK_ERR(futex(w, FUTEX_WAIT, 7), EFAULT);
	CHECK_ERR(futex(w, FUTEX_WAKE, 1), EFAULT);

	/* vmsplice of secret pages into a pipe pins them: EFAULT. */
	struct iovec viov = { p + 400, 6 };
	CHECK_ERR(vmsplice(pfd[1], &viov, 1, 0), EFAULT);

	/* A forked child shares the mapping (MAP_SHARED): it sees the
	 * parent's data, its syscalls use the buffer, the parent sees its
	 * writes (regression: nomu crashed copying the pages at fork). */
	strcpy((char *)p + 700, "from the parent");
	CHECK_EQ(write(pfd[1], "by the child", 12), 12);
	pid_t child = fork();
	if (child == 0) {
		int ok = strcmp((char *)p + 700, "from the parent") == 0;
		ok &= read(pfd[0], p + 800, 12) == 12;
		ok &= write(pfd[1], p + 700, 15) == 15;
		_exit(ok ? 0 : 1);
	}
	int status;
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK_EQ(status, 0);
	CHECK(memcmp(p + 800, "by the child", 12) == 0);
	memset(buf, 0, sizeof buf);
	CHECK_EQ(read(pfd[0], buf, 15), 15);
	CHECK(strcmp(buf, "from the parent") == 0);

	CHECK_OK(munmap(p, len));
	return checks_done();
}
