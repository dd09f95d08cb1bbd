/* The i386 syscall instructions from 64-bit code. nomu has no i386 ABI:
 * `int $0x80` is what Linux with IA32 emulation off makes it, a SIGSEGV
 * (si_code SI_KERNEL, address 0) on the instruction (regression: nomu ran
 * it as a 64-bit syscall); `sysenter` faults as the CPU makes it (SIGILL
 * on AMD; SIGSEGV on Intel). Neither harms nomu: a guest started after them
 * runs normally (regression: after a sysenter on the split and sysemu
 * paths every later guest died). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

extern char **environ;
extern char int80_at[], sysenter_at[];

static sigjmp_buf back;
static volatile int got_sig, got_code;
static volatile uintptr_t got_addr, got_rip;

static void on_fault(int sig, siginfo_t *si, void *ucp)
{
	ucontext_t *uc = ucp;
	got_sig = sig;
	got_code = si->si_code;
	got_addr = (uintptr_t)si->si_addr;
	got_rip = uc->uc_mcontext.gregs[REG_RIP];
	siglongjmp(back, 1);
}

static int once(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGILL, &sa, NULL);
	if (!sigsetjmp(back, 1)) {
		long r = 20; /* i386 getpid */
		__asm__ volatile(".globl int80_at\nint80_at: int $0x80" : "+a"(r)::"memory");
		printf("int $0x80 returned %ld\n", r);
		return 1;
	}
	if (got_sig != SIGSEGV || got_code != 0x80 || got_addr != 0 || got_rip != (uintptr_t)int80_at) {
		printf("int $0x80: signal %d code %d addr %#lx rip %s\n", got_sig, got_code,
		       (unsigned long)got_addr, got_rip == (uintptr_t)int80_at ? "at it" : "elsewhere");
		return 1;
	}
	if (!sigsetjmp(back, 1)) {
		long r = 20;
		__asm__ volatile(".globl sysenter_at\nsysenter_at: sysenter" : "+a"(r)::"memory", "rcx", "r11");
		printf("sysenter returned %ld\n", r);
		return 1;
	}
	if (got_sig != SIGILL && got_sig != SIGSEGV) {
		printf("sysenter: signal %d\n", got_sig);
		return 1;
	}
	return getpid() > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return once();
	for (int i = 0; i < 3; i++) {
		pid_t p;
		char *args[] = {argv[0], "once", NULL};
		int st;
		if (posix_spawn(&p, argv[0], NULL, NULL, args, environ) || waitpid(p, &st, 0) != p ||
		    !WIFEXITED(st) || WEXITSTATUS(st)) {
			printf("guest %d failed\n", i);
			return 1;
		}
	}
	printf("three guests faulted on the i386 entries and exited cleanly\n");
	return 0;
}
