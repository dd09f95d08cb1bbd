/* Memory syscalls: mmap (anonymous, private file, MAP_FIXED inside an own
 * reservation), munmap (partial too), mremap, brk, madvise, mprotect, and the
 * EINVAL/ENOMEM cases.  Raw syscalls throughout, so the kernel ABI is hit
 * exactly (musl's wrappers check some arguments themselves).
 *
 * Whether an address range is mapped is probed without signals: write(2)
 * from it into a pipe copies from user memory and gives EFAULT when it is
 * not readable; read(2) from /dev/zero into it gives EFAULT when it is not
 * writable. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PG 4096UL

static char top[] = "/tmp/nomu-XXXXXX";
static int probe_pipe[2], zero_fd;

static void *rmmap(void *addr, size_t len, int prot, int flags, int fd, long off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static void *rmremap(void *old, size_t oldlen, size_t newlen, int flags)
{
	return (void *)syscall(SYS_mremap, old, oldlen, newlen, flags, 0);
}

#define ANON(len) rmmap(NULL, (len), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)

/* 1 when one byte at p is readable. */
static int readable(const void *p)
{
	char c;
	long n = write(probe_pipe[1], p, 1);
	if (n == 1) {
		if (read(probe_pipe[0], &c, 1) != 1)
			return -1;
		return 1;
	}
	return n == -1 && errno == EFAULT ? 0 : -1;
}

/* 1 when one byte at p is writable (it becomes 0). */
static int writable(void *p)
{
	long n = read(zero_fd, p, 1);
	if (n == 1)
		return 1;
	return n == -1 && errno == EFAULT ? 0 : -1;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 7 + (i >> 12) + 1);
}

