/* SPDX-License-Identifier: MIT */
/* serve-like personas for vLLM's default paths (docs/workloads.md "Server
 * personas" has the interface tables and the sources):
 *   vllm-v1-fa  V1 model runner with FlashAttention: whole block-table rows
 *               go up from a pinned buffer to a fixed address; slot mapping
 *               is computed on the GPU; per layer reshape_and_cache_flash
 *               writes the new rows and one FA2 kernel, handed a params
 *               struct by value, reads them.
 *   vllm-v2     Model Runner V2: the block table and num_computed_tokens
 *               live on the GPU; each step uploads only the appended block
 *               ids and a new request's computed count (to fresh
 *               caching-allocator addresses), and _apply_write_kernel reads
 *               their positions from pinned UVA buffers with no copy; a
 *               gather kernel builds the step's input block tables on the
 *               GPU; decode-only steps replay a full CUDA graph per batch
 *               size, captured at start-up; _post_update_kernel advances
 *               num_computed_tokens on the GPU after the model.
 * Test infrastructure: stdio and exit() are fine here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* What a persona's step computes on the host for the running requests: in
 * batch order, each one's tokens, its first new token, and the positions
 * of the tokens it computes now. */
struct sv_batch {
	unsigned n, ntok;
	bool decode_only;
	int idx[1024];              /* index into v->run */
};

static void sv_batch(struct sv *v, struct sv_batch *b)
{
	b->n = b->ntok = 0;
	b->decode_only = true;
	for (int i = 0; i < v->nr_run && b->n < 1024; i++) {
		const struct sv_running *r = &v->run[i];
		if (r->loading)
			continue;
		b->idx[b->n++] = i;
		b->ntok += r->prefill ? r->prompt - r->start : 1;
		b->decode_only &= !r->prefill;
	}
}

static uint32_t sv_len(const struct sv_running *r)
{
	return r->prefill ? r->prompt : r->prompt + r->produced;
}

static uint32_t sv_first(const struct sv_running *r)
{
	return r->prefill ? r->start : r->prompt + r->produced - 1;
}

/* ---- the slot mapping, computed on the GPU from the table ---- */

/* _compute_slot_mapping_kernel(num_tokens, max_num_tokens, query_start_loc,
 * positions, block_table, block_table_stride, block_size, slot_mapping):
 * one program per request and one more that pads [num_tokens,
 * max_num_tokens) with -1 (PAD_SLOT_ID). */
static int sv_slots_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	int ntok = *(const int *)args[0], maxtok = *(const int *)args[1];
	const int32_t *cuq = *(const int32_t *const *)args[2];
	const int64_t *pos = *(const int64_t *const *)args[3];
	const int32_t *table = *(const int32_t *const *)args[4];
	int64_t stride = *(const int64_t *)args[5];
	int bs = *(const int *)args[6];
	int64_t *slots = *(int64_t *const *)args[7];
	unsigned grid[3];
	v->kgrid(grid);
	int r = 0;
	for (unsigned i = 0; i + 1 < grid[0] && !r; i++) {
		int32_t q[2];
		r = v->kread(cuq + i, q, sizeof q);
		for (int32_t t = q[0]; t < q[1] && !r; t++) {
			int64_t p;
			int32_t id;
			r = v->kread(pos + t, &p, sizeof p);
			if (!r)
				r = v->kread(table + i * stride + p / bs, &id, sizeof id);
			int64_t s = (int64_t)id * bs + p % bs;
			if (!r)
				r = v->kwrite(slots + t, &s, sizeof s);
		}
	}
	for (int t = ntok; t < maxtok && !r; t++) {
		int64_t pad = -1;
		r = v->kwrite(slots + t, &pad, sizeof pad);
	}
	return r;
}

static CUfunction sv_slots_fn(struct sv *v)
{
	static CUfunction f;
	static const struct fakecuda_param p[] = {
		{ 4, 4 }, { 4, 4 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 4, 4 }, { 8, 8 },
	};
	if (!f)
		f = sv_define(v, "_compute_slot_mapping_kernel", p, 8, sv_slots_body);
	return f;
}

