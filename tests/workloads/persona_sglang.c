/* SPDX-License-Identifier: MIT */
/* serve-like persona `sglang`: SGLang's default path (docs/workloads.md
 * "Server personas" has the interface table and the sources).
 *   - KV: L K buffers then L V buffers, one token per slot, slot 0 a
 *     padding slot (MHATokenToKVPool).
 *   - Slot ids never leave the GPU: the allocator's free list is a device
 *     tensor and a step's new slots are a slice of it (out_cache_loc); the
 *     stand-in places the scheduler's choice there with fakecuda_poke,
 *     which no CUDA call and no interposer sees. Cached prefixes' slots sit
 *     in device tensors of the radix tree (here: a device buffer per step)
 *     that the write kernel reads through uploaded device pointers.
 *   - req_to_token [requests x context] lives on the GPU, written by
 *     write_req_to_token_pool_triton (extend) and an index_put (decode).
 *   - Per step the host uploads request indices and lengths only.
 *   - FA3 backend: the page table is gathered on the GPU from
 *     req_to_token; prefill ("extend") and decode are separate forward
 *     passes; decode replays a CUDA graph per batch size whose inputs are
 *     copied device-to-device into its buffers.
 * Test infrastructure: stdio and exit() are fine here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define SG_RING 8
#define SG_BUCKETS 16

struct sv_sg {
	int32_t *d_r2t;                 /* req_to_token [max][width] */
	unsigned width;
	int *row_of, *row_q;
	/* per step: pinned sources and fresh device tensors (ring) */
	int64_t *h_meta[SG_RING], *d_meta[SG_RING];   /* rpi, prefix_lens, extend_lens,
						       * seq_lens, prefix_ptrs: 5 x max */
	int64_t *d_loc[SG_RING], *d_prefix;          /* prefix: grown to the need */
	size_t prefix_cap;
	unsigned ring;
	int64_t *host_loc, *host_prefix;             /* the scheduler's slots, poked */
	/* forward metadata: page table, cache_seqlens (int32) */
	int32_t *d_page, *d_cache_lens;
	/* decode graphs' static inputs */
	int64_t *g_rpi, *g_lens, *g_loc;
	int32_t *g_page, *g_cache_lens;
	unsigned bucket[SG_BUCKETS];
	cudaGraphExec_t exec[SG_BUCKETS];
	int nr_buckets;
	CUfunction write_fn, put_fn, gather_fn;
};

/* The slot of token j of a request (serve-like's block j / 16, row j % 16),
 * past the padding slot 0. */
static int64_t sg_slot(const struct sv_running *r, uint32_t j)
{
	return 1 + (int64_t)r->blocks[j / WL_BLOCK_TOKENS] * WL_BLOCK_TOKENS + j % WL_BLOCK_TOKENS;
}

/* write_req_to_token_pool_triton(req_to_token, req_pool_indices,
 * prefix_pointers, prefix_lens, seq_lens, extend_lens, out_cache_loc,
 * req_to_token_stride): request i's row gets its prefix slots (read through
 * its prefix pointer) and then its slice of out_cache_loc. */
static int sg_write_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	int32_t *r2t = *(int32_t *const *)args[0];
	const int64_t *rpi = *(const int64_t *const *)args[1];
	const uint64_t *pptr = *(const uint64_t *const *)args[2];
	const int64_t *plen = *(const int64_t *const *)args[3];
	const int64_t *slen = *(const int64_t *const *)args[4];
	const int64_t *elen = *(const int64_t *const *)args[5];
	const int64_t *loc = *(const int64_t *const *)args[6];
	int64_t stride = *(const int64_t *)args[7];
	unsigned grid[3];
	v->kgrid(grid);
	int64_t off = 0;
	int r = 0;
	for (unsigned i = 0; i < grid[0] && !r; i++) {
		int64_t row, pl, sl, el;
		uint64_t pp;
		r = v->kread(rpi + i, &row, 8) || v->kread(plen + i, &pl, 8) ||
		    v->kread(slen + i, &sl, 8) || v->kread(elen + i, &el, 8) ||
		    v->kread(pptr + i, &pp, 8);
		if (r || pl + el != sl || sl > stride)
			return r ? r : CUDA_ERROR_ILLEGAL_ADDRESS;
		int64_t *src = (int64_t *)sv_scratch(v, (size_t)sl * 3 + 2);
		int32_t *dst = (int32_t *)(src + sl);
		if (pl)
			r = v->kread((const void *)(uintptr_t)pp, src, (size_t)pl * 8);
		if (!r && el)
			r = v->kread(loc + off, src + pl, (size_t)el * 8);
		for (int64_t j = 0; j < sl; j++)
			dst[j] = (int32_t)src[j];
		if (!r)
			r = v->kwrite(r2t + row * stride, dst, (size_t)sl * 4);
		off += el;
	}
	return r;
}

