/* SPDX-License-Identifier: MIT */
/* serve-like's hybrid persona: a model of sliding-window and full-attention
 * layers (gpt-oss's pattern: layer 2i slides over the last --window
 * tokens, layer 2i+1 attends to all of them) kept in TWO KV pools, one
 * cudaMalloc each, as TensorRT-LLM's per-window pools keep them
 * (kvCacheManager.cpp BlockManager::allocatePools, windows ascending; the
 * memory split by calculateWindowSizeToShare: per-token bytes x window;
 * tests/replay/trtllm-gemma3-27b-windows.txt). --kv-order full-first
 * makes the full pool first and zero-fills both, as llama.cpp's
 * llama_kv_cache_iswa does (kv_base, then kv_swa): the window pool then
 * comes after the main KV took most of free memory.
 *
 * The full-attention layers' K/V are serve-like's block pool (stamped and
 * checked by serve_run.c); the window layers' have blocks of their own,
 * the last W tokens of each running turn: a block that slides out of every
 * window is released into an LRU queue under its prefix key, and a later
 * turn reuses a cached prefix only where the window before its end is
 * still cached (vLLM's SlidingWindowManager rule). A window block serves
 * one running turn at a time. Per step the interface is vLLM V1's
 * FlashAttention path, one block table per layer group (vLLM's hybrid
 * allocator): whole rows and the slot mappings go up from pinned staging
 * to fixed device addresses; per layer reshape_and_cache_flash and one FA2
 * kernel, whose window rows start at the window's first block.
 * Test infrastructure: stdio and exit() are fine here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define HY_BT WL_BLOCK_TOKENS
#define HY_REGION0 (2 * WL_MAX_LAYERS)   /* window stamps' region numbers start here */

/* One running turn's window blocks. */
struct hy_turn {
	uint32_t *wb;              /* per stream block: window block id, or SV_NONE */
	uint32_t n;                /* stream blocks */
	uint32_t held, res;        /* blocks held now; the most it may hold at once */
	uint32_t hit_lo;           /* admission: window hits [hit_lo, start / 16) */
	uint32_t store_lo;         /* its prefill stores tokens from here */
};

struct hy {
	int nw, nf;                /* sliding-window and full-attention layers */
	char *wbase;               /* the window pool: region-major, nr_w blocks each */
	uint32_t nr_w;
	struct sv_pool wp;
	uint64_t outstanding;      /* running turns: res - held, summed */
	struct hy_turn **turn;     /* by schedule index */
	uint64_t hits, taken, released;
	/* pinned staging and fixed device destinations (V1 FlashAttention) */
	int32_t *h_ft, *h_wt, *h_fl, *h_wl, *h_cuq, *d_ft, *d_wt, *d_fl, *d_wl, *d_cuq;
	int64_t *h_fs, *h_ws, *d_fs, *d_ws;
	unsigned wwidth, maxtok;
};

static struct hy hy;

static const char hy_write[] = "_Z30reshape_and_cache_flash_kernelI13__nv_bfloat16S0_"
	"L18Fp8KVCacheDataType0EEvPKT_S4_PT0_S6_PKllllllllPKfSA_i";

static bool hy_full(int layer)
{
	return layer % 2 == 1;
}

static struct sv_key hy_key(const struct sv *v, const struct sv_req *q, uint32_t j)
{
	return sv_req_key(&v->o, q, j);           /* HY_BT == WL_BLOCK_TOKENS */
}

/* The first block of the window of the token at position p. */
static uint32_t hy_lo(const struct sv *v, uint32_t p)
{
	uint32_t w = (uint32_t)v->o.window;
	return p + 1 >= w ? (p + 1 - w) / HY_BT : 0;
}

/* Window region r (2 x window layer + K/V) of window block id. */
static char *hy_at(const struct sv *v, int r, uint32_t id)
{
	return hy.wbase + ((uint64_t)r * hy.nr_w + id) * v->block_region;
}

static void hy_stamp(struct sv *v, uint32_t id, struct sv_key k)
{
	for (int r = 0; r < 2 * hy.nw; r++)
		sv_stamp_at(v, hy_at(v, r, id), k, HY_REGION0 + r);
}

static void hy_check(struct sv *v, uint32_t id, struct sv_key k)
{
	for (int r = 0; r < 2 * hy.nw; r++)
		sv_check_at(v, hy_at(v, r, id), id, k, HY_REGION0 + r);
}

/* ---- the pools ---- */