static void sv_slots(struct sv *v, int ntok, int maxtok, void *cuq, void *pos, void *table,
		     int64_t stride, void *slots, unsigned nreq)
{
	int bs = WL_BLOCK_TOKENS;
	void *args[] = { &ntok, &maxtok, &cuq, &pos, &table, &stride, &bs, &slots };
	sv_launch_grid(v, sv_slots_fn(v), nreq + 1, args);
}

/* One layer's kernels: the dense GEMMs, the KV write, the attention. */
static void sv_layer(struct sv *v, int l, uint64_t flops, int fa3, void *slots, unsigned ntok,
		     void *table, uint64_t tstride, void *seqlens, void *cuq, unsigned b)
{
	CUdeviceptr k = (CUdeviceptr)(uintptr_t)v->region[2 * l];
	CUdeviceptr vv = (CUdeviceptr)(uintptr_t)v->region[2 * l + 1];
	uint64_t row_el = v->o.row_bytes / 2;
	sv_gemm(v, l, flops);
	sv_cache_write(v, "_Z30reshape_and_cache_flash_kernelI13__nv_bfloat16S0_L18Fp8KVCacheDataType0EEvPKT_S4_PT0_S6_PKllllllllPKfSA_i",
		       k, vv, (CUdeviceptr)(uintptr_t)slots, ntok, WL_BLOCK_TOKENS);
	struct sv_fa_args a = {
		.k = k, .v = vv, .table = (CUdeviceptr)(uintptr_t)table,
		.seqused_k = (CUdeviceptr)(uintptr_t)seqlens,
		.cu_seqlens_q = (CUdeviceptr)(uintptr_t)cuq, .page_el = row_el * WL_BLOCK_TOKENS,
		.row_el = row_el, .table_stride = tstride, .page = WL_BLOCK_TOKENS, .b = b,
	};
	sv_fa_launch(v, fa3, &a);
}

/* ---- vllm-v1-fa ---- */

struct sv_v1fa {
	int32_t *h_table, *h_seqlens, *h_cuq;  /* pinned (CpuGpuBuffer's CPU side) */
	int64_t *h_pos;
	int32_t *d_table, *d_seqlens, *d_cuq;  /* fixed device destinations */
	int64_t *d_pos, *d_slots;
	unsigned maxtok;
};

static void sv_v1fa_setup(struct sv *v)
{
	struct sv_v1fa *s = calloc(1, sizeof *s);
	if (!s)
		wl_die("out of host memory");
	unsigned max = (unsigned)v->o.max_batch;
	s->maxtok = v->max_step_tokens;
	size_t tb = (size_t)max * v->width * sizeof(int32_t);
	WL_CK(cudaMallocHost((void **)&s->h_table, tb));
	WL_CK(cudaMallocHost((void **)&s->h_seqlens, max * sizeof(int32_t)));
	WL_CK(cudaMallocHost((void **)&s->h_cuq, (max + 1) * sizeof(int32_t)));
	WL_CK(cudaMallocHost((void **)&s->h_pos, s->maxtok * sizeof(int64_t)));
	WL_CK(cudaMalloc((void **)&s->d_table, tb));
	WL_CK(cudaMalloc((void **)&s->d_seqlens, max * sizeof(int32_t)));
	WL_CK(cudaMalloc((void **)&s->d_cuq, (max + 1) * sizeof(int32_t)));
	WL_CK(cudaMalloc((void **)&s->d_pos, s->maxtok * sizeof(int64_t)));
	WL_CK(cudaMalloc((void **)&s->d_slots, s->maxtok * sizeof(int64_t)));
	v->ps = s;
}

