/* SPDX-License-Identifier: MIT */
/* serve-like persona `llamacpp`: llama.cpp's server with its default
 * unified KV cache and flash attention (docs/workloads.md "Server personas"
 * has the interface table and the sources).
 *   - KV: one buffer for every layer's K and V (cache_k_l0, cache_v_l0,
 *     ...), zeroed at birth; a cell per token (serve-like's block b holds
 *     cells 16b .. 16b+15), no block table. -c unset and --fit on (the
 *     server's defaults) size it to the free memory: under kvtier the
 *     cache that fits (pool_capped); --pool-force is -c given at N x.
 *   - Each ubatch (at most 512 tokens, -ub; halved until the compute
 *     buffer, which holds a mask as wide as the cache, fits as the pool that
 *     fits lets 512 fit: a user's setting for a larger cache) uploads its inputs with a
 *     synchronous copy each: token ids, positions, the KQ mask (f32,
 *     n_kv x the tokens padded to 64) and the cells the new K and V go to.
 *   - n_kv is the cells in use plus one, padded to 256 (at least 256):
 *     every layer's attention reads cells [0, KV_max) of K and V, KV_max
 *     the last cell the mask lets the ubatch see, rounded up to 256.
 *   - The flash-attention kernel takes 37 parameters; ne11 (n_kv) and nb11
 *     (bytes per cell) are the 23rd and 26th.
 *   - A single-token ubatch runs from a CUDA graph, captured each time and
 *     applied to the instantiated one with cudaGraphExecUpdate; larger
 *     ubatches run eagerly (llama.cpp turns graphs off above one token).
 *   - --alt offload is llama.cpp's own, --no-kv-offload: the cache (N x the
 *     cells that fit) in plain host memory (serve_like.c), and each layer's
 *     set_rows and flash_attn_ext on the CPU backend: the GPU runs the dense
 *     kernels, Q, K and V go down and the attention output up (one copy per
 *     tensor), and the step waits for the CPU reading K and V cells
 *     [0, KV_max) at --cpu-attn-gbps. No mask, cell index or KV_max work on
 *     the GPU; eager (the splits change the CUDA graph every call).
 * Test infrastructure: stdio and exit() are fine here. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define LC_UBATCH 512
#define LC_MASK_PAD 64
#define LC_KQ_STRIDE 256

struct sv_lc {
	int32_t *h_tok, *h_pos, *d_tok, *d_pos;
	int64_t *h_idx, *d_kidx, *d_vidx;
	float *h_mask, *d_mask;
	int32_t *d_kvmax;
	char *h_act, *d_act;       /* host KV: Q, K, V down, the output up (a part each) */
	size_t mask_cap;
	unsigned ubatch;           /* tokens per ubatch (-ub) */
	unsigned n_kv, kv_size;
	int32_t kv_max;            /* what the mask lets this ubatch see */
	cudaGraphExec_t exec;
	CUfunction kvmax_fn, set_rows_fn, fa_fn;
};

/* flash_attn_mask_to_KV_max(mask, KV_max, ne30, s31, s33): reads the mask
 * and writes the last KV tile it leaves visible (the stand-in takes the
 * extent from the host's view of the same mask instead of scanning it). */
static int lc_kvmax_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	struct sv_lc *s = v->ps;
	const float *mask = *(const float *const *)args[0];
	int32_t *out = *(int32_t *const *)args[1];
	int ne30 = *(const int *)args[2], rows = *(const int *)args[3];
	int r = v->kaccess(mask, (size_t)ne30 * rows * sizeof(float), 0);
	return r ? r : v->kwrite(out, &s->kv_max, sizeof s->kv_max);
}

/* k_set_rows(src, idxs, dst, ne, row bytes): row i of the new K (or V) to
 * cell idxs[i]. */
