/* mincore: Linux's errno rules (EINVAL, ENOMEM for unmapped pages, the
 * vector filled up to a hole, EFAULT), and the pages a program touched
 * counted as resident. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	long page = sysconf(_SC_PAGESIZE);
	unsigned char vec[8];
	char *m = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	m[0] = 1;
	m[2 * page] = 1;
	memset(vec, 7, sizeof vec);
	CHECK_OK(mincore(m, 4 * page, vec));
	CHECK_EQ(vec[0] & 1, 1);
	CHECK_EQ(vec[2] & 1, 1);
	CHECK_EQ(vec[4], 7);
	/* A length that is not whole pages covers the last one. */
	memset(vec, 7, sizeof vec);
	CHECK_OK(mincore(m, 2 * page + 1, vec));
	CHECK_EQ(vec[2] & 1, 1);
	CHECK_EQ(vec[3], 7);
	CHECK_OK(mincore(m, 0, vec));
	/* A hole: ENOMEM, the pages before it filled in. */
	CHECK_OK(munmap(m + 3 * page, page));
	memset(vec, 7, sizeof vec);
	CHECK_ERR(mincore(m, 4 * page, vec), ENOMEM);
	CHECK_EQ(vec[0] & 1, 1);
	CHECK_EQ(vec[2] & 1, 1);
	CHECK_EQ(vec[3], 7);
	CHECK_ERR(mincore(m + 3 * page, page, vec), ENOMEM);
	/* Errors. */
	CHECK_ERR(mincore(m + 1, page, vec), EINVAL);
	CHECK_ERR(mincore(m, page, (unsigned char *)8), EFAULT);
	CHECK_ERR(syscall(SYS_mincore, (void *)-4096L, 4096, vec), ENOMEM);
	CHECK_ERR(syscall(SYS_mincore, m, 2 * page, (void *)-1L), EFAULT);
	/* The stack and the program's own pages are mapped. */
	CHECK_OK(mincore((void *)((unsigned long)vec & ~(page - 1)), page, vec));
	CHECK_EQ(vec[0] & 1, 1);
	CHECK_OK(mincore((void *)((unsigned long)&main & ~(page - 1)), page, vec));
	CHECK_OK(munmap(m, 3 * page));
	return checks_done();
}