/* Prefills and decodes in one varlen batch, as vLLM V1 runs them. */
static void sv_v1fa_step(struct sv *v)
{
	struct sv_v1fa *s = v->ps;
	struct sv_batch b;
	sv_batch(v, &b);
	s->h_cuq[0] = 0;
	unsigned t = 0;
	for (unsigned i = 0; i < b.n; i++) {
		const struct sv_running *r = &v->run[b.idx[i]];
		int32_t *row = s->h_table + (size_t)i * v->width;
		for (uint32_t j = 0; j < r->nblocks; j++)
			row[j] = (int32_t)r->blocks[j];
		uint32_t len = sv_len(r);
		s->h_seqlens[i] = (int32_t)len;
		for (uint32_t p = sv_first(r); p < len; p++)
			s->h_pos[t++] = p;
		s->h_cuq[i + 1] = (int32_t)t;
	}
	if (!b.n)
		return;
	size_t tb = (size_t)b.n * v->width * sizeof(int32_t);
	WL_CK(cudaMemcpyAsync(s->d_table, s->h_table, tb, cudaMemcpyHostToDevice, v->stream));
	WL_CK(cudaMemcpyAsync(s->d_seqlens, s->h_seqlens, b.n * sizeof(int32_t),
			      cudaMemcpyHostToDevice, v->stream));
	WL_CK(cudaMemcpyAsync(s->d_cuq, s->h_cuq, (b.n + 1) * sizeof(int32_t),
			      cudaMemcpyHostToDevice, v->stream));
	WL_CK(cudaMemcpyAsync(s->d_pos, s->h_pos, t * sizeof(int64_t), cudaMemcpyHostToDevice,
			      v->stream));
	sv_uploaded(v, tb + b.n * sizeof(int32_t) + (b.n + 1) * sizeof(int32_t) +
			   t * sizeof(int64_t));
	sv_before_kernels(v);
	sv_slots(v, (int)t, (int)t, s->d_cuq, s->d_pos, s->d_table, v->width, s->d_slots, b.n);
	uint64_t flops = (uint64_t)(sv_prefill_flops(v) / v->o.layers);
	v->prefill_flops += flops * (uint64_t)v->o.layers;
	for (int l = 0; l < v->o.layers; l++)
		sv_layer(v, l, flops, 0, s->d_slots, t, s->d_table, v->width, s->d_seqlens,
			 s->d_cuq, b.n);
}

const struct sv_persona sv_vllm_v1_fa = {
	.name = "vllm-v1-fa",
	.follows = "vLLM V1 model runner, FLASH_ATTN backend (FA2 params struct)",
	.allocs = SV_KV_PER_LAYER,
	.zero_fill = true,
	.setup = sv_v1fa_setup,
	.step = sv_v1fa_step,
};

/* ---- vllm-v2 ---- */

#define SV_RING 8            /* caching-allocator blocks a fresh tensor cycles through */
#define SV_BUCKETS 16

/* One StagedWriteTensor's write path (vllm/v1/worker/gpu/buffer_utils.py):
 * the write indices, starts and cu_lens in UVA buffers of its own (pinned,
 * mapped: _apply_write_kernel reads them in place), the contents uploaded
 * at each apply from pinned memory to a fresh device tensor (a ring).
 * Write k: contents [k ? cu_lens[k-1] : 0, cu_lens[k]) at row indices[k]
 * from column starts[k] (cu_lens holds each write's end, no leading 0,
 * as buffer_utils.py @01a3d5a stages and _apply_write_kernel reads it). */
struct sv_staged {
	int32_t *u_idx, *u_starts, *u_cul;
	int32_t *du_idx, *du_starts, *du_cul;
	int32_t *h_src[SV_RING], *d_src[SV_RING];
	unsigned nw, n;            /* writes and contents staged */
};

struct sv_v2 {
	/* the persistent GPU tensors, one row per request state: the block
	 * table (BlockTables) and num_computed_tokens (RequestState), each a
	 * StagedWriteTensor with its own write buffers */
	int32_t *d_table, *d_computed;
	struct sv_staged tw, cw;
	int *row_of;               /* schedule index -> row, -1 */
	int *row_q;                /* row -> schedule index, -1: free */
	uint32_t *written;         /* row -> block ids in the device row */
	int32_t *computed_np;      /* row -> num_computed_tokens, the host mirror */
	/* UVA num_blocks (UvaBackedTensor): the gather reads it in place */
	int32_t *u_nblocks, *du_nblocks;
	unsigned nr_uva;
	/* fresh per step: pinned source and device tensor, from a ring */
	int32_t *h_map[SV_RING], *d_map[SV_RING];
	unsigned ring;
	/* persistent inputs (a graph reads them at fixed addresses) */
	int32_t *h_cuq, *d_cuq, *d_seqlens, *d_input_tables;
	int64_t *d_pos, *d_slots;
	unsigned maxtok;
	/* _post_update_kernel's other tensors: small device buffers, zeroed
	 * once, that the persona's body never touches (but num_rejected, read
	 * as vLLM reads it: 0, no speculative decoding) */
	int32_t *d_last, *d_bins, *d_sampled, *d_nsampled, *d_rejected, *d_tokens, *d_total;
	/* decode graphs, one per batch-size bucket */
	unsigned bucket[SV_BUCKETS];
	cudaGraphExec_t exec[SV_BUCKETS];
	int nr_buckets;
	/* checks, printed at the end: mirror entries staged again because they
	 * differed from the scheduler's (0 expected); device entries read
	 * (fakecuda_peek: no CUDA call, no cost) and those that differed */
	uint64_t restaged, checked, bad;
};

