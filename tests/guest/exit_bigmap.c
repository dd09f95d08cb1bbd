/* A child that mapped 4 GiB and touched 7 pages of it (and reserved 1 GiB
 * more, PROT_NONE, part of it made accessible and touched) leaves nothing
 * allocated once its parent's wait returns: under nomu (argument "nomu",
 * run with a --mem that holds 4 GiB) /proc/meminfo's MemFree (the commit
 * account) and Cached (the page cache, which holds the program's text the
 * child was shown) are back where they were at that moment, and so is the
 * allocator's count of free pages (/proc/buddyinfo: every page the child
 * had, its image's and stack's too, is free, whatever the host still
 * shows at their addresses), and the parent can then map the 4 GiB itself
 * and finds the pages the child wrote zero. Natively the same calls succeed
 * (MAP_NORESERVE: the host does not count them) and the pages read zero. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG (4ul << 30)
#define RESERVED (1ul << 30)
#define TOUCHED 7

extern char **environ;

static char *big_map(void)
{
	char *p = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static size_t touched_at(int i)
{
	return BIG / TOUCHED * i & ~4095ul;
}

static int child(void)
{
	char *p = big_map();
	if (!p)
		return 2;
	for (int i = 0; i < TOUCHED; i++)
		p[touched_at(i)] = 1;
	char *r = mmap(NULL, RESERVED, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED || mprotect(r + RESERVED / 2, 1 << 20, PROT_READ | PROT_WRITE))
		return 3;
	memset(r + RESERVED / 2, 1, 1 << 20);
	return 0;
}

static char *read_proc(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	return buf;
}

static long meminfo_kb(const char *field)
{
	char *buf = read_proc("/proc/meminfo");
	char *p = buf ? strstr(buf, field) : NULL;
	return p ? strtol(p + strlen(field), NULL, 10) : -1;
}

static long mem_free_kb(void)
{
	return meminfo_kb("MemFree:");
}

/* The allocator's free pages: /proc/buddyinfo's blocks of each order. */
static long free_pages(void)
{
	char *p = read_proc("/proc/buddyinfo");
	if (!p || !(p = strstr(p, "Normal")))
		return -1;
	p += strlen("Normal");
	long total = 0;
	for (int order = 0;; order++) {
		char *end;
		long blocks = strtol(p, &end, 10);
		if (end == p)
			return total;
		total += blocks << order;
		p = end;
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child"))
		return child();
	int under_nomu = argc > 1 && !strcmp(argv[1], "nomu");
	printf("a child maps 4 GiB, touches %d pages, reserves 1 GiB and uses 1 MiB of it\n", TOUCHED);
	fflush(stdout);
	/* A first child before the baseline: what an entry path claims for
	 * good on first use (the rewrite path's trampoline chunks beside code
	 * far from guest memory's ends, README) is no child's. */
	char *warm[] = {argv[0], "child", NULL};
	pid_t warm_pid;
	int warm_status;
	CHECK(posix_spawn(&warm_pid, argv[0], NULL, NULL, warm, environ) == 0);
	CHECK(waitpid(warm_pid, &warm_status, 0) == warm_pid);
	long before = mem_free_kb();
	long cached_before = meminfo_kb("Cached:");
	long free_before = under_nomu ? free_pages() : 0;
	CHECK(before > 0);
	CHECK(free_before >= 0);
	for (int round = 0; round < 3; round++) {
		char *args[] = {argv[0], "child", NULL};
		pid_t pid;
		int status;
		CHECK(posix_spawn(&pid, argv[0], NULL, NULL, args, environ) == 0);
		CHECK(waitpid(pid, &status, 0) == pid);
		long after = mem_free_kb();
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		if (under_nomu && after != before)
			CHECK(!"nothing of the child is allocated when its parent's wait returns");
		if (under_nomu && free_pages() != free_before)
			CHECK(!"every page of the child is free when its parent's wait returns");
		if (under_nomu && meminfo_kb("Cached:") != cached_before)
			CHECK(!"the page cache is as it was when its parent's wait returns");

		char *p = big_map();
		CHECK(p != NULL);
		if (!p)
			break;
		for (int i = 0; i < TOUCHED; i++) {
			if (p[touched_at(i)])
				CHECK(!"the child's pages are zero for the next user");
			p[touched_at(i)] = 2;
		}
		CHECK_OK(munmap(p, BIG));
		if (under_nomu && (mem_free_kb() != before || free_pages() != free_before))
			CHECK(!"the parent's own 4 GiB are free after munmap");
	}
	printf("after each wait: nothing left allocated, the pages zero\n");
	return checks_done();
}
