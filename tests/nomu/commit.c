/* nomu's commit account (src/mm/commit.rs), run with --mem 64M: a PROT_NONE
 * reservation costs nothing, making it accessible charges --mem (ENOMEM
 * past it, from mprotect as from mmap and brk), a charge stays through
 * mprotect back to PROT_NONE and MADV_DONTNEED and goes with the mapping,
 * MAP_NORESERVE exempts nothing accessible, a MAP_FIXED mapping nets the
 * charge of what it replaces; /proc/meminfo and sysinfo show the account,
 * /proc/sys/vm/overcommit_memory its mode (2); a System V shared memory
 * segment is charged while it lives, not by its attachments; the page
 * cache's pages in use count against --mem, and MemFree is what neither
 * takes.
 * Linux's default (heuristic) overcommit does none of this, so there is no
 * native run: tests/cli.rs runs it under nomu only.
 *
 * Nothing here allocates between two readings of the account (meminfo is
 * read with raw calls into a static buffer; printf's buffer is made by the
 * first line, before any reading). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#define PG 4096L
#define MIB (1024L * 1024L)
#define GIB (1024L * MIB)
#define RW (PROT_READ | PROT_WRITE)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

static int failed;

#define EXPECT(cond)                                                           \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("FAIL line %d: %s (errno %d %s)\n", __LINE__,   \
			       #cond, errno, strerror(errno));                 \
			failed++;                                              \
		}                                                              \
	} while (0)

static char meminfo[4096];

/* A /proc/meminfo field, in kB (-1 when missing). */
static long field(const char *name)
{
	int fd = (int)syscall(SYS_open, "/proc/meminfo", O_RDONLY);
	long n = fd < 0 ? -1 : syscall(SYS_read, fd, meminfo, sizeof(meminfo) - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return -1;
	meminfo[n] = 0;
	char *at = strstr(meminfo, name);
	if (!at || at[strlen(name)] != ':')
		return -1;
	return strtol(at + strlen(name) + 1, NULL, 10);
}

static long committed(void)
{
	return field("Committed_AS") * 1024;
}

/* The page cache's pages (this program's read-only segments, in use): on
 * --mem too, nobody's commitment (src/mm/cache.rs). */
static long cached(void)
{
	return field("Cached") * 1024;
}

static void *rmmap(void *addr, long len, int prot, int flags)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, -1, 0);
}

static long rmprotect(void *addr, long len, int prot)
{
	return syscall(SYS_mprotect, addr, len, prot);
}

