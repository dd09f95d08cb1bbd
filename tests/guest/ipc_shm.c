/* System V shared memory: shmget/shmat/shmdt/shmctl, their errnos, a
 * segment seen by two processes, shm_nattch as processes attach, exit and
 * execve, IPC_RMID's destroy at the last detach, and SHM_RDONLY. Keys
 * come from the pid; every segment made is removed. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef SHM_STAT_ANY
#define SHM_STAT_ANY 15
#endif
#ifndef SHM_DEST
#define SHM_DEST 01000
#endif
#ifndef SHM_LOCKED
#define SHM_LOCKED 02000
#endif

extern char **environ;
static char *self;

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

static long nattch(int id)
{
	struct shmid_ds ds;
	return shmctl(id, IPC_STAT, &ds) == 0 ? (long)ds.shm_nattch : -1;
}

static int sem_op(int sem, unsigned short num, short op)
{
	struct sembuf s = { num, op, 0 };
	return semop(sem, &s, 1);
}

/* The fields of /proc/sysvipc/NAME's line for `key` (after key and id),
 * as numbers (perms in octal); how many were read. */
static int proc_line(const char *name, key_t key, unsigned long *f, int max)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/sysvipc/%s", name);
	FILE *in = fopen(path, "r");
	if (!in)
		return -1;
	int n = -1;
	while (fgets(line, sizeof(line), in)) {
		char *end;
		long k = strtol(line, &end, 10);
		if (end == line || k != key)
			continue;
		strtol(end, &end, 10); /* the id */
		f[0] = strtoul(end, &end, 8);
		for (n = 1; n < max; n++) {
			char *next;
			f[n] = strtoul(end, &next, 10);
			if (next == end)
				break;
			end = next;
		}
	}
	fclose(in);
	return n;
}

/* /proc/self/maps's line for the mapping that starts at `addr`. */
static int maps_line(void *addr, char *out, size_t size)
{
	FILE *in = fopen("/proc/self/maps", "r");
	if (!in)
		return -1;
	int found = -1;
	while (fgets(out, size, in))
		if (strtoul(out, NULL, 16) == (uintptr_t)addr) {
			found = 0;
			break;
		}
	fclose(in);
	return found;
}

