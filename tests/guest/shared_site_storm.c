/* Processes of one program run a syscall site at once while it is patched
 * (zpoline and the rewrite path patch a site on its first use, and the
 * page cache shows the program's code to every process running it, so
 * the patch lands in a page the others are running). Four processes start
 * together and run a loop that jumps back to its `syscall` instruction
 * (which the rewrite path leaves as an int3 inside the patched range):
 * every call must be a getpid. */
#include "nomu_test.h"
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

extern char **environ;

/* The sum of `n` getpids, made by a loop whose branch goes back to the
 * syscall itself. */
__asm__(".text\n"
	".globl storm_loop\n"
	"storm_loop:\n"
	"	xor %r8, %r8\n"
	"	mov $39, %eax\n"
	"1:	syscall\n"
	"	add %rax, %r8\n"
	"	mov $39, %eax\n"
	"	dec %rdi\n"
	"	jnz 1b\n"
	"	mov %r8, %rax\n"
	"	ret\n");
long storm_loop(long n);

enum { CHILDREN = 4, CALLS = 20000 };

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "child")) {
		char c;
		if (read(atoi(argv[2]), &c, 1) != 1)
			return 2;
		return storm_loop(CALLS) == (long)CALLS * getpid() ? 0 : 1;
	}
	int go[2];
	CHECK_OK(pipe(go));
	char fd[16];
	snprintf(fd, sizeof fd, "%d", go[0]);
	char *args[] = {argv[0], "child", fd, NULL};
	pid_t pids[CHILDREN];
	for (int i = 0; i < CHILDREN; i++)
		CHECK_EQ(posix_spawn(&pids[i], argv[0], NULL, NULL, args, environ), 0);
	/* All at once. */
	CHECK_EQ(write(go[1], "gggg", CHILDREN), CHILDREN);
	for (int i = 0; i < CHILDREN; i++) {
		int st;
		CHECK_EQ(waitpid(pids[i], &st, 0), pids[i]);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	/* And this process, whose page is patched by now. */
	CHECK_EQ(storm_loop(100), 100L * getpid());
	return checks_done();
}
