/* A task's name (comm): PR_GET_NAME and /proc/self/comm give the program's
 * file name as execve got it (the last part of the path, 15 bytes at most)
 * until PR_SET_NAME changes it; a forked child, a vfork child and a new
 * thread are called what their creator was; execve names the process
 * after the new program again.
 *
 * Found with busybox (the MMU build): an applet re-executed through
 * /proc/self/exe renames itself only if PR_GET_NAME says "exe", and nomu
 * gave an empty name there, so ps listed every applet as "exe". */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static char got[17];

static const char *name_now(void)
{
	memset(got, 0, sizeof got);
	CHECK_OK(prctl(PR_GET_NAME, got, 0, 0, 0));
	return got;
}

/* /proc/self/comm without its newline, or "". */
static const char *proc_comm(const char *path)
{
	static char buf[64];
	buf[0] = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return buf;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	return buf;
}

static void *thread_name(void *arg)
{
	(void)arg;
	return strdup(name_now());
}

/* Checks what a child reports through its exit status: 0 if all was well. */
static int child_status(pid_t pid)
{
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "exec") == 0) {
		/* Run as /proc/self/exe: named "exe", as on Linux. */
		CHECK(strcmp(name_now(), "exe") == 0);
		CHECK(strcmp(proc_comm("/proc/self/comm"), "exe") == 0);
		return checks_done();
	}

	/* The program's own name: the last part of the exec path, cut to 15. */
	const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	char want[16] = { 0 };
	strncpy(want, base, 15);
	CHECK(strcmp(name_now(), want) == 0);
	CHECK(strcmp(proc_comm("/proc/self/comm"), want) == 0);

	/* Set, and longer than 15: cut. */
	CHECK_OK(prctl(PR_SET_NAME, "renamed-for-the-test", 0, 0, 0));
	CHECK(strcmp(name_now(), "renamed-for-the") == 0);
	CHECK_OK(prctl(PR_SET_NAME, "renamed", 0, 0, 0));
	CHECK(strcmp(name_now(), "renamed") == 0);
	CHECK(strcmp(proc_comm("/proc/self/comm"), "renamed") == 0);

	/* A new thread is called what its creator was. */
	pthread_t t;
	void *tname = NULL;
	CHECK_EQ(pthread_create(&t, NULL, thread_name, NULL), 0);
	CHECK_EQ(pthread_join(t, &tname), 0);
	CHECK(tname && strcmp(tname, "renamed") == 0);
	free(tname);

	/* So is a forked child, until it names itself; its parent keeps its own. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int bad = strcmp(name_now(), "renamed") != 0;
		bad |= strcmp(proc_comm("/proc/self/comm"), "renamed") != 0;
		prctl(PR_SET_NAME, "child", 0, 0, 0);
		bad |= strcmp(name_now(), "child") != 0;
		_exit(bad);
	}
	CHECK(pid > 0);
	CHECK_EQ(child_status(pid), 0);
	CHECK(strcmp(name_now(), "renamed") == 0);

	/* And a vfork child, whose execve names it after the new program. */
	pid = vfork();
	if (pid == 0) {
		execl("/proc/self/exe", "comm", "exec", (char *)NULL);
		_exit(127);
	}
	CHECK(pid > 0);
	CHECK_EQ(child_status(pid), 0);
	CHECK(strcmp(name_now(), "renamed") == 0);

	return checks_done();
}
