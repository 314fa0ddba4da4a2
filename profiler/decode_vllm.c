// SPDX-License-Identifier: MIT
/* vLLM Model Runner V2's block table, kept in shadow (contract in
 * decode.h; docs/profiler.md "Server decoders").
 *
 * Follows vllm/v1/worker/gpu/block_table.py (@00bd149) and
 * vllm/v1/worker/gpu/buffer_utils.py (@01a3d5a), as serve-like's vllm-v2
 * persona models them (one KV cache group):
 *  - the table lives on the GPU, rows x stride int32, one row per request
 *    state; each step, _apply_write_kernel(table, stride, write_indices,
 *    write_starts, write_contents, write_cu_lens) writes the newly
 *    appended ids: write k puts contents[k ? cu_lens[k-1] : 0, cu_lens[k])
 *    in row indices[k] from column starts[k] (cu_lens: each write's end).
 *    indices, starts and cu_lens are UVA
 *    (pinned host memory the kernel reads in place); contents is a fresh
 *    device tensor the step uploads just before, from pinned memory.
 *  - _gather_block_tables_kernel(idx_mapping, table, input_block_tables,
 *    stride, num_blocks) copies the first num_blocks[row] ids of row
 *    idx_mapping[i] to row i of input_block_tables, which attention
 *    reads. idx_mapping is uploaded each step; num_blocks is UVA.
 * The shadow applies every write it reads; at each gather it hands the
 * tables source the ids the step's rows hold (kvt_tables_feed), under the
 * destination the attention kernels name. A row it has not seen written
 * from column 0 up to what the step reads gives only its known part.
 *
 * The blocks a step takes fresh (decode.h, "Dead blocks"), from what the
 * same kernels carry (vllm/v1/worker/gpu/states.py, input_batch.py):
 *  - num_computed_tokens is a device tensor (a StagedWriteTensor, one int32
 *    per request state) written from the host only when a request is
 *    added, by the same _apply_write_kernel (stride 1): its shadow here is
 *    a table of one column. After each step the GPU adds the step's query
 *    length (_post_update_kernel; less the rejected drafts of speculative
 *    decoding, which this never sees: its count can only run ahead, which
 *    names fewer blocks fresh, never more).
 *  - _prepare_pos_seq_lens_kernel(pos, seq_lens, idx_mapping,
 *    query_start_loc, num_computed_tokens, max_num_reqs), grid (requests +
 *    1,): for request i, row idx_mapping[i] (uploaded) has c tokens
 *    computed (the shadow) and computes q = query_start_loc[i+1] -
 *    query_start_loc[i] (uploaded) now; the shadow then moves to c + q.
 *  - _compute_slot_mapping_kernel(num_tokens, max_num_tokens,
 *    query_start_loc, positions, block_table, block_table_stride,
 *    block_size, slot_mapping) links the slot mapping to the table and
 *    gives the block size (kvt_decode_link_slots).
 * At the gather with the same idx_mapping, the blocks of row idx_mapping[i]
 * from the first that starts at or after c up to the one holding token
 * c + q - 1 are fresh: none of their tokens was computed before. A row
 * needing more blocks than num_blocks gives is a mismatch of this
 * reasoning: it stops (one warning), the table feed goes on.
 *
 * Mismatches (decode.h): a stride out of range or changed for a table, a
 * row index past KVT_DECODE_ROWS, a write past its row, cu_lens that
 * decrease, a gather of more ids than its row holds. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "decode.h"
#include "evidence.h"
#include "tables.h"   /* KVT_TABLE_MAX_BYTES */
#include "../base/kvt.h"

#define TABLES     4                /* device tables kept in shadow */
#define ROWS       8192             /* rows (request states) per table */
#define MAX_STRIDE 65536            /* ids per row */
#define ENTRIES    (1u << 24)       /* ids per shadow (64 MiB, mapped NORESERVE) */
#define BATCH      256              /* writes or rows read per system call */
#define FEED_IDS   (KVT_TABLE_MAX_BYTES / 4)
#define NB_SPAN    1024             /* rows whose lengths are read at once */

