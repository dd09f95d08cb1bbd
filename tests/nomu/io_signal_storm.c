/* Reads and writes that need not wait complete even when a signal comes in
 * at the same moment: Linux looks for pending signals only where a call
 * would wait. One process writes 64 bytes into a pipe and reads them back
 * (the pipe never fills, nothing waits) while a child sends it SIGUSR1 as
 * fast as it can, with a handler installed without SA_RESTART: no call may
 * fail with EINTR nor come up short.
 *
 * Found with interactive ash on a terminal: its "[1]+ Stopped" line,
 * written as the SIGCHLD of the stop came in, got EINTR under nomu and was
 * lost. The storm also found faults of nomu's own signal handling (see
 * tests/cli.rs). argv[1], if given: the number of rounds. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#define ROUNDS 5000

static volatile sig_atomic_t caught;

static void on_usr1(int sig)
{
	(void)sig;
	caught++;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : ROUNDS;
	struct sigaction sa = { 0 };
	sa.sa_handler = on_usr1; /* no SA_RESTART */
	int p[2];
	if (sigaction(SIGUSR1, &sa, NULL) != 0 || pipe(p) != 0) {
		perror("setup");
		return 2;
	}
	pid_t parent = getpid();
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		for (;;)
			if (kill(parent, SIGUSR1) != 0)
				_exit(0);
	}
	if (child < 0) {
		perror("fork");
		return 2;
	}
	while (!caught)
		; /* the storm has begun */
	char out[64], in[64];
	memset(out, 'x', sizeof out);
	int eintr = 0, short_io = 0, other = 0;
	for (int i = 0; i < rounds; i++) {
		ssize_t w = write(p[1], out, sizeof out);
		if (w < 0 && errno == EINTR)
			eintr++;
		else if (w < 0)
			other++;
		else if (w != sizeof out)
			short_io++;
		if (w <= 0)
			continue;
		ssize_t got = 0;
		while (got < w) {
			ssize_t r = read(p[0], in, (size_t)(w - got));
			if (r < 0 && errno == EINTR) {
				eintr++;
				continue;
			}
			if (r <= 0) {
				other++;
				break;
			}
			got += r;
		}
	}
	kill(child, SIGKILL);
	int status;
	pid_t reaped;
	while ((reaped = waitpid(child, &status, 0)) < 0 && errno == EINTR)
		; /* a wait may be interrupted: it waits */
	printf("reaped %d, EINTR %d, short %d, other errors %d\n", reaped == child, eintr, short_io, other);
	return reaped == child && eintr == 0 && short_io == 0 && other == 0 ? 0 : 1;
}
