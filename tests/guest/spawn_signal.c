/* A signal sent to a child the moment posix_spawn returns: the child has
 * just exec'd (vfork + execve), and under nomu it is on its way from its
 * parent's host thread to one of its own. The child blocks the signal from
 * the start (POSIX_SPAWN_SETSIGMASK) and collects it with sigwaitinfo, so
 * it must arrive, exactly once, wherever it lands.
 * Regression: a kick that reached the new host thread before its kernel
 * stack was installed crashed nomu (seccomp and zpoline paths). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 200

extern char **environ;

static int child(void)
{
	sigset_t set;
	siginfo_t si;
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN);
	if (sigwaitinfo(&set, &si) != SIGRTMIN)
		return 1;
	/* The value says how it was sent: kill (SI_USER) or sigqueue. */
	if (si.si_code == SI_QUEUE)
		return si.si_value.sival_int == 42 ? 8 : 2;
	return si.si_code == SI_USER ? 7 : 3;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return child();
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN);
	int bad = 0;
	for (int i = 0; i < ROUNDS; i++) {
		posix_spawnattr_t attr;
		posix_spawnattr_init(&attr);
		posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
		posix_spawnattr_setsigmask(&attr, &set);
		char *args[] = {argv[0], "child", NULL};
		pid_t pid;
		if (posix_spawn(&pid, argv[0], NULL, &attr, args, environ) != 0) {
			printf("posix_spawn failed in round %d\n", i);
			return 1;
		}
		posix_spawnattr_destroy(&attr);
		int queued = i % 2;
		if (queued)
			sigqueue(pid, SIGRTMIN, (union sigval){.sival_int = 42});
		else
			kill(pid, SIGRTMIN);
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != (queued ? 8 : 7)) {
			if (bad++ < 3)
				printf("round %d: child status %#x\n", i, status);
		}
	}
	CHECK(bad == 0);
	printf("%d children each got their signal\n", ROUNDS);
	return checks_done();
}