struct shadow {
	uint64_t table;             /* atomic: the device table, 0 = free */
	int busy;                   /* atomic: a hook is using it */
	/* under busy */
	int64_t stride;
	int32_t *e;                 /* ROWS x stride */
	uint32_t valid[ROWS];       /* leading ids of each row known */
};

static struct shadow sh[TABLES];
static __thread int32_t *feed;      /* the ids handed to the tables source */

/* The step's requests as the prep kernel saw them, for the gather with the
 * same idx_mapping. c[i] < 0: the row's computed count is not known. */
struct pending {
	uint64_t map;
	uint32_t n;
	int32_t row[ROWS], c[ROWS], q[ROWS];
	int32_t fresh[FEED_IDS];
};
static __thread struct pending *pend;
static uint32_t fresh_misses;       /* atomic */
static int fresh_off;               /* atomic: the fresh blocks stopped for good */
static int fresh_warned;            /* atomic */

static void drop(struct shadow *s)
{
	__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
}

/* The shadow of table, claimed (busy); a new one when absent and create.
 * NULL when all are taken or another hook holds it (rare: a server's
 * steps run on one thread). */
static struct shadow *hold(uint64_t table, int create)
{
	struct shadow *s = NULL;
	for (int i = 0; i < TABLES && !s; i++)
		if (__atomic_load_n(&sh[i].table, __ATOMIC_ACQUIRE) == table)
			s = &sh[i];
	for (int i = 0; i < TABLES && !s && create; i++) {
		uint64_t none = 0;
		if (__atomic_compare_exchange_n(&sh[i].table, &none, table, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE) || none == table)
			s = &sh[i];
	}
	if (!s || __atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE))
		return NULL;
	if (__atomic_load_n(&s->table, __ATOMIC_ACQUIRE) != table) {   /* reset between */
		drop(s);
		return NULL;
	}
	return s;
}

/* The shadow's stride is stride (a new one forgets every row); 0 when it
 * cannot be (out of range, no memory). */
static int set_stride(struct shadow *s, int64_t stride)
{
	if (stride < 1 || stride > MAX_STRIDE)
		return 0;
	if (!s->e) {
		void *p = kvt_sys_map_own((size_t)ENTRIES * sizeof(int32_t), MAP_NORESERVE);
		if (p == MAP_FAILED)
			return 0;
		s->e = p;
	}
	if (s->stride != stride) {
		memset(s->valid, 0, sizeof s->valid);
		s->stride = stride;
	}
	return 1;
}

static uint32_t max_rows(const struct shadow *s)
{
	uint64_t r = ENTRIES / (uint64_t)s->stride;
	return r < ROWS ? (uint32_t)r : ROWS;
}

/* Read n int32 of host (UVA) memory at a. */
static int uva(int32_t *out, uint64_t a, unsigned n)
{
	return kvt_prof_read_self(out, a, (size_t)n * 4) == (size_t)n * 4;
}

/* _apply_write_kernel(output, output_stride, write_indices, write_starts,
 * write_contents, write_cu_lens), grid (writes,). */
