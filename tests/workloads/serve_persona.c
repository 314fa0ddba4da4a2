/* SPDX-License-Identifier: MIT */
/* serve-like's server personas: the table of them, what they share (a
 * layer's dense kernels, KV row accesses made from a kernel body, launch),
 * and vllm-v1-triton, the interface serve-like was first written against:
 * vLLM's V1 model runner with its Triton attention kernel. Whole block
 * table rows go up each step from a pinned staging buffer to a fixed
 * device address, and the attention kernel takes K base, V base, the
 * table, the lengths and the table's stride as separate parameters
 * (docs/workloads.md "Server personas"). Test infrastructure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

extern const struct sv_persona sv_vllm_v1_triton, sv_vllm_v1_fa, sv_vllm_v2, sv_sglang,
	sv_llamacpp, sv_hybrid;

const struct sv_persona *const sv_personas[] = {
	&sv_vllm_v2, &sv_vllm_v1_fa, &sv_vllm_v1_triton, &sv_sglang, &sv_llamacpp, &sv_hybrid,
	NULL,
};

const struct sv_persona *sv_persona_find(const char *name)
{
	for (int i = 0; sv_personas[i]; i++)
		if (!strcmp(sv_personas[i]->name, name))
			return sv_personas[i];
	return NULL;
}

/* ---- shared by the personas ---- */

void sv_launch(struct sv *v, CUfunction f, void **args)
{
	CUresult res = v->launch(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)v->stream, args, NULL);
	if (res != CUDA_SUCCESS)
		wl_die("cuLaunchKernel failed: CUresult %d", (int)res);
}

void sv_uploaded(struct sv *v, uint64_t bytes)
{
	v->bytes_tables += bytes;
	v->step_upload += bytes;
	if (v->step_upload > v->max_upload)
		v->max_upload = v->step_upload;
}

/* What an interposer learns of each kernel the persona launches: its name
 * and its parameters' offsets and sizes, asked of the driver. */
void sv_persona_facts(struct sv *v)
{
	void *fn_name = NULL, *fn_info = NULL;
	enum cudaDriverEntryPointQueryResult st;
	if (cudaGetDriverEntryPointByVersion("cuFuncGetName", &fn_name, 12030, cudaEnableDefault,
					     &st) || !fn_name ||
	    cudaGetDriverEntryPointByVersion("cuFuncGetParamInfo", &fn_info, 12040,
					     cudaEnableDefault, &st) || !fn_info) {
		cudaGetLastError();
		return;
	}
	PFN_cuFuncGetName_v12030 get_name = (PFN_cuFuncGetName_v12030)fn_name;
	PFN_cuFuncGetParamInfo_v12040 get_info = (PFN_cuFuncGetParamInfo_v12040)fn_info;
	for (int i = 0; i < v->nr_kfn; i++) {
		const char *name = "?";
		get_name(&name, v->kfn[i]);
		size_t off, size, n = 0;
		printf("kernel=%s", name);
		while (get_info(v->kfn[i], n, &off, &size) == CUDA_SUCCESS)
			printf("%s%zu:%zu", n++ ? "," : " params=", off, size);
		printf(" nparams=%zu\n", n);
	}
}

void sv_launch_grid(struct sv *v, CUfunction f, unsigned grid, void **args)
{
	CUresult res = v->launch(f, grid, 1, 1, 1, 1, 1, 0, (CUstream)v->stream, args, NULL);
	if (res != CUDA_SUCCESS)
		wl_die("cuLaunchKernel failed: CUresult %d", (int)res);
}

void *sv_scratch(struct sv *v, size_t words)
{
	if (words > v->scratch_n) {
		size_t n = words < 4096 ? 4096 : words * 2;
		int32_t *p = realloc(v->scratch, n * sizeof *p);
		if (!p)
			wl_die("out of host memory");
		v->scratch = p;
		v->scratch_n = n;
	}
	return v->scratch;
}

CUfunction sv_define(struct sv *v, const char *name, const struct fakecuda_param *p,
		     unsigned nr, fakecuda_body_fn body)
{
	CUfunction f = v->kdefine ? v->kdefine(name, p, nr, body, v) : NULL;
	if (!f)
		wl_die("fakecuda_kernel_define(%s) failed", name);
	if (v->nr_kfn < 32)
		v->kfn[v->nr_kfn++] = f;
	return f;
}

