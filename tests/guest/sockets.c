/* AF_UNIX sockets: socketpair of each type, MSG_* flags, SIGPIPE/EPIPE,
 * poll and epoll, bind/listen/connect/accept by path and by abstract name
 * between this process and a spawned copy of it, SCM_RIGHTS of a pipe and
 * of an eventfd (the very description arrives), MSG_CTRUNC, SO_PEERCRED,
 * sendmmsg/recvmmsg, blocking calls a signal interrupts, and abstract
 * names of the longest length (107 bytes: nomu gave EINVAL past ~95). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

extern char **environ;

static socklen_t un_addr(struct sockaddr_un *a, const char *path, int abstract)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (abstract) {
		strcpy(a->sun_path + 1, path);
		return offsetof(struct sockaddr_un, sun_path) + 1 + strlen(path);
	}
	strcpy(a->sun_path, path);
	return offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1;
}

/* The spawned copy: connects to PATH (or abstract NAME), says hello, and
 * echoes one message back. */
static int client(const char *how, const char *name)
{
	struct sockaddr_un a;
	socklen_t len = un_addr(&a, name, how[0] == 'a');
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, len) != 0)
		return 10;
	struct sockaddr_un peer;
	socklen_t plen = sizeof(peer);
	if (getpeername(s, (struct sockaddr *)&peer, &plen) != 0 || plen != len || memcmp(&peer, &a, len) != 0)
		return 11;
	/* Its peer is the listener: the parent. */
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0 || cr.pid != getppid() || cr.uid != geteuid())
		return 14;
	/* Credentials go with what it sends: its own SO_PASSCRED (set after
	 * connect, which it would otherwise autobind) makes Linux attach them
	 * whenever the parent gets to set its own (after accept, maybe after
	 * this write: without this, a race the parent lost natively too). */
	int one = 1;
	if (setsockopt(s, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0)
		return 15;
	if (write(s, "hello", 5) != 5)
		return 12;
	char buf[16];
	ssize_t n = read(s, buf, sizeof(buf));
	if (n <= 0 || write(s, buf, n) != n)
		return 13;
	close(s);
	return 0;
}

