/* Running out of memory is an error return, not a crash: allocate 1 MiB
 * chunks with mmap (touching every page) until mmap fails, check the failure
 * is ENOMEM, free everything, and check that allocating works again.
 *
 * argv[1], when given, is a limit in MiB applied first with
 * setrlimit(RLIMIT_AS) so the native run ends quickly.  Under nomu the same
 * argument is passed and nomu's --mem gives the ENOMEM (nomu may record the
 * rlimit without enforcing it).  Without an argument it gives up after
 * MAX_CHUNKS.  No counts are printed: the output is the same either way. */
#include "nomu_test.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)
#define MAX_CHUNKS 8192 /* 8 GiB */

static void *chunks[MAX_CHUNKS];

int main(int argc, char **argv)
{
	long limit_mib = argc > 1 ? atol(argv[1]) : 0;
	if (limit_mib > 0) {
		struct rlimit rl = {limit_mib * MIB, limit_mib * MIB};
		CHECK_OK(setrlimit(RLIMIT_AS, &rl));
		printf("address space limited\n");
	}
	printf("allocating 1 MiB chunks until mmap fails\n");
	fflush(stdout);

	int n = 0, err = 0;
	while (n < MAX_CHUNKS) {
		char *p = mmap(NULL, MIB, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			err = errno;
			break;
		}
		for (size_t off = 0; off < MIB; off += 4096)
			p[off] = (char)(n + 1);
		p[MIB - 1] = (char)(n + 1);
		chunks[n++] = p;
	}
	CHECK(n < MAX_CHUNKS);
	CHECK_EQ(err, ENOMEM);
	if (err == ENOMEM)
		printf("mmap failed with ENOMEM after enough memory\n");
	/* the limit is 64 MiB in the suite: a good part of it must have been
	 * usable, and no more than all of it */
	if (limit_mib > 0)
		CHECK(n >= limit_mib / 4 && n <= limit_mib);

	/* every chunk still holds what was written */
	int intact = 1;
	for (int i = 0; i < n; i++) {
		const char *p = chunks[i];
		if (p[0] != (char)(i + 1) || p[MIB / 2] != (char)(i + 1) ||
		    p[MIB - 1] != (char)(i + 1))
			intact = 0;
	}
	CHECK(intact);

	/* malloc fails cleanly too (NULL, ENOMEM) */
	errno = 0;
	void *big = malloc(4 * MIB);
	CHECK(big == NULL && errno == ENOMEM);
	free(big);

	/* one check for all of them: the check count must not depend on n */
	int unmapped = 1;
	for (int i = 0; i < n; i++)
		if (munmap(chunks[i], MIB) != 0)
			unmapped = 0;
	CHECK(unmapped);
	printf("freed all chunks\n");

	char *p = mmap(NULL, MIB, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	if (p != MAP_FAILED) {
		memset(p, 7, MIB);
		CHECK_EQ(p[MIB - 1], 7);
		CHECK_OK(munmap(p, MIB));
	}
	char *q = malloc(100000);
	CHECK(q != NULL);
	if (q) {
		memset(q, 1, 100000);
		free(q);
	}
	printf("allocation works again\n");
	return checks_done();
}
