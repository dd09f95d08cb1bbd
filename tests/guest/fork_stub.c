/* A forked child's syscalls, made from a site its parent's code ran before
 * the fork (on the rewrite path: a patched site, entering the stub of the
 * child's host process, src/entry/split.rs "The stub"), in the program's
 * image and in a copy of that code in a private executable mapping (which
 * the child gets a copy of: the rewrite path's patches stay in it), leave
 * everything but rax, rcx and r11 as a syscall does: the general registers, the
 * flags, xmm0-15 and the red zone below the stack pointer (but its top 8
 * bytes, which zpoline's `call` takes, see tests/guest/fpu.c).
 * And signals sent to the child while its threads loop over such
 * syscalls are each handled once, none lost, without disturbing any of
 * that: two threads, a thousand signals, each acknowledged before the
 * next is sent. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define SIGNALS 1000

/* probe(xmm_in, xmm_out): loads known values into every register the
 * syscall must keep, into xmm0-15 (from xmm_in) and into the red zone
 * (rsp-128 to rsp-16),
 * sets CF, makes getppid with a raw `syscall`, and returns the number of
 * registers, flags and red-zone words that changed (xmm0-15 are stored to
 * xmm_out for the caller to compare). */
long probe(const void *xmm_in, void *xmm_out);
/* loop_back(n): n getppid calls, each but the first by a jump straight
 * back to the `syscall` instruction (on the rewrite path an int3 inside
 * the patched range, taken as the syscall); returns n. */
long loop_back(long n);
/* The code, as a string: assembled into the program's text and, as bytes
 * never run there, into its read-only data (the private mapping's source:
 * an entry path may patch the text, never the data). */