static void pairs(void)
{
	int sv[2];
	char buf[64];
	int types[] = { SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET };
	for (int i = 0; i < 3; i++) {
		CHECK_OK(socketpair(AF_UNIX, types[i] | SOCK_CLOEXEC, 0, sv));
		int v;
		socklen_t l = sizeof(v);
		CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &v, &l));
		CHECK_EQ(v, types[i]);
		CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_DOMAIN, &v, &l));
		CHECK_EQ(v, AF_UNIX);
		CHECK_EQ(fcntl(sv[0], F_GETFD), FD_CLOEXEC);
		CHECK_EQ(send(sv[0], "abc", 3, 0), 3);
		CHECK_EQ(send(sv[0], "defg", 4, 0), 4);
		CHECK_EQ(ioctl(sv[1], FIONREAD, &v), 0);
		CHECK_EQ(v, types[i] == SOCK_DGRAM ? 3 : 7);
		CHECK_EQ(recv(sv[1], buf, sizeof(buf), MSG_PEEK), types[i] == SOCK_STREAM ? 7 : 3);
		if (types[i] == SOCK_STREAM) {
			CHECK_EQ(recv(sv[1], buf, 5, MSG_WAITALL), 5);
			CHECK_EQ(recv(sv[1], buf, 5, 0), 2);
		} else {
			/* A datagram cut short: MSG_TRUNC gives its real length. */
			CHECK_EQ(recv(sv[1], buf, 2, MSG_TRUNC), 3);
			CHECK_EQ(recv(sv[1], buf, sizeof(buf), 0), 4);
			CHECK(memcmp(buf, "defg", 4) == 0);
		}
		CHECK_ERR(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
		struct pollfd p = { sv[1], POLLIN, 0 };
		CHECK_EQ(poll(&p, 1, 0), 0);
		CHECK_EQ(write(sv[0], "x", 1), 1);
		CHECK_EQ(poll(&p, 1, 0), 1);
		CHECK_EQ(p.revents, POLLIN);
		int ep = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 7 }, out;
		CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], &ev));
		CHECK_EQ(epoll_wait(ep, &out, 1, 0), 1);
		CHECK_EQ(out.data.u32, 7);
		CHECK_EQ(read(sv[1], buf, 1), 1);
		CHECK_EQ(epoll_wait(ep, &out, 1, 0), 0);
		close(ep);
		/* SO_PEERCRED of a socketpair: its creator. */
		struct ucred cr;
		l = sizeof(cr);
		CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_PEERCRED, &cr, &l));
		CHECK_EQ(cr.pid, getpid());
		CHECK_EQ(cr.uid, geteuid());
		/* A shut peer: EPIPE, and SIGPIPE unless MSG_NOSIGNAL. */
		close(sv[1]);
		CHECK_ERR(send(sv[0], "y", 1, MSG_NOSIGNAL), types[i] == SOCK_DGRAM ? ECONNREFUSED : EPIPE);
		/* A seqpacket socket's EPIPE raises no SIGPIPE (default: death). */
		if (types[i] == SOCK_SEQPACKET) {
			CHECK_ERR(write(sv[0], "y", 1), EPIPE);
			CHECK_ERR(send(sv[0], "y", 1, 0), EPIPE);
		}
		if (types[i] == SOCK_STREAM) {
			sigset_t set, old;
			sigemptyset(&set);
			sigaddset(&set, SIGPIPE);
			sigprocmask(SIG_BLOCK, &set, &old);
			CHECK_ERR(write(sv[0], "y", 1), EPIPE);
			CHECK_ERR(send(sv[0], "y", 1, 0), EPIPE);
			sigset_t pend;
			sigpending(&pend);
			CHECK(sigismember(&pend, SIGPIPE));
			int sig;
			sigwait(&set, &sig);
			sigprocmask(SIG_SETMASK, &old, NULL);
		}
		close(sv[0]);
	}
	CHECK_ERR(socket(AF_UNIX, SOCK_STREAM | 0x100000, 0), EINVAL);
	CHECK_ERR(socket(12345, SOCK_STREAM, 0), EAFNOSUPPORT);
	CHECK_ERR(socketpair(AF_INET, SOCK_STREAM, 0, sv), EOPNOTSUPP);
	int fd = open("/dev/null", O_RDONLY);
	CHECK_ERR(listen(fd, 1), ENOTSOCK);
	CHECK_ERR(shutdown(fd, SHUT_RD), ENOTSOCK);
	close(fd);
}

static int send_fds(int s, int *fds, int n)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 4)];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { "F", 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	return sendmsg(s, &m, 0);
}

static size_t last_controllen, last_namelen;

