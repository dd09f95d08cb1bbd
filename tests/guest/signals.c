/* Signal delivery: handlers with siginfo and ucontext (read and edited),
 * masks, sigaltstack, SA_NODEFER/SA_RESETHAND, faults to handlers, FPU
 * state across handlers, signals between processes, SIGCHLD. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

extern char **environ;
static volatile int hits, last_sig, last_code, last_pid, mask_had_usr2, mask_had_self;
static volatile uintptr_t last_addr, handler_sp;
static sigjmp_buf jump;

static void on_info(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	sigset_t now;
	hits++;
	last_sig = sig;
	last_code = si->si_code;
	last_pid = si->si_pid;
	mask_had_usr2 = sigismember(&uc->uc_sigmask, SIGUSR2);
	sigprocmask(SIG_BLOCK, NULL, &now);
	mask_had_self = sigismember(&now, sig);
	handler_sp = (uintptr_t)&now;
}

static void on_segv_skip(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	last_sig = sig;
	last_code = si->si_code;
	last_addr = (uintptr_t)si->si_addr;
	/* Skip the faulting 3-byte instruction `mov (%rax),%rbx`. */
	uc->uc_mcontext.gregs[REG_RIP] += 3;
	uc->uc_mcontext.gregs[REG_RBX] = 4242;
}

static void on_fault_jump(int sig, siginfo_t *si, void *ucv)
{
	last_sig = sig;
	last_code = si->si_code;
	handler_sp = (uintptr_t)&sig;
	siglongjmp(jump, 1);
}

/* A handler that "returns" to a non-canonical address: the return itself
 * faults, and Linux reports it as the program's own #GP there. */
#define BAD_RIP 0x8000000000001000ull
static volatile uint64_t bad_rip_seen, bad_trapno;
static void on_usr1_edit_rip(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	(void)si;
	((ucontext_t *)ucv)->uc_mcontext.gregs[REG_RIP] = BAD_RIP;
}
static void on_bad_return(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	last_sig = sig;
	last_code = si->si_code;
	last_addr = (uintptr_t)si->si_addr;
	bad_rip_seen = uc->uc_mcontext.gregs[REG_RIP];
	bad_trapno = uc->uc_mcontext.gregs[REG_TRAPNO];
	siglongjmp(jump, 1);
}

static void clobber_fpu(int sig)
{
	(void)sig;
	unsigned mx;
	__asm__ volatile("stmxcsr %0" : "=m"(mx));
	last_code = mx; /* the handler's MXCSR */
	__asm__ volatile("pxor %%xmm0,%%xmm0; pcmpeqd %%xmm1,%%xmm1; pxor %%xmm7,%%xmm7; pxor %%xmm15,%%xmm15"
			 ::: "xmm0", "xmm1", "xmm7", "xmm15");
	hits++;
}

