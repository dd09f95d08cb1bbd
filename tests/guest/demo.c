/* The demo shown by `make run`: an ordinary Linux program that does a bit of
 * everything, each step a syscall that nomu catches and emulates. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int steps = 0;

	printf("hello from the nomu demo guest!\n");
	printf("I was started with %d argument%s:", argc, argc == 1 ? "" : "s");
	for (int i = 0; i < argc; i++)
		printf(" [%s]", argv[i]);
	printf("\n");
	steps++;

	struct utsname u;
	if (uname(&u) == 0)
		printf("uname says: %s on %s\n", u.sysname, u.machine);
	steps++;

	/* write a file, read it back */
	char dir[] = "/tmp/nomu-XXXXXX", path[64], back[64] = {0};
	const char *msg = "written by the guest, read back by the guest";
	int file_ok = 0;
	if (mkdtemp(dir)) {
		snprintf(path, sizeof path, "%s/note.txt", dir);
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			file_ok = write(fd, msg, strlen(msg)) == (ssize_t)strlen(msg) &&
				  pread(fd, back, sizeof back - 1, 0) == (ssize_t)strlen(msg) &&
				  strcmp(back, msg) == 0;
			close(fd);
			unlink(path);
		}
		rmdir(dir);
	}
	printf("file in /tmp: %s (\"%s\")\n", file_ok ? "ok" : "FAILED", back);
	steps++;

	/* map some memory and use it */
	size_t len = 1 << 20;
	unsigned char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned long sum = 0;
	int mem_ok = mem != MAP_FAILED;
	if (mem_ok) {
		for (size_t i = 0; i < len; i++)
			mem[i] = (unsigned char)i;
		for (size_t i = 0; i < len; i++)
			sum += mem[i];
		munmap(mem, len);
	}
	mem_ok = mem_ok && sum == 4096UL * (255 * 256 / 2); /* 4096 runs of 0..255 */
	printf("mapped 1 MiB, filled it, checksum %lu: %s\n", sum,
	       mem_ok ? "ok" : "FAILED");
	steps++;

	/* a little floating point */
	double x = 1.0;
	for (int i = 0; i < 20; i++)
		x = x - (x * x - 2.0) / (2.0 * x); /* Newton's method for sqrt(2) */
	printf("sqrt(2) by Newton's method: %.15f (libm: %.15f)\n", x, sqrt(2.0));
	steps++;

	int ok = file_ok && mem_ok && fabs(x - sqrt(2.0)) < 1e-15;
	printf("summary: %d steps (args, uname, file, memory, floating point): %s\n",
	       steps, ok ? "all good" : "something went wrong");
	return ok ? 0 : 1;
}
