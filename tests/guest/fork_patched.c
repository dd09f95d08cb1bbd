/* Syscall sites a parent ran (and the rewrite entry path patched in the
 * page cache's code) run in forked children too, which are shown that code
 * as patched (src/entry/rewrite.rs, "Forked children"): a loop that jumps
 * back to its syscall instruction (an int3 inside a patched range), a
 * syscall after a rip-relative load, ids a child's host process answers
 * itself through a trampoline, and a blocking read interrupted by a
 * SA_RESTART handler, whose restart lands on the syscall instruction. On
 * every path, natively first. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>

long loop_getppid(long times);
long rip_rel_gettid(void);
long read_after_mov(long fd, void *buf, long len);

__asm__(".text\n"
	/* 5-byte mov before the syscall, and a loop back to the syscall
	 * itself (an int3 once the mov is patched). */
	".p2align 4\n"
	".globl loop_getppid\n.type loop_getppid,@function\n"
	"loop_getppid:\n"
	"  xor %r8d, %r8d\n"
	"  mov $110, %eax\n"
	"1: syscall\n"
	"  add %rax, %r8\n"
	"  mov $110, %eax\n"
	"  dec %rdi\n"
	"  jnz 1b\n"
	"  mov %r8, %rax\n"
	"  ret\n"
	/* the number from a rip-relative load (6 bytes, relocated) */
	".p2align 4\n"
	".globl rip_rel_gettid\n.type rip_rel_gettid,@function\n"
	"rip_rel_gettid:\n"
	"  mov gettid_nr(%rip), %eax\n"
	"  syscall\n"
	"  ret\n"
	/* read(fd, buf, len) with the number moved in just before: a
	 * restart goes back to the syscall instruction, inside the range */
	".p2align 4\n"
	".globl read_after_mov\n.type read_after_mov,@function\n"
	"read_after_mov:\n"
	"  mov $0, %eax\n"
	"  syscall\n"
	"  ret\n"
	".data\n"
	".p2align 2\n"
	"gettid_nr: .long 186\n"
	".text\n");

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
	(void)sig;
	handled++;
}

/* In the child: 0 when its checks hold, else the failing check's number. */
static int child_checks(pid_t parent, int from_parent)
{
	if (loop_getppid(100) != 100L * parent)
		return 1;
	if (rip_rel_gettid() != getpid())
		return 2;
	/* Blocked in the read until the parent's signal (SA_RESTART), then
	 * its byte. */
	char c = 0;
	if (read_after_mov(from_parent, &c, 1) != 1 || c != 'x')
		return 3;
	return handled == 1 ? 0 : 4;
}

int main(void)
{
	pid_t me = getpid();
	nomu_handle(SIGUSR1, on_usr1, SA_RESTART);
	/* The parent runs each site first. */
	CHECK_EQ(loop_getppid(10), 10L * getppid());
	CHECK_EQ(rip_rel_gettid(), me);
	int warm[2];
	CHECK_OK(pipe(warm));
	CHECK_EQ(write(warm[1], "w", 1), 1);
	char w = 0;
	CHECK_EQ(read_after_mov(warm[0], &w, 1), 1);
	CHECK_EQ(w, 'w');
	for (int round = 0; round < 5; round++) {
		int p[2];
		CHECK_OK(pipe(p));
		fflush(stdout);
		pid_t c = fork();
		CHECK(c >= 0);
		if (c == 0) {
			close(p[1]);
			_exit(child_checks(me, p[0]));
		}
		close(p[0]);
		/* The child blocks in its read; a signal interrupts it, and the
		 * byte after it ends the restarted read. */
		nomu_sleep_ms(30);
		CHECK_OK(kill(c, SIGUSR1));
		nomu_sleep_ms(30);
		CHECK_EQ(write(p[1], "x", 1), 1);
		int st;
		CHECK_EQ(waitpid(c, &st, 0), c);
		CHECK(WIFEXITED(st));
		CHECK_EQ(WEXITSTATUS(st), 0);
		close(p[1]);
	}
	printf("patched sites in forked children: ok\n");
	return checks_done();
}