/* KV rows of one sequence, from a kernel body: ids[j / bt] is the block
 * (bt 1: the token slot) of token j, rows [0, start) read and [start, len)
 * written, consecutive rows in one access. 0 or a CUresult. */
int sv_kv_rows(struct sv *v, uintptr_t base, const int32_t *ids, unsigned bt, uint64_t row,
	       uint32_t start, uint32_t len)
{
	uintptr_t run = 0;
	size_t run_len = 0;
	int run_w = 0, r = 0;
	for (uint32_t j = 0; j < len && !r;) {
		int32_t id = ids[j / bt];
		if (id < 0)
			return CUDA_ERROR_ILLEGAL_ADDRESS;
		int write = j >= start;
		uint32_t n = bt - j % bt, edge = write ? len : start;
		if (n > edge - j)
			n = edge - j;
		uintptr_t at = base + ((uint64_t)id * bt + j % bt) * row;
		if (run_len && run_w == write && run + run_len == at) {
			run_len += (size_t)n * row;
		} else {
			if (run_len)
				r = v->kaccess((const void *)run, run_len, run_w);
			run = at;
			run_len = (size_t)n * row;
			run_w = write;
		}
		j += n;
	}
	if (!r && run_len)
		r = v->kaccess((const void *)run, run_len, run_w);
	return r;
}

/* A layer's dense kernels (QKV, O, gate-up, down GEMMs) folded into one
 * launch: it reads the layer's four weight tensors and costs its FLOPs.
 * Parameters: the layer's weight ranges (device), their count, FLOPs. */
static int sv_gemm_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	const struct fakecuda_range *rg = *(const struct fakecuda_range *const *)args[0];
	unsigned nr = *(const unsigned *)args[1];
	uint64_t flops = *(const uint64_t *)args[2];
	for (unsigned i = 0; i < nr; i++) {
		struct fakecuda_range x;
		int r = v->kread(&rg[i], &x, sizeof x);
		if (!r)
			r = v->kaccess((const void *)(uintptr_t)x.ptr, x.len, x.write);
		if (r)
			return r;
	}
	v->kflops((double)flops);
	return 0;
}

void sv_gemm(struct sv *v, int layer, uint64_t flops)
{
	if (!v->gemm_fn) {
		static const struct fakecuda_param p[] = { { 8, 8 }, { 4, 4 }, { 8, 8 } };
		v->gemm_fn = sv_define(v, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
				       p, 3, sv_gemm_body);
	}
	CUdeviceptr wr = (CUdeviceptr)(uintptr_t)(v->d_weights + 4 * layer);
	unsigned nw = 4;
	void *args[] = { &wr, &nw, &flops };
	sv_launch(v, v->gemm_fn, args);
}

/* A request's row in a per-request device table (vLLM V2's request
 * states, SGLang's req_to_token): a running turn keeps its row; a new one
 * takes the first row whose turn no longer runs (*fresh set). row_of is
 * indexed by schedule position, row_q by row. Dies when none is free. */
int sv_request_row(const struct sv *v, int *row_of, int *row_q, uint32_t q, bool *fresh)
{
	*fresh = false;
	if (row_of[q] >= 0)
		return row_of[q];
	for (int i = 0; i < v->o.max_batch; i++) {
		int old = row_q[i];
		bool live = false;
		for (int j = 0; old >= 0 && j < v->nr_run && !live; j++)
			live = v->run[j].q == (uint32_t)old;
		if (old >= 0 && !live)
			row_of[old] = row_q[i] = -1;
		if (row_q[i] < 0) {
			row_q[i] = (int)q;
			row_of[q] = i;
			*fresh = true;
			return i;
		}
	}
	wl_die("%s: no free request row", v->o.persona->name);
}

/* ---- vLLM V1: whole table rows from pinned staging to a fixed address ---- */

void sv_v1_tables_setup(struct sv *v)
{
	unsigned max = (unsigned)v->o.max_batch;
	size_t part = (size_t)max * v->stride + 2 * max;
	WL_CK(cudaMallocHost((void **)&v->stage, 2 * part * sizeof(int32_t)));
	size_t tb = (size_t)max * v->stride * sizeof(int32_t), lb = max * sizeof(int32_t);
	WL_CK(cudaMalloc((void **)&v->d_dtable, tb));
	WL_CK(cudaMalloc((void **)&v->d_ptable, tb));
	WL_CK(cudaMalloc((void **)&v->d_dlens, lb));
	WL_CK(cudaMalloc((void **)&v->d_plens, lb));
	WL_CK(cudaMalloc((void **)&v->d_pstarts, lb));
}

