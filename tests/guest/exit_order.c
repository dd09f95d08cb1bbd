/* What a parent may count on once wait() reports its child's exit (Linux's
 * do_exit releases everything before exit_notify makes the child a zombie):
 *  - its memory is free again (run with a small --mem under nomu: the
 *    parent then maps as much as the child had);
 *  - its descriptors are closed (a pipe it held the write end of reads EOF,
 *    not EAGAIN);
 *  - its program file is no longer running (it opens for writing, not
 *    ETXTBSY). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_MEM (40 << 20)

extern char **environ;

/* The child: touches CHILD_MEM, keeps the pipe's write end, exits. */
static int child(void)
{
	char *p = mmap(NULL, CHILD_MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 2;
	memset(p, 7, CHILD_MEM);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return child();
	char copy[] = "/tmp/nomu-exit-order-XXXXXX";
	int tmp = mkstemp(copy);
	CHECK(tmp >= 0);
	close(tmp);
	CHECK_OK(nomu_copy_file("/proc/self/exe", copy));
	CHECK_OK(chmod(copy, 0755));

	for (int round = 0; round < 20; round++) {
		int p[2];
		CHECK_OK(pipe2(p, O_NONBLOCK));
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, p[1], 5);
		char *args[] = {copy, "child", NULL};
		pid_t pid;
		CHECK(posix_spawn(&pid, copy, &fa, NULL, args, environ) == 0);
		posix_spawn_file_actions_destroy(&fa);
		close(p[1]);
		int status;
		CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

		char c;
		errno = 0;
		if (read(p[0], &c, 1) != 0)
			CHECK(!"the child's descriptors are closed when wait reports it");
		close(p[0]);
		int w = open(copy, O_WRONLY);
		if (w < 0)
			CHECK(!"its program file opens for writing");
		close(w);
		char *mem = mmap(NULL, CHILD_MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			CHECK(!"its memory is free");
		else {
			memset(mem, 1, CHILD_MEM);
			munmap(mem, CHILD_MEM);
		}
	}
	unlink(copy);
	printf("after each wait: memory free, descriptors closed, program file writable\n");
	return checks_done();
}
