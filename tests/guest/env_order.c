/* The environment reaches a program in the order it was given: every
 * variable's name, in environ's order, and the NOMU_ORDER_ ones' values.
 * The harness passes its env= entries (NOMU_ORDER_Z, _A, _M, in that
 * order, after everything the test runner has) through env(1), natively
 * and to nomu alike; /proc/self/environ is the same list. */
#include "nomu_test.h"

#include <stdlib.h>

extern char **environ;

int main(void)
{
	static char block[1 << 20];
	int fd = open("/proc/self/environ", O_RDONLY);
	size_t len = 0;
	ssize_t n;
	CHECK(fd >= 0);
	while (fd >= 0 && len < sizeof block && (n = read(fd, block + len, sizeof block - len)) > 0)
		len += n;
	close(fd);
	size_t at = 0;
	int order = 0, same = 1;
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		int name_len = eq ? (int)(eq - *e) : (int)strlen(*e);
		if (!strncmp(*e, "NOMU_ORDER_", 11))
			printf("%d %s\n", order++, *e);
		else
			printf("%.*s\n", name_len, *e);
		same &= at < len && !strcmp(block + at, *e);
		at += strlen(*e) + 1;
	}
	CHECK(same && at == len);
	CHECK_EQ(order, 3);
	return checks_done();
}
