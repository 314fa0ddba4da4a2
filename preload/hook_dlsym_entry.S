/* SPDX-License-Identifier: MIT */
/* dlsym, interposed. glibc resolves RTLD_NEXT relative to its caller's
 * return address, so a C wrapper would make every RTLD_NEXT lookup start
 * after libkvtier (a second preload behind us would find itself and
 * recurse). RTLD_NEXT therefore tail-jumps to the real dlsym with the
 * caller's return address intact; every other handle goes to the C hook
 * (kvt_dlsym_hook in hook_dlsym.c), which may substitute driver entry points. */

#if defined(__x86_64__)
	.text
	.globl	dlsym
	.type	dlsym, @function
	.hidden	kvt_dlsym_hook
	.hidden	kvt_real_dlsym_fn
	.hidden	kvt_resolve_real_dlsym
dlsym:
	.cfi_startproc
	cmpq	$-1, %rdi		/* RTLD_NEXT == (void *)-1 */
	je	1f
	jmp	kvt_dlsym_hook
1:	movq	kvt_real_dlsym_fn(%rip), %rax
	testq	%rax, %rax
	jz	2f
	jmp	*%rax
2:	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	call	kvt_resolve_real_dlsym
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	testq	%rax, %rax
	jz	3f
	jmp	*%rax
3:	ret
	.cfi_endproc
	.size	dlsym, .-dlsym

#elif defined(__aarch64__)
	.text
	.globl	dlsym
	.type	dlsym, %function
	.hidden	kvt_dlsym_hook
	.hidden	kvt_real_dlsym_fn
	.hidden	kvt_resolve_real_dlsym
dlsym:
	cmn	x0, #1			/* RTLD_NEXT == (void *)-1 */
	b.eq	1f
	b	kvt_dlsym_hook
1:	adrp	x16, kvt_real_dlsym_fn
	ldr	x16, [x16, :lo12:kvt_real_dlsym_fn]
	cbz	x16, 2f
	br	x16
2:	stp	x29, x30, [sp, #-32]!
	stp	x0, x1, [sp, #16]
	bl	kvt_resolve_real_dlsym
	mov	x16, x0
	ldp	x0, x1, [sp, #16]
	ldp	x29, x30, [sp], #32
	cbz	x16, 3f
	br	x16
3:	mov	x0, #0
	ret
	.size	dlsym, .-dlsym
#else
#error "kvtier: dlsym entry not written for this architecture"
#endif

	.section .note.GNU-stack,"",%progbits
