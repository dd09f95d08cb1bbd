/* A child starts with its parent's FPU, SSE and AVX state, as Linux's
 * fork copies the whole xstate: the x87 control word and st0, MXCSR
 * (rounding mode, flush-to-zero) and xmm0-15 (ymm0-15 with AVX) hold the
 * parent's values right after the raw syscall, in the child and in the
 * parent, for fork, vfork and clone without CLONE_VM. A new thread starts
 * with its creator's MXCSR and x87 control word.
 *
 * The values are loaded, the syscall made and the registers stored in ONE
 * asm block, so the compiler cannot spill or reload anything in between.
 * The child checks and reports through its exit status (0: all equal); it
 * prints nothing. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <cpuid.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_MXCSR 0xff80u /* round toward zero, flush to zero, all masked */
#define TEST_FCW 0x0c7fu   /* round toward zero, single precision */

static int have_avx(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	if (!(c & bit_OSXSAVE) || !(c & bit_AVX))
		return 0;
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 6) == 6;
}

struct block {
	uint8_t in[16 * 32];  /* ymm0-15 (the low 16 bytes: xmm) */
	uint8_t out[16 * 32];
	uint8_t st0_in[16];   /* an 80-bit value for st0 */
	uint8_t st0_out[16];
	uint32_t mxcsr_in, mxcsr_out, mxcsr_saved;
	uint16_t fcw_in, fcw_out, fcw_saved;
	long ret;
} __attribute__((aligned(64)));

/* Global: a vfork child shares it (and the stack) with its parent, and
 * writes only the copy it is given. */
struct block fork_fpu_parent, fork_fpu_child;
#define parent_block fork_fpu_parent
#define child_block fork_fpu_child
static const char *current_name;
void fork_fpu_child_reports(void);
static int avx;

#define LOAD_XMM(n) "movdqu " #n "*32(%%rbx), %%xmm" #n "\n\t"
#define STORE_XMM(n) "movdqu %%xmm" #n ", 512+" #n "*32(%%rbx)\n\t"
#define LOAD_YMM(n) "vmovdqu " #n "*32(%%rbx), %%ymm" #n "\n\t"
#define STORE_YMM(n) "vmovdqu %%ymm" #n ", 512+" #n "*32(%%rbx)\n\t"
#define ALL16(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)

/* Loads the block's values, makes syscall `nr` with args (a1, a2), and
 * stores the registers into the block of the side that runs after it (the
 * child's own for a child: rax == 0). */
static long __attribute__((noinline)) fpu_syscall(long nr, long a1, long a2)
{
	struct block *b = &parent_block;
	long ret;
	if (avx) {
		__asm__ volatile(
			"stmxcsr %c[msave](%%rbx)\n\t"
			"fnstcw %c[fsave](%%rbx)\n\t"
			"ldmxcsr %c[min](%%rbx)\n\t"
			"fldcw %c[fin](%%rbx)\n\t"
			"fldt %c[stin](%%rbx)\n\t"
			ALL16(LOAD_YMM)
			"syscall\n\t"
			"test %%rax, %%rax\n\t"
			"jnz 1f\n\t"
			"lea fork_fpu_child(%%rip), %%rbx\n\t"
			"1:\n\t"
			ALL16(STORE_YMM)
			"fstpt %c[stout](%%rbx)\n\t"
			"stmxcsr %c[mout](%%rbx)\n\t"
			"fnstcw %c[fout](%%rbx)\n\t"
			"ldmxcsr %c[msave](%%rbx)\n\t"
			"fldcw %c[fsave](%%rbx)\n\t"
			"vzeroupper\n\t"
			"test %%rax, %%rax\n\t"
			"jnz 2f\n\t"
			/* The child reports from below this frame and the red
			 * zone: a vfork child must not touch its parent's frames. */
			"lea -256(%%rsp), %%rsp\n\t"
			"and $-16, %%rsp\n\t"
			"call fork_fpu_child_reports\n\t"
			"2:\n\t"
			: "=a"(ret), "+b"(b)
			: "a"(nr), "D"(a1), "S"(a2), [min] "i"(offsetof(struct block, mxcsr_in)),
			  [mout] "i"(offsetof(struct block, mxcsr_out)), [msave] "i"(offsetof(struct block, mxcsr_saved)),
			  [fin] "i"(offsetof(struct block, fcw_in)), [fout] "i"(offsetof(struct block, fcw_out)),
			  [fsave] "i"(offsetof(struct block, fcw_saved)), [stin] "i"(offsetof(struct block, st0_in)),
			  [stout] "i"(offsetof(struct block, st0_out))
			: "rcx", "r11", "rdx", "r10", "r8", "r9", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",
			  "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
			  "st");
	} else {
		__asm__ volatile(
			"stmxcsr %c[msave](%%rbx)\n\t"
			"fnstcw %c[fsave](%%rbx)\n\t"
			"ldmxcsr %c[min](%%rbx)\n\t"
			"fldcw %c[fin](%%rbx)\n\t"
			"fldt %c[stin](%%rbx)\n\t"
			ALL16(LOAD_XMM)
			"syscall\n\t"
			"test %%rax, %%rax\n\t"
			"jnz 1f\n\t"
			"lea fork_fpu_child(%%rip), %%rbx\n\t"
			"1:\n\t"
			ALL16(STORE_XMM)
			"fstpt %c[stout](%%rbx)\n\t"
			"stmxcsr %c[mout](%%rbx)\n\t"
			"fnstcw %c[fout](%%rbx)\n\t"
			"ldmxcsr %c[msave](%%rbx)\n\t"
			"fldcw %c[fsave](%%rbx)\n\t"
			"test %%rax, %%rax\n\t"
			"jnz 2f\n\t"
			/* The child reports from below this frame and the red
			 * zone: a vfork child must not touch its parent's frames. */
			"lea -256(%%rsp), %%rsp\n\t"
			"and $-16, %%rsp\n\t"
			"call fork_fpu_child_reports\n\t"
			"2:\n\t"
			: "=a"(ret), "+b"(b)
			: "a"(nr), "D"(a1), "S"(a2), [min] "i"(offsetof(struct block, mxcsr_in)),
			  [mout] "i"(offsetof(struct block, mxcsr_out)), [msave] "i"(offsetof(struct block, mxcsr_saved)),
			  [fin] "i"(offsetof(struct block, fcw_in)), [fout] "i"(offsetof(struct block, fcw_out)),
			  [fsave] "i"(offsetof(struct block, fcw_saved)), [stin] "i"(offsetof(struct block, st0_in)),
			  [stout] "i"(offsetof(struct block, st0_out))
			: "rcx", "r11", "rdx", "r10", "r8", "r9", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",
			  "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
			  "st");
	}
	return ret;
}

