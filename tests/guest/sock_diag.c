/* NETLINK_SOCK_DIAG, as ss reads it: a dump of the listening TCP sockets
 * over IPv4 names this program's own listener, with its port and the
 * inode its descriptor has (regression: the protocol was
 * EPROTONOSUPPORT, and `ss` said "Cannot open netlink socket"). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* Linux's netlink and inet_diag structures (musl has no linux/ headers). */
#define NETLINK_SOCK_DIAG 4
#define SOCK_DIAG_BY_FAMILY 20
#define NLM_F_REQUEST 1
#define NLM_F_DUMP 0x300
#define NLMSG_ERROR 2
#define NLMSG_DONE 3
struct nlmsghdr {
	uint32_t nlmsg_len;
	uint16_t nlmsg_type, nlmsg_flags;
	uint32_t nlmsg_seq, nlmsg_pid;
};
struct sockaddr_nl {
	unsigned short nl_family, nl_pad;
	uint32_t nl_pid, nl_groups;
};
struct inet_diag_sockid {
	uint16_t idiag_sport, idiag_dport;
	uint32_t idiag_src[4], idiag_dst[4], idiag_if, idiag_cookie[2];
};
struct inet_diag_req_v2 {
	uint8_t sdiag_family, sdiag_protocol, idiag_ext, pad;
	uint32_t idiag_states;
	struct inet_diag_sockid id;
};
struct inet_diag_msg {
	uint8_t idiag_family, idiag_state, idiag_timer, idiag_retrans;
	struct inet_diag_sockid id;
	uint32_t idiag_expires, idiag_rqueue, idiag_wqueue, idiag_uid, idiag_inode;
};

int main(void)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	CHECK_OK(bind(l, (struct sockaddr *)&a, sizeof(a)));
	CHECK_OK(listen(l, 4));
	CHECK_OK(getsockname(l, (struct sockaddr *)&a, &alen));
	struct stat st;
	CHECK_OK(fstat(l, &st));

	int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	CHECK(nl >= 0);
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} req = {
		.h = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.r = { .sdiag_family = AF_INET, .sdiag_protocol = IPPROTO_TCP, .idiag_states = 1 << 10 /* TCP_LISTEN */ },
	};
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	CHECK_EQ(sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)), (long)sizeof(req));

	int found = 0, listeners = 0, not_listening = 0, done = 0;
	static char buf[1 << 16];
	while (!done) {
		long n = recv(nl, buf, sizeof(buf), 0);
		if (n <= 0) {
			CHECK(!"recv");
			break;
		}
		for (char *at = buf; at + sizeof(struct nlmsghdr) <= buf + n;) {
			struct nlmsghdr *h = (void *)at;
			if (h->nlmsg_len < sizeof(*h) || at + h->nlmsg_len > buf + n)
				break;
			at += (h->nlmsg_len + 3) & ~3u;
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				CHECK(!"NLMSG_ERROR");
				done = 1;
				break;
			}
			struct inet_diag_msg *m = (void *)(h + 1);
			/* Other listeners come and go: counted, not checked one by one. */
			listeners++;
			not_listening += m->idiag_state != 10;
			if (m->id.idiag_sport == a.sin_port && m->id.idiag_src[0] == a.sin_addr.s_addr) {
				found++;
				CHECK_EQ(m->idiag_inode, (unsigned)st.st_ino);
			}
		}
	}
	CHECK_EQ(found, 1);
	CHECK(listeners >= 1);
	CHECK_EQ(not_listening, 0);
	printf("our listener is in the dump\n");
	close(nl);
	close(l);
	return checks_done();
}
