/* The inode flags lsattr and chattr read and set (FS_IOC_GETFLAGS,
 * FS_IOC_SETFLAGS): read, set and cleared on a file of the host's, an
 * immutable file refusing writes; setting them takes the owner or
 * CAP_FOWNER. (Regression: ENOTTY, "Operation not supported" from both
 * tools.) Runs as root natively, in /tmp (ext4 and tmpfs both keep
 * FS_NOATIME_FL and FS_IMMUTABLE_FL). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

/* linux/fs.h's (musl has no linux/ headers). */
#define FS_IOC_GETFLAGS 0x80086601
#define FS_IOC_SETFLAGS 0x40086602
#define FS_IMMUTABLE_FL 0x10
#define FS_NOATIME_FL 0x80

static int fd;

static int flags_now(void)
{
	int v = -1;
	return ioctl(fd, FS_IOC_GETFLAGS, &v) == 0 ? v : -1;
}

/* As uid 1000 (this thread only): not the owner, no CAP_FOWNER. */
static void *unprivileged(void *arg)
{
	(void)arg;
	if (syscall(SYS_setresuid, 1000, 1000, 1000) != 0)
		return (void *)1;
	int v = flags_now();
	if (v < 0)
		return (void *)2;
	if (ioctl(fd, FS_IOC_SETFLAGS, &v) != -1 || errno != EPERM)
		return (void *)3;
	return NULL;
}

int main(void)
{
	char path[] = "/tmp/nomu-flags-XXXXXX";
	fd = mkstemp(path);
	CHECK(fd >= 0);
	int v = flags_now();
	CHECK(v >= 0);
	int with = v | FS_NOATIME_FL;
	CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &with));
	CHECK_EQ(flags_now() & FS_NOATIME_FL, FS_NOATIME_FL);
	CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &v));
	CHECK_EQ(flags_now() & FS_NOATIME_FL, 0);

	/* Immutable: no writer opens it, until it is cleared. */
	with = v | FS_IMMUTABLE_FL;
	CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &with));
	CHECK_ERR(open(path, O_WRONLY), EPERM);
	CHECK_ERR(unlink(path), EPERM);
	CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &v));
	int w = open(path, O_WRONLY);
	CHECK(w >= 0);
	close(w);

	CHECK_ERR(ioctl(fd, FS_IOC_GETFLAGS, (void *)8), EFAULT);
	pthread_t t;
	void *r;
	CHECK_EQ(pthread_create(&t, NULL, unprivileged, NULL), 0);
	CHECK_EQ(pthread_join(t, &r), 0);
	CHECK_EQ((long)r, 0);
	close(fd);
	CHECK_OK(unlink(path));
	return checks_done();
}
