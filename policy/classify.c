// SPDX-License-Identifier: MIT
/* The online KV-cache classifier: recognises KV-cache allocations from the
 * event stream alone (design.md §4), before each pointer is returned.
 * Pure and fixed-size: one open burst, a few pending ids; no malloc, no
 * syscalls. Verdicts on earlier (provisional) allocations go to `out`.
 *
 * The model, strongest signal first:
 *   arming   a meminfo query after large allocations exist (the weights are
 *            in) arms the classifier for the next arm_bursts bursts (see
 *            pools) and refutes what is still unconfirmed.
 *   size     "large" scales with the device: total/min_total_div from the
 *            last meminfo that reported a total, never under
 *            min_floor_bytes and never over min_bytes (min_bytes alone
 *            until a total is known). Smaller allocations are ignored.
 *   burst    identical sizes of one kind back to back (allocations under
 *            the large size, or while armed under free/maybe_free_div, are
 *            ignored; a gap over burst_gap_ns ends it, counted from the
 *            last member's birth or from the end of a memset of all of
 *            it: a synchronous zero-fill of a big member, slow where it
 *            faults memory in, is the program still making its KV cache).
 *   armed burst: KV at birth when one allocation takes pool_share_pct of
 *            the free memory; else its first members are MAYBE. Until
 *            confirmed it takes up to KVT_POLICY_BURST_SIZES sizes (a
 *            server's pools of one free-memory budget come in several:
 *            per-window pools, Mamba state + KV, MLA + indexer caches).
 *            Confirmed by a per-layer run (burst_confirm members of one
 *            size, or a zero-filled pair), by a zero-filled size taking
 *            fill_share_pct of free memory, or by all members together
 *            taking pool_share_pct; a run refutes a member alone in its
 *            size allocated before it (a table, a workspace). A free
 *            refutes the members of the freed size; a fifth size, or a
 *            new arming query, the rest.
 *   pools    a burst's confirmation spends the arming only once the KV
 *            confirmed since the arming query takes pools_done_pct of the
 *            free memory it reported; until then later bursts (further
 *            pools) are armed, down to a member of the first confirmed
 *            pool / pool_member_div. A pool KV at birth spends it at once.
 *   tail     once the arming is spent by pools, one more burst may be a
 *            late pool (a second cache, an indexer's, a draft model's,
 *            made after the main KV took most of free memory): if it
 *            starts within burst_gap_ns of the last pool member, its
 *            members of at least free/tail_free_div are MAYBE, and it is
 *            confirmed only by a zero fill of a whole member or a
 *            per-layer run, never by shares of free memory (workspaces
 *            and compute buffers after the pools are neither). Off by
 *            default (tail_free_div 0): the placement is decided at the
 *            allocation, before any zero fill, so a compute buffer right
 *            after a KV buffer (llama.cpp's, and llamacpp-like's at a fifth
 *            of its KV) would be placed in managed memory until refuted.
 *   over     once the arming is spent by pools, an allocation within
 *            burst_gap_ns of the last pool member that is larger than all
 *            the free memory the arming query reported is KV at birth
 *            (over_free): it can never fit the device, so placing it takes
 *            nothing from any other allocation; a further pool sized past
 *            the device (a hybrid model's full pool after its window pool
 *            took 40 % of free memory). Not "larger than what the pools
 *            left": kvtier put those pools off the device, so a compute
 *            buffer after them (llama.cpp's) still fits.
 *   unarmed: never KV at birth; a large allocation among the first
 *            early_large, >= total/late_total_div, zero-filled in full before
 *            the next large allocation is reported LATE (llama.cpp's shape);
 *            so is the large allocation right after a pool KV at birth or
 *            LATE, if zero-filled the same way (llama.cpp's second, SWA
 *            cache). */
#include <string.h>

#include "kvtier/policy.h"

#define KV_KINDS ((1u << KVT_KIND_DEVICE) | (1u << KVT_KIND_ASYNC) | \
		  (1u << KVT_KIND_MANAGED))

void kvt_policy_cls_config_default(struct kvt_policy_cls_config *c)
{
	*c = (struct kvt_policy_cls_config){
		.min_bytes = 32ull << 20,
		.min_total_div = 256,
		.min_floor_bytes = 4ull << 20,
		.burst_gap_ns = 5000000000ull,
		.burst_confirm = 3,
		.arm_bursts = 3,
		.maybe_free_div = 512,
		.pool_share_pct = 40,
		.fill_share_pct = 10,
		.pools_done_pct = 80,
		.pool_member_div = 8,
		.tail_free_div = 0,    /* late pools: off (see above) */
		.over_free = 1,
		.early_large = 8,
		.late_total_div = 64,
	};
}

