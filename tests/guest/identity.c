/* User and group ids, supplementary groups and capabilities: the set*id
 * family with Linux's rules, getres*id, setfs*id, getgroups/setgroups,
 * capget/capset, PR_SET_KEEPCAPS, PR_CAPBSET_READ/DROP, PR_CAP_AMBIENT,
 * PR_GET_SECUREBITS, what execve and
 * posix_spawn(POSIX_SPAWN_RESETIDS) do to them, and that a raw setuid
 * changes its calling thread only (libc's changes every thread).
 *
 * What it may change depends on who it starts as: as root (CI) every
 * part runs, each in a child of its own, started by posix_spawn of this
 * program; as anyone else, the unprivileged checks. Prints section names
 * and each child's check count only. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

#define CAP_V1 0x19980330
#define CAP_V3 0x20080522
#define CAP_CHOWN 0
#define CAP_DAC_OVERRIDE 1
#define CAP_SETGID 6
#define CAP_SETUID 7
#define CAP_MKNOD 27
#define FS_CAPS ((1ull << 0) | (1ull << 1) | (1ull << 2) | (1ull << 3) | (1ull << 4) | (1ull << 9) | (1ull << 27) | (1ull << 32))

struct cap_header {
	uint32_t version;
	int pid;
};
struct cap_data {
	uint32_t effective, permitted, inheritable;
};
struct caps {
	uint64_t effective, permitted, inheritable;
};

static const char *self;
/* The real uid waitid reported for the last child run_self ran. */
static uid_t last_child_uid;

static int get_caps(int pid, struct caps *c)
{
	struct cap_header h = { CAP_V3, pid };
	struct cap_data d[2];
	if (syscall(SYS_capget, &h, d))
		return -1;
	c->effective = d[0].effective | (uint64_t)d[1].effective << 32;
	c->permitted = d[0].permitted | (uint64_t)d[1].permitted << 32;
	c->inheritable = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
	return 0;
}

static long set_caps(const struct caps *c)
{
	struct cap_header h = { CAP_V3, 0 };
	struct cap_data d[2] = {
		{ (uint32_t)c->effective, (uint32_t)c->permitted, (uint32_t)c->inheritable },
		{ c->effective >> 32, c->permitted >> 32, c->inheritable >> 32 },
	};
	return syscall(SYS_capset, &h, d);
}

static int has_cap(int cap)
{
	struct caps c;
	return get_caps(0, &c) == 0 && (c.effective >> cap & 1);
}

static int resuid(uid_t r, uid_t e, uid_t s)
{
	uid_t a, b, c;
	return getresuid(&a, &b, &c) == 0 && a == r && b == e && c == s;
}

static int resgid(gid_t r, gid_t e, gid_t s)
{
	gid_t a, b, c;
	return getresgid(&a, &b, &c) == 0 && a == r && b == e && c == s;
}

/* Runs this program with `arg` (and `arg2`), waits, returns its exit
 * status (or 128 + signal). */
