/* Copies between the kernel and user memory at a page's edge: a structure
 * or a string the kernel reads or writes whole, placed k bytes before an
 * inaccessible page, works when it fits (k >= its size) and fails with
 * EFAULT when it does not, for every k from 1 to 96 (so the edge falls in
 * every part of a copy: a 32-byte unit, an 8-byte one, the last bytes).
 * Data copied through pipes at every relative alignment arrives whole.
 *
 * Under nomu the copies are its fault-safe ones (host/safecopy.rs), which
 * move 32, 8 and 1 bytes at a time; the edge is found by its check of the
 * guest's mappings before it copies (its unit test covers faults in the
 * copy itself). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define PG 4096
#define MAX_K 96

/* The kernel's sigaction for x86-64 (rt_sigaction's): 32 bytes. */
struct ksigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	unsigned long mask;
};

static unsigned char *page_edge; /* the first byte of the inaccessible page */

static void *at_edge(size_t k)
{
	return page_edge - k;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void check_reads(void)
{
	printf("== structures the kernel reads\n");
	int bad = 0;
	for (size_t k = 1; k <= MAX_K; k++) {
		/* rt_sigaction's new action: 32 bytes */
		struct ksigaction act = {.handler = on_usr1, .flags = 0, .mask = 0};
		void *p = at_edge(k);
		memcpy(p, &act, k < sizeof act ? k : sizeof act);
		long r = syscall(SYS_rt_sigaction, SIGUSR1, p, NULL, 8);
		int want = k >= sizeof act ? 0 : EFAULT;
		if ((r == 0 ? 0 : errno) != want) {
			printf("rt_sigaction act %zu bytes before the edge: %s\n", k, r == 0 ? "ok" : strerror(errno));
			bad++;
		}
		/* nanosleep's request: 16 bytes */
		struct timespec ts = {0, 0};
		p = at_edge(k);
		memcpy(p, &ts, k < sizeof ts ? k : sizeof ts);
		r = syscall(SYS_nanosleep, p, NULL);
		want = k >= sizeof ts ? 0 : EFAULT;
		if ((r == 0 ? 0 : errno) != want) {
			printf("nanosleep %zu bytes before the edge: %s\n", k, r == 0 ? "ok" : strerror(errno));
			bad++;
		}
	}
	CHECK_EQ(bad, 0);
}

static void check_writes(void)
{
	printf("== structures the kernel writes\n");
	struct utsname whole;
	CHECK_OK(uname(&whole));
	struct ksigaction old_whole;
	CHECK_OK(syscall(SYS_rt_sigaction, SIGUSR2, NULL, &old_whole, 8));
	struct rlimit lim_whole;
	CHECK_OK(syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &lim_whole));
	int bad = 0;
	for (size_t k = 1; k <= 400; k++) {
		/* uname: 390 bytes */
		long r = syscall(SYS_uname, at_edge(k));
		int want = k >= sizeof whole ? 0 : EFAULT;
		if ((r == 0 ? 0 : errno) != want || (r == 0 && memcmp(at_edge(k), &whole, sizeof whole))) {
			printf("uname %zu bytes before the edge: %s\n", k, r == 0 ? "ok" : strerror(errno));
			bad++;
		}
		if (k > MAX_K)
			continue;
		/* rt_sigaction's old action: 32 bytes */
		r = syscall(SYS_rt_sigaction, SIGUSR2, NULL, at_edge(k), 8);
		want = k >= sizeof old_whole ? 0 : EFAULT;
		if ((r == 0 ? 0 : errno) != want || (r == 0 && memcmp(at_edge(k), &old_whole, sizeof old_whole))) {
			printf("rt_sigaction oldact %zu bytes before the edge: %s\n", k, r == 0 ? "ok" : strerror(errno));
			bad++;
		}
		/* prlimit64's old limit: 16 bytes */
		r = syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, at_edge(k));
		want = k >= sizeof lim_whole ? 0 : EFAULT;
		if ((r == 0 ? 0 : errno) != want || (r == 0 && memcmp(at_edge(k), &lim_whole, sizeof lim_whole))) {
			printf("prlimit64 old %zu bytes before the edge: %s\n", k, r == 0 ? "ok" : strerror(errno));
			bad++;
		}
	}
	CHECK_EQ(bad, 0);
}

static void check_paths(void)
{
	printf("== a path ending at the edge\n");
	int bad = 0;
	for (size_t len = 2; len <= 300; len++) {
		/* "//...//." names the root: len bytes with its NUL at the
		 * page's last byte opens it; without a NUL before the edge the
		 * kernel faults reading on. */
		char *s = at_edge(len);
		memset(s, '/', len);
		if (len >= 2)
			s[len - 2] = '.';
		s[len - 1] = '\0';
		int fd = (int)syscall(SYS_openat, AT_FDCWD, s, O_RDONLY | O_DIRECTORY);
		if (fd < 0) {
			printf("open of a %zu-byte path ending at the edge: %s\n", len, strerror(errno));
			bad++;
		} else {
			close(fd);
		}
		s[len - 1] = '.';
		fd = (int)syscall(SYS_openat, AT_FDCWD, s, O_RDONLY | O_DIRECTORY);
		if (fd >= 0 || errno != EFAULT) {
			printf("open of a path running into the edge (%zu bytes): %s\n", len,
			       fd >= 0 ? "opened" : strerror(errno));
			bad++;
		}
		if (fd >= 0)
			close(fd);
	}
	CHECK_EQ(bad, 0);
}

static void check_alignments(void)
{
	printf("== data through a pipe at every alignment\n");
	static unsigned char src[8192 + 64], dst[8192 + 64];
	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (unsigned char)(i * 7 + (i >> 8));
	int p[2];
	CHECK_OK(pipe(p));
	int bad = 0;
	size_t sizes[] = {1, 7, 8, 9, 31, 32, 33, 100, 4095, 4096, 5000, 8192};
	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
		for (size_t a = 0; a < 16; a++) {
			for (size_t b = 0; b < 16; b += 5) {
				size_t n = sizes[si];
				memset(dst, 0xEE, sizeof dst);
				size_t done = 0;
				while (done < n) {
					ssize_t w = write(p[1], src + a + done, n - done);
					if (w <= 0)
						break;
					ssize_t r = 0;
					while (r < w) {
						ssize_t got = read(p[0], dst + b + done + r, (size_t)(w - r));
						if (got <= 0)
							break;
						r += got;
					}
					done += (size_t)w;
				}
				if (done != n || memcmp(dst + b, src + a, n) || dst[b + n] != 0xEE ||
				    (b > 0 && dst[b - 1] != 0xEE)) {
					printf("%zu bytes from offset %zu to offset %zu differ\n", n, a, b);
					bad++;
				}
			}
		}
	}
	close(p[0]);
	close(p[1]);
	CHECK_EQ(bad, 0);
}

int main(void)
{
	unsigned char *m = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	CHECK_OK(mprotect(m + PG, PG, PROT_NONE));
	page_edge = m + PG;
	check_reads();
	check_writes();
	check_paths();
	check_alignments();
	return nomu_checks_done("copy_edges");
}