static int hy_alloc(struct sv *v, uint64_t bytes, bool zero, char **out)
{
	void *p;
	cudaError_t err;
	if (v->o.alt == SV_UVM || v->o.alt == SV_ORACLE) {
		err = cudaMallocManaged(&p, bytes, cudaMemAttachGlobal);
		v->managed = true;
	} else {
		err = cudaMalloc(&p, bytes);
	}
	if (err) {
		cudaGetLastError();
		fprintf(stderr, "serve-like: out of memory: a KV pool of %zu MiB failed: %s\n",
			(size_t)(bytes >> 20), cudaGetErrorName(err));
		printf("workload=serve-like\npersona=hybrid\nresult=oom\n");
		return WL_EXIT_OOM;
	}
	if (v->o.alt == SV_ORACLE) {                 /* home on the host, mapped */
		struct cudaMemLocation host = { .type = cudaMemLocationTypeHost, .id = 0 };
		struct cudaMemLocation dev = { .type = cudaMemLocationTypeDevice, .id = 0 };
		WL_CK(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, host));
		WL_CK(cudaMemAdvise(p, bytes, cudaMemAdviseSetAccessedBy, dev));
	}
	if (zero) {
		WL_CK(cudaMemsetAsync(p, 0, bytes, v->stream));
		WL_CK(cudaStreamSynchronize(v->stream));
	}
	int i = v->nr_kv++;
	v->kv[i].ptr = *out = p;
	v->kv[i].len = bytes;
	v->kv_bytes += bytes;
	v->kv_ch0[i + 1] = v->kv_ch0[i] + (bytes + WL_CHUNK - 1) / WL_CHUNK;
	return 0;
}

/* kv_bytes split between the windows in proportion to per-token bytes x
 * window (TensorRT-LLM's calculateWindowSizeToShare; the full layers'
 * window is --max-ctx); each pool a whole number of blocks. */
static int hy_pools(struct sv *v, uint64_t kv_bytes)
{
	int L = v->o.layers;
	hy.nf = L / 2;
	hy.nw = L - hy.nf;
	v->kv_regions = 2 * hy.nf;
	double sw = (double)hy.nw * v->o.window, sf = (double)hy.nf * v->o.max_ctx;
	uint64_t wblock = 2ull * hy.nw * v->block_region, fblock = 2ull * hy.nf * v->block_region;
	uint32_t fit_w = (uint32_t)((double)kv_bytes * sw / (sw + sf) / (double)wblock);
	uint32_t fit = (uint32_t)((kv_bytes - (uint64_t)fit_w * wblock) / fblock);
	v->fit_blocks = fit;
	v->kv_budget = (uint64_t)fit * fblock + (uint64_t)fit_w * wblock;
	double n = v->o.pool_over_hbm;
	bool big = v->o.alt == SV_KVTIER || v->o.alt == SV_UVM || v->o.alt == SV_ORACLE;
	v->nr_blocks = big ? (uint32_t)((double)fit * n) : fit;
	hy.nr_w = big ? (uint32_t)((double)fit_w * n) : fit_w;
	char *full = NULL;
	int rc, fi = 0;
	for (int k = 0; k < 2; k++) {
		bool is_full = (k == 0) == v->o.full_first;
		if (is_full)
			fi = v->nr_kv;
		rc = is_full ? hy_alloc(v, (uint64_t)v->nr_blocks * fblock, v->o.full_first, &full)
			     : hy_alloc(v, (uint64_t)hy.nr_w * wblock, v->o.full_first, &hy.wbase);
		if (rc)
			return rc;
	}
	for (int r = 0; r < v->kv_regions; r++) {   /* region-major, as the window pool */
		v->region_kv[r] = fi;
		v->region[r] = full + (uint64_t)r * v->nr_blocks * v->block_region;
	}
	v->pool = full;
	sv_pool_init(&hy.wp, hy.nr_w);
	if (!v->o.quiet)
		fprintf(stderr, "serve-like: hybrid: %d window layers (W %d), %d full; window pool "
			"%u blocks, full pool %u\n", hy.nw, v->o.window, hy.nf, hy.nr_w,
			v->nr_blocks);
	return 0;
}

/* ---- the window blocks of a turn ---- */