static int run_self(const char *arg, const char *arg2, int flags)
{
	char *argv[] = { (char *)self, (char *)arg, (char *)arg2, NULL };
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, flags);
	pid_t pid;
	fflush(stdout);
	int e = posix_spawn(&pid, self, NULL, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	if (e) {
		errno = e;
		return -1;
	}
	siginfo_t info;
	if (waitid(P_PID, pid, &info, WEXITED))
		return -1;
	last_child_uid = info.si_uid;
	return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

/* Child mode "ids R E S": exits 0 when its uids are R E S (and fs uid E),
 * the auxiliary vector agrees (AT_SECURE when the effective ids are not
 * the real ones), and it has no capabilities unless euid 0. */
static int check_ids(char **argv)
{
	uid_t r = atoi(argv[2]), e = atoi(argv[3]), s = atoi(argv[4]);
	struct caps c;
	int ok = resuid(r, e, s) && setfsuid(-1) == (int)e && getauxval(AT_UID) == r && getauxval(AT_EUID) == e &&
		 getauxval(AT_SECURE) == (e != r || getegid() != getgid()) && get_caps(0, &c) == 0;
	if (e != 0 && r != 0)
		ok = ok && c.effective == 0 && c.permitted == 0;
	if (e == 0)
		ok = ok && c.effective == c.permitted && c.permitted != 0;
	return ok ? 0 : 1;
}

/* Where `field` starts in /proc/self/status (-1: it is not there). */
static long status_at(const char *field)
{
	static char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	char *at = strstr(buf, field);
	return at ? at - buf : -1;
}

static void unprivileged_checks(void)
{
	printf("== everyone\n");
	uid_t uid = getuid(), euid = geteuid();
	gid_t gid = getgid(), egid = getegid();
	CHECK(resuid(uid, euid, euid) || euid != uid);
	CHECK_EQ(setfsuid(-1), euid);
	CHECK_EQ(setfsgid(-1), egid);
	CHECK_EQ(getauxval(AT_UID), uid);
	CHECK_EQ(getauxval(AT_EGID), egid);
	/* No-ops are always allowed. */
	CHECK_OK(setuid(uid));
	CHECK_OK(setgid(gid));
	CHECK_OK(setreuid(-1, -1));
	CHECK_OK(setregid(-1, -1));
	CHECK_OK(setresuid(-1, -1, -1));
	CHECK_OK(setresgid(-1, -1, -1));
	CHECK_ERR(syscall(SYS_setuid, -1), EINVAL);
	CHECK_ERR(syscall(SYS_setgid, -1), EINVAL);
	/* An int is the low half of its register: uid 2^32 + euid is euid. */
	CHECK_OK(syscall(SYS_setuid, 0x100000000ull | euid));

	int n = getgroups(0, NULL);
	CHECK(n >= 0);
	gid_t groups[256];
	CHECK_EQ(getgroups(256, groups), n);
	if (n > 0)
		CHECK_ERR(getgroups(n - 1, groups), EINVAL);
	/* /proc/self/status lists them, each followed by a space (a space
	 * alone for none). */
	char line[4096] = "\nGroups:\t";
	for (int i = 0; i < n && strlen(line) < sizeof(line) - 16; i++)
		snprintf(line + strlen(line), 16, "%u ", (unsigned)groups[i]);
	strcat(line, n ? "\n" : " \n");
	CHECK(status_at(line) > 0);
	CHECK_ERR(syscall(SYS_getgroups, -1, groups), EINVAL);
	if (n > 0)
		CHECK_ERR(syscall(SYS_getgroups, 256, (void *)8), EFAULT);
	CHECK_ERR(syscall(SYS_getresuid, (void *)8, (void *)8, (void *)8), EFAULT);

	/* capget: a version query, a bad pid, another process. */
	struct cap_header h = { 0, 0 };
	struct cap_data d[2];
	CHECK_OK(syscall(SYS_capget, &h, NULL));
	CHECK_EQ(h.version, CAP_V3);
	h.version = 1;
	CHECK_ERR(syscall(SYS_capget, &h, d), EINVAL);
	CHECK_EQ(h.version, CAP_V3);
	h.pid = -1;
	CHECK_ERR(syscall(SYS_capget, &h, d), EINVAL);
	h.pid = 0x7ffffff0;
	CHECK_ERR(syscall(SYS_capget, &h, d), ESRCH);
	h.pid = getpid();
	CHECK_OK(syscall(SYS_capget, &h, d));
	struct cap_header v1 = { CAP_V1, 0 };
	struct cap_data one[2] = { { 0 }, { 0xdead, 0xdead, 0xdead } };
	CHECK_OK(syscall(SYS_capget, &v1, one));
	CHECK_EQ(one[1].effective, 0xdead); /* version 1: one word per set */
	struct caps c;
	CHECK_OK(get_caps(0, &c));
	CHECK_EQ(c.effective & ~c.permitted, 0);
	CHECK_EQ(c.effective >> 41, 0);
	/* Setting what one has is allowed; more is not; others' never. */
	CHECK_OK(set_caps(&c));
	struct caps more = c;
	more.permitted |= ~c.permitted & ((1ull << 41) - 1);
	if (more.permitted != c.permitted)
		CHECK_ERR(set_caps(&more), EPERM);
	more = c;
	more.effective = c.permitted | 1;
	if (!(c.permitted & 1))
		CHECK_ERR(set_caps(&more), EPERM);
	struct cap_header other = { CAP_V3, getpid() + 1000 };
	CHECK_ERR(syscall(SYS_capset, &other, d), EPERM);
	CHECK(prctl(PR_CAPBSET_READ, CAP_CHOWN, 0, 0, 0) >= 0);
	CHECK_ERR(prctl(PR_CAPBSET_READ, 64, 0, 0, 0), EINVAL);
	CHECK_EQ(prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0), 0);
	CHECK_ERR(prctl(PR_SET_KEEPCAPS, 2, 0, 0, 0), EINVAL);

	if (!has_cap(CAP_SETUID)) {
		CHECK_ERR(setuid(uid + 1), EPERM);
		CHECK_ERR(setresuid(-1, uid + 1, -1), EPERM);
	}
	if (!has_cap(CAP_SETGID))
		CHECK_ERR(setgroups(0, NULL), EPERM);

	/* A spawned program keeps the ids; RESETIDS keeps them too here. */
	char e[16];
	snprintf(e, sizeof(e), "%u", euid);
	if (uid == euid) {
		CHECK_EQ(run_self("ids-same", e, 0), 0);
		CHECK_EQ(run_self("ids-same", e, POSIX_SPAWN_RESETIDS), 0);
	}
}

