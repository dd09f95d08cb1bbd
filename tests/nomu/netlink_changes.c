/* A guest may read the host's network configuration through rtnetlink
 * (RTM_GETLINK: getifaddrs, if_nameindex, `ip addr`), never change it:
 * RTM_NEWROUTE for 10.99.99.0/24 on lo, sent with sendto, sendmsg and
 * write, must be EPERM under nomu even when nomu runs as root (the test
 * also checks the host's routing table). Run only under nomu: natively,
 * as root, the route would be added. */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* From linux/netlink.h and linux/rtnetlink.h (musl's headers carry
 * neither). */
struct nlmsghdr {
	uint32_t nlmsg_len;
	uint16_t nlmsg_type, nlmsg_flags;
	uint32_t nlmsg_seq, nlmsg_pid;
};
struct sockaddr_nl {
	unsigned short nl_family, nl_pad;
	uint32_t nl_pid, nl_groups;
};
struct ifinfomsg {
	unsigned char ifi_family, pad;
	unsigned short ifi_type;
	int ifi_index;
	unsigned ifi_flags, ifi_change;
};
struct rtmsg {
	unsigned char rtm_family, rtm_dst_len, rtm_src_len, rtm_tos, rtm_table, rtm_protocol, rtm_scope, rtm_type;
	unsigned rtm_flags;
};
struct rtattr {
	unsigned short rta_len, rta_type;
};
#define NETLINK_ROUTE 0
#define NLMSG_ERROR 2
#define NLMSG_DONE 3
#define RTM_NEWLINK 16
#define RTM_GETLINK 18
#define RTM_NEWROUTE 24
#define NLM_F_REQUEST 1
#define NLM_F_ACK 4
#define NLM_F_DUMP 0x300
#define NLM_F_EXCL 0x200
#define NLM_F_CREATE 0x400
#define RT_TABLE_MAIN 254
#define RTPROT_BOOT 3
#define RT_SCOPE_LINK 253
#define RTN_UNICAST 1
#define RTA_DST 1
#define RTA_OIF 4
#define RTA_LENGTH(len) (4 + (len))
#define NLMSG_ALIGN(len) (((len) + 3) & ~3)
#define NLMSG_OK(h, n) ((n) >= (ssize_t)sizeof(struct nlmsghdr) && (h)->nlmsg_len >= sizeof(struct nlmsghdr) && (h)->nlmsg_len <= (size_t)(n))
#define NLMSG_NEXT(h, n) ((n) -= NLMSG_ALIGN((h)->nlmsg_len), (struct nlmsghdr *)((char *)(h) + NLMSG_ALIGN((h)->nlmsg_len)))

static int failures;

static void expect(int ok, const char *what)
{
	printf("%s: %s\n", what, ok ? "ok" : "FAILED");
	failures += !ok;
}

struct route_request {
	struct nlmsghdr h;
	struct rtmsg r;
	struct rtattr dst_attr;
	unsigned char dst[4];
	struct rtattr oif_attr;
	int oif;
};

int main(void)
{
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	expect(s >= 0, "a NETLINK_ROUTE socket");

	/* Reading works: a dump of the links answers. */
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} get = { { sizeof(get), RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, 1, 0 }, { .ifi_family = AF_UNSPEC } };
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	expect(sendto(s, &get, sizeof(get), 0, (struct sockaddr *)&kernel, sizeof(kernel)) == sizeof(get),
	       "RTM_GETLINK is sent");
	char buf[1 << 16];
	ssize_t n = recv(s, buf, sizeof(buf), 0);
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	expect(n > 0 && NLMSG_OK(h, n) && (h->nlmsg_type == RTM_NEWLINK || h->nlmsg_type == NLMSG_DONE),
	       "the links come back");
	/* Drain the rest of the dump. */
	while (n > 0 && !(NLMSG_OK(h, n) && h->nlmsg_type == NLMSG_DONE)) {
		int done = 0;
		for (; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n))
			done |= h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR;
		if (done)
			break;
		n = recv(s, buf, sizeof(buf), 0);
		h = (struct nlmsghdr *)buf;
	}

	/* Changing is refused, whichever call carries the request. */
	struct route_request add = {
		.h = { sizeof(add), RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK, 2, 0 },
		.r = { .rtm_family = AF_INET, .rtm_dst_len = 24, .rtm_table = RT_TABLE_MAIN,
		       .rtm_protocol = RTPROT_BOOT, .rtm_scope = RT_SCOPE_LINK, .rtm_type = RTN_UNICAST },
		.dst_attr = { RTA_LENGTH(4), RTA_DST },
		.dst = { 10, 99, 99, 0 },
		.oif_attr = { RTA_LENGTH(sizeof(int)), RTA_OIF },
		.oif = (int)if_nametoindex("lo"),
	};
	errno = 0;
	expect(sendto(s, &add, sizeof(add), 0, (struct sockaddr *)&kernel, sizeof(kernel)) == -1 && errno == EPERM,
	       "RTM_NEWROUTE by sendto: EPERM");
	struct iovec iov[2] = { { &add, 8 }, { (char *)&add + 8, sizeof(add) - 8 } };
	struct msghdr m = { .msg_name = &kernel, .msg_namelen = sizeof(kernel), .msg_iov = iov, .msg_iovlen = 2 };
	errno = 0;
	expect(sendmsg(s, &m, 0) == -1 && errno == EPERM, "RTM_NEWROUTE by sendmsg, split in two: EPERM");
	errno = 0;
	expect(write(s, &add, sizeof(add)) == -1 && errno == EPERM, "RTM_NEWROUTE by write: EPERM");
	/* A read-only request after a changing one in the same send: all refused. */
	struct {
		struct nlmsghdr g;
		struct ifinfomsg i;
		struct route_request a;
	} both = { get.h, get.i, add };
	both.g.nlmsg_flags = NLM_F_REQUEST;
	errno = 0;
	expect(sendto(s, &both, sizeof(both), 0, (struct sockaddr *)&kernel, sizeof(kernel)) == -1 && errno == EPERM,
	       "a GET then a NEWROUTE in one send: EPERM");
	close(s);
	return failures ? 1 : 0;
}
