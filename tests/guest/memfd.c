/* memfd_create: flags, names, its /proc/self/fd link, seals (and what
 * they refuse: writes, growth, shrinking, writable shared mappings), and a
 * MAP_SHARED mapping seen through read/write. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static int memfd(const char *name, unsigned flags)
{
	return syscall(SYS_memfd_create, name, flags);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Errors. */
	CHECK_ERR(memfd("x", 0x100), EINVAL);
	CHECK_ERR(memfd((char *)8, 0), EFAULT);
	char longname[300];
	memset(longname, 'n', sizeof longname);
	longname[250] = 0;
	CHECK_ERR(memfd(longname, 0), EINVAL);
	longname[249] = 0;
	int fd = memfd(longname, 0);
	CHECK(fd >= 0);
	close(fd);

	/* MFD_CLOEXEC and its link in /proc/self/fd. */
	fd = memfd("nomu-test", MFD_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
	CHECK_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	char link[64], target[128];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof target - 1);
	CHECK(n > 0);
	target[n > 0 ? n : 0] = 0;
	printf("link: %s\n", target);
	struct stat st;
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_size, 0);
	/* Without MFD_ALLOW_SEALING, F_SEAL_SEAL is already there. */
	CHECK_EQ(fcntl(fd, F_GET_SEALS), F_SEAL_SEAL);
	CHECK_ERR(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), EPERM);

	/* A shared mapping shows what was written, and what is stored
	 * through it reaches the file by msync (nomu's shared file mappings
	 * are copies: README, Limitations). */
	CHECK_OK(ftruncate(fd, 8192));
	CHECK_EQ(pwrite(fd, "written", 7, 4096), 7);
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	CHECK(!memcmp(m + 4096, "written", 7));
	memcpy(m, "mapped", 6);
	CHECK_OK(msync(m, 8192, MS_SYNC));
	char buf[16] = { 0 };
	CHECK_EQ(pread(fd, buf, 6, 0), 6);
	printf("read back: %s\n", buf);
	CHECK_OK(munmap(m, 8192));
	close(fd);

	/* Seals. */
	fd = memfd("sealed", MFD_ALLOW_SEALING);
	CHECK(fd >= 0);
	CHECK_EQ(fcntl(fd, F_GET_SEALS), 0);
	CHECK_EQ(write(fd, "0123456789", 10), 10);
	CHECK_ERR(fcntl(fd, F_ADD_SEALS, 0x1000), EINVAL);
	CHECK_OK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
	CHECK_EQ(fcntl(fd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW);
	CHECK_ERR(ftruncate(fd, 5), EPERM);
	CHECK_ERR(ftruncate(fd, 20), EPERM);
	CHECK_ERR(pwrite(fd, "x", 1, 10), EPERM);
	CHECK_EQ(pwrite(fd, "x", 1, 9), 1);
	/* A writable shared mapping keeps F_SEAL_WRITE out. */
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	CHECK_ERR(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), EBUSY);
	CHECK_OK(munmap(m, 4096));
	CHECK_OK(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE));
	CHECK_ERR(write(fd, "y", 1), EPERM);
	CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EPERM);
	m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	CHECK(!memcmp(m, "012345678x", 10));
	/* A private writable mapping is not a write to the file. */
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	CHECK(p != MAP_FAILED);
	p[0] = 'P';
	CHECK_OK(fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL));
	CHECK_ERR(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW), EPERM);
	printf("seals: %#x\n", fcntl(fd, F_GET_SEALS));
	/* A read-only descriptor of it cannot add seals. */
	int fd2 = memfd("other", MFD_ALLOW_SEALING);
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd2);
	int ro = open(link, O_RDONLY);
	CHECK(ro >= 0);
	CHECK_ERR(fcntl(ro, F_ADD_SEALS, F_SEAL_GROW), EPERM);
	/* Not a memfd; read-only. */
	char tmp[] = "/tmp/nomu-memfd-XXXXXX";
	int plain = mkstemp(tmp);
	CHECK_ERR(fcntl(plain, F_ADD_SEALS, F_SEAL_GROW), EINVAL);
	CHECK_ERR(fcntl(plain, F_GET_SEALS), EINVAL);
	unlink(tmp);
	close(plain);
	CHECK_ERR(fcntl(0, F_ADD_SEALS, F_SEAL_GROW), EPERM);
	close(ro);
	close(fd2);
	close(fd);
	return checks_done();
}
