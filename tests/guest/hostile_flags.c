/* Flags a program may set that must not leak into the kernel's own code:
 * EFLAGS.AC (alignment checking) and DF across many syscalls. Regression:
 * with AC set, nomu's trap handler took SIGBUS on its first misaligned
 * access and nomu died.
 *
 * And an MXCSR with every floating-point exception unmasked, rounding
 * upward, flush-to-zero and denormals-are-zero, across syscalls that make
 * the kernel do real work (/proc/uptime is printed with a fraction): the
 * zpoline path runs nomu with the guest's MXCSR, so this checks that none
 * of it computes in floating point. The MXCSR comes back unchanged and a
 * signal handler starts with the default one, as natively. */
#include "nomu_test.h"
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>

static volatile uint32_t handler_mxcsr;

static void on_usr1(int sig)
{
	uint32_t m;
	(void)sig;
	__asm__ volatile("stmxcsr %0" : "=m"(m));
	handler_mxcsr = m;
}

static uint32_t get_mxcsr(void)
{
	uint32_t m;
	__asm__ volatile("stmxcsr %0" : "=m"(m));
	return m;
}

static void set_mxcsr(uint32_t m)
{
	__asm__ volatile("ldmxcsr %0" : : "m"(m));
}

/* Only raw syscalls between the two ldmxcsr: libc code may compute in
 * floating point itself. */
static void hostile_mxcsr(void)
{
	static char buf[256];
	static struct stat st;
	static struct rusage ru;
	static struct tms tms;
	static struct timespec ts, nap = {0, 1000000};
	static int fds[2];
	static struct pollfd pfd;
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	CHECK_OK(pipe(fds));
	const uint32_t hostile = 0xc040; /* FTZ, round up, DAZ, all unmasked */
	const uint32_t before = get_mxcsr();
	long r[12];
	/* The first call through a syscall instruction may reach nomu another
	 * way (zpoline's first use of a site is a SIGSYS): warm it up. */
	syscall(SYS_getpid);
	syscall(SYS_getpid);
	set_mxcsr(hostile);
	long fd = syscall(SYS_open, "/proc/uptime", O_RDONLY);
	r[0] = syscall(SYS_read, fd, buf, sizeof buf - 1);
	r[1] = syscall(SYS_close, fd);
	r[2] = syscall(SYS_stat, "/", &st);
	r[3] = syscall(SYS_getrusage, RUSAGE_SELF, &ru);
	r[4] = syscall(SYS_times, &tms) == -1 ? -1 : 0;
	r[5] = syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	r[6] = syscall(SYS_nanosleep, &nap, NULL);
	void *p = (void *)syscall(SYS_mmap, NULL, 1 << 20, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r[7] = p == MAP_FAILED ? -1 : syscall(SYS_munmap, p, 1 << 20);
	r[8] = syscall(SYS_write, fds[1], "x", 1);
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	r[9] = syscall(SYS_poll, &pfd, 1, 1000);
	r[10] = syscall(SYS_read, fds[0], buf + 128, 1);
	r[11] = syscall(SYS_kill, syscall(SYS_getpid), SIGUSR1);
	const uint32_t after = get_mxcsr();
	set_mxcsr(before);
	CHECK(fd >= 0);
	CHECK(r[0] > 3);
	for (int i = 1; i < 12; i++)
		if (i != 8 && i != 9 && i != 10)
			CHECK_EQ(r[i], 0);
	CHECK_EQ(r[8], 1);
	CHECK_EQ(r[9], 1);
	CHECK_EQ(r[10], 1);
	CHECK_EQ(after, hostile);
	CHECK_EQ(handler_mxcsr & ~0x3fU, 0x1f80);
	printf("hostile mxcsr: %s\n", after == hostile ? "preserved" : "CHANGED");
	close(fds[0]);
	close(fds[1]);
}

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
	hostile_mxcsr();
	return checks_done();
}
