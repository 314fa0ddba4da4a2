// SPDX-License-Identifier: MIT
/* fork(): every kvtier lock is taken before it, released after it in the
 * parent and made anew in the child, so a child never inherits a lock held
 * by a thread that does not exist there. Owns the hooks' two locks (maps,
 * heap blocks); placement keeps its engine lock's handlers (place/place.c).
 * Runs inside fork(): no malloc, no stdio, no logging. */
#include <pthread.h>

#include "../base/kvt.h"
#include "fork.h"
#include "record.h"
#include "../place/stats.h"
#include "../profiler/trace.h"
#include "../tier/migrator.h"

pthread_mutex_t kvt_map_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t kvt_heap_lock = PTHREAD_MUTEX_INITIALIZER;

/* Installed only once kvtier is ready (nothing makes a ready kvtier inert
 * again), so the handlers need not ask. Between prepare and parent/child
 * this thread holds every kvtier lock: its hooked calls (other atfork
 * handlers, a sanitizer's fork interceptor) must pass straight through, so
 * the guard is raised for that window. */
static void fork_prepare(void)
{
	kvt_tls.depth++;
	pthread_mutex_lock(&kvt_map_lock);
	pthread_mutex_lock(&kvt_heap_lock);
	kvt_trace_fork_prepare();
	kvt_reg_lock_all(kvt_mem_reg);
	kvt_reg_lock_all(kvt_vmm_reg);
	kvt_reg_lock_all(kvt_host_reg);
}

static void fork_parent(void)
{
	kvt_reg_unlock_all(kvt_host_reg);
	kvt_reg_unlock_all(kvt_vmm_reg);
	kvt_reg_unlock_all(kvt_mem_reg);
	kvt_trace_fork_parent();
	pthread_mutex_unlock(&kvt_heap_lock);
	pthread_mutex_unlock(&kvt_map_lock);
	kvt_tls.depth--;
}

static void fork_child(void)
{
	kvt_platform_after_fork();
	kvt_stats_after_fork();
	kvt_migrator_after_fork();
	kvt_reg_unlock_all(kvt_host_reg);
	kvt_reg_unlock_all(kvt_vmm_reg);
	kvt_reg_unlock_all(kvt_mem_reg);
	kvt_trace_fork_child();
	pthread_mutex_init(&kvt_heap_lock, NULL);
	pthread_mutex_init(&kvt_map_lock, NULL);
	kvt_tls.depth--;
}

void kvt_fork_install(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
