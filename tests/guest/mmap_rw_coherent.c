/* read(2) and write(2) of a file see its MAP_SHARED mappings, and the
 * mappings see them, at once: Linux has one page cache under both. sqlite
 * with mmap_size, LMDB and bbolt read through a shared mapping and write
 * with pwrite. nomu's shared mappings show pages of their own, which a
 * write through a descriptor did not reach (the mapping kept the old
 * bytes) and a read did not see (it got the file's, not the mapping's).
 *
 * Every call that moves a file's bytes, both ways: read, pread, readv,
 * preadv, preadv2; write, pwrite, writev, pwritev, O_APPEND; ftruncate
 * (shrink then grow), truncate, O_TRUNC, fallocate's punch hole;
 * sendfile, copy_file_range and splice from and into the file; a forked
 * child on either side; a writer racing msync of the same pages (no
 * write may be undone by a write-back of the old bytes); and a flock that
 * goes with the description it was taken on. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define PAGE 4096
#define LEN (4 * PAGE)

/* musl has no wrappers for these. */
static long raw_preadv2(int fd, const struct iovec *iov, int cnt, long off, int flags)
{
	return syscall(SYS_preadv2, fd, iov, cnt, off, 0, flags);
}

static long raw_pwritev2(int fd, const struct iovec *iov, int cnt, long off, int flags)
{
	return syscall(SYS_pwritev2, fd, iov, cnt, off, 0, flags);
}

static char path[] = "/tmp/nomu-coherent-XXXXXX";
static char other[] = "/tmp/nomu-coherent-b-XXXXXX";

static int same(const volatile char *p, const char *s)
{
	for (size_t i = 0; s[i]; i++)
		if (p[i] != s[i])
			return 0;
	return 1;
}

static int zeros(const volatile char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Writes through a descriptor reach both shared mappings. */
static void writes_reach_mappings(int fd, volatile char *rw, volatile char *ro)
{
	CHECK_EQ(pwrite(fd, "pwrite", 6, 100), 6);
	CHECK(same(rw + 100, "pwrite"));
	CHECK(same(ro + 100, "pwrite"));

	CHECK_EQ(lseek(fd, 200, SEEK_SET), 200);
	CHECK_EQ(write(fd, "write", 5), 5);
	CHECK(same(ro + 200, "write"));

	/* Across a page boundary, from two buffers. */
	struct iovec iov[2] = {{"across-", 7}, {"pages", 5}};
	CHECK_EQ(lseek(fd, PAGE - 4, SEEK_SET), PAGE - 4);
	CHECK_EQ(writev(fd, iov, 2), 12);
	CHECK(same(ro + PAGE - 4, "across-pages"));

	struct iovec v2[2] = {{"pwr", 3}, {"itev", 4}};
	CHECK_EQ(pwritev(fd, v2, 2, 3 * PAGE + 10), 7);
	CHECK(same(ro + 3 * PAGE + 10, "pwritev"));
	struct iovec v3[1] = {{"pwritev2", 8}};
	CHECK_EQ(raw_pwritev2(fd, v3, 1, 3 * PAGE + 30, 0), 8);
	CHECK(same(rw + 3 * PAGE + 30, "pwritev2"));

	/* The mapping's own bytes beside a write stay (the page is not read
	 * again whole). */
	rw[300] = 'M';
	CHECK_EQ(pwrite(fd, "x", 1, 301), 1);
	CHECK_EQ(rw[300], 'M');
	CHECK_EQ(rw[301], 'x');

	/* O_APPEND writes at the end, wherever the offset is. */
	int app = open(path, O_WRONLY | O_APPEND);
	CHECK(app >= 0);
	CHECK_EQ(ftruncate(fd, 2 * PAGE), 0);
	CHECK_EQ(write(app, "appended", 8), 8);
	CHECK(same(ro + 2 * PAGE, "appended"));
	CHECK_EQ(pwrite(app, "again", 5, 0), 5);
	CHECK(same(ro + 2 * PAGE + 8, "again"));
	close(app);
	CHECK_EQ(ftruncate(fd, LEN), 0);
}

/* Reads through a descriptor see what the mappings wrote. */
static void reads_see_mappings(int fd, volatile char *rw)
{
	char buf[32] = {0};
	memcpy((char *)rw + 500, "stored", 6);
	CHECK_EQ(pread(fd, buf, 6, 500), 6);
	CHECK(!memcmp(buf, "stored", 6));

	memcpy((char *)rw + 600, "by-read", 7);
	CHECK_EQ(lseek(fd, 600, SEEK_SET), 600);
	CHECK_EQ(read(fd, buf, 7), 7);
	CHECK(!memcmp(buf, "by-read", 7));
	/* The offset moved as a read moves it. */
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 607);

	memcpy((char *)rw + 2 * PAGE - 3, "split!", 6);
	char a[4] = {0}, b[4] = {0};
	struct iovec iov[2] = {{a, 2}, {b, 4}};
	CHECK_EQ(lseek(fd, 2 * PAGE - 3, SEEK_SET), 2 * PAGE - 3);
	CHECK_EQ(readv(fd, iov, 2), 6);
	CHECK(!memcmp(a, "sp", 2) && !memcmp(b, "lit!", 4));
	memset(a, 0, 4);
	memset(b, 0, 4);
	CHECK_EQ(preadv(fd, iov, 2, 2 * PAGE - 3), 6);
	CHECK(!memcmp(a, "sp", 2) && !memcmp(b, "lit!", 4));
	memset(buf, 0, sizeof buf);
	struct iovec one = {buf, 6};
	CHECK_EQ(raw_preadv2(fd, &one, 1, 2 * PAGE - 3, 0), 6);
	CHECK(!memcmp(buf, "split!", 6));

	/* A read past the file's end reads nothing, whatever the page holds. */
	CHECK_EQ(pread(fd, buf, 8, LEN), 0);
}