static int apply_launch(const uint64_t *p, unsigned gx, uint64_t stream)
{
	(void)stream;
	uint64_t table = p[0], idx = p[2], starts = p[3], contents = p[4], cul = p[5];
	int64_t stride;
	memcpy(&stride, &p[1], 8);
	if (!gx)
		return 0;
	struct shadow *s = hold(table, 1);
	if (!s)
		return 0;
	int r = 0;
	if (!set_stride(s, stride) || gx > ROWS) {
		r = -1;
		goto out;
	}
	uint32_t rows = max_rows(s);
	int32_t ri[BATCH], st[BATCH], cl[BATCH + 1];
	for (unsigned k0 = 0; k0 < gx; k0 += BATCH) {
		unsigned n = gx - k0 < BATCH ? gx - k0 : BATCH;
		cl[0] = 0;                          /* write k ends at cu_lens[k] */
		if (!uva(ri, idx + 4ull * k0, n) || !uva(st, starts + 4ull * k0, n) ||
		    !uva(k0 ? cl : cl + 1, cul + 4ull * (k0 ? k0 - 1 : 0), k0 ? n + 1 : n)) {
			r = -1;                     /* UVA that cannot be read: not this layout */
			goto out;
		}
		for (unsigned k = 0; k < n; k++) {
			int32_t row = ri[k], start = st[k], c0 = cl[k], c1 = cl[k + 1];
			if (row < 0 || (uint32_t)row >= rows || start < 0 || c0 < 0 || c1 < c0 ||
			    (int64_t)start + (c1 - c0) > stride) {
				r = -1;
				goto out;
			}
			int32_t *e = s->e + (size_t)row * (size_t)stride;
			uint32_t *v = &s->valid[row];
			/* the ids, from the upload's host source straight into the row
			 * (a failed read leaves them unknown, below) */
			size_t nb = 4ull * (uint64_t)(c1 - c0);
			int known = kvt_decode_staged(contents + 4ull * (uint64_t)c0, e + start, nb) == nb;
			if (!known)
				*v = *v < (uint32_t)start ? *v : (uint32_t)start;   /* known up to here */
			else if ((uint32_t)start <= *v || start == 0)
				*v = (uint32_t)(start + (c1 - c0));
		}
	}
out:
	if (r < 0)
		memset(s->valid, 0, sizeof s->valid);   /* nothing it holds is trusted */
	drop(s);
	kvt_decode_consume(contents);
	return r;
}

/* The block size the slot mapping computed from table dst uses; 0 when
 * no slot-mapping kernel linked them yet. */
static uint32_t vllm_block_size(uint64_t dst)
{
	uint32_t bs = 0;
	return kvt_decode_slots_table(dst, &bs) ? bs : 0;
}

/* Request i of the pending batch, whose row holds ids e[0..valid) of which
 * the step reads nb: its fresh ids appended to pd->fresh. 1 when the row
 * cannot hold the tokens the step computes (a mismatch), else 0. */
static int fresh_of(struct pending *pd, uint32_t i, uint32_t bs, uint32_t nb, const int32_t *e,
		    uint32_t valid, uint32_t *nfresh)
{
	uint64_t c = (uint64_t)pd->c[i], end = c + (uint64_t)pd->q[i];
	uint64_t need = (end + bs - 1) / bs, j = (c + bs - 1) / bs;
	if (need > nb)
		return 1;
	for (; j < need && j < valid && *nfresh < FEED_IDS; j++)
		pd->fresh[(*nfresh)++] = e[j];
	return 0;
}

static void fresh_miss(void)
{
	if (__atomic_add_fetch(&fresh_misses, 1, __ATOMIC_RELAXED) >= KVT_DECODE_MISMATCHES)
		__atomic_store_n(&fresh_off, 1, __ATOMIC_RELAXED);
}

int kvt_decode_fresh_stopped(void)
{
	return __atomic_load_n(&fresh_off, __ATOMIC_RELAXED) &&
	       !__atomic_exchange_n(&fresh_warned, 1, __ATOMIC_RELAXED);
}

/* _prepare_pos_seq_lens_kernel(pos, seq_lens, idx_mapping, query_start_loc,
 * num_computed_tokens, max_num_reqs), grid (requests + 1,). */