static int lc_set_rows_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	const int64_t *idx = *(const int64_t *const *)args[1];
	char *dst = *(char *const *)args[2];
	int n = *(const int *)args[3];
	int64_t nb1 = *(const int64_t *)args[4];
	int64_t *cells = (int64_t *)sv_scratch(v, (size_t)n * 2 + 2);
	int r = v->kread(idx, cells, (size_t)n * sizeof *cells);
	uintptr_t run = 0;
	size_t len = 0;
	for (int i = 0; i < n && !r; i++) {
		uintptr_t at = (uintptr_t)dst + (uint64_t)cells[i] * (uint64_t)nb1;
		if (len && run + len == at) {
			len += (size_t)nb1;
			continue;
		}
		if (len)
			r = v->kaccess((const void *)run, len, 1);
		run = at;
		len = (size_t)nb1;
	}
	return r || !len ? r : v->kaccess((const void *)run, len, 1);
}

/* flash_attn_ext: K and V cells [0, KV_max) of the layer's views (never
 * past ne11 = n_kv), nb11 bytes each, and the mask. */
enum { LC_Q, LC_K, LC_V, LC_MASK, LC_SINKS, LC_KVMAX, LC_NE11 = 22, LC_NB11 = 25, LC_NPARAM = 37 };

static int lc_fa_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	const char *k = *(const char *const *)args[LC_K], *vv = *(const char *const *)args[LC_V];
	const int32_t *kvmax = *(const int32_t *const *)args[LC_KVMAX];
	int32_t ne11 = *(const int32_t *)args[LC_NE11], nb11 = *(const int32_t *)args[LC_NB11];
	int32_t m;
	int r = v->kread(kvmax, &m, sizeof m);
	if (r)
		return r;
	if (m > ne11)
		m = ne11;
	size_t bytes = (size_t)m * (size_t)nb11;
	r = v->kaccess(k, bytes, 0);
	return r ? r : v->kaccess(vv, bytes, 0);
}

static void lc_kernels(struct sv *v, struct sv_lc *s)
{
	static const struct fakecuda_param kvm[] = { { 8, 8 }, { 8, 8 }, { 4, 4 }, { 4, 4 }, { 4, 4 } };
	static const struct fakecuda_param sr[] = { { 8, 8 }, { 8, 8 }, { 8, 8 }, { 4, 4 }, { 8, 8 } };
	struct fakecuda_param fa[LC_NPARAM];
	for (int i = 0; i < LC_NPARAM; i++)
		fa[i] = (struct fakecuda_param){ 4, 4 };
	for (int i = 0; i <= 7; i++)
		fa[i] = (struct fakecuda_param){ 8, 8 };
	fa[15] = (struct fakecuda_param){ 12, 4 };          /* ne01: uint3 */
	fa[27] = fa[30] = fa[36] = (struct fakecuda_param){ 8, 8 };   /* nb13, nb23, nb33 */
	s->kvmax_fn = sv_define(v, "_Z25flash_attn_mask_to_KV_maxILi64EEvPK6__halfPiiii", kvm, 5,
				lc_kvmax_body);
	s->set_rows_fn = sv_define(v, "_Z10k_set_rowsIflEvPKT_PKT0_PS0_illllll", sr, 5,
				   lc_set_rows_body);
	s->fa_fn = sv_define(v, "_Z15flash_attn_ext_f16ILi128ELi128ELi64ELi1ELb0ELb0EEvPKcS1_S1_S1_S1_PKiPfP6float2ffffjfi5uint3iiiiiiiiiiiliiliiiiil",
			     fa, LC_NPARAM, lc_fa_body);
}

/* --no-kv-offload: the mask, the cell indices and the attention are the
 * CPU backend's (its compute buffer in the CUDA host buffer type, pinned);
 * the GPU's compute buffer holds the activations that cross. A ubatch
 * stays 512 tokens: no mask as wide as the cache in device memory. */
static void lc_setup_host(struct sv *v, struct sv_lc *s)
{
	size_t act = 4 * (size_t)s->ubatch * v->o.row_bytes;
	s->mask_cap = (size_t)s->ubatch * s->kv_size * sizeof(float);
	WL_CK(cudaMallocHost((void **)&s->h_mask, s->mask_cap));
	memset(s->h_mask, 0, s->mask_cap);
	WL_CK(cudaMallocHost((void **)&s->h_act, act));
	WL_CK(cudaMalloc((void **)&s->d_act, act));
	v->ps = s;
}

