/* A read through NULL faults: SIGSEGV with si_addr the address read and
 * SEGV_MAPERR, which a handler may catch and recover from. Runtimes build
 * on it: the JVM's implicit null checks and Go's nil checks are loads at a
 * small offset from a null pointer, expected to fault (under zpoline's
 * default, whose page 0 is readable, Go printed a garbage value and the JVM
 * crashed in its compiled code). Reads at offsets across page 0, a byte, a
 * word and a 16-byte load, then a write and an instruction fetch there. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

static sigjmp_buf back;
static volatile uintptr_t fault_addr;
static volatile int fault_code;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	fault_addr = (uintptr_t)si->si_addr;
	fault_code = si->si_code;
	siglongjmp(back, 1);
}

/* 0: no fault; 1: SIGSEGV at `at` with SEGV_MAPERR; -1: another fault. */
static int faults_at(void (*access)(uintptr_t), uintptr_t at)
{
	fault_addr = 0;
	fault_code = 0;
	if (sigsetjmp(back, 1) == 0) {
		access(at);
		return 0;
	}
	if (fault_addr != at || fault_code != SEGV_MAPERR) {
		printf("fault at %#lx: si_addr %#lx, si_code %d\n", (unsigned long)at, (unsigned long)fault_addr,
		       fault_code);
		return -1;
	}
	return 1;
}

static void read_byte(uintptr_t at)
{
	(void)*(volatile uint8_t *)at;
}

static void read_word(uintptr_t at)
{
	(void)*(volatile uint64_t *)at;
}

static void read_16(uintptr_t at)
{
	__asm__ volatile("movdqu (%0), %%xmm0" ::"r"(at) : "xmm0", "memory");
}

static void write_word(uintptr_t at)
{
	*(volatile uint64_t *)at = 42;
}

static void call_at(uintptr_t at)
{
	((void (*)(void))at)();
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	CHECK_OK(sigaction(SIGSEGV, &sa, NULL));

	uintptr_t offsets[] = {0, 1, 8, 0x10, 0x27, 0x100, 0x800, 0xff8};
	for (size_t i = 0; i < sizeof offsets / sizeof *offsets; i++) {
		uintptr_t at = offsets[i];
		printf("NULL + %#lx: read byte %d, read word %d, read 16 bytes %d, write %d\n", (unsigned long)at,
		       faults_at(read_byte, at), faults_at(read_word, at), faults_at(read_16, at),
		       faults_at(write_word, at));
		CHECK_EQ(faults_at(read_byte, at), 1);
		CHECK_EQ(faults_at(read_word, at), 1);
		CHECK_EQ(faults_at(read_16, at), 1);
		CHECK_EQ(faults_at(write_word, at), 1);
	}
	/* A call through NULL: the fetch faults at address 0. */
	CHECK_EQ(faults_at(call_at, 0), 1);
	return nomu_checks_done("null_reads");
}
