/* A fork shows the child the page cache's read-only pages as they are (a
 * program's text and read-only data, a read-only private file mapping:
 * src/mm/space/forked.rs), so nothing the child does may reach the pages
 * every other process shows:
 * - a read() into its text or read-only data fails with EFAULT and
 *   changes nothing;
 * - mprotect making such a page writable gives the child a private copy
 *   (its writes stay its own, MADV_DONTNEED brings the file back);
 * - unmapping it in the child leaves the parent's mapping whole;
 * - a grandchild sees the same pages. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PAGE 4096

/* A page of read-only data of its own (the program's read-only segment). */
static const unsigned char rodata[2 * PAGE] __attribute__((aligned(PAGE))) = {
	[0] = 0x11, [1] = 0x22, [PAGE - 1] = 0x33, [PAGE] = 0x44, [2 * PAGE - 1] = 0x55,
};

__attribute__((noinline)) static int some_code(int x)
{
	return x * 3 + 1;
}

static unsigned sum(const unsigned char *p, size_t n)
{
	unsigned s = 0;
	for (size_t i = 0; i < n; i++)
		s = s * 31 + p[i];
	return s;
}

static const unsigned char *page_of(const void *p)
{
	return (const unsigned char *)((uintptr_t)p & ~(uintptr_t)(PAGE - 1));
}

/* Runs `body` in a forked child; its exit status (0: all its checks held). */
static int in_child(int (*body)(void *), void *arg)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(body(arg));
	CHECK(pid > 0);
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

/* A host call may not write the child's text or read-only data. */
static int read_into_text(void *arg)
{
	int fd = *(int *)arg;
	char *code = (char *)page_of((void *)some_code);
	errno = 0;
	if (read(fd, code, 16) != -1 || errno != EFAULT)
		return 1;
	errno = 0;
	if (read(fd, (void *)rodata, 16) != -1 || errno != EFAULT)
		return 2;
	return some_code(4) == 13 && rodata[0] == 0x11 ? 0 : 3;
}

/* Made writable, a page is the child's own. */
static int write_rodata(void *arg)
{
	(void)arg;
	/* volatile: the compiler would take the const bytes for unchanged. */
	volatile unsigned char *p = (volatile unsigned char *)rodata;
	if (mprotect((void *)rodata, PAGE, PROT_READ | PROT_WRITE) != 0)
		return 1;
	if (p[0] != 0x11 || p[PAGE - 1] != 0x33)
		return 2;
	for (int i = 0; i < PAGE; i++)
		p[i] = 0x77;
	if (p[0] != 0x77 || p[PAGE - 1] != 0x77 || p[PAGE] != 0x44)
		return 3;
	/* The next page was not made writable and still is the cache's. */
	return p[2 * PAGE - 1] == 0x55 ? 0 : 4;
}

struct file_map {
	unsigned char *map;
	size_t len;
};

static int write_file_map(void *arg)
{
	struct file_map *m = arg;
	if (m->map[0] != 'a' || m->map[m->len - 1] != 'a' + (int)((m->len - 1) % 26))
		return 1;
	if (mprotect(m->map, m->len, PROT_READ | PROT_WRITE) != 0)
		return 2;
	m->map[0] = 'Z';
	if (m->map[0] != 'Z' || m->map[1] != 'b')
		return 3;
	/* A private file page dropped reads as the file again. */
	if (madvise(m->map, PAGE, MADV_DONTNEED) != 0)
		return 4;
	return m->map[0] == 'a' ? 0 : 5;
}

static int unmap_file_map(void *arg)
{
	struct file_map *m = arg;
	return munmap(m->map, m->len) == 0 ? 0 : 1;
}

static int grandchild(void *arg)
{
	(void)arg;
	return some_code(5) == 16 && rodata[PAGE] == 0x44 ? 0 : 1;
}

static int fork_again(void *arg)
{
	(void)arg;
	pid_t pid = fork();
	if (pid == 0)
		_exit(grandchild(NULL));
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 1;
	return WEXITSTATUS(st) == 0 ? 0 : 2;
}

int main(void)
{
	unsigned code_sum = sum(page_of((void *)some_code), PAGE);
	unsigned ro_sum = sum(rodata, sizeof rodata);

	int fd = open("/dev/zero", O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(in_child(read_into_text, &fd), 0);
	close(fd);
	CHECK_EQ(sum(page_of((void *)some_code), PAGE), code_sum);
	CHECK_EQ(sum(rodata, sizeof rodata), ro_sum);

	CHECK_EQ(in_child(write_rodata, NULL), 0);
	CHECK_EQ(((volatile const unsigned char *)rodata)[0], 0x11);
	CHECK_EQ(sum(rodata, sizeof rodata), ro_sum);
	/* A second child sees the original too. */
	CHECK_EQ(in_child(write_rodata, NULL), 0);

	char path[] = "/tmp/nomu-fork-cached-XXXXXX";
	int f = mkstemp(path);
	CHECK(f >= 0);
	struct file_map m = {.len = 3 * PAGE};
	char *text = malloc(m.len);
	for (size_t i = 0; i < m.len; i++)
		text[i] = 'a' + i % 26;
	CHECK_EQ(write(f, text, m.len), (ssize_t)m.len);
	m.map = mmap(NULL, m.len, PROT_READ, MAP_PRIVATE, f, 0);
	CHECK(m.map != MAP_FAILED);
	close(f);
	unlink(path);
	CHECK_EQ(in_child(write_file_map, &m), 0);
	CHECK_EQ(memcmp(m.map, text, m.len), 0);
	CHECK_EQ(in_child(unmap_file_map, &m), 0);
	CHECK_EQ(memcmp(m.map, text, m.len), 0);
	CHECK_EQ(in_child(write_file_map, &m), 0);

	CHECK_EQ(in_child(fork_again, NULL), 0);
	CHECK_EQ(some_code(2), 7);
	return checks_done();
}