/* req_to_token[req_pool_indices, seq_lens - 1] = out_cache_loc (decode). */
static int sg_put_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	int32_t *r2t = *(int32_t *const *)args[0];
	const int64_t *rpi = *(const int64_t *const *)args[1];
	const int64_t *slen = *(const int64_t *const *)args[2];
	const int64_t *loc = *(const int64_t *const *)args[3];
	int64_t stride = *(const int64_t *)args[4];
	unsigned grid[3];
	v->kgrid(grid);
	int r = 0;
	for (unsigned i = 0; i < grid[0] && !r; i++) {
		int64_t row, sl, s;
		r = v->kread(rpi + i, &row, 8) || v->kread(slen + i, &sl, 8) ||
		    v->kread(loc + i, &s, 8);
		if (r || sl < 1 || sl > stride)
			return r ? r : CUDA_ERROR_ILLEGAL_ADDRESS;
		int32_t x = (int32_t)s;
		r = v->kwrite(r2t + row * stride + sl - 1, &x, 4);
	}
	return r;
}

/* page_table[i] = req_to_token[req_pool_indices[i], :width] and
 * cache_seqlens[i] = seq_lens[i] (int32; the cast folded in here). */
static int sg_gather_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	const int32_t *r2t = *(const int32_t *const *)args[0];
	const int64_t *rpi = *(const int64_t *const *)args[1];
	const int64_t *slen = *(const int64_t *const *)args[2];
	int32_t *page = *(int32_t *const *)args[3];
	int32_t *clens = *(int32_t *const *)args[4];
	int64_t stride = *(const int64_t *)args[5];
	unsigned grid[3];
	v->kgrid(grid);
	int r = 0;
	for (unsigned i = 0; i < grid[0] && !r; i++) {
		int64_t row, sl;
		r = v->kread(rpi + i, &row, 8) || v->kread(slen + i, &sl, 8);
		if (r || sl < 0 || sl > stride)
			return r ? r : CUDA_ERROR_ILLEGAL_ADDRESS;
		int32_t *ids = sv_scratch(v, (size_t)sl + 1), len = (int32_t)sl;
		if (sl)
			r = v->kread(r2t + row * stride, ids, (size_t)sl * 4);
		if (!r && sl)
			r = v->kwrite(page + i * stride, ids, (size_t)sl * 4);
		if (!r)
			r = v->kwrite(clens + i, &len, 4);
	}
	return r;
}

static const char sg_store_name[] = "store_kvcache";

/* A forward pass's layers: GEMMs, the KV store at out_cache_loc, FA3. */
static void sg_layers(struct sv *v, struct sv_sg *s, uint64_t flops, int64_t *loc,
		      unsigned ntok, int32_t *page, int32_t *clens, unsigned b)
{
	uint64_t row_el = v->o.row_bytes / 2;
	for (int l = 0; l < v->o.layers; l++) {
		CUdeviceptr k = (CUdeviceptr)(uintptr_t)v->kv[v->region_kv[2 * l]].ptr;
		CUdeviceptr vv = (CUdeviceptr)(uintptr_t)v->kv[v->region_kv[2 * l + 1]].ptr;
		sv_gemm(v, l, flops);
		sv_cache_write(v, sg_store_name, k, vv, (CUdeviceptr)(uintptr_t)loc, ntok, 1);
		struct sv_fa_args a = {
			.k = k, .v = vv, .table = (CUdeviceptr)(uintptr_t)page,
			.seqused_k = (CUdeviceptr)(uintptr_t)clens, .page_el = row_el,
			.row_el = row_el, .table_stride = s->width, .page = 1, .b = b,
		};
		sv_fa_launch(v, 1, &a);
	}
}

static void sg_capture(struct sv *v, struct sv_sg *s, int k)
{
	cudaGraph_t g;
	WL_CK(cudaStreamBeginCapture(v->stream, cudaStreamCaptureModeThreadLocal));
	sg_layers(v, s, 0, s->g_loc, s->bucket[k], s->g_page, s->g_cache_lens, s->bucket[k]);
	WL_CK(cudaStreamEndCapture(v->stream, &g));
	WL_CK(cudaGraphInstantiate(&s->exec[k], g, 0));
	WL_CK(cudaGraphDestroy(g));
}

