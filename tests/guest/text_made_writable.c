/* A program makes its own code writable after a syscall site in it was
 * used (and patched, under nomu), edits it, runs it, and makes it
 * executable again. It must find its own bytes there (`mov $39, %eax;
 * syscall`), run what it wrote, and the change must stay its own: another
 * process of the same program, started meanwhile, runs the code as the
 * file has it. Under nomu the code is the page cache's, shown to every
 * process running the program (on the rewrite path with the trampolines
 * of its patches beside it): making it writable gives the process a copy,
 * with the patches' original bytes back. */
#include "nomu_test.h"
#include <spawn.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>

extern char **environ;

/* getpid (39) at a site of its own; the mov's immediate is edited below. */
__asm__(".text\n"
	".p2align 4\n"
	".globl site_call\n"
	"site_call:\n"
	"	mov $39, %eax\n"
	"	syscall\n"
	"	ret\n");
long site_call(void);

static unsigned char *code(void)
{
	return (unsigned char *)(uintptr_t)site_call;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "other"))
		return site_call() == getpid() ? 0 : 1;

	for (int i = 0; i < 3; i++)
		CHECK_EQ(site_call(), getpid());
	unsigned char *page = (unsigned char *)((uintptr_t)code() & ~(uintptr_t)4095);
	CHECK_OK(mprotect(page, 8192, PROT_READ | PROT_WRITE | PROT_EXEC));
	/* The mov's bytes, whatever was patched (on zpoline the syscall's two
	 * bytes still read `call *%rax` here: not what Linux shows, left as
	 * it is). */
	static const unsigned char original[] = {0xb8, 39, 0, 0, 0};
	CHECK(memcmp(code(), original, sizeof original) == 0);
	/* getppid (110) instead. */
	code()[1] = 110;
	for (int i = 0; i < 3; i++)
		CHECK_EQ(site_call(), getppid());

	pid_t other;
	char *args[] = {argv[0], "other", NULL};
	CHECK_EQ(posix_spawn(&other, argv[0], NULL, NULL, args, environ), 0);
	int st;
	CHECK_EQ(waitpid(other, &st, 0), other);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	code()[1] = 39;
	CHECK_OK(mprotect(page, 8192, PROT_READ | PROT_EXEC));
	for (int i = 0; i < 3; i++)
		CHECK_EQ(site_call(), getpid());
	return checks_done();
}