/* Receives up to 4 descriptors into fds: how many, or -1. */
static int recv_fds(int s, int *fds, size_t room, int *msg_flags)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 4)];
	char b;
	struct iovec iov = { &b, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = room,
			    .msg_namelen = 77 };
	if (recvmsg(s, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	*msg_flags = m.msg_flags;
	last_controllen = m.msg_controllen;
	last_namelen = m.msg_namelen;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (!c)
		return 0;
	if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		return -1;
	int n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	memcpy(fds, CMSG_DATA(c), n * sizeof(int));
	return n;
}

static void rights(void)
{
	int sv[2], p[2], fds[4], flags;
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	CHECK_OK(pipe(p));
	int efd = eventfd(5, 0);
	int send[2] = { p[1], efd };
	CHECK_EQ(send_fds(sv[0], send, 2), 1);
	/* The sender's own copies go: the descriptions live on in flight. */
	close(p[1]);
	close(efd);
	CHECK_EQ(recv_fds(sv[1], fds, sizeof(fds) + 32, &flags), 2);
	CHECK_EQ(flags, MSG_CMSG_CLOEXEC);
	CHECK_EQ(last_controllen, CMSG_SPACE(2 * sizeof(int)));
	CHECK_EQ(last_namelen, 77);
	CHECK_EQ(fcntl(fds[0], F_GETFD), FD_CLOEXEC);
	CHECK_EQ(write(fds[0], "pipe", 4), 4);
	char buf[8];
	CHECK_EQ(read(p[0], buf, sizeof(buf)), 4);
	uint64_t v = 0;
	/* The eventfd's counter came along: it is the same description. */
	CHECK_EQ(read(fds[1], &v, 8), 8);
	CHECK_EQ(v, 5);
	close(fds[0]);
	close(fds[1]);

	/* A description sent while the sender keeps it: shared state. */
	efd = eventfd(0, EFD_NONBLOCK);
	CHECK_EQ(send_fds(sv[0], &efd, 1), 1);
	CHECK_EQ(recv_fds(sv[1], fds, sizeof(fds) + 32, &flags), 1);
	CHECK_EQ(last_controllen, CMSG_SPACE(sizeof(int)));
	v = 3;
	CHECK_EQ(write(fds[0], &v, 8), 8);
	CHECK_EQ(read(efd, &v, 8), 8);
	CHECK_EQ(v, 3);
	CHECK_EQ(fcntl(fds[0], F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	close(fds[0]);

	/* A pipe's end in a message never received: closing the socket
	 * frees it, and its reader sees the end. */
	int sv2[2], p2[2];
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2));
	CHECK_OK(pipe(p2));
	CHECK_EQ(send_fds(sv2[0], &p2[1], 1), 1);
	close(p2[1]);
	close(sv2[0]);
	close(sv2[1]);
	CHECK_EQ(read(p2[0], buf, sizeof(buf)), 0);
	close(p2[0]);

	/* No room for the descriptors: MSG_CTRUNC, none installed. */
	CHECK_EQ(send_fds(sv[0], &efd, 1), 1);
	CHECK_EQ(recv_fds(sv[1], fds, sizeof(struct cmsghdr) - 1, &flags), 0);
	CHECK_EQ(flags & MSG_CTRUNC, MSG_CTRUNC);
	CHECK_ERR(send_fds(sv[0], (int[]){ 999 }, 1), EBADF);
	close(efd);
	close(p[0]);

	/* SCM_CREDENTIALS given by the sender: its own pid and ids, which the
	 * receiver sees as the guest's. */
	int one = 1;
	int cs[2];
	CHECK_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, cs));
	CHECK_OK(setsockopt(cs[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)));
	{
		struct ucred mine = { getpid(), geteuid(), getegid() }, got = { 0 };
		char cb[CMSG_SPACE(sizeof(struct ucred))];
		memset(cb, 0, sizeof(cb));
		struct iovec ci = { "c", 1 };
		struct msghdr m = { .msg_iov = &ci, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof(cb) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_CREDENTIALS;
		c->cmsg_len = CMSG_LEN(sizeof(mine));
		memcpy(CMSG_DATA(c), &mine, sizeof(mine));
		CHECK_EQ(sendmsg(cs[0], &m, 0), 1);
		char b;
		struct iovec ri = { &b, 1 };
		struct msghdr r = { .msg_iov = &ri, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof(cb) };
		CHECK_EQ(recvmsg(cs[1], &r, 0), 1);
		c = CMSG_FIRSTHDR(&r);
		CHECK(c && c->cmsg_type == SCM_CREDENTIALS);
		if (c)
			memcpy(&got, CMSG_DATA(c), sizeof(got));
		CHECK_EQ(got.pid, getpid());
		CHECK_EQ(got.uid, geteuid());
		CHECK_EQ(got.gid, getegid());
		CHECK_EQ(r.msg_controllen, CMSG_SPACE(sizeof(struct ucred)));
	}
	close(cs[0]);
	close(cs[1]);

	/* sendmmsg and recvmmsg over datagrams. */
	close(sv[0]);
	close(sv[1]);
	CHECK_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
	struct mmsghdr mm[3];
	struct iovec iov[3] = { { "one", 3 }, { "three", 5 }, { "xx", 2 } };
	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < 3; i++) {
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	CHECK_EQ(sendmmsg(sv[0], mm, 3, 0), 3);
	CHECK_EQ(mm[1].msg_len, 5);
	char rb[3][8];
	struct iovec riov[3] = { { rb[0], 8 }, { rb[1], 8 }, { rb[2], 8 } };
	for (int i = 0; i < 3; i++)
		mm[i].msg_hdr.msg_iov = &riov[i];
	CHECK_EQ(recvmmsg(sv[1], mm, 3, MSG_WAITFORONE, NULL), 3);
	CHECK_EQ(mm[1].msg_len, 5);
	CHECK(memcmp(rb[1], "three", 5) == 0);
	CHECK_EQ(recvmmsg(sv[1], mm, 3, MSG_DONTWAIT, NULL), -1);
	close(sv[0]);
	close(sv[1]);
}

