/* Register state must survive syscalls.  Each test loads registers with
 * distinct patterns, runs NSYS raw `syscall` instructions (getpid) inside the
 * SAME asm block, so the compiler cannot spill or reload anything, then
 * stores the registers and compares:
 *
 *   - general-purpose registers: all but rax (result), rcx and r11 (clobbered
 *     by the syscall instruction itself), plus the 128-byte red zone below rsp
 *   - xmm0-15; ymm0-15 upper halves with AVX; zmm0-31 and k1-k7 with AVX-512F
 *   - x87: st0-7, the control word; MXCSR (rounding mode, FTZ, a sticky flag)
 *   - the direction flag; the status flags (CF PF AF ZF SF OF) in all 64
 *     combinations, alone and together with DF, AC, NT or ID set
 *
 * and an ordinary double/float/long double computation interleaved with
 * write() calls, printed with fixed precision.  Which register sets exist on
 * this CPU goes to stderr; stdout has only results that are the same on
 * every run. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <cpuid.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NSYS 10000

static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

static int have_avx(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	if (!(c & bit_OSXSAVE) || !(c & bit_AVX))
		return 0;
	return (xgetbv0() & 6) == 6; /* XMM and YMM state enabled by the OS */
}

static int have_avx512f(void)
{
	unsigned a, b, c, d;
	if (!have_avx() || __get_cpuid_max(0, NULL) < 7)
		return 0;
	__cpuid_count(7, 0, a, b, c, d);
	if (!(b & bit_AVX512F))
		return 0;
	return (xgetbv0() & 0xe6) == 0xe6; /* + opmask, ZMM_Hi256, Hi16_ZMM */
}

static void fill(void *p, size_t n, unsigned seed)
{
	unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		c[i] = (unsigned char)(seed * 131 + i * 29 + (i >> 4) * 7 + 1);
}

/* ---- general-purpose registers and the red zone ---------------------- */

struct gpr_block {
	uint64_t in[12];   /* rbx rdx rsi rdi rbp r8 r9 r10 r12 r13 r14 r15 */
	uint64_t out[12];
	uint64_t rz_in[16]; /* the red zone: -128(%rsp) .. -8(%rsp) */
	uint64_t rz_out[16];
	uint64_t after_syscall; /* the address right after the syscall instruction */
};