static int prep_launch(const uint64_t *p, unsigned gx, uint64_t stream)
{
	(void)stream;
	uint64_t map = p[2], cuq = p[3], computed = p[4];
	if (gx < 2 || __atomic_load_n(&fresh_off, __ATOMIC_RELAXED))
		return 0;
	uint32_t n = gx - 1;
	if (n > ROWS)
		return -1;
	if (!pend) {
		void *m = kvt_sys_map_own(sizeof *pend, MAP_NORESERVE);
		if (m == MAP_FAILED)
			return 0;
		pend = m;
	}
	struct pending *pd = pend;
	pd->map = 0;
	struct shadow *s = hold(computed, 0);
	if (!s)
		return 0;                           /* no staged write seen to it yet */
	int r = 0;
	if (s->stride != 1) {
		r = -1;
		goto out;
	}
	uint32_t rows = max_rows(s);
	for (uint32_t i0 = 0; i0 < n; i0 += BATCH) {
		uint32_t k = n - i0 < BATCH ? n - i0 : BATCH;
		int32_t ri[BATCH], cq[BATCH + 1];
		if (kvt_decode_staged(map + 4ull * i0, ri, 4ull * k) != 4ull * k ||
		    kvt_decode_staged(cuq + 4ull * i0, cq, 4ull * (k + 1)) != 4ull * (k + 1))
			goto out;                   /* the uploads not seen: nothing pending */
		for (uint32_t i = 0; i < k; i++) {
			int32_t row = ri[i], q = cq[i + 1] - cq[i];
			if (row < 0 || (uint32_t)row >= rows || q < 0) {
				r = -1;
				goto out;
			}
			pd->row[i0 + i] = row;
			pd->q[i0 + i] = q;
			pd->c[i0 + i] = -1;
			if (s->valid[row] >= 1 && s->e[row] >= 0) {
				pd->c[i0 + i] = s->e[row];
				s->e[row] += q;     /* as _post_update_kernel will */
			}
		}
	}
	pd->n = n;
	pd->map = map;
out:
	if (r < 0)
		memset(s->valid, 0, sizeof s->valid);
	drop(s);
	return r;
}

/* _compute_slot_mapping_kernel(num_tokens, max_num_tokens, query_start_loc,
 * positions, block_table, block_table_stride, block_size, slot_mapping). */
static int slots_launch(const uint64_t *p, unsigned gx, uint64_t stream)
{
	(void)gx;
	(void)stream;
	int32_t bs = (int32_t)(uint32_t)p[6];
	if (bs <= 0 || bs > 65536)
		return -1;
	kvt_decode_link_slots(p[7], p[4], (uint32_t)bs);
	return 0;
}

/* _gather_block_tables_kernel(idx_mapping, block_table, input_block_tables,
 * stride, num_blocks), grid (requests,). */
static int gather_launch(const uint64_t *p, unsigned gx, uint64_t stream)
{
	(void)stream;
	uint64_t map = p[0], table = p[1], dst = p[2], nblocks = p[4];
	int64_t stride;
	memcpy(&stride, &p[3], 8);
	if (!gx)
		return 0;
	/* the prep kernel's view of this batch */
	struct pending *pd = pend && pend->map == map && pend->n == gx &&
			     !__atomic_load_n(&fresh_off, __ATOMIC_RELAXED) ? pend : NULL;
	uint32_t bs = 0, nfresh = 0;
	int bad = 0;
	struct shadow *s = hold(table, 0);
	if (!s)
		return 0;                           /* no write seen to it yet */
	int r = 0;
	uint32_t nfed = 0;
	if (pd)
		bs = vllm_block_size(dst);
	if (stride != s->stride || gx > ROWS) {
		r = -1;
		goto out;
	}
	if (!feed) {
		void *f = kvt_sys_map_own((size_t)FEED_IDS * sizeof(int32_t), MAP_NORESERVE);
		if (f == MAP_FAILED)
			goto out;
		feed = f;
	}
	uint32_t rows = max_rows(s);
	int32_t ri[BATCH], nbs[NB_SPAN];
	for (unsigned i0 = 0; i0 < gx; i0 += BATCH) {
		unsigned n = gx - i0 < BATCH ? gx - i0 : BATCH;
		if (kvt_decode_staged(map + 4ull * i0, ri, 4ull * n) != 4ull * n)
			goto out;                   /* the mapping's upload not seen: feed nothing */
		int32_t lo = INT32_MAX, hi = -1;
		for (unsigned i = 0; i < n; i++) {
			if (ri[i] < 0 || (uint32_t)ri[i] >= rows) {
				r = -1;
				goto out;
			}
			lo = ri[i] < lo ? ri[i] : lo;
			hi = ri[i] > hi ? ri[i] : hi;
		}
		/* the rows' lengths, in one read where they lie close */
		int span = hi - lo < NB_SPAN && uva(nbs, nblocks + 4ull * (uint32_t)lo,
						   (unsigned)(hi - lo + 1));
		for (unsigned i = 0; i < n; i++) {
			int32_t row = ri[i], nb;
			if (span)
				nb = nbs[row - lo];
			else if (!uva(&nb, nblocks + 4ull * (uint32_t)row, 1)) {
				r = -1;
				goto out;
			}
			if (nb < 0 || nb > stride) {
				r = -1;
				goto out;
			}
			uint32_t k = (uint32_t)nb < s->valid[row] ? (uint32_t)nb : s->valid[row];
			if (k > FEED_IDS - nfed)
				k = FEED_IDS - nfed;
			memcpy(feed + nfed, s->e + (size_t)row * (size_t)stride, 4ull * k);
			nfed += k;
			if (bs && !bad && pd->row[i0 + i] == row && pd->c[i0 + i] >= 0)
				bad = fresh_of(pd, i0 + i, bs, (uint32_t)nb,
					       s->e + (size_t)row * (size_t)stride, s->valid[row],
					       &nfresh);
		}
	}
out:
	if (r < 0)
		memset(s->valid, 0, sizeof s->valid);
	drop(s);
	kvt_decode_consume(map);
	if (pd)
		pd->map = 0;                        /* one gather per prep */
	if (bad)
		fresh_miss();
	else if (r >= 0 && nfresh)
		kvt_decode_fresh(dst, pd->fresh, nfresh);
	if (r < 0 || !nfed)
		return r;
	kvt_decode_feed(dst, feed, nfed);
	return 1;
}