#pragma GCC diagnostic ignored "-Winfinite-recursion"
static int recurse(int n)
{
	volatile char big[4096];
	big[0] = (char)n;
	return recurse(n + 1) + big[0];
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "spin")) {
		for (;;)
			syscall(SYS_getppid);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));

	printf("== siginfo and ucontext\n");
	sa.sa_sigaction = on_info;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGHUP);
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	CHECK_OK(sigaction(SIGUSR2, &sa, NULL));
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	CHECK_OK(sigprocmask(SIG_BLOCK, &set, &old));
	CHECK_OK(raise(SIGUSR1));
	CHECK_EQ(hits, 1);
	CHECK_EQ(last_sig, SIGUSR1);
	CHECK_EQ(last_code, SI_TKILL);
	CHECK_EQ(mask_had_usr2, 1);
	CHECK_EQ(mask_had_self, 1);

	printf("== blocked signals stay pending\n");
	CHECK_OK(kill(getpid(), SIGUSR2));
	CHECK_EQ(hits, 1);
	sigset_t pend;
	CHECK_OK(sigpending(&pend));
	CHECK(sigismember(&pend, SIGUSR2));
	CHECK_OK(sigprocmask(SIG_SETMASK, &old, NULL));
	CHECK_EQ(hits, 2);
	CHECK_EQ(last_sig, SIGUSR2);
	CHECK_EQ(last_code, SI_USER);
	CHECK_EQ(last_pid, getpid());

	printf("== SA_RESETHAND and SA_NODEFER\n");
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	CHECK_OK(raise(SIGUSR1));
	CHECK_EQ(mask_had_self, 0);
	struct sigaction now;
	CHECK_OK(sigaction(SIGUSR1, NULL, &now));
	CHECK(now.sa_handler == SIG_DFL);

	printf("== a handler edits the ucontext\n");
	sa.sa_sigaction = on_segv_skip;
	sa.sa_flags = SA_SIGINFO;
	CHECK_OK(sigaction(SIGSEGV, &sa, NULL));
	long rbx = 0;
	__asm__ volatile("mov $0x100010, %%rax\n\t" /* unmapped on every entry path (zpoline maps page 0) */
			 ".byte 0x48, 0x8b, 0x18\n\t" /* mov (%rax),%rbx */
			 : "=b"(rbx)
			 :
			 : "rax", "memory");
	CHECK_EQ(rbx, 4242);
	CHECK_EQ(last_sig, SIGSEGV);
	CHECK_EQ(last_code, SEGV_MAPERR);
	CHECK_EQ(last_addr, 0x100010);

	printf("== SIGFPE to a handler\n");
	sa.sa_sigaction = on_fault_jump;
	CHECK_OK(sigaction(SIGFPE, &sa, NULL));
	volatile int reached = 0;
	if (!sigsetjmp(jump, 1)) {
		volatile int zero = 0, one = 1;
		one = one / zero;
		reached = 1;
	}
	CHECK_EQ(reached, 0);
	CHECK_EQ(last_sig, SIGFPE);
	CHECK_EQ(last_code, FPE_INTDIV);

	printf("== a handler returning to a non-canonical rip\n");
	struct sigaction bad = { .sa_sigaction = on_usr1_edit_rip, .sa_flags = SA_SIGINFO };
	CHECK_OK(sigaction(SIGUSR1, &bad, NULL));
	bad.sa_sigaction = on_bad_return;
	CHECK_OK(sigaction(SIGSEGV, &bad, NULL));
	last_sig = 0;
	if (!sigsetjmp(jump, 1))
		raise(SIGUSR1);
	CHECK_EQ(last_sig, SIGSEGV);
	CHECK_EQ(last_code, SI_KERNEL);
	CHECK_EQ(last_addr, 0);
	CHECK_EQ(bad_rip_seen, BAD_RIP);
	CHECK_EQ(bad_trapno, 13); /* #GP */
	signal(SIGUSR1, SIG_DFL);

	printf("== stack overflow caught on the alternate stack\n");
	static char alt[64 * 1024];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt), .ss_flags = 0 };
	CHECK_OK(sigaltstack(&ss, NULL));
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	CHECK_OK(sigaction(SIGSEGV, &sa, NULL));
	if (!sigsetjmp(jump, 1))
		recurse(0);
	CHECK_EQ(last_sig, SIGSEGV);
	CHECK(handler_sp > (uintptr_t)alt && handler_sp < (uintptr_t)alt + sizeof(alt));
	stack_t cur;
	CHECK_OK(sigaltstack(NULL, &cur));
	CHECK(cur.ss_sp == alt && cur.ss_flags == 0);

	printf("== registers and FPU state survive a handler\n");
	signal(SIGUSR1, clobber_fpu);
	unsigned mx = 0x1f80 | (3 << 13), mx_after = 0;
	uint64_t x0[2] = { 0x1111222233334444ull, 0x5555666677778888ull }, y0[2];
	__asm__ volatile("ldmxcsr %0; movdqu %1, %%xmm0" ::"m"(mx), "m"(x0) : "xmm0");
	raise(SIGUSR1);
	__asm__ volatile("movdqu %%xmm0, %0; stmxcsr %1" : "=m"(y0), "=m"(mx_after));
	CHECK(y0[0] == x0[0] && y0[1] == x0[1]);
	CHECK_EQ(mx_after, mx);
	CHECK_EQ(last_code, 0x1f80); /* the handler started with a clean MXCSR */
	mx = 0x1f80;
	__asm__ volatile("ldmxcsr %0" ::"m"(mx));

	printf("== signals between processes\n");
	pid_t child;
	char *spin[] = { argv[0], "spin", NULL };
	CHECK_EQ(posix_spawn(&child, argv[0], NULL, NULL, spin, environ), 0);
	CHECK_OK(kill(child, SIGTERM));
	int st;
	CHECK_EQ(waitpid(child, &st, 0), child);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	CHECK_ERR(kill(child, 0), ESRCH);

	printf("== SIGCHLD\n");
	hits = 0;
	sa.sa_sigaction = on_info;
	sa.sa_flags = SA_SIGINFO;
	CHECK_OK(sigaction(SIGCHLD, &sa, NULL));
	char *quick[] = { "/no/such/program", NULL };
	CHECK_EQ(posix_spawn(&child, argv[0], NULL, NULL, spin, environ), 0);
	CHECK_OK(kill(child, SIGKILL));
	CHECK_EQ(waitpid(child, &st, 0), child);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK_EQ(hits, 1);
	CHECK_EQ(last_sig, SIGCHLD);
	CHECK_EQ(last_code, CLD_KILLED);
	(void)quick;

	printf("== an action that ignores drops what is pending\n");
	{
		sigset_t usr, pend;
		sigemptyset(&usr);
		sigaddset(&usr, SIGUSR2);
		sigaddset(&usr, SIGURG);
		sigprocmask(SIG_BLOCK, &usr, &old);
		CHECK_OK(kill(getpid(), SIGUSR2));
		CHECK_OK(kill(getpid(), SIGURG));
		struct sigaction keep, ign = { .sa_handler = SIG_IGN }, dfl = { .sa_handler = SIG_DFL };
		CHECK_OK(sigaction(SIGUSR2, &ign, &keep));
		CHECK_OK(sigaction(SIGURG, &ign, NULL));
		sigpending(&pend);
		CHECK(!sigismember(&pend, SIGUSR2) && !sigismember(&pend, SIGURG));
		/* SIG_DFL of a signal ignored by default drops it too. */
		CHECK_OK(sigaction(SIGURG, &sa, NULL));
		CHECK_OK(kill(getpid(), SIGURG));
		CHECK_OK(sigaction(SIGURG, &dfl, NULL));
		sigpending(&pend);
		CHECK(!sigismember(&pend, SIGURG));
		CHECK_OK(sigaction(SIGUSR2, &keep, NULL));
		sigprocmask(SIG_SETMASK, &old, NULL);
	}

	printf("== errors\n");
	CHECK_ERR(kill(getpid(), 65), EINVAL);
	CHECK_ERR(sigaltstack(&(stack_t){ .ss_sp = alt, .ss_size = 100 }, NULL), ENOMEM);
	CHECK_ERR(sigaltstack(&(stack_t){ .ss_sp = alt, .ss_size = 8192, .ss_flags = 99 }, NULL), EINVAL);
	CHECK_ERR(syscall(SYS_tgkill, getpid(), 999999, SIGUSR1), ESRCH);
	return checks_done();
}