#define CODE(probe_name, loop_name) \
	".globl " loop_name "\n" \
	loop_name ":\n" \
	"	mov r8, rdi\n" \
	"	mov eax, 110\n" \
	"3:	syscall\n" \
	"	dec r8\n" \
	"	jz 4f\n" \
	"	mov eax, 110\n" \
	"	jmp 3b\n" \
	"4:	mov rax, rdi\n" \
	"	ret\n" \
	".globl " probe_name "\n" \
	probe_name ":\n" \
	"	push rbx\n" \
	"	push rbp\n" \
	"	push r12\n" \
	"	push r13\n" \
	"	push r14\n" \
	"	push r15\n" \
	"	push rsi\n" \
	"	movdqu xmm0, [rdi + 0]\n" \
	"	movdqu xmm1, [rdi + 16]\n" \
	"	movdqu xmm2, [rdi + 32]\n" \
	"	movdqu xmm3, [rdi + 48]\n" \
	"	movdqu xmm4, [rdi + 64]\n" \
	"	movdqu xmm5, [rdi + 80]\n" \
	"	movdqu xmm6, [rdi + 96]\n" \
	"	movdqu xmm7, [rdi + 112]\n" \
	"	movdqu xmm8, [rdi + 128]\n" \
	"	movdqu xmm9, [rdi + 144]\n" \
	"	movdqu xmm10, [rdi + 160]\n" \
	"	movdqu xmm11, [rdi + 176]\n" \
	"	movdqu xmm12, [rdi + 192]\n" \
	"	movdqu xmm13, [rdi + 208]\n" \
	"	movdqu xmm14, [rdi + 224]\n" \
	"	movdqu xmm15, [rdi + 240]\n" \
	"	mov rax, 0x5a5a5a5a00000000\n" \
	"	mov ecx, 15\n" \
	"1:	lea rdx, [rax + rcx]\n" \
	"	mov [rsp + rcx * 8 - 136], rdx\n" \
	"	loop 1b\n" \
	"	mov ebx, 0x11111111\n" \
	"	mov ebp, 0x22222222\n" \
	"	mov r12d, 0x33333333\n" \
	"	mov r13d, 0x44444444\n" \
	"	mov r14d, 0x55555555\n" \
	"	mov r15d, 0x66666666\n" \
	"	mov edi, 0x77777777\n" \
	"	mov esi, 0x12121212\n" \
	"	mov edx, 0x23232323\n" \
	"	mov r8d, 0x34343434\n" \
	"	mov r9d, 0x45454545\n" \
	"	mov r10d, 0x56565656\n" \
	"	mov eax, 110\n" /* getppid */ \
	"	stc\n" \
	"	syscall\n" \
	"	setnc al\n" \
	"	movzx eax, al\n" \
	"	cmp ebx, 0x11111111\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp ebp, 0x22222222\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp r12d, 0x33333333\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp r13d, 0x44444444\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp r14d, 0x55555555\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp r15d, 0x66666666\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp edi, 0x77777777\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp esi, 0x12121212\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp edx, 0x23232323\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp r8d, 0x34343434\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp r9d, 0x45454545\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	cmp r10d, 0x56565656\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	/* The upper halves were zeroed by the 32-bit moves: still zero? */ \
	"	mov rdx, rbx\n" \
	"	or rdx, rbp\n" \
	"	or rdx, r12\n" \
	"	or rdx, r13\n" \
	"	or rdx, r14\n" \
	"	or rdx, r15\n" \
	"	or rdx, rdi\n" \
	"	or rdx, rsi\n" \
	"	or rdx, r8\n" \
	"	or rdx, r9\n" \
	"	or rdx, r10\n" \
	"	shr rdx, 32\n" \
	"	setnz cl\n" \
	"	add al, cl\n" \
	"	mov r8, 0x5a5a5a5a00000000\n" \
	"	mov r9d, 15\n" \
	"2:	lea rdx, [r8 + r9]\n" \
	"	cmp [rsp + r9 * 8 - 136], rdx\n" \
	"	setne cl\n" \
	"	add al, cl\n" \
	"	dec r9d\n" \
	"	jnz 2b\n" \
	"	pop rsi\n" \
	"	movdqu [rsi + 0], xmm0\n" \
	"	movdqu [rsi + 16], xmm1\n" \
	"	movdqu [rsi + 32], xmm2\n" \
	"	movdqu [rsi + 48], xmm3\n" \
	"	movdqu [rsi + 64], xmm4\n" \
	"	movdqu [rsi + 80], xmm5\n" \
	"	movdqu [rsi + 96], xmm6\n" \
	"	movdqu [rsi + 112], xmm7\n" \
	"	movdqu [rsi + 128], xmm8\n" \
	"	movdqu [rsi + 144], xmm9\n" \
	"	movdqu [rsi + 160], xmm10\n" \
	"	movdqu [rsi + 176], xmm11\n" \
	"	movdqu [rsi + 192], xmm12\n" \
	"	movdqu [rsi + 208], xmm13\n" \
	"	movdqu [rsi + 224], xmm14\n" \
	"	movdqu [rsi + 240], xmm15\n" \
	"	pop r15\n" \
	"	pop r14\n" \
	"	pop r13\n" \
	"	pop r12\n" \
	"	pop rbp\n" \
	"	pop rbx\n" \
	"	ret\n"

__asm__(".text\n"
	".intel_syntax noprefix\n"
	CODE("probe", "loop_back")
	".att_syntax prefix\n");
extern const char code_start[], code_end[], probe_bytes[], loop_back_bytes[];
__asm__(".section .rodata\n"
	".intel_syntax noprefix\n"
	"code_start:\n"
	CODE("probe_bytes", "loop_back_bytes")
	"code_end:\n"
	".att_syntax prefix\n"
	".text\n");

/* probe_ymm(in, out): ymm0-15 loaded from the 512 bytes at `in`, getppid
 * made, ymm0-15 stored at `out` (AVX only: the upper halves are the
 * extended state an xsave image must carry across the syscall). */