static void drop_all(void)
{
	printf("== root drops everything\n");
	gid_t g[] = { 5, 3, 4 }, back[8];
	CHECK_OK(setgroups(3, g));
	CHECK_EQ(getgroups(8, back), 3);
	CHECK(back[0] == 3 && back[1] == 4 && back[2] == 5);
	CHECK_ERR(syscall(SYS_setgroups, 65537, g), EINVAL);
	CHECK_ERR(syscall(SYS_setgroups, 2, (void *)8), EFAULT);
	CHECK_OK(setresgid(100, 101, 102));
	CHECK(resgid(100, 101, 102));
	CHECK_EQ(setfsgid(-1), 101);
	CHECK_OK(setresuid(1000, 1001, 1002));
	CHECK(resuid(1000, 1001, 1002));
	struct caps c;
	CHECK_OK(get_caps(0, &c));
	CHECK(c.effective == 0 && c.permitted == 0);
	CHECK_EQ(setfsuid(1002), 1001);
	CHECK_EQ(setfsuid(-1), 1002);
	CHECK_EQ(setfsuid(5), 1002); /* not one of its ids: unchanged */
	CHECK_EQ(setfsuid(-1), 1002);
	/* /proc/self/status shows them (real, effective, saved, fs), in
	 * Linux's order of fields. */
	CHECK(status_at("\nUid:\t1000\t1001\t1002\t1002\n") > 0);
	CHECK(status_at("\nGid:\t100\t101\t102\t101\n") > 0);
	CHECK(status_at("\nGroups:\t3 4 5 \n") > 0);
	CHECK(status_at("\nCapEff:\t0000000000000000\n") > 0);
	CHECK(status_at("\nPPid:") < status_at("\nUid:") && status_at("\nUid:") < status_at("\nGid:"));
	CHECK(status_at("\nGid:") < status_at("\nGroups:") && status_at("\nGroups:") < status_at("\nVmSize:"));
	CHECK(status_at("\nVmSize:") < status_at("\nVmRSS:") && status_at("\nVmRSS:") < status_at("\nThreads:"));
	CHECK(status_at("\nThreads:") < status_at("\nCapInh:") && status_at("\nCapInh:") < status_at("\nCapAmb:"));
	CHECK_ERR(setuid(0), EPERM);
	CHECK_ERR(setresuid(0, -1, -1), EPERM);
	CHECK_ERR(setreuid(-1, 7), EPERM);
	CHECK_ERR(setgid(0), EPERM);
	CHECK_ERR(setregid(7, -1), EPERM);
	CHECK_ERR(setgroups(0, NULL), EPERM);
	CHECK_ERR(prctl(PR_CAPBSET_DROP, CAP_CHOWN, 0, 0, 0), EPERM);
	struct caps up = { 1, 1, 0 };
	CHECK_ERR(set_caps(&up), EPERM);
	/* Swapping real and effective: the saved id becomes the new effective. */
	CHECK_OK(setreuid(1001, 1000));
	CHECK(resuid(1001, 1000, 1000));
	CHECK_OK(setuid(1001)); /* its real id */
	CHECK(resuid(1001, 1001, 1000));
	CHECK_ERR(setregid(102, -1), EPERM); /* only the real or effective gid */
	CHECK_OK(setregid(101, -1));
	CHECK(resgid(101, 101, 101));

	/* Signals to root's processes: only SIGCONT, in the same session. */
	pid_t parent = getppid();
	CHECK_ERR(kill(parent, 0), EPERM);
	CHECK_ERR(kill(parent, SIGUSR1), EPERM);
	CHECK_OK(kill(parent, SIGCONT));
	CHECK_ERR(syscall(SYS_tgkill, parent, parent, 0), EPERM);
	CHECK_ERR(syscall(SYS_tkill, parent, SIGUSR1), EPERM);
	CHECK_ERR(sigqueue(parent, SIGUSR1, (union sigval){ 0 }), EPERM);
	/* The target is found, then the signal judged, then the right to send
	 * it (check_kill_permission): EINVAL, not EPERM. */
	CHECK_ERR(kill(parent, 999), EINVAL);
	CHECK_ERR(syscall(SYS_tkill, parent, 999), EINVAL);
	CHECK_ERR(syscall(SYS_tgkill, parent, parent, 999), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, parent, 999, &(siginfo_t){ .si_code = SI_QUEUE }), EINVAL);
	CHECK_OK(kill(getpid(), 0));
	/* Its real uid is what counts for the target: 1000's may be signalled. */
	CHECK_OK(setresuid(-1, 1000, -1));
	CHECK_OK(kill(getpid(), 0));
}

