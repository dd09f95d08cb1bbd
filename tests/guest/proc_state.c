/* The state /proc shows for a process and its threads: R for the thread
 * that reads it and for one running its own code, S for one asleep in a
 * syscall, T for a stopped process, Z for a zombie until it is reaped
 * (listed in /proc, its stat and status still there, its cmdline and
 * environ empty: its memory is gone) and for a leader that left while
 * its other threads go on. ps and top read these. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* stat's state letter: the first field after the name's last ')'. */
static char stat_state(const char *path)
{
	const char *paren = strrchr(nomu_slurp(path), ')');
	return paren && paren[1] == ' ' ? paren[2] : '?';
}

/* status's State: line, without its newline ("" when absent). */
static const char *status_state(const char *path)
{
	static char state[64];
	state[0] = 0;
	const char *line = strstr(nomu_slurp(path), "\nState:\t");
	if (line)
		sscanf(line + 8, "%63[^\n]", state);
	return state;
}

/* Polls until stat at `path` shows `want` (another task's sleep or stop
 * takes effect a moment after it is asked for); the state last seen. */
static char wait_for_state(const char *path, char want)
{
	char seen = '?';
	for (int i = 0; i < 5000 && (seen = stat_state(path)) != want; i++)
		nomu_sleep_ms(1);
	return seen;
}

static int pipe_fds[2];
static char own_state, leader_state;

/* Blocks in read until the main thread writes. */
static void *reader(void *arg)
{
	char c;
	(void)arg;
	return (void *)(long)read(pipe_fds[0], &c, 1);
}

/* Reads its own task's stat (R), then the process's, which is its
 * leader's, asleep in pthread_join (S). */
static void *inspector(void *arg)
{
	char path[64];
	(void)arg;
	snprintf(path, sizeof path, "/proc/self/task/%ld/stat", (long)syscall(SYS_gettid));
	own_state = stat_state(path);
	leader_state = wait_for_state("/proc/self/stat", 'S');
	return NULL;
}

/* Field `n` of a stat file, numbered as proc(5) does (the state is 3). */
static long stat_field(const char *path, int n)
{
	const char *p = strrchr(nomu_slurp(path), ')');
	long v = -999;
	for (int i = 3; p && i <= n; i++) {
		p = strchr(p, ' ');
		if (p && i == n)
			sscanf(p + 1, "%ld", &v);
		if (p)
			p++;
	}
	return v;
}

/* The priority and nice value (fields 18 and 19) follow setpriority. */
static void scheduling(void)
{
	CHECK_OK(setpriority(PRIO_PROCESS, 0, 5));
	CHECK_EQ(stat_field("/proc/self/stat", 18), 25);
	CHECK_EQ(stat_field("/proc/self/stat", 19), 5);
	CHECK_EQ(stat_field("/proc/self/stat", 41), SCHED_OTHER);
}

static int listed_in_proc(pid_t pid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int found = 0;
	while (d && (e = readdir(d)))
		found |= atoi(e->d_name) == pid;
	if (d)
		closedir(d);
	return found;
}