void probe_ymm(const void *in, void *out);
__asm__(".text\n"
	".intel_syntax noprefix\n"
	".globl probe_ymm\n"
	"probe_ymm:\n"
	"	vmovdqu ymm0, [rdi + 0]\n"
	"	vmovdqu ymm1, [rdi + 32]\n"
	"	vmovdqu ymm2, [rdi + 64]\n"
	"	vmovdqu ymm3, [rdi + 96]\n"
	"	vmovdqu ymm4, [rdi + 128]\n"
	"	vmovdqu ymm5, [rdi + 160]\n"
	"	vmovdqu ymm6, [rdi + 192]\n"
	"	vmovdqu ymm7, [rdi + 224]\n"
	"	vmovdqu ymm8, [rdi + 256]\n"
	"	vmovdqu ymm9, [rdi + 288]\n"
	"	vmovdqu ymm10, [rdi + 320]\n"
	"	vmovdqu ymm11, [rdi + 352]\n"
	"	vmovdqu ymm12, [rdi + 384]\n"
	"	vmovdqu ymm13, [rdi + 416]\n"
	"	vmovdqu ymm14, [rdi + 448]\n"
	"	vmovdqu ymm15, [rdi + 480]\n"
	"	mov r8, rsi\n"
	"	mov eax, 110\n"
	"	syscall\n"
	"	vmovdqu [r8 + 0], ymm0\n"
	"	vmovdqu [r8 + 32], ymm1\n"
	"	vmovdqu [r8 + 64], ymm2\n"
	"	vmovdqu [r8 + 96], ymm3\n"
	"	vmovdqu [r8 + 128], ymm4\n"
	"	vmovdqu [r8 + 160], ymm5\n"
	"	vmovdqu [r8 + 192], ymm6\n"
	"	vmovdqu [r8 + 224], ymm7\n"
	"	vmovdqu [r8 + 256], ymm8\n"
	"	vmovdqu [r8 + 288], ymm9\n"
	"	vmovdqu [r8 + 320], ymm10\n"
	"	vmovdqu [r8 + 352], ymm11\n"
	"	vmovdqu [r8 + 384], ymm12\n"
	"	vmovdqu [r8 + 416], ymm13\n"
	"	vmovdqu [r8 + 448], ymm14\n"
	"	vmovdqu [r8 + 480], ymm15\n"
	"	vzeroupper\n"
	"	ret\n"
	".att_syntax prefix\n");

static int have_avx(void)
{
	unsigned a, b, c, d;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
	if (!(c & (1u << 27)) || !(c & (1u << 28))) /* OSXSAVE, AVX */
		return 0;
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 6) == 6; /* the OS saves SSE and AVX state */
}

static int avx;

/* The same code, copied into a private executable mapping; and into a
 * second one that only the forked children run (the parent never does:
 * its sites are first called in a child). */
static long (*copy_probe)(const void *, void *);
static long (*copy_loop_back)(long);
static long (*late_probe)(const void *, void *);
static long (*late_loop_back)(long);

struct shared {
	volatile int handled;
	volatile int stop;
	volatile long bad; /* probes that saw a change */
	volatile long probes;
};

static struct shared *sh;

static void on_usr1(int sig)
{
	(void)sig;
	/* The handler's own vector work (memset may use xmm) must not leak
	 * into the interrupted probe: sigreturn puts its state back. */
	char junk[256];
	memset(junk, sig, sizeof junk);
	__asm__ volatile("" : : "r"(junk) : "memory");
	__atomic_add_fetch(&sh->handled, 1, __ATOMIC_SEQ_CST);
}

/* Probes until told to stop; the number of bad probes. */
static long probe_loop(int seed)
{
	unsigned char in[256], out[256];
	long bad = 0, n = 0;
	while (!sh->stop) {
		for (int i = 0; i < 256; i++)
			in[i] = (unsigned char)(i * 7 + seed + n);
		if (probe(in, out) != 0 || memcmp(in, out, sizeof in) != 0)
			bad++;
		if (copy_probe(in, out) != 0 || memcmp(in, out, sizeof in) != 0)
			bad++;
		if (late_probe(in, out) != 0 || memcmp(in, out, sizeof in) != 0)
			bad++;
		if (avx) {
			unsigned char yin[512], yout[512];
			for (int i = 0; i < 512; i++)
				yin[i] = (unsigned char)(i * 13 + seed + n);
			probe_ymm(yin, yout);
			if (memcmp(yin, yout, sizeof yin) != 0)
				bad++;
		}
		if (n % 64 == 0 && (loop_back(10) != 10 || copy_loop_back(10) != 10 || late_loop_back(10) != 10))
			bad++;
		n++;
	}
	__atomic_add_fetch(&sh->probes, n, __ATOMIC_SEQ_CST);
	return bad;
}