void kvt_policy_cls_init(struct kvt_policy_cls *c,
			 const struct kvt_policy_cls_config *cfg)
{
	memset(c, 0, sizeof *c);
	if (cfg)
		c->cfg = *cfg;
	else
		kvt_policy_cls_config_default(&c->cfg);
	if (c->cfg.burst_confirm < 2)
		c->cfg.burst_confirm = 2;
	if (c->cfg.burst_confirm > KVT_POLICY_MAX_PENDING)
		c->cfg.burst_confirm = KVT_POLICY_MAX_PENDING;
	if (!c->cfg.late_total_div)
		c->cfg.late_total_div = 1;
	c->large_bytes = c->cfg.min_bytes;
}

/* The size from which an allocation is "large" on a device of total bytes:
 * total/min_total_div within [min_floor_bytes, min_bytes]. Real servers
 * (8 GiB and more with the defaults) get min_bytes itself. */
static uint64_t large_for_total(const struct kvt_policy_cls_config *cfg,
				uint64_t total)
{
	uint64_t cap = cfg->min_bytes, v;
	if (!total || !cfg->min_total_div)
		return cap;
	v = total / cfg->min_total_div;
	if (v < cfg->min_floor_bytes)
		v = cfg->min_floor_bytes;
	return v < cap ? v : cap;
}

static void emit(struct kvt_policy_cls_verdicts *out, uint64_t id, uint8_t v)
{
	if (out && out->nr < KVT_POLICY_MAX_RESOLVE) {
		out->v[out->nr].id = id;
		out->v[out->nr].verdict = v;
		out->nr++;
	}
}

/* share% of free memory (at arming) reached by bytes? */
static bool share_of_free(const struct kvt_policy_cls *c, uint64_t bytes,
			  unsigned pct)
{
	if (!c->free_at_arm)
		return false;
	return (unsigned __int128)bytes * 100 >=
	       (unsigned __int128)c->free_at_arm * pct;
}

/* bytes more are KV: the arming ends once the pools fill the free memory
 * (pools_done_pct of it; 0 = at the first confirmation). */
static void pools_done(struct kvt_policy_cls *c)
{
	c->arm_left = 0;
	/* a late pool may follow; not after a late pool itself */
	c->tail_open = c->cfg.tail_free_div && c->free_at_arm && !c->burst.tail;
}

static void count_kv(struct kvt_policy_cls *c, uint64_t bytes)
{
	c->kv_since_arm += bytes;
	if (!c->free_at_arm || !c->cfg.pools_done_pct ||
	    share_of_free(c, c->kv_since_arm, c->cfg.pools_done_pct))
		pools_done(c);
}

/* The floor of a late pool's members, and whether one may start or is
 * still unconfirmed. */
static uint64_t tail_floor(const struct kvt_policy_cls *c)
{
	/* and at least 1/12 of the pools before it: a second cache, an
	 * indexer's or a sliding-window pool is (gpt-oss's window pool is
	 * 1/8 of its full one, DeepSeek V3.2's indexer cache 1/5); a compute
	 * buffer or a workspace after a KV buffer sized to fill the memory
	 * is not (llama.cpp's: a few percent) */
	uint64_t floor = c->free_at_arm / c->cfg.tail_free_div;
	uint64_t rel = c->kv_since_arm / 12;
	floor = floor > rel ? floor : rel;
	return floor > c->large_bytes ? floor : c->large_bytes;
}

static bool tail_armed(const struct kvt_policy_cls *c)
{
	const struct kvt_policy_cls_burst *b = &c->burst;
	return c->tail_open || (b->open && b->tail && !b->confirmed);
}

/* Verdict on every pending member; the burst stays open only if confirmed. */
static void settle(struct kvt_policy_cls *c, uint8_t verdict,
		   struct kvt_policy_cls_verdicts *out)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	uint64_t bytes = 0;
	for (unsigned i = 0; i < b->nr_pending; i++) {
		emit(out, b->pending[i].id, verdict);
		bytes += b->pending[i].size;
	}
	b->nr_pending = 0;
	if (verdict == KVT_VERDICT_CONFIRMED) {
		b->confirmed = true;
		if (!c->pool_floor_bytes && c->cfg.pool_member_div)
			c->pool_floor_bytes = b->size / c->cfg.pool_member_div;
		count_kv(c, bytes);
	}
	else
		b->open = false;
}