/* Child roles. */
static int child(int argc, char **argv)
{
	int id = atoi(argv[2]);
	if (!strcmp(argv[1], "reader")) {
		/* Reads the parent's words, answers in the same segment. */
		char *p = shmat(id, NULL, 0);
		if (p == (void *)-1)
			return 10;
		if (strcmp(p, "from the parent"))
			return 11;
		strcpy(p + 100, "from the child");
		return shmdt(p) == 0 ? 0 : 12;
	}
	if (!strcmp(argv[1], "stay")) /* attaches and exits without shmdt */
		return shmat(id, NULL, SHM_RDONLY) == (void *)-1 ? 13 : 0;
	if (!strcmp(argv[1], "rdonly")) {
		volatile char *p = shmat(id, NULL, SHM_RDONLY);
		if (p == (void *)-1 || p[0] != 'x')
			return 14;
		/* A syscall writing into it fails; a store faults. */
		int fds[2];
		if (pipe(fds) || write(fds[1], "abc", 3) != 3)
			return 15;
		if (!(read(fds[0], (char *)p, 3) == -1 && errno == EFAULT))
			return 16;
		p[0] = 'y';
		return 17;
	}
	if (!strcmp(argv[1], "producer")) {
		/* A ring of 8 ints guarded by semaphores 0 (free) and 1 (full). */
		int sem = atoi(argv[3]);
		int *ring = shmat(id, NULL, 0);
		if (ring == (void *)-1)
			return 18;
		for (int i = 1; i <= 1000; i++) {
			if (sem_op(sem, 0, -1))
				return 19;
			ring[i % 8] = i;
			if (sem_op(sem, 1, 1))
				return 20;
		}
		return 0;
	}
	if (!strcmp(argv[1], "nobody")) {
		if (setgid(65534) || setuid(65534))
			return 30;
		if (!(shmat(id, NULL, 0) == (void *)-1 && errno == EACCES))
			return 31;
		if (!(shmctl(id, IPC_RMID, NULL) == -1 && errno == EPERM))
			return 32;
		struct shmid_ds ds;
		if (!(shmctl(id, IPC_STAT, &ds) == -1 && errno == EACCES))
			return 33;
		if (!(shmctl(id, SHM_LOCK, NULL) == -1 && errno == EPERM))
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
	key_t key = 0x6e6f0000 | (getpid() & 0xffff);
	char idarg[16];
	long page = sysconf(_SC_PAGESIZE);

	printf("== shmget\n");
	CHECK_ERR(shmget(IPC_PRIVATE, 0, 0600), EINVAL);
	CHECK_ERR(shmget(key, 4096, 0600), ENOENT);
	int id;
	CHECK_OK(id = shmget(key, 10000, IPC_CREAT | IPC_EXCL | 0600));
	CHECK_ERR(shmget(key, 10000, IPC_CREAT | IPC_EXCL | 0600), EEXIST);
	CHECK_EQ(shmget(key, 10000, 0), id);
	CHECK_EQ(shmget(key, 0, 0), id);
	CHECK_ERR(shmget(key, 10001, 0), EINVAL);
	snprintf(idarg, sizeof(idarg), "%d", id);

	printf("== shmat, shmdt\n");
	struct shmid_ds ds;
	CHECK_EQ(shmctl(id, IPC_STAT, &ds), 0);
	CHECK_EQ(ds.shm_segsz, 10000);
	CHECK_EQ(ds.shm_nattch, 0);
	CHECK_EQ(ds.shm_cpid, getpid());
	CHECK_EQ(ds.shm_lpid, 0);
	CHECK_EQ(ds.shm_atime, 0);
	CHECK_EQ(ds.shm_perm.mode, 0600);
	CHECK_EQ(ds.shm_perm.__key, key);
	CHECK_EQ(ds.shm_perm.cuid, geteuid());
	char *p = shmat(id, NULL, 0);
	CHECK(p != (void *)-1);
	CHECK(((uintptr_t)p & (page - 1)) == 0);
	CHECK(p[0] == 0 && p[9999] == 0 && p[12287] == 0); /* zeroed, whole pages */
	strcpy(p, "from the parent");
	CHECK_EQ(shmctl(id, IPC_STAT, &ds), 0);
	CHECK_EQ(ds.shm_nattch, 1);
	CHECK_EQ(ds.shm_lpid, getpid());
	CHECK(ds.shm_atime > 0);
	/* maps shows the segment's file: offset 0, device 00:01, its id as
	 * the inode, "/SYSV<key> (deleted)". */
	char line[512], want[64];
	CHECK_EQ(maps_line(p, line, sizeof(line)), 0);
	unsigned long off = 1, ino = 0;
	char perms[8] = "", dev[16] = "";
	CHECK_EQ(sscanf(strchr(line, ' '), " %7s %lx %15s %lu", perms, &off, dev, &ino), 4);
	CHECK(!strcmp(perms, "rw-s") && off == 0 && !strcmp(dev, "00:01") && ino == (unsigned long)id);
	snprintf(want, sizeof(want), "/SYSV%08x (deleted)\n", (unsigned)key);
	CHECK(strlen(line) > strlen(want) && !strcmp(line + strlen(line) - strlen(want), want));
	CHECK_ERR(syscall(SYS_shmat, -1, 0, 0), EINVAL);
	CHECK_ERR(syscall(SYS_shmat, id + 1000 * 32768, 0, 0), EINVAL);
	CHECK_ERR(syscall(SYS_shmat, id, 0, SHM_REMAP), EINVAL);
	CHECK_ERR(syscall(SYS_shmat, id, p + 1, 0), EINVAL); /* unaligned, no SHM_RND */
	CHECK_ERR(syscall(SYS_shmdt, p + 1), EINVAL);
	CHECK_ERR(syscall(SYS_shmdt, p + page), EINVAL); /* not where it starts */
	CHECK_ERR(syscall(SYS_shmdt, (void *)&key), EINVAL);
	/* The same address again (SHM_RND rounds down to it): overlaps. */
	CHECK_ERR(syscall(SYS_shmat, id, p + 1, SHM_RND), EINVAL);
	CHECK_EQ(shmdt(p), 0);
	CHECK_ERR(shmdt(p), EINVAL);
	CHECK_EQ(nattch(id), 0);
	CHECK_EQ(shmctl(id, IPC_STAT, &ds), 0);
	CHECK(ds.shm_dtime > 0);
	/* Its contents stay with the segment. */
	p = shmat(id, NULL, 0);
	CHECK(p != (void *)-1 && !strcmp(p, "from the parent"));

	printf("== another process sees it\n");
	char *rargs[] = { self, "reader", idarg, NULL };
	pid_t c = spawn(rargs);
	CHECK_EQ(wait_status(c), 0);
	CHECK(!strcmp(p + 100, "from the child"));
	CHECK_EQ(nattch(id), 1);
	CHECK_EQ(shmctl(id, IPC_STAT, &ds), 0);
	CHECK_EQ(ds.shm_lpid, c);
	/* Exit detaches; the execve of posix_spawn left this one attached. */
	char *sargs[] = { self, "stay", idarg, NULL };
	c = spawn(sargs);
	CHECK_EQ(wait_status(c), 0);
	CHECK_EQ(nattch(id), 1);

	printf("== /proc/sysvipc\n");
	unsigned long f[20];
	/* perms size cpid lpid nattch uid gid cuid cgid atime dtime ctime rss swap */
	CHECK_EQ(proc_line("shm", key, f, 20), 14);
	CHECK(f[0] == 0600 && f[1] == 10000 && f[2] == (unsigned long)getpid() && f[4] == 1);
	CHECK(f[5] == geteuid() && f[6] == getegid() && f[7] == geteuid() && f[13] == 0);
	int mq = msgget(key ^ 1, IPC_CREAT | 0604), sq = semget(key ^ 2, 4, IPC_CREAT | 0600);
	CHECK(mq >= 0 && sq >= 0);
	struct {
		long type;
		char text[4];
	} msg = { 1, "abc" };
	CHECK_OK(msgsnd(mq, &msg, 3, 0));
	/* perms cbytes qnum lspid lrpid uid gid cuid cgid stime rtime ctime */
	CHECK_EQ(proc_line("msg", key ^ 1, f, 20), 12);
	CHECK(f[0] == 0604 && f[1] == 3 && f[2] == 1 && f[3] == (unsigned long)getpid() && f[4] == 0);
	CHECK(f[5] == geteuid() && f[8] == getegid() && f[10] == 0);
	/* perms nsems uid gid cuid cgid otime ctime */
	CHECK_EQ(proc_line("sem", key ^ 2, f, 20), 8);
	CHECK(f[0] == 0600 && f[1] == 4 && f[2] == geteuid() && f[6] == 0);
	CHECK_OK(msgctl(mq, IPC_RMID, NULL));
	CHECK_OK(semctl(sq, 0, IPC_RMID));
	CHECK_EQ(proc_line("msg", key ^ 1, f, 20), -1);

	printf("== SHM_RDONLY\n");
	p[0] = 'x';
	CHECK_EQ(shmdt(p), 0);
	char *ro = shmat(id, NULL, SHM_RDONLY);
	CHECK(ro != (void *)-1 && ro[0] == 'x');
	char *roargs[] = { self, "rdonly", idarg, NULL };
	CHECK_EQ(wait_status(spawn(roargs)), 128 + SIGSEGV);
	CHECK_EQ(shmdt(ro), 0);

	printf("== a producer and a consumer over a ring\n");
	int sem = semget(IPC_PRIVATE, 2, 0600);
	CHECK(sem >= 0);
	CHECK_EQ(semctl(sem, 0, SETVAL, 8), 0);
	int ring_id = shmget(IPC_PRIVATE, 8 * sizeof(int), 0600);
	CHECK(ring_id >= 0);
	int *ring = shmat(ring_id, NULL, 0);
	CHECK(ring != (void *)-1);
	char ringarg[16], semarg[16];
	snprintf(ringarg, sizeof(ringarg), "%d", ring_id);
	snprintf(semarg, sizeof(semarg), "%d", sem);
	char *pargs[] = { self, "producer", ringarg, semarg, NULL };
	c = spawn(pargs);
	int in_order = 0;
	for (int i = 1; i <= 1000; i++) {
		if (sem_op(sem, 1, -1))
			break;
		in_order += ring[i % 8] == i;
		sem_op(sem, 0, 1);
	}
	CHECK_EQ(in_order, 1000);
	CHECK_EQ(wait_status(c), 0);
	CHECK_EQ(shmdt(ring), 0);
	CHECK_EQ(shmctl(ring_id, IPC_RMID, NULL), 0);
	CHECK_EQ(semctl(sem, 0, IPC_RMID), 0);

	printf("== shmctl\n");
	CHECK_ERR(syscall(SYS_shmctl, id, IPC_STAT, (void *)8), EFAULT);
	CHECK_ERR(shmctl(id, 1234, &ds), EINVAL);
	CHECK_ERR(shmctl(-1, IPC_STAT, &ds), EINVAL);
	CHECK_EQ(shmctl(id, IPC_STAT, &ds), 0);
	ds.shm_perm.mode = 0640;
	CHECK_EQ(shmctl(id, IPC_SET, &ds), 0);
	CHECK_EQ(shmctl(id, IPC_STAT, &ds), 0);
	CHECK_EQ(ds.shm_perm.mode, 0640);
	CHECK_ERR(syscall(SYS_shmctl, id, IPC_SET, (void *)8), EFAULT);
	CHECK_EQ(shmctl(id, SHM_LOCK, NULL), 0);
	CHECK_EQ(shmctl(id, IPC_STAT, &ds), 0);
	CHECK_EQ(ds.shm_perm.mode, 0640 | SHM_LOCKED);
	CHECK_EQ(shmctl(id, SHM_UNLOCK, NULL), 0);
	struct shminfo info;
	int maxidx = shmctl(0, IPC_INFO, (struct shmid_ds *)&info);
	CHECK(maxidx >= 0);
	CHECK_EQ(info.shmmin, 1);
	CHECK_EQ(info.shmmni, 4096);
	CHECK_EQ(info.shmseg, 4096);
	CHECK_EQ(info.shmmax, ~0UL - (1UL << 24));
	CHECK_EQ(info.shmall, ~0UL - (1UL << 24));
	struct shm_info sinfo;
	CHECK(shmctl(0, SHM_INFO, (struct shmid_ds *)&sinfo) >= 0);
	CHECK(sinfo.used_ids >= 1 && sinfo.shm_tot >= 3);
	int found = 0;
	for (int i = 0; i <= maxidx; i++) {
		if (shmctl(i, SHM_STAT, &ds) == id)
			found++;
		if (shmctl(i, SHM_STAT_ANY, &ds) == id)
			found++;
	}
	CHECK_EQ(found, 2);

	printf("== permissions\n");
	if (geteuid() == 0) {
		char *nargs[] = { self, "nobody", idarg, NULL };
		CHECK_EQ(wait_status(spawn(nargs)), 0);
	}

	printf("== IPC_RMID while attached\n");
	p = shmat(id, NULL, 0);
	CHECK(p != (void *)-1);
	strcpy(p, "from the parent");
	CHECK_EQ(shmctl(id, IPC_RMID, NULL), 0);
	CHECK_EQ(shmctl(id, IPC_STAT, &ds), 0);
	CHECK_EQ(ds.shm_perm.mode, 0640 | SHM_DEST);
	CHECK_EQ(ds.shm_perm.__key, IPC_PRIVATE);
	CHECK_ERR(shmget(key, 0, 0), ENOENT);
	CHECK(!strcmp(p + 100, "from the child"));
	/* Still attachable by its id, from another process. */
	c = spawn(rargs);
	CHECK_EQ(wait_status(c), 0);
	CHECK_EQ(nattch(id), 1);
	CHECK_EQ(shmdt(p), 0);
	CHECK_ERR(shmctl(id, IPC_STAT, &ds), EINVAL); /* gone at the last detach */
	CHECK_ERR(shmat(id, NULL, 0), EINVAL);

	printf("== segments give their memory back\n");
	/* 2 GiB in all, 32 MiB at a time: more than nomu's default memory. */
	int made = 0;
	for (int i = 0; i < 64; i++) {
		int s = shmget(IPC_PRIVATE, 32 << 20, 0600);
		if (s < 0)
			break;
		char *m = shmat(s, NULL, 0);
		if (m != (void *)-1) {
			m[0] = m[(32 << 20) - 1] = 1;
			if (i % 2)
				shmctl(s, IPC_RMID, NULL); /* destroyed at the shmdt */
			shmdt(m);
		}
		if (i % 2 == 0)
			shmctl(s, IPC_RMID, NULL);
		made++;
	}
	CHECK_EQ(made, 64);
	return checks_done();
}
