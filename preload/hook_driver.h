/* SPDX-License-Identifier: MIT */
/* Shared prologue for driver hooks: resolve the real function through the
 * hook's slot, pass straight through when kvtier must not record (inert,
 * not yet initialized, or nested inside kvtier's own calls). */
#ifndef KVT_HOOK_DRIVER_H
#define KVT_HOOK_DRIVER_H

#include <cuda.h>

#include "../base/kvt.h"
#include "guard.h"
#include "../cuda_shim/real.h"
#include "hook_table.h"
#include "record.h"

/* Declares `real` for export `exp`; returns early when it cannot be found
 * or when this call is not to be recorded. */
#define DRV_PROLOGUE(exp, ...)                                           \
	__typeof__(&exp) real = DRV_REAL(exp);                             \
	if (KVT_UNLIKELY(!real))                                           \
		return CUDA_ERROR_NOT_INITIALIZED;                         \
	if (!kvt_hook_enter())                                             \
		return real(__VA_ARGS__)

#define U64(x) ((uint64_t)(uintptr_t)(x))

#endif
