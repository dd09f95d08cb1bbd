/* memfd_secret's pages are absent from the direct map (nomu-only: Linux
 * gives a process no direct-map address to try; tests/cli.rs runs it).
 *
 * With NOMU_TEST_SECRET_PHYS=1 in nomu's environment, a test-only ioctl
 * of a memfd_secret descriptor gives the direct-map address of its first
 * page (what /proc/self/pagemap would give root on Linux). Then:
 *   - /proc/meminfo counts SecretMem and Unmapped, /proc/pagetypeinfo an
 *     UNMAPPED pageblock;
 *   - the page is reachable at the mapping's address, and reading it at
 *     its direct-map address faults; once a mapping is gone, its old
 *     address does not show the page either;
 *   - after its owner (a child) exits, that address never shows its data,
 *     neither while the page waits in the pool nor once enough secret
 *     memory came and went for its pageblock to be mapped again;
 *   - last, a plain read of a live secret page's direct-map address: the
 *     program dies of SIGSEGV.
 * "inject" (run with NOMU_MERMAP_FAIL=1): a failed mermap map makes the
 * allocation that needed it (zeroing reused secret pages) fail with
 * ENOMEM, and so a syscall whose buffer is in secret memory (nomu
 * reaches it only through the mermap: a read() into it, a write() from
 * it, a path there), and nomu stays up. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SECRET_PHYS 0x4e4d5301UL
#define PATTERN "nomu-secret-pattern-0123456789"

extern char **environ;
static sigjmp_buf jb;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

static int secret_file(size_t len)
{
	int fd = syscall(447, 0);
	if (fd < 0 || ftruncate(fd, len) < 0)
		return -1;
	return fd;
}

/* "fault", "data" (the pattern is there) or "clean". */
static const char *probe(unsigned long addr)
{
	static char buf[64];
	struct sigaction sa = { .sa_handler = on_segv, .sa_flags = SA_NODEFER };
	sigaction(SIGSEGV, &sa, NULL);
	if (sigsetjmp(jb, 1)) {
		signal(SIGSEGV, SIG_DFL);
		return "fault";
	}
	memcpy(buf, (void *)addr, sizeof buf);
	signal(SIGSEGV, SIG_DFL);
	return memmem(buf, sizeof buf, PATTERN, strlen(PATTERN)) ? "data" : "clean";
}

static long meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, key, strlen(key)) == 0)
			v = atol(line + strlen(key));
	if (f)
		fclose(f);
	return v;
}

static long unmapped_blocks(void)
{
	FILE *f = fopen("/proc/pagetypeinfo", "r");
	char line[512];
	long g, s, gu = -1, su = -1;
	while (f && fgets(line, sizeof line, f))
		sscanf(line, "Node 0, zone Normal %ld %ld %ld %ld", &g, &s, &gu, &su);
	if (f)
		fclose(f);
	return gu < 0 ? -1 : gu + su;
}

static int owner(void)
{
	int fd = secret_file(4096);
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	unsigned long phys = 0;
	if (p == MAP_FAILED || ioctl(fd, SECRET_PHYS, &phys) < 0)
		return 1;
	strcpy(p, PATTERN);
	printf("%lx\n", phys);
	return 0;
}

static const char *result(long r)
{
	return r >= 0 ? "ok" : errno == ENOMEM ? "ENOMEM" : strerror(errno);
}

/* Syscalls with a buffer in secret memory `p`, every mermap map failing. */
static void buffers(char *p)
{
	int pfd[2];
	if (pipe(pfd) < 0 || write(pfd[1], "x", 1) != 1)
		return;
	printf("inject: read into secret memory: %s", result(read(pfd[0], p, 1)));
	printf("; write from it: %s", result(write(pfd[1], p, 1)));
	strcpy(p, "/dev/null");
	printf("; a path there: %s\n", result(open(p, O_RDONLY)));
	close(pfd[0]);
	close(pfd[1]);
}

static int inject(void)
{
	int enomem = 0, other = 0;
	for (int i = 0; i < 4; i++) {
		int fd = syscall(447, 0);
		if (ftruncate(fd, 64 << 10) < 0) {
			enomem += errno == ENOMEM;
			other += errno != ENOMEM;
		} else {
			char *p = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (p == MAP_FAILED)
				other++;
			else {
				memset(p, 0x77, 64 << 10);
				if (i == 0)
					buffers(p);
				munmap(p, 64 << 10);
			}
		}
		close(fd);
	}
	printf("inject: an allocation failed with ENOMEM: %s; other errors: %d\n", enomem ? "yes" : "no", other);
	printf("inject: SecretMem after: %ld kB\n", meminfo("SecretMem:"));
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1 && strcmp(argv[1], "owner") == 0)
		return owner();
	if (argc > 1 && strcmp(argv[1], "inject") == 0)
		return inject();

	printf("SecretMem before: %ld kB\n", meminfo("SecretMem:"));
	int fd = secret_file(4 * 4096);
	char *p = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	unsigned long phys = 0;
	if (fd < 0 || p == MAP_FAILED || ioctl(fd, SECRET_PHYS, &phys) < 0) {
		perror("secret");
		return 1;
	}
	strcpy(p + 4096, PATTERN);
	printf("SecretMem: %ld kB, Unmapped at least a pageblock: %s, UNMAPPED pageblocks: %s\n",
	       meminfo("SecretMem:"), meminfo("Unmapped:") >= 2048 ? "yes" : "no",
	       unmapped_blocks() > 0 ? "yes" : "no");
	printf("mapping address is not the direct-map address: %s\n", (unsigned long)p != phys ? "yes" : "no");
	printf("at the mapping: %s\n", probe((unsigned long)p + 4096));
	printf("at the direct map: %s\n", probe(phys + 4096));
	/* Unmapped (the file lives on), the old address shows nothing of it. */
	char *q = mmap(NULL, 4 * 4096, PROT_READ, MAP_SHARED, fd, 0);
	munmap(q, 4 * 4096);
	printf("a second mapping, unmapped, at its old address: %s\n",
	       strcmp(probe((unsigned long)q + 4096), "data") ? "no data" : "DATA");

	/* A child owns a secret page and exits. */
	int out[2];
	pipe(out);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	pid_t pid;
	char *args[] = { argv[0], "owner", NULL };
	if (posix_spawn(&pid, "/proc/self/exe", &fa, NULL, args, environ) != 0) {
		perror("spawn");
		return 1;
	}
	close(out[1]);
	char text[64] = { 0 };
	read(out[0], text, sizeof text - 1);
	int status;
	waitpid(pid, &status, 0);
	unsigned long child = strtoul(text, NULL, 16);
	printf("owner exited: %d; its page at the direct map: %s\n", WEXITSTATUS(status),
	       strcmp(probe(child), "data") ? "no data" : "DATA");
	/* Enough secret memory comes and goes for the pool to be given back. */
	for (int i = 0; i < 3; i++) {
		int big = secret_file(64 << 20);
		char *b = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, big, 0);
		if (b != MAP_FAILED)
			memset(b, 0x11, 64 << 20), munmap(b, 64 << 20);
		close(big);
	}
	printf("after the pool shrank: %s\n", strcmp(probe(child), "data") ? "no data" : "DATA");
	printf("SecretMem: %ld kB\n", meminfo("SecretMem:"));
	/* Last: a plain read at the direct-map address kills. */
	printf("reading the direct map\n");
	volatile char c = *(volatile char *)(phys + 4096);
	printf("read %d: not killed\n", c);
	return 0;
}
