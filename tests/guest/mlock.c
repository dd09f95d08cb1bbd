/* mlock, mlock2, munlock, mlockall, munlockall and RLIMIT_MEMLOCK as
 * Linux counts them (mm/mlock.c): locked memory is mm->locked_vm, shown
 * as /proc/PID/status's VmLck, made of mlock'd ranges and memfd_secret
 * mappings (VM_LOCKED from their mmap, which munlock leaves locked);
 * without CAP_IPC_LOCK mlock past the limit is ENOMEM, a limit of 0 EPERM,
 * a secret mmap (or any mmap after mlockall(MCL_FUTURE)) past it EAGAIN;
 * munlock and munmap give it back. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif

/* VmLck in kB (read without malloc: after mlockall(MCL_FUTURE) the heap's
 * growth would be locked too). */
static long vmlck(void)
{
	static char text[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	text[n] = 0;
	char *at = strstr(text, "VmLck:");
	return at ? strtol(at + 6, NULL, 10) : -1;
}

#define CAP_V3 0x20080522
#define CAP_IPC_LOCK 14
struct cap_header {
	uint32_t version;
	int pid;
};
struct cap_data {
	uint32_t effective, permitted, inheritable;
};

static void drop_ipc_lock(void)
{
	struct cap_header h = { CAP_V3, 0 };
	struct cap_data d[2];
	CHECK_OK(syscall(SYS_capget, &h, d));
	d[0].effective &= ~(1u << CAP_IPC_LOCK);
	CHECK_OK(syscall(SYS_capset, &h, d));
}

static void limit(rlim_t bytes)
{
	struct rlimit r;
	CHECK_OK(getrlimit(RLIMIT_MEMLOCK, &r));
	r.rlim_cur = bytes;
	CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &r));
}

int main(void)
{
	const size_t pg = 4096;
	drop_ipc_lock();
	limit(16 * pg);
	long base = vmlck();
	CHECK(base >= 0);
#define LCK() (vmlck() - base)

	char *p = mmap(NULL, 16 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	CHECK_OK(mlock(p, 8 * pg));
	CHECK_EQ(LCK(), 32);
	/* Rounded out to pages; what is locked already is not counted twice. */
	CHECK_OK(mlock(p + 100, 10));
	CHECK_EQ(LCK(), 32);
	CHECK_OK(mlock(p + pg - 1, 2));
	CHECK_EQ(LCK(), 32);
	CHECK_OK(mlock(p, 16 * pg));
	CHECK_EQ(LCK(), 64);
	CHECK_OK(mlock(p, 0));
	CHECK_ERR(munlock(p, (size_t)-4096), EINVAL);

	/* Past the limit: ENOMEM. */
	char *q = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(q != MAP_FAILED);
	CHECK_ERR(mlock(q, pg), ENOMEM);
	CHECK_OK(munlock(p + 4 * pg, 4 * pg));
	CHECK_EQ(LCK(), 48);
	CHECK_ERR(mlock2(q, pg, 2), EINVAL);
	CHECK_OK(mlock2(q, pg, MLOCK_ONFAULT));
	CHECK_EQ(LCK(), 52);
	/* munmap of locked pages gives them back. */
	CHECK_OK(munmap(p + 12 * pg, 4 * pg));
	CHECK_EQ(LCK(), 36);
	/* A hole in the range: ENOMEM, for mlock and munlock. */
	CHECK_ERR(mlock(p + 10 * pg, 4 * pg), ENOMEM);
	CHECK_ERR(munlock(p + 10 * pg, 4 * pg), ENOMEM);
	CHECK_OK(munlock(p, 12 * pg));
	CHECK_EQ(LCK(), 4);
	CHECK_OK(munlock(q, 4 * pg));
	CHECK_EQ(LCK(), 0);

	/* A memfd_secret mapping is locked memory: counted, checked against
	 * the limit at mmap (EAGAIN), and munlock leaves it locked. */
	int fd = syscall(447, 0);
	CHECK(fd >= 0);
	CHECK_OK(ftruncate(fd, 32 * pg));
	char *s = mmap(NULL, 8 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(s != MAP_FAILED);
	CHECK_EQ(LCK(), 32);
	CHECK(mmap(NULL, 12 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EAGAIN);
	CHECK_OK(munlock(s, 8 * pg));
	CHECK_EQ(LCK(), 32);
	CHECK_OK(mlock(p, 8 * pg));
	CHECK_EQ(LCK(), 64);
	CHECK_ERR(mlock(q, pg), ENOMEM);
	CHECK_OK(munlock(p, 8 * pg));

	/* mlockall's flags. */
	CHECK_ERR(mlockall(0), EINVAL);
	CHECK_ERR(mlockall(MCL_ONFAULT), EINVAL);
	CHECK_ERR(mlockall(8), EINVAL);
	CHECK_ERR(mlockall(MCL_CURRENT), ENOMEM);
	CHECK_ERR(mlockall(MCL_CURRENT | MCL_FUTURE), ENOMEM);
	/* MCL_FUTURE: what is mapped next is locked, within the limit. */
	CHECK_OK(mlockall(MCL_FUTURE));
	char *f = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(f != MAP_FAILED);
	CHECK_EQ(LCK(), 48);
	CHECK(mmap(NULL, 8 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED &&
	      errno == EAGAIN);
	CHECK_OK(mlockall(MCL_FUTURE | MCL_ONFAULT));
	/* munlockall unlocks all but the secret mapping, and the future. */
	CHECK_OK(munlockall());
	CHECK_EQ(LCK(), 32);
	char *g = mmap(NULL, 8 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(g != MAP_FAILED);
	CHECK_EQ(LCK(), 32);
	CHECK_OK(munmap(s, 8 * pg));
	CHECK_EQ(LCK(), 0);

	/* A limit of 0: EPERM, but munlock and munlockall still work. */
	limit(0);
	CHECK_ERR(mlock(p, pg), EPERM);
	CHECK_ERR(mlock2(p, pg, 0), EPERM);
	CHECK_ERR(mlockall(MCL_FUTURE), EPERM);
	CHECK_OK(munlock(p, pg));
	CHECK_OK(munlockall());
	CHECK(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EAGAIN);
	/* Unlocked memory that is not mapped: ENOMEM. */
	CHECK_OK(munmap(q, 4 * pg));
	CHECK_ERR(munlock(q, pg), ENOMEM);
	close(fd);
	return checks_done();
}
