/* memfd_secret(2): its errors and semantics as Linux 6.x has them (the
 * flags, a size set once by ftruncate, MAP_SHARED only, no exec, no
 * read/write/lseek on the descriptor), and memory that works as memory:
 * zeroed, shared between mappings of one file, kept across munmap while
 * the file lives, and usable as the buffer of read(), write(), recv()
 * and send() (nomu reaches it at the mapping's address, never at its
 * pages' direct-map address, which is PROT_NONE: tests/nomu/secret_direct.c). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#ifndef SYS_memfd_secret
#define SYS_memfd_secret 447
#endif

static int secret(unsigned flags)
{
	return syscall(SYS_memfd_secret, flags);
}

int main(void)
{
	const size_t pg = 4096, len = 3 * pg;
	CHECK_ERR(secret(2), EINVAL);
	CHECK_ERR(secret(O_NONBLOCK), EINVAL);
	CHECK_ERR(secret(0x80000000u), EINVAL);
	int cfd = secret(O_CLOEXEC);
	CHECK(cfd >= 0);
	CHECK_EQ(fcntl(cfd, F_GETFD), FD_CLOEXEC);
	close(cfd);

	int fd = secret(0);
	CHECK(fd >= 0);
	CHECK_EQ(fcntl(fd, F_GETFD), 0);
	CHECK_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	struct stat st;
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_mode, S_IFREG | 0600);
	CHECK_EQ(st.st_size, 0);
	char link[64] = { 0 }, path[32];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	CHECK(readlink(path, link, sizeof link - 1) > 0);
	printf("link: %s\n", link);

	/* No read, write or seek on the descriptor itself. */
	char buf[16];
	CHECK_ERR(read(fd, buf, sizeof buf), EINVAL);
	CHECK_ERR(read(fd, NULL, 16), EINVAL);
	CHECK_ERR(write(fd, "x", 1), EINVAL);
	CHECK_ERR(lseek(fd, 0, SEEK_SET), ESPIPE);
	CHECK_ERR(pread(fd, buf, sizeof buf, 0), ESPIPE);

	/* The size is set once. */
	CHECK_OK(ftruncate(fd, 0));
	CHECK_OK(ftruncate(fd, len));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, (long)len);
	CHECK_ERR(ftruncate(fd, len), EINVAL);
	CHECK_ERR(ftruncate(fd, 2 * len), EINVAL);
	CHECK_ERR(ftruncate(fd, 0), EINVAL);

	/* MAP_SHARED only, never executable. */
	CHECK(mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) == MAP_FAILED && errno == EINVAL);
	CHECK(mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EPERM);

	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	if (p == MAP_FAILED)
		return checks_done();
	int zero = 1;
	for (size_t i = 0; i < len; i++)
		zero &= p[i] == 0;
	CHECK(zero);
	memset(p, 0x5a, len);
	strcpy((char *)p + pg, "a secret");

	/* A second mapping of the file shows the same pages. */
	unsigned char *q = mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, pg);
	CHECK(q != MAP_FAILED);
	CHECK(strcmp((char *)q, "a secret") == 0);
	CHECK_ERR(mprotect(q, pg, PROT_READ | PROT_EXEC), EACCES);
	/* Locked memory: its pages are neither dropped nor freed early. */
	CHECK_ERR(madvise(q, pg, MADV_DONTNEED), EINVAL);
	CHECK_ERR(madvise(q, pg, MADV_FREE), EINVAL);
	CHECK(strcmp((char *)q, "a secret") == 0);
	CHECK_OK(munmap(q, pg));

	/* read() and write() with a buffer in secret memory. */
	int pfd[2];
	CHECK_OK(pipe(pfd));
	CHECK_EQ(write(pfd[1], "from a pipe", 11), 11);
	CHECK_EQ(read(pfd[0], p + 2 * pg, 11), 11);
	CHECK(memcmp(p + 2 * pg, "from a pipe", 11) == 0);
	CHECK_EQ(write(pfd[1], p + pg, 9), 9);
	CHECK_EQ(read(pfd[0], buf, 9), 9);
	CHECK(strcmp(buf, "a secret") == 0);
	/* recv() and send() too. */
	int sv[2];
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	CHECK_EQ(send(sv[0], "by socket", 9, 0), 9);
	CHECK_EQ(recv(sv[1], p, 9, 0), 9);
	CHECK(memcmp(p, "by socket", 9) == 0);
	CHECK_EQ(send(sv[1], p + pg, 9, 0), 9);
	CHECK_EQ(recv(sv[0], buf, 9, 0), 9);
	CHECK(strcmp(buf, "a secret") == 0);

	/* The pages live as long as the file: unmapped and mapped again, they
	 * still hold what was written. */
	CHECK_OK(munmap(p, len));
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	CHECK(strcmp((char *)p + pg, "a secret") == 0);
	/* ... and the mapping outlives the descriptor. */
	CHECK_OK(close(fd));
	CHECK(strcmp((char *)p + pg, "a secret") == 0);
	CHECK_OK(munmap(p, len));

	/* A file whose size is never set maps nothing usable; one sized in
	 * pages and mapped whole works at once. */
	fd = secret(O_CLOEXEC);
	CHECK_OK(ftruncate(fd, 5000));
	p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	p[2 * pg - 1] = 1;
	CHECK_OK(munmap(p, 2 * pg));
	close(fd);
	return checks_done();
}
