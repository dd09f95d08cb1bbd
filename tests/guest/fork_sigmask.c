/* rt_sigprocmask in a forked child, which its host process answers itself
 * (src/entry/split.rs, "Local answers") while the kernel's copy of the mask
 * may be behind: signals sent while the child runs guest code with a mask
 * it set itself are delivered, kept pending, or kept although ignored, as
 * the mask it set says; a change that unblocks a pending signal delivers
 * it before the call returns; bad pointers and arguments fail as Linux's
 * do; the mask reaches an execve and a new thread, and rcx after the
 * syscall is what the `syscall` instruction leaves (zpoline's page 0
 * path). Natively first. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static volatile sig_atomic_t got;

static void on_usr1(int sig)
{
	(void)sig;
	got++;
}

/* Shared with the child: a handshake that costs it no syscall. */
struct shared {
	volatile int ready, sent, timeout;
};

static long mask_call(int how, const void *set, void *old, size_t size)
{
	return syscall(SYS_rt_sigprocmask, how, set, old, size);
}

static uint64_t current_mask(void)
{
	uint64_t m = 0;
	mask_call(SIG_BLOCK, NULL, &m, 8);
	return m;
}

static const uint64_t USR1 = 1ull << (SIGUSR1 - 1), USR2 = 1ull << (SIGUSR2 - 1);

/* Spins in guest code until `flag` is set or the peer gives up. */
static void spin_until(volatile int *flag, volatile int *timeout)
{
	while (!*flag && !*timeout)
		;
}

/* A query of the mask by a `syscall` of its own: whether rcx is then the
 * address after it. The parent calls it before it forks, so that zpoline
 * has rewritten the site when the child calls it. */
static __attribute__((noinline)) int rcx_after_syscall_ok(void)
{
	uint64_t rcx, after;
	long r;
	register long size __asm__("r10") = 8;
	__asm__ volatile("lea 1f(%%rip), %2\n\t"
			 "syscall\n"
			 "1:"
			 : "=a"(r), "=c"(rcx), "=&r"(after)
			 : "a"(SYS_rt_sigprocmask), "D"(SIG_BLOCK), "S"(0), "d"(0), "r"(size)
			 : "r11", "memory");
	return r == 0 && rcx == after;
}

/* A new thread's mask is its creator's: what it finds. */
static void *thread_mask(void *arg)
{
	*(uint64_t *)arg = current_mask();
	return NULL;
}