static void lc_setup(struct sv *v)
{
	struct sv_lc *s = calloc(1, sizeof *s);
	if (!s)
		wl_die("out of host memory");
	s->kv_size = v->nr_blocks * WL_BLOCK_TOKENS;
	WL_CK(cudaMallocHost((void **)&s->h_tok, LC_UBATCH * 8));
	WL_CK(cudaMallocHost((void **)&s->h_pos, LC_UBATCH * 8));
	WL_CK(cudaMallocHost((void **)&s->h_idx, LC_UBATCH * 8));
	WL_CK(cudaMalloc((void **)&s->d_tok, LC_UBATCH * 8));
	WL_CK(cudaMalloc((void **)&s->d_pos, LC_UBATCH * 8));
	s->ubatch = LC_UBATCH;
	if (v->host_kv) {
		lc_setup_host(v, s);
		return;
	}
	WL_CK(cudaMalloc((void **)&s->d_kidx, LC_UBATCH * 8));
	WL_CK(cudaMalloc((void **)&s->d_vidx, LC_UBATCH * 8));
	WL_CK(cudaMalloc((void **)&s->d_kvmax, 64));
	/* the KQ mask's worst case, n_ubatch x the whole cache, as the graph
	 * allocator reserves the compute buffer at start-up; a larger cache:
	 * -ub scaled so the buffer still fits */
	while (s->ubatch > LC_MASK_PAD &&
	       (uint64_t)s->ubatch * v->nr_blocks > (uint64_t)LC_UBATCH * v->fit_blocks)
		s->ubatch /= 2;
	/* rows so small that the mask (4 B a cell per ubatch token) outgrows
	 * the KV itself (--trace's model: 512 B a token): -ub lowered until
	 * the mask is at most half the KV budget, as a user does when the
	 * compute buffer does not fit (the default models: never) */
	while (s->ubatch > LC_MASK_PAD &&
	       (uint64_t)s->ubatch * s->kv_size * sizeof(float) > v->kv_budget / 2)
		s->ubatch /= 2;
	s->mask_cap = (size_t)s->ubatch * s->kv_size * sizeof(float);
	WL_CK(cudaMallocHost((void **)&s->h_mask, s->mask_cap));
	memset(s->h_mask, 0, s->mask_cap);
	cudaError_t err = cudaMalloc((void **)&s->d_mask, s->mask_cap);
	if (err)
		wl_die("llamacpp: the compute buffer's KQ mask (%zu MiB) does not fit: %s",
		       s->mask_cap >> 20, cudaGetErrorName(err));
	v->ps = s;
	lc_kernels(v, s);
}

/* cells_used_max_p1, padded to 256, at least 256, at most the cache */
static unsigned lc_n_kv(struct sv *v, struct sv_lc *s)
{
	uint32_t top = 0;
	for (uint32_t i = v->gpu.nr; i-- > 0;)
		if (v->gpu.b[i].ref || v->gpu.b[i].keyed) {
			top = i + 1;
			break;
		}
	unsigned n = top * WL_BLOCK_TOKENS;
	n = (n + LC_KQ_STRIDE - 1) / LC_KQ_STRIDE * LC_KQ_STRIDE;
	if (n < LC_KQ_STRIDE)
		n = LC_KQ_STRIDE;
	return n < s->kv_size ? n : s->kv_size;
}

static void lc_upload(struct sv *v, void *dst, const void *src, size_t bytes)
{
	/* ggml_backend_cuda_buffer_set_tensor: an async copy, then a sync */
	WL_CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, v->stream));
	WL_CK(cudaStreamSynchronize(v->stream));
	sv_uploaded(v, bytes);
}

