/* A TCP peer on 127.0.0.1 for tests/cli.rs: `tcp_peer server` listens on
 * a free port, prints "port N", answers one client's line with
 * "guest got: LINE"; `tcp_peer client N` sends "hello from the guest" to
 * port N and prints the answer. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t read_line(int fd, char *buf, size_t room)
{
	size_t n = 0;
	while (n + 1 < room) {
		ssize_t r = read(fd, buf + n, 1);
		if (r <= 0)
			break;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = 0;
	return n;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	char line[256], out[300];
	if (argc == 2 && strcmp(argv[1], "server") == 0) {
		int l = socket(AF_INET, SOCK_STREAM, 0);
		socklen_t len = sizeof(a);
		if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
		    getsockname(l, (struct sockaddr *)&a, &len))
			return perror("listen"), 1;
		printf("port %d\n", ntohs(a.sin_port));
		fflush(stdout);
		int c = accept(l, NULL, NULL);
		if (c < 0)
			return perror("accept"), 1;
		read_line(c, line, sizeof(line));
		int n = snprintf(out, sizeof(out), "guest got: %s", line);
		if (write(c, out, n) != n)
			return 1;
		close(c);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "client") == 0) {
		a.sin_port = htons(atoi(argv[2]));
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
			return perror("connect"), 1;
		const char *msg = "hello from the guest\n";
		if (write(s, msg, strlen(msg)) != (ssize_t)strlen(msg))
			return 1;
		read_line(s, line, sizeof(line));
		printf("%s", line);
		return 0;
	}
	fprintf(stderr, "usage: tcp_peer server | client PORT\n");
	return 2;
}
