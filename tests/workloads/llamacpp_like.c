/* SPDX-License-Identifier: MIT */
/* llamacpp-like: the allocation life of llama.cpp's CUDA backend
 * (kv-allocation-patterns §4): an anonymous mmap standing in for the GGUF
 * file, one weight buffer filled through four 1 MiB pinned staging buffers,
 * one KV buffer for all layers (K and V of every layer, cell-indexed) with a
 * full-size cudaMemsetAsync, then the compute buffer. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "wl.h"

struct lcpp {
	char *file;                /* the "model file" */
	size_t file_bytes;
	char *weights;
};
static struct lcpp lcpp;

static int lcpp_weights(struct wl *w)
{
	size_t bytes = wl_round_up((uint64_t)(w->o.weights_frac * (double)w->dev_total), WL_MIB);
	lcpp.file = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (lcpp.file == MAP_FAILED)
		wl_die("mmap(model file stand-in, %zu MiB) failed", bytes >> 20);
	lcpp.file_bytes = bytes;
	wl_count_bytes(w, "mmap", bytes);
	wl_pattern(w->o.seed, 3000, 0, (unsigned char *)lcpp.file, bytes);
	cudaError_t err = wl_malloc(w, (void **)&lcpp.weights, bytes, "weights");
	if (err)
		return wl_oom(w, "cudaMalloc(weights)", bytes, err);
	void *stage[4];
	for (int i = 0; i < 4; i++) {
		WL_CK(cudaMallocHost(&stage[i], WL_MIB));
		wl_count_bytes(w, "pinned", WL_MIB);
	}
	for (size_t off = 0, i = 0; off < bytes; off += WL_MIB, i++) {
		size_t n = bytes - off < WL_MIB ? bytes - off : WL_MIB;
		if (i % 4 == 0)
			WL_CK(cudaStreamSynchronize(w->stream));  /* staging buffers free */
		memcpy(stage[i % 4], lcpp.file + off, n);
		WL_CK(cudaMemcpyAsync(lcpp.weights + off, stage[i % 4], n, cudaMemcpyHostToDevice,
				      w->stream));
	}
	WL_CK(cudaStreamSynchronize(w->stream));
	for (int i = 0; i < 4; i++)
		WL_CK(cudaFreeHost(stage[i]));
	size_t per_layer = bytes / (size_t)w->o.layers;
	for (int l = 0; l < w->o.layers; l++) {
		w->weights[l][0].ptr = lcpp.weights + (size_t)l * per_layer;
		w->weights[l][0].len = per_layer;
		w->nr_weights[l] = 1;
	}
	return 0;
}

static int lcpp_setup(struct wl *w)
{
	int L = w->o.layers, rc;
	uint64_t row = w->o.row_bytes;
	if ((rc = lcpp_weights(w)))
		return rc;
	size_t free_b, total;
	WL_CK(cudaMemGetInfo(&free_b, &total));
	uint64_t compute = wl_torch_round((uint64_t)(w->o.act_frac * (double)total));
	if (free_b <= compute)
		wl_die("no memory left for the KV cache");
	/* -c sized to what fits: 90% of what the compute buffer leaves */
	uint64_t cell = (uint64_t)L * 2 * row;
	uint64_t cells = (uint64_t)(0.9 * (double)(free_b - compute)) / cell;
	w->kv_budget = cells * cell;
	if (w->o.kv_bytes)
		w->o.kv_over_hbm = (double)w->o.kv_bytes / (double)w->kv_budget;
	cells = (uint64_t)((double)cells * w->o.kv_over_hbm);
	w->nr_tokens = cells;
	uint64_t kv = cells * cell;
	wl_log(w, "KV: one buffer of %llu MiB (%llu cells)", (unsigned long long)(kv >> 20),
	       (unsigned long long)cells);
	void *p;
	cudaError_t err = wl_malloc_kv(w, &p, kv);
	if (err)
		return wl_oom(w, "cudaMalloc(KV cache)", kv, err);
	WL_CK(cudaMemsetAsync(p, 0, kv, w->stream));      /* ggml_backend_buffer_clear */
	WL_CK(cudaStreamSynchronize(w->stream));
	for (int l = 0; l < L; l++) {
		w->k[l] = (struct wl_region){ (char *)p + (uint64_t)(2 * l) * cells * row, cells };
		w->v[l] = (struct wl_region){ (char *)p + (uint64_t)(2 * l + 1) * cells * row, cells };
	}
	w->table_bt = 1;          /* per-token slots: KV cell indices */
	void *cbuf;
	err = wl_malloc(w, &cbuf, compute, "compute");
	if (err)
		return wl_oom(w, "cudaMalloc(compute buffer)", compute, err);
	return 0;
}

/* The device weights must still equal the model file. */
static uint64_t lcpp_verify(struct wl *w, uint64_t *checked)
{
	unsigned char got[256];
	uint64_t bad = 0;
	for (int i = 0; i < 32; i++) {
		size_t off = lcpp.file_bytes / 32 * (size_t)i;
		WL_CK(cudaMemcpy(got, lcpp.weights + off, sizeof got, cudaMemcpyDeviceToHost));
		(*checked)++;
		if (memcmp(got, lcpp.file + off, sizeof got) && bad++ < 4)
			fprintf(stderr, "llamacpp-like: CORRUPTION: weights at +%zu differ from "
				"the model file\n", off);
	}
	(void)w;
	return bad;
}

static const struct wl_ops lcpp_ops = {
	.name = "llamacpp-like",
	.summary = "llama.cpp: mmapped model file, 4x1 MiB pinned staging, one KV buffer + full cudaMemsetAsync",
	.setup = lcpp_setup,
	.verify = lcpp_verify,
};

int main(int argc, char **argv)
{
	return wl_main(argc, argv, &lcpp_ops);
}
