/* SPDX-License-Identifier: MIT */
/* fork(): the locks the hooks hold across a kernel call and a registry
 * update, and the handlers that keep every kvtier lock consistent across
 * fork (preload/fork.c). The locks live there, not in the hooks, so the
 * handlers call into no hook file. */
#ifndef KVT_FORK_H
#define KVT_FORK_H

#include <pthread.h>

/* Anonymous maps: the kernel call and the registry update of one map happen
 * under it (preload/hook_mmap.c). */
extern pthread_mutex_t kvt_map_lock;
/* Large heap blocks: changes to the table of live blocks (preload/hook_heap.c). */
extern pthread_mutex_t kvt_heap_lock;

/* Once, from init.c as kvtier becomes ready (after placement registered its
 * own, so these prepare first): pthread_atfork. */
void kvt_fork_install(void);

#endif
