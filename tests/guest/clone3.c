/* clone3: the struct's checks, in Linux's order (kernel/fork.c:
 * copy_clone_args_from_user, clone3_args_valid), and the processes and
 * threads it makes (glibc's pthread_create and posix_spawn use it first;
 * musl's do not, so this calls it raw in both builds).  Prints section
 * names only. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* struct clone_args (linux/sched.h, which musl's headers lack). */
struct args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
		set_tid_size, cgroup;
};

#define CLONE_CLEAR_SIGHAND_ 0x100000000ULL
#define CLONE_INTO_CGROUP_ 0x200000000ULL

/* clone3 whose child (if any) exits at once with status `code`, touching
 * no memory: it may run on the caller's stack (vfork) or a fresh one. */
static long clone3_exit(struct args *a, size_t size, int code)
{
	long ret;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "mov %%edx, %%edi\n\t"
			 "mov $60, %%eax\n\t"
			 "syscall\n\t"
			 "1:"
			 : "=a"(ret)
			 : "a"((long)SYS_clone3), "D"(a), "S"(size), "d"(code)
			 : "rcx", "r11", "memory");
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

static int status_of(long pid)
{
	int st = -1;
	if (waitpid((pid_t)pid, &st, 0) != pid)
		return -1;
	return st;
}

static void errors(void)
{
	printf("== errors\n");
	struct args a = {0};
	char big[4097];
	memset(big, 0, sizeof(big));
	CHECK_ERR(syscall(SYS_clone3, &a, 63), EINVAL);
	CHECK_ERR(syscall(SYS_clone3, &a, 0), EINVAL);
	CHECK_ERR(syscall(SYS_clone3, big, 4097), E2BIG);
	CHECK_ERR(syscall(SYS_clone3, (void *)8, 64), EFAULT);
	CHECK_ERR(syscall(SYS_clone3, NULL, 88), EFAULT);
	/* A longer struct: the part past cgroup must be zero. */
	uint64_t longer[12] = {0};
	longer[11] = 1;
	CHECK_ERR(syscall(SYS_clone3, longer, sizeof(longer)), E2BIG);
	/* exit_signal: a valid signal in the low byte only. */
	a.exit_signal = 65;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	a.exit_signal = 0x100 | SIGCHLD;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	a.exit_signal = 0;
	/* set_tid and its size go together. */
	a.set_tid_size = 1;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	a.set_tid_size = 0;
	/* The flags' signal byte and CLONE_DETACHED are not clone3's. */
	a.flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	a.flags = CLONE_VM | CLONE_VFORK | 0x400000;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	a.flags = CLONE_VM | CLONE_VFORK | (1ULL << 40);
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	a.flags = CLONE_VM | CLONE_SIGHAND | CLONE_CLEAR_SIGHAND_;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	/* A thread or a sibling has no exit signal. */
	a.flags = CLONE_VM | CLONE_SIGHAND | CLONE_THREAD;
	a.exit_signal = SIGCHLD;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	a.exit_signal = 0;
	/* A stack is an address and a size, both or neither. */
	static char stack[16 << 10];
	a.flags = CLONE_VM | CLONE_VFORK;
	a.stack = (uintptr_t)stack;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	a.stack = 0;
	a.stack_size = sizeof(stack);
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	a.stack = 0x7ffffffff000ULL;
	a.stack_size = 0x2000;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	/* CLONE_INTO_CGROUP needs a cgroup that fits an int. */
	a.stack = a.stack_size = 0;
	a.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP_;
	a.cgroup = 1ULL << 31;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
	/* What clone refuses, clone3 does too (a thread shares handlers). */
	memset(&a, 0, sizeof(a));
	a.flags = CLONE_VM | CLONE_THREAD;
	CHECK_ERR(syscall(SYS_clone3, &a, sizeof(a)), EINVAL);
}

static void processes(void)
{
	printf("== processes\n");
	static char stack[64 << 10];
	/* A vfork child on a stack of its own, its pid also at parent_tid. */
	int ptid = 0;
	struct args a = {.flags = CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID,
			 .exit_signal = SIGCHLD,
			 .parent_tid = (uintptr_t)&ptid,
			 .stack = (uintptr_t)stack,
			 .stack_size = sizeof(stack)};
	long pid = clone3_exit(&a, sizeof(a), 7);
	CHECK(pid > 0);
	CHECK_EQ(ptid, pid);
	int st = status_of(pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	/* The first version's 64 bytes are enough; no stack: the caller's. */
	struct args b = {.flags = CLONE_VM | CLONE_VFORK, .exit_signal = SIGCHLD};
	pid = clone3_exit(&b, 64, 3);
	CHECK(pid > 0);
	st = status_of(pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
	/* A longer struct with zeros past cgroup. */
	uint64_t longer[16] = {0};
	memcpy(longer, &b, sizeof(b));
	pid = clone3_exit((struct args *)longer, sizeof(longer), 4);
	CHECK(pid > 0);
	st = status_of(pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 4);
	/* (Another exit signal than SIGCHLD: a partial note,
	 * tests/nomu/partial_notes.c.) */
}

static volatile int thread_ran;

static void threads(void)
{
	printf("== threads\n");
	/* A thread that sets a flag and exits (exit, not exit_group), on a
	 * stack of its own; CLONE_CHILD_CLEARTID wakes the joiner. */
	size_t size = 64 << 10;
	char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(stack != MAP_FAILED);
	static volatile int tid_word;
	tid_word = -1;
	int ptid = 0;
	struct args a = {.flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
				  CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID,
			 .parent_tid = (uintptr_t)&ptid,
			 .child_tid = (uintptr_t)&tid_word,
			 .stack = (uintptr_t)stack,
			 .stack_size = size};
	long ret;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "movl $1, thread_ran(%%rip)\n\t"
			 "xor %%edi, %%edi\n\t"
			 "mov $60, %%eax\n\t"
			 "syscall\n\t"
			 "1:"
			 : "=a"(ret)
			 : "a"((long)SYS_clone3), "D"(&a), "S"(sizeof(a))
			 : "rcx", "r11", "memory");
	CHECK(ret > 0);
	CHECK_EQ(ptid, ret);
	/* The kernel clears the word and wakes futex waiters at its exit. */
	while (tid_word != 0)
		syscall(SYS_futex, &tid_word, 0 /* FUTEX_WAIT */, tid_word, NULL, NULL, 0);
	CHECK_EQ(thread_ran, 1);
	munmap(stack, size);
}

int main(void)
{
	errors();
	processes();
	threads();
	return checks_done();
}
