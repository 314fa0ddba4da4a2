/* SPDX-License-Identifier: MIT */
/* serve-like: a pool of KV blocks as vLLM's block manager keeps it. Blocks
 * nobody references sit in one queue, least recently freed first: a block
 * with a key is a cached prefix (found again by its key until the queue
 * hands it out), one without is free. A new block comes from the queue's
 * head, evicting the cached prefix it held. The same structure serves the
 * offload alternative's pinned host pool. Host bookkeeping only: it never
 * touches KV memory. */
#include <stdlib.h>
#include <string.h>

#include "serve.h"

static uint64_t sv_key_pack(struct sv_key k)
{
	return ((uint64_t)(k.sess + 1) << 44) ^ ((uint64_t)k.gen << 24) ^ (uint64_t)k.idx ^
	       (1ull << 63);
}

static uint32_t sv_hash(uint64_t x, uint32_t cap)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)(x & (cap - 1));
}

void sv_pool_init(struct sv_pool *p, uint32_t nr)
{
	memset(p, 0, sizeof *p);
	p->nr = nr;
	p->b = calloc(nr ? nr : 1, sizeof *p->b);
	p->hcap = 1024;
	while (p->hcap < 2 * nr)
		p->hcap <<= 1;
	p->hkeys = calloc(p->hcap, sizeof *p->hkeys);
	p->hval = calloc(p->hcap, sizeof *p->hval);
	if (!p->b || !p->hkeys || !p->hval)
		wl_die("out of host memory for the block pool");
	p->head = p->tail = SV_NONE;
	for (uint32_t i = nr; i-- > 0;)
		sv_pool_unref(p, i);            /* all free, block 0 first */
}

void sv_pool_fini(struct sv_pool *p)
{
	free(p->b);
	free(p->hkeys);
	free(p->hval);
}

/* ---- the key map (linear probing, backward-shift deletion) ---- */

uint32_t sv_pool_find(const struct sv_pool *p, struct sv_key k)
{
	uint64_t x = sv_key_pack(k);
	for (uint32_t h = sv_hash(x, p->hcap);; h = (h + 1) & (p->hcap - 1)) {
		if (!p->hkeys[h])
			return SV_NONE;
		if (p->hkeys[h] == x)
			return p->hval[h];
	}
}

static void sv_map_put(struct sv_pool *p, uint64_t x, uint32_t id)
{
	uint32_t h = sv_hash(x, p->hcap);
	while (p->hkeys[h] && p->hkeys[h] != x)
		h = (h + 1) & (p->hcap - 1);
	p->hkeys[h] = x;
	p->hval[h] = id;
}

static void sv_map_del(struct sv_pool *p, uint64_t x)
{
	uint32_t h = sv_hash(x, p->hcap), m = p->hcap - 1;
	while (p->hkeys[h] && p->hkeys[h] != x)
		h = (h + 1) & m;
	if (!p->hkeys[h])
		return;
	p->hkeys[h] = 0;
	for (uint32_t j = (h + 1) & m; p->hkeys[j]; j = (j + 1) & m) {
		uint32_t home = sv_hash(p->hkeys[j], p->hcap);
		/* move j back into the hole when its home is not in (h, j] */
		if (((j - home) & m) >= ((j - h) & m)) {
			p->hkeys[h] = p->hkeys[j];
			p->hval[h] = p->hval[j];
			p->hkeys[j] = 0;
			h = j;
		}
	}
}

void sv_pool_set_key(struct sv_pool *p, uint32_t id, struct sv_key k)
{
	sv_pool_drop_key(p, id);
	uint32_t old = sv_pool_find(p, k);
	if (old != SV_NONE)                     /* an older copy loses its key */
		sv_pool_drop_key(p, old);
	p->b[id].key = k;
	p->b[id].keyed = true;
	sv_map_put(p, sv_key_pack(k), id);
}

void sv_pool_drop_key(struct sv_pool *p, uint32_t id)
{
	if (!p->b[id].keyed)
		return;
	sv_map_del(p, sv_key_pack(p->b[id].key));
	p->b[id].keyed = false;
}

/* ---- the queue ---- */

static void sv_unlink(struct sv_pool *p, uint32_t id)
{
	struct sv_block *b = &p->b[id];
	if (!b->queued)
		return;
	if (b->prev != SV_NONE) p->b[b->prev].next = b->next; else p->head = b->next;
	if (b->next != SV_NONE) p->b[b->next].prev = b->prev; else p->tail = b->prev;
	b->queued = false;
	p->queued--;
}

void sv_pool_ref(struct sv_pool *p, uint32_t id)
{
	sv_unlink(p, id);
	p->b[id].ref++;
}

void sv_pool_unref(struct sv_pool *p, uint32_t id)
{
	struct sv_block *b = &p->b[id];
	if (b->ref && --b->ref)
		return;
	b->queued = true;
	p->queued++;
	if (b->keyed) {                         /* LRU: evicted last */
		b->prev = p->tail;
		b->next = SV_NONE;
		if (p->tail != SV_NONE) p->b[p->tail].next = id; else p->head = id;
		p->tail = id;
	} else {                                /* free: used first */
		b->next = p->head;
		b->prev = SV_NONE;
		if (p->head != SV_NONE) p->b[p->head].prev = id; else p->tail = id;
		p->head = id;
	}
}

uint32_t sv_pool_take(struct sv_pool *p, struct sv_block *evicted)
{
	return sv_pool_take_at(p, p->head, evicted);
}

uint32_t sv_pool_take_at(struct sv_pool *p, uint32_t id, struct sv_block *evicted)
{
	if (id == SV_NONE || !p->b[id].queued)
		return SV_NONE;
	*evicted = p->b[id];
	sv_pool_drop_key(p, id);
	sv_pool_ref(p, id);
	return id;
}