/* The fresh blocks' state (the prep and slot-mapping decoders'): the
 * shadows stay. */
static void reset_fresh(void)
{
	__atomic_store_n(&fresh_misses, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&fresh_off, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&fresh_warned, 0, __ATOMIC_RELAXED);
	if (pend)
		pend->map = 0;
}

static void reset(void)
{
	reset_fresh();
	for (int i = 0; i < TABLES; i++) {
		struct shadow *s = &sh[i];
		if (__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE))
			continue;                   /* a hook holds it: it is being used */
		memset(s->valid, 0, sizeof s->valid);
		s->stride = 0;
		__atomic_store_n(&s->table, 0, __ATOMIC_RELEASE);
		drop(s);
	}
}

const struct kvt_decoder kvt_dec_vllm_v2_apply = {
	.name = "vllm_v2_apply",
	.kernel = "_apply_write_kernel",
	.follows = "vLLM Model Runner V2, vllm/v1/worker/gpu/buffer_utils.py @01a3d5a",
	.nparams = 6,
	.launch = apply_launch,
	.reset = reset,
};

const struct kvt_decoder kvt_dec_vllm_v2_gather = {
	.name = "vllm_v2_gather",
	.kernel = "_gather_block_tables_kernel",
	.follows = "vLLM Model Runner V2, vllm/v1/worker/gpu/block_table.py @00bd149",
	.nparams = 5,
	.launch = gather_launch,
	.reset = reset,
};

const struct kvt_decoder kvt_dec_vllm_v2_prep = {
	.name = "vllm_v2_prep",
	.kernel = "_prepare_pos_seq_lens_kernel",
	.follows = "vLLM Model Runner V2, vllm/v1/worker/gpu/input_batch.py",
	.nparams = 6,
	.four = 1u << 5,
	.launch = prep_launch,
	.reset = reset_fresh,
};

const struct kvt_decoder kvt_dec_vllm_v2_slots = {
	.name = "vllm_v2_slots",
	.kernel = "_compute_slot_mapping_kernel",
	.follows = "vLLM Model Runner V2, vllm/v1/worker/gpu/block_table.py @00bd149",
	.nparams = 8,
	.four = 1u << 0 | 1u << 1 | 1u << 6,
	.launch = slots_launch,
	.reset = reset_fresh,
};
