/* I/O into and out of a buffer that lies over two mappings of a forked
 * child (regression: nomu handed the host only the first mapping's part;
 * a pipe read with more data waiting failed with EFAULT, which hung
 * CPython's multiprocessing when a 2 MiB result straddled two of malloc's
 * arena mappings; a pread or write came back short).
 *
 * The child maps 2 MiB as two mappings (the second mapped over the
 * first's upper half), then with a 64 KiB buffer straddling them: one
 * read of a full pipe, one write to a pipe, one pread of a file; each
 * must move all 64 KiB, with the right bytes. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define MIB (1 << 20)
#define CHUNK 65536

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 7 + i / 251);
}

static int check_bytes(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern(i))
			return 0;
	return 1;
}

/* Exit codes: 0 as expected, else the step that went wrong. */
static int child(int in, int out, int file)
{
	unsigned char *a = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return 1;
	a[0] = 1;
	if (mmap(a + MIB, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != a + MIB)
		return 2;
	a[MIB] = 1;
	unsigned char *buf = a + MIB - CHUNK / 2;

	/* The pipe is full (the parent wrote CHUNK bytes): one read takes it. */
	int avail = 0;
	for (int i = 0; i < 5000 && avail < CHUNK; i++) {
		ioctl(in, FIONREAD, &avail);
		usleep(1000);
	}
	if (avail != CHUNK)
		return 3;
	if (read(in, buf, CHUNK) != CHUNK)
		return 4;
	if (!check_bytes(buf, CHUNK))
		return 5;
	/* Written back in one call. */
	if (write(out, buf, CHUNK) != CHUNK)
		return 6;
	/* A file read into it. */
	memset(buf, 0, CHUNK);
	if (pread(file, buf, CHUNK, 0) != CHUNK || !check_bytes(buf, CHUNK))
		return 7;
	struct iovec v = {buf, CHUNK};
	memset(buf, 0, CHUNK);
	if (preadv(file, &v, 1, 0) != CHUNK || !check_bytes(buf, CHUNK))
		return 8;
	return 0;
}

int main(void)
{
	static unsigned char data[CHUNK], back[CHUNK];
	for (size_t i = 0; i < CHUNK; i++)
		data[i] = pattern(i);
	char path[] = "/tmp/nomu-fork-straddle-XXXXXX";
	int file = mkstemp(path);
	CHECK(file >= 0);
	unlink(path);
	CHECK_EQ(write(file, data, CHUNK), CHUNK);
	int to_child[2], from_child[2];
	CHECK_OK(pipe(to_child));
	CHECK_OK(pipe(from_child));
	pid_t c = fork();
	if (c == 0)
		_exit(child(to_child[0], from_child[1], file));
	close(to_child[0]);
	close(from_child[1]);
	CHECK_EQ(write(to_child[1], data, CHUNK), CHUNK);
	size_t got = 0;
	ssize_t n;
	while (got < CHUNK && (n = read(from_child[0], back + got, CHUNK - got)) > 0)
		got += n;
	int status = -1;
	CHECK_EQ(waitpid(c, &status, 0), c);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	CHECK_EQ(got, CHUNK);
	CHECK(check_bytes(back, got));
	return checks_done();
}