static void lc_layers(struct sv *v, struct sv_lc *s, unsigned n, unsigned rows, uint64_t flops)
{
	int64_t nb1 = v->o.row_bytes;
	for (int l = 0; l < v->o.layers; l++) {
		char *k = v->region[2 * l], *vv = v->region[2 * l + 1];
		sv_gemm(v, l, flops);
		int ni = (int)n;
		void *zero = NULL;
		void *ak[] = { &zero, &s->d_kidx, &k, &ni, &nb1 };
		sv_launch(v, s->set_rows_fn, ak);
		void *av[] = { &zero, &s->d_vidx, &vv, &ni, &nb1 };
		sv_launch(v, s->set_rows_fn, av);
		uint32_t p[LC_NPARAM][3];
		void *args[LC_NPARAM];
		memset(p, 0, sizeof p);
		for (int i = 0; i < LC_NPARAM; i++)
			args[i] = p[i];
		memcpy(p[LC_Q], &zero, 8);
		memcpy(p[LC_K], &k, 8);
		memcpy(p[LC_V], &vv, 8);
		memcpy(p[LC_MASK], &s->d_mask, 8);
		memcpy(p[LC_KVMAX], &s->d_kvmax, 8);
		int32_t ne11 = (int32_t)s->n_kv, nb11 = (int32_t)nb1, ne01 = (int32_t)rows;
		memcpy(p[15], &ne01, 4);
		memcpy(p[LC_NE11], &ne11, 4);
		memcpy(p[LC_NB11], &nb11, 4);
		sv_launch(v, s->fa_fn, args);
	}
}

/* --no-kv-offload, a layer after another: the GPU's dense kernels; Q, K
 * and V of the ubatch to the CPU backend (ggml_backend_sched copies each
 * input of a split; Q taken one K row wide); the CPU writes the new K and
 * V rows into the host cache and its flash_attn_ext reads K and V cells
 * [0, KV_max); the output goes back up. The GPU waits for the CPU: the
 * step takes the GPU's time plus the CPU's, bytes / --cpu-attn-gbps. */
static void lc_layers_host(struct sv *v, struct sv_lc *s, unsigned n, uint64_t flops)
{
	size_t row = v->o.row_bytes, part = (size_t)s->ubatch * row, len = (size_t)n * row;
	unsigned extent = (unsigned)s->kv_max < s->n_kv ? (unsigned)s->kv_max : s->n_kv;
	uint64_t bytes = 2 * ((uint64_t)extent + n) * row;
	double t = (double)bytes / (v->o.cpu_attn_gbps * 1e9);
	for (int l = 0; l < v->o.layers; l++) {
		sv_gemm(v, l, flops);
		for (int i = 0; i < 3; i++)
			WL_CK(cudaMemcpyAsync(s->h_act + i * part, s->d_act + i * part, len,
					      cudaMemcpyDeviceToHost, v->stream));
		WL_CK(cudaStreamSynchronize(v->stream));
		sv_host_work(v, t);
		v->cpu_attn_bytes += bytes;
		v->cpu_attn_s += t;
		WL_CK(cudaMemcpyAsync(s->d_act + 3 * part, s->h_act + 3 * part, len,
				      cudaMemcpyHostToDevice, v->stream));
	}
}