static void gpr_run(struct gpr_block *b)
{
	/* The block pointer travels in rax; everything else is saved and
	 * restored by hand (rbp and rbx included).  rsp moves down 128 first so
	 * the pushes do not land in the compiler's red zone. */
	__asm__ volatile(
		"lea -128(%%rsp), %%rsp\n\t"
		"push %%rbx\n\t"
		"push %%rbp\n\t"
		"push %%r12\n\t"
		"push %%r13\n\t"
		"push %%r14\n\t"
		"push %%r15\n\t"
		"push %%rax\n\t"	  /* 8(%rsp): the block */
		"pushq $%c[n]\n\t"	  /* (%rsp): the loop counter */
		/* our own red zone, below the counter */
		"xor %%ecx, %%ecx\n"
		"2:\n\t"
		"mov 192(%%rax,%%rcx,8), %%r11\n\t"
		"mov %%r11, -128(%%rsp,%%rcx,8)\n\t"
		"inc %%ecx\n\t"
		"cmp $16, %%ecx\n\t"
		"jne 2b\n\t"
		"mov 0(%%rax), %%rbx\n\t"
		"mov 8(%%rax), %%rdx\n\t"
		"mov 16(%%rax), %%rsi\n\t"
		"mov 24(%%rax), %%rdi\n\t"
		"mov 32(%%rax), %%rbp\n\t"
		"mov 40(%%rax), %%r8\n\t"
		"mov 48(%%rax), %%r9\n\t"
		"mov 56(%%rax), %%r10\n\t"
		"mov 64(%%rax), %%r12\n\t"
		"mov 72(%%rax), %%r13\n\t"
		"mov 80(%%rax), %%r14\n\t"
		"mov 88(%%rax), %%r15\n"
		"1:\n\t"
		"mov $%c[nr], %%eax\n\t"
		"syscall\n"
		"2:\n\t"
		"decq (%%rsp)\n\t"
		"jnz 1b\n\t"
		"mov 8(%%rsp), %%rax\n\t"
		"mov %%rbx, 96(%%rax)\n\t"
		"mov %%rdx, 104(%%rax)\n\t"
		"mov %%rsi, 112(%%rax)\n\t"
		"mov %%rdi, 120(%%rax)\n\t"
		"mov %%rbp, 128(%%rax)\n\t"
		"mov %%r8, 136(%%rax)\n\t"
		"mov %%r9, 144(%%rax)\n\t"
		"mov %%r10, 152(%%rax)\n\t"
		"mov %%r12, 160(%%rax)\n\t"
		"mov %%r13, 168(%%rax)\n\t"
		"mov %%r14, 176(%%rax)\n\t"
		"mov %%r15, 184(%%rax)\n\t"
		"lea 2b(%%rip), %%r11\n\t"
		"mov %%r11, 448(%%rax)\n\t"
		"xor %%ecx, %%ecx\n"
		"3:\n\t"
		"mov -128(%%rsp,%%rcx,8), %%r11\n\t"
		"mov %%r11, 320(%%rax,%%rcx,8)\n\t"
		"inc %%ecx\n\t"
		"cmp $16, %%ecx\n\t"
		"jne 3b\n\t"
		"add $16, %%rsp\n\t"
		"pop %%r15\n\t"
		"pop %%r14\n\t"
		"pop %%r13\n\t"
		"pop %%r12\n\t"
		"pop %%rbp\n\t"
		"pop %%rbx\n\t"
		"lea 128(%%rsp), %%rsp\n\t"
		: "+a"(b)
		: [n] "i"(NSYS), [nr] "i"(SYS_getpid)
		: "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc");
}

static void test_gpr(void)
{
	static struct gpr_block b;
	for (int i = 0; i < 12; i++)
		b.in[i] = 0x0101010101010101ULL * (uint64_t)(i + 1) ^ 0xf0e1d2c3b4a59687ULL;
	for (int i = 0; i < 16; i++)
		b.rz_in[i] = 0xdeadbeef00000000ULL | (uint64_t)(i * 0x1111);
	gpr_run(&b);
	static const char *names[12] = {"rbx", "rdx", "rsi", "rdi", "rbp", "r8",
					"r9",  "r10", "r12", "r13", "r14", "r15"};
	int ok = 1;
	for (int i = 0; i < 12; i++)
		if (b.out[i] != b.in[i]) {
			ok = 0;
			NOMU_FAIL("%s changed across syscall", names[i]);
		}
	CHECK(ok);
	/* -128(%rsp) .. -9(%rsp) survive a syscall on every entry path. The 8
	 * bytes at -8(%rsp) survive natively; on zpoline, whose rewritten
	 * syscall is a call, they hold the return address (the address right
	 * after the syscall instruction), as documented in the README. */
	CHECK(memcmp(b.rz_in, b.rz_out, 15 * sizeof b.rz_in[0]) == 0);
	CHECK(b.rz_out[15] == b.rz_in[15] || b.rz_out[15] == b.after_syscall);
	printf("general-purpose registers and red zone: %s\n", ok ? "preserved" : "CHANGED");
}

/* ---- SSE: xmm0-15 ---------------------------------------------------- */