/* Fill the staging rows of the running requests selected by prefill (or
 * not), upload them; returns how many. */
unsigned sv_v1_tables(struct sv *v, bool prefill, int32_t *stage, int32_t *d_table,
		      int32_t *d_lens, int32_t *d_starts)
{
	unsigned n = 0, max = (unsigned)v->o.max_batch;
	int32_t *lens = stage + (size_t)max * v->stride, *starts = lens + max;
	for (int i = 0; i < v->nr_run; i++) {
		const struct sv_running *r = &v->run[i];
		if (r->loading || r->prefill != prefill)
			continue;
		int32_t *row = stage + (size_t)n * v->stride;
		for (uint32_t j = 0; j < r->nblocks; j++)
			row[j] = (int32_t)r->blocks[j];
		lens[n] = (int32_t)(prefill ? r->prompt : r->prompt + r->produced);
		starts[n] = (int32_t)r->start;
		n++;
	}
	if (!n)
		return 0;
	size_t tb = (size_t)n * v->stride * sizeof(int32_t), lb = (size_t)n * sizeof(int32_t);
	WL_CK(cudaMemcpyAsync(d_table, stage, tb, cudaMemcpyHostToDevice, v->stream));
	WL_CK(cudaMemcpyAsync(d_lens, lens, lb, cudaMemcpyHostToDevice, v->stream));
	sv_uploaded(v, tb + lb);
	if (d_starts) {
		WL_CK(cudaMemcpyAsync(d_starts, starts, lb, cudaMemcpyHostToDevice, v->stream));
		sv_uploaded(v, lb);
	}
	return n;
}

/* ---- vllm-v1-triton ---- */

/* Prefill: the stand-in's compute kernel (FLOPs plus the rows it reads and
 * writes); decode: its paged kernel, kernel_unified_attention_2d's
 * separate K, V, table, lengths and stride (fakecuda.h). */
static void sv_v1_triton_step(struct sv *v)
{
	unsigned max = (unsigned)v->o.max_batch;
	size_t part = (size_t)max * v->stride + 2 * max;
	unsigned np = sv_v1_tables(v, true, v->stage, v->d_ptable, v->d_plens, v->d_pstarts);
	unsigned nd = sv_v1_tables(v, false, v->stage + part, v->d_dtable, v->d_dlens, NULL);
	sv_before_kernels(v);
	uint64_t flops = (uint64_t)(sv_prefill_flops(v) / v->o.layers);
	v->prefill_flops += flops * (uint64_t)v->o.layers;
	for (int l = 0; l < v->o.layers; l++) {
		CUdeviceptr k = (CUdeviceptr)(uintptr_t)v->region[2 * l];
		CUdeviceptr vv = (CUdeviceptr)(uintptr_t)v->region[2 * l + 1];
		unsigned stride = v->stride, bt = WL_BLOCK_TOKENS, row = v->o.row_bytes;
		if (np) {
			CUdeviceptr t = (CUdeviceptr)(uintptr_t)v->d_ptable;
			CUdeviceptr ln = (CUdeviceptr)(uintptr_t)v->d_plens;
			CUdeviceptr st = (CUdeviceptr)(uintptr_t)v->d_pstarts;
			void *args[] = { &flops, &k, &vv, &t, &ln, &st, &np, &stride, &bt, &row };
			sv_launch(v, v->compute_fn, args);
		}
		CUdeviceptr t = (CUdeviceptr)(uintptr_t)v->d_dtable;
		CUdeviceptr ln = (CUdeviceptr)(uintptr_t)v->d_dlens;
		CUdeviceptr wr = (CUdeviceptr)(uintptr_t)(v->d_weights + 4 * l);
		unsigned nw = 4;
		void *args[] = { &k, &vv, &t, &ln, &nd, &stride, &bt, &row, &wr, &nw };
		sv_launch(v, v->paged_fn, args);
	}
}

const struct sv_persona sv_vllm_v1_triton = {
	.name = "vllm-v1-triton",
	.follows = "vLLM V1 model runner, TRITON_ATTN backend",
	.allocs = SV_KV_PER_LAYER,
	.setup = sv_v1_tables_setup,
	.step = sv_v1_triton_step,
};
