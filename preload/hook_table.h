/* SPDX-License-Identifier: MIT */
/* Substitution by pointer identity (preload/hook_table.c): a pointer the
 * driver's resolver (or dlsym, or cudaGetDriverEntryPoint*) returns is
 * swapped for a hook only when it is exactly the export whose ABI the hook
 * implements; the real function goes into its slot (cuda_shim/real.h). */
#ifndef KVT_HOOK_TABLE_H
#define KVT_HOOK_TABLE_H

/* A pointer returned for `name` (base or export name): our hook when it is
 * exactly an ABI we hook, else p unchanged. */
void *kvt_substitute(const char *name, void *p);

#endif
