// SPDX-License-Identifier: MIT
/* A kvtier trace fed through the policy replay core (trace_replay.h).
 * Offline only: linked into libkvtier.a (the tool, tests), never libkvtier.so. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "trace_read.h"
#include "trace_replay.h"

int kvt_trace_replay_event(struct kvt_registry *live,
			   const struct kvt_rec_event *e,
			   struct kvt_replay_event *ev)
{
	struct kvt_alloc a;
	memset(ev, 0, sizeof *ev);
	ev->t_us = e->t_ns / 1000;
	ev->kind = e->kind;
	ev->has_id = true;
	switch (e->op) {
	case KVT_OP_ALLOC:
		if (e->result || !e->addr || e->kind == KVT_KIND_NONE)
			return 0;
		a = (struct kvt_alloc){ .base = e->addr, .size = e->size, .kind = e->kind };
		if (kvt_reg_insert(live, &a) < 0)
			return -ENOMEM;
		ev->op = KVT_RP_ALLOC;
		ev->size = e->size;
		ev->id = e->addr;
		return 1;
	case KVT_OP_FREE:
		if (e->result || kvt_reg_remove(live, e->addr, NULL))
			return 0;
		ev->op = KVT_RP_FREE;
		ev->id = e->addr;
		return 1;
	case KVT_OP_MEMSET:
		if (e->result || kvt_reg_find(live, e->addr, &a))
			return 0;
		ev->op = KVT_RP_MEMSET;
		ev->id = a.base;
		ev->offset = e->addr - a.base;
		ev->size = e->size;
		ev->value = (int)(e->aux & 0xff);
		return 1;
	case KVT_OP_MEMINFO:
		if (e->result)
			return 0;
		ev->op = KVT_RP_MEMINFO;
		ev->size = e->addr;        /* free bytes */
		ev->id = e->size;          /* total bytes */
		return 1;
	default:
		return 0;
	}
}

static int grow(struct kvt_replay *r)
{
	size_t cap = r->cap ? r->cap * 2 : 1024;
	struct kvt_replay_alloc *t = realloc(r->allocs, cap * sizeof *t);
	if (!t)
		return -ENOMEM;
	r->allocs = t;
	r->cap = cap;
	return 0;
}

int kvt_replay_feed_growing(struct kvt_replay *r, const struct kvt_replay_event *ev)
{
	int rc = kvt_replay_feed(r, ev);
	if (rc == -ENOSPC) {
		if (grow(r))
			return -ENOMEM;
		rc = kvt_replay_feed(r, ev);
	}
	return rc == -ENOSPC ? -ENOMEM : rc;
}

static int feed(struct kvt_replay *r, const struct kvt_replay_event *ev)
{
	return kvt_replay_feed_growing(r, ev) == -ENOMEM ? -ENOMEM : 0;
}

int kvt_trace_replay(const char *path, struct kvt_replay *r,
		     char *err, size_t err_len)
{
	struct kvt_trace_reader *rd = calloc(1, sizeof *rd);
	struct kvt_registry *live = kvt_reg_create(16);
	struct kvt_trace_item it;
	bool oom = !rd || !live;
	int rc = oom ? -ENOMEM : kvt_trace_reader_open(rd, path);
	while (!rc && (rc = kvt_trace_next(rd, &it)) > 0) {
		struct kvt_replay_event ev;
		rc = it.ev ? kvt_trace_replay_event(live, it.ev, &ev) : 0;
		if (rc > 0)
			rc = feed(r, &ev);
		oom = rc == -ENOMEM;
	}
	if (rc < 0 && err && err_len)
		snprintf(err, err_len, "%s", oom ? "out of memory" : rd->err);
	if (rd)
		kvt_trace_reader_close(rd);
	kvt_reg_destroy(live);
	free(rd);
	return rc < 0 ? rc : 0;
}
