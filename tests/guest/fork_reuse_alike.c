/* A forked child sees its parent's memory as it is at the fork, whatever
 * the child before it did there. nomu runs the next forked child in the
 * host process of one whose guest is gone and keeps the mappings the new
 * child makes exactly alike (src/entry/split/shown.rs): the parent's file
 * mapping replaced by another file, or its protection changed, between two
 * forks, and a child that changed the protection of, or unmapped, its own
 * copy before it exited, must all leave the next child with the parent's
 * view. Several rounds, so that kept host processes come back. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PAGES 4
#define LEN (PAGES * 4096)

static sigjmp_buf env;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

/* What a child reads at `at`: the byte, or -1 for a fault. */
static int peek(volatile unsigned char *at)
{
	struct sigaction sa = {.sa_handler = on_segv, .sa_flags = SA_NODEFER};
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	if (sigsetjmp(env, 1))
		return -1;
	return at[0];
}

/* A file of LEN bytes of `fill`, opened read-only. */
static int file_of(unsigned char fill)
{
	char path[] = "/tmp/nomu-alike-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unsigned char buf[LEN];
	memset(buf, fill, sizeof buf);
	CHECK_EQ(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
	close(fd);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	unlink(path);
	return fd;
}

/* Forks a child that reads the last page at `at` (its exit status: the
 * byte + 1, or 0 for a fault) after `act` (0: nothing; 1: it makes the
 * range PROT_NONE; 2: it unmaps the first pages) has been done by the
 * child before. Returns what the reading child read, as peek does. */
static int child_reads(unsigned char *at, int act)
{
	int st;
	fflush(stdout);
	pid_t a = fork();
	if (a == 0) {
		/* Reads once (its host process faults the page in), a fault
		 * included. */
		(void)peek(at + LEN - 4096);
		if (act == 1 && mprotect(at, LEN, PROT_NONE))
			_exit(4);
		if (act == 2 && munmap(at, LEN - 4096))
			_exit(5);
		_exit(0);
	}
	CHECK(a > 0);
	CHECK_EQ(waitpid(a, &st, 0), a);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	fflush(stdout);
	pid_t b = fork();
	if (b == 0)
		_exit(peek(at + LEN - 4096) + 1);
	CHECK(b > 0);
	CHECK_EQ(waitpid(b, &st, 0), b);
	CHECK(WIFEXITED(st));
	return WEXITSTATUS(st) - 1;
}

int main(void)
{
	int one = file_of(0x11), two = file_of(0x22);
	for (int round = 0; round < 3; round++) {
		unsigned char *m = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, one, 0);
		CHECK(m != MAP_FAILED);
		CHECK_EQ(child_reads(m, 0), 0x11);
		/* Another file at the same address. */
		CHECK(mmap(m, LEN, PROT_READ, MAP_PRIVATE | MAP_FIXED, two, 0) == m);
		CHECK_EQ(child_reads(m, 0), 0x22);
		/* The same file again, then not readable, then readable again. */
		CHECK(mmap(m, LEN, PROT_READ, MAP_PRIVATE | MAP_FIXED, one, 0) == m);
		CHECK_EQ(child_reads(m, 0), 0x11);
		CHECK_OK(mprotect(m, LEN, PROT_NONE));
		CHECK_EQ(child_reads(m, 0), -1);
		CHECK_OK(mprotect(m, LEN, PROT_READ));
		CHECK_EQ(child_reads(m, 0), 0x11);
		/* The child before made its copy unreadable, or unmapped part of
		 * it: the next one sees the parent's. */
		CHECK_EQ(child_reads(m, 1), 0x11);
		CHECK_EQ(child_reads(m, 2), 0x11);
		CHECK_OK(munmap(m, LEN));

		/* Anonymous memory the parent writes between forks. */
		unsigned char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(p != MAP_FAILED);
		memset(p, 0x33, LEN);
		CHECK_EQ(child_reads(p, 0), 0x33);
		memset(p, 0x44, LEN);
		CHECK_EQ(child_reads(p, 1), 0x44);
		CHECK_OK(mprotect(p, LEN, PROT_READ));
		CHECK_EQ(child_reads(p, 2), 0x44);
		CHECK_OK(munmap(p, LEN));
	}
	close(one);
	close(two);
	return checks_done();
}
