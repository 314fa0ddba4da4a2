/* SPDX-License-Identifier: MIT */
/* kvtier workloads: device-resident block tables, the way servers hand KV
 * to their attention kernels (kv-allocation-patterns.md; docs/workloads.md
 * "Block tables"). Each step the workload writes every running sequence's
 * int32 block ids and its length into a pinned staging buffer and uploads
 * them with one async host-to-device copy each (vLLM's block table and
 * seq_lens, SGLang's req_to_token, llama.cpp's cell indices); each layer's
 * kernel (fakecuda_paged_kernel) is handed the layer's K and V bases and
 * the device pointers, and computes the rows itself. kvtier sees the bases
 * (allocation-level evidence) and the copy, never an address inside the KV.
 * --tables host keeps the older kernel, which is handed a host array of
 * exact row ranges. Test infrastructure: stdio and exit() are fine here. */
#include <stdlib.h>
#include <string.h>

#include "wl.h"

struct wl_tables {
	unsigned bt;               /* tokens per block of the table */
	unsigned stride;           /* entries per sequence */
	unsigned max_seqs;
	unsigned prefix_blocks;
	int32_t *stage;            /* pinned: table, then lens */
	int32_t *d_table, *d_lens; /* device */
	struct fakecuda_range *d_weights;  /* device: every layer's weight ranges */
	unsigned nr_seqs;          /* of the step uploaded last */
	CUfunction fn;
};
static struct wl_tables tb;

bool wl_tables_on(const struct wl *w)
{
	return !w->o.host_tables && (w->paged_fn || w->fake.paged_kernel);
}

void wl_tables_init(struct wl *w)
{
	if (!wl_tables_on(w))
		return;
	int steps = w->o.warmup + w->o.steps;
	tb.bt = w->table_bt ? w->table_bt : WL_BLOCK_TOKENS;
	tb.fn = w->paged_fn ? w->paged_fn : w->fake.paged_kernel();
	uint64_t pre = wl_round_up((uint64_t)w->o.prefix_tokens, tb.bt);
	uint64_t cap = 0;
	for (int i = 0; i < w->nr_sess; i++)
		if (w->sess[i].cap > cap)
			cap = w->sess[i].cap;
	tb.prefix_blocks = (unsigned)(pre / tb.bt);
	tb.stride = (unsigned)((pre + wl_round_up(cap + 1, tb.bt)) / tb.bt);
	for (int t = 0; t < steps; t++)
		if (w->step_off[t + 1] - w->step_off[t] > tb.max_seqs)
			tb.max_seqs = w->step_off[t + 1] - w->step_off[t];
	if (!tb.max_seqs)
		tb.max_seqs = 1;
	size_t table_bytes = (size_t)tb.max_seqs * tb.stride * sizeof(int32_t);
	size_t lens_bytes = (size_t)tb.max_seqs * sizeof(int32_t);
	WL_CK(cudaMallocHost((void **)&tb.stage, table_bytes + lens_bytes));
	WL_CK(cudaMalloc((void **)&tb.d_table, table_bytes));
	WL_CK(cudaMalloc((void **)&tb.d_lens, lens_bytes));
	/* the weights: one upload, as a model's parameter pointers are fixed */
	size_t nw = 4 * (size_t)w->o.layers;
	struct fakecuda_range *wr = calloc(nw, sizeof *wr);
	if (!wr)
		wl_die("out of host memory");
	for (int l = 0; l < w->o.layers; l++)
		for (int i = 0; i < w->nr_weights[l]; i++)
			wr[4 * (size_t)l + (size_t)i] = (struct fakecuda_range){
				(CUdeviceptr)(uintptr_t)w->weights[l][i].ptr, w->weights[l][i].len, 0 };
	WL_CK(cudaMalloc((void **)&tb.d_weights, nw * sizeof *wr));
	WL_CK(cudaMemcpy(tb.d_weights, wr, nw * sizeof *wr, cudaMemcpyHostToDevice));
	free(wr);
	wl_log(w, "block tables in device memory: %u-token blocks, %u entries per sequence, "
	       "up to %u sequences", tb.bt, tb.stride, tb.max_seqs);
}