/* Are the window blocks before a start at block h cached and free? */
static bool hy_window_cached(struct sv *v, const struct sv_req *q, uint32_t h)
{
	for (uint32_t j = h ? hy_lo(v, h * HY_BT) : 0; j < h; j++) {
		uint32_t id = sv_pool_find(&hy.wp, hy_key(v, q, j));
		if (id == SV_NONE || hy.wp.b[id].ref)
			return false;
	}
	return true;
}

static uint32_t hy_hits(struct sv *v, const struct sv_req *q, uint32_t blocks)
{
	while (blocks && !hy_window_cached(v, q, blocks))
		blocks--;
	return blocks;
}

static bool hy_admit(struct sv *v, uint32_t qi, uint32_t h)
{
	const struct sv_req *q = &v->s.req[qi];
	uint32_t prompt = (uint32_t)v->o.sys_tokens + q->hist + q->prompt;
	uint32_t kv_tokens = prompt + q->out - 1, n = (kv_tokens + HY_BT - 1) / HY_BT;
	uint32_t start = h * HY_BT, lo = h ? hy_lo(v, start) : 0;
	uint32_t store = hy_lo(v, prompt - 1) * HY_BT;      /* the prompt's last window */
	if (store < start)
		store = start;
	uint32_t pre = (h - lo) + (prompt - 1) / HY_BT - store / HY_BT + 1;
	uint32_t dec = ((uint32_t)v->o.window + HY_BT - 2) / HY_BT + 1;
	if (dec > n)
		dec = n;
	uint32_t res = pre > dec ? pre : dec;
	if (res > hy.nr_w)
		wl_die("hybrid: the window pool (%u blocks) cannot hold one turn's window "
		       "(%u blocks): lower --window or raise --pool-over-hbm", hy.nr_w, res);
	if (hy.wp.queued < hy.outstanding + res)
		return false;
	struct hy_turn *t = calloc(1, sizeof *t);
	if (!t || !(t->wb = malloc(sizeof *t->wb * n)))
		wl_die("out of host memory");
	for (uint32_t j = 0; j < n; j++)
		t->wb[j] = SV_NONE;
	t->n = n;
	t->res = res;
	t->hit_lo = lo;
	t->store_lo = store;
	for (uint32_t j = lo; j < h; j++) {           /* the window's hits: checked */
		struct sv_key k = hy_key(v, q, j);
		uint32_t id = sv_pool_find(&hy.wp, k);
		sv_pool_ref(&hy.wp, id);
		hy_check(v, id, k);
		t->wb[j] = id;
		t->held++;
	}
	hy.hits += h - lo;
	hy.outstanding += res - t->held;
	hy.turn[qi] = t;
	return true;
}

/* Block j leaves the turn: cached under its key if complete. */
static void hy_release(struct sv *v, const struct sv_req *q, struct hy_turn *t, uint32_t j,
		       bool keyed)
{
	if (keyed)
		sv_pool_set_key(&hy.wp, t->wb[j], hy_key(v, q, j));
	sv_pool_unref(&hy.wp, t->wb[j]);
	t->wb[j] = SV_NONE;
	t->held--;
	hy.outstanding++;
	hy.released++;
}

/* Before a step computes positions [first, last] of the turn: blocks that
 * slid out of the window go, blocks for the positions it stores come. */
static void hy_slide(struct sv *v, const struct sv_running *r, uint32_t first, uint32_t last,
		     uint32_t store)
{
	const struct sv_req *q = &v->s.req[r->q];
	struct hy_turn *t = hy.turn[r->q];
	for (uint32_t j = 0; j < hy_lo(v, first) && j < t->n; j++)
		if (t->wb[j] != SV_NONE)
			hy_release(v, q, t, j, true);   /* before the window: complete */
	for (uint32_t j = store / HY_BT; j <= last / HY_BT; j++) {
		if (t->wb[j] != SV_NONE)
			continue;
		struct sv_block old;
		uint32_t id = sv_pool_take(&hy.wp, &old);
		if (id == SV_NONE || t->held >= t->res)
			wl_die("hybrid: window pool exhausted (admission should have waited)");
		hy_stamp(v, id, hy_key(v, q, j));
		t->wb[j] = id;
		t->held++;
		hy.outstanding--;
		hy.taken++;
	}
}

static void hy_finish(struct sv *v, const struct sv_running *r)
{
	const struct sv_req *q = &v->s.req[r->q];
	struct hy_turn *t = hy.turn[r->q];
	uint32_t full = (r->prompt + q->out - 1) / HY_BT;
	for (uint32_t j = t->n; j-- > 0;)
		if (t->wb[j] != SV_NONE)
			hy_release(v, q, t, j, j < full);
	hy.outstanding -= t->res;
	free(t->wb);
	free(t);
	hy.turn[r->q] = NULL;
}

