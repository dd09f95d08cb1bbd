/* A syscall with every argument register set to `a`, straight from the
 * guest's own code (no libc wrapper checks anything first). */
#ifndef NOMU_RAW_SYSCALL_H
#define NOMU_RAW_SYSCALL_H

static long raw(long nr, long a)
{
	long ret;
	register long r10 __asm__("r10") = a, r8 __asm__("r8") = a, r9 __asm__("r9") = a;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(a), "d"(a), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#endif