static void *sv_uva(struct sv_v2 *s, size_t bytes, void **dev)
{
	void *h;
	WL_CK(cudaHostAlloc(&h, bytes, cudaHostAllocMapped));
	memset(h, 0, bytes);
	WL_CK(cudaHostGetDevicePointer(dev, h, 0));
	s->nr_uva++;
	return h;
}

/* rows: the tensor's rows (writes at most); src: contents at most */
static void sv_staged_init(struct sv_v2 *s, struct sv_staged *w, unsigned rows, size_t src)
{
	size_t ib = rows * sizeof(int32_t);
	w->u_idx = sv_uva(s, ib, (void **)&w->du_idx);
	w->u_starts = sv_uva(s, ib, (void **)&w->du_starts);
	w->u_cul = sv_uva(s, ib + sizeof(int32_t), (void **)&w->du_cul);
	for (int i = 0; i < SV_RING; i++) {
		WL_CK(cudaMallocHost((void **)&w->h_src[i], src * sizeof(int32_t)));
		WL_CK(cudaMalloc((void **)&w->d_src[i], src * sizeof(int32_t)));
	}
}

/* Stage a write of n contents to row from column start (stage_write);
 * returns where in this step's pinned source they go. */
static int32_t *sv_stage(struct sv_staged *w, unsigned ring, int row, uint32_t start, uint32_t n)
{
	int32_t *at = w->h_src[ring] + w->n;
	w->u_idx[w->nw] = row;
	w->u_starts[w->nw] = (int32_t)start;
	w->n += n;
	w->u_cul[w->nw++] = (int32_t)w->n;
	return at;
}

/* _apply_write_kernel(output, output_stride, write_indices, write_starts,
 * write_contents, write_cu_lens), grid (writes,). */
static int sv_apply_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	int32_t *out = *(int32_t *const *)args[0];
	int64_t stride = *(const int64_t *)args[1];
	const int32_t *idx = *(const int32_t *const *)args[2];
	const int32_t *starts = *(const int32_t *const *)args[3];
	const int32_t *contents = *(const int32_t *const *)args[4];
	const int32_t *cul = *(const int32_t *const *)args[5];
	unsigned grid[3];
	v->kgrid(grid);
	int r = 0;
	for (unsigned k = 0; k < grid[0] && !r; k++) {
		int32_t row, start, c[2];
		r = v->kread(idx + k, &row, sizeof row);
		if (!r)
			r = v->kread(starts + k, &start, sizeof start);
		c[0] = 0;
		if (!r && k)
			r = v->kread(cul + k - 1, &c[0], sizeof c[0]);
		if (!r)
			r = v->kread(cul + k, &c[1], sizeof c[1]);
		if (r || c[1] < c[0] || start + (c[1] - c[0]) > stride)
			return r ? r : CUDA_ERROR_ILLEGAL_ADDRESS;
		int32_t *ids = sv_scratch(v, (size_t)(c[1] - c[0]) + 1);
		r = v->kread(contents + c[0], ids, (size_t)(c[1] - c[0]) * sizeof *ids);
		if (!r)
			r = v->kwrite(out + row * stride + start, ids,
				      (size_t)(c[1] - c[0]) * sizeof *ids);
	}
	return r;
}

/* _prepare_pos_seq_lens_kernel(pos, seq_lens, idx_mapping, query_start_loc,
 * num_computed_tokens, max_num_reqs), grid (requests + 1,): positions and
 * sequence lengths from num_computed_tokens (device), zero past the batch. */
