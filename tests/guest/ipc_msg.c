/* System V message queues: msgget/msgsnd/msgrcv/msgctl, their errnos, the
 * receive modes, a blocking producer and consumer in two processes, and
 * waits ended by a signal or by the queue's removal. Keys come from the
 * pid, and every queue made is removed (the host's IPC namespace is the
 * native run's). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <spawn.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>

#ifndef MSG_COPY
#define MSG_COPY 040000
#endif
#ifndef MSG_STAT_ANY
#define MSG_STAT_ANY 13
#endif

extern char **environ;
static char *self;

struct m {
	long mtype;
	char text[8200];
};

static long snd(int q, long type, const char *text, int flags)
{
	struct m msg;
	msg.mtype = type;
	size_t n = strlen(text);
	memcpy(msg.text, text, n);
	return syscall(SYS_msgsnd, q, &msg, n, flags);
}

/* Receives into a buffer of `size` bytes; the text NUL-terminated into `out`. */
static long rcv(int q, long type, size_t size, int flags, long *got_type, char *out)
{
	struct m msg;
	memset(&msg, 0, sizeof(msg));
	long r = syscall(SYS_msgrcv, q, &msg, size, type, flags);
	if (r >= 0) {
		memcpy(out, msg.text, r);
		out[r] = 0;
		if (got_type)
			*got_type = msg.mtype;
	}
	return r;
}

static pid_t spawn(char *const args[])
{
	pid_t pid;
	if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0)
		return -1;
	return pid;
}

