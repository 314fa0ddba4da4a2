/* SPDX-License-Identifier: MIT */
/* Unwinding for call sites (profiler/unwind.c), inside libkvtier only.
 * The trace's own entry points (kvt_backtrace, the stack cache's setup,
 * counts and raw stack) are declared in trace.h. */
#ifndef KVT_UNWIND_H
#define KVT_UNWIND_H

#include <stdint.h>

/* The stack, innermost first, up to max frames; *hit: the stack cache's
 * entry it came from (NULL: unwound). */
int kvt_unwind(void **ip, int max, void **hit);
/* libunwind sets itself up lazily on first use, racily: once, early. */
void kvt_unwind_init(void);
/* The stack id kept with a cache entry for `depth` frames without Python
 * frames, in stack generation gen (0: none), and keeping one. */
uint32_t kvt_unwind_memo(void *hit, int depth, uint32_t gen);
void kvt_unwind_memo_keep(void *hit, int depth, uint32_t gen, uint32_t id);
/* fork(): no other thread inside libunwind while the gate is closed. */
void kvt_unwind_gate_close(void);
void kvt_unwind_gate_open(void);

#endif