static pid_t spawn(char *self, const char *how, const char *name)
{
	pid_t pid;
	char *argv[] = { self, (char *)how, (char *)name, NULL };
	if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
		return -1;
	return pid;
}

static void server(char *self, const char *how, const char *name)
{
	struct sockaddr_un a, got;
	socklen_t len = un_addr(&a, name, how[0] == 'a'), glen = sizeof(got);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK_OK(bind(l, (struct sockaddr *)&a, len));
	CHECK_ERR(bind(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&a, len), EADDRINUSE);
	CHECK_OK(getsockname(l, (struct sockaddr *)&got, &glen));
	CHECK_EQ(glen, len);
	CHECK(memcmp(&got, &a, len) == 0);
	CHECK_OK(listen(l, 4));
	int v;
	socklen_t vl = sizeof(v);
	CHECK_OK(getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl));
	CHECK_EQ(v, 1);
	pid_t pid = spawn(self, how, name);
	CHECK(pid > 0);
	struct sockaddr_un peer;
	socklen_t plen = sizeof(peer);
	int c = accept4(l, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
	CHECK(c >= 0);
	CHECK_EQ(plen, offsetof(struct sockaddr_un, sun_path));
	/* Its peer is the connector: the child, also in the credentials that
	 * come with what it sends. */
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	CHECK_OK(getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &crlen));
	CHECK_EQ(cr.pid, pid);
	CHECK_EQ(cr.uid, geteuid());
	int one = 1;
	CHECK_OK(setsockopt(c, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)));
	char buf[16];
	char cbuf[CMSG_SPACE(sizeof(struct ucred))];
	struct iovec iov = { buf, 5 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	CHECK_EQ(recvmsg(c, &m, MSG_WAITALL), 5);
	CHECK(memcmp(buf, "hello", 5) == 0);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	CHECK(cm && cm->cmsg_type == SCM_CREDENTIALS);
	if (cm && cm->cmsg_type == SCM_CREDENTIALS) {
		memcpy(&cr, CMSG_DATA(cm), sizeof(cr));
		CHECK_EQ(cr.pid, pid);
	}
	CHECK_EQ(write(c, "echo!", 5), 5);
	CHECK_EQ(recv(c, buf, 5, MSG_WAITALL), 5);
	CHECK(memcmp(buf, "echo!", 5) == 0);
	CHECK_EQ(read(c, buf, 1), 0);
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK_EQ(st, 0);
	close(c);
	close(l);
}

static volatile int alarms;
static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void *late_writer(void *arg)
{
	int fd = *(int *)arg;
	nomu_sleep_ms(100);
	kill(getpid(), SIGALRM);
	nomu_sleep_ms(100);
	write(fd, "late", 4);
	return NULL;
}

