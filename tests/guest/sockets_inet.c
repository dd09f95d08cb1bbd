/* AF_INET and AF_INET6 sockets, passed through to the host: TCP on the
 * loopback (blocking and non-blocking connect, accept4, shutdown), UDP,
 * the common socket options, and the interfaces getifaddrs and
 * if_nameindex find through NETLINK_ROUTE. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>

static int listener(struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	CHECK_OK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_OK(bind(l, (struct sockaddr *)a, sizeof(*a)));
	socklen_t len = sizeof(*a);
	CHECK_OK(getsockname(l, (struct sockaddr *)a, &len));
	CHECK_EQ(len, sizeof(*a));
	CHECK(a->sin_port != 0);
	CHECK_OK(listen(l, 8));
	return l;
}

static void tcp(void)
{
	struct sockaddr_in a;
	int l = listener(&a);
	/* A non-blocking connect: EINPROGRESS (or at once, on the loopback),
	 * then writable with SO_ERROR 0. */
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int r = connect(c, (struct sockaddr *)&a, sizeof(a));
	CHECK(r == 0 || errno == EINPROGRESS);
	struct pollfd p = { c, POLLOUT, 0 };
	CHECK_EQ(poll(&p, 1, 5000), 1);
	int err = -1;
	socklen_t elen = sizeof(err);
	CHECK_OK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &elen));
	CHECK_EQ(err, 0);
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	int s = accept4(l, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK);
	CHECK(s >= 0);
	CHECK_EQ(plen, sizeof(peer));
	CHECK_EQ(peer.sin_family, AF_INET);
	CHECK_EQ(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	CHECK_EQ(fcntl(s, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	char buf[64];
	CHECK_ERR(read(s, buf, sizeof(buf)), EAGAIN);
	int one = 1, v;
	socklen_t vl = sizeof(v);
	CHECK_OK(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
	CHECK_OK(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &vl));
	CHECK_EQ(v, 1);
	CHECK_OK(setsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)));
	CHECK_OK(getsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &v, &vl));
	CHECK_EQ(v, 1);
	CHECK_OK(getsockopt(c, SOL_SOCKET, SO_PROTOCOL, &v, &vl));
	CHECK_EQ(v, IPPROTO_TCP);
	struct linger lg = { 1, 0 };
	CHECK_OK(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	int size = 65536;
	CHECK_OK(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)));
	CHECK_ERR(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &size, 2), EINVAL);
	CHECK_EQ(send(c, "ping", 4, 0), 4);
	p.fd = s;
	p.events = POLLIN;
	CHECK_EQ(poll(&p, 1, 5000), 1);
	CHECK_EQ(recv(s, buf, sizeof(buf), MSG_PEEK), 4);
	CHECK_EQ(recv(s, buf, sizeof(buf), 0), 4);
	CHECK(memcmp(buf, "ping", 4) == 0);
	/* Half close: the peer reads the end, and can still write. */
	CHECK_OK(shutdown(c, SHUT_WR));
	CHECK_EQ(poll(&p, 1, 5000), 1);
	CHECK_EQ(read(s, buf, sizeof(buf)), 0);
	CHECK_EQ(write(s, "pong", 4), 4);
	p.fd = c;
	CHECK_EQ(poll(&p, 1, 5000), 1);
	CHECK_EQ(read(c, buf, sizeof(buf)), 4);
	CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	close(c);
	close(s);
	/* A blocking connect and a blocking accept. */
	c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_OK(connect(c, (struct sockaddr *)&a, sizeof(a)));
	s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	CHECK_EQ(write(c, "abcdef", 6), 6);
	CHECK_EQ(recv(s, buf, 6, MSG_WAITALL), 6);
	close(c);
	close(s);
	close(l);
	/* Nobody listens there now. */
	c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_ERR(connect(c, (struct sockaddr *)&a, sizeof(a)), ECONNREFUSED);
	close(c);
}

static void udp(void)
{
	int u = socket(AF_INET6, SOCK_DGRAM, 0);
	int off = 0, v;
	socklen_t vl = sizeof(v);
	CHECK_OK(setsockopt(u, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)));
	CHECK_OK(getsockopt(u, IPPROTO_IPV6, IPV6_V6ONLY, &v, &vl));
	CHECK_EQ(v, 0);
	struct sockaddr_in6 a6;
	memset(&a6, 0, sizeof(a6));
	a6.sin6_family = AF_INET6;
	a6.sin6_addr = in6addr_loopback;
	CHECK_OK(bind(u, (struct sockaddr *)&a6, sizeof(a6)));
	socklen_t len = sizeof(a6);
	CHECK_OK(getsockname(u, (struct sockaddr *)&a6, &len));
	CHECK_EQ(len, sizeof(a6));
	int c = socket(AF_INET6, SOCK_DGRAM, 0);
	CHECK_EQ(sendto(c, "datagram", 8, 0, (struct sockaddr *)&a6, sizeof(a6)), 8);
	char buf[16];
	struct sockaddr_in6 from;
	socklen_t flen = sizeof(from);
	CHECK_EQ(recvfrom(u, buf, 4, MSG_TRUNC, (struct sockaddr *)&from, &flen), 8);
	CHECK_EQ(flen, sizeof(from));
	CHECK_EQ(from.sin6_family, AF_INET6);
	CHECK(memcmp(&from.sin6_addr, &in6addr_loopback, 16) == 0);
	/* A short address buffer: cut, with the real length. */
	CHECK_EQ(sendto(c, "d", 1, 0, (struct sockaddr *)&a6, sizeof(a6)), 1);
	flen = 4;
	CHECK_EQ(recvfrom(u, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen), 1);
	CHECK_EQ(flen, sizeof(from));
	CHECK_ERR(recvfrom(u, buf, sizeof(buf), MSG_DONTWAIT, NULL, NULL), EAGAIN);
	CHECK_OK(getsockopt(u, SOL_SOCKET, SO_TYPE, &v, &vl));
	CHECK_EQ(v, SOCK_DGRAM);
	close(c);
	close(u);
}

static void interfaces(void)
{
	struct ifaddrs *ifa;
	CHECK_OK(getifaddrs(&ifa));
	int lo4 = 0;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
		if (strcmp(i->ifa_name, "lo") == 0 && i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
			lo4 = 1;
	CHECK(lo4);
	freeifaddrs(ifa);
	struct if_nameindex *names = if_nameindex();
	CHECK(names != NULL);
	int lo = 0;
	for (struct if_nameindex *n = names; n && n->if_name; n++)
		if (strcmp(n->if_name, "lo") == 0)
			lo = n->if_index;
	CHECK(lo > 0);
	CHECK_EQ(if_nametoindex("lo"), lo);
	if_freenameindex(names);
	printf("lo listed\n");
}

static void families(void)
{
	/* Raw sockets are the host's to refuse (without CAP_NET_RAW). */
	CHECK_ERR(socket(AF_INET, SOCK_RAW, IPPROTO_RAW), EPERM);
	CHECK_ERR(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	tcp();
	udp();
	interfaces();
	if (geteuid() != 0)
		families();
	CHECK_ERR(socket(AF_INET, 99, 0), EINVAL);
	CHECK_ERR(socket(-1, SOCK_STREAM, 0), EAFNOSUPPORT);
	return checks_done();
}
