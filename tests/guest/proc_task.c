/* /proc/PID/task: one directory per thread, named by its tid, with the
 * thread's comm, stat and status (its own name, id and blocked signals). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WORKERS 3

static pthread_barrier_t named, checked;
static long worker_tid[WORKERS];

static void *worker(void *arg)
{
	long i = (long)arg;
	char name[16];
	snprintf(name, sizeof name, "worker-%ld", i);
	prctl(PR_SET_NAME, name);
	/* Each blocks a signal of its own: status's SigBlk is per thread. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, i == 1 ? SIGUSR2 : SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	worker_tid[i] = syscall(SYS_gettid);
	pthread_barrier_wait(&named);
	pthread_barrier_wait(&checked);
	return NULL;
}

/* The value after "Key:\t" in a status file, as a number. */
static long status_field(const char *status, const char *key)
{
	const char *at = strstr(status, key);
	return at ? atol(at + strlen(key)) : -1;
}

int main(void)
{
	pid_t pid = getpid();
	pthread_t t[WORKERS];
	pthread_barrier_init(&named, NULL, WORKERS + 1);
	pthread_barrier_init(&checked, NULL, WORKERS + 1);
	for (long i = 0; i < WORKERS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);
	pthread_barrier_wait(&named);

	/* The listing: every thread, nothing else but . and .. */
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	CHECK(d != NULL);
	int listed = 0, found_main = 0, found_workers = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		listed++;
		CHECK_EQ(e->d_type, DT_DIR);
		long tid = atol(e->d_name);
		found_main += tid == pid;
		for (int i = 0; i < WORKERS; i++)
			found_workers += tid == worker_tid[i];
	}
	if (d)
		closedir(d);
	CHECK_EQ(listed, WORKERS + 1);
	CHECK_EQ(found_main, 1);
	CHECK_EQ(found_workers, WORKERS);
	printf("%d threads listed\n", listed);

	/* Each worker's files say its own name and id. */
	for (int i = 0; i < WORKERS; i++) {
		char path[128], want[32];
		snprintf(want, sizeof want, "worker-%d\n", i);
		snprintf(path, sizeof path, "%s/%ld/comm", dir, worker_tid[i]);
		CHECK(strcmp(nomu_slurp(path), want) == 0);
		snprintf(path, sizeof path, "%s/%ld/status", dir, worker_tid[i]);
		const char *status = nomu_slurp(path);
		CHECK_EQ(status_field(status, "\nPid:\t"), worker_tid[i]);
		CHECK_EQ(status_field(status, "\nTgid:\t"), (long)pid);
		CHECK(strncmp(status, "Name:\tworker-", 13) == 0);
		snprintf(path, sizeof path, "%s/%ld/stat", dir, worker_tid[i]);
		const char *stat = nomu_slurp(path);
		char head[64];
		snprintf(head, sizeof head, "%ld (worker-%d) ", worker_tid[i], i);
		CHECK(strncmp(stat, head, strlen(head)) == 0);
		printf("worker %d: %s", i, want);
	}
	/* Worker 1 blocks SIGUSR2, the others SIGUSR1: SigBlk is the thread's. */
	char path[128];
	snprintf(path, sizeof path, "%s/%ld/status", dir, worker_tid[1]);
	const char *blk = strstr(nomu_slurp(path), "SigBlk:\t");
	CHECK(blk != NULL);
	if (blk)
		CHECK_EQ(strtoull(blk + 8, NULL, 16) & (1ULL << (SIGUSR2 - 1)), 1ULL << (SIGUSR2 - 1));
	snprintf(path, sizeof path, "%s/%ld/status", dir, worker_tid[0]);
	blk = strstr(nomu_slurp(path), "SigBlk:\t");
	if (blk)
		CHECK_EQ(strtoull(blk + 8, NULL, 16) & (1ULL << (SIGUSR2 - 1)), 0ULL);

	/* The main thread's directory is there too, and a tid that is not a
	 * thread of the process is not. */
	snprintf(path, sizeof path, "%s/%d/comm", dir, (int)pid);
	CHECK(nomu_slurp(path)[0] != 0);
	snprintf(path, sizeof path, "%s/%d", dir, 999999);
	CHECK(opendir(path) == NULL);

	pthread_barrier_wait(&checked);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	/* Joined threads leave the listing (on Linux a moment after the join
	 * returns: the tid word is cleared before the thread is released). */
	for (int tries = 0; tries < 100000; tries++) {
		d = opendir(dir);
		listed = 0;
		while (d && (e = readdir(d)))
			listed += e->d_name[0] != '.';
		if (d)
			closedir(d);
		if (listed == 1)
			break;
		sched_yield();
	}
	CHECK_EQ(listed, 1);
	return checks_done();
}