static uint64_t pending_bytes(const struct kvt_policy_cls_burst *b)
{
	uint64_t bytes = 0;
	for (unsigned i = 0; i < b->nr_pending; i++)
		bytes += b->pending[i].size;
	return bytes;
}

/* Pending members of `size`: how many, and whether one is zero-filled. */
static unsigned nr_of_size(const struct kvt_policy_cls_burst *b, uint64_t size,
			   bool *zeroed)
{
	unsigned n = 0;
	for (unsigned i = 0; i < b->nr_pending; i++) {
		if (b->pending[i].size != size)
			continue;
		n++;
		*zeroed |= b->pending[i].zeroed;
	}
	return n;
}

#define CONFIRM_ALL UINT64_MAX

/* Confirmation test for an armed, unconfirmed burst. Returns 0 (not yet),
 * the size of a per-layer run that confirms it (burst_confirm members of
 * that size, or two with a zero fill: a few sizes once or twice each is
 * what activations look like), or CONFIRM_ALL when the pool set does (a
 * zero-filled size taking fill_share_pct of free memory, or all members
 * together pool_share_pct). */
static uint64_t armed_confirms(const struct kvt_policy_cls *c)
{
	const struct kvt_policy_cls_burst *b = &c->burst;
	uint64_t by = 0;
	for (unsigned s = 0; s < b->nr_sizes; s++) {
		bool zeroed = false;
		unsigned n = nr_of_size(b, b->sizes[s], &zeroed);
		if (b->tail) {                  /* a late pool: zeroed, or a run */
			if (zeroed || n >= c->cfg.burst_confirm)
				by = b->sizes[s];
			continue;
		}
		if (zeroed && share_of_free(c, b->sizes[s] * n, c->cfg.fill_share_pct))
			return CONFIRM_ALL;
		if (n >= c->cfg.burst_confirm || (zeroed && n >= 2))
			by = b->sizes[s];
	}
	if (!b->tail && share_of_free(c, pending_bytes(b), c->cfg.pool_share_pct))
		return CONFIRM_ALL;
	return by;
}

/* Drop pending member i: refuted, and its size leaves the burst. */
static void refute_member(struct kvt_policy_cls_burst *b, unsigned i,
			  struct kvt_policy_cls_verdicts *out)
{
	uint64_t size = b->pending[i].size;
	unsigned s;
	emit(out, b->pending[i].id, KVT_VERDICT_REFUTED);
	b->nr--;
	for (unsigned k = i + 1; k < b->nr_pending; k++)
		b->pending[k - 1] = b->pending[k];
	b->nr_pending--;
	for (s = 0; s < b->nr_sizes && b->sizes[s] != size; s++)
		;
	if (s < b->nr_sizes)
		b->sizes[s] = b->sizes[--b->nr_sizes];
}

/* Confirm the burst (armed_confirms said `by`). Confirmed by a per-layer
 * run, a member alone in its size allocated before the run's first member
 * is a table or a workspace made before the pools (SGLang's req_to_token):
 * refuted. Members after it (an interleaved cache of another size) and
 * repeated sizes go with the run. */
static void confirm(struct kvt_policy_cls *c, uint64_t by,
		    struct kvt_policy_cls_verdicts *out)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	unsigned i = 0;
	while (by != CONFIRM_ALL && i < b->nr_pending && b->pending[i].size != by) {
		bool zeroed = false;
		if (nr_of_size(b, b->pending[i].size, &zeroed) == 1)
			refute_member(b, i, out);
		else
			i++;
	}
	settle(c, KVT_VERDICT_CONFIRMED, out);
}

/* Does an allocation of `size` join the open burst?  One of its sizes, or
 * while armed and unconfirmed a new size if there is room for one. */
static bool joins(struct kvt_policy_cls_burst *b, uint64_t size)
{
	for (unsigned i = 0; i < b->nr_sizes; i++)
		if (b->sizes[i] == size)
			return true;
	if (!b->armed || b->confirmed || b->nr_sizes >= KVT_POLICY_BURST_SIZES)
		return false;
	b->sizes[b->nr_sizes++] = size;
	return true;
}