/* Before running a program as someone else: the search permission it
 * needs on every directory of the path (this host's / may be mode 000),
 * from the permitted set PR_SET_KEEPCAPS kept. */
static void may_search(void)
{
	struct caps c;
	CHECK_OK(get_caps(0, &c));
	c.effective = c.permitted & (1ull << 2); /* CAP_DAC_READ_SEARCH */
	CHECK_OK(set_caps(&c));
}

static void exec_ids(void)
{
	printf("== execve makes the saved ids the effective ones\n");
	CHECK_OK(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0));
	CHECK_OK(setresgid(101, 101, 101));
	CHECK_OK(setresuid(1001, 1001, 1000));
	may_search();
	CHECK_EQ(run_self("ids", "1001 1001 1001", 0), 0);
	CHECK_EQ(last_child_uid, 1001);
	/* The saved id is still 1000 here. */
	CHECK(resuid(1001, 1001, 1000));
	CHECK_OK(setuid(1000));
}

static void saved_root(void)
{
	printf("== a saved root comes back\n");
	struct caps before, c;
	CHECK_OK(get_caps(0, &before));
	CHECK_OK(seteuid(1000));
	CHECK(resuid(0, 1000, 0));
	CHECK_OK(get_caps(0, &c));
	CHECK(c.effective == 0 && c.permitted == before.permitted);
	CHECK_EQ(geteuid(), 1000);
	/* A spawned child resetting its ids is root again. */
	CHECK_EQ(run_self("ids", "0 0 0", POSIX_SPAWN_RESETIDS), 0);
	/* Without RESETIDS it runs as 1000 with a real uid 0: permitted
	 * capabilities, none effective. */
	may_search();
	CHECK_EQ(run_self("ids", "0 1000 1000", 0), 0);
	CHECK_EQ(last_child_uid, 0);
	CHECK_OK(seteuid(0));
	CHECK_OK(get_caps(0, &c));
	CHECK_EQ(c.effective, before.permitted);

	/* The fs uid takes the file-system capabilities with it. */
	CHECK_EQ(setfsuid(1000), 0);
	CHECK_OK(get_caps(0, &c));
	CHECK_EQ(c.effective, before.permitted & ~FS_CAPS);
	CHECK_EQ(setfsuid(0), 1000);
	CHECK_OK(get_caps(0, &c));
	CHECK_EQ(c.effective, before.permitted);

	/* PR_SET_KEEPCAPS keeps the permitted set across leaving uid 0, not
	 * across execve. */
	CHECK_OK(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0));
	CHECK_EQ(prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0), 1);
	CHECK_OK(setresuid(1000, 1000, 1000));
	CHECK_OK(get_caps(0, &c));
	CHECK(c.effective == 0 && c.permitted == before.permitted);
	may_search();
	CHECK_EQ(run_self("ids", "1000 1000 1000", 0), 0);
	/* Raising its effective set from the permitted one is allowed. */
	c.effective = 1ull << CAP_SETUID;
	CHECK_OK(set_caps(&c));
	CHECK_OK(setuid(5)); /* with CAP_SETUID: all of them */
	CHECK(resuid(5, 5, 5));
}