static void interrupts(void)
{
	int sv[2];
	char buf[8];
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	/* Without SA_RESTART: EINTR. */
	nomu_handle(SIGALRM, on_alarm, 0);
	pthread_t t;
	pthread_create(&t, NULL, late_writer, &sv[0]);
	CHECK_ERR(recv(sv[1], buf, sizeof(buf), 0), EINTR);
	pthread_join(t, NULL);
	CHECK_EQ(read(sv[1], buf, sizeof(buf)), 4);
	/* With SA_RESTART: restarted, and the data arrives. */
	nomu_handle(SIGALRM, on_alarm, SA_RESTART);
	pthread_create(&t, NULL, late_writer, &sv[0]);
	CHECK_EQ(recv(sv[1], buf, sizeof(buf), 0), 4);
	pthread_join(t, NULL);
	/* With SA_RESTART but a receive timeout: EINTR (sock_intr_errno). */
	struct timeval tv = { 5, 0 };
	CHECK_OK(setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	pthread_create(&t, NULL, late_writer, &sv[0]);
	CHECK_ERR(recv(sv[1], buf, sizeof(buf), 0), EINTR);
	pthread_join(t, NULL);
	CHECK_EQ(read(sv[1], buf, sizeof(buf)), 4);
	/* A short timeout ends the wait: EAGAIN. */
	tv.tv_sec = 0;
	tv.tv_usec = 50000;
	CHECK_OK(setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	CHECK_ERR(recv(sv[1], buf, sizeof(buf), 0), EAGAIN);
	close(sv[0]);
	close(sv[1]);
	/* A blocking accept a signal interrupts. */
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a;
	char name[64];
	snprintf(name, sizeof(name), "nomu-intr-%d", getpid());
	socklen_t len = un_addr(&a, name, 1);
	CHECK_OK(bind(l, (struct sockaddr *)&a, len));
	CHECK_OK(listen(l, 1));
	nomu_handle(SIGALRM, on_alarm, 0);
	int dummy[2];
	pipe(dummy);
	pthread_create(&t, NULL, late_writer, &dummy[1]);
	CHECK_ERR(accept(l, NULL, NULL), EINTR);
	pthread_join(t, NULL);
	CHECK_EQ(alarms, 4);
	close(l);
	close(dummy[0]);
	close(dummy[1]);
}

/* Abstract names of 107 bytes, the most sun_path holds after its NUL:
 * bound, reached, read back, and told apart by their last byte. */
static void long_abstract(void)
{
	struct sockaddr_un a, b, got;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "nomu-long-%d-", getpid());
	memset(a.sun_path + 1 + n, 'h', sizeof(a.sun_path) - 1 - n);
	b = a;
	b.sun_path[sizeof(b.sun_path) - 1] = 'i';
	socklen_t len = sizeof(a);
	int srv = socket(AF_UNIX, SOCK_STREAM, 0), cli = socket(AF_UNIX, SOCK_STREAM, 0);
	int again = socket(AF_UNIX, SOCK_STREAM, 0), other = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK_OK(bind(srv, (struct sockaddr *)&a, len));
	CHECK_ERR(bind(again, (struct sockaddr *)&a, len), EADDRINUSE);
	CHECK_OK(bind(other, (struct sockaddr *)&b, len));
	socklen_t glen = sizeof(got);
	CHECK_OK(getsockname(srv, (struct sockaddr *)&got, &glen));
	CHECK(glen == len && memcmp(&got, &a, len) == 0);
	glen = sizeof(got);
	CHECK_OK(getsockname(other, (struct sockaddr *)&got, &glen));
	CHECK(glen == len && memcmp(&got, &b, len) == 0);
	CHECK_OK(listen(srv, 1));
	CHECK_OK(connect(cli, (struct sockaddr *)&a, len));
	int conn = accept(srv, NULL, NULL);
	CHECK(conn >= 0);
	glen = sizeof(got);
	CHECK_OK(getpeername(cli, (struct sockaddr *)&got, &glen));
	CHECK(glen == len && memcmp(&got, &a, len) == 0);
	CHECK_EQ(write(cli, "long", 4), 4);
	char buf[4];
	CHECK_EQ(read(conn, buf, 4), 4);
	/* The other name is no listener: refused, not the first one's. */
	int cli2 = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK_ERR(connect(cli2, (struct sockaddr *)&b, len), ECONNREFUSED);
	close(cli2);
	close(conn);
	close(cli);
	close(other);
	close(again);
	close(srv);
}

int main(int argc, char **argv)
{
	if (argc == 3)
		return client(argv[1], argv[2]);
	char *self = realpath(argv[0], NULL);
	pairs();
	rights();
	char dir[] = "/tmp/nomu-sock-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	CHECK_OK(chdir(dir));
	/* A relative path, then an absolute one. */
	server(self, "path", "srv.sock");
	struct stat st;
	CHECK_OK(stat("srv.sock", &st));
	CHECK(S_ISSOCK(st.st_mode));
	char abs[64];
	snprintf(abs, sizeof(abs), "%s/abs.sock", dir);
	server(self, "path", abs);
	unlink("srv.sock");
	unlink(abs);
	/* The socket file's mode is 0777 less the umask (regression: 0777). */
	struct sockaddr_un a;
	socklen_t len = un_addr(&a, "masked.sock", 0);
	mode_t old_mask = umask(027);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK_OK(bind(s, (struct sockaddr *)&a, len));
	CHECK_OK(stat("masked.sock", &st));
	CHECK_EQ(st.st_mode & 07777, 0750);
	umask(old_mask);
	close(s);
	unlink("masked.sock");
	/* Connecting to a path that is no socket, or to nothing. */
	len = un_addr(&a, "nothing", 0);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK_ERR(connect(s, (struct sockaddr *)&a, len), ENOENT);
	close(open("plain", O_CREAT | O_WRONLY, 0600));
	len = un_addr(&a, "plain", 0);
	CHECK_ERR(connect(s, (struct sockaddr *)&a, len), ECONNREFUSED);
	unlink("plain");
	close(s);
	chdir("/");
	rmdir(dir);
	/* Unique: native runs of this test may run at once. */
	char name[64];
	snprintf(name, sizeof(name), "nomu-test-abstract-%d", getpid());
	server(self, "abstract", name);
	/* Autobind: a name of five hex digits, which another socket reaches. */
	int ab = socket(AF_UNIX, SOCK_DGRAM, 0), other = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_un got;
	socklen_t glen = sizeof(got);
	got.sun_family = AF_UNIX;
	CHECK_OK(bind(ab, (struct sockaddr *)&got, offsetof(struct sockaddr_un, sun_path)));
	CHECK_OK(getsockname(ab, (struct sockaddr *)&got, &glen));
	CHECK_EQ(glen, offsetof(struct sockaddr_un, sun_path) + 6);
	CHECK_EQ(got.sun_path[0], 0);
	CHECK_EQ(strspn(got.sun_path + 1, "0123456789abcdef"), 5);
	CHECK_EQ(sendto(other, "auto", 4, 0, (struct sockaddr *)&got, glen), 4);
	char abuf[8];
	CHECK_EQ(recv(ab, abuf, sizeof(abuf), 0), 4);
	/* SO_PASSCRED names an unnamed sender before it sends: the receiver
	 * can answer it. */
	int one = 1;
	CHECK_OK(setsockopt(other, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)));
	CHECK_EQ(sendto(other, "auto", 4, 0, (struct sockaddr *)&got, glen), 4);
	struct sockaddr_un from;
	socklen_t flen = sizeof(from);
	CHECK_EQ(recvfrom(ab, abuf, sizeof(abuf), 0, (struct sockaddr *)&from, &flen), 4);
	CHECK_EQ(flen, offsetof(struct sockaddr_un, sun_path) + 6);
	CHECK_EQ(sendto(ab, "back", 4, 0, (struct sockaddr *)&from, flen), 4);
	CHECK_EQ(recv(other, abuf, sizeof(abuf), 0), 4);
	close(ab);
	close(other);
	long_abstract();
	interrupts();
	return checks_done();
}
