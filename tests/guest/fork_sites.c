/* A forked child runs the code its parent ran, as the parent left it: on
 * zpoline that is the page cache's code with its `syscall`s rewritten to
 * `call *%rax`, which the child's host process runs through a page 0 of
 * its own (src/entry/zpoline.rs, forked_trampoline_trap). So in the child:
 * - a syscall at a site the parent rewrote is that syscall (getppid,
 *   read, write), also when a signal interrupts it and it restarts
 *   (SA_RESTART);
 * - a call through a NULL pointer is a SIGSEGV at address 0, even with a
 *   syscall number in rax (the page 0 must not take it for a syscall). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>

static sigjmp_buf null_env;
static volatile uintptr_t fault_addr = 1;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	fault_addr = (uintptr_t)si->si_addr;
	siglongjmp(null_env, 1);
}

/* Calls address 0 with getpid's number in rax. */
static void call_null_with_getpid_in_rax(void)
{
	__asm__ volatile("mov $39, %%eax\n\t"
			 "xor %%edx, %%edx\n\t"
			 "call *%%rdx"
			 :
			 :
			 : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory");
}

/* Exit status 0 when the call faulted at address 0. */
static int null_call_child(void)
{
	struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_NODEFER};
	static char stack[65536];
	stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack};
	if (sigaltstack(&ss, NULL) != 0)
		return 10;
	sa.sa_flags |= SA_ONSTACK;
	if (sigaction(SIGSEGV, &sa, NULL) != 0)
		return 11;
	if (sigsetjmp(null_env, 1) == 0) {
		call_null_with_getpid_in_rax();
		return 12; /* the call returned */
	}
	return fault_addr == 0 ? 0 : 13;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static int got_usr1;
static void count_usr1(int sig)
{
	(void)sig;
	got_usr1++;
}

int main(void)
{
	int to_child[2], from_child[2];
	CHECK_OK(pipe(to_child));
	CHECK_OK(pipe(from_child));
	/* The parent runs the sites first (zpoline rewrites them now). */
	pid_t me = getpid();
	char c = 'p';
	CHECK_EQ(write(from_child[1], &c, 1), 1);
	CHECK_EQ(read(from_child[0], &c, 1), 1);

	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (getppid() != me)
			_exit(1);
		struct sigaction sa = {.sa_handler = count_usr1, .sa_flags = SA_RESTART};
		if (sigaction(SIGUSR1, &sa, NULL) != 0)
			_exit(2);
		c = 'r';
		if (write(from_child[1], &c, 1) != 1) /* ready */
			_exit(3);
		/* Blocks until the parent writes; SIGUSR1 meanwhile restarts it. */
		if (read(to_child[0], &c, 1) != 1 || c != 'x')
			_exit(4);
		if (got_usr1 != 1)
			_exit(5);
		_exit(null_call_child());
	}
	CHECK(pid > 0);
	CHECK_EQ(read(from_child[0], &c, 1), 1);
	CHECK_EQ(c, 'r');
	/* Let the child block in read() before the signal (it may not have:
	 * then the read is not interrupted, and the outcome is the same). */
	struct sigaction ign = {.sa_handler = on_usr1};
	CHECK_OK(sigaction(SIGUSR1, &ign, NULL));
	nomu_sleep_ms(50);
	CHECK_OK(kill(pid, SIGUSR1));
	nomu_sleep_ms(50);
	c = 'x';
	CHECK_EQ(write(to_child[1], &c, 1), 1);
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	return checks_done();
}