#define CAP_SYS_NICE 23
#define SECBIT_KEEP_CAPS 0x10

static void ambient(void)
{
	printf("== the ambient set\n");
	struct caps c;
	CHECK_OK(get_caps(0, &c));
	CHECK_EQ(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_NICE, 0, 0), 0);
	CHECK_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_NICE, 0, 0), EPERM); /* not inheritable */
	c.inheritable = 1ull << CAP_SYS_NICE | 1ull << 2;
	CHECK_OK(set_caps(&c));
	CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_NICE, 0, 0));
	CHECK_EQ(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_NICE, 0, 0), 1);
	CHECK_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 64, 0, 0), EINVAL);
	CHECK_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 1, 0, 0), EINVAL);
	CHECK_ERR(prctl(PR_CAP_AMBIENT, 9, CAP_SYS_NICE, 0, 0), EINVAL);
	CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, CAP_SYS_NICE, 0, 0));
	CHECK_EQ(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_NICE, 0, 0), 0);
	CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_NICE, 0, 0));
	CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0));
	CHECK_EQ(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_NICE, 0, 0), 0);
	/* Leaving uid 0 clears it, keep-caps or not; raised again, it is what
	 * the next program starts with. */
	CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_NICE, 0, 0));
	CHECK_OK(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0));
	CHECK_EQ(prctl(PR_GET_SECUREBITS, 0, 0, 0, 0), SECBIT_KEEP_CAPS);
	CHECK_OK(setresuid(1000, 1000, 1000));
	CHECK_EQ(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_NICE, 0, 0), 0);
	CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_NICE, 0, 0));
	CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 2, 0, 0));
	may_search();
	CHECK_EQ(run_self("ambient-child", NULL, 0), 0);
	/* Dropped from the inheritable set, it leaves the ambient one. */
	CHECK_OK(get_caps(0, &c));
	c.inheritable = 1ull << 2;
	CHECK_OK(set_caps(&c));
	CHECK_EQ(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_NICE, 0, 0), 0);
}

static int ambient_child(void)
{
	struct caps c;
	uint64_t want = 1ull << CAP_SYS_NICE | 1ull << 2;
	return get_caps(0, &c) == 0 && c.effective == want && c.permitted == want &&
			       prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_NICE, 0, 0) == 1 &&
			       prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) == 0 && geteuid() == 1000
		       ? 0
		       : 1;
}