/* Size changes: bytes past the smaller size read as zero afterwards. */
static void truncation(int fd, volatile char *rw)
{
	memcpy((char *)rw + 5000, "before-shrink", 13);
	memcpy((char *)rw + 3 * PAGE, "last-page", 9);
	CHECK_EQ(ftruncate(fd, 5004), 0);
	CHECK_EQ(ftruncate(fd, LEN), 0);
	CHECK(same(rw + 5000, "befo"));
	CHECK(zeros(rw + 5004, 9));
	CHECK(zeros(rw + 3 * PAGE, 9));

	memcpy((char *)rw + 7000, "truncated", 9);
	CHECK_EQ(truncate(path, 7002), 0);
	CHECK_EQ(truncate(path, LEN), 0);
	CHECK(same(rw + 7000, "tr"));
	CHECK(zeros(rw + 7002, 7));

	memcpy((char *)rw + 50, "o_trunc", 7);
	int t = open(path, O_RDWR | O_TRUNC);
	CHECK(t >= 0);
	CHECK_EQ(ftruncate(t, LEN), 0);
	close(t);
	CHECK(zeros(rw, LEN));

	/* A hole punched reads as zeros through the mapping. Not every file
	 * system punches holes (then the mapping keeps its bytes, as the file
	 * does). */
	memcpy((char *)rw + PAGE, "punched", 7);
	CHECK_EQ(pwrite(fd, "kept", 4, PAGE + 7), 4);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, PAGE, PAGE) == 0) {
		CHECK(zeros(rw + PAGE, 11));
	} else {
		CHECK(errno == EOPNOTSUPP);
	}
}

/* The host's own copies from and into the file. */
static void copies(int fd, volatile char *rw)
{
	char buf[32] = {0};
	int p[2];
	CHECK_OK(pipe(p));

	memcpy((char *)rw + 800, "to-sendfile", 11);
	off_t off = 800;
	CHECK_EQ(sendfile(p[1], fd, &off, 11), 11);
	CHECK_EQ(off, 811);
	CHECK_EQ(read(p[0], buf, sizeof buf), 11);
	CHECK(!memcmp(buf, "to-sendfile", 11));

	memcpy((char *)rw + 900, "to-splice", 9);
	loff_t lo = 900;
	CHECK_EQ(splice(fd, &lo, p[1], NULL, 9, 0), 9);
	CHECK_EQ(read(p[0], buf, sizeof buf), 9);
	CHECK(!memcmp(buf, "to-splice", 9));

	CHECK_EQ(write(p[1], "from-splice", 11), 11);
	lo = 1000;
	CHECK_EQ(splice(p[0], NULL, fd, &lo, 11, 0), 11);
	CHECK(same(rw + 1000, "from-splice"));

	int o = mkstemp(other);
	CHECK(o >= 0);
	memcpy((char *)rw + 1100, "to-copy", 7);
	loff_t in = 1100, out = 0;
	CHECK_EQ(copy_file_range(fd, &in, o, &out, 7, 0), 7);
	CHECK_EQ(pread(o, buf, 7, 0), 7);
	CHECK(!memcmp(buf, "to-copy", 7));

	CHECK_EQ(pwrite(o, "from-copy", 9, 20), 9);
	in = 20;
	out = 1200;
	CHECK_EQ(copy_file_range(o, &in, fd, &out, 9, 0), 9);
	CHECK(same(rw + 1200, "from-copy"));

	/* Into the file at its offset (sendfile's output always is). */
	CHECK_EQ(lseek(fd, 1300, SEEK_SET), 1300);
	off = 20;
	CHECK_EQ(sendfile(fd, o, &off, 9), 9);
	CHECK(same(rw + 1300, "from-copy"));
	close(o);
	unlink(other);
	close(p[0]);
	close(p[1]);
}

