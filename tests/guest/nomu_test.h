/* Tiny check framework for nomu's guest test programs.
 *
 * Every guest test is an ordinary Linux program: it must pass natively first,
 * then under nomu, and the harness compares the two runs (stdout and exit
 * status).  So a test prints only what is the same on every run (no
 * addresses, pids or timings) and exits non-zero when a check fails.
 *
 *   CHECK(expr)                 expr must be true
 *   CHECK_OK(call)              call must not return -1
 *   CHECK_ERR(call, ERRNO)      call must return -1 with errno == ERRNO
 *   CHECK_EQ(a, b)              integers must be equal (both printed on failure)
 *   return checks_done();       prints "<prog>: N checks, M failed" and the exit code
 *   nomu_copy_file(from, to)    copies a file (a program a test may spoil)
 *   nomu_slurp(path)            a small file's contents, as a string
 *   nomu_sleep_ms(ms), nomu_handle(sig, fn, flags)  a pause; a plain sigaction
 */
#ifndef NOMU_TEST_H
#define NOMU_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* volatile: tests longjmp out of signal handlers */
static volatile int nomu_checks, nomu_failed;

#define NOMU_FAIL(fmt, ...)                                                   \
	do {                                                                  \
		nomu_failed++;                                                \
		printf("FAIL %s:%d: " fmt "\n", __FILE__, __LINE__,           \
		       __VA_ARGS__);                                          \
		fflush(stdout);                                               \
	} while (0)

#define CHECK(expr)                                                           \
	do {                                                                  \
		nomu_checks++;                                                \
		if (!(expr))                                                  \
			NOMU_FAIL("%s (errno %d %s)", #expr, errno,           \
				  strerror(errno));                           \
	} while (0)

#define CHECK_OK(call)                                                        \
	do {                                                                  \
		nomu_checks++;                                                \
		errno = 0;                                                    \
		long nomu_r_ = (long)(call);                                  \
		if (nomu_r_ == -1)                                            \
			NOMU_FAIL("%s = -1 (errno %d %s)", #call, errno,      \
				  strerror(errno));                           \
	} while (0)

#define CHECK_ERR(call, err)                                                  \
	do {                                                                  \
		nomu_checks++;                                                \
		errno = 0;                                                    \
		long nomu_r_ = (long)(call);                                  \
		int nomu_e_ = errno;                                          \
		if (nomu_r_ != -1 || nomu_e_ != (err))                        \
			NOMU_FAIL("%s = %ld errno %d (%s), want -1 %s", #call, \
				  nomu_r_, nomu_e_, strerror(nomu_e_), #err);  \
	} while (0)

#define CHECK_EQ(a, b)                                                        \
	do {                                                                  \
		nomu_checks++;                                                \
		long long nomu_a_ = (long long)(a), nomu_b_ = (long long)(b); \
		if (nomu_a_ != nomu_b_)                                       \
			NOMU_FAIL("%s == %s (%lld != %lld)", #a, #b, nomu_a_,  \
				  nomu_b_);                                   \
	} while (0)

static inline int nomu_checks_done(const char *prog)
{
	printf("%s: %d checks, %d failed\n", prog, nomu_checks, nomu_failed);
	fflush(stdout);
	return nomu_failed ? 1 : 0;
}
#define checks_done() nomu_checks_done(__FILE__)

/* Copies file `from` to `to` (created or truncated, mode 0755 when
 * created): tests that run a program they may spoil run a copy. */
static inline int nomu_copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (in < 0 || out < 0)
		return -1;
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, n) != n)
			return -1;
	close(in);
	return close(out);
}

/* The contents of a small file (a /proc file) as a string, "" when it
 * cannot be read: in one static buffer, which the next call reuses. */
static inline const char *nomu_slurp(const char *path)
{
	static char buf[4096];
	buf[0] = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return buf;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
	return buf;
}

/* Sleeps about `ms` milliseconds (a peer's turn to act). */
static inline void nomu_sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

/* Installs a plain handler `fn` for `sig` with sa_flags `flags`. */
static inline void nomu_handle(int sig, void (*fn)(int), int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = flags;
	sigaction(sig, &sa, NULL);
}

#endif
