/* Terminal job control (run on a terminal): a process that leaves the
 * terminal's foreground group and reads it gets SIGTTIN; ignored, the read
 * fails with EIO; caught (no SA_RESTART), the read fails with EINTR. */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile int caught;
static void on_ttin(int sig) { (void)sig; caught++; }

extern char **environ;

int main(int argc, char **argv)
{
	char c;
	if (!isatty(0)) {
		printf("stdin is not a terminal\n");
		return 2;
	}
	if (argc == 1) {
		/* A session leader cannot change its group: do it in a child. */
		pid_t p;
		char *args[] = { argv[0], "child", NULL };
		if (posix_spawn(&p, argv[0], NULL, NULL, args, environ))
			return 1;
		int st;
		waitpid(p, &st, 0);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	if (setpgid(0, 0) != 0) {
		printf("setpgid: %s\n", strerror(errno));
		return 1;
	}
	signal(SIGTTIN, SIG_IGN);
	ssize_t r = read(0, &c, 1);
	printf("ignored: %zd %s\n", r, r < 0 && errno == EIO ? "EIO" : "?");
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_ttin;
	sigaction(SIGTTIN, &sa, NULL);
	r = read(0, &c, 1);
	printf("caught %d: %zd %s\n", caught, r, r < 0 && errno == EINTR ? "EINTR" : "?");
	return 0;
}