/* How many of the stored values differ from what was loaded (the parent's
 * inputs); details to stderr. */
static int mismatches(const char *who, const struct block *got)
{
	const struct block *want = &parent_block;
	int bad = 0;
	int width = avx ? 32 : 16;
	for (int i = 0; i < 16; i++) {
		if (memcmp(got->out + i * 32, want->in + i * 32, width)) {
			fprintf(stderr, "%s: %s%d differs\n", who, avx ? "ymm" : "xmm", i);
			bad++;
		}
	}
	if (memcmp(got->st0_out, want->st0_in, 10)) {
		fprintf(stderr, "%s: st0 differs\n", who);
		bad++;
	}
	if (got->mxcsr_out != want->mxcsr_in) {
		fprintf(stderr, "%s: mxcsr %#x, not %#x\n", who, got->mxcsr_out, want->mxcsr_in);
		bad++;
	}
	if (got->fcw_out != want->fcw_in) {
		fprintf(stderr, "%s: x87 control word %#x, not %#x\n", who, got->fcw_out, want->fcw_in);
		bad++;
	}
	return bad;
}

void __attribute__((noinline, noreturn, used)) fork_fpu_child_reports(void)
{
	syscall(SYS_exit, mismatches(current_name, &child_block) ? 1 : 0);
	__builtin_unreachable();
}

static void prepare(unsigned seed)
{
	for (size_t i = 0; i < sizeof parent_block.in; i++)
		parent_block.in[i] = (uint8_t)(seed * 37 + i * 11 + (i >> 5) * 3 + 1);
	/* 1.25 * 2^3 as an 80-bit extended value: mantissa, then exponent */
	memset(parent_block.st0_in, 0, sizeof parent_block.st0_in);
	uint64_t mant = 0xa000000000000000ull + seed;
	memcpy(parent_block.st0_in, &mant, 8);
	uint16_t exp = 16383 + 3;
	memcpy(parent_block.st0_in + 8, &exp, 2);
	parent_block.mxcsr_in = TEST_MXCSR;
	parent_block.fcw_in = TEST_FCW;
	memset(parent_block.out, 0, sizeof parent_block.out);
	memset(&child_block, 0, sizeof child_block);
}

static void one(const char *name, long nr, long a1, long a2, unsigned seed)
{
	prepare(seed);
	current_name = name;
	long pid = fpu_syscall(nr, a1, a2);
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	int bad = mismatches(name, &parent_block);
	int status = -1;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	printf("%s: parent %s, child %s\n", name, bad ? "differs" : "same",
	       WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "same" : "differs");
	CHECK_EQ(bad, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static uint32_t thread_mxcsr;
static uint16_t thread_fcw;

static void *thread_main(void *arg)
{
	__asm__ volatile("stmxcsr %0" : "=m"(thread_mxcsr));
	__asm__ volatile("fnstcw %0" : "=m"(thread_fcw));
	return arg;
}

int main(void)
{
	avx = have_avx();
	fprintf(stderr, "fork_fpu: %s\n", avx ? "ymm (AVX)" : "xmm only");
	one("fork", SYS_fork, 0, 0, 1);
	one("vfork", SYS_vfork, 0, 0, 2);
	one("clone", SYS_clone, SIGCHLD, 0, 3);
	/* A second time: a child's state is not left over from the first. */
	one("fork again", SYS_fork, 0, 0, 4);

	/* A thread starts with its creator's MXCSR and x87 control word. */
	uint32_t saved_mxcsr, mxcsr = TEST_MXCSR;
	uint16_t saved_fcw, fcw = TEST_FCW;
	pthread_t t;
	__asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(saved_mxcsr), "=m"(saved_fcw));
	__asm__ volatile("ldmxcsr %0\n\tfldcw %1" : : "m"(mxcsr), "m"(fcw));
	int rc = pthread_create(&t, NULL, thread_main, NULL);
	__asm__ volatile("ldmxcsr %0\n\tfldcw %1" : : "m"(saved_mxcsr), "m"(saved_fcw));
	CHECK_EQ(rc, 0);
	if (rc == 0)
		CHECK_EQ(pthread_join(t, NULL), 0);
	printf("thread: mxcsr %#x, x87 control word %#x\n", thread_mxcsr, thread_fcw);
	CHECK_EQ(thread_mxcsr, TEST_MXCSR);
	CHECK_EQ(thread_fcw, TEST_FCW);
	return checks_done();
}
