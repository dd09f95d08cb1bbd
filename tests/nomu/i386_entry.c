/* The i386 syscall instructions from 64-bit code. nomu has no i386 ABI:
 * `int $0x80` is what Linux with IA32 emulation off makes it, a SIGSEGV
 * (si_code SI_KERNEL, address 0) on the instruction (regression: nomu ran
 * it as a 64-bit syscall); `sysenter` faults as the CPU makes it: SIGILL on
 * AMD, where it is undefined in 64-bit mode; on Intel it enters the host's
 * i386 path, which keeps neither rip nor rsp (the stack is rbp, natively the
 * handler can run only on an alternate stack), and nomu makes it the same
 * SIGSEGV. Neither runs as a syscall (regression: on Intel, a `sysenter`'s
 * i386 mkdir ran on the host, past the seccomp filter, whose range check saw
 * the host's landing pad outside guest memory), and neither harms nomu: a
 * guest started after them runs normally (regression: after a sysenter on
 * the split and sysemu paths every later guest died). Under nomu only: the
 * host, with IA32 emulation, runs both as i386 syscalls. */
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
extern char int80_at[];

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

/* Below 4 GiB (guest memory is), where the i386 ABI's ebx reaches it. */
static char made_by_i386[64];

static int once(void)
{
	static char altstack[1 << 16];
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigaltstack(&ss, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGILL, &sa, NULL);
	snprintf(made_by_i386, sizeof made_by_i386, "/tmp/nomu-i386-%d", (int)getpid());
	if (!sigsetjmp(back, 1)) {
		long r = 39; /* i386 mkdir(ebx, ecx) */
		__asm__ volatile(".globl int80_at\nint80_at: int $0x80"
				 : "+a"(r)
				 : "b"(made_by_i386), "c"(0755)
				 : "memory");
		printf("int $0x80 returned %ld\n", r);
		return 1;
	}
	if (got_sig != SIGSEGV || got_code != 0x80 || got_addr != 0 || got_rip != (uintptr_t)int80_at) {
		printf("int $0x80: signal %d code %d addr %#lx rip %s\n", got_sig, got_code,
		       (unsigned long)got_addr, got_rip == (uintptr_t)int80_at ? "at it" : "elsewhere");
		return 1;
	}
	if (!sigsetjmp(back, 1)) {
		long r = 39;
		/* The host's sysenter entry reads a 6th argument at (u32)rbp and
		 * refuses the call when it cannot (a plain fault, as natively):
		 * point rbp at readable memory so the call is really made. */
		__asm__ volatile("sub $128, %%rsp\n\t" /* the red zone */
				 "push %%rbp\n\t"
				 "mov %[ebp], %%rbp\n\t"
				 "sysenter\n\t"
				 "pop %%rbp\n\t"
				 "add $128, %%rsp"
				 : "+a"(r)
				 : "b"(made_by_i386), "c"(0755), [ebp] "r"(altstack)
				 : "memory", "rdx", "r11");
		printf("sysenter returned %ld\n", r);
		return 1;
	}
	if (got_sig != SIGILL && !(got_sig == SIGSEGV && got_code == 0x80 && got_addr == 0)) {
		printf("sysenter: signal %d code %d\n", got_sig, got_code);
		return 1;
	}
	if (access(made_by_i386, F_OK) == 0) {
		printf("an i386 mkdir ran on the host\n");
		rmdir(made_by_i386);
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
