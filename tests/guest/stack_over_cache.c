/* A new program's stack placed where a file's cached pages were mapped
 * before (regression). nomu shows a private read-only file mapping by
 * mapping its page cache's pages over the direct map; after munmap that
 * view may stay until the range is wanted again. The loader's stack did
 * not put the range's own pages back: the exec zeroed the cached file
 * through it, and every stack placed over a view of the same pages was
 * one memory (xz's `make check` under bash died of another process's
 * return addresses on its stack).
 *
 * The parent maps a 32 MiB file read-only, reads every page, unmaps it,
 * and runs itself a few times (each child writes 1 MiB of its stack);
 * then the file, mapped again, must still show what pread reads. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

extern char **environ;

#define FILE_SIZE (32 << 20)
#define PAGE 4096
#define CHILDREN 4

/* The word at byte `off` of the file: its offset, scrambled. */
static uint64_t pattern(uint64_t off)
{
	return (off * 0x9e3779b97f4a7c15ull) ^ 0x5a5a5a5a5a5a5a5aull;
}

/* The child: fills 1 MiB of its stack, as a program's deep calls do. */
static int child(void)
{
	char buf[1 << 20];
	memset(buf, 0x6b, sizeof buf);
	__asm__ volatile("" : : "r"(buf) : "memory"); /* the stores happen */
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--child"))
		return child();

	char path[] = "/tmp/nomu-stack-over-cache-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	static uint64_t chunk[65536 / 8];
	for (uint64_t off = 0; off < FILE_SIZE; off += sizeof chunk) {
		for (size_t i = 0; i < sizeof chunk / 8; i++)
			chunk[i] = pattern(off + i * 8);
		if (write(fd, chunk, sizeof chunk) != sizeof chunk) {
			CHECK(!"write");
			return checks_done();
		}
	}

	/* Map it, touch every page (the cache's pages are shown), unmap. */
	volatile uint64_t *m = mmap(NULL, FILE_SIZE, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(m != MAP_FAILED);
	uint64_t sum = 0;
	for (size_t off = 0; off < FILE_SIZE; off += PAGE)
		sum += m[off / 8];
	CHECK(sum != 1); /* keeps the reads */
	CHECK_OK(munmap((void *)m, FILE_SIZE));

	for (int i = 0; i < CHILDREN; i++) {
		char *args[] = {argv[0], "--child", NULL};
		pid_t c;
		int status = -1;
		CHECK_EQ(posix_spawn(&c, argv[0], NULL, NULL, args, environ), 0);
		CHECK_EQ(waitpid(c, &status, 0), c);
		CHECK_EQ(status, 0);
	}

	/* The file is unchanged, through a new mapping and through read. */
	m = mmap(NULL, FILE_SIZE, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(m != MAP_FAILED);
	size_t bad_pages = 0;
	for (size_t off = 0; off < FILE_SIZE; off += PAGE) {
		uint64_t want[2] = {pattern(off), pattern(off + PAGE - 8)};
		uint64_t got[2];
		CHECK_EQ(pread(fd, got, 8, off), 8);
		CHECK_EQ(pread(fd, got + 1, 8, off + PAGE - 8), 8);
		if (got[0] != want[0] || got[1] != want[1] || m[off / 8] != want[0] ||
		    m[(off + PAGE - 8) / 8] != want[1])
			bad_pages++;
	}
	CHECK_EQ(bad_pages, 0);
	CHECK_OK(munmap((void *)m, FILE_SIZE));
	close(fd);
	return checks_done();
}