/* Step t's table: the shared prefix's blocks (when the session reads it),
 * then the session's own, and each sequence's length with the token it
 * decodes now, the one its kernel writes. */
void wl_tables_step(struct wl *w, int t)
{
	if (!wl_tables_on(w))
		return;
	unsigned n = w->step_off[t + 1] - w->step_off[t];
	int32_t *lens = tb.stage + (size_t)tb.max_seqs * tb.stride;
	for (unsigned i = 0; i < n; i++) {
		const struct wl_req *q = &w->req[w->step_off[t] + i];
		const struct wl_session *s = &w->sess[q->sess];
		int32_t *row = tb.stage + (size_t)i * tb.stride;
		unsigned e = 0;
		if (s->prefix)
			for (; e < tb.prefix_blocks; e++)
				row[e] = (int32_t)e;
		uint64_t own = (uint64_t)s->ctx + q->pos + 1;
		uint64_t first = s->start / tb.bt;
		for (uint64_t b = 0; b < (own + tb.bt - 1) / tb.bt; b++)
			row[e++] = (int32_t)(first + b);
		lens[i] = (int32_t)((s->prefix ? (uint64_t)tb.prefix_blocks * tb.bt : 0) + own);
	}
	tb.nr_seqs = n;
	if (!n)
		return;
	if (t >= w->o.warmup)      /* pinned source: read over the link */
		w->bytes_tables += ((uint64_t)n * tb.stride + n) * sizeof(int32_t);
	WL_CK(cudaMemcpyAsync(tb.d_table, tb.stage, (size_t)n * tb.stride * sizeof(int32_t),
			      cudaMemcpyHostToDevice, w->stream));
	WL_CK(cudaMemcpyAsync(tb.d_lens, lens, (size_t)n * sizeof(int32_t),
			      cudaMemcpyHostToDevice, w->stream));
}

static void wl_paged_launch(struct wl *w, const void *key, unsigned n)
{
	int l = (int)((const struct wl_region *)key - w->k);
	CUdeviceptr k = (CUdeviceptr)(uintptr_t)w->k[l].base;
	CUdeviceptr v = (CUdeviceptr)(uintptr_t)w->v[l].base;
	CUdeviceptr table = (CUdeviceptr)(uintptr_t)tb.d_table;
	CUdeviceptr lens = (CUdeviceptr)(uintptr_t)tb.d_lens;
	CUdeviceptr wr = (CUdeviceptr)(uintptr_t)(tb.d_weights + 4 * (size_t)l);
	unsigned nr = n, stride = tb.stride, bt = tb.bt, row = w->o.row_bytes;
	unsigned nw = (unsigned)w->nr_weights[l];
	void *args[] = { &k, &v, &table, &lens, &nr, &stride, &bt, &row, &wr, &nw };
	/* a real GPU: one block per sequence (and per weight range) for each
	 * of K, V and the weights; the stand-in runs the whole launch as one */
	unsigned gx = w->paged_real ? (nr > nw ? nr : nw) : 1, gy = w->paged_real ? 3 : 1;
	unsigned bx = w->paged_real ? 256 : 1;
	CUresult res = w->launch(tb.fn, gx ? gx : 1, gy, 1, bx, 1, 1, 0, (CUstream)w->stream, args,
				 NULL);
	if (res != CUDA_SUCCESS)
		wl_die("cuLaunchKernel(paged) failed: CUresult %d", (int)res);
}

/* Layer l's kernel over the step uploaded last; under --graphs one graph
 * per (layer, batch size), as servers capture one per padded batch size. */
void wl_tables_launch(struct wl *w, int l)
{
	wl_launch_maybe_graph(w, &w->k[l], tb.nr_seqs, wl_paged_launch);
}

void wl_tables_fini(struct wl *w)
{
	if (!wl_tables_on(w))
		return;
	WL_CK(cudaFreeHost(tb.stage));
	WL_CK(cudaFree(tb.d_table));
	WL_CK(cudaFree(tb.d_lens));
	WL_CK(cudaFree(tb.d_weights));
}
