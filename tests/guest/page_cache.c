/* The page cache (nomu's mm::cache) as a program sees it, checked against
 * what Linux guarantees:
 * - a program rewritten between two execs runs its new contents (the
 *   changed bytes are in its text, which nomu maps from the cache);
 * - two processes running one program share none of its data;
 * - private read-only file mappings (which nomu maps from the cache) show
 *   the file; made writable, their writes stay private (the file and other
 *   mappings unchanged); made executable, DONTNEED, mremap and a partial
 *   munmap keep their contents; a mapping made after the file changed
 *   shows the change; mincore finds their pages resident;
 * - /proc/sys/vm/drop_caches: root may write it (4, which drops nothing
 *   on Linux either), never read it; values below 1 are refused.
 * The program run twice is a copy of this test in /tmp. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* In the text segment: what the copy prints, changed between two execs. */
__asm__(".pushsection .text\n"
	"page_cache_marker: .asciz \"page-cache-marker:A\"\n"
	".popsection\n");
extern const char page_cache_marker[];
#define marker page_cache_marker
#define MARKER_LEN 19

/* Data: each process has its own. */
static volatile int counter;

static int run(char *path, char *arg, int out)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	if (out >= 0)
		posix_spawn_file_actions_adddup2(&fa, out, 1);
	char *args[] = {path, arg, NULL};
	pid_t c;
	int e = posix_spawn(&c, path, &fa, NULL, args, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e)
		return -e;
	int status;
	if (waitpid(c, &status, 0) != c || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* The offset of the marker's last letter in the file at `path`. */
static off_t marker_offset(const char *path)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st))
		return -1;
	char *buf = malloc(st.st_size);
	off_t at = -1;
	if (buf && read(fd, buf, st.st_size) == st.st_size) {
		char *p = memmem(buf, st.st_size, "page-cache-marker:A", MARKER_LEN);
		if (p)
			at = p - buf + MARKER_LEN - 1;
	}
	free(buf);
	close(fd);
	return at;
}