static void test_xmm(void)
{
	static uint8_t in[16][16], out[16][16];
	fill(in, sizeof in, 1);
	memset(out, 0, sizeof out);
	__asm__ volatile(
		"movdqu 0(%[in]), %%xmm0\n\t"
		"movdqu 16(%[in]), %%xmm1\n\t"
		"movdqu 32(%[in]), %%xmm2\n\t"
		"movdqu 48(%[in]), %%xmm3\n\t"
		"movdqu 64(%[in]), %%xmm4\n\t"
		"movdqu 80(%[in]), %%xmm5\n\t"
		"movdqu 96(%[in]), %%xmm6\n\t"
		"movdqu 112(%[in]), %%xmm7\n\t"
		"movdqu 128(%[in]), %%xmm8\n\t"
		"movdqu 144(%[in]), %%xmm9\n\t"
		"movdqu 160(%[in]), %%xmm10\n\t"
		"movdqu 176(%[in]), %%xmm11\n\t"
		"movdqu 192(%[in]), %%xmm12\n\t"
		"movdqu 208(%[in]), %%xmm13\n\t"
		"movdqu 224(%[in]), %%xmm14\n\t"
		"movdqu 240(%[in]), %%xmm15\n\t"
		"mov %[n], %%edx\n"
		"1:\n\t"
		"mov %[nr], %%eax\n\t"
		"syscall\n\t"
		"dec %%edx\n\t"
		"jnz 1b\n\t"
		"movdqu %%xmm0, 0(%[out])\n\t"
		"movdqu %%xmm1, 16(%[out])\n\t"
		"movdqu %%xmm2, 32(%[out])\n\t"
		"movdqu %%xmm3, 48(%[out])\n\t"
		"movdqu %%xmm4, 64(%[out])\n\t"
		"movdqu %%xmm5, 80(%[out])\n\t"
		"movdqu %%xmm6, 96(%[out])\n\t"
		"movdqu %%xmm7, 112(%[out])\n\t"
		"movdqu %%xmm8, 128(%[out])\n\t"
		"movdqu %%xmm9, 144(%[out])\n\t"
		"movdqu %%xmm10, 160(%[out])\n\t"
		"movdqu %%xmm11, 176(%[out])\n\t"
		"movdqu %%xmm12, 192(%[out])\n\t"
		"movdqu %%xmm13, 208(%[out])\n\t"
		"movdqu %%xmm14, 224(%[out])\n\t"
		"movdqu %%xmm15, 240(%[out])\n\t"
		:
		: [in] "r"(in), [out] "r"(out), [n] "i"(NSYS), [nr] "i"(SYS_getpid)
		: "rax", "rcx", "rdx", "r11", "memory", "cc", "xmm0", "xmm1", "xmm2",
		  "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
		  "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
	int ok = memcmp(in, out, sizeof in) == 0;
	CHECK(ok);
	printf("xmm0-15: %s\n", ok ? "preserved" : "CHANGED");
}

/* ---- AVX: ymm0-15 (upper halves) ------------------------------------- */

__attribute__((target("avx"))) static int test_ymm(void)
{
	static uint8_t in[16][32], out[16][32];
	fill(in, sizeof in, 2);
	memset(out, 0, sizeof out);
	__asm__ volatile(
		"vmovdqu 0(%[in]), %%ymm0\n\t"
		"vmovdqu 32(%[in]), %%ymm1\n\t"
		"vmovdqu 64(%[in]), %%ymm2\n\t"
		"vmovdqu 96(%[in]), %%ymm3\n\t"
		"vmovdqu 128(%[in]), %%ymm4\n\t"
		"vmovdqu 160(%[in]), %%ymm5\n\t"
		"vmovdqu 192(%[in]), %%ymm6\n\t"
		"vmovdqu 224(%[in]), %%ymm7\n\t"
		"vmovdqu 256(%[in]), %%ymm8\n\t"
		"vmovdqu 288(%[in]), %%ymm9\n\t"
		"vmovdqu 320(%[in]), %%ymm10\n\t"
		"vmovdqu 352(%[in]), %%ymm11\n\t"
		"vmovdqu 384(%[in]), %%ymm12\n\t"
		"vmovdqu 416(%[in]), %%ymm13\n\t"
		"vmovdqu 448(%[in]), %%ymm14\n\t"
		"vmovdqu 480(%[in]), %%ymm15\n\t"
		"mov %[n], %%edx\n"
		"1:\n\t"
		"mov %[nr], %%eax\n\t"
		"syscall\n\t"
		"dec %%edx\n\t"
		"jnz 1b\n\t"
		"vmovdqu %%ymm0, 0(%[out])\n\t"
		"vmovdqu %%ymm1, 32(%[out])\n\t"
		"vmovdqu %%ymm2, 64(%[out])\n\t"
		"vmovdqu %%ymm3, 96(%[out])\n\t"
		"vmovdqu %%ymm4, 128(%[out])\n\t"
		"vmovdqu %%ymm5, 160(%[out])\n\t"
		"vmovdqu %%ymm6, 192(%[out])\n\t"
		"vmovdqu %%ymm7, 224(%[out])\n\t"
		"vmovdqu %%ymm8, 256(%[out])\n\t"
		"vmovdqu %%ymm9, 288(%[out])\n\t"
		"vmovdqu %%ymm10, 320(%[out])\n\t"
		"vmovdqu %%ymm11, 352(%[out])\n\t"
		"vmovdqu %%ymm12, 384(%[out])\n\t"
		"vmovdqu %%ymm13, 416(%[out])\n\t"
		"vmovdqu %%ymm14, 448(%[out])\n\t"
		"vmovdqu %%ymm15, 480(%[out])\n\t"
		"vzeroupper\n\t"
		:
		: [in] "r"(in), [out] "r"(out), [n] "i"(NSYS), [nr] "i"(SYS_getpid)
		: "rax", "rcx", "rdx", "r11", "memory", "cc", "xmm0", "xmm1", "xmm2",
		  "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
		  "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
	return memcmp(in, out, sizeof in) == 0;
}

/* ---- AVX-512: zmm0-31 and k1-k7 -------------------------------------- */

#define ZLOAD(i) "vmovdqu64 " #i "*64(%[in]), %%zmm" #i "\n\t"
#define ZSTORE(i) "vmovdqu64 %%zmm" #i ", " #i "*64(%[out])\n\t"
#define KLOAD(i) "kmovw 2048+" #i "*2(%[in]), %%k" #i "\n\t"
#define KSTORE(i) "kmovw %%k" #i ", 2048+" #i "*2(%[out])\n\t"

__attribute__((target("avx512f"))) static int test_zmm(void)
{
	/* 32 zmm registers of 64 bytes, then k0..k7 as 16-bit words */
	static uint8_t in[2048 + 16] __attribute__((aligned(64)));
	static uint8_t out[2048 + 16] __attribute__((aligned(64)));
	fill(in, sizeof in, 3);
	memset(out, 0, sizeof out);
	__asm__ volatile(
		ZLOAD(0) ZLOAD(1) ZLOAD(2) ZLOAD(3) ZLOAD(4) ZLOAD(5) ZLOAD(6) ZLOAD(7)
		ZLOAD(8) ZLOAD(9) ZLOAD(10) ZLOAD(11) ZLOAD(12) ZLOAD(13) ZLOAD(14)
		ZLOAD(15) ZLOAD(16) ZLOAD(17) ZLOAD(18) ZLOAD(19) ZLOAD(20) ZLOAD(21)
		ZLOAD(22) ZLOAD(23) ZLOAD(24) ZLOAD(25) ZLOAD(26) ZLOAD(27) ZLOAD(28)
		ZLOAD(29) ZLOAD(30) ZLOAD(31)
		KLOAD(1) KLOAD(2) KLOAD(3) KLOAD(4) KLOAD(5) KLOAD(6) KLOAD(7)
		"mov %[n], %%edx\n"
		"1:\n\t"
		"mov %[nr], %%eax\n\t"
		"syscall\n\t"
		"dec %%edx\n\t"
		"jnz 1b\n\t"
		ZSTORE(0) ZSTORE(1) ZSTORE(2) ZSTORE(3) ZSTORE(4) ZSTORE(5) ZSTORE(6)
		ZSTORE(7) ZSTORE(8) ZSTORE(9) ZSTORE(10) ZSTORE(11) ZSTORE(12)
		ZSTORE(13) ZSTORE(14) ZSTORE(15) ZSTORE(16) ZSTORE(17) ZSTORE(18)
		ZSTORE(19) ZSTORE(20) ZSTORE(21) ZSTORE(22) ZSTORE(23) ZSTORE(24)
		ZSTORE(25) ZSTORE(26) ZSTORE(27) ZSTORE(28) ZSTORE(29) ZSTORE(30)
		ZSTORE(31)
		KSTORE(1) KSTORE(2) KSTORE(3) KSTORE(4) KSTORE(5) KSTORE(6) KSTORE(7)
		"vzeroupper\n\t"
		:
		: [in] "r"(in), [out] "r"(out), [n] "i"(NSYS), [nr] "i"(SYS_getpid)
		: "rax", "rcx", "rdx", "r11", "memory", "cc", "xmm0", "xmm1", "xmm2",
		  "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
		  "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17",
		  "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",
		  "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1",
		  "k2", "k3", "k4", "k5", "k6", "k7");
	/* k0 was not loaded: compare zmm0-31 and k1-k7 */
	return memcmp(in, out, 2048) == 0 && memcmp(in + 2050, out + 2050, 14) == 0;
}

/* ---- x87 stack and control word, MXCSR -------------------------------- */

static void test_x87_mxcsr(void)
{
	static const double vals[8] = {1.5, -2.25, 3.125, 1e300, -1e-300, 0.1, 12345.678, -0.0};
	double got[8];
	uint16_t cw_new = 0x0e7f, cw_old, cw_got; /* double precision, round toward zero */
	uint32_t mx_new = 0xffa0, mx_old, mx_got; /* RZ, FTZ, all masked, PE sticky */
	__asm__ volatile(
		"fnstcw %[cwold]\n\t"
		"stmxcsr %[mxold]\n\t"
		"fldcw %[cwnew]\n\t"
		"ldmxcsr %[mxnew]\n\t"
		"fldl 0(%[v])\n\t"
		"fldl 8(%[v])\n\t"
		"fldl 16(%[v])\n\t"
		"fldl 24(%[v])\n\t"
		"fldl 32(%[v])\n\t"
		"fldl 40(%[v])\n\t"
		"fldl 48(%[v])\n\t"
		"fldl 56(%[v])\n\t"
		"mov %[n], %%edx\n"
		"1:\n\t"
		"mov %[nr], %%eax\n\t"
		"syscall\n\t"
		"dec %%edx\n\t"
		"jnz 1b\n\t"
		"fnstcw %[cwgot]\n\t"
		"stmxcsr %[mxgot]\n\t"
		"fstpl 56(%[g])\n\t"
		"fstpl 48(%[g])\n\t"
		"fstpl 40(%[g])\n\t"
		"fstpl 32(%[g])\n\t"
		"fstpl 24(%[g])\n\t"
		"fstpl 16(%[g])\n\t"
		"fstpl 8(%[g])\n\t"
		"fstpl 0(%[g])\n\t"
		"fldcw %[cwold]\n\t"
		"ldmxcsr %[mxold]\n\t"
		: [cwold] "=m"(cw_old), [mxold] "=m"(mx_old), [cwgot] "=m"(cw_got),
		  [mxgot] "=m"(mx_got)
		: [cwnew] "m"(cw_new), [mxnew] "m"(mx_new), [v] "r"(vals), [g] "r"(got),
		  [n] "i"(NSYS), [nr] "i"(SYS_getpid)
		: "rax", "rcx", "rdx", "r11", "memory", "cc", "st", "st(1)", "st(2)",
		  "st(3)", "st(4)", "st(5)", "st(6)", "st(7)");
	int st_ok = memcmp(vals, got, sizeof vals) == 0;
	CHECK(st_ok);
	CHECK_EQ(cw_got, cw_new);
	CHECK_EQ(mx_got, mx_new);
	CHECK_EQ(cw_old, 0x037f); /* the Linux defaults at process start */
	CHECK_EQ(mx_old & ~0x3fU, 0x1f80);
	printf("x87 stack: %s\n", st_ok ? "preserved" : "CHANGED");
	printf("x87 control word: %s\n", cw_got == cw_new ? "preserved" : "CHANGED");
	printf("mxcsr: %s\n", mx_got == mx_new ? "preserved" : "CHANGED");
}

/* ---- direction flag --------------------------------------------------- */

static void test_df(void)
{
	uint64_t flags;
	__asm__ volatile(
		"lea -128(%%rsp), %%rsp\n\t"
		"std\n\t"
		"mov %[n], %%edx\n"
		"1:\n\t"
		"mov %[nr], %%eax\n\t"
		"syscall\n\t"
		"dec %%edx\n\t"
		"jnz 1b\n\t"
		"pushfq\n\t"
		"popq %[f]\n\t"
		"cld\n\t"
		"lea 128(%%rsp), %%rsp\n\t"
		: [f] "=&r"(flags)
		: [n] "i"(NSYS), [nr] "i"(SYS_getpid)
		: "rax", "rcx", "rdx", "r11", "memory", "cc");
	int df = (flags >> 10) & 1;
	CHECK_EQ(df, 1);
	printf("direction flag: %s\n", df ? "preserved" : "CHANGED");
}

/* ---- status flags ------------------------------------------------------ */

#define STATUS_FLAGS 0x8d5UL /* CF PF AF ZF SF OF */

/* Sets RFLAGS to `in`, runs a few syscalls, returns RFLAGS. */
static uint64_t flags_across_syscalls(uint64_t in)
{
	uint64_t out;
	__asm__ volatile(
		"lea -128(%%rsp), %%rsp\n\t"
		"mov $4, %%edx\n"
		"1:\n\t"
		"push %[in]\n\t"
		"popfq\n\t"
		"mov %[nr], %%eax\n\t"
		"syscall\n\t"
		"pushfq\n\t"
		"pop %[out]\n\t"
		"dec %%edx\n\t"
		"jnz 1b\n\t"
		"push %[clean]\n\t"
		"popfq\n\t"
		"lea 128(%%rsp), %%rsp\n\t"
		: [out] "=&r"(out)
		: [in] "r"(in), [nr] "i"(SYS_getpid), [clean] "r"(0x202UL)
		: "rax", "rcx", "rdx", "r11", "memory", "cc");
	return out;
}

static void test_status_flags(void)
{
	/* DF, AC (no alignment fault in the loop: nothing misaligned), NT, ID */
	static const uint64_t extra[] = {0, 0x400, 0x40000, 0x4000, 0x200000};
	int bad = 0;
	for (unsigned e = 0; e < sizeof extra / sizeof extra[0]; e++)
		for (unsigned combo = 0; combo < 64; combo++) {
			uint64_t in = 0x202 | extra[e];
			static const uint64_t bits[6] = {0x1, 0x4, 0x10, 0x40, 0x80, 0x800};
			for (int b = 0; b < 6; b++)
				if (combo & (1u << b))
					in |= bits[b];
			uint64_t out = flags_across_syscalls(in);
			uint64_t mask = STATUS_FLAGS | 0x244400;
			if ((out & mask) != (in & mask)) {
				bad++;
				NOMU_FAIL("rflags %#lx came back as %#lx", (unsigned long)in,
					  (unsigned long)out);
			}
		}
	CHECK_EQ(bad, 0);
	printf("status flags: %s\n", bad ? "CHANGED" : "preserved");
}

/* ---- an ordinary computation, interleaved with syscalls -------------- */

static void compute(void)
{
	int devnull = open("/dev/null", O_WRONLY);
	CHECK(devnull >= 0);
	double pi = 0, e = 1, term = 1;
	float harmonic = 0;
	long double basel = 0;
	int writes_ok = 1;
	for (int k = 0; k < 5000; k++) {
		pi += (k & 1 ? -4.0 : 4.0) / (2.0 * k + 1.0);
		if (k > 0 && k < 30) {
			term /= k;
			e += term;
		}
		harmonic += 1.0f / (float)(k + 1);
		basel += 1.0L / ((long double)(k + 1) * (k + 1));
		if (write(devnull, &pi, sizeof pi) != sizeof pi)
			writes_ok = 0;
	}
	CHECK(writes_ok);
	close(devnull);
	printf("pi ~ %.12f\n", pi);
	printf("e ~ %.12f\n", e);
	printf("harmonic(5000) ~ %.6f\n", (double)harmonic);
	printf("basel(5000) ~ %.15Lf\n", basel);
}

/* ---- a signal handler starts with the initial vector state ------------ */
/* Linux enters a handler with the FPU in its initial state and gives the
 * interrupted code its own back at sigreturn: ymm1's upper half (and zmm17,
 * k1 with AVX-512) are zero in the handler and as they were afterwards. */
static volatile uint64_t in_handler[9];

__attribute__((target("avx"))) static void read_ymm1_upper(int sig)
{
	(void)sig;
	__asm__ volatile("vextractf128 $1, %%ymm1, %0" : "=m"(*(uint64_t(*)[2])in_handler));
}

__attribute__((target("avx512f"))) static void read_zmm17_k1(int sig)
{
	(void)sig;
	__asm__ volatile("vmovdqu64 %%zmm17, %0\n\t"
			 "kmovw %%k1, %%eax\n\t"
			 "mov %%rax, %1"
			 : "=m"(*(uint64_t(*)[8])in_handler), "=m"(in_handler[8])
			 :
			 : "rax");
}

/* kill(getpid(), SIGUSR1) from inside the asm: the handler runs on the way
 * back from it, with the registers below loaded. */
#define RAISE_USR1 "mov %[nr], %%eax\n\tmov %[pid], %%edi\n\tmov %[sig], %%esi\n\tsyscall\n\t"

/* With x87 and SSE alone in use (no AVX state yet in this process), the
 * handler still starts with MXCSR and the x87 control word at their
 * defaults and xmm1 zero (on sysemu nomu resets the legacy area alone
 * then). */
static volatile uint32_t handler_mxcsr;
static volatile uint16_t handler_fcw;

static void read_legacy_state(int sig)
{
	(void)sig;
	__asm__ volatile("stmxcsr %0\n\t"
			 "fnstcw %1\n\t"
			 "movdqu %%xmm1, %2"
			 : "=m"(handler_mxcsr), "=m"(handler_fcw), "=m"(*(uint64_t(*)[2])in_handler));
}

static int handler_starts_clean_sse(void)
{
	uint64_t ones[2] = { ~0ull, ~0ull }, after[2];
	uint32_t mx_new = 0xff80, mx_old, mx_after; /* round toward zero, flush to zero */
	uint16_t cw_new = 0x0e7f, cw_old, cw_after; /* round toward zero, 53-bit precision */
	signal(SIGUSR1, read_legacy_state);
	memset((void *)in_handler, 0x5a, sizeof(in_handler));
	__asm__ volatile("stmxcsr %[mxold]\n\t"
			 "fnstcw %[cwold]\n\t"
			 "ldmxcsr %[mxnew]\n\t"
			 "fldcw %[cwnew]\n\t"
			 "movdqu %[in], %%xmm1\n\t" RAISE_USR1
			 "movdqu %%xmm1, %[out]\n\t"
			 "stmxcsr %[mxafter]\n\t"
			 "fnstcw %[cwafter]\n\t"
			 "ldmxcsr %[mxold]\n\t"
			 "fldcw %[cwold]"
			 : [out] "=m"(after), [mxold] "=m"(mx_old), [cwold] "=m"(cw_old), [mxafter] "=m"(mx_after),
			   [cwafter] "=m"(cw_after)
			 : [in] "m"(ones), [mxnew] "m"(mx_new), [cwnew] "m"(cw_new), [nr] "i"(SYS_kill),
			   [pid] "r"(getpid()), [sig] "i"(SIGUSR1)
			 : "rax", "rdi", "rsi", "rcx", "r11", "xmm1", "memory");
	signal(SIGUSR1, SIG_DFL);
	return handler_mxcsr == 0x1f80 && handler_fcw == 0x037f && in_handler[0] == 0 && in_handler[1] == 0 &&
	       !memcmp(after, ones, sizeof(ones)) && mx_after == mx_new && cw_after == cw_new;
}

__attribute__((target("avx"))) static int handler_starts_clean_avx(void)
{
	uint64_t ones[4] = { ~0ull, ~0ull, ~0ull, ~0ull }, after[4];
	signal(SIGUSR1, read_ymm1_upper);
	memset((void *)in_handler, 0x5a, sizeof(in_handler));
	__asm__ volatile("vmovdqu %[in], %%ymm1\n\t" RAISE_USR1 "vmovdqu %%ymm1, %[out]"
			 : [out] "=m"(after)
			 : [in] "m"(ones), [nr] "i"(SYS_kill), [pid] "r"(getpid()), [sig] "i"(SIGUSR1)
			 : "rax", "rdi", "rsi", "rcx", "r11", "xmm1", "memory");
	signal(SIGUSR1, SIG_DFL);
	return in_handler[0] == 0 && in_handler[1] == 0 && !memcmp(after, ones, sizeof(ones));
}

__attribute__((target("avx512f"))) static int handler_starts_clean_avx512(void)
{
	uint64_t ones[8], after[8], k_after = 0;
	memset(ones, 0xff, sizeof(ones));
	signal(SIGUSR1, read_zmm17_k1);
	memset((void *)in_handler, 0x5a, sizeof(in_handler));
	__asm__ volatile("vmovdqu64 %[in], %%zmm17\n\t"
			 "mov $0xbeef, %%eax\n\t"
			 "kmovw %%eax, %%k1\n\t" RAISE_USR1
			 "vmovdqu64 %%zmm17, %[out]\n\t"
			 "kmovw %%k1, %%eax\n\t"
			 "mov %%rax, %[k]"
			 : [out] "=m"(after), [k] "=m"(k_after)
			 : [in] "m"(ones), [nr] "i"(SYS_kill), [pid] "r"(getpid()), [sig] "i"(SIGUSR1)
			 : "rax", "rdi", "rsi", "rcx", "r11", "xmm17", "k1", "memory");
	signal(SIGUSR1, SIG_DFL);
	int clean = 1;
	for (int i = 0; i < 9; i++)
		clean &= in_handler[i] == 0;
	return clean && !memcmp(after, ones, sizeof(ones)) && k_after == 0xbeef;
}

int main(void)
{
	/* First: in a static build every syscall site so far ran once, so
	 * the second syscall here is the first one a zpoline thread returns
	 * from through its stub (regression: that return put back the initial
	 * vector state). */
	test_xmm();
	test_gpr();
	/* Before any AVX use, so that x87 and SSE are all the state in use. */
	int legacy_clean = handler_starts_clean_sse();
	CHECK(legacy_clean);
	printf("signal handlers start with the default MXCSR, x87 control word and zero xmm: %s\n",
	       legacy_clean ? "yes" : "NO");
	int avx = have_avx(), avx512 = have_avx512f();
	fprintf(stderr, "fpu: AVX %s, AVX-512F %s\n", avx ? "present" : "absent",
		avx512 ? "present" : "absent");
	int ok = 1;
	if (avx) {
		int y = test_ymm();
		CHECK(y);
		ok &= y;
	}
	if (avx512) {
		int z = test_zmm();
		CHECK(z);
		ok &= z;
	}
	printf("wide vector registers (where present): %s\n", ok ? "preserved" : "CHANGED");
	int clean = 1;
	if (avx) {
		int y = handler_starts_clean_avx();
		CHECK(y);
		clean &= y;
	}
	if (avx512) {
		int z = handler_starts_clean_avx512();
		CHECK(z);
		clean &= z;
	}
	printf("signal handlers start with the initial vector state, which comes back after: %s\n",
	       clean ? "yes" : "NO");
	test_x87_mxcsr();
	test_df();
	test_status_flags();
	compute();
	return checks_done();
}
