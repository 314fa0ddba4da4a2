/* SPDX-License-Identifier: MIT */
/* A kvtier trace (KVTIER_TRACE) as a replay event stream: successful
 * allocations, their frees, memsets (mapped to the allocation that contains
 * them) and memory queries, in file order, fed to the policy replay core
 * (include/kvtier/policy.h). Used by `kvtier replay` and the tests. Not for
 * use inside hooks (stdio, malloc). */
#ifndef KVT_TRACE_REPLAY_H
#define KVT_TRACE_REPLAY_H

#include <stddef.h>

#include "kvtier/policy.h"
#include "kvtier/trace_format.h"

struct kvt_registry;

/* Turn one trace event into a replay event. live tracks the allocations
 * seen so far (an alloc inserts, a free removes, a memset is looked up).
 * Returns 1 with *ev filled, 0 when the event means nothing to replay
 * (failed calls, frees of unknown bases, copies, launches), or -ENOMEM. */
int kvt_trace_replay_event(struct kvt_registry *live,
			   const struct kvt_rec_event *e,
			   struct kvt_replay_event *ev);

/* kvt_replay_feed, growing r->allocs (malloc'd or NULL) with realloc when
 * it is full. The feed's result, or -ENOMEM. */
int kvt_replay_feed_growing(struct kvt_replay *r, const struct kvt_replay_event *ev);

/* Feed every event of the trace at path into r (kvt_replay_init done by
 * the caller). r->allocs grows with realloc when full, so it must be NULL
 * or come from malloc; the caller frees it. Returns 0, or a negative errno
 * with err (may be NULL) holding a message. */
int kvt_trace_replay(const char *path, struct kvt_replay *r,
		     char *err, size_t err_len);

#endif