static void rewritten_program(const char *self)
{
	printf("== a program rewritten between two execs\n");
	char copy[] = "/tmp/nomu-page-cache-XXXXXX";
	int fd = mkstemp(copy);
	CHECK(fd >= 0);
	close(fd);
	CHECK_OK(nomu_copy_file(self, copy));
	CHECK_OK(chmod(copy, 0755));
	off_t at = marker_offset(copy);
	CHECK(at > 0);
	fflush(stdout);
	CHECK_EQ(run(copy, "marker", -1), 0);
	/* Twice: the second exec finds the first's pages. */
	CHECK_EQ(run(copy, "marker", -1), 0);
	int w = open(copy, O_WRONLY);
	CHECK(w >= 0);
	CHECK_EQ(pwrite(w, "B", 1, at), 1);
	close(w);
	fflush(stdout);
	CHECK_EQ(run(copy, "marker", -1), 0);
	/* Rewritten whole (truncated, then written again). */
	int r = open(copy, O_RDONLY);
	struct stat st;
	CHECK_OK(fstat(r, &st));
	char *all = malloc(st.st_size);
	CHECK_EQ(read(r, all, st.st_size), st.st_size);
	close(r);
	all[at] = 'C';
	w = open(copy, O_WRONLY | O_TRUNC);
	CHECK(w >= 0);
	CHECK_EQ(write(w, all, st.st_size), st.st_size);
	close(w);
	free(all);
	fflush(stdout);
	CHECK_EQ(run(copy, "marker", -1), 0);

	printf("== two processes of one program share no data\n");
	int p1[2], p2[2];
	CHECK_OK(pipe(p1));
	CHECK_OK(pipe(p2));
	/* The first sets its counter and waits; the second checks its own. */
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p1[1], 1);
	posix_spawn_file_actions_adddup2(&fa, p2[0], 0);
	posix_spawn_file_actions_addclose(&fa, p1[0]);
	posix_spawn_file_actions_addclose(&fa, p2[1]);
	char *args[] = {copy, "counter-set", NULL};
	pid_t a;
	CHECK_EQ(posix_spawn(&a, copy, &fa, NULL, args, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(p1[1]);
	close(p2[0]);
	char c;
	CHECK_EQ(read(p1[0], &c, 1), 1); /* it has set its counter */
	fflush(stdout);
	CHECK_EQ(run(copy, "counter-check", -1), 0);
	close(p2[1]); /* let the first go */
	int status;
	CHECK_EQ(waitpid(a, &status, 0), a);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(p1[0]);
	CHECK_OK(unlink(copy));
}

static int all(const char *p, size_t n, char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static void file_mappings(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char path[] = "/tmp/nomu-page-cache-file-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	char *buf = malloc(4 * pg);
	for (int i = 0; i < 4; i++)
		memset(buf + i * pg, 'a' + i, pg);
	CHECK_EQ(write(fd, buf, 4 * pg), 4 * pg);

	printf("== a private read-only mapping shows the file\n");
	char *m = mmap(NULL, 4 * pg, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(m != MAP_FAILED);
	CHECK(!memcmp(m, buf, 4 * pg));
	char *m2 = mmap(NULL, 2 * pg, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, pg);
	CHECK(m2 != MAP_FAILED);
	CHECK(all(m2, pg, 'b') && all(m2 + pg, pg, 'c'));
	unsigned char vec[4];
	CHECK_OK(mincore(m, 4 * pg, vec));
	CHECK(vec[0] & vec[1] & vec[2] & vec[3] & 1);

	printf("== made writable, its writes are private\n");
	CHECK_OK(mprotect(m, pg, PROT_READ | PROT_WRITE));
	m[0] = 'X';
	CHECK_EQ(m[0], 'X');
	CHECK(all(m + 1, pg - 1, 'a') && all(m + pg, pg, 'b'));
	char first;
	CHECK_EQ(pread(fd, &first, 1, 0), 1);
	CHECK_EQ(first, 'a');
	char *m3 = mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(m3 != MAP_FAILED);
	CHECK(all(m3, pg, 'a'));
	/* A private writable mapping from the start. */
	char *w = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	CHECK(w != MAP_FAILED);
	w[1] = 'Y';
	CHECK_EQ(pread(fd, &first, 1, 1), 1);
	CHECK_EQ(first, 'a');
	CHECK_EQ(m3[1], 'a');

	printf("== executable, DONTNEED, mremap, partial munmap keep the contents\n");
	CHECK_OK(mprotect(m + 3 * pg, pg, PROT_READ | PROT_EXEC));
	CHECK(all(m + 3 * pg, pg, 'd'));
	CHECK_OK(madvise(m + pg, pg, MADV_DONTNEED));
	CHECK(all(m + pg, pg, 'b'));
	CHECK_OK(munmap(m + 2 * pg, pg));
	CHECK(all(m + pg, pg, 'b') && all(m + 3 * pg, pg, 'd'));
	char *g = mremap(m2, 2 * pg, 3 * pg, MREMAP_MAYMOVE);
	CHECK(g != MAP_FAILED);
	CHECK(all(g, pg, 'b') && all(g + pg, pg, 'c'));

	printf("== a mapping made after the file changed shows the change\n");
	CHECK_EQ(pwrite(fd, "ZZ", 2, pg), 2);
	char *n = mmap(NULL, 2 * pg, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(n != MAP_FAILED);
	CHECK_EQ(n[pg], 'Z');
	CHECK_EQ(n[pg + 1], 'Z');
	CHECK(all(n + pg + 2, pg - 2, 'b'));
	/* Pages this process wrote stay its own. */
	CHECK_EQ(m[0], 'X');
	CHECK_EQ(w[1], 'Y');

	munmap(m, 2 * pg);
	munmap(m + 3 * pg, pg);
	munmap(m3, pg);
	munmap(w, pg);
	munmap(g, 3 * pg);
	munmap(n, 2 * pg);
	close(fd);
	free(buf);
	CHECK_OK(unlink(path));
}

static void drop_caches(void)
{
	printf("== /proc/sys/vm/drop_caches\n");
	if (geteuid() != 0) {
		/* Only root may write it: nothing to check as anyone else. */
		return;
	}
	CHECK_ERR(open("/proc/sys/vm/drop_caches", O_RDONLY), EACCES);
	CHECK_ERR(open("/proc/sys/vm/drop_caches", O_RDWR), EACCES);
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "4\n", 2), 2);
	/* Past position 0 a write is ignored (sysctl_writes_strict). */
	CHECK_EQ(write(fd, "0", 1), 1);
	char c;
	CHECK_ERR(read(fd, &c, 1), EBADF);
	close(fd);
	/* Below the range, or no number (above it Linux's range has grown:
	 * not checked, and a value with bit 1 would drop the host's cache). */
	const char *bad[] = {"0", "x", "-1"};
	for (int i = 0; i < 3; i++) {
		fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
		CHECK(fd >= 0);
		CHECK_ERR(write(fd, bad[i], strlen(bad[i])), EINVAL);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "marker")) {
		printf("%s\n", marker);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "counter-set")) {
		counter = 42;
		if (write(1, "s", 1) != 1)
			return 1;
		char c;
		while (read(0, &c, 1) > 0) /* until the parent lets it go */
			;
		return counter == 42 ? 0 : 1;
	}
	if (argc > 1 && !strcmp(argv[1], "counter-check")) {
		printf("another process's counter: %d\n", counter);
		return counter == 0 ? 0 : 1;
	}
	rewritten_program(argv[0]);
	file_mappings();
	drop_caches();
	return checks_done();
}
