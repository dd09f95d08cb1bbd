/* System V semaphores: semget/semop/semtimedop/semctl, their errnos,
 * atomic multi-operation semops, GETNCNT/GETZCNT of waiters in another
 * process, SEM_UNDO undone when a process exits or is killed, and waits
 * ended by a signal (EINTR even with SA_RESTART), a timeout or removal.
 * Keys come from the pid; every set made is removed. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <spawn.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>

#ifndef SEM_STAT_ANY
#define SEM_STAT_ANY 20
#endif

extern char **environ;
static char *self;

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
	struct seminfo *__buf;
};

static long ctl(int id, int num, int cmd, long arg)
{
	return syscall(SYS_semctl, id, num, cmd, arg);
}

static long op1(int id, unsigned short num, short op, short flg)
{
	struct sembuf s = { num, op, flg };
	return syscall(SYS_semop, id, &s, 1);
}

static long timed1(int id, unsigned short num, short op, short flg, long ms)
{
	struct sembuf s = { num, op, flg };
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	return syscall(SYS_semtimedop, id, &s, 1, &t);
}

static pid_t spawn(char *const args[])
{
	pid_t pid;
	if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0)
		return -1;
	return pid;
}

static int wait_status(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Waits (at most 5 s) until `cmd` of semaphore `num` reads `want`. */
static long wait_count(int id, int num, int cmd, long want)
{
	long v = -1;
	for (int i = 0; i < 500 && (v = ctl(id, num, cmd, 0)) != want; i++)
		nomu_sleep_ms(10);
	return v;
}