static void hy_sweep(struct sv *v)
{
	for (uint32_t i = 0; i < hy.wp.nr; i++)
		if (hy.wp.b[i].keyed)
			hy_check(v, i, hy.wp.b[i].key);
	printf("window_tokens=%d\nwindow_layers=%d\nfull_layers=%d\nwindow_pool_blocks=%u\n"
	       "window_pool_bytes=%llu\nfull_pool_bytes=%llu\nwindow_hit_blocks=%llu\n"
	       "window_blocks_taken=%llu\nwindow_blocks_released=%llu\n", v->o.window, hy.nw,
	       hy.nf, hy.nr_w, (unsigned long long)hy.nr_w * 2 * hy.nw * v->block_region,
	       (unsigned long long)v->nr_blocks * v->kv_regions * v->block_region,
	       (unsigned long long)hy.hits, (unsigned long long)hy.taken,
	       (unsigned long long)hy.released);
}

/* ---- per step: V1 FlashAttention, one table per layer group ---- */

static void hy_setup(struct sv *v)
{
	unsigned max = (unsigned)v->o.max_batch;
	hy.maxtok = v->max_step_tokens;
	hy.wwidth = (2 * ((unsigned)v->o.window / HY_BT) + 4 + 7) / 8 * 8;
	hy.turn = calloc((size_t)v->s.nr, sizeof *hy.turn);
	size_t ft = (size_t)max * v->width * sizeof(int32_t);
	size_t wt = (size_t)2 * max * hy.wwidth * sizeof(int32_t);
	size_t ln = (size_t)2 * max * sizeof(int32_t), sl = hy.maxtok * sizeof(int64_t);
	if (!hy.turn)
		wl_die("out of host memory");
	WL_CK(cudaMallocHost((void **)&hy.h_ft, ft));
	WL_CK(cudaMallocHost((void **)&hy.h_wt, wt));
	WL_CK(cudaMallocHost((void **)&hy.h_fl, ln));
	WL_CK(cudaMallocHost((void **)&hy.h_wl, ln));
	WL_CK(cudaMallocHost((void **)&hy.h_cuq, ln + sizeof(int32_t)));
	WL_CK(cudaMallocHost((void **)&hy.h_fs, sl));
	WL_CK(cudaMallocHost((void **)&hy.h_ws, sl));
	WL_CK(cudaMalloc((void **)&hy.d_ft, ft));
	WL_CK(cudaMalloc((void **)&hy.d_wt, wt));
	WL_CK(cudaMalloc((void **)&hy.d_fl, ln));
	WL_CK(cudaMalloc((void **)&hy.d_wl, ln));
	WL_CK(cudaMalloc((void **)&hy.d_cuq, ln + sizeof(int32_t)));
	WL_CK(cudaMalloc((void **)&hy.d_fs, sl));
	WL_CK(cudaMalloc((void **)&hy.d_ws, sl));
}

/* A window table row: blocks [from, to] of the turn, len tokens from from. */
static void hy_wrow(const struct hy_turn *t, unsigned *nw, uint32_t from, uint32_t to,
		    uint32_t len)
{
	int32_t *row = hy.h_wt + (size_t)*nw * hy.wwidth;
	if (to - from + 1 > hy.wwidth)
		wl_die("hybrid: a window row of %u blocks", to - from + 1);
	for (uint32_t j = from; j <= to; j++)
		row[j - from] = (int32_t)t->wb[j];
	hy.h_wl[(*nw)++] = (int32_t)len;
}

static void hy_up(struct sv *v, void *dst, const void *src, size_t bytes)
{
	WL_CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, v->stream));
	sv_uploaded(v, bytes);
}

static void hy_attn(struct sv *v, CUdeviceptr k, CUdeviceptr vv, const int64_t *slots,
		    unsigned ntok, const int32_t *table, uint64_t width, const int32_t *lens,
		    unsigned b)
{
	uint64_t row_el = v->o.row_bytes / 2;
	sv_cache_write(v, hy_write, k, vv, (CUdeviceptr)(uintptr_t)slots, ntok, HY_BT);
	struct sv_fa_args a = {
		.k = k, .v = vv, .table = (CUdeviceptr)(uintptr_t)table,
		.seqused_k = (CUdeviceptr)(uintptr_t)lens,
		.cu_seqlens_q = (CUdeviceptr)(uintptr_t)hy.d_cuq, .page_el = row_el * HY_BT,
		.row_el = row_el, .table_stride = width, .page = HY_BT, .b = b,
	};
	sv_fa_launch(v, 0, &a);
}

