/* Syscall instructions whose two bytes straddle a 64-byte cache line (the
 * 0f the last byte of a line, and of a page): zpoline rewrites them in two
 * steps, through an invalid `0f d0` that must act as the syscall. Two
 * threads hammer them while they are patched; a forked child runs them. */
#include "nomu_test.h"
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>

long line_sys(long nr, long a1, long a2, long a3);
long page_sys(long nr, long a1, long a2, long a3);
extern const unsigned char line_site[], page_site[], sites32[];
typedef long (*sys_fn)(long nr, long a1, long a2, long a3);
#define SITE32(i) ((sys_fn)(uintptr_t)(sites32 + (i) % 32 * 128))

#define SYS_FN(name, at)                                                       \
	".globl " #name "\n.type " #name ",@function\n" #name ":\n"            \
	"  mov %rdi, %rax\n  mov %rsi, %rdi\n  mov %rdx, %rsi\n  mov %rcx, %rdx\n" \
	"  .org " #name " + " #at ", 0x90\n"                                   \
	"  .globl " #name "_site_\n" #name "_site_:\n"                         \
	"  syscall\n  ret\n"

__asm__(".text\n"
	".p2align 12\n" SYS_FN(line_sys, 127)
	".p2align 12\n" SYS_FN(page_sys, 4095)
	/* 32 more, 128 bytes apart: more patches for the threads to race */
	".p2align 12\n.globl sites32\nsites32:\n"
	".rept 32\n"
	"1: mov %rdi, %rax\n  mov %rsi, %rdi\n  mov %rdx, %rsi\n  mov %rcx, %rdx\n"
	"  .org 1b + 63, 0x90\n  syscall\n  ret\n  .org 1b + 128, 0xcc\n"
	".endr\n"
	".globl line_site\n.set line_site, line_sys_site_\n"
	".globl page_site\n.set page_site, page_sys_site_\n");

#define HAMMER 20000

static pthread_barrier_t start;

static void *hammer(void *arg)
{
	long pid = getpid(), tid = syscall(SYS_gettid), bad = 0;
	pthread_barrier_wait(&start);
	for (int i = 0; i < HAMMER; i++) {
		bad += line_sys(SYS_gettid, 0, 0, 0) != tid;
		bad += page_sys(SYS_getpid, 0, 0, 0) != pid;
		bad += SITE32(i)(SYS_gettid, 0, 0, 0) != tid;
	}
	return (void *)bad;
}

static void calls(const char *what)
{
	long pid = getpid(), tid = syscall(SYS_gettid);
	int bad = 0;
	for (int i = 0; i < 1000; i++) {
		bad += line_sys(SYS_getpid, 0, 0, 0) != pid;
		bad += page_sys(SYS_gettid, 0, 0, 0) != tid;
		bad += SITE32(i)(SYS_getpid, 0, 0, 0) != pid;
	}
	CHECK_EQ(bad, 0);
	fflush(stdout);
	CHECK_EQ(line_sys(SYS_write, 1, (long)what, strlen(what)), (long)strlen(what));
	CHECK_EQ(page_sys(SYS_write, 1, (long)"\n", 1), 1);
}

int main(void)
{
	printf("== the sites straddle a line (and a page)\n");
	CHECK_EQ((uintptr_t)line_site % 64, 63);
	CHECK_EQ((uintptr_t)page_site % 4096, 4095);

	printf("== two threads on the sites while they are patched\n");
	pthread_t t[2];
	pthread_barrier_init(&start, NULL, 2);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, hammer, NULL), 0);
	for (int i = 0; i < 2; i++) {
		void *bad;
		CHECK_EQ(pthread_join(t[i], &bad), 0);
		CHECK_EQ((long)bad, 0);
	}

	printf("== many calls, getpid, gettid, write\n");
	calls("parent");

	printf("== a forked child runs them\n");
	fflush(stdout);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		calls("child");
		_exit(checks_done());
	}
	int status;
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	calls("parent again");
	return checks_done();
}
