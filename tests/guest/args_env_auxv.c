/* The initial process stack, the way Linux builds it:
 *
 *   argc (16-byte aligned), argv[] NULL, envp[] NULL, auxv pairs, AT_NULL
 *   ... AT_RANDOM bytes, platform string ...
 *   argv strings, envp strings (contiguous), AT_EXECFN string, top
 *
 * and the auxiliary vector's values.  The harness runs this with
 *   args: one "two words" three     env: NOMU_TEST_VAR=forty-two
 * and with the program's absolute path as argv[0] (and as the exec path).
 * Prints only the arguments and pass/fail facts, never values that differ
 * between runs. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <cpuid.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <unistd.h>

extern char _start[];
/* The linker defines _DYNAMIC at the PT_DYNAMIC segment (both builds are PIE). */
extern ElfW(Dyn) _DYNAMIC[] __attribute__((visibility("hidden")));

struct phdr_info {
	uintptr_t bias;
	const ElfW(Phdr) *phdr;
	size_t phnum;
	int seen;
};

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct phdr_info *pi = data;
	(void)size;
	if (pi->seen++)
		return 0; /* the first object is the main program */
	pi->bias = info->dlpi_addr;
	pi->phdr = info->dlpi_phdr;
	pi->phnum = info->dlpi_phnum;
	return 0;
}