static void hy_step(struct sv *v)
{
	unsigned n = 0, nw = 0, t = 0;
	hy.h_cuq[0] = 0;
	for (int i = 0; i < v->nr_run; i++) {
		const struct sv_running *r = &v->run[i];
		if (r->loading)
			continue;
		struct hy_turn *w = hy.turn[r->q];
		uint32_t first = r->prefill ? r->start : r->prompt + r->produced - 1;
		uint32_t last = r->prefill ? r->prompt - 1 : first;
		uint32_t store = r->prefill ? w->store_lo : first;
		hy_slide(v, r, first, last, store);
		int32_t *row = hy.h_ft + (size_t)n * v->width;
		for (uint32_t j = 0; j < r->nblocks; j++)
			row[j] = (int32_t)r->blocks[j];
		hy.h_fl[n] = (int32_t)(last + 1);
		for (uint32_t p = first; p <= last; p++, t++) {
			hy.h_fs[t] = (int64_t)r->blocks[p / HY_BT] * HY_BT + p % HY_BT;
			hy.h_ws[t] = p < store ? -1 : (int64_t)w->wb[p / HY_BT] * HY_BT + p % HY_BT;
		}
		hy.h_cuq[++n] = (int32_t)t;
		/* the window layers read [lo, last]; a prefill that stores only
		 * its prompt's last window reads its hits as a row of their own */
		uint32_t lo = hy_lo(v, first), hit_end = r->start / HY_BT;
		bool gap = r->prefill && store > r->start;
		if (gap && w->hit_lo < hit_end)
			hy_wrow(w, &nw, w->hit_lo, hit_end - 1, r->start - w->hit_lo * HY_BT);
		if (gap)
			lo = store / HY_BT;
		hy_wrow(w, &nw, lo, last / HY_BT, last + 1 - lo * HY_BT);
	}
	if (!n)
		return;
	hy_up(v, hy.d_ft, hy.h_ft, (size_t)n * v->width * sizeof(int32_t));
	hy_up(v, hy.d_wt, hy.h_wt, (size_t)nw * hy.wwidth * sizeof(int32_t));
	hy_up(v, hy.d_fl, hy.h_fl, n * sizeof(int32_t));
	hy_up(v, hy.d_wl, hy.h_wl, nw * sizeof(int32_t));
	hy_up(v, hy.d_cuq, hy.h_cuq, (n + 1) * sizeof(int32_t));
	hy_up(v, hy.d_fs, hy.h_fs, t * sizeof(int64_t));
	hy_up(v, hy.d_ws, hy.h_ws, t * sizeof(int64_t));
	sv_before_kernels(v);
	uint64_t flops = (uint64_t)(sv_prefill_flops(v) / v->o.layers);
	v->prefill_flops += flops * (uint64_t)v->o.layers;
	for (int l = 0; l < v->o.layers; l++) {
		sv_gemm(v, l, flops);
		int g = l / 2;                          /* the layer's index in its group */
		if (hy_full(l)) {
			CUdeviceptr k = (CUdeviceptr)(uintptr_t)v->region[2 * g];
			CUdeviceptr vv = (CUdeviceptr)(uintptr_t)v->region[2 * g + 1];
			hy_attn(v, k, vv, hy.d_fs, t, hy.d_ft, v->width, hy.d_fl, n);
		} else {
			CUdeviceptr k = (CUdeviceptr)(uintptr_t)hy_at(v, 2 * g, 0);
			CUdeviceptr vv = (CUdeviceptr)(uintptr_t)hy_at(v, 2 * g + 1, 0);
			hy_attn(v, k, vv, hy.d_ws, t, hy.d_wt, hy.wwidth, hy.d_wl, nw);
		}
	}
}

const struct sv_persona sv_hybrid = {
	.name = "hybrid",
	.follows = "TensorRT-LLM per-window KV pools; vLLM V1 FlashAttention per group",
	.allocs = SV_KV_ONE,
	.setup = hy_setup,
	.step = hy_step,
	.pools = hy_pools,
	.hits = hy_hits,
	.admit = hy_admit,
	.finish = hy_finish,
	.sweep = hy_sweep,
};
