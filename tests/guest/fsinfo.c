/* statfs, fstatfs and the xattr get and list calls: /proc answers as a
 * proc mount (no blocks, no xattrs), other files as their file system.
 * Prints section names only. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#define PROC_SUPER_MAGIC 0x9fa0

int main(void)
{
	printf("statfs\n");
	struct statfs proc, root, f;
	CHECK_OK(statfs("/proc", &proc));
	CHECK_EQ(proc.f_type, PROC_SUPER_MAGIC);
	CHECK_EQ(proc.f_blocks, 0);
	CHECK_EQ(proc.f_bsize, 4096);
	CHECK_OK(statfs("/proc/self/fd", &f));
	CHECK_EQ(f.f_type, PROC_SUPER_MAGIC);
	int fd = open("/proc/self/stat", O_RDONLY);
	CHECK_OK(fstatfs(fd, &f));
	CHECK_EQ(f.f_type, PROC_SUPER_MAGIC);
	CHECK(!memcmp(&f.f_fsid, &proc.f_fsid, sizeof f.f_fsid));
	close(fd);
	CHECK_OK(statfs("/", &root));
	CHECK(root.f_type != PROC_SUPER_MAGIC && root.f_blocks > 0);
	fd = open("/", O_RDONLY | O_DIRECTORY);
	CHECK_OK(fstatfs(fd, &f));
	CHECK(f.f_type == root.f_type && f.f_blocks == root.f_blocks && !memcmp(&f.f_fsid, &root.f_fsid, sizeof f.f_fsid));
	close(fd);
	fd = open("/", O_PATH);
	CHECK_OK(fstatfs(fd, &f));
	CHECK_EQ(f.f_type, root.f_type);
	CHECK_ERR(statfs("/no/such/path", &f), ENOENT);
	CHECK_ERR(syscall(SYS_statfs, "/", NULL), EFAULT);
	CHECK_ERR(fstatfs(-1, &f), EBADF);

	printf("xattr\n");
	char buf[256], name[300];
	CHECK_ERR(lgetxattr("/", "user.nomu-none", buf, sizeof buf), ENODATA);
	CHECK_ERR(getxattr("/", "user.nomu-none", NULL, 0), ENODATA);
	CHECK_ERR(getxattr("/proc/self/stat", "user.nomu-none", buf, sizeof buf), EOPNOTSUPP);
	CHECK_ERR(lgetxattr("/proc/self/exe", "security.selinux", buf, sizeof buf), EOPNOTSUPP);
	CHECK_EQ(listxattr("/proc/self/stat", NULL, 0), 0);
	CHECK_EQ(llistxattr("/proc", buf, sizeof buf), 0);
	CHECK_ERR(getxattr("/", "", buf, sizeof buf), ERANGE);
	memset(name, 'a', sizeof name - 1);
	name[sizeof name - 1] = 0;
	memcpy(name, "user.", 5);
	CHECK_ERR(getxattr("/", name, buf, sizeof buf), ERANGE);
	CHECK_ERR(getxattr("/no/such/path", "user.x", buf, sizeof buf), ENOENT);
	ssize_t n = listxattr("/", NULL, 0);
	CHECK(n >= 0);
	CHECK_EQ(listxattr("/", buf, sizeof buf), n);
	CHECK_ERR(fgetxattr(fd, "user.x", buf, sizeof buf), EBADF); /* O_PATH */
	close(fd);
	fd = open("/", O_RDONLY | O_DIRECTORY);
	CHECK_ERR(fgetxattr(fd, "user.nomu-none", buf, sizeof buf), ENODATA);
	CHECK_EQ(flistxattr(fd, buf, sizeof buf), n);
	close(fd);
	fd = open("/proc/self/stat", O_RDONLY);
	CHECK_ERR(fgetxattr(fd, "user.x", buf, sizeof buf), EOPNOTSUPP);
	CHECK_EQ(flistxattr(fd, NULL, 0), 0);
	close(fd);
	return checks_done();
}
