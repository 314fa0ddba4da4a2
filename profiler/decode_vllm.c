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
 *    appended ids: write k puts contents[cu_lens[k], cu_lens[k+1]) in row
 *    indices[k] from column starts[k]. indices, starts and cu_lens are UVA
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

/* Fresh blocks (measured, not acted on): what _prepare_pos_seq_lens_kernel
 * read this step, by batch position: each request's first token computed
 * now (num_computed_tokens, UVA) and how many (query_start_loc, uploaded),
 * for the gather with the same idx_mapping; and the tokens per block,
 * from _compute_slot_mapping_kernel's block_size. A block whose first
 * token a step computes is one the request took fresh: its old contents
 * are dead. */
#define PREP_ROWS 1024
static struct {
	int busy;                   /* atomic: a hook is using it */
	uint64_t map;               /* the idx_mapping it is for; 0: none */
	unsigned n;
	int32_t first[PREP_ROWS], q[PREP_ROWS];
} prep;
static uint32_t block_tokens;       /* atomic: 0 until a slot mapping named it */

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
		if (!uva(ri, idx + 4ull * k0, n) || !uva(st, starts + 4ull * k0, n) ||
		    !uva(cl, cul + 4ull * k0, n + 1)) {
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
	struct shadow *s = hold(table, 0);
	if (!s)
		return 0;                           /* no write seen to it yet */
	int r = 0, have_prep = 0, prep_ok;
	uint32_t nfed = 0, bt;
	uint64_t fresh = 0;
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
	bt = __atomic_load_n(&block_tokens, __ATOMIC_RELAXED);
	have_prep = bt && !__atomic_exchange_n(&prep.busy, 1, __ATOMIC_ACQUIRE);
	prep_ok = have_prep && prep.map == map && prep.n == gx;
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
			if (prep_ok) {              /* the blocks whose first token is computed now */
				uint64_t f = (uint64_t)prep.first[i0 + i];
				uint64_t j0 = (f + bt - 1) / bt, j1 = (f + (uint64_t)prep.q[i0 + i] + bt - 1) / bt;
				if (j1 > k)
					j1 = k;
				fresh += j1 > j0 ? j1 - j0 : 0;
			}
			if (k > FEED_IDS - nfed)
				k = FEED_IDS - nfed;
			memcpy(feed + nfed, s->e + (size_t)row * (size_t)stride, 4ull * k);
			nfed += k;
		}
	}
out:
	if (have_prep)
		__atomic_store_n(&prep.busy, 0, __ATOMIC_RELEASE);
	if (r < 0)
		memset(s->valid, 0, sizeof s->valid);
	else if (fresh)
		kvt_decode_count_fresh(fresh);
	drop(s);
	kvt_decode_consume(map);
	if (r < 0 || !nfed)
		return r;
	kvt_decode_feed(dst, feed, nfed);
	return 1;
}

/* _prepare_pos_seq_lens_kernel(idx_mapping, query_start_loc,
 * num_computed_tokens, pos, seq_lens, max_num_reqs), grid (requests + 1,):
 * idx_mapping and query_start_loc uploaded this step, num_computed_tokens
 * UVA. Kept for the gather; feeds nothing. */
static int prep_launch(const uint64_t *p, unsigned gx, uint64_t stream)
{
	(void)stream;
	uint64_t map = p[0], cuq = p[1], computed = p[2];
	if (gx < 2)
		return 0;
	unsigned n = gx - 1;
	if (n > PREP_ROWS || __atomic_exchange_n(&prep.busy, 1, __ATOMIC_ACQUIRE))
		return 0;
	int r = 0;
	prep.map = 0;
	int32_t ri[BATCH], cl[BATCH + 1];
	for (unsigned i0 = 0; i0 < n; i0 += BATCH) {
		unsigned m = n - i0 < BATCH ? n - i0 : BATCH;
		if (kvt_decode_staged(map + 4ull * i0, ri, 4ull * m) != 4ull * m ||
		    kvt_decode_staged(cuq + 4ull * i0, cl, 4ull * (m + 1)) != 4ull * (m + 1))
			goto out;                   /* the uploads not seen: nothing kept */
		for (unsigned i = 0; i < m; i++) {
			int32_t c;
			if (ri[i] < 0 || ri[i] >= ROWS || cl[i + 1] < cl[i] ||
			    !uva(&c, computed + 4ull * (uint32_t)ri[i], 1) || c < 0) {
				r = -1;
				goto out;
			}
			prep.first[i0 + i] = c;
			prep.q[i0 + i] = cl[i + 1] - cl[i];
		}
	}
	prep.n = n;
	prep.map = map;
out:
	__atomic_store_n(&prep.busy, 0, __ATOMIC_RELEASE);
	return r;
}

/* _compute_slot_mapping_kernel(num_tokens, max_num_tokens, query_start_loc,
 * positions, block_table, block_table_stride, block_size, slot_mapping):
 * the tokens per block. */
static int slots_launch(const uint64_t *p, unsigned gx, uint64_t stream)
{
	(void)gx;
	(void)stream;
	uint64_t bs = p[6];
	if (bs < 1 || bs > 65536)
		return -1;
	__atomic_store_n(&block_tokens, (uint32_t)bs, __ATOMIC_RELAXED);
	return 0;
}

static void reset(void)
{
	for (int i = 0; i < TABLES; i++) {
		struct shadow *s = &sh[i];
		if (__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE))
			continue;                   /* a hook holds it: it is being used */
		memset(s->valid, 0, sizeof s->valid);
		s->stride = 0;
		__atomic_store_n(&s->table, 0, __ATOMIC_RELEASE);
		drop(s);
	}
	if (!__atomic_exchange_n(&prep.busy, 1, __ATOMIC_ACQUIRE)) {
		prep.map = 0;
		__atomic_store_n(&prep.busy, 0, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&block_tokens, 0, __ATOMIC_RELAXED);
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
	.reset = reset,
};

const struct kvt_decoder kvt_dec_vllm_v2_slots = {
	.name = "vllm_v2_slots",
	.kernel = "_compute_slot_mapping_kernel",
	.follows = "vLLM Model Runner V2, vllm/v1/worker/gpu/block_table.py",
	.nparams = 8,
	.four = 1u << 0 | 1u << 1 | 1u << 6,
	.launch = slots_launch,
	.reset = reset,
};
