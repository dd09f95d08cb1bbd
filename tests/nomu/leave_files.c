/* Writes to files and exits without closing, unmapping or syncing
 * anything: whatever it wrote must be in the files afterwards (also
 * through a shared mapping it then made PROT_NONE).
 *   leave_files DIR */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char path[512];
	if (argc != 2)
		return 2;
	snprintf(path, sizeof(path), "%s/written.txt", argv[1]);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "written by write(2)\n", 20) != 20)
		return 1;

	snprintf(path, sizeof(path), "%s/mapped.bin", argv[1]);
	int mfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (mfd < 0 || ftruncate(mfd, 8192) != 0)
		return 1;
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (m == MAP_FAILED)
		return 1;
	memcpy(m + 100, "through MAP_SHARED", 18);
	memcpy(m + 5000, "second page", 11);
	/* Written, then made inaccessible: still written back. */
	if (mprotect(m + 4096, 4096, PROT_NONE) != 0)
		return 1;
	_exit(0);
}
