/* A fixed-address (ET_EXEC) program linked far above any physical memory
 * nomu can have (tests/cli.rs): it only exits 0. No libc, so no code that
 * needs the small code model. */
	.globl _start
_start:
	mov $60, %eax
	xor %edi, %edi
	syscall
	.section .note.GNU-stack,"",@progbits