/* A forked child on either side of the file. */
static void forked(int fd, volatile char *rw)
{
	memcpy((char *)rw + 1500, "parent", 6);
	pid_t c = fork();
	if (c == 0) {
		char buf[8] = {0};
		if (pwrite(fd, "child", 5, 1400) != 5)
			_exit(1);
		if (pread(fd, buf, 6, 1500) != 6 || memcmp(buf, "parent", 6))
			_exit(2);
		memcpy((char *)rw + 1600, "child-store", 11);
		_exit(0);
	}
	int st;
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(same(rw + 1400, "child"));
	char buf[16] = {0};
	CHECK_EQ(pread(fd, buf, 11, 1600), 11);
	CHECK(!memcmp(buf, "child-store", 11));
}

static volatile int racing = 1;
static volatile char *race_map;

static void *syncer(void *arg)
{
	(void)arg;
	while (racing)
		msync((void *)race_map, LEN, MS_SYNC);
	return NULL;
}

/* Writes while another thread writes the pages back: each write is what a
 * read then finds, through the descriptor and through the mapping. */
static void write_racing_writeback(int fd, volatile char *rw)
{
	race_map = rw;
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, syncer, NULL), 0);
	int lost = 0;
	for (unsigned i = 0; i < 3000; i++) {
		unsigned got = 0;
		if (pwrite(fd, &i, 4, 2 * PAGE + 64) != 4 || pread(fd, &got, 4, 2 * PAGE + 64) != 4 || got != i ||
		    *(volatile unsigned *)(rw + 2 * PAGE + 64) != i)
			lost++;
	}
	racing = 0;
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(lost, 0);
}

/* A flock on the description a mapping was made through goes once the
 * descriptor is closed and the mapping unmapped, while another mapping of
 * the file lives on (nomu's pages must not hold that description). */
static void flock_released(void)
{
	int a = open(path, O_RDWR), b = open(path, O_RDWR);
	CHECK(a >= 0 && b >= 0);
	CHECK_OK(flock(a, LOCK_EX));
	void *ma = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, a, 0);
	void *mb = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, b, 0);
	CHECK(ma != MAP_FAILED && mb != MAP_FAILED);
	CHECK_OK(munmap(ma, PAGE));
	close(a);
	int c = open(path, O_RDONLY);
	CHECK_OK(flock(c, LOCK_EX | LOCK_NB));
	close(c);
	CHECK_OK(munmap(mb, PAGE));
	close(b);
}

int main(void)
{
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, LEN), 0);
	volatile char *rw = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	volatile char *ro = mmap(NULL, LEN, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(rw != MAP_FAILED && ro != MAP_FAILED);

	writes_reach_mappings(fd, rw, ro);
	reads_see_mappings(fd, rw);
	truncation(fd, rw);
	copies(fd, rw);
	forked(fd, rw);
	write_racing_writeback(fd, rw);

	/* After the last mapping goes, the file has everything. */
	memcpy((char *)rw + 3000, "last-word", 9);
	CHECK_EQ(munmap((void *)rw, LEN), 0);
	CHECK_EQ(munmap((void *)ro, LEN), 0);
	char buf[16] = {0};
	CHECK_EQ(pread(fd, buf, 9, 3000), 9);
	CHECK(!memcmp(buf, "last-word", 9));
	/* With no mapping left, the next is the first again. */
	flock_released();
	close(fd);
	unlink(path);
	return nomu_checks_done("mmap_rw_coherent");
}
