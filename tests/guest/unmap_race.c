/* A buffer unmapped while a blocked read() is filling it.
 *
 * One thread blocks in read() from a pipe into the end of a 4 MiB mapping;
 * another unmaps the mapping, then another process maps memory of its own
 * and fills it; only then does data arrive. On Linux the read finds its buffer gone
 * and fails with EFAULT (or, had it copied first, succeeds); either way no
 * other process's memory changes. Under nomu (no MMU: unmapped pages go
 * back to the allocator and the next process's mmap may get them) the
 * read's pages stay the reading process's until the read is done.
 * Regression: the read landed in pages just given to the new process. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUF (4 << 20)
#define READ_AT (BUF - 65536)
#define PIECE 65536
#define PIECES 1024

extern char **environ;

static int data_pipe[2];
static char *buf;
static ssize_t got;
static int got_errno;

static void *reader(void *arg)
{
	(void)arg;
	got = read(data_pipe[0], buf + READ_AT, BUF - READ_AT);
	got_errno = errno;
	return NULL;
}

/* The other process: once told, maps memory in pieces (so that it fills
 * the holes the allocator has), fills it and says so; once told again,
 * checks that nothing else wrote to it. */
static int other(int ready_fd, int go_fd)
{
	static unsigned char *mem[PIECES];
	char c;
	if (read(go_fd, &c, 1) != 1)
		return 3;
	for (int i = 0; i < PIECES; i++) {
		mem[i] = mmap(NULL, PIECE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem[i] == MAP_FAILED)
			return 2;
		memset(mem[i], 0x55, PIECE);
	}
	if (write(ready_fd, &c, 1) != 1 || read(go_fd, &c, 1) != 1)
		return 3;
	for (int i = 0; i < PIECES; i++)
		for (size_t j = 0; j < PIECE; j++)
			if (mem[i][j] != 0x55)
				return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "other"))
		return other(atoi(argv[2]), atoi(argv[3]));
	int ready[2], go[2];
	CHECK_OK(pipe(data_pipe));
	CHECK_OK(pipe(ready));
	CHECK_OK(pipe(go));
	char rfd[16], gfd[16];
	snprintf(rfd, sizeof rfd, "%d", ready[1]);
	snprintf(gfd, sizeof gfd, "%d", go[0]);
	char *args[] = {argv[0], "other", rfd, gfd, NULL};
	pid_t pid;
	CHECK(posix_spawn(&pid, argv[0], NULL, NULL, args, environ) == 0);

	buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED);
	memset(buf, 1, BUF);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, reader, NULL) == 0);
	usleep(100 * 1000); /* the reader is blocked in read() by now */
	CHECK_OK(munmap(buf, BUF));
	char c;
	CHECK(write(go[1], "m", 1) == 1);
	CHECK(read(ready[0], &c, 1) == 1);

	static char data[65536];
	memset(data, 0xaa, sizeof data);
	/* A pipe takes 64 KiB at once: the reader gets all of it or fails. */
	CHECK(write(data_pipe[1], data, sizeof data) == sizeof data);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(got == sizeof data || (got == -1 && got_errno == EFAULT));

	CHECK(write(go[1], "c", 1) == 1);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	printf("the other process's memory is its own\n");
	return checks_done();
}