static void test_anon(void)
{
	printf("== anonymous mmap/munmap\n");
	unsigned char *p = ANON(16 * PG);
	CHECK(p != MAP_FAILED);
	CHECK_EQ((uintptr_t)p % PG, 0);
	CHECK(all_bytes(p, 16 * PG, 0));
	for (size_t i = 0; i < 16 * PG; i++)
		p[i] = pattern(i);
	int ok = 1;
	for (size_t i = 0; i < 16 * PG; i++)
		ok &= p[i] == pattern(i);
	CHECK(ok);

	/* munmap a hole in the middle, then the head: the rest keeps data */
	CHECK_OK(syscall(SYS_munmap, p + 4 * PG, 2 * PG));
	CHECK_EQ(readable(p + 4 * PG), 0);
	CHECK_EQ(readable(p + 5 * PG + 100), 0);
	CHECK_EQ(readable(p + 3 * PG + 4095), 1);
	CHECK_EQ(readable(p + 6 * PG), 1);
	CHECK_EQ(p[6 * PG + 5], pattern(6 * PG + 5));
	CHECK_EQ(p[3 * PG + 5], pattern(3 * PG + 5));
	CHECK_OK(syscall(SYS_munmap, p, PG));
	CHECK_EQ(readable(p), 0);
	CHECK_EQ(p[PG], pattern(PG));
	/* unmapping a range with holes in it, and an empty range, is fine */
	CHECK_OK(syscall(SYS_munmap, p, 16 * PG));
	CHECK_EQ(readable(p + 10 * PG), 0);
	CHECK_OK(syscall(SYS_munmap, p, 16 * PG));

	/* a length that is not a page multiple is rounded up */
	p = ANON(100);
	CHECK(p != MAP_FAILED);
	CHECK_EQ(writable(p + PG - 1), 1);
	CHECK_OK(syscall(SYS_munmap, p, 100));
	CHECK_EQ(readable(p), 0);

	/* PROT_NONE reservation: neither readable nor writable */
	p = rmmap(NULL, 4 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	CHECK_EQ(readable(p), 0);
	CHECK_OK(syscall(SYS_munmap, p, 4 * PG));
}

static void test_file(void)
{
	printf("== file mmap (MAP_PRIVATE, MAP_FIXED)\n");
	/* A 3.5-page file with a known pattern. */
	size_t flen = 3 * PG + PG / 2;
	unsigned char *data = ANON(4 * PG);
	for (size_t i = 0; i < flen; i++)
		data[i] = pattern(i);
	int fd = open("map.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, data, flen), flen);

	/* whole file: contents match, the tail of the last page is zero */
	unsigned char *m = rmmap(NULL, flen, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	CHECK(m != MAP_FAILED);
	CHECK(memcmp(m, data, flen) == 0);
	CHECK(all_bytes(m + flen, PG / 2, 0));

	/* private writes do not reach the file */
	memset(m + 10, 'W', 100);
	unsigned char back[200];
	CHECK_EQ(pread(fd, back, 200, 0), 200);
	CHECK(memcmp(back, data, 200) == 0);
	/* madvise(MADV_DONTNEED) on a private file mapping drops the private
	 * copy: the page reads the file again */
	CHECK_OK(syscall(SYS_madvise, m, PG, MADV_DONTNEED));
	CHECK(memcmp(m, data, PG) == 0);

	/* (Whether a later write(2) to the file shows through a page of a
	 * MAP_PRIVATE mapping not yet written is unspecified: not tested.) */
	CHECK_OK(syscall(SYS_munmap, m, flen));

	/* offset mapping */
	m = rmmap(NULL, 2 * PG, PROT_READ, MAP_PRIVATE, fd, PG);
	CHECK(m != MAP_FAILED);
	CHECK(memcmp(m, data + PG, 2 * PG) == 0);
	CHECK_OK(syscall(SYS_munmap, m, 2 * PG));

	/* the dynamic-linker pattern: reserve a span, then MAP_FIXED the
	 * file's pieces and an anonymous (bss-like) part inside it */
	unsigned char *base = rmmap(NULL, 32 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(base != MAP_FAILED);
	unsigned char *seg1 = rmmap(base, 2 * PG, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
	CHECK(seg1 == base);
	CHECK(memcmp(seg1, data, 2 * PG) == 0);
	unsigned char *seg2 = rmmap(base + 8 * PG, 2 * PG, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_FIXED, fd, 2 * PG);
	CHECK(seg2 == base + 8 * PG);
	CHECK(memcmp(seg2, data + 2 * PG, flen - 2 * PG) == 0);
	CHECK(all_bytes(seg2 + flen - 2 * PG, 4 * PG - flen, 0)); /* past EOF */
	seg2[0] = 0xAB;
	unsigned char *bss = rmmap(base + 10 * PG, 4 * PG, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(bss == base + 10 * PG);
	CHECK(all_bytes(bss, 4 * PG, 0));
	memset(bss, 0x5A, 4 * PG);
	CHECK_EQ(readable(base + 4 * PG), 0);	 /* still PROT_NONE */
	CHECK_EQ(writable(base), 0);		 /* PROT_READ */
	CHECK_EQ(seg2[0], 0xAB);
	/* MAP_FIXED over data replaces it */
	unsigned char *again = rmmap(base + 11 * PG, PG, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(again == base + 11 * PG);
	CHECK(all_bytes(again, PG, 0));
	CHECK(all_bytes(bss, PG, 0x5A));
	CHECK(all_bytes(bss + 2 * PG, 2 * PG, 0x5A));
	/* mprotect inside the span */
	CHECK_OK(syscall(SYS_mprotect, base + 4 * PG, 2 * PG, PROT_READ | PROT_WRITE));
	CHECK(all_bytes(base + 4 * PG, 2 * PG, 0));
	CHECK_OK(syscall(SYS_munmap, base, 32 * PG));
	CHECK_EQ(readable(base + 10 * PG), 0);

	/* errors with files */
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, MAP_PRIVATE, 9999, 0), EBADF);
	int wo = open("map.bin", O_WRONLY);
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, MAP_PRIVATE, wo, 0), EACCES);
	close(wo);
	/* A shared mapping of a read-only descriptor can never be made
	 * writable (regression: mprotect let it); a private one can. */
	int ro = open("map.bin", O_RDONLY);
	unsigned char *shared = rmmap(NULL, PG, PROT_READ, MAP_SHARED, ro, 0);
	CHECK(shared != MAP_FAILED);
	CHECK_ERR(syscall(SYS_mprotect, shared, PG, PROT_READ | PROT_WRITE), EACCES);
	CHECK_EQ(writable(shared), 0);
	CHECK_OK(syscall(SYS_mprotect, shared, PG, PROT_READ | PROT_EXEC));
	CHECK_OK(syscall(SYS_munmap, shared, PG));
	unsigned char *private = rmmap(NULL, PG, PROT_READ, MAP_PRIVATE, ro, 0);
	CHECK(private != MAP_FAILED);
	CHECK_OK(syscall(SYS_mprotect, private, PG, PROT_READ | PROT_WRITE));
	private[0] = 1;
	CHECK_OK(syscall(SYS_munmap, private, PG));
	close(ro);
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, MAP_PRIVATE, fd, 100), EINVAL);
	close(fd);
	CHECK_OK(unlink("map.bin"));
	CHECK_OK(syscall(SYS_munmap, data, 4 * PG));
}

static void test_mremap(void)
{
	printf("== mremap\n");
	unsigned char *p = ANON(4 * PG);
	CHECK(p != MAP_FAILED);
	for (size_t i = 0; i < 4 * PG; i++)
		p[i] = pattern(i);

	/* grow with MREMAP_MAYMOVE: contents kept, the new part zero */
	unsigned char *q = rmremap(p, 4 * PG, 64 * PG, MREMAP_MAYMOVE);
	CHECK(q != MAP_FAILED);
	int ok = 1;
	for (size_t i = 0; i < 4 * PG; i++)
		ok &= q[i] == pattern(i);
	CHECK(ok);
	CHECK(all_bytes(q + 4 * PG, 60 * PG, 0));
	memset(q + 60 * PG, 0x11, 4 * PG);

	/* shrink in place */
	unsigned char *r = rmremap(q, 64 * PG, 2 * PG, 0);
	CHECK(r == q);
	CHECK_EQ(r[PG + 7], pattern(PG + 7));
	CHECK_EQ(readable(q + 2 * PG), 0);
	CHECK_EQ(readable(q + 63 * PG), 0);

	/* growing in place fails with ENOMEM when the next page is in use */
	unsigned char *s = ANON(3 * PG);
	CHECK(s != MAP_FAILED);
	s[0] = 1;
	CHECK_ERR(syscall(SYS_mremap, s, PG, 2 * PG, 0, 0), ENOMEM);
	/* ... but may move with MREMAP_MAYMOVE, leaving the old range unmapped */
	unsigned char *t = rmremap(s, PG, 2 * PG, MREMAP_MAYMOVE);
	CHECK(t != MAP_FAILED && t != s);
	CHECK_EQ(t[0], 1);
	CHECK_EQ(readable(s), 0);
	CHECK_EQ(readable(s + PG), 1);

	/* errors */
	CHECK_ERR(syscall(SYS_mremap, r, 2 * PG, 0, MREMAP_MAYMOVE, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mremap, r + 1, PG, 2 * PG, MREMAP_MAYMOVE, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mremap, r, 2 * PG, 4 * PG, MREMAP_FIXED, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mremap, r, 2 * PG, 4 * PG, 0x40, 0), EINVAL);

	CHECK_OK(syscall(SYS_munmap, r, 2 * PG));
	CHECK_OK(syscall(SYS_munmap, t, 2 * PG));
	CHECK_OK(syscall(SYS_munmap, s, 3 * PG));
}

static void test_brk(void)
{
	printf("== brk\n");
	/* No malloc in between: musl's allocator may use brk as well. */
	uintptr_t cur = syscall(SYS_brk, 0);
	CHECK(cur != 0);
	CHECK_EQ(syscall(SYS_brk, 0), cur);
	uintptr_t want = cur + 3 * PG + 123;
	CHECK_EQ(syscall(SYS_brk, want), want);
	CHECK_EQ(syscall(SYS_brk, 0), want);
	unsigned char *heap = (unsigned char *)cur;
	CHECK(all_bytes(heap, 3 * PG + 123, 0));
	memset(heap, 0x77, 3 * PG + 123);
	/* the page holding the break is mapped to its end */
	CHECK_EQ(writable(heap + 3 * PG + 200), 1);
	CHECK_EQ(heap[3 * PG + 122], 0x77);

	/* shrink back: the pages above are gone, and come back zeroed */
	CHECK_EQ(syscall(SYS_brk, cur), cur);
	CHECK_EQ(syscall(SYS_brk, 0), cur);
	uintptr_t pg_end = (cur + PG - 1) & ~(PG - 1);
	CHECK_EQ(readable((void *)(pg_end + PG)), 0);
	CHECK_EQ(syscall(SYS_brk, cur + 2 * PG), cur + 2 * PG);
	CHECK(all_bytes((unsigned char *)pg_end, PG, 0));

	/* a request below the start of the heap fails by returning the old
	 * break, not -1 */
	CHECK_EQ(syscall(SYS_brk, 4096), cur + 2 * PG);
	CHECK_EQ(syscall(SYS_brk, cur), cur);
}

static void test_madvise_mprotect(void)
{
	printf("== madvise/mprotect\n");
	unsigned char *p = ANON(8 * PG);
	CHECK(p != MAP_FAILED);
	memset(p, 0xEE, 8 * PG);
	CHECK_OK(syscall(SYS_madvise, p + 2 * PG, 3 * PG, MADV_DONTNEED));
	CHECK(all_bytes(p + 2 * PG, 3 * PG, 0));
	CHECK(all_bytes(p, 2 * PG, 0xEE));
	CHECK(all_bytes(p + 5 * PG, 3 * PG, 0xEE));
	CHECK_OK(syscall(SYS_madvise, p, 8 * PG, MADV_NORMAL));
	CHECK_OK(syscall(SYS_madvise, p, 8 * PG, MADV_WILLNEED));
	CHECK_OK(syscall(SYS_madvise, p, 8 * PG, MADV_DONTNEED));
	CHECK(all_bytes(p, 8 * PG, 0));
	CHECK_ERR(syscall(SYS_madvise, p + 1, PG, MADV_DONTNEED), EINVAL);
	CHECK_ERR(syscall(SYS_madvise, p, PG, 12345), EINVAL);

	/* mprotect: read-only, then read-write again */
	memset(p, 0x42, PG);
	CHECK_OK(syscall(SYS_mprotect, p, PG, PROT_READ));
	CHECK_EQ(p[100], 0x42); /* still readable */
	CHECK_EQ(readable(p), 1);
	CHECK_EQ(writable(p), 0);
	CHECK_EQ(writable(p + PG), 1); /* the next page is untouched */
	CHECK_OK(syscall(SYS_mprotect, p, PG, PROT_READ | PROT_WRITE));
	p[100] = 0x43;
	CHECK_EQ(p[100], 0x43);
	CHECK_EQ(p[101], 0x42);
	CHECK_OK(syscall(SYS_mprotect, p, 8 * PG, PROT_NONE));
	CHECK_EQ(readable(p + 3 * PG), 0);
	CHECK_OK(syscall(SYS_mprotect, p, 8 * PG, PROT_READ | PROT_WRITE));
	CHECK_EQ(p[101], 0x42);
	CHECK_ERR(syscall(SYS_mprotect, p + 1, PG, PROT_READ), EINVAL);
	CHECK_ERR(syscall(SYS_mprotect, p, PG, 0x100), EINVAL); /* unknown prot */
	CHECK_OK(syscall(SYS_munmap, p + 4 * PG, 4 * PG));
	/* mprotect / madvise over unmapped memory: ENOMEM */
	CHECK_ERR(syscall(SYS_mprotect, p, 8 * PG, PROT_READ), ENOMEM);
	CHECK_ERR(syscall(SYS_madvise, p + 4 * PG, PG, MADV_DONTNEED), ENOMEM);
	/* ... also for the advice that changes nothing, and msync, when only
	 * part of the range is unmapped (regression: nomu said 0) */
	CHECK_ERR(syscall(SYS_madvise, p + 3 * PG, 2 * PG, MADV_NORMAL), ENOMEM);
	CHECK_ERR(syscall(SYS_madvise, p + 3 * PG, 2 * PG, MADV_WILLNEED), ENOMEM);
	CHECK_ERR(syscall(SYS_msync, p + 3 * PG, 2 * PG, MS_SYNC), ENOMEM);
	CHECK_OK(syscall(SYS_msync, p, 4 * PG, MS_SYNC));
	CHECK_OK(syscall(SYS_munmap, p, 4 * PG));
}

static void test_errors(void)
{
	printf("== mmap errors\n");
	CHECK_ERR(syscall(SYS_mmap, NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 1), EINVAL);
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, MAP_ANONYMOUS, -1, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mmap, (void *)0x10001000UL + 5, PG, PROT_READ,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mmap, NULL, -PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), ENOMEM);
	/* Linux's order of checks (regression: nomu checked the length, the
	 * type and the protection before the descriptor, and refused unknown
	 * protection bits that Linux ignores). */
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, 0, 9999, 0), EBADF);
	CHECK_ERR(syscall(SYS_mmap, NULL, 0, PROT_READ, MAP_PRIVATE, 9999, 0), EBADF);
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, MAP_PRIVATE, 9999, 1), EINVAL);
	CHECK_ERR(syscall(SYS_mmap, (void *)0x10001005UL, PG, PROT_READ, MAP_PRIVATE | MAP_FIXED,
			  9999, 0), EBADF);
	CHECK_ERR(syscall(SYS_mmap, (void *)0x10001005UL, PG, PROT_READ, MAP_ANONYMOUS | MAP_FIXED,
			  -1, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mmap, NULL, -PG, PROT_READ, MAP_ANONYMOUS, -1, 0), ENOMEM);
	long odd = syscall(SYS_mmap, NULL, PG, PROT_READ | PROT_WRITE | 0x80,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(odd != -1);
	if (odd != -1) {
		*(volatile char *)odd = 1;
		CHECK_OK(syscall(SYS_munmap, odd, PG));
	}
	/* The mapping type is four bits (MAP_TYPE), and MAP_SHARED_VALIDATE
	 * refuses flags it does not know with EOPNOTSUPP; only files take it
	 * (regression: nomu looked at two bits and validated nothing). */
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, MAP_PRIVATE | 0x4 | MAP_ANONYMOUS, -1, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, 0x3 | MAP_ANONYMOUS, -1, 0), EINVAL);
	int vf = open("/proc/self/exe", O_RDONLY);
	CHECK(vf >= 0);
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, 0x3 | 0x80000 /* MAP_SYNC */, vf, 0), EOPNOTSUPP);
	CHECK_ERR(syscall(SYS_mmap, NULL, PG, PROT_READ, 0x3 | (1L << 40), vf, 0), EOPNOTSUPP);
	long sv = syscall(SYS_mmap, NULL, PG, PROT_READ, 0x3, vf, 0);
	CHECK(sv != -1);
	if (sv != -1)
		CHECK_OK(syscall(SYS_munmap, sv, PG));
	close(vf);
	/* munmap's range must lie below the top of user space. */
	CHECK_ERR(syscall(SYS_munmap, 0, -PG), EINVAL);
	CHECK_ERR(syscall(SYS_munmap, 0x1000, 0x7ffffffff000UL), EINVAL);
	CHECK_ERR(syscall(SYS_munmap, 0x800000000000UL, PG), EINVAL);
	void *p = ANON(2 * PG);
	CHECK(p != MAP_FAILED);
	CHECK_ERR(syscall(SYS_munmap, (char *)p + 1, PG), EINVAL);
	CHECK_ERR(syscall(SYS_munmap, p, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mprotect, (char *)p + 100, PG, PROT_READ), EINVAL);
	CHECK_OK(syscall(SYS_mprotect, p, 0, PROT_READ)); /* empty: nothing to do */
	CHECK_ERR(syscall(SYS_mremap, p, 2 * PG, 0, 0, 0), EINVAL);
	CHECK_OK(syscall(SYS_munmap, p, 2 * PG));
}

int main(void)
{
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 2;
	}
	CHECK_OK(chdir(top));
	CHECK_OK(pipe(probe_pipe));
	zero_fd = open("/dev/zero", O_RDONLY);
	CHECK(zero_fd >= 0);

	test_brk(); /* first, before stdio or anything else can move the break */
	test_anon();
	test_file();
	test_mremap();
	test_madvise_mprotect();
	test_errors();

	CHECK_OK(chdir("/"));
	CHECK_OK(rmdir(top));
	return checks_done();
}
