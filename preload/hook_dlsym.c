// SPDX-License-Identifier: MIT
/* The C half of the dlsym hook (the exported entry is hook_dlsym_entry.S).
 * Every lookup except RTLD_NEXT comes here: the real dlsym answers, and a
 * CUDA driver or runtime entry point is swapped for kvtier's hook by pointer
 * identity (so cudart's dlsym(h, "cuGetProcAddress_v2") gets our resolver).
 * Never allocates; never records. */
#include "../base/kvt.h"
#include "../cuda_shim/real.h"
#include "hook_table.h"

KVT_NO_SANITIZE __attribute__((visibility("hidden"))) void *kvt_dlsym_hook(void *handle, const char *name)
{
	void *p = kvt_real_dlsym(handle, name);
	if (!p || !name || name[0] != 'c' || name[1] != 'u')
		return p;
	return kvt_substitute(name, p);
}
