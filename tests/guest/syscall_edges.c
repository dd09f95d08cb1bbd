/* The edges of the syscall instruction itself, which every entry path must
 * keep as Linux has them: numbers no syscall has (small, huge, with high
 * bits set, in the kernel half, non-canonical) fail with ENOSYS and leave
 * every other register alone, from one call site used again and again
 * (zpoline rewrites a site on its first use: later uses take its
 * trampoline); and a call through a NULL function pointer is a SIGSEGV at
 * address 0 with the registers of the call, not a syscall. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <setjmp.h>
#include <sys/mman.h>
#include <unistd.h>
#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

/* One syscall site for every number: noinline keeps it one. Returns rax;
 * *kept says whether rbx, rdx, rsi, rdi, r8-r10 and r12-r15 came back. */
static __attribute__((noinline)) long site(long nr, int *kept)
{
	long ret;
	uint64_t out[12];
	__asm__ volatile("push %%rbx\n\t"
			 "push %%r12\n\t"
			 "push %%r13\n\t"
			 "push %%r14\n\t"
			 "push %%r15\n\t"
			 "push %%rbp\n\t"
			 "push %[out]\n\t"
			 "mov $0x1111, %%rbx\n\t"
			 "mov $0x2222, %%rdx\n\t"
			 "mov $0x3333, %%rsi\n\t"
			 "mov $0x4444, %%rdi\n\t"
			 "mov $0x5555, %%r8\n\t"
			 "mov $0x6666, %%r9\n\t"
			 "mov $0x7777, %%r10\n\t"
			 "mov $0x8888, %%r12\n\t"
			 "mov $0x9999, %%r13\n\t"
			 "mov $0xaaaa, %%r14\n\t"
			 "mov $0xbbbb, %%r15\n\t"
			 "mov $0xcccc, %%rbp\n\t"
			 "syscall\n\t"
			 "xchg %%rax, (%%rsp)\n\t" /* rax <-> out pointer */
			 "mov %%rbx, 0(%%rax)\n\t"
			 "mov %%rdx, 8(%%rax)\n\t"
			 "mov %%rsi, 16(%%rax)\n\t"
			 "mov %%rdi, 24(%%rax)\n\t"
			 "mov %%r8, 32(%%rax)\n\t"
			 "mov %%r9, 40(%%rax)\n\t"
			 "mov %%r10, 48(%%rax)\n\t"
			 "mov %%r12, 56(%%rax)\n\t"
			 "mov %%r13, 64(%%rax)\n\t"
			 "mov %%r14, 72(%%rax)\n\t"
			 "mov %%r15, 80(%%rax)\n\t"
			 "mov %%rbp, 88(%%rax)\n\t"
			 "pop %%rax\n\t"
			 "pop %%rbp\n\t"
			 "pop %%r15\n\t"
			 "pop %%r14\n\t"
			 "pop %%r13\n\t"
			 "pop %%r12\n\t"
			 "pop %%rbx\n\t"
			 : "=a"(ret)
			 : "a"(nr), [out] "r"(out)
			 : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc");
	static const uint64_t want[12] = {0x1111, 0x2222, 0x3333, 0x4444, 0x5555, 0x6666,
					  0x7777, 0x8888, 0x9999, 0xaaaa, 0xbbbb, 0xcccc};
	*kept = memcmp(out, want, sizeof want) == 0;
	return ret;
}

static sigjmp_buf jump;
static volatile uintptr_t fault_addr, fault_rip;
static volatile int fault_code;

static void on_segv(int sig, siginfo_t *si, void *ucp)
{
	ucontext_t *uc = ucp;
	fault_addr = (uintptr_t)si->si_addr;
	fault_code = si->si_code;
	fault_rip = uc->uc_mcontext.gregs[REG_RIP];
	siglongjmp(jump, 1);
}

int main(void)
{
	/* Numbers the kernel has no syscall for. Linux reads the number as an
	 * int, so each of these is ENOSYS there whatever its high bits. */
	static const long numbers[] = {
		512, 576, 577, 600, 1000, 4095, 4096, 0x160e0e, 0x100000,
		0x100000200L, -1L, (long)0x8000000000000200UL, 0x7fffffff,
	};
	for (int round = 0; round < 2; round++)
		for (unsigned i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
			int kept = 0;
			long r = site(numbers[i], &kept);
			if (r != -ENOSYS || !kept)
				NOMU_FAIL("number %#lx: returned %ld, registers %s", numbers[i], r,
					  kept ? "kept" : "changed");
			nomu_checks++;
		}
	/* A real syscall through the same site still works. */
	int kept = 0;
	CHECK_EQ(site(39 /* getpid */, &kept), getpid());
	CHECK(kept);
	/* The upper half of rax is ignored: this is getpid (regression: nomu
	 * read all 64 bits and answered ENOSYS). 4 GiB lies above the default
	 * guest memory, so zpoline's call faults and becomes the syscall. */
	kept = 0;
	CHECK_EQ(site(0x100000000L | 39, &kept), getpid());
	CHECK(kept);
	printf("numbers without a syscall: ENOSYS, registers kept\n");

	struct sigaction sa = {0};
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	CHECK_OK(sigaction(SIGSEGV, &sa, NULL));
	for (int i = 0; i < 2; i++) {
		void (*volatile null_fn)(void) = 0;
		if (!sigsetjmp(jump, 1)) {
			null_fn();
			NOMU_FAIL("%s", "calling NULL returned");
		}
		CHECK_EQ(fault_addr, 0);
		CHECK_EQ(fault_rip, 0);
		CHECK_EQ(fault_code, SEGV_MAPERR);
	}
	printf("a call through NULL: SIGSEGV at address 0\n");

	/* A jump to NULL with a stack pointer at an unmapped page (as after a
	 * garbage rt_sigreturn): the guest's SIGSEGV, on its alternate stack
	 * (regression: zpoline's stub faulted popping the return address
	 * and nomu died). */
	static char alt[64 * 1024];
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
	CHECK_OK(sigaltstack(&ss, NULL));
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	CHECK_OK(sigaction(SIGSEGV, &sa, NULL));
	for (volatile int i = 0; i < 2; i++) {
		if (!sigsetjmp(jump, 1)) {
			__asm__ volatile("mov $0x1000, %%rsp\n\t"
					 "xor %%eax, %%eax\n\t"
					 "jmp *%%rax" ::: "memory");
		}
		CHECK_EQ(fault_addr, 0);
		CHECK_EQ(fault_rip, 0);
		CHECK_EQ(fault_code, SEGV_MAPERR);
	}
	printf("a jump to NULL with no usable stack: SIGSEGV at address 0\n");

	/* New code where freed code was: a `call *%rax` at the address of a
	 * syscall instruction that ran there before is a call, not a syscall
	 * (regression: zpoline kept its notes of rewritten sites in memory
	 * freed and reused). */
	const int prot = PROT_READ | PROT_WRITE | PROT_EXEC, flags = MAP_PRIVATE | MAP_ANONYMOUS;
	unsigned char *code = mmap(NULL, 4096, prot, flags, -1, 0);
	CHECK(code != MAP_FAILED);
	static const unsigned char syscall_fn[] = { 0x48, 0x89, 0xf8, 0x0f, 0x05, 0xc3 }; /* mov %rdi,%rax; syscall; ret */
	static const unsigned char call_fn[] = { 0x48, 0x89, 0xf8, 0xff, 0xd0, 0xc3 };    /* mov %rdi,%rax; call *%rax; ret */
	memcpy(code + 64, syscall_fn, sizeof syscall_fn);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(((long (*)(long))(code + 64))(39 /* getpid */), getpid());
	CHECK_OK(munmap(code, 4096));
	CHECK(mmap(code, 4096, prot, flags | MAP_FIXED, -1, 0) == code);
	memcpy(code + 64, call_fn, sizeof call_fn);
	if (!sigsetjmp(jump, 1)) {
		((long (*)(long))(code + 64))(0x10);
		NOMU_FAIL("%s", "a call to 0x10 returned");
	}
	CHECK_EQ(fault_code, SEGV_MAPERR);
	printf("a call where a syscall was in freed memory: SIGSEGV\n");
	return checks_done();
}