static void *second_thread(void *arg)
{
	(void)arg;
	return (void *)probe_loop(99);
}

static int wait_handled(int want)
{
	for (long spins = 0; sh->handled < want; spins++) {
		if (spins > 20000)
			return 0; /* ~20 s */
		nomu_sleep_ms(1);
	}
	return 1;
}

int main(void)
{
	unsigned char in[256], out[256];
	for (int i = 0; i < 256; i++)
		in[i] = (unsigned char)(255 - i);
	avx = have_avx();
	size_t code_len = (size_t)(code_end - code_start);
	char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(code != MAP_FAILED && code_len <= 4096);
	if (code == MAP_FAILED || code_len > 4096)
		return nomu_checks_done("fork_stub");
	memcpy(code, code_start, code_len);
	CHECK_OK(mprotect(code, 4096, PROT_READ | PROT_EXEC));
	copy_probe = (long (*)(const void *, void *))(code + (probe_bytes - code_start));
	copy_loop_back = (long (*)(long))(code + (loop_back_bytes - code_start));
	char *late = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(late != MAP_FAILED);
	if (late == MAP_FAILED)
		return nomu_checks_done("fork_stub");
	memcpy(late, code_start, code_len);
	CHECK_OK(mprotect(late, 4096, PROT_READ | PROT_EXEC));
	late_probe = (long (*)(const void *, void *))(late + (probe_bytes - code_start));
	late_loop_back = (long (*)(long))(late + (loop_back_bytes - code_start));
	/* The parent runs the sites first (the rewrite path patches them). */
	for (int i = 0; i < 100; i++) {
		CHECK_EQ(probe(in, out), 0);
		CHECK_EQ(copy_probe(in, out), 0);
	}
	CHECK(memcmp(in, out, sizeof in) == 0);
	CHECK_EQ(loop_back(100), 100);
	CHECK_EQ(copy_loop_back(100), 100);

	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	if (sh == MAP_FAILED)
		return nomu_checks_done("fork_stub");

	/* Unready until the child's handler is installed. */
	sh->handled = -1;
	pid_t pid = fork();
	if (pid == 0) {
		struct sigaction sa = {0};
		sa.sa_handler = on_usr1;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGUSR1, &sa, NULL);
		/* Ready: the parent may signal from now on. */
		__atomic_store_n(&sh->handled, 0, __ATOMIC_SEQ_CST);
		pthread_t t;
		if (pthread_create(&t, NULL, second_thread, NULL) != 0)
			_exit(3);
		long bad = probe_loop(1);
		void *tbad;
		pthread_join(t, &tbad);
		sh->bad = bad + (long)tbad;
		_exit(0);
	}
	CHECK(pid > 0);
	int ok = 1;
	while (sh->handled < 0)
		nomu_sleep_ms(1);
	for (int i = 1; i <= SIGNALS && ok; i++) {
		kill(pid, SIGUSR1);
		ok = wait_handled(i);
	}
	CHECK(ok);
	CHECK_EQ(sh->handled, SIGNALS);
	sh->stop = 1;
	int status = 0;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(sh->bad, 0);
	CHECK(sh->probes > 0);

	/* A forked child that makes its copy of the code writable reads the
	 * bytes the program put there (as a JIT would), and runs them. */
	pid = fork();
	if (pid == 0) {
		if (copy_probe(in, out) != 0 || copy_loop_back(5) != 5)
			_exit(1);
		if (mprotect(code, 4096, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
			_exit(2);
		if (memcmp(code, code_start, code_len) != 0)
			_exit(3);
		if (copy_probe(in, out) != 0 || copy_loop_back(5) != 5)
			_exit(4);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_EQ(status, 0);
	/* The parent's copy still runs (the child's mprotect was its own). */
	CHECK_EQ(copy_probe(in, out), 0);
	CHECK_EQ(copy_loop_back(100), 100);
	/* What the children ran of the second copy was theirs: the parent's
	 * still holds the bytes it wrote (read before it ever runs them). */
	CHECK(memcmp(late, code_start, code_len) == 0);
	CHECK_EQ(late_probe(in, out), 0);
	CHECK_EQ(late_loop_back(100), 100);
	return nomu_checks_done("fork_stub");
}