/* The child's part of each case: 0 when its checks hold. */
static int child_case(int which, struct shared *sh)
{
	uint64_t set;
	switch (which) {
	case 0:
		/* Unblocked by a local call while the kernel saw it blocked (a
		 * trap in between told it so): a signal sent while the child
		 * spins in guest code arrives there. */
		set = USR1;
		mask_call(SIG_BLOCK, &set, NULL, 8);
		getppid();
		mask_call(SIG_UNBLOCK, &set, NULL, 8);
		sh->ready = 1;
		spin_until((volatile int *)&got, &sh->timeout);
		return got == 1 ? 0 : 10;
	case 1:
		/* Blocked by a local call: it stays pending while the child
		 * spins, and the call that unblocks it delivers it at once. */
		set = USR1;
		mask_call(SIG_BLOCK, &set, NULL, 8);
		sh->ready = 1;
		spin_until(&sh->sent, &sh->timeout);
		if (got)
			return 20;
		sigset_t p;
		sigpending(&p);
		if (!sigismember(&p, SIGUSR1))
			return 21;
		mask_call(SIG_UNBLOCK, &set, NULL, 8);
		return got == 1 ? 0 : 22;
	case 2:
		/* Ignored but blocked by a local call: kept pending, as Linux
		 * keeps a blocked signal whatever its action. */
		signal(SIGUSR1, SIG_IGN);
		set = USR1;
		mask_call(SIG_BLOCK, &set, NULL, 8);
		sh->ready = 1;
		spin_until(&sh->sent, &sh->timeout);
		sigset_t q;
		sigpending(&q);
		return sigismember(&q, SIGUSR1) ? 0 : 30;
	case 3: {
		/* Raised while blocked (a trap), then unblocked: delivered
		 * before the call returns. */
		set = USR1;
		mask_call(SIG_BLOCK, &set, NULL, 8);
		raise(SIGUSR1);
		if (got)
			return 40;
		uint64_t old = 0;
		if (mask_call(SIG_SETMASK, &(uint64_t){0}, &old, 8) || !(old & USR1))
			return 41;
		return got == 1 ? 0 : 42;
	}
	case 4: {
		/* Arguments and pointers, as Linux judges them. */
		uint64_t all = ~0ull, old = 0, before = current_mask();
		char *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (none == MAP_FAILED || ro == MAP_FAILED)
			return 50;
		if (mask_call(SIG_BLOCK, (void *)1, NULL, 8) != -1 || errno != EFAULT)
			return 51;
		if (mask_call(SIG_BLOCK, none, NULL, 8) != -1 || errno != EFAULT)
			return 52;
		if (current_mask() != before)
			return 53;
		/* The new mask is in place before the old one fails to go out. */
		set = USR2;
		if (mask_call(SIG_BLOCK, &set, ro, 8) != -1 || errno != EFAULT)
			return 54;
		if (current_mask() != (before | USR2))
			return 55;
		if (mask_call(7, &set, NULL, 8) != -1 || errno != EINVAL)
			return 56;
		if (mask_call(7, NULL, &old, 8) != 0 || old != (before | USR2))
			return 57;
		if (mask_call(SIG_BLOCK, &set, NULL, 4) != -1 || errno != EINVAL)
			return 58;
		/* SIGKILL and SIGSTOP stay unblocked. */
		if (mask_call(SIG_SETMASK, &all, &old, 8) || old != (before | USR2))
			return 59;
		uint64_t kill_stop = (1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1));
		if (current_mask() != (~0ull & ~kill_stop))
			return 60;
		return 0;
	}
	case 5: {
		/* The mask set here is the one execve passes on. */
		set = USR2;
		mask_call(SIG_BLOCK, &set, NULL, 8);
		char *argv[] = {"/proc/self/exe", "--mask-has-usr2", NULL};
		execv("/proc/self/exe", argv);
		return 70;
	}
	case 6:
		/* rcx after the syscall: the address after the instruction. */
		return rcx_after_syscall_ok() ? 0 : 80;
	case 7: {
		/* A mask set while the child had one thread holds once it has
		 * two (each thread's own mask, the kernel's from then on), and
		 * again once it has one. */
		set = USR1;
		mask_call(SIG_BLOCK, &set, NULL, 8);
		pthread_t t;
		uint64_t seen = 0;
		if (pthread_create(&t, NULL, thread_mask, &seen) || pthread_join(t, NULL))
			return 90;
		if (!(seen & USR1))
			return 91;
		raise(SIGUSR1);
		if (got)
			return 92;
		mask_call(SIG_UNBLOCK, &set, NULL, 8);
		if (got != 1)
			return 93;
		mask_call(SIG_BLOCK, &set, NULL, 8);
		kill(getpid(), SIGUSR1);
		if (got != 1)
			return 94;
		mask_call(SIG_UNBLOCK, &set, NULL, 8);
		return got == 2 ? 0 : 95;
	}
	}
	return 99;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--mask-has-usr2"))
		return current_mask() & USR2 ? 0 : 1;
	nomu_handle(SIGUSR1, on_usr1, 0);
	CHECK(rcx_after_syscall_ok());
	struct shared *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	const char *names[] = {"unblocked in the child, sent from outside",
			       "blocked in the child, sent from outside",
			       "ignored and blocked in the child",
			       "raised while blocked, then unblocked",
			       "bad pointers and arguments",
			       "mask passed on by execve",
			       "rcx after the syscall",
			       "mask kept across a second thread"};
	for (int which = 0; which < 8; which++) {
		for (int round = 0; round < 3; round++) {
			memset(sh, 0, sizeof *sh);
			fflush(stdout);
			pid_t c = fork();
			CHECK(c >= 0);
			if (c == 0)
				_exit(child_case(which, sh));
			if (which <= 2) {
				for (int i = 0; i < 2000 && !sh->ready; i++)
					nomu_sleep_ms(1);
				CHECK(sh->ready);
				/* Process-directed in one round, thread-directed in
				 * the next. */
				if (round == 1)
					CHECK_OK(syscall(SYS_tgkill, c, c, SIGUSR1));
				else
					CHECK_OK(kill(c, SIGUSR1));
				nomu_sleep_ms(20);
				sh->sent = 1;
				for (int i = 0; i < 2000; i++) {
					int st;
					if (waitpid(c, &st, WNOHANG) == c) {
						CHECK(WIFEXITED(st));
						CHECK_EQ(WEXITSTATUS(st), 0);
						c = 0;
						break;
					}
					nomu_sleep_ms(1);
				}
				sh->timeout = 1;
				if (c == 0)
					continue;
			}
			int st;
			CHECK_EQ(waitpid(c, &st, 0), c);
			CHECK(WIFEXITED(st));
			CHECK_EQ(WEXITSTATUS(st), 0);
		}
		printf("%s: ok\n", names[which]);
	}
	return checks_done();
}
