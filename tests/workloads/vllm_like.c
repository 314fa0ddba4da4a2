/* SPDX-License-Identifier: MIT */
/* vllm-like: the allocation life of a vLLM V1 worker (kv-allocation-patterns
 * §2): weights of a few shapes repeating per layer, a profiling trough
 * (activations allocated, used, freed; then cudaMemGetInfo), then L
 * back-to-back identical per-layer KV tensors of ~available/L, each
 * zero-filled at birth (torch.zeros), K and V halves of one tensor. */
#include <stdlib.h>

#include "wl.h"

#define VLLM_UTIL 0.90        /* gpu_memory_utilization */

static const unsigned vllm_shape[4] = { 3, 2, 8, 4 };   /* qkv, o, gate_up, down */

static int vllm_weights(struct wl *w)
{
	int L = w->o.layers;
	uint64_t total = (uint64_t)(w->o.weights_frac * (double)w->dev_total);
	uint64_t per_unit = total / ((uint64_t)L + 1) / 17;   /* + embedding/lm_head */
	void *staging = malloc(4 * WL_MIB);                   /* pageable, like safetensors */
	if (!staging)
		wl_die("out of host memory");
	void *p;
	uint64_t embed = wl_torch_round(per_unit * 17);
	cudaError_t err = wl_malloc(w, &p, embed, "weights");
	if (err)
		return wl_oom(w, "cudaMalloc(embedding)", embed, err);
	wl_load_pattern(w, p, embed, 1000, staging, 4 * WL_MIB, false);
	for (int l = 0; l < L; l++)
		for (int i = 0; i < 4; i++) {
			uint64_t b = wl_torch_round(per_unit * vllm_shape[i]);
			err = wl_malloc(w, &p, b, "weights");
			if (err)
				return wl_oom(w, "cudaMalloc(weights)", b, err);
			wl_load_pattern(w, p, b, (uint64_t)l * 4 + (uint64_t)i, staging, 4 * WL_MIB,
					false);
			w->weights[l][i].ptr = p;
			w->weights[l][i].len = b;
		}
	for (int l = 0; l < L; l++)
		w->nr_weights[l] = 4;
	free(staging);
	return 0;
}

/* profile_run: a dummy forward pass, then empty_cache (a wave of frees). */
static int vllm_profile(struct wl *w, uint64_t *peak)
{
	uint64_t total = (uint64_t)(w->o.act_frac * (double)w->dev_total);
	static const unsigned parts[6] = { 4, 4, 2, 2, 1, 3 };
	void *act[6];
	struct fakecuda_range r[6];
	*peak = 0;
	for (int i = 0; i < 6; i++) {
		uint64_t b = wl_torch_round(total * parts[i] / 16);
		cudaError_t err = cudaMalloc(&act[i], b);
		if (err)
			return wl_oom(w, "cudaMalloc(activations)", b, err);
		r[i] = (struct fakecuda_range){ (CUdeviceptr)(uintptr_t)act[i], b, 1 };
		*peak += b;
	}
	wl_touch(w, r, 6);
	WL_CK(cudaDeviceSynchronize());
	for (int i = 0; i < 6; i++)
		WL_CK(cudaFree(act[i]));
	wl_count_bytes(w, "activations", *peak);
	return 0;
}

static int vllm_setup(struct wl *w)
{
	int L = w->o.layers, rc;
	uint64_t peak, row = w->o.row_bytes;
	if ((rc = vllm_weights(w)) || (rc = vllm_profile(w, &peak)))
		return rc;
	size_t free_b, total;
	WL_CK(cudaMemGetInfo(&free_b, &total));
	uint64_t requested = (uint64_t)(VLLM_UTIL * (double)total);
	uint64_t non_kv = w->bytes_by_kind[0] + peak;
	if (requested <= non_kv)
		wl_die("no memory left for the KV cache (weights+activations %llu MiB)",
		       (unsigned long long)(non_kv >> 20));
	uint64_t page = 2 * WL_BLOCK_TOKENS * row;             /* K+V of one block */
	uint64_t blocks = (requested - non_kv) / page / (uint64_t)L;
	w->kv_budget = blocks * page * (uint64_t)L;
	if (w->o.kv_bytes)
		w->o.kv_over_hbm = (double)w->o.kv_bytes / (double)w->kv_budget;
	uint64_t nb = (uint64_t)((double)blocks * w->o.kv_over_hbm);
	if (nb < 1)
		nb = 1;
	uint64_t tensor = nb * page;
	w->nr_tokens = nb * WL_BLOCK_TOKENS;
	wl_log(w, "KV: %d x %llu MiB (%llu blocks of %llu KiB per layer)", L,
	       (unsigned long long)(wl_torch_round(tensor) >> 20), (unsigned long long)nb,
	       (unsigned long long)(page >> 10));
	for (int l = 0; l < L; l++) {               /* torch.zeros per layer */
		void *p;
		cudaError_t err = wl_malloc_kv(w, &p, wl_torch_round(tensor));
		if (err)
			return wl_oom(w, "cudaMalloc(KV layer)", wl_torch_round(tensor), err);
		WL_CK(cudaMemset(p, 0, wl_torch_round(tensor)));
		w->k[l] = (struct wl_region){ p, w->nr_tokens };
		w->v[l] = (struct wl_region){ (char *)p + tensor / 2, w->nr_tokens };
	}
	return 0;
}

static uint64_t vllm_verify(struct wl *w, uint64_t *checked)
{
	uint64_t bad = 0;
	for (int l = 0; l < w->o.layers; l++)
		for (int i = 0; i < 4; i++) {
			bad += wl_verify_pattern(w, w->weights[l][i].ptr, w->weights[l][i].len,
						 (uint64_t)l * 4 + (uint64_t)i);
			*checked += 16;
		}
	return bad;
}

static const struct wl_ops vllm_ops = {
	.name = "vllm-like",
	.summary = "vLLM V1: weights, profiling trough, L identical zero-filled per-layer KV tensors",
	.setup = vllm_setup,
	.verify = vllm_verify,
};

int main(int argc, char **argv)
{
	return wl_main(argc, argv, &vllm_ops);
}
