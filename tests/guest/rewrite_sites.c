/* Syscall sites the rewrite entry path patches (or must leave alone), run
 * on every path: a loop that jumps back to its syscall instruction, a
 * syscall after a rip-relative load, one at a function's first byte, one
 * right after a jump target, two threads on one site while it is patched,
 * and code generated at run time, rewritten and run again. */
#include "nomu_test.h"
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

long loop_getpid(long times);
long rip_rel_getpid(void);
long rip_rel_write(long fd);
long first_byte_call(long nr);
long after_target(long which);
long hammer_getpid(void);

__asm__(".text\n"
	/* 5-byte mov before the syscall, and a loop back to the syscall
	 * itself (an int3 once the mov is patched). */
	".p2align 4\n"
	".globl loop_getpid\n.type loop_getpid,@function\n"
	"loop_getpid:\n"
	"  xor %r8d, %r8d\n"
	"  mov $39, %eax\n"
	"1: syscall\n"
	"  add %rax, %r8\n"
	"  mov $39, %eax\n"
	"  dec %rdi\n"
	"  jnz 1b\n"
	"  mov %r8, %rax\n"
	"  ret\n"
	/* the number from a rip-relative load (6 bytes, relocated) */
	".p2align 4\n"
	".globl rip_rel_getpid\n.type rip_rel_getpid,@function\n"
	"rip_rel_getpid:\n"
	"  mov rw_nr(%rip), %eax\n"
	"  syscall\n"
	"  ret\n"
	/* a rip-relative lea of the buffer (7 bytes, relocated) */
	".p2align 4\n"
	".globl rip_rel_write\n.type rip_rel_write,@function\n"
	"rip_rel_write:\n"
	"  mov $1, %eax\n"
	"  mov $6, %edx\n"
	"  lea rw_msg(%rip), %rsi\n"
	"  syscall\n"
	"  ret\n"
	/* the syscall is the function's first byte */
	".p2align 4\n"
	".globl first_byte\n.type first_byte,@function\n"
	"first_byte:\n"
	"  syscall\n"
	"  ret\n"
	".p2align 4\n"
	".globl first_byte_call\n.type first_byte_call,@function\n"
	"first_byte_call:\n"
	"  mov %rdi, %rax\n"
	"  call first_byte\n"
	"  ret\n"
	/* the syscall is a jump target right after a 5-byte mov */
	".p2align 4\n"
	".globl after_target\n.type after_target,@function\n"
	"after_target:\n"
	"  mov $39, %eax\n"
	"  test %rdi, %rdi\n"
	"  jz 2f\n"
	"  mov $110, %eax\n"
	"2: syscall\n"
	"  ret\n"
	".p2align 4\n"
	".globl hammer_getpid\n.type hammer_getpid,@function\n"
	"hammer_getpid:\n"
	"  mov $39, %eax\n"
	"  syscall\n"
	"  ret\n"
	".data\n"
	"rw_nr: .long 39\n"
	"rw_msg: .ascii \"rip ok\"\n"
	".text\n");

#define HAMMER 20000

static pthread_barrier_t start;

static void *hammer(void *arg)
{
	long want = getpid(), bad = 0;
	pthread_barrier_wait(&start);
	for (int i = 0; i < HAMMER; i++)
		bad += hammer_getpid() != want;
	return (void *)bad;
}

typedef long (*jit_fn)(void);

int main(void)
{
	long pid = getpid(), ppid = getppid();

	printf("== a loop back to its syscall\n");
	for (int i = 0; i < 3; i++)
		CHECK_EQ(loop_getpid(5), 5 * pid);

	printf("== a rip-relative load and lea before the syscall\n");
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(rip_rel_getpid(), pid);
		fflush(stdout);
		CHECK_EQ(rip_rel_write(1), 6);
		printf("\n");
	}

	printf("== a syscall at a function's first byte\n");
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(first_byte_call(SYS_getpid), pid);
		CHECK_EQ(first_byte_call(SYS_getppid), ppid);
	}

	printf("== a syscall right after a jump target\n");
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(after_target(0), pid);
		CHECK_EQ(after_target(1), ppid);
	}

	printf("== two threads on one site while it is patched\n");
	pthread_t t[2];
	pthread_barrier_init(&start, NULL, 2);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, hammer, NULL), 0);
	for (int i = 0; i < 2; i++) {
		void *bad;
		CHECK_EQ(pthread_join(t[i], &bad), 0);
		CHECK_EQ((long)bad, 0);
	}

	printf("== code generated at run time, rewritten, run again\n");
	unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(code != MAP_FAILED);
	memset(code, 0xcc, 4096); /* int3 padding, as JITs use */
	/* mov $39,%eax; syscall; ret */
	static const unsigned char getpid_code[] = {0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3};
	memcpy(code + 64, getpid_code, sizeof getpid_code);
	CHECK_OK(mprotect(code, 4096, PROT_READ | PROT_EXEC));
	jit_fn fn = (jit_fn)(code + 64);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(fn(), pid);
	/* Only the number changes: getppid. */
	CHECK_OK(mprotect(code, 4096, PROT_READ | PROT_WRITE));
	code[65] = 110;
	CHECK_OK(mprotect(code, 4096, PROT_READ | PROT_EXEC));
	for (int i = 0; i < 3; i++)
		CHECK_EQ(fn(), ppid);
	/* New code at the same place: two instructions before the syscall. */
	CHECK_OK(mprotect(code, 4096, PROT_READ | PROT_WRITE));
	static const unsigned char getpid2_code[] = {0xb8, 110, 0, 0, 0, 0xb0, 39, 0x0f, 0x05, 0xc3};
	memcpy(code + 64, getpid2_code, sizeof getpid2_code); /* mov $110,%eax; mov $39,%al */
	CHECK_OK(mprotect(code, 4096, PROT_READ | PROT_EXEC));
	for (int i = 0; i < 3; i++)
		CHECK_EQ(fn(), pid);
	CHECK_OK(munmap(code, 4096));

	return checks_done();
}
