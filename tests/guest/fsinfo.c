/* statfs, fstatfs and the xattr calls: /proc answers as a proc mount (no
 * blocks, no xattrs), other files as their file system.
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
	CHECK_ERR(fsetxattr(fd, "security.x", "v", 1, 0), EOPNOTSUPP);
	CHECK_ERR(fremovexattr(fd, "security.x"), EOPNOTSUPP);
	close(fd);

	/* Changing /proc's attributes: proc has no xattr handlers, once the
	 * checks before them pass (these answers are the same for any user). */
	printf("xattr changes in /proc\n");
	CHECK_ERR(setxattr("/proc/self/stat", "security.x", "v", 1, 0), EOPNOTSUPP);
	CHECK_ERR(removexattr("/proc", "security.x"), EOPNOTSUPP);
	CHECK_ERR(setxattr("/proc/self/fd", "system.x", "v", 1, 0), EOPNOTSUPP);
	/* A process's directory takes no change of any name. */
	CHECK_ERR(setxattr("/proc/self", "security.x", "v", 1, 0), EPERM);
	CHECK_ERR(removexattr("/proc/self/", "user.x"), EPERM);
	/* user.* is for files and directories: a link's is refused. */
	CHECK_ERR(lgetxattr("/proc/self", "user.x", buf, sizeof buf), ENODATA);
	CHECK_ERR(lsetxattr("/proc/self/exe", "user.x", "v", 1, 0), EPERM);
	CHECK_ERR(lremovexattr("/proc/self/cwd", "user.x"), EPERM);
	CHECK_ERR(lsetxattr("/proc/self/exe", "security.x", "v", 1, 0), EOPNOTSUPP);
	/* sysctl directories and read-only sysctls are not writable, by root
	 * either. */
	CHECK_ERR(setxattr("/proc/sys/kernel", "user.x", "v", 1, 0), EACCES);
	CHECK_ERR(removexattr("/proc/sys/kernel/osrelease", "user.x"), EACCES);
	CHECK_ERR(setxattr("/proc/sys/kernel/osrelease", "security.x", "v", 1, 0), EOPNOTSUPP);
	/* The name is read (and judged) before the path is looked up. */
	CHECK_ERR(getxattr("/no/such/path", "", buf, sizeof buf), ERANGE);
	CHECK_ERR(removexattr("/no/such/path", ""), ERANGE);
	CHECK_ERR(syscall(SYS_fgetxattr, -1, (void *)8, buf, sizeof buf), EFAULT);
	return checks_done();
}