static int sv_prep_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	int64_t *pos = *(int64_t *const *)args[0];
	int32_t *seqlens = *(int32_t *const *)args[1];
	const int32_t *map = *(const int32_t *const *)args[2];
	const int32_t *cuq = *(const int32_t *const *)args[3];
	const int32_t *computed = *(const int32_t *const *)args[4];
	int maxreq = *(const int *)args[5];
	unsigned grid[3];
	v->kgrid(grid);
	int r = 0;
	unsigned n = grid[0] - 1;
	for (unsigned i = 0; i < n && !r; i++) {
		int32_t row, q[2], done;
		r = v->kread(map + i, &row, sizeof row);
		if (!r)
			r = v->kread(cuq + i, q, sizeof q);
		if (!r)
			r = v->kread(computed + row, &done, sizeof done);
		for (int32_t t = q[0]; t < q[1] && !r; t++) {
			int64_t p = done + (t - q[0]);
			r = v->kwrite(pos + t, &p, sizeof p);
		}
		int32_t len = done + q[1] - q[0];
		if (!r)
			r = v->kwrite(seqlens + i, &len, sizeof len);
	}
	for (int i = (int)n; i < maxreq && !r; i++) {
		int32_t zero = 0;
		r = v->kwrite(seqlens + i, &zero, sizeof zero);
	}
	return r;
}

/* _gather_block_tables_kernel(idx_mapping, src, dst, stride, num_blocks):
 * row i of dst is the first num_blocks[row] ids of the table's row
 * idx_mapping[i]. */
static int sv_gather_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	const int32_t *map = *(const int32_t *const *)args[0];
	const int32_t *src = *(const int32_t *const *)args[1];
	int32_t *dst = *(int32_t *const *)args[2];
	int64_t stride = *(const int64_t *)args[3];
	const int32_t *nb = *(const int32_t *const *)args[4];
	unsigned grid[3];
	v->kgrid(grid);
	int r = 0;
	for (unsigned i = 0; i < grid[0] && !r; i++) {
		int32_t row, n;
		r = v->kread(map + i, &row, sizeof row);
		if (!r)
			r = v->kread(nb + row, &n, sizeof n);
		if (r || n < 0 || n > stride)
			return r ? r : CUDA_ERROR_ILLEGAL_ADDRESS;
		int32_t *ids = sv_scratch(v, (size_t)n + 1);
		r = v->kread(src + row * stride, ids, (size_t)n * sizeof *ids);
		if (!r)
			r = v->kwrite(dst + i * stride, ids, (size_t)n * sizeof *ids);
	}
	return r;
}

/* _post_update_kernel(idx_mapping, num_computed_tokens, last_sampled_tokens,
 * output_bin_counts, output_bin_counts_stride, sampled_tokens,
 * sampled_tokens_stride, num_sampled, num_rejected, query_start_loc,
 * all_token_ids, all_token_ids_stride, total_len), grid (requests,): each
 * request's num_computed_tokens advances by its query length less its
 * rejected drafts. What vLLM's also does with the sampled tokens (last
 * token, bin counts, token ids, total length) is not modelled: the body
 * never touches those buffers. */
static int sv_post_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	const int32_t *map = *(const int32_t *const *)args[0];
	int32_t *computed = *(int32_t *const *)args[1];
	const int32_t *rejected = *(const int32_t *const *)args[8];
	const int32_t *cuq = *(const int32_t *const *)args[9];
	unsigned grid[3];
	v->kgrid(grid);
	int r = 0;
	for (unsigned i = 0; i < grid[0] && !r; i++) {
		int32_t row, q[2], rej, done;
		r = v->kread(map + i, &row, sizeof row);
		if (r || row < 0)                   /* a negative row: skipped */
			continue;
		r = v->kread(cuq + i, q, sizeof q);
		if (!r)
			r = v->kread(rejected + i, &rej, sizeof rej);
		if (!r)
			r = v->kread(computed + row, &done, sizeof done);
		done += q[1] - q[0] - rej;
		if (!r)
			r = v->kwrite(computed + row, &done, sizeof done);
	}
	return r;
}

static CUfunction sv_v2_fn[4];

