/* Linux's ETXTBSY: while a process runs a program, the program's file
 * cannot be opened for writing or truncated (regression: nomu let a
 * guest write over a running program); reading it works, and once the
 * process has exited the file is writable again. While a file is open
 * for writing it cannot be run. The program run is a
 * copy of this test in /tmp, so a nomu that gets it wrong spoils only
 * the copy. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "wait")) {
		char c;
		while (read(0, &c, 1) > 0) /* until the parent closes the pipe */
			;
		return 0;
	}
	char copy[] = "/tmp/nomu-text-busy-XXXXXX";
	int fd = mkstemp(copy);
	CHECK(fd >= 0);
	close(fd);
	CHECK_OK(nomu_copy_file(argv[0], copy));
	CHECK_OK(chmod(copy, 0755));

	printf("== a running program's file\n");
	int pipefd[2];
	CHECK_OK(pipe(pipefd));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[0], 0);
	posix_spawn_file_actions_addclose(&fa, pipefd[1]);
	char *args[] = {copy, "wait", NULL};
	pid_t c;
	CHECK_EQ(posix_spawn(&c, copy, &fa, NULL, args, environ), 0);
	close(pipefd[0]);
	/* It runs once the spawn returned (vfork: after its exec). */
	CHECK_ERR(open(copy, O_WRONLY), ETXTBSY);
	CHECK_ERR(open(copy, O_RDWR | O_TRUNC), ETXTBSY);
	CHECK_ERR(open(copy, O_WRONLY | O_APPEND), ETXTBSY);
	CHECK_ERR(truncate(copy, 0), ETXTBSY);
	struct stat st;
	CHECK_OK(stat(copy, &st));
	CHECK(st.st_size > 0); /* nothing was truncated */
	int ro = open(copy, O_RDONLY);
	CHECK(ro >= 0);
	close(ro);

	printf("== after it exited\n");
	close(pipefd[1]);
	int status;
	CHECK_EQ(waitpid(c, &status, 0), c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("== a file open for writing cannot be run\n");
	int w = open(copy, O_WRONLY | O_APPEND);
	CHECK(w >= 0);
	char *quick[] = {copy, "wait", NULL};
	CHECK_EQ(posix_spawn(&c, copy, NULL, NULL, quick, environ), ETXTBSY);
	close(w);
	posix_spawn_file_actions_t none;
	posix_spawn_file_actions_init(&none);
	posix_spawn_file_actions_addopen(&none, 0, "/dev/null", O_RDONLY, 0);
	CHECK_EQ(posix_spawn(&c, copy, &none, NULL, quick, environ), 0);
	posix_spawn_file_actions_destroy(&none);
	CHECK_EQ(waitpid(c, &status, 0), c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	w = open(copy, O_WRONLY | O_TRUNC);
	CHECK(w >= 0);
	close(w);
	CHECK_OK(stat(copy, &st));
	CHECK_EQ(st.st_size, 0);
	CHECK_OK(unlink(copy));

	/* A #! script open for writing cannot run either (Linux denies writes
	 * to every file execve opens, the script too, while it opens them);
	 * closed, it runs. */
	printf("== a script open for writing\n");
	char script[] = "/tmp/nomu-textbusy-sh-XXXXXX";
	w = mkstemp(script);
	CHECK(w >= 0);
	const char body[] = "#!/bin/sh\nexit 3\n";
	CHECK_EQ(write(w, body, sizeof body - 1), (long)sizeof body - 1);
	CHECK_OK(fchmod(w, 0755));
	char *run[] = {script, NULL};
	CHECK_EQ(posix_spawn(&c, script, NULL, NULL, run, environ), ETXTBSY);
	close(w);
	CHECK_EQ(posix_spawn(&c, script, NULL, NULL, run, environ), 0);
	CHECK_EQ(waitpid(c, &status, 0), c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	CHECK_OK(unlink(script));
	return checks_done();
}
