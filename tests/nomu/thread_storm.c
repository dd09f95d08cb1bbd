/* Threads busy in every kind of wait when the process execs or exits:
 * execve and exit_group must end them all, promptly. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#define FUTEX_WAIT 0

static int fds[2];
static int word;

static void *spin(void *a) { for (;;) syscall(SYS_getpid); return a; }
static void *reader(void *a) { char c; read(fds[0], &c, 1); return a; }
static void *sleeper(void *a) { struct timespec t = { 100, 0 }; nanosleep(&t, NULL); return a; }
static void *futexer(void *a) { syscall(SYS_futex, &word, FUTEX_WAIT, 0, NULL, NULL, 0); return a; }
static void *writer(void *a) { static char big[1 << 20]; write(fds[1], big, sizeof(big)); return a; }
static void *compute(void *a) { volatile unsigned long x = 0; for (;;) x++; return a; }

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "after-exec")) {
		printf("exec'd with the others gone\n");
		return 0;
	}
	void *(*kinds[])(void *) = { spin, reader, sleeper, futexer, writer, compute };
	pipe(fds);
	for (int i = 0; i < 24; i++) {
		pthread_t t;
		pthread_create(&t, NULL, kinds[i % 6], NULL);
	}
	struct timespec t = { 0, 100000000 };
	nanosleep(&t, NULL);
	if (argc > 1 && !strcmp(argv[1], "exec")) {
		char *args[] = { argv[0], "after-exec", NULL };
		execv(argv[0], args);
		return 1;
	}
	printf("exiting with 24 threads running\n");
	fflush(stdout);
	exit(3);
}
