/* Whether code one process patched is the code another process runs: the
 * page cache shows a program's text to every process running it (nomu's
 * mm::cache), and the entry paths that patch syscall sites (zpoline, the
 * rewrite path) patch that shared page. The parent starts a second run of
 * this program, which waits; then the parent makes a syscall at a site no
 * process used before, and the child prints the bytes it has there: the
 * patched ones where the text is shared, `0f 05` where each process has
 * its own copy (natively, or on a path that patches nothing). */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* getpid at a site of its own: `mov $39, %eax` then the syscall. */
__asm__(".text\n"
	".globl at_site\n"
	"at_site:\n"
	"	mov $39, %eax\n"
	".globl shared_site\n"
	"shared_site:\n"
	"	syscall\n"
	"	ret\n");
long at_site(void);
extern const unsigned char shared_site[];

int main(int argc, char **argv)
{
	char c;
	if (argc == 4 && strcmp(argv[1], "child") == 0) {
		int ready = atoi(argv[2]), go = atoi(argv[3]);
		if (write(ready, "r", 1) != 1 || read(go, &c, 1) != 1)
			return 2;
		printf("site: %02x %02x\n", shared_site[0], shared_site[1]);
		return 0;
	}
	int ready[2], go[2];
	if (pipe(ready) || pipe(go))
		return perror("pipe"), 1;
	char r[16], g[16];
	snprintf(r, sizeof r, "%d", ready[1]);
	snprintf(g, sizeof g, "%d", go[0]);
	char *args[] = { argv[0], "child", r, g, NULL };
	pid_t pid;
	if (posix_spawn(&pid, argv[0], NULL, NULL, args, environ))
		return perror("posix_spawn"), 1;
	if (read(ready[0], &c, 1) != 1)
		return 1;
	if (at_site() != getpid())
		return puts("getpid at the site is wrong"), 1;
	if (write(go[1], "g", 1) != 1)
		return 1;
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 1;
	return WEXITSTATUS(status);
}
