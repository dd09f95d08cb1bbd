/* AF_UNIX paths for tests/cli.rs: `unix_peer bind PATH...` binds a
 * socket to each path, `unix_peer connect PATH...` connects to each, and
 * each prints "PATH: OK" or "PATH: " and the error's name. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *name(int e)
{
	switch (e) {
	case ENOENT: return "ENOENT";
	case ECONNREFUSED: return "ECONNREFUSED";
	case EADDRINUSE: return "EADDRINUSE";
	case EACCES: return "EACCES";
	case ENOTDIR: return "ENOTDIR";
	default: return strerror(e);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int do_bind = strcmp(argv[1], "bind") == 0;
	for (int i = 2; i < argc; i++) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		strncpy(a.sun_path, argv[i], sizeof(a.sun_path) - 1);
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		int r = do_bind ? bind(s, (struct sockaddr *)&a, sizeof(a)) : connect(s, (struct sockaddr *)&a, sizeof(a));
		printf("%s: %s\n", argv[i], r == 0 ? "OK" : name(errno));
		close(s);
	}
	return 0;
}