/* One ubatch: tokens [t0, t0 + n) of the step's list. */
static void lc_ubatch(struct sv *v, struct sv_lc *s, const int64_t *cells, unsigned n,
		      uint32_t maxcell, uint64_t flops)
{
	unsigned rows = (n + LC_MASK_PAD - 1) / LC_MASK_PAD * LC_MASK_PAD;
	size_t mb = (size_t)rows * s->n_kv * sizeof(float);
	for (unsigned i = 0; i < n; i++) {
		s->h_tok[i] = (int32_t)(cells[i] % 32000);
		s->h_pos[i] = (int32_t)i;
		s->h_idx[i] = cells[i];
	}
	lc_upload(v, s->d_tok, s->h_tok, n * sizeof(int32_t));
	lc_upload(v, s->d_pos, s->h_pos, n * sizeof(int32_t));
	s->kv_max = (int32_t)((maxcell + LC_KQ_STRIDE) / LC_KQ_STRIDE * LC_KQ_STRIDE);
	if (v->host_kv) {               /* the mask and the cells stay on the host */
		lc_layers_host(v, s, n, flops);
		return;
	}
	lc_upload(v, s->d_mask, s->h_mask, mb);
	lc_upload(v, s->d_kidx, s->h_idx, n * sizeof(int64_t));
	lc_upload(v, s->d_vidx, s->h_idx, n * sizeof(int64_t));
	int ne30 = (int)s->n_kv, nr = (int)rows, one = 1;
	void *ka[] = { &s->d_mask, &s->d_kvmax, &ne30, &nr, &one };
	if (n > 1) {
		sv_launch(v, s->kvmax_fn, ka);
		lc_layers(v, s, n, rows, flops);
		return;
	}
	cudaGraph_t g;                  /* one token: capture, update, replay */
	WL_CK(cudaStreamBeginCapture(v->stream, cudaStreamCaptureModeThreadLocal));
	sv_launch(v, s->kvmax_fn, ka);
	lc_layers(v, s, n, rows, flops);
	WL_CK(cudaStreamEndCapture(v->stream, &g));
	cudaGraphExecUpdateResultInfo info;
	if (!s->exec || cudaGraphExecUpdate(s->exec, g, &info) != cudaSuccess) {
		cudaGetLastError();
		if (s->exec)
			WL_CK(cudaGraphExecDestroy(s->exec));
		WL_CK(cudaGraphInstantiate(&s->exec, g, 0));
	} else {
		v->graph_updates++;
	}
	WL_CK(cudaGraphDestroy(g));
	WL_CK(cudaGraphLaunch(s->exec, v->stream));
	v->graph_launches++;
}

static void lc_step(struct sv *v)
{
	struct sv_lc *s = v->ps;
	s->n_kv = lc_n_kv(v, s);
	sv_before_kernels(v);
	int64_t cells[LC_UBATCH];
	unsigned n = 0, np = 0;
	uint32_t maxcell = 0;
	double flops_total = sv_prefill_flops(v), computed = 0;
	for (int i = 0; i < v->nr_run; i++)
		if (!v->run[i].loading && v->run[i].prefill)
			computed += v->run[i].prompt - v->run[i].start;
	double per_tok = computed ? flops_total / computed / v->o.layers : 0;
	for (int i = 0; i < v->nr_run; i++) {
		const struct sv_running *r = &v->run[i];
		if (r->loading)
			continue;
		uint32_t len = r->prefill ? r->prompt : r->prompt + r->produced;
		uint32_t first = r->prefill ? r->start : len - 1, rmax = 0;
		for (uint32_t j = 0; j < len; j += WL_BLOCK_TOKENS) {
			uint32_t c = r->blocks[j / WL_BLOCK_TOKENS] * WL_BLOCK_TOKENS +
				     WL_BLOCK_TOKENS - 1;
			rmax = c > rmax ? c : rmax;
		}
		for (uint32_t j = first; j < len; j++) {
			maxcell = rmax > maxcell ? rmax : maxcell;
			cells[n++] = (int64_t)r->blocks[j / WL_BLOCK_TOKENS] * WL_BLOCK_TOKENS +
				     j % WL_BLOCK_TOKENS;
			np += r->prefill;
			if (n == s->ubatch) {
				lc_ubatch(v, s, cells, n, maxcell, (uint64_t)(per_tok * np));
				n = np = maxcell = 0;
			}
		}
	}
	if (n)
		lc_ubatch(v, s, cells, n, maxcell, (uint64_t)(per_tok * np));
	v->prefill_flops += (uint64_t)flops_total;
}

/* llama_params_fit's words when it shrinks an unset context to the free
 * memory (common/fit.cpp, "context size reduced from ... to ...") */
static void lc_capped_says(uint32_t asked, uint32_t kept)
{
	fprintf(stderr, "serve-like: llama_params_fit_impl: context size reduced from %u to %u\n",
		asked, kept);
}

const struct sv_persona sv_llamacpp = {
	.name = "llamacpp",
	.follows = "llama.cpp server, unified KV cache, flash attention",
	.allocs = SV_KV_ONE,
	.zero_fill = true,
	.host_kv_offload = true,
	.pool_capped = true,
	.capped_says = lc_capped_says,
	.setup = lc_setup,
	.step = lc_step,
};