static int exit_code(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
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
static int consumer(int q, int n)
{
	for (int i = 1; i <= n; i++) {
		char text[64], want[64];
		long type;
		if (rcv(q, 0, sizeof(text) - 1, 0, &type, text) < 0)
			return 10;
		snprintf(want, sizeof(want), "message %d", i);
		if (type != i || strcmp(text, want))
			return 11;
	}
	/* And the answer, by type. */
	return snd(q, 1000000, "done", 0) == 0 ? 0 : 12;
}

static int wait_removed(int q, int ready)
{
	char text[16];
	/* Tells the parent it is about to wait: under load, the parent's
	 * removal could otherwise come before this child even got here. */
	if (write(ready, "r", 1) != 1)
		return 21;
	long r = rcv(q, 0, sizeof(text) - 1, 0, NULL, text);
	return r == -1 && errno == EIDRM ? 0 : 20;
}

static int as_nobody(int q, key_t key)
{
	if (setgid(65534) || setuid(65534))
		return 30;
	if (msgget(key, 0) != q) /* asks for no access: allowed */
		return 31;
	if (!(msgget(key, 0400) == -1 && errno == EACCES))
		return 32;
	if (!(snd(q, 1, "x", IPC_NOWAIT) == -1 && errno == EACCES))
		return 33;
	struct msqid_ds ds;
	if (!(msgctl(q, IPC_STAT, &ds) == -1 && errno == EACCES))
		return 34;
	if (!(msgctl(q, IPC_RMID, NULL) == -1 && errno == EPERM))
		return 35;
	return 0;
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc == 4 && !strcmp(argv[1], "consumer"))
		return consumer(atoi(argv[2]), atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "stopped")) {
		/* Stopped and continued in msgrcv, with no handler: restarted. */
		char t[16];
		long type;
		return rcv(atoi(argv[2]), 0, sizeof(t) - 1, 0, &type, t) == 2 && type == 5 ? 0 : 21;
	}
	if (argc == 4 && !strcmp(argv[1], "removed"))
		return wait_removed(atoi(argv[2]), atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "nobody"))
		return as_nobody(atoi(argv[2]), atoi(argv[3]));

	key_t key = 0x6e6d0000 | (getpid() & 0xffff);

	printf("== msgget\n");
	int q;
	CHECK_OK(q = msgget(IPC_PRIVATE, 0600));
	CHECK_ERR(msgget(key, 0600), ENOENT);
	int k;
	CHECK_OK(k = msgget(key, IPC_CREAT | IPC_EXCL | 0640));
	CHECK_ERR(msgget(key, IPC_CREAT | IPC_EXCL | 0640), EEXIST);
	CHECK_EQ(msgget(key, 0), k);
	CHECK_EQ(msgget(key, IPC_CREAT | 0600), k);
	CHECK(k != q);
	{
		int other = msgget(IPC_PRIVATE, 0600);
		CHECK(other >= 0 && other != q); /* a new one each time */
		CHECK_OK(msgctl(other, IPC_RMID, NULL));
		int again = msgget(IPC_PRIVATE, 0600);
		CHECK(again != other); /* the sequence number changes */
		CHECK_OK(msgctl(again, IPC_RMID, NULL));
	}

	printf("== msgsnd errors\n");
	CHECK_ERR(snd(q, 0, "x", 0), EINVAL);
	CHECK_ERR(snd(q, -5, "x", 0), EINVAL);
	CHECK_ERR(snd(-1, 1, "x", 0), EINVAL);
	CHECK_ERR(snd(q + 1000 * 32768, 1, "x", IPC_NOWAIT), EINVAL); /* another sequence number */
	struct m big = { .mtype = 1 };
	CHECK_ERR(syscall(SYS_msgsnd, q, &big, 8193, 0), EINVAL);
	CHECK_ERR(syscall(SYS_msgsnd, q, (void *)8, 1, 0), EFAULT);
	CHECK_ERR(syscall(SYS_msgsnd, q, (void *)8, 9000, 0), EFAULT); /* mtype read first */
	CHECK_EQ(syscall(SYS_msgsnd, q, &big, 8192, IPC_NOWAIT), 0);
	char text[8200];
	CHECK_EQ(rcv(q, 0, 8192, 0, NULL, text), 8192);

	printf("== receive modes\n");
	CHECK_OK(snd(q, 3, "c3", 0));
	CHECK_OK(snd(q, 1, "a1", 0));
	CHECK_OK(snd(q, 2, "b2", 0));
	CHECK_OK(snd(q, 1, "a1b", 0));
	CHECK_OK(snd(q, 5, "e5", 0));
	CHECK_OK(snd(q, 4, "", 0)); /* an empty message */
	long type;
	CHECK_EQ(rcv(q, 0, 100, 0, &type, text), 2);
	CHECK(type == 3 && !strcmp(text, "c3"));
	CHECK_EQ(rcv(q, -2, 100, 0, &type, text), 2);
	CHECK(type == 1 && !strcmp(text, "a1"));
	CHECK_EQ(rcv(q, 5, 100, 0, &type, text), 2);
	CHECK(type == 5 && !strcmp(text, "e5"));
	CHECK_EQ(rcv(q, 2, 100, MSG_EXCEPT, &type, text), 3);
	CHECK(type == 1 && !strcmp(text, "a1b"));
	CHECK_EQ(rcv(q, 4, 100, 0, &type, text), 0);
	CHECK_EQ(type, 4);
	CHECK_ERR(rcv(q, 9, 100, IPC_NOWAIT, &type, text), ENOMSG);
	CHECK_ERR(rcv(q, -1, 100, IPC_NOWAIT, &type, text), ENOMSG);
	CHECK_ERR(rcv(q, 2, 100, IPC_NOWAIT | MSG_EXCEPT, &type, text), ENOMSG);
	/* Left: b2. MSG_COPY copies the n-th message and leaves it. */
	CHECK_EQ(rcv(q, 0, 100, MSG_COPY | IPC_NOWAIT, &type, text), 2);
	CHECK(type == 2 && !strcmp(text, "b2"));
	CHECK_ERR(rcv(q, 1, 100, MSG_COPY | IPC_NOWAIT, &type, text), ENOMSG);
	CHECK_ERR(rcv(q, 0, 100, MSG_COPY, &type, text), EINVAL);
	CHECK_ERR(rcv(q, 0, 100, MSG_COPY | IPC_NOWAIT | MSG_EXCEPT, &type, text), EINVAL);
	CHECK_ERR(rcv(q, 0, 1, MSG_COPY | IPC_NOWAIT | MSG_NOERROR, &type, text), EINVAL);
	/* Too small a buffer: E2BIG, the message stays; MSG_NOERROR cuts it. */
	CHECK_ERR(rcv(q, 0, 1, IPC_NOWAIT, &type, text), E2BIG);
	CHECK_EQ(rcv(q, 0, 1, MSG_NOERROR, &type, text), 1);
	CHECK(type == 2 && !strcmp(text, "b"));
	CHECK_ERR(rcv(q, 0, 100, IPC_NOWAIT, &type, text), ENOMSG);
	CHECK_ERR(rcv(-1, 0, 100, IPC_NOWAIT, &type, text), EINVAL);
	CHECK_ERR(rcv(q, 0, (size_t)-1, IPC_NOWAIT, &type, text), EINVAL);
	CHECK_OK(snd(q, 7, "lost", 0));
	CHECK_ERR(syscall(SYS_msgrcv, q, (void *)8, 100, 0, 0), EFAULT);
	CHECK_ERR(rcv(q, 0, 100, IPC_NOWAIT, &type, text), ENOMSG); /* taken, then lost */

	printf("== msgctl\n");
	struct msqid_ds ds;
	CHECK_OK(snd(q, 1, "abc", 0));
	CHECK_OK(snd(q, 2, "de", 0));
	CHECK_EQ(msgctl(q, IPC_STAT, &ds), 0);
	CHECK_EQ(ds.msg_qnum, 2);
	CHECK_EQ(ds.msg_cbytes, 5);
	CHECK_EQ(ds.msg_qbytes, 16384);
	CHECK_EQ(ds.msg_perm.mode, 0600);
	CHECK_EQ(ds.msg_perm.uid, geteuid());
	CHECK_EQ(ds.msg_perm.cgid, getegid());
	CHECK_EQ(ds.msg_perm.__key, 0);
	CHECK_EQ(ds.msg_lspid, getpid());
	CHECK(ds.msg_stime > 0 && ds.msg_ctime > 0);
	CHECK_ERR(syscall(SYS_msgctl, q, IPC_STAT, (void *)8), EFAULT);
	CHECK_ERR(msgctl(q, 1234, &ds), EINVAL);
	CHECK_ERR(msgctl(-1, IPC_STAT, &ds), EINVAL);
	CHECK_ERR(syscall(SYS_msgctl, q, IPC_STAT | 0x100, &ds), EINVAL);
	struct msqid_ds kds;
	CHECK_EQ(msgctl(k, IPC_STAT, &kds), 0);
	CHECK_EQ(kds.msg_perm.__key, key);
	CHECK_EQ(kds.msg_perm.mode, 0640);
	/* IPC_SET: a smaller queue makes a sender wait (or EAGAIN). */
	ds.msg_qbytes = 8;
	ds.msg_perm.mode = 0660;
	CHECK_EQ(msgctl(q, IPC_SET, &ds), 0);
	CHECK_EQ(msgctl(q, IPC_STAT, &ds), 0);
	CHECK_EQ(ds.msg_qbytes, 8);
	CHECK_EQ(ds.msg_perm.mode, 0660);
	CHECK_OK(snd(q, 1, "fgh", IPC_NOWAIT));
	CHECK_ERR(snd(q, 1, "i", IPC_NOWAIT), EAGAIN);
	CHECK_ERR(syscall(SYS_msgctl, q, IPC_SET, (void *)8), EFAULT);
	ds.msg_perm.uid = (uid_t)-1;
	CHECK_ERR(msgctl(q, IPC_SET, &ds), EINVAL);
	CHECK_EQ(rcv(q, 0, 100, 0, &type, text), 3);
	CHECK_EQ(rcv(q, 0, 100, 0, &type, text), 2);
	CHECK_EQ(rcv(q, 0, 100, 0, &type, text), 3);
	CHECK_EQ(msgctl(q, IPC_STAT, &ds), 0);
	CHECK(ds.msg_qnum == 0 && ds.msg_cbytes == 0 && ds.msg_lrpid == getpid() && ds.msg_rtime > 0);
	/* A queue of one byte still holds one message of zero bytes. */
	ds.msg_qbytes = 1;
	ds.msg_perm.uid = geteuid();
	CHECK_EQ(msgctl(q, IPC_SET, &ds), 0);
	CHECK_OK(snd(q, 1, "", IPC_NOWAIT));
	CHECK_ERR(snd(q, 1, "", IPC_NOWAIT), EAGAIN);
	CHECK_EQ(rcv(q, 0, 100, 0, &type, text), 0);
	ds.msg_qbytes = 16384;
	CHECK_EQ(msgctl(q, IPC_SET, &ds), 0);

	struct msginfo info;
	CHECK(msgctl(0, IPC_INFO, (struct msqid_ds *)&info) >= 0);
	CHECK_EQ(info.msgmax, 8192);
	CHECK_EQ(info.msgmnb, 16384);
	CHECK_EQ(info.msgmni, 32000);
	CHECK_EQ(info.msgssz, 16);
	CHECK_EQ(info.msgseg, 0xffff);
	int maxidx = msgctl(0, MSG_INFO, (struct msqid_ds *)&info);
	CHECK(maxidx >= 0);
	CHECK(info.msgpool >= 2); /* q and k at least */
	/* MSG_STAT takes an index: some index up to maxidx names q. */
	int found = 0;
	for (int i = 0; i <= maxidx; i++) {
		struct msqid_ds s;
		if (msgctl(i, MSG_STAT, &s) == q)
			found++;
		if (msgctl(i, MSG_STAT_ANY, &s) == q)
			found++;
	}
	CHECK_EQ(found, 2);

	printf("== a producer and a consumer\n");
	/* A small queue: the producer waits for the consumer. */
	ds.msg_qbytes = 40;
	CHECK_EQ(msgctl(q, IPC_SET, &ds), 0);
	char qarg[16];
	snprintf(qarg, sizeof(qarg), "%d", q);
	char *cargs[] = { self, "consumer", qarg, "200", NULL };
	pid_t c = spawn(cargs);
	CHECK(c > 0);
	for (int i = 1; i <= 200; i++) {
		char t[64];
		snprintf(t, sizeof(t), "message %d", i);
		CHECK_OK(snd(q, i, t, 0));
	}
	CHECK_EQ(rcv(q, 1000000, 100, 0, &type, text), 4);
	CHECK(!strcmp(text, "done"));
	CHECK_EQ(exit_code(c), 0);
	CHECK_EQ(msgctl(q, IPC_STAT, &ds), 0);
	CHECK_EQ(ds.msg_lrpid, getpid());
	CHECK_EQ(ds.msg_lspid, c);

	printf("== a signal ends a blocked msgrcv and msgsnd\n");
	nomu_handle(SIGALRM, on_alarm, SA_RESTART);
	arm_ms(50);
	CHECK_ERR(rcv(q, 0, 100, 0, &type, text), EINTR); /* even with SA_RESTART */
	CHECK_EQ(alarms, 1);
	ds.msg_qbytes = 2;
	CHECK_EQ(msgctl(q, IPC_SET, &ds), 0);
	CHECK_OK(snd(q, 1, "xy", 0));
	arm_ms(50);
	CHECK_ERR(snd(q, 1, "z", 0), EINTR);
	CHECK_EQ(alarms, 2);
	CHECK_EQ(rcv(q, 0, 100, 0, &type, text), 2);

	printf("== a stop and continue restart a blocked msgrcv\n");
	char *stargs[] = { self, "stopped", qarg, NULL };
	c = spawn(stargs);
	CHECK(c > 0);
	nomu_sleep_ms(100);
	CHECK_OK(kill(c, SIGSTOP));
	int st;
	CHECK_EQ(waitpid(c, &st, WUNTRACED), c);
	CHECK(WIFSTOPPED(st));
	CHECK_OK(kill(c, SIGCONT));
	nomu_sleep_ms(50);
	CHECK_OK(snd(q, 5, "ok", 0));
	CHECK_EQ(exit_code(c), 0);

	printf("== removal ends a wait: EIDRM\n");
	int ready[2];
	CHECK_OK(pipe(ready));
	char rarg[16];
	snprintf(rarg, sizeof rarg, "%d", ready[1]);
	char *rargs[] = { self, "removed", qarg, rarg, NULL };
	c = spawn(rargs);
	CHECK(c > 0);
	close(ready[1]);
	char r;
	CHECK_EQ(read(ready[0], &r, 1), 1);
	close(ready[0]);
	nomu_sleep_ms(100);
	CHECK_EQ(msgctl(q, IPC_RMID, NULL), 0);
	CHECK_EQ(exit_code(c), 0);
	CHECK_ERR(snd(q, 1, "x", 0), EINVAL);
	CHECK_ERR(msgctl(q, IPC_STAT, &ds), EINVAL);
	CHECK_ERR(msgctl(q, IPC_RMID, NULL), EINVAL);

	printf("== permissions\n");
	if (geteuid() == 0) {
		char karg[16];
		snprintf(qarg, sizeof(qarg), "%d", k);
		snprintf(karg, sizeof(karg), "%d", key);
		char *nargs[] = { self, "nobody", qarg, karg, NULL };
		c = spawn(nargs);
		CHECK_EQ(exit_code(c), 0);
	}
	CHECK_EQ(msgctl(k, IPC_RMID, NULL), 0);
	CHECK_ERR(msgget(key, 0), ENOENT);
	return checks_done();
}