int main(int argc, char **argv, char **envp)
{
	/* --- what the harness passed ------------------------------------ */
	printf("argc=%d\n", argc);
	for (int i = 1; i < argc; i++)
		printf("argv[%d]=%s\n", i, argv[i]);
	const char *var = getenv("NOMU_TEST_VAR");
	printf("NOMU_TEST_VAR=%s\n", var ? var : "(unset)");
	CHECK(argv[argc] == NULL);
	CHECK(argc >= 1 && argv[0][0] == '/');

	/* --- stack layout ----------------------------------------------- */
	long *sp = (long *)argv - 1;
	CHECK_EQ((uintptr_t)sp % 16, 0);
	CHECK_EQ(*sp, argc);
	CHECK(envp == argv + argc + 1);

	int envc = 0;
	while (envp[envc])
		envc++;
	/* argv strings are contiguous, and the envp strings follow them. */
	int contiguous = 1;
	for (int i = 0; i + 1 < argc; i++)
		if (argv[i + 1] != argv[i] + strlen(argv[i]) + 1)
			contiguous = 0;
	CHECK(contiguous);
	if (envc > 0) {
		CHECK(envp[0] == argv[argc - 1] + strlen(argv[argc - 1]) + 1);
		contiguous = 1;
		for (int i = 0; i + 1 < envc; i++)
			if (envp[i + 1] != envp[i] + strlen(envp[i]) + 1)
				contiguous = 0;
		CHECK(contiguous);
	}
	char *strings_end = envc ? envp[envc - 1] + strlen(envp[envc - 1]) + 1
				 : argv[argc - 1] + strlen(argv[argc - 1]) + 1;

	/* The auxiliary vector follows envp's NULL: walk it by hand, so
	 * presence (not just getauxval's 0) is checked, and each type is
	 * seen once. */
	Elf64_auxv_t *auxv = (Elf64_auxv_t *)(envp + envc + 1);
	unsigned long seen[64] = {0}, value[64] = {0};
	int naux = 0, dup = 0, agree = 1;
	for (; auxv[naux].a_type != AT_NULL && naux < 100; naux++) {
		unsigned long t = auxv[naux].a_type;
		if (t < 64 && seen[t]++)
			dup = 1;
		if (t < 64)
			value[t] = auxv[naux].a_un.a_val;
#ifdef __GLIBC__
		/* glibc's getauxval(AT_HWCAP) is not the kernel's value: on
		 * x86-64 its loader replaces it with its own HWCAP_X86_* bits
		 * (sysdeps/x86/cpu-features.c, misc/getauxval.c). */
		if (t == AT_HWCAP)
			continue;
#endif
		if (getauxval(t) != auxv[naux].a_un.a_val)
			agree = 0;
	}
	/* one check each, whatever the number of entries: the check count
	 * printed at the end must not depend on how many entries there are */
	CHECK(!dup);
	CHECK(agree);
	CHECK(naux > 10 && naux < 64);
	static const int required[] = {AT_PHDR,   AT_PHENT, AT_PHNUM, AT_PAGESZ,
				       AT_BASE,   AT_FLAGS, AT_ENTRY, AT_UID,
				       AT_EUID,   AT_GID,   AT_EGID,  AT_PLATFORM,
				       AT_HWCAP,  AT_CLKTCK, AT_SECURE, AT_RANDOM,
				       AT_HWCAP2, AT_EXECFN};
	for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
		nomu_checks++;
		if (!seen[required[i]])
			NOMU_FAIL("auxv entry %d missing", required[i]);
	}
	printf("stack layout: checked\n");

	/* AT_EXECFN: the exec path, stored above the envp strings. */
	const char *execfn = (const char *)getauxval(AT_EXECFN);
	CHECK(execfn != NULL);
	if (execfn) {
		CHECK(execfn >= strings_end);
		CHECK(strcmp(execfn, argv[0]) == 0);
	}

	/* --- auxv values ------------------------------------------------ */
	CHECK_EQ(getauxval(AT_PAGESZ), 4096);
	CHECK_EQ(getauxval(AT_PHENT), sizeof(Elf64_Phdr));
	CHECK_EQ(getauxval(AT_FLAGS), 0);
	CHECK_EQ(getauxval(AT_SECURE), 0);
	CHECK_EQ(getauxval(AT_CLKTCK), 100);
	CHECK_EQ(getauxval(AT_UID), getuid());
	CHECK_EQ(getauxval(AT_EUID), geteuid());
	CHECK_EQ(getauxval(AT_GID), getgid());
	CHECK_EQ(getauxval(AT_EGID), getegid());
	CHECK_EQ(getauxval(AT_ENTRY), (uintptr_t)_start);

	const char *platform = (const char *)getauxval(AT_PLATFORM);
	CHECK(platform && strcmp(platform, "x86_64") == 0);

	const unsigned char *rnd = (const unsigned char *)getauxval(AT_RANDOM);
	CHECK(rnd != NULL);
	if (rnd) {
		int nonzero = 0;
		for (int i = 0; i < 16; i++)
			nonzero |= rnd[i];
		CHECK(nonzero);
	}

	unsigned a, b, c, d;
	__cpuid(1, a, b, c, d);
	CHECK_EQ(value[AT_HWCAP], d); /* as the kernel put it (see above) */
	unsigned long hwcap2 = getauxval(AT_HWCAP2);
	unsigned cpuid7_ebx = 0;
	if (__get_cpuid_max(0, NULL) >= 7) {
		__cpuid_count(7, 0, a, cpuid7_ebx, c, d);
	}
	/* HWCAP2_FSGSBASE (bit 1) only if the CPU has FSGSBASE. */
	CHECK(!(hwcap2 & 2) || (cpuid7_ebx & 1));
	/* Only bits 0 (RING3MWAIT) and 1 (FSGSBASE) are defined on x86. */
	CHECK((hwcap2 & ~3UL) == 0);
	printf("auxv values: checked\n");

	/* --- program headers -------------------------------------------- */
	const ElfW(Phdr) *phdr = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	size_t phnum = getauxval(AT_PHNUM);
	CHECK(phdr != NULL && phnum > 0 && phnum < 64);
	/* The load bias from PT_DYNAMIC (static-PIE has no PT_PHDR), and
	 * cross-checked with PT_PHDR where there is one (the dynamic build). */
	int is_dynamic = 0, have_dynamic = 0, main_covered = 0, load_at_0 = 0;
	uintptr_t bias = 0;
	for (size_t i = 0; i < phnum; i++) {
		if (phdr[i].p_type == PT_INTERP)
			is_dynamic = 1;
		if (phdr[i].p_type == PT_DYNAMIC) {
			have_dynamic = 1;
			bias = (uintptr_t)_DYNAMIC - phdr[i].p_vaddr;
		}
	}
	CHECK(have_dynamic);
	CHECK_EQ(bias % 4096, 0);
	for (size_t i = 0; i < phnum; i++)
		if (phdr[i].p_type == PT_PHDR)
			CHECK_EQ(phdr[i].p_vaddr + bias, (uintptr_t)phdr);
	uintptr_t main_vaddr = (uintptr_t)main - bias;
	const ElfW(Ehdr) *ehdr = NULL;
	for (size_t i = 0; i < phnum; i++) {
		if (phdr[i].p_type != PT_LOAD)
			continue;
		if (phdr[i].p_offset == 0) {
			load_at_0 = 1;
			ehdr = (const ElfW(Ehdr) *)(bias + phdr[i].p_vaddr);
		}
		if (main_vaddr >= phdr[i].p_vaddr &&
		    main_vaddr < phdr[i].p_vaddr + phdr[i].p_memsz)
			main_covered = (phdr[i].p_flags & PF_X) != 0;
	}
	CHECK(main_covered);
	CHECK(load_at_0);
	if (ehdr) {
		CHECK(memcmp(ehdr->e_ident, ELFMAG, SELFMAG) == 0);
		CHECK_EQ(ehdr->e_type, ET_DYN);
		CHECK_EQ(ehdr->e_phnum, phnum);
		CHECK_EQ((uintptr_t)ehdr + ehdr->e_phoff, (uintptr_t)phdr);
		CHECK_EQ(ehdr->e_entry + bias, getauxval(AT_ENTRY));
	}

	struct phdr_info pi = {0};
	dl_iterate_phdr(phdr_cb, &pi);
	CHECK(pi.seen > 0);
	CHECK_EQ(pi.bias, bias);
	CHECK_EQ((uintptr_t)pi.phdr, (uintptr_t)phdr);
	CHECK_EQ(pi.phnum, phnum);

	/* AT_BASE: the interpreter's load address, 0 without one. */
	uintptr_t base = getauxval(AT_BASE);
	if (is_dynamic) {
		CHECK(base != 0);
		CHECK_EQ(base % 4096, 0);
		if (base)
			CHECK(memcmp((const void *)base, ELFMAG, SELFMAG) == 0);
	} else {
		CHECK_EQ(base, 0);
	}
	printf("program headers: checked\n");

	return checks_done();
}