/* A pool that cannot fit (over_free, above): after the pools, within the
 * burst gap of the last member, larger than all the free memory. */
static bool over_free(const struct kvt_policy_cls *c, uint64_t size, uint64_t t_ns)
{
	const struct kvt_policy_cls_burst *b = &c->burst;
	if (!c->cfg.over_free || c->arm_left || !c->free_at_arm || !b->open || !b->confirmed ||
	    t_ns - b->last_t_ns > c->cfg.burst_gap_ns)
		return false;
	return size > c->free_at_arm;
}

static int start_burst(struct kvt_policy_cls *c, uint8_t kind, uint64_t size,
		       uint64_t t_ns, uint64_t id, bool follows_pool)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	bool over = over_free(c, size, t_ns);
	bool tail = !over && c->tail_open && !c->arm_left && b->open && b->confirmed &&
		    t_ns - b->last_t_ns <= c->cfg.burst_gap_ns && size >= tail_floor(c);
	c->tail_open = false;
	memset(b, 0, sizeof *b);
	b->open = true;
	b->kind = kind;
	b->size = size;
	b->sizes[0] = size;
	b->nr_sizes = 1;
	b->nr = 1;
	b->last_t_ns = t_ns;
	b->last_id = id;
	b->armed = c->arm_left > 0 || tail || over;
	b->tail = tail;
	if (c->arm_left)
		c->arm_left--;
	if (over) {              /* past the free memory: the arming is spent already */
		b->confirmed = true;
		c->kv_since_arm += size;
		c->after_pool = true;
		return KVT_KV_YES;
	}
	if (b->armed) {
		if (!tail && share_of_free(c, size, c->cfg.pool_share_pct)) {
			/* a packed cache, or the last and largest of a pool
			 * set: nothing of its size is left to come */
			b->confirmed = true;
			c->kv_since_arm += size;
			pools_done(c);
			c->after_pool = true;
			return KVT_KV_YES;
		}
		b->pending[0] = (struct kvt_policy_cls_member){ .id = id, .size = size };
		b->nr_pending = 1;
		return KVT_KV_MAYBE;
	}
	/* late: among the first large allocations and big, or right after a
	 * single-buffer pool (a second cache made by the same constructor:
	 * llama.cpp's iswa makes the full-attention buffer, then the SWA one) */
	if (follows_pool || (c->nr_large < c->cfg.early_large &&
	    (!c->total_bytes || size >= c->total_bytes / c->cfg.late_total_div))) {
		c->late_open = true;
		c->late_id = id;
		c->late_size = size;
	}
	return KVT_KV_NO;
}

/* Smaller allocations are ignored (they neither join nor end a burst).
 * While armed, a KV member is at least free/maybe_free_div: even 2L
 * per-layer buffers of a 128-layer model share out the free memory. */
static uint64_t size_floor(const struct kvt_policy_cls *c)
{
	const struct kvt_policy_cls_burst *b = &c->burst;
	uint64_t floor = c->large_bytes;
	bool armed = c->arm_left || (b->open && b->armed && !b->confirmed);
	if (armed && c->cfg.maybe_free_div &&
	    c->free_at_arm / c->cfg.maybe_free_div > floor)
		floor = c->free_at_arm / c->cfg.maybe_free_div;
	/* after a confirmed pool, a further one may be as small as a member
	 * of it / pool_member_div: an MLA layer's indexer cache is 1/5 of its
	 * latent cache, ~1/600 of free memory */
	if (armed && c->pool_floor_bytes && c->pool_floor_bytes < floor)
		floor = c->pool_floor_bytes > c->large_bytes ?
			c->pool_floor_bytes : c->large_bytes;
	return floor;
}

