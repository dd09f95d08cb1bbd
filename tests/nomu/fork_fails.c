/* fork and clone without CLONE_VM need an MMU: they must fail with
 * EINVAL, as on no-MMU Linux, and leave the caller running. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	long r = syscall(SYS_fork);
	printf("fork: %ld %s\n", r, r == -1 && errno == EINVAL ? "EINVAL" : "?");
	r = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	printf("clone without CLONE_VM: %ld %s\n", r, r == -1 && errno == EINVAL ? "EINVAL" : "?");
	return 0;
}
