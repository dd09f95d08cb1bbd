/* Opens each path given and prints its first line, or the errno name:
 * used to check path resolution inside --root and the --trace output. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case ENOENT: return "ENOENT";
	case EACCES: return "EACCES";
	case ELOOP: return "ELOOP";
	case ENOTDIR: return "ENOTDIR";
	case EXDEV: return "EXDEV";
	default: return strerror(e);
	}
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY);
		if (fd < 0) {
			printf("%s: %s\n", argv[i], errname(errno));
			continue;
		}
		char buf[128];
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		buf[n < 0 ? 0 : n] = 0;
		buf[strcspn(buf, "\n")] = 0;
		printf("%s: %s\n", argv[i], buf);
		close(fd);
	}
	char cwd[256];
	if (getcwd(cwd, sizeof(cwd)))
		printf("cwd: %s\n", cwd);
	return 0;
}