int kvt_policy_cls_alloc(struct kvt_policy_cls *c, uint8_t kind, uint64_t size,
			 uint64_t t_ns, uint64_t id,
			 struct kvt_policy_cls_verdicts *out)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	int kv;
	if (kind >= KVT_KIND__COUNT || !(KV_KINDS & (1u << kind)) ||
	    size < size_floor(c))
		return KVT_KV_NO;
	/* while a late pool may start, what is under its floor is ignored,
	 * but for the last members of the confirmed pool */
	if (tail_armed(c) && size < tail_floor(c) &&
	    !(b->open && b->confirmed && !b->tail && b->kind == kind &&
	      joins(b, size)))
		return KVT_KV_NO;
	c->late_open = false;   /* the zero-fill window closes */
	bool follows_pool = c->after_pool;
	c->after_pool = false;
	if (b->open && b->kind == kind &&
	    t_ns - b->last_t_ns <= c->cfg.burst_gap_ns && joins(b, size)) {
		b->nr++;
		b->size = size;
		b->last_t_ns = t_ns;
		b->last_id = id;
		if (b->confirmed) {
			kv = KVT_KV_YES;
			count_kv(c, size);
		} else if (!b->armed || b->nr_pending >= KVT_POLICY_MAX_PENDING) {
			kv = KVT_KV_NO;
		} else {
			b->pending[b->nr_pending++] =
				(struct kvt_policy_cls_member){ .id = id, .size = size };
			kv = KVT_KV_MAYBE;
			uint64_t by = armed_confirms(c);
			if (by) {
				b->nr_pending--;   /* KV at birth: no verdict of its own */
				confirm(c, by, out);
				count_kv(c, size);
				kv = KVT_KV_YES;
			}
		}
	} else {
		if (b->open && !b->confirmed && b->nr_pending)
			settle(c, KVT_VERDICT_REFUTED, out);
		kv = start_burst(c, kind, size, t_ns, id, follows_pool);
	}
	c->nr_large++;
	return kv;
}

static int pending_index(const struct kvt_policy_cls_burst *b, uint64_t id)
{
	if (!b->open)
		return -1;
	for (unsigned i = 0; i < b->nr_pending; i++)
		if (b->pending[i].id == id)
			return (int)i;
	return -1;
}

/* A pending member was freed: KV is never freed early, so the members of
 * its size are refuted and the size leaves the burst; the burst closes when
 * none is left. */
static void refute_size(struct kvt_policy_cls *c, uint64_t size,
			struct kvt_policy_cls_verdicts *out)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	unsigned i = 0;
	while (i < b->nr_pending) {
		if (b->pending[i].size == size)
			refute_member(b, i, out);
		else
			i++;
	}
	if (!b->nr_pending)
		b->open = false;
}

void kvt_policy_cls_free(struct kvt_policy_cls *c, uint64_t id, uint64_t t_ns,
			 struct kvt_policy_cls_verdicts *out)
{
	(void)t_ns;
	int i = pending_index(&c->burst, id);
	if (i >= 0)
		refute_size(c, c->burst.pending[i].size, out);
	if (c->late_open && c->late_id == id)
		c->late_open = false;
}

void kvt_policy_cls_memset(struct kvt_policy_cls *c, uint64_t id,
			   uint64_t offset, uint64_t bytes, int value,
			   uint64_t t_ns, struct kvt_policy_cls_verdicts *out)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	if (b->open && b->last_id == id && offset == 0 && bytes >= b->size &&
	    (int64_t)(t_ns - b->last_t_ns) > 0)
		b->last_t_ns = t_ns;        /* a fill of the whole member: the gap restarts */
	if (value != 0 || offset != 0)
		return;
	int i = pending_index(b, id);
	if (i >= 0 && bytes >= b->pending[i].size) {
		b->pending[i].zeroed = true;
		uint64_t by = armed_confirms(c);
		if (by)
			confirm(c, by, out);
	}
	if (c->late_open && c->late_id == id && bytes >= c->late_size) {
		c->late_open = false;
		c->after_pool = true;
		emit(out, id, KVT_VERDICT_LATE);
	}
}

void kvt_policy_cls_meminfo(struct kvt_policy_cls *c, uint64_t free_bytes,
			    uint64_t total_bytes, uint64_t t_ns,
			    struct kvt_policy_cls_verdicts *out)
{
	(void)t_ns;
	if (total_bytes) {
		c->total_bytes = total_bytes;
		c->large_bytes = large_for_total(&c->cfg, total_bytes);
	}
	if (c->nr_large > 0) {
		/* pools are sized from the query just before them: what is
		 * still unconfirmed belongs to the phase that query ends */
		if (c->burst.open && !c->burst.confirmed && c->burst.nr_pending)
			settle(c, KVT_VERDICT_REFUTED, out);
		c->arm_left = c->cfg.arm_bursts;
		c->tail_open = false;
		c->free_at_arm = free_bytes;
		c->kv_since_arm = 0;
		c->pool_floor_bytes = 0;
	}
}