static void sv_v2_kernels(struct sv *v)
{
	static const struct fakecuda_param apply[] = {
		{ 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 },
	};
	static const struct fakecuda_param prep[] = {
		{ 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 4, 4 },
	};
	static const struct fakecuda_param gather[] = {
		{ 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 },
	};
	static const struct fakecuda_param post[] = {
		{ 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 },
		{ 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 },
	};
	sv_v2_fn[0] = sv_define(v, "_apply_write_kernel", apply, 6, sv_apply_body);
	sv_v2_fn[1] = sv_define(v, "_prepare_pos_seq_lens_kernel", prep, 6, sv_prep_body);
	sv_v2_fn[2] = sv_define(v, "_gather_block_tables_kernel", gather, 5, sv_gather_body);
	sv_v2_fn[3] = sv_define(v, "_post_update_kernel", post, 13, sv_post_body);
}

/* The decode graph of batch size n: every layer's kernels over the
 * persistent inputs, padded tokens' slots -1 and lengths 0. */
static void sv_v2_capture(struct sv *v, struct sv_v2 *s, int k)
{
	unsigned n = s->bucket[k];
	cudaGraph_t g;
	WL_CK(cudaStreamBeginCapture(v->stream, cudaStreamCaptureModeThreadLocal));
	for (int l = 0; l < v->o.layers; l++)
		sv_layer(v, l, 0, 1, s->d_slots, n, s->d_input_tables, v->width, s->d_seqlens,
			 s->d_cuq, n);
	WL_CK(cudaStreamEndCapture(v->stream, &g));
	WL_CK(cudaGraphInstantiate(&s->exec[k], g, 0));
	WL_CK(cudaGraphDestroy(g));
}

/* The device tensors, zeroed as torch.zeros makes them. */
static void sv_v2_tensors(struct sv *v, struct sv_v2 *s)
{
	unsigned max = (unsigned)v->o.max_batch;
	size_t tb = (size_t)max * v->width * sizeof(int32_t), ib = max * sizeof(int32_t);
	WL_CK(cudaMalloc((void **)&s->d_table, tb));
	WL_CK(cudaMemset(s->d_table, 0, tb));
	WL_CK(cudaMalloc((void **)&s->d_input_tables, tb));
	WL_CK(cudaMalloc((void **)&s->d_computed, ib));
	WL_CK(cudaMemset(s->d_computed, 0, ib));
	int32_t **post[] = { &s->d_last, &s->d_bins, &s->d_sampled, &s->d_nsampled,
			     &s->d_rejected, &s->d_tokens, &s->d_total };
	for (size_t i = 0; i < sizeof post / sizeof post[0]; i++) {
		WL_CK(cudaMalloc((void **)post[i], ib));
		WL_CK(cudaMemset(*post[i], 0, ib));
	}
}

static void sv_v2_setup(struct sv *v)
{
	struct sv_v2 *s = calloc(1, sizeof *s);
	unsigned max = (unsigned)v->o.max_batch;
	if (!s || !(s->row_of = malloc((size_t)v->s.nr * sizeof *s->row_of)) ||
	    !(s->row_q = malloc(max * sizeof *s->row_q)) ||
	    !(s->written = calloc(max, sizeof *s->written)) ||
	    !(s->computed_np = calloc(max, sizeof *s->computed_np)))
		wl_die("out of host memory");
	for (int i = 0; i < v->s.nr; i++)
		s->row_of[i] = -1;
	for (unsigned i = 0; i < max; i++)
		s->row_q[i] = -1;
	s->maxtok = v->max_step_tokens;
	size_t ib = max * sizeof(int32_t);
	sv_v2_tensors(v, s);
	sv_staged_init(s, &s->tw, max, (size_t)max * v->width);
	s->u_nblocks = sv_uva(s, ib, (void **)&s->du_nblocks);
	sv_staged_init(s, &s->cw, max, max);
	for (int i = 0; i < SV_RING; i++) {
		WL_CK(cudaMallocHost((void **)&s->h_map[i], ib));
		WL_CK(cudaMalloc((void **)&s->d_map[i], ib));
	}
	WL_CK(cudaMallocHost((void **)&s->h_cuq, ib + sizeof(int32_t)));
	WL_CK(cudaMalloc((void **)&s->d_cuq, ib + sizeof(int32_t)));
	WL_CK(cudaMalloc((void **)&s->d_seqlens, ib));
	WL_CK(cudaMalloc((void **)&s->d_pos, s->maxtok * sizeof(int64_t)));
	WL_CK(cudaMalloc((void **)&s->d_slots, s->maxtok * sizeof(int64_t)));
	v->ps = s;
	sv_v2_kernels(v);
	/* cudagraph_capture_sizes: 1, 2, 4, then multiples of 8 */
	for (unsigned n = 1; n <= max && s->nr_buckets < SV_BUCKETS; n = n < 4 ? n * 2 : n + 8) {
		if (n > 4 && n % 8)
			n = n / 8 * 8;
		s->bucket[s->nr_buckets++] = n;
	}
	if (s->bucket[s->nr_buckets - 1] != max && s->nr_buckets < SV_BUCKETS)
		s->bucket[s->nr_buckets++] = max;
	for (int k = 0; k < s->nr_buckets; k++)
		sv_v2_capture(v, s, k);
}