static void threads(void)
{
	char path[64];
	CHECK_EQ(stat_state("/proc/self/stat"), 'R');
	CHECK(strcmp(status_state("/proc/self/status"), "R (running)") == 0);
	snprintf(path, sizeof path, "/proc/self/task/%ld/stat", (long)syscall(SYS_gettid));
	CHECK_EQ(stat_state(path), 'R');
	CHECK_EQ(stat_state("/proc/thread-self/stat"), 'R');

	pthread_t t;
	CHECK_OK(pipe(pipe_fds));
	CHECK_EQ(pthread_create(&t, NULL, reader, NULL), 0);
	/* The reader's tid: the task directory's entry that is not ours. */
	long tid = 0;
	for (int i = 0; i < 5000 && !tid; i++) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (atol(e->d_name) > 0 && atol(e->d_name) != syscall(SYS_gettid))
				tid = atol(e->d_name);
		closedir(d);
	}
	CHECK(tid > 0);
	snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
	CHECK_EQ(wait_for_state(path, 'S'), 'S');
	snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
	CHECK(strcmp(status_state(path), "S (sleeping)") == 0);
	CHECK_EQ(write(pipe_fds[1], "x", 1), 1);
	void *got;
	CHECK_EQ(pthread_join(t, &got), 0);
	CHECK_EQ((long)got, 1);

	CHECK_EQ(pthread_create(&t, NULL, inspector, NULL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(own_state, 'R');
	CHECK_EQ(leader_state, 'S');
}

/* A child started from this program in `mode` (see main). */
static pid_t start_child(const char *self, const char *mode)
{
	char *args[] = {(char *)self, (char *)mode, NULL};
	pid_t pid = vfork();
	if (pid == 0) {
		execve(self, args, environ);
		_exit(99);
	}
	return pid;
}

/* In a child whose leader left by pthread_exit: the process's stat and
 * status are its leader's, a zombie (Z) while the other thread goes on.
 * The child's exit status: 0 when it saw that. */
static void *after_the_leader(void *arg)
{
	(void)arg;
	int ok = wait_for_state("/proc/self/stat", 'Z') == 'Z' &&
		 strcmp(status_state("/proc/self/status"), "Z (zombie)") == 0;
	exit(ok ? 0 : 1);
}

static void leader_gone(const char *self)
{
	int status;
	pid_t pid = start_child(self, "leader-exits");
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A child busy in its own code is running (R), whoever looks. */
static void spinning_child(const char *self)
{
	char path[64];
	int status;
	pid_t pid = start_child(self, "spin");
	CHECK(pid > 0);
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	CHECK_EQ(wait_for_state(path, 'R'), 'R');
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	CHECK(strcmp(status_state(path), "R (running)") == 0);
	CHECK_OK(kill(pid, SIGKILL));
	CHECK_EQ(waitpid(pid, &status, 0), pid);
}

static void child_states(const char *self)
{
	char stat_path[64], status_path[64], path[64];
	pid_t pid = start_child(self, "pause");
	CHECK(pid > 0);
	snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", pid);
	snprintf(status_path, sizeof status_path, "/proc/%d/status", pid);
	CHECK_EQ(wait_for_state(stat_path, 'S'), 'S');
	CHECK(strcmp(status_state(status_path), "S (sleeping)") == 0);

	int status;
	CHECK_OK(kill(pid, SIGSTOP));
	CHECK_EQ(waitpid(pid, &status, WUNTRACED), pid);
	CHECK(WIFSTOPPED(status));
	CHECK_EQ(wait_for_state(stat_path, 'T'), 'T');
	CHECK(strcmp(status_state(status_path), "T (stopped)") == 0);

	/* Killed and not yet reaped: a zombie, still in /proc. */
	siginfo_t info;
	CHECK_OK(kill(pid, SIGKILL));
	CHECK_OK(waitid(P_PID, pid, &info, WEXITED | WNOWAIT));
	CHECK_EQ(info.si_code, CLD_KILLED);
	CHECK_EQ(stat_state(stat_path), 'Z');
	CHECK(strcmp(status_state(status_path), "Z (zombie)") == 0);
	CHECK(listed_in_proc(pid));
	snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
	int fd = open(path, O_RDONLY);
	char c;
	CHECK(fd >= 0);
	CHECK_EQ(read(fd, &c, 1), 0);
	close(fd);
	snprintf(path, sizeof path, "/proc/%d/environ", pid);
	CHECK_EQ(strlen(nomu_slurp(path)), 0);
	snprintf(path, sizeof path, "/proc/%d/comm", pid);
	CHECK(strncmp(nomu_slurp(path), "proc_state", 10) == 0);

	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK_ERR(open(stat_path, O_RDONLY), ENOENT);
	CHECK(!listed_in_proc(pid));
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "pause") == 0)
		for (;;)
			pause();
	if (argc > 1 && strcmp(argv[1], "leader-exits") == 0) {
		pthread_t t;
		pthread_create(&t, NULL, after_the_leader, NULL);
		pthread_exit(NULL);
	}
	if (argc > 1 && strcmp(argv[1], "spin") == 0)
		for (volatile int i = 0;; i++)
			;
	threads();
	spinning_child(argv[0]);
	leader_gone(argv[0]);
	scheduling();
	child_states(argv[0]);
	return nomu_checks_done("proc_state");
}
