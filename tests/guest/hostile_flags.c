/* Flags a program may set that must not leak into the kernel's own code:
 * EFLAGS.AC (alignment checking) and DF across many syscalls. Regression:
 * with AC set, nomu's trap handler took SIGBUS on its first misaligned
 * access and nomu died. */
#include "nomu_test.h"
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	long pid = 0;
	for (int round = 0; round < 2; round++) {
		/* Set AC (bit 18) and DF, make syscalls, then clear them again
		 * before any libc code runs. */
		__asm__ volatile("pushfq\n\t"
				 "orq $0x40400, (%%rsp)\n\t"
				 "popfq\n\t"
				 "mov $1000, %%ecx\n"
				 "1:\n\t"
				 "push %%rcx\n\t"
				 "mov $39, %%eax\n\t" /* getpid */
				 "syscall\n\t"
				 "pop %%rcx\n\t"
				 "dec %%ecx\n\t"
				 "jnz 1b\n\t"
				 "mov %%rax, %0\n\t"
				 "pushfq\n\t"
				 "andq $~0x40400, (%%rsp)\n\t"
				 "popfq"
				 : "=r"(pid)
				 :
				 : "rax", "rcx", "r11", "memory", "cc");
	}
	CHECK_EQ(pid, getpid());
	return checks_done();
}