static void bounding_set(void)
{
	printf("== the bounding set\n");
	CHECK_EQ(prctl(PR_CAPBSET_READ, CAP_MKNOD, 0, 0, 0), 1);
	CHECK_OK(prctl(PR_CAPBSET_DROP, CAP_MKNOD, 0, 0, 0));
	CHECK_EQ(prctl(PR_CAPBSET_READ, CAP_MKNOD, 0, 0, 0), 0);
	CHECK_ERR(prctl(PR_CAPBSET_DROP, 64, 0, 0, 0), EINVAL);
	/* The permitted set keeps it until execve. */
	CHECK(has_cap(CAP_MKNOD));
	CHECK_EQ(run_self("no-mknod", NULL, 0), 0);
}

static volatile int stage;
static uid_t seen_euid;

static void *other_thread(void *arg)
{
	(void)arg;
	while (stage != 1)
		sched_yield();
	seen_euid = syscall(SYS_geteuid);
	stage = 2;
	while (stage != 3)
		sched_yield();
	seen_euid = syscall(SYS_geteuid);
	stage = 4;
	return NULL;
}

static void per_thread(void)
{
	printf("== each thread has its own\n");
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
	/* The raw call changes this thread only... */
	CHECK_OK(syscall(SYS_setresuid, -1, 1000, -1));
	CHECK_EQ(syscall(SYS_geteuid), 1000);
	stage = 1;
	while (stage != 2)
		sched_yield();
	CHECK_EQ(seen_euid, 0);
	CHECK_OK(syscall(SYS_setresuid, -1, 0, -1));
	/* ...libc's changes every thread. */
	CHECK_OK(seteuid(1000));
	stage = 3;
	while (stage != 4)
		sched_yield();
	CHECK_EQ(seen_euid, 1000);
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc > 1) {
		if (!strcmp(argv[1], "ids")) {
			char *a[5] = { argv[0], argv[1] };
			char buf[64];
			snprintf(buf, sizeof(buf), "%s", argv[2]);
			a[2] = strtok(buf, " ");
			a[3] = strtok(NULL, " ");
			a[4] = strtok(NULL, " ");
			return check_ids(a);
		}
		if (!strcmp(argv[1], "ids-same")) {
			char *a[5] = { argv[0], argv[1], argv[2], argv[2], argv[2] };
			return check_ids(a);
		}
		if (!strcmp(argv[1], "no-mknod"))
			return !has_cap(CAP_MKNOD) && has_cap(CAP_CHOWN) && prctl(PR_CAPBSET_READ, CAP_MKNOD, 0, 0, 0) == 0
				       ? 0
				       : 1;
		if (!strcmp(argv[1], "ambient-child"))
			return ambient_child();
		if (!strcmp(argv[1], "drop"))
			drop_all();
		else if (!strcmp(argv[1], "exec-ids"))
			exec_ids();
		else if (!strcmp(argv[1], "saved-root"))
			saved_root();
		else if (!strcmp(argv[1], "ambient"))
			ambient();
		else if (!strcmp(argv[1], "bset"))
			bounding_set();
		else if (!strcmp(argv[1], "threads"))
			per_thread();
		return checks_done();
	}
	unprivileged_checks();
	if (getuid() == 0 && geteuid() == 0 && has_cap(CAP_SETUID) && has_cap(CAP_SETGID) && has_cap(8)) {
		CHECK_EQ(run_self("drop", NULL, 0), 0);
		CHECK_EQ(run_self("exec-ids", NULL, 0), 0);
		CHECK_EQ(run_self("saved-root", NULL, 0), 0);
		CHECK_EQ(run_self("ambient", NULL, 0), 0);
		CHECK_EQ(run_self("bset", NULL, 0), 0);
		CHECK_EQ(run_self("threads", NULL, 0), 0);
	} else {
		printf("(not root: the privileged parts are skipped)\n");
	}
	return checks_done();
}