static volatile int alarms;
static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void arm_ms(int ms)
{
	struct itimerval it = { .it_value = { 0, ms * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

/* Child roles. */
static int child(int argc, char **argv)
{
	int id = atoi(argv[2]);
	if (!strcmp(argv[1], "undo")) {
		/* +3 and -1 with SEM_UNDO, then exit (or wait to be killed). */
		struct sembuf s[2] = { { 0, 3, SEM_UNDO }, { 1, -1, SEM_UNDO } };
		if (semop(id, s, 2))
			return 10;
		if (argc > 3) {
			op1(id, 2, 1, 0); /* tell the parent */
			for (;;)
				pause();
		}
		return 0;
	}
	if (!strcmp(argv[1], "down")) /* waits on semaphore 0 */
		return op1(id, 0, -1, 0) == 0 ? 0 : 11;
	if (!strcmp(argv[1], "zero")) /* waits for semaphore 1 to be 0 */
		return op1(id, 1, 0, 0) == 0 ? 0 : 12;
	if (!strcmp(argv[1], "stopped")) /* a stop and continue: EINTR */
		return op1(id, 0, -1, 0) == -1 && errno == EINTR ? 0 : 15;
	if (!strcmp(argv[1], "removed"))
		return op1(id, 0, -1, 0) == -1 && errno == EIDRM ? 0 : 13;
	if (!strcmp(argv[1], "ping")) {
		/* Ping-pong: wait on 0, post 1, n times. */
		for (int i = 0; i < 100; i++)
			if (op1(id, 0, -1, 0) || op1(id, 1, 1, 0))
				return 14;
		return 0;
	}
	if (!strcmp(argv[1], "nobody")) {
		if (setgid(65534) || setuid(65534))
			return 30;
		if (!(op1(id, 0, 1, IPC_NOWAIT) == -1 && errno == EACCES))
			return 31;
		if (!(ctl(id, 0, GETVAL, 0) == -1 && errno == EACCES))
			return 32;
		if (!(ctl(id, 0, IPC_RMID, 0) == -1 && errno == EPERM))
			return 33;
		if (!(semget(atoi(argv[3]), 1, 0600) == -1 && errno == EACCES))
			return 34;
		return 0;
	}
	return 99;
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc >= 3)
		return child(argc, argv);
	key_t key = 0x6e6e0000 | (getpid() & 0xffff);
	char idarg[16], keyarg[16];

	printf("== semget\n");
	CHECK_ERR(semget(IPC_PRIVATE, -1, 0600), EINVAL);
	CHECK_ERR(semget(IPC_PRIVATE, 0, 0600), EINVAL);
	CHECK_ERR(semget(IPC_PRIVATE, 32001, 0600), EINVAL);
	CHECK_ERR(semget(key, 2, 0600), ENOENT);
	int id;
	CHECK_OK(id = semget(key, 3, IPC_CREAT | IPC_EXCL | 0600));
	CHECK_ERR(semget(key, 3, IPC_CREAT | IPC_EXCL | 0600), EEXIST);
	CHECK_EQ(semget(key, 2, 0), id);
	CHECK_EQ(semget(key, 0, 0), id);
	CHECK_ERR(semget(key, 4, 0), EINVAL);
	snprintf(idarg, sizeof(idarg), "%d", id);
	snprintf(keyarg, sizeof(keyarg), "%d", key);

	printf("== semctl values\n");
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 0);
	CHECK_EQ(ctl(id, 0, SETVAL, 5), 0);
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 5);
	CHECK_EQ(ctl(id, 0, GETPID, 0), getpid());
	CHECK_ERR(ctl(id, 0, SETVAL, -1), ERANGE);
	CHECK_ERR(ctl(id, 0, SETVAL, 32768), ERANGE);
	CHECK_EQ(ctl(id, 0, SETVAL, 32767), 0);
	CHECK_EQ(ctl(id, 0, SETVAL, 5 | (7L << 32)), 0); /* an int */
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 5);
	CHECK_ERR(ctl(id, 3, GETVAL, 0), EINVAL);
	CHECK_ERR(ctl(id, -1, SETVAL, 1), EINVAL);
	CHECK_ERR(ctl(id, 3, SETVAL, 1), EINVAL);
	CHECK_ERR(ctl(-1, 0, GETVAL, 0), EINVAL);
	CHECK_ERR(ctl(id, 0, 1234, 0), EINVAL);
	unsigned short all[3] = { 1, 2, 3 }, got[3] = { 0, 0, 0 };
	CHECK_EQ(ctl(id, 0, SETALL, (long)all), 0);
	CHECK_EQ(ctl(id, 0, GETALL, (long)got), 0);
	CHECK(got[0] == 1 && got[1] == 2 && got[2] == 3);
	CHECK_ERR(ctl(id, 0, GETALL, 8), EFAULT);
	CHECK_ERR(ctl(id, 0, SETALL, 8), EFAULT);
	unsigned short bad[3] = { 1, 40000, 3 };
	CHECK_ERR(ctl(id, 0, SETALL, (long)bad), ERANGE);
	CHECK_EQ(ctl(id, 1, GETVAL, 0), 2);
	CHECK_EQ(ctl(id, 0, GETNCNT, 0), 0);
	CHECK_EQ(ctl(id, 0, GETZCNT, 0), 0);

	printf("== semop\n");
	struct sembuf s[2];
	CHECK_ERR(syscall(SYS_semop, id, s, 0), EINVAL);
	CHECK_ERR(syscall(SYS_semop, id, s, 501), E2BIG);
	CHECK_ERR(syscall(SYS_semop, -1, s, 1), EINVAL);
	CHECK_ERR(syscall(SYS_semop, id, (void *)8, 1), EFAULT);
	CHECK_ERR(op1(id, 3, 1, 0), EFBIG);
	CHECK_ERR(op1(id + 1000 * 32768, 0, 1, 0), EINVAL);
	CHECK_EQ(op1(id, 0, 2, 0), 0);
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 3);
	CHECK_EQ(op1(id, 0, -3, 0), 0);
	CHECK_ERR(op1(id, 0, -1, IPC_NOWAIT), EAGAIN);
	CHECK_EQ(op1(id, 0, 0, 0), 0); /* zero: goes through */
	CHECK_ERR(op1(id, 1, 0, IPC_NOWAIT), EAGAIN);
	CHECK_EQ(ctl(id, 2, SETVAL, 32767), 0);
	CHECK_ERR(op1(id, 2, 1, 0), ERANGE);
	CHECK_EQ(ctl(id, 2, SETVAL, 3), 0);
	/* All or nothing: the first would go, the second blocks. */
	s[0] = (struct sembuf){ 1, -1, 0 };
	s[1] = (struct sembuf){ 0, -1, IPC_NOWAIT };
	CHECK_ERR(semop(id, s, 2), EAGAIN);
	CHECK_EQ(ctl(id, 1, GETVAL, 0), 2);
	/* In order: the same semaphore twice sees the first's result. */
	s[0] = (struct sembuf){ 1, 1, 0 };
	s[1] = (struct sembuf){ 1, -3, 0 };
	CHECK_EQ(semop(id, s, 2), 0);
	CHECK_EQ(ctl(id, 1, GETVAL, 0), 0);
	s[0] = (struct sembuf){ 1, 1, 0 };
	s[1] = (struct sembuf){ 1, 0, IPC_NOWAIT };
	CHECK_ERR(semop(id, s, 2), EAGAIN);
	CHECK_EQ(ctl(id, 1, GETVAL, 0), 0);

	printf("== semtimedop\n");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_ERR(timed1(id, 0, -1, 0, 100), EAGAIN);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 90);
	CHECK_ERR(timed1(id, 0, -1, 0, 0), EAGAIN);
	CHECK_EQ(timed1(id, 2, -1, 0, 0), 0);
	struct sembuf one = { 0, -1, 0 };
	struct timespec badts = { 0, 1000000000 };
	CHECK_ERR(syscall(SYS_semtimedop, id, &one, 1, &badts), EINVAL);
	badts.tv_sec = -1;
	badts.tv_nsec = 0;
	CHECK_ERR(syscall(SYS_semtimedop, id, &one, 1, &badts), EINVAL);
	CHECK_ERR(syscall(SYS_semtimedop, id, &one, 1, (void *)8), EFAULT);
	CHECK_ERR(syscall(SYS_semtimedop, id, &one, 0, (void *)8), EFAULT); /* the timeout is read first */
	CHECK_EQ(syscall(SYS_semtimedop, id, &(struct sembuf){ 2, 1, 0 }, 1, NULL), 0);

	printf("== IPC_STAT, IPC_SET, IPC_INFO, SEM_INFO, SEM_STAT\n");
	struct semid_ds ds;
	CHECK_EQ(ctl(id, 0, IPC_STAT, (long)&ds), 0);
	CHECK_EQ(ds.sem_nsems, 3);
	CHECK_EQ(ds.sem_perm.mode, 0600);
	CHECK_EQ(ds.sem_perm.__key, key);
	CHECK_EQ(ds.sem_perm.uid, geteuid());
	CHECK(ds.sem_otime > 0 && ds.sem_ctime > 0);
	CHECK_ERR(ctl(id, 0, IPC_STAT, 8), EFAULT);
	ds.sem_perm.mode = 0640;
	CHECK_EQ(ctl(id, 0, IPC_SET, (long)&ds), 0);
	CHECK_EQ(ctl(id, 0, IPC_STAT, (long)&ds), 0);
	CHECK_EQ(ds.sem_perm.mode, 0640);
	CHECK_ERR(ctl(id, 0, IPC_SET, 8), EFAULT);
	struct seminfo si;
	int maxidx = ctl(0, 0, IPC_INFO, (long)&si);
	CHECK(maxidx >= 0);
	CHECK_EQ(si.semmsl, 32000);
	CHECK_EQ(si.semopm, 500);
	CHECK_EQ(si.semvmx, 32767);
	CHECK_EQ(si.semmni, 32000);
	CHECK_EQ(si.semusz, 20);
	CHECK_EQ(si.semaem, 32767);
	CHECK(ctl(0, 0, SEM_INFO, (long)&si) >= 0);
	CHECK(si.semusz >= 1 && si.semaem >= 3);
	int found = 0;
	for (int i = 0; i <= maxidx; i++) {
		if (ctl(i, 0, SEM_STAT, (long)&ds) == id)
			found++;
		if (ctl(i, 0, SEM_STAT_ANY, (long)&ds) == id)
			found++;
	}
	CHECK_EQ(found, 2);

	printf("== waiters: GETNCNT, GETZCNT\n");
	CHECK_EQ(ctl(id, 0, SETVAL, 0), 0);
	CHECK_EQ(ctl(id, 1, SETVAL, 1), 0);
	char *dargs[] = { self, "down", idarg, NULL }, *zargs[] = { self, "zero", idarg, NULL };
	pid_t d1 = spawn(dargs), d2 = spawn(dargs), z = spawn(zargs);
	CHECK(d1 > 0 && d2 > 0 && z > 0);
	CHECK_EQ(wait_count(id, 0, GETNCNT, 2), 2);
	CHECK_EQ(wait_count(id, 1, GETZCNT, 1), 1);
	CHECK_EQ(ctl(id, 0, GETZCNT, 0), 0);
	CHECK_EQ(ctl(id, 1, GETNCNT, 0), 0);
	CHECK_EQ(op1(id, 0, 2, 0), 0);
	CHECK_EQ(ctl(id, 1, SETVAL, 0), 0);
	CHECK_EQ(wait_status(d1), 0);
	CHECK_EQ(wait_status(d2), 0);
	CHECK_EQ(wait_status(z), 0);
	CHECK_EQ(ctl(id, 0, GETNCNT, 0), 0);
	CHECK_EQ(ctl(id, 1, GETZCNT, 0), 0);
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 0);

	printf("== ping-pong between two processes\n");
	char *pargs[] = { self, "ping", idarg, NULL };
	pid_t p = spawn(pargs);
	int pongs = 0;
	for (int i = 0; i < 100; i++)
		if (op1(id, 0, 1, 0) == 0 && op1(id, 1, -1, 0) == 0)
			pongs++;
	CHECK_EQ(pongs, 100);
	CHECK_EQ(wait_status(p), 0);
	CHECK_EQ(ctl(id, 0, GETPID, 0), p);
	CHECK_EQ(ctl(id, 1, GETPID, 0), getpid());

	printf("== SEM_UNDO at exit\n");
	unsigned short start[3] = { 10, 10, 0 };
	CHECK_EQ(ctl(id, 0, SETALL, (long)start), 0);
	char *uargs[] = { self, "undo", idarg, NULL };
	pid_t u = spawn(uargs);
	CHECK_EQ(wait_status(u), 0);
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 10);
	CHECK_EQ(ctl(id, 1, GETVAL, 0), 10);
	CHECK_EQ(ctl(id, 0, GETPID, 0), u);
	/* Killed by a signal: undone too. */
	char *kargs[] = { self, "undo", idarg, "stay", NULL };
	u = spawn(kargs);
	CHECK_EQ(op1(id, 2, -1, 0), 0); /* it did its semop */
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 13);
	CHECK_EQ(ctl(id, 1, GETVAL, 0), 9);
	CHECK_OK(kill(u, SIGKILL));
	CHECK_EQ(wait_status(u), 128 + SIGKILL);
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 10);
	CHECK_EQ(ctl(id, 1, GETVAL, 0), 10);
	/* Undone within 0..32767: a value set meanwhile clamps it. */
	u = spawn(kargs);
	CHECK_EQ(op1(id, 2, -1, 0), 0);
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 13);
	s[0] = (struct sembuf){ 0, -12, 0 };
	CHECK_EQ(semop(id, s, 1), 0);
	CHECK_OK(kill(u, SIGKILL));
	CHECK_EQ(wait_status(u), 128 + SIGKILL);
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 0); /* 1 - 3, kept at 0 */
	/* SETVAL clears the adjustment of its semaphore. */
	u = spawn(kargs);
	CHECK_EQ(op1(id, 2, -1, 0), 0);
	CHECK_EQ(ctl(id, 0, SETVAL, 7), 0);
	CHECK_OK(kill(u, SIGKILL));
	CHECK_EQ(wait_status(u), 128 + SIGKILL);
	CHECK_EQ(ctl(id, 0, GETVAL, 0), 7);
	CHECK_EQ(ctl(id, 1, GETVAL, 0), 10);
	/* Its own undo range: an adjustment beyond 32767 is ERANGE. */
	CHECK_EQ(ctl(id, 2, SETVAL, 32767), 0);
	CHECK_EQ(op1(id, 2, -32767, SEM_UNDO), 0);
	CHECK_EQ(op1(id, 2, 1, 0), 0);
	CHECK_ERR(op1(id, 2, -1, SEM_UNDO | IPC_NOWAIT), ERANGE);
	CHECK_EQ(ctl(id, 2, SETVAL, 0), 0);

	printf("== a signal ends a blocked semop: EINTR, even with SA_RESTART\n");
	nomu_handle(SIGALRM, on_alarm, SA_RESTART);
	CHECK_EQ(ctl(id, 0, SETVAL, 0), 0);
	arm_ms(50);
	CHECK_ERR(op1(id, 0, -1, 0), EINTR);
	CHECK_EQ(alarms, 1);
	arm_ms(50);
	CHECK_ERR(timed1(id, 0, -1, 0, 5000), EINTR);
	CHECK_EQ(alarms, 2);
	CHECK_EQ(ctl(id, 0, GETNCNT, 0), 0);

	printf("== a stop and continue end a blocked semop: EINTR\n");
	char *stargs[] = { self, "stopped", idarg, NULL };
	pid_t st_child = spawn(stargs);
	CHECK_EQ(wait_count(id, 0, GETNCNT, 1), 1);
	CHECK_OK(kill(st_child, SIGSTOP));
	int st;
	CHECK_EQ(waitpid(st_child, &st, WUNTRACED), st_child);
	CHECK(WIFSTOPPED(st));
	CHECK_OK(kill(st_child, SIGCONT));
	CHECK_EQ(wait_status(st_child), 0);
	CHECK_EQ(ctl(id, 0, GETNCNT, 0), 0);

	printf("== permissions\n");
	if (geteuid() == 0) {
		char *nargs[] = { self, "nobody", idarg, keyarg, NULL };
		CHECK_EQ(wait_status(spawn(nargs)), 0);
	}

	printf("== removal ends a wait: EIDRM\n");
	char *rargs[] = { self, "removed", idarg, NULL };
	pid_t r = spawn(rargs);
	CHECK_EQ(wait_count(id, 0, GETNCNT, 1), 1);
	CHECK_EQ(ctl(id, 0, IPC_RMID, 0), 0);
	CHECK_EQ(wait_status(r), 0);
	CHECK_ERR(ctl(id, 0, GETVAL, 0), EINVAL);
	CHECK_ERR(op1(id, 0, 1, 0), EINVAL);
	CHECK_ERR(semget(key, 1, 0), ENOENT);
	return checks_done();
}
