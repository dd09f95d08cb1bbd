/* MAP_SHARED mappings of one file are one memory: what one mapping writes
 * every other mapping of the file shows at once, in the same process
 * (CPython's shared_memory attaches to a segment it created), in a process
 * started with posix_spawn and in a forked child (shm_open + mmap between
 * processes), with overlapping ranges and different offsets; and it
 * reaches the file. nomu used to give each mapping a copy written back at
 * munmap: the second mapping saw zeros.
 *
 * argv[1] == "peer": the spawned side (argv[2] is the file). */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

#define PAGE 4096
#define LEN (4 * PAGE)

/* Waits (up to ~10 s) until *word == want. */
static int wait_for(volatile unsigned *word, unsigned want)
{
	for (int i = 0; i < 100000; i++) {
		if (*word == want)
			return 1;
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* Answers each of the parent's numbers with the number plus one, three
 * times. */
static int answer(volatile unsigned *w)
{
	for (unsigned round = 1; round <= 3; round++) {
		if (!wait_for(&w[0], 2 * round - 1))
			return 13;
		w[0] = 2 * round;
	}
	return 0;
}

/* The other process: maps the file itself and answers through it. */
static int peer(const char *path)
{
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return 10;
	volatile unsigned *w = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (w == MAP_FAILED)
		return 11;
	close(fd);
	/* What the parent wrote before this process mapped the file. */
	if (w[PAGE / 4] != 0x5eed)
		return 12;
	return answer(w);
}

static void converse(volatile unsigned *w, pid_t child, const char *who)
{
	for (unsigned round = 1; round <= 3; round++) {
		w[0] = 2 * round - 1;
		CHECK(wait_for(&w[0], 2 * round));
	}
	int st = -1;
	CHECK_EQ(waitpid(child, &st, 0), child);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("%s: three rounds through the mapping\n", who);
	w[0] = 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "peer") == 0)
		return peer(argv[2]);

	char path[] = "/tmp/nomu-shared-map-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_OK(ftruncate(fd, LEN));

	/* Two mappings in one process, and a read-only third. */
	unsigned char *a = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	unsigned char *b = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	unsigned char *r = mmap(NULL, LEN, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(a != MAP_FAILED && b != MAP_FAILED && r != MAP_FAILED);
	CHECK(a != b);
	a[0] = 42;
	memcpy(b + PAGE + 1, "pickle", 6);
	CHECK_EQ(b[0], 42);
	CHECK_EQ(r[0], 42);
	CHECK(memcmp(a + PAGE + 1, "pickle", 6) == 0);
	printf("two mappings in one process are one memory\n");

	/* A mapping at an offset, and one reaching past what is mapped so far. */
	unsigned char *mid = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, PAGE);
	CHECK(mid != MAP_FAILED);
	CHECK(memcmp(mid + 1, "pickle", 6) == 0);
	mid[PAGE + 7] = 9;
	CHECK_EQ(a[2 * PAGE + 7], 9);
	CHECK_OK(munmap(mid, 2 * PAGE));
	printf("a mapping at an offset shows the same pages\n");

	/* mremap: grown in place or moved, a mapping still shows the file's
	 * pages (the grown part too). */
	unsigned char *g = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(g != MAP_FAILED);
	unsigned char *g2 = mremap(g, PAGE, 3 * PAGE, MREMAP_MAYMOVE);
	CHECK(g2 != MAP_FAILED);
	CHECK_EQ(g2[0], 42);
	CHECK_EQ(g2[2 * PAGE + 7], 9);
	g2[2 * PAGE + 8] = 77;
	CHECK_EQ(a[2 * PAGE + 8], 77);
	CHECK_OK(munmap(g2, 3 * PAGE));
	pid_t grower = fork();
	if (grower == 0) {
		unsigned char *h = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		unsigned char *h2 = h == MAP_FAILED ? MAP_FAILED : mremap(h, PAGE, 3 * PAGE, MREMAP_MAYMOVE);
		if (h2 == MAP_FAILED || h2[2 * PAGE + 7] != 9)
			_exit(1);
		h2[2 * PAGE + 9] = 55;
		_exit(0);
	}
	int gst = -1;
	CHECK_EQ(waitpid(grower, &gst, 0), grower);
	CHECK(WIFEXITED(gst) && WEXITSTATUS(gst) == 0);
	CHECK_EQ(a[2 * PAGE + 9], 55);
	printf("mremap keeps showing the same pages\n");

	/* munmap of one leaves the other; what they wrote reaches the file. */
	CHECK_OK(munmap(b, LEN));
	CHECK_EQ(a[0], 42);
	CHECK_OK(msync(a, LEN, MS_SYNC));
	unsigned char buf[8] = {0};
	CHECK_EQ(pread(fd, buf, 6, PAGE + 1), 6);
	CHECK(memcmp(buf, "pickle", 6) == 0);
	printf("msync writes them to the file\n");

	/* Another process: spawned (nomu runs it in its own process). */
	volatile unsigned *w = (volatile unsigned *)a;
	w[PAGE / 4] = 0x5eed;
	w[0] = 0;
	pid_t child;
	char *cargs[] = {argv[0], "peer", path, NULL};
	CHECK_EQ(posix_spawn(&child, argv[0], NULL, NULL, cargs, environ), 0);
	converse(w, child, "spawned");

	/* And forked (nomu runs it in a host process of its own). */
	child = fork();
	if (child == 0) {
		execve(argv[0], cargs, environ);
		_exit(20);
	}
	converse(w, child, "forked and exec'd");
	child = fork();
	if (child == 0)
		_exit(peer(path));
	converse(w, child, "forked, mapping anew");
	child = fork();
	if (child == 0)
		_exit(answer(w));
	converse(w, child, "forked, through the inherited mapping");

	/* Once every mapping is gone, the next one reads the file again. */
	CHECK_OK(munmap(a, LEN));
	CHECK_OK(munmap(r, LEN));
	CHECK_EQ(pwrite(fd, "fresh", 5, 0), 5);
	unsigned char *c = mmap(NULL, LEN, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(c != MAP_FAILED);
	CHECK(memcmp(c, "fresh", 5) == 0);
	CHECK_EQ(c[2 * PAGE + 7], 9);
	CHECK_OK(munmap(c, LEN));
	printf("a new mapping reads the file\n");
	unlink(path);
	return checks_done();
}
