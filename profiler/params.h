/* SPDX-License-Identifier: MIT */
/* Kernel parameter layouts (profiler/params.c): for each CUfunction the
 * launch scan sees, how many parameters it takes and how many 8-byte words
 * of each may be read, asked once of the driver (cuFuncGetParamInfo, CUDA
 * 12.4+) and kept in a lock-free table. Parameters past the sixteenth and
 * structs passed by value are read whole, up to KVT_PARAM_MAX parameters
 * and KVT_PARAM_WORDS words each (FlashAttention's params struct, 528
 * bytes and more, holds the block table pointer far past its first 64;
 * llama.cpp's attention kernel takes its KV extent as parameters 23 and
 * 26). With a layout the scan reads
 * kernelParams[i] and the words behind it directly, exactly the bytes the
 * driver itself reads for the launch: no system call. Without one (an older
 * driver, a handle it does not know, a full table) the caller falls back to
 * reads through process_vm_readv. Runs inside hooks: no malloc, no locks,
 * no stdio. */
#ifndef KVT_PARAMS_H
#define KVT_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#define KVT_PARAM_MAX       64    /* parameters a layout describes */
#define KVT_PARAM_WORDS     255   /* 8-byte words read of one parameter (a by-value
				   * struct up to 2040 bytes) */

struct kvt_param_layout {
	uint32_t nr;                          /* parameters described, <= KVT_PARAM_MAX */
	uint8_t words[KVT_PARAM_MAX];         /* 8-byte words of parameter i that may be read */
	uint64_t four;                        /* bit i: parameter i is 4 bytes (a scalar) */
};

/* fn(func, i, &size): 0 with *size the byte size of parameter i of func;
 * 1 when i is past its last parameter; -1 when the driver cannot say (no
 * entry point, a handle it does not know). NULL: no layouts (the default). */
void kvt_prof_set_param_info(int (*fn)(uint64_t func, unsigned i, size_t *size));

/* The layout of func: 1 with *out filled, 0 when there is none (the caller
 * reads the old way). The first call for a function asks the driver. */
int kvt_param_layout(uint64_t func, struct kvt_param_layout *out);

/* Every layout kept is stale (a module or library was unloaded: its
 * function handles may be reused for other kernels). */
void kvt_param_layouts_forget(void);

/* Layouts kept, and lookups that found no room (for stats and tests). */
uint64_t kvt_param_layouts_kept(void);
uint64_t kvt_param_layouts_full(void);

#endif
