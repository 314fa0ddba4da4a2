/* SPDX-License-Identifier: MIT */
/* The hook guard: whether a hook may record now, and the per-thread
 * nesting that makes kvtier's own calls (and the runtime's calls into the
 * driver under one runtime API) pass straight through. Only hooks and the
 * composition root (init.c) include it. Inline, lock-free, no malloc. */
#ifndef KVT_GUARD_H
#define KVT_GUARD_H

#include <stdint.h>

#include "../base/kvt.h"

/* ---- process state (preload/init.c) ---------------------------------------- */

enum kvt_run_state { KVT_STATE_NEW = 0, KVT_STATE_INIT, KVT_STATE_READY,
		     KVT_STATE_INERT, KVT_STATE_DOWN };

extern int kvt_state;                 /* enum kvt_run_state, atomic */

/* Makes sure init ran; true when hooks may record now (ready, not nested). */
int kvt_ready(void);
/* True when kvtier is inert (disabled, AT_SECURE, or failed init). */
int kvt_inert(void);

/* ---- the guard ----------------------------------------------------------------- */

static inline int kvt_hook_enter(void)
{
	if (KVT_UNLIKELY(kvt_tls.depth > 0) || !kvt_ready())
		return 0;
	kvt_tls.depth++;
	return 1;
}

static inline void kvt_hook_exit(void)
{
	kvt_tls.depth--;
}

/* Runtime hooks: mark the runtime call in progress / finished. Returns 0
 * when kvtier must not record (inert or nested in kvtier itself). */
static inline int kvt_rt_enter(uint16_t api)
{
	if (kvt_tls.depth > 0 || kvt_tls.rt_api || !kvt_ready())
		return 0;
	kvt_tls.rt_api = api;
	kvt_tls.rt_seen = 0;
	return 1;
}

/* True when no driver hook recorded the call underneath (the runtime hook
 * then records it itself); clears the marker. */
static inline int kvt_rt_exit(void)
{
	int unseen = !kvt_tls.rt_seen;
	kvt_tls.rt_api = 0;
	kvt_tls.rt_seen = 0;
	return unseen;
}

#endif