int main(void)
{
	printf("commit: --mem 64M\n");
	fflush(stdout);
	EXPECT(field("MemTotal") == 64 * 1024 && field("CommitLimit") == 64 * 1024);
	struct sysinfo si;
	EXPECT(syscall(SYS_sysinfo, &si) == 0 && si.totalram * si.mem_unit == 64 * MIB);
	long c0 = committed();
	EXPECT(c0 > 0 && c0 < 32 * MIB);
	long cache = cached();
	EXPECT(cache > 0 && field("MemFree") * 1024 == 64 * MIB - c0 - cache);
	/* the accounting is strict: mode 2 (glibc reads it to decide how to
	 * shrink a malloc arena) */
	char mode[8] = {0};
	int mfd = (int)syscall(SYS_open, "/proc/sys/vm/overcommit_memory", O_RDONLY);
	EXPECT(mfd >= 0 && syscall(SYS_read, mfd, mode, sizeof(mode) - 1) == 2 && strcmp(mode, "2\n") == 0);
	syscall(SYS_close, mfd);

	/* a reservation far larger than --mem costs nothing */
	char *r = rmmap(NULL, 4 * GIB, PROT_NONE, ANON | MAP_NORESERVE);
	EXPECT(r != MAP_FAILED);
	char *r2 = rmmap(NULL, GIB, PROT_NONE, ANON);
	EXPECT(r2 != MAP_FAILED);
	EXPECT(committed() == c0);

	/* making more accessible than is left is ENOMEM, and changes nothing */
	errno = 0;
	EXPECT(rmprotect(r, 128 * MIB, PROT_READ) == -1 && errno == ENOMEM);
	EXPECT(committed() == c0);
	int p[2];
	EXPECT(pipe(p) == 0);
	errno = 0;
	EXPECT(write(p[1], r, 1) == -1 && errno == EFAULT);

	/* a part is charged when made accessible, read-only too */
	EXPECT(rmprotect(r, 16 * MIB, PROT_READ) == 0);
	EXPECT(committed() == c0 + 16 * MIB);
	EXPECT(field("MemFree") * 1024 == 64 * MIB - c0 - cache - 16 * MIB);
	EXPECT(rmprotect(r, 16 * MIB, RW) == 0);
	memset(r, 7, 16 * MIB);
	EXPECT(committed() == c0 + 16 * MIB);
	/* PROT_NONE again keeps the charge (and the contents) */
	EXPECT(rmprotect(r, 16 * MIB, PROT_NONE) == 0);
	EXPECT(committed() == c0 + 16 * MIB);
	EXPECT(rmprotect(r, 16 * MIB, RW) == 0 && r[16 * MIB - 1] == 7);
	EXPECT(committed() == c0 + 16 * MIB);
	/* so does MADV_DONTNEED (the pages read as zero) */
	EXPECT(syscall(SYS_madvise, r, 16 * MIB, MADV_DONTNEED) == 0 && r[0] == 0);
	EXPECT(committed() == c0 + 16 * MIB);
	/* munmap gives it back, a part at a time */
	EXPECT(syscall(SYS_munmap, r + 8 * MIB, 8 * MIB) == 0);
	EXPECT(committed() == c0 + 8 * MIB);
	EXPECT(syscall(SYS_munmap, r, 8 * MIB) == 0);
	EXPECT(committed() == c0);

	/* MAP_NORESERVE exempts nothing accessible; a reservation is free */
	errno = 0;
	EXPECT(rmmap(NULL, 128 * MIB, RW, ANON | MAP_NORESERVE) == MAP_FAILED && errno == ENOMEM);
	char *n = rmmap(NULL, 8 * MIB, RW, ANON | MAP_NORESERVE);
	EXPECT(n != MAP_FAILED && committed() == c0 + 8 * MIB);
	EXPECT(syscall(SYS_munmap, n, 8 * MIB) == 0 && committed() == c0);

	/* fill --mem in 1 MiB mappings */
	static char *chunk[64];
	int k = 0;
	while (k < 64 && (chunk[k] = rmmap(NULL, MIB, RW, ANON)) != MAP_FAILED)
		chunk[k++][0] = 1;
	EXPECT(k > 0 && k < 64 && errno == ENOMEM);
	/* and the rest in pages: the account is full to the page */
	static char *page[256];
	int np = 0;
	while (np < 256 && (page[np] = rmmap(NULL, PG, RW, ANON)) != MAP_FAILED)
		page[np++][0] = 1;
	EXPECT(np < 256 && errno == ENOMEM);
	EXPECT(committed() + cached() == 64 * MIB && cached() == cache && field("MemFree") == 0);
	/* then a page of a reservation cannot be made accessible, nor brk grow */
	errno = 0;
	EXPECT(rmprotect(r2, PG, RW) == -1 && errno == ENOMEM);
	long brk0 = syscall(SYS_brk, 0);
	EXPECT(syscall(SYS_brk, brk0 + MIB) == brk0);
	/* but MAP_FIXED over a charged mapping of its own nets the two */
	EXPECT(rmmap(chunk[0], MIB, RW, ANON | MAP_FIXED) == chunk[0] && chunk[0][0] == 0);
	/* and a PROT_NONE MAP_FIXED over one gives its charge back */
	long full = committed();
	EXPECT(rmmap(chunk[1], MIB, PROT_NONE, ANON | MAP_NORESERVE | MAP_FIXED) == chunk[1]);
	EXPECT(committed() == full - MIB);
	EXPECT(rmprotect(r2, PG, RW) == 0 && r2[0] == 0);
	EXPECT(committed() == full - MIB + PG);
	for (int i = 0; i < k; i++)
		syscall(SYS_munmap, chunk[i], MIB);
	for (int i = 0; i < np; i++)
		syscall(SYS_munmap, page[i], PG);
	EXPECT(syscall(SYS_munmap, r2, GIB) == 0 && syscall(SYS_munmap, r + 16 * MIB, 4 * GIB - 16 * MIB) == 0);
	EXPECT(committed() == c0);
	/* the heap can grow again */
	EXPECT(syscall(SYS_brk, brk0 + MIB) == brk0 + MIB);
	EXPECT(committed() == c0 + MIB);

	/* A System V shared memory segment is charged while it lives (as
	 * Linux's shmem accounting charges it), not by its attachments. */
	long c1 = committed();
	errno = 0;
	EXPECT(syscall(SYS_shmget, IPC_PRIVATE, 128 * MIB, IPC_CREAT | 0600) == -1 && errno == ENOMEM);
	EXPECT(committed() == c1);
	int seg = (int)syscall(SYS_shmget, IPC_PRIVATE, 16 * MIB, IPC_CREAT | 0600);
	EXPECT(seg >= 0 && committed() == c1 + 16 * MIB);
	char *at = (char *)syscall(SYS_shmat, seg, NULL, 0);
	EXPECT(at != (char *)-1 && committed() == c1 + 16 * MIB);
	EXPECT(rmprotect(at, PG, PROT_READ) == 0 && rmprotect(at, PG, RW) == 0);
	EXPECT(committed() == c1 + 16 * MIB);
	at[0] = 1;
	EXPECT(syscall(SYS_shmctl, seg, IPC_RMID, NULL) == 0 && committed() == c1 + 16 * MIB);
	EXPECT(syscall(SYS_shmdt, at) == 0 && committed() == c1);

	if (failed)
		return 1;
	printf("commit: all checks passed\n");
	return 0;
}