static void sg_setup(struct sv *v)
{
	struct sv_sg *s = calloc(1, sizeof *s);
	unsigned max = (unsigned)v->o.max_batch;
	if (!s || !(s->row_of = malloc((size_t)v->s.nr * sizeof *s->row_of)) ||
	    !(s->row_q = malloc(max * sizeof *s->row_q)))
		wl_die("out of host memory");
	for (int i = 0; i < v->s.nr; i++)
		s->row_of[i] = -1;
	for (unsigned i = 0; i < max; i++)
		s->row_q[i] = -1;
	s->width = v->width * WL_BLOCK_TOKENS;
	size_t r2t = (size_t)max * s->width * sizeof(int32_t);
	WL_CK(cudaMalloc((void **)&s->d_r2t, r2t));
	WL_CK(cudaMemset(s->d_r2t, 0, r2t));
	unsigned maxtok = v->max_step_tokens;
	size_t meta = 5 * (size_t)max * sizeof(int64_t);
	size_t locb = (size_t)maxtok * sizeof(int64_t);
	size_t pfx = (size_t)max * v->s.max_stream * sizeof(int64_t);
	for (int i = 0; i < SG_RING; i++) {
		WL_CK(cudaMallocHost((void **)&s->h_meta[i], meta));
		WL_CK(cudaMalloc((void **)&s->d_meta[i], meta));
		WL_CK(cudaMalloc((void **)&s->d_loc[i], locb));
	}
	s->host_loc = malloc(locb);
	s->host_prefix = malloc(pfx);
	if (!s->host_loc || !s->host_prefix)
		wl_die("out of host memory");
	WL_CK(cudaMalloc((void **)&s->d_page, r2t));
	WL_CK(cudaMalloc((void **)&s->d_cache_lens, max * sizeof(int32_t)));
	WL_CK(cudaMalloc((void **)&s->g_rpi, max * sizeof(int64_t)));
	WL_CK(cudaMalloc((void **)&s->g_lens, max * sizeof(int64_t)));
	WL_CK(cudaMalloc((void **)&s->g_loc, max * sizeof(int64_t)));
	WL_CK(cudaMalloc((void **)&s->g_page, r2t));
	WL_CK(cudaMalloc((void **)&s->g_cache_lens, max * sizeof(int32_t)));
	WL_CK(cudaMemset(s->g_rpi, 0, max * sizeof(int64_t)));
	v->ps = s;
	static const struct fakecuda_param w[] = {
		{ 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 },
	};
	s->write_fn = sv_define(v, "write_req_to_token_pool_triton", w, 8, sg_write_body);
	s->put_fn = sv_define(v, "_ZN2at6native24index_put_kernel_implE", w, 5, sg_put_body);
	s->gather_fn = sv_define(v, "_ZN2at6native24index_elementwise_kernelE", w, 6,
				 sg_gather_body);
	/* cuda_graph_bs: 1, 2, 4, 8, 12, 16, 24, then multiples of 8 */
	static const unsigned bs[] = { 1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 96, 128, 192, 256 };
	for (int i = 0; i < SG_BUCKETS && bs[i] <= max; i++)
		s->bucket[s->nr_buckets++] = bs[i];
	if (s->bucket[s->nr_buckets - 1] != max && s->nr_buckets < SG_BUCKETS)
		s->bucket[s->nr_buckets++] = max;
	for (int k = 0; k < s->nr_buckets; k++)
		sg_capture(v, s, k);
}

static int sg_row(struct sv *v, struct sv_sg *s, const struct sv_running *r)
{
	bool fresh;
	return sv_request_row(v, s->row_of, s->row_q, r->q, &fresh);
}

/* One forward pass over the running requests that prefill (extend) or
 * decode. */
