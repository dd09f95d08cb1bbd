/* Pipes: many writer processes into one pipe (writes up to PIPE_BUF are
 * atomic, so no line is torn), EOF when the last writer goes, EPIPE and
 * SIGPIPE, O_NONBLOCK and EAGAIN, poll on both ends. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITERS 6
#define LINES 200
#define LINE 100 /* bytes per write: well below PIPE_BUF */

extern char **environ;

static volatile int alarmed;
static void on_alarm(int sig) { (void)sig; alarmed++; }

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "writer")) {
		char buf[LINE];
		int id = atoi(argv[2]);
		for (int i = 0; i < LINES; i++) {
			memset(buf, 'a' + id, LINE - 1);
			buf[LINE - 1] = '\n';
			if (write(1, buf, LINE) != LINE)
				return 1;
		}
		return 0;
	}
	printf("== %d writers, one reader\n", WRITERS);
	int p[2];
	CHECK_OK(pipe(p));
	pid_t pids[WRITERS];
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	for (int i = 0; i < WRITERS; i++) {
		char id[4];
		snprintf(id, sizeof(id), "%d", i);
		char *args[] = { argv[0], "writer", id, NULL };
		CHECK_EQ(posix_spawn(&pids[i], argv[0], &fa, NULL, args, environ), 0);
	}
	close(p[1]);
	int counts[WRITERS] = { 0 }, torn = 0, total = 0;
	char line[LINE];
	size_t have = 0;
	char buf[4096];
	ssize_t n;
	while ((n = read(p[0], buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			line[have++] = buf[i];
			if (have == LINE) {
				int id = line[0] - 'a';
				int ok = id >= 0 && id < WRITERS && line[LINE - 1] == '\n';
				for (int k = 1; ok && k < LINE - 1; k++)
					ok = line[k] == line[0];
				if (ok)
					counts[id]++;
				else
					torn++;
				total++;
				have = 0;
			}
		}
	}
	CHECK_EQ(n, 0);
	CHECK_EQ(torn, 0);
	CHECK_EQ(total, WRITERS * LINES);
	for (int i = 0; i < WRITERS; i++) {
		CHECK_EQ(counts[i], LINES);
		int st;
		CHECK_EQ(waitpid(pids[i], &st, 0), pids[i]);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	close(p[0]);

	printf("== EPIPE and SIGPIPE\n");
	CHECK_OK(pipe(p));
	close(p[0]);
	signal(SIGPIPE, SIG_IGN);
	CHECK_ERR(write(p[1], "x", 1), EPIPE);
	signal(SIGPIPE, SIG_DFL);
	close(p[1]);

	printf("== O_NONBLOCK and poll\n");
	CHECK_OK(pipe2(p, O_NONBLOCK));
	char c;
	CHECK_ERR(read(p[0], &c, 1), EAGAIN);
	struct pollfd pf[2] = { { .fd = p[0], .events = POLLIN }, { .fd = p[1], .events = POLLOUT } };
	CHECK_EQ(poll(pf, 2, 0), 1);
	CHECK(pf[1].revents & POLLOUT);
	/* Fill it up: a non-blocking writer gets EAGAIN when full. */
	static char big[65536];
	ssize_t put = 0, w;
	while ((w = write(p[1], big, sizeof(big))) > 0)
		put += w;
	CHECK_EQ(w, -1);
	CHECK_EQ(errno, EAGAIN);
	CHECK(put >= 4096);
	pf[0].revents = pf[1].revents = 0;
	CHECK_EQ(poll(pf, 2, 0), 1);
	CHECK(pf[0].revents & POLLIN);
	close(p[1]);
	ssize_t got = 0;
	while ((w = read(p[0], big, sizeof(big))) > 0)
		got += w;
	CHECK_EQ(got, put);
	CHECK_EQ(w, 0);
	close(p[0]);

	printf("== poll and select: files are always ready, pipes when they are\n");
	{
		char path[] = "/tmp/nomu-poll-XXXXXX";
		int f = mkstemp(path);
		CHECK(f >= 0);
		unlink(path);
		int devnull = open("/dev/null", O_RDWR);
		CHECK(devnull >= 0);
		CHECK_OK(pipe(p));
		int closed = dup(f);
		CHECK_OK(close(closed));
		struct pollfd q[5] = {
			{ .fd = f, .events = POLLIN | POLLOUT | POLLPRI },
			{ .fd = p[0], .events = POLLIN },
			{ .fd = devnull, .events = POLLOUT },
			{ .fd = closed, .events = POLLIN },
			{ .fd = -1, .events = POLLIN },
		};
		CHECK_EQ(poll(q, 5, 1000), 3);
		CHECK_EQ(q[0].revents, POLLIN | POLLOUT);
		CHECK_EQ(q[1].revents, 0);
		CHECK_EQ(q[2].revents, POLLOUT);
		CHECK_EQ(q[3].revents, POLLNVAL);
		CHECK_EQ(q[4].revents, 0);
		CHECK_EQ(write(p[1], "x", 1), 1);
		CHECK_EQ(poll(q, 2, 0), 2);
		CHECK_EQ(q[1].revents, POLLIN);
		/* A file never has priority data: the timeout runs out. */
		struct pollfd pri = { .fd = f, .events = POLLPRI };
		CHECK_EQ(poll(&pri, 1, 20), 0);
		CHECK_EQ(pri.revents, 0);
		CHECK_EQ(read(p[0], &c, 1), 1);
		fd_set rs, ws;
		FD_ZERO(&rs);
		FD_ZERO(&ws);
		FD_SET(f, &rs);
		FD_SET(p[0], &rs);
		FD_SET(f, &ws);
		struct timeval tv = { 0, 0 };
		int top = f > p[0] ? f : p[0];
		CHECK_EQ(select(top + 1, &rs, &ws, NULL, &tv), 2);
		CHECK(FD_ISSET(f, &rs) && !FD_ISSET(p[0], &rs) && FD_ISSET(f, &ws));
		/* Bits at or above nfds are ignored, and cleared on return. */
		FD_ZERO(&ws);
		FD_SET(f, &ws);
		FD_SET(closed, &ws);
		CHECK(closed > f);
		CHECK_EQ(select(f + 1, NULL, &ws, NULL, &tv), 1);
		CHECK(FD_ISSET(f, &ws) && !FD_ISSET(closed, &ws));
		FD_SET(closed, &rs);
		CHECK_ERR(select(closed + 1, &rs, NULL, NULL, &tv), EBADF);
		/* A set larger than an fd_set (select's own sets are on nomu's
		 * stack up to FD_SETSIZE): descriptor 1500 under a raised limit. */
		struct rlimit rl;
		CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl));
		if (rl.rlim_max >= 2048) {
			struct rlimit raised = { 2048, rl.rlim_max };
			CHECK_OK(setrlimit(RLIMIT_NOFILE, &raised));
			CHECK_EQ(dup2(f, 1500), 1500);
			unsigned long big[2048 / (8 * sizeof(unsigned long))];
			memset(big, 0, sizeof(big));
			big[f / 64] |= 1ul << (f % 64);
			big[1500 / 64] |= 1ul << (1500 % 64);
			/* Above nfds: in its last word (cleared), past it (untouched). */
			big[1510 / 64] |= 1ul << (1510 % 64);
			big[1700 / 64] |= 1ul << (1700 % 64);
			CHECK_EQ(syscall(SYS_select, 1501, NULL, big, NULL, &tv), 2);
			CHECK(big[1500 / 64] == 1ul << (1500 % 64) && big[f / 64] == 1ul << (f % 64));
			CHECK_EQ(big[1700 / 64], 1ul << (1700 % 64));
			big[1400 / 64] |= 1ul << (1400 % 64); /* not open */
			CHECK_ERR(syscall(SYS_select, 1501, big, NULL, NULL, &tv), EBADF);
			CHECK_OK(close(1500));
			CHECK_OK(setrlimit(RLIMIT_NOFILE, &rl));
		}
		close(f);
		close(devnull);
		close(p[0]);
		close(p[1]);
	}

	printf("== a signal ends a big blocked write with the partial count\n");
	/* Regression: the write blocked inside the host, where no signal could
	 * interrupt it. */
	CHECK_OK(pipe(p));
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	static char huge[1 << 20];
	alarm(1);
	ssize_t wr = write(p[1], huge, sizeof(huge));
	CHECK(wr > 0 && wr < (ssize_t)sizeof(huge));
	CHECK_EQ(alarmed, 1);
	close(p[0]);
	close(p[1]);
	return checks_done();
}