/* The request's row. A new one (add_request) has no ids written and
 * stages its num_computed_tokens, the prefix-cache hit; an old one's
 * mirror must equal the scheduler's count (the post-update kernel
 * advanced both alike), else it is staged again and counted. The device
 * entry is checked too, after the last step's sync. */
static int sv_v2_row(struct sv *v, struct sv_v2 *s, const struct sv_running *r, unsigned ring)
{
	bool fresh;
	int row = sv_request_row(v, s->row_of, s->row_q, r->q, &fresh);
	int32_t first = (int32_t)sv_first(r), dev;
	if (fresh) {
		s->written[row] = 0;
	} else {
		if (v->peek(s->d_computed + row, &dev, sizeof dev) || dev != first)
			s->bad++;
		s->checked++;
		if (s->computed_np[row] == first)
			return row;
		s->restaged++;
	}
	*sv_stage(&s->cw, ring, row, 0, 1) = first;   /* stage_write_elem */
	s->computed_np[row] = first;
	return row;
}

/* apply_write: the indices, starts and cu_lens are in place (UVA); the
 * contents go up to this step's fresh device tensor. */
static void sv_v2_apply(struct sv *v, struct sv_staged *w, void *out, int64_t stride,
			unsigned ring)
{
	if (!w->nw)
		return;
	WL_CK(cudaMemcpyAsync(w->d_src[ring], w->h_src[ring], w->n * sizeof(int32_t),
			      cudaMemcpyHostToDevice, v->stream));
	sv_uploaded(v, w->n * sizeof(int32_t));
	void *a[] = { &out, &stride, &w->du_idx, &w->du_starts, &w->d_src[ring], &w->du_cul };
	sv_launch_grid(v, sv_v2_fn[0], w->nw, a);
	w->nw = w->n = 0;
}

/* post_update, eager after the model: the GPU advances num_computed_tokens
 * by each request's query length; the host mirror follows. */
static void sv_v2_post(struct sv *v, struct sv_v2 *s, unsigned n, unsigned ring)
{
	int64_t bins_stride = 1, sampled_stride = 1, tokens_stride = 1;
	void *a[] = { &s->d_map[ring], &s->d_computed, &s->d_last, &s->d_bins, &bins_stride,
		      &s->d_sampled, &sampled_stride, &s->d_nsampled, &s->d_rejected, &s->d_cuq,
		      &s->d_tokens, &tokens_stride, &s->d_total };
	sv_launch_grid(v, sv_v2_fn[3], n, a);
	for (unsigned i = 0; i < n; i++)
		s->computed_np[s->h_map[ring][i]] += s->h_cuq[i + 1] - s->h_cuq[i];
}

/* The step's rows, their staged writes, query_start_loc; returns its tokens. */
static unsigned sv_v2_stage(struct sv *v, struct sv_v2 *s, const struct sv_batch *b,
			    unsigned ring)
{
	int32_t *map = s->h_map[ring];
	unsigned t = 0;
	s->h_cuq[0] = 0;
	for (unsigned i = 0; i < b->n; i++) {
		const struct sv_running *r = &v->run[b->idx[i]];
		int row = sv_v2_row(v, s, r, ring);
		map[i] = row;
		if (s->written[row] < r->nblocks) {     /* append_block_ids: new ids only */
			int32_t *ids = sv_stage(&s->tw, ring, row, s->written[row],
						r->nblocks - s->written[row]);
			for (uint32_t j = s->written[row]; j < r->nblocks; j++)
				*ids++ = (int32_t)r->blocks[j];
			s->written[row] = r->nblocks;
		}
		s->u_nblocks[row] = (int32_t)r->nblocks;
		t += sv_len(r) - sv_first(r);
		s->h_cuq[i + 1] = (int32_t)t;
	}
	return t;
}