static void sg_pass(struct sv *v, struct sv_sg *s, bool extend)
{
	unsigned max = (unsigned)v->o.max_batch, n = 0, ntok = 0, npfx = 0;
	unsigned ring = s->ring++ % SG_RING;
	int64_t *m = s->h_meta[ring], *rpi = m, *pl = m + max, *el = m + 2 * max,
		*sl = m + 3 * max, *pp = m + 4 * max;
	for (int i = 0; i < v->nr_run; i++) {
		const struct sv_running *r = &v->run[i];
		if (r->loading || r->prefill != extend)
			continue;
		rpi[n] = sg_row(v, s, r);
		uint32_t len = extend ? r->prompt : r->prompt + r->produced;
		uint32_t first = extend ? r->start : len - 1;
		sl[n] = len;
		pl[n] = first;
		el[n] = len - first;
		pp[n] = npfx;                  /* made a device pointer below */
		for (uint32_t j = 0; extend && j < first; j++)
			s->host_prefix[npfx++] = sg_slot(r, j);
		for (uint32_t j = first; j < len; j++)
			s->host_loc[ntok++] = sg_slot(r, j);
		n++;
	}
	if (!n)
		return;
	/* the GPU allocator's slice and the radix tree's prefix tensors */
	if (npfx * sizeof(int64_t) > s->prefix_cap) {   /* the caching allocator's new block */
		if (s->d_prefix)
			WL_CK(cudaFree(s->d_prefix));
		s->prefix_cap = npfx * sizeof(int64_t) * 2;
		WL_CK(cudaMalloc((void **)&s->d_prefix, s->prefix_cap));
	}
	for (unsigned i = 0; i < n; i++)
		pp[i] = (uint64_t)(uintptr_t)(s->d_prefix + pp[i]);
	if (v->poke(s->d_loc[ring], s->host_loc, ntok * sizeof(int64_t)) ||
	    (npfx && v->poke(s->d_prefix, s->host_prefix, npfx * sizeof(int64_t))))
		wl_die("fakecuda_poke failed");
	int64_t *d = s->d_meta[ring];
	unsigned parts = extend ? 5 : 1;          /* decode: indices and lengths */
	for (unsigned p = 0; p < parts + (extend ? 0 : 1); p++) {
		unsigned at = extend ? p : (p ? 3 : 0);
		WL_CK(cudaMemcpyAsync(d + at * max, m + at * max, n * sizeof(int64_t),
				      cudaMemcpyHostToDevice, v->stream));
		sv_uploaded(v, n * sizeof(int64_t));
	}
	int64_t stride = s->width;
	int64_t *drpi = d, *dpl = d + max, *del = d + 2 * max, *dsl = d + 3 * max, *dpp = d + 4 * max;
	if (extend) {
		void *a[] = { &s->d_r2t, &drpi, &dpp, &dpl, &dsl, &del, &s->d_loc[ring], &stride };
		sv_launch_grid(v, s->write_fn, n, a);
		void *g[] = { &s->d_r2t, &drpi, &dsl, &s->d_page, &s->d_cache_lens, &stride };
		sv_launch_grid(v, s->gather_fn, n, g);
		uint64_t flops = (uint64_t)(sv_prefill_flops(v) / v->o.layers);
		v->prefill_flops += flops * (uint64_t)v->o.layers;
		sg_layers(v, s, flops, s->d_loc[ring], ntok, s->d_page, s->d_cache_lens, n);
		return;
	}
	void *a[] = { &s->d_r2t, &drpi, &dsl, &s->d_loc[ring], &stride };
	sv_launch_grid(v, s->put_fn, n, a);
	int k = 0;
	while (k < s->nr_buckets && s->bucket[k] < n)
		k++;
	if (k == s->nr_buckets) {                 /* no graph this large: eager */
		void *g[] = { &s->d_r2t, &drpi, &dsl, &s->d_page, &s->d_cache_lens, &stride };
		sv_launch_grid(v, s->gather_fn, n, g);
		sg_layers(v, s, 0, s->d_loc[ring], n, s->d_page, s->d_cache_lens, n);
		return;
	}
	unsigned w = s->bucket[k];                /* the graph's inputs, padded */
	WL_CK(cudaMemcpyAsync(s->g_rpi, drpi, n * 8, cudaMemcpyDeviceToDevice, v->stream));
	WL_CK(cudaMemcpyAsync(s->g_lens, dsl, n * 8, cudaMemcpyDeviceToDevice, v->stream));
	WL_CK(cudaMemcpyAsync(s->g_loc, s->d_loc[ring], n * 8, cudaMemcpyDeviceToDevice, v->stream));
	if (w > n) {
		WL_CK(cudaMemsetAsync(s->g_rpi + n, 0, (w - n) * 8, v->stream));
		WL_CK(cudaMemsetAsync(s->g_lens + n, 0, (w - n) * 8, v->stream));
		WL_CK(cudaMemsetAsync(s->g_loc + n, 0, (w - n) * 8, v->stream));
	}
	void *g[] = { &s->d_r2t, &s->g_rpi, &s->g_lens, &s->g_page, &s->g_cache_lens, &stride };
	sv_launch_grid(v, s->gather_fn, w, g);
	WL_CK(cudaGraphLaunch(s->exec[k], v->stream));
	v->graph_launches++;
}

static void sg_step(struct sv *v)
{
	struct sv_sg *s = v->ps;
	sv_before_kernels(v);
	sg_pass(v, s, true);
	sg_pass(v, s, false);
}

/* model_runner.py's words when --max-total-tokens is over the profiled
 * value */
static void sg_capped_says(uint32_t asked, uint32_t kept)
{
	fprintf(stderr, "serve-like: max_total_tokens=%u is larger than the profiled value %u. "
		"Use the profiled value instead.\n", asked, kept);
}

const struct sv_persona sv_sglang = {
	.name = "sglang",
	.follows = "SGLang, FA3 backend, page size 1, decode CUDA graphs",
	.allocs = SV_KV_K_THEN_V,
	.lead_rows = 1,
	.zero_fill = true,
	.pool_capped = true,
	.capped_says = sg_capped_says,
	.setup = sg_setup,
	.step = sg_step,
};
