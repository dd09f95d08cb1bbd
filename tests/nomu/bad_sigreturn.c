/* rt_sigreturn of garbage: a bad stack pointer, a frame of all-ones (every
 * flag set, a garbage xsave image), a frame whose xsave pointer is bad. The
 * guest must die of SIGSEGV; nomu must stay up (regression: the guest's
 * AC and TF flags once reached nomu's own code and killed it). */
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
/* argv[1]: 0 = rsp at unmapped memory, 1 = garbage frame with a garbage
 * xsave image, 2 = garbage frame with fpstate pointing at unmapped memory */
static unsigned char stack[65536] __attribute__((aligned(64)));
int main(int argc, char **argv)
{
	int mode = argv[1][0] - '0';
	uintptr_t sp;
	if (mode == 0)
		sp = 0x10;
	else {
		memset(stack, 0xff, sizeof(stack));
		sp = (uintptr_t)stack + 4096;
		uint64_t *frame = (uint64_t *)(sp - 8);
		/* ucontext mcontext fpstate field at byte 8+40+184 */
		uint64_t *fp = (uint64_t *)((char *)frame + 8 + 40 + 184);
		*fp = mode == 1 ? (uintptr_t)stack + 8192 : 0x20;
		uint64_t *rip = (uint64_t *)((char *)frame + 8 + 40 + 128);
		*rip = 0; /* crash after return */
	}
	fflush(stdout);
	__asm__ volatile("mov %0, %%rsp; mov $15, %%eax; syscall" :: "r"(sp) : "memory");
	return 0;
}