static void sv_v2_step(struct sv *v)
{
	struct sv_v2 *s = v->ps;
	struct sv_batch b;
	sv_batch(v, &b);
	if (!b.n)
		return;
	unsigned ring = s->ring++ % SV_RING;
	unsigned t = sv_v2_stage(v, s, &b, ring);
	sv_v2_apply(v, &s->cw, s->d_computed, 1, ring);           /* req_states */
	sv_v2_apply(v, &s->tw, s->d_table, v->width, ring);       /* block_tables */
	WL_CK(cudaMemcpyAsync(s->d_map[ring], s->h_map[ring], b.n * sizeof(int32_t),
			      cudaMemcpyHostToDevice, v->stream));
	WL_CK(cudaMemcpyAsync(s->d_cuq, s->h_cuq, (b.n + 1) * sizeof(int32_t),
			      cudaMemcpyHostToDevice, v->stream));
	sv_uploaded(v, (2 * b.n + 1) * sizeof(int32_t));
	int k = 0;
	while (b.decode_only && k < s->nr_buckets && s->bucket[k] < b.n)
		k++;
	bool graph = b.decode_only && k < s->nr_buckets;
	unsigned width = graph ? s->bucket[k] : b.n;
	if (graph)                                /* padded requests: no tokens */
		for (unsigned i = b.n + 1; i <= width; i++)
			s->h_cuq[i] = (int32_t)t;
	if (graph && width > b.n) {
		WL_CK(cudaMemcpyAsync(s->d_cuq + b.n + 1, s->h_cuq + b.n + 1,
				      (width - b.n) * sizeof(int32_t), cudaMemcpyHostToDevice,
				      v->stream));
		sv_uploaded(v, (width - b.n) * sizeof(int32_t));
	}
	sv_before_kernels(v);
	int maxreq = (int)width;
	void *pa[] = { &s->d_pos, &s->d_seqlens, &s->d_map[ring], &s->d_cuq, &s->d_computed,
		       &maxreq };
	sv_launch_grid(v, sv_v2_fn[1], b.n + 1, pa);
	int64_t stride = v->width;
	void *ga[] = { &s->d_map[ring], &s->d_table, &s->d_input_tables, &stride, &s->du_nblocks };
	sv_launch_grid(v, sv_v2_fn[2], b.n, ga);
	sv_slots(v, (int)t, (int)width, s->d_cuq, s->d_pos, s->d_input_tables, v->width,
		 s->d_slots, b.n);
	if (graph) {
		WL_CK(cudaGraphLaunch(s->exec[k], v->stream));
		v->graph_launches++;
	} else {
		uint64_t flops = (uint64_t)(sv_prefill_flops(v) / v->o.layers);
		v->prefill_flops += flops * (uint64_t)v->o.layers;
		for (int l = 0; l < v->o.layers; l++)
			sv_layer(v, l, flops, 1, s->d_slots, t, s->d_input_tables, v->width,
				 s->d_seqlens, s->d_cuq, b.n);
	}
	sv_v2_post(v, s, b.n, ring);
}

/* The persona's own lines: its UVA buffers and the num_computed_tokens
 * checks. */
static void sv_v2_sweep(struct sv *v)
{
	struct sv_v2 *s = v->ps;
	printf("uva_buffers=%u\nnum_computed_restaged=%llu\nnum_computed_checked=%llu\n"
	       "num_computed_bad=%llu\n", s->nr_uva, (unsigned long long)s->restaged,
	       (unsigned long long)s->checked, (unsigned long long)s->bad);
}

const struct sv_persona sv_vllm_v2 = {
	.name = "vllm-v2",
	.follows = "vLLM Model Runner V2 (GPU block table and num_computed_tokens, UVA staged writes, FA3, full decode graphs)",
	.allocs = SV_KV_PER_LAYER,
	.zero_fill = true,
	.setup = sv_v2_setup,
	.step = sv_v2_step,
	.sweep = sv_v2_sweep,
};
