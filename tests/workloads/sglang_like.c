/* SPDX-License-Identifier: MIT */
/* sglang-like: the allocation life of an SGLang MHA worker (kv-allocation-
 * patterns §3): weights, then profile_max_num_token from free memory, then
 * L K-buffers followed by L V-buffers (2L identical, zero-filled), and a
 * pinned host KV pool (HiCache) with block copies both ways: a finished
 * request's KV is backed up to the host, a returning session is loaded back. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

#define SGL_MEM_FRACTION 0.88   /* mem_fraction_static */

struct sgl {
	char *host;                 /* pinned pool: 2 x L regions of host_tokens rows */
	uint64_t host_tokens, host_bytes;
	uint64_t copies_dtoh, copies_htod, bytes_copied;
};
static struct sgl sgl;

static int sgl_weights(struct wl *w)
{
	int L = w->o.layers;
	uint64_t per_layer = (uint64_t)(w->o.weights_frac * (double)w->dev_total) / ((uint64_t)L + 1);
	void *staging = malloc(4 * WL_MIB);
	if (!staging)
		wl_die("out of host memory");
	for (int l = 0; l <= L; l++) {
		/* two tensors per layer: attention and MLP; l == L: embedding */
		for (int i = 0; i < (l < L ? 2 : 1); i++) {
			uint64_t b = wl_torch_round(l < L ? per_layer * (i ? 2 : 1) / 3 : per_layer);
			void *p;
			cudaError_t err = wl_malloc(w, &p, b, "weights");
			if (err)
				return wl_oom(w, "cudaMalloc(weights)", b, err);
			wl_load_pattern(w, p, b, 2000 + (uint64_t)l * 2 + (uint64_t)i, staging,
					4 * WL_MIB, false);
			if (l < L) {
				w->weights[l][i].ptr = p;
				w->weights[l][i].len = b;
				w->nr_weights[l] = i + 1;
			}
		}
	}
	free(staging);
	return 0;
}

static int sgl_setup(struct wl *w)
{
	int L = w->o.layers, rc;
	uint64_t row = w->o.row_bytes;
	if ((rc = sgl_weights(w)))
		return rc;
	size_t free_b, total;
	WL_CK(cudaMemGetInfo(&free_b, &total));
	uint64_t reserve = (uint64_t)((1.0 - SGL_MEM_FRACTION) * (double)total);
	if (free_b <= reserve)
		wl_die("no memory left for the KV pool");
	uint64_t cell = (uint64_t)L * 2 * row;
	uint64_t tokens = (free_b - reserve) / cell;
	w->kv_budget = tokens * cell;
	if (w->o.kv_bytes)
		w->o.kv_over_hbm = (double)w->o.kv_bytes / (double)w->kv_budget;
	tokens = (uint64_t)((double)tokens * w->o.kv_over_hbm);
	w->nr_tokens = tokens + 1;                      /* size + page_size */
	uint64_t b = wl_torch_round(w->nr_tokens * row);
	wl_log(w, "KV: 2 x %d buffers of %llu MiB (%llu tokens)", L,
	       (unsigned long long)(b >> 20), (unsigned long long)w->nr_tokens);
	for (int kv = 0; kv < 2; kv++)                  /* all K, then all V */
		for (int l = 0; l < L; l++) {
			void *p;
			cudaError_t err = wl_malloc_kv(w, &p, b);
			if (err)
				return wl_oom(w, kv ? "cudaMalloc(V buffer)" : "cudaMalloc(K buffer)",
					      b, err);
			WL_CK(cudaMemset(p, 0, b));
			(kv ? w->v : w->k)[l] = (struct wl_region){ p, w->nr_tokens };
		}
	w->table_bt = 1;          /* per-token slots: req_to_token */
	/* HiCache host pool: hicache_ratio x the device pool, one buffer. */
	sgl.host_tokens = (uint64_t)((double)w->nr_tokens * w->o.host_ratio);
	if (sgl.host_tokens < w->nr_tokens)
		sgl.host_tokens = w->nr_tokens;
	sgl.host_bytes = sgl.host_tokens * row * 2 * (uint64_t)L;
	cudaError_t err = cudaHostAlloc((void **)&sgl.host, sgl.host_bytes, cudaHostAllocDefault);
	if (err)
		wl_die("cudaHostAlloc(host KV pool, %llu MiB): %s",
		       (unsigned long long)(sgl.host_bytes >> 20), cudaGetErrorName(err));
	wl_count_bytes(w, "host_pool", sgl.host_bytes);
	return 0;
}

static char *sgl_host_region(const struct wl *w, int l, int kv)
{
	return sgl.host + ((uint64_t)l * 2 + (uint64_t)kv) * sgl.host_tokens * w->o.row_bytes;
}

/* Copy a session's rows of every layer between device and host pool. */
static void sgl_copy(struct wl *w, const struct wl_session *s, uint64_t ntok, bool to_host)
{
	uint64_t row = w->o.row_bytes, off = s->start * row, n = ntok * row;
	for (int l = 0; l < w->o.layers; l++)
		for (int kv = 0; kv < 2; kv++) {
			char *dev = (kv ? w->v : w->k)[l].base + off;
			char *host = sgl_host_region(w, l, kv) + off;
			if (to_host)
				WL_CK(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, w->stream));
			else
				WL_CK(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, w->stream));
			sgl.bytes_copied += n;
			if (to_host)
				sgl.copies_dtoh++;
			else
				sgl.copies_htod++;
		}
}

/* Arrivals of sessions with a host copy: load it back (HiCache hit). */
static int sgl_before_step(struct wl *w, int t)
{
	for (uint32_t q = w->step_off[t]; q < w->step_off[t + 1]; q++) {
		struct wl_session *s = &w->sess[w->req[q].sess];
		if (w->req[q].pos == 0 && s->backed_up)
			sgl_copy(w, s, s->ctx, false);
	}
	return 0;
}

/* Completions: back the session's KV up to the host pool. */
static int sgl_after_step(struct wl *w, int t)
{
	for (uint32_t q = w->step_off[t]; q < w->step_off[t + 1]; q++) {
		struct wl_session *s = &w->sess[w->req[q].sess];
		if (w->req[q].pos + 1 == w->req[q].len) {
			sgl_copy(w, s, s->ctx, true);
			s->backed_up = true;
		}
	}
	return 0;
}

/* The host copies must hold the stamps the device had. */
static uint64_t sgl_verify(struct wl *w, uint64_t *checked)
{
	unsigned char want[32];
	uint64_t bad = 0, row = w->o.row_bytes;
	WL_CK(cudaStreamSynchronize(w->stream));
	for (int i = 0; i < w->nr_sess; i++) {
		const struct wl_session *s = &w->sess[i];
		if (!s->backed_up)
			continue;
		uint64_t lo = s->start * row, hi = (s->start + s->ctx) * row;
		uint64_t first = wl_round_up(lo, WL_STAMP_EVERY);
		for (int r = 0; r < 2 * w->o.layers; r++)
			for (uint64_t off = first; off + 32 <= hi; off += WL_STAMP_EVERY) {
				wl_stamp(w->o.seed, r, off, want);
				(*checked)++;
				if (memcmp(sgl_host_region(w, r / 2, r & 1) + off, want, 32) &&
				    bad++ < 4)
					fprintf(stderr, "sglang-like: CORRUPTION: host pool copy of "
						"session %d, region %d, offset %" PRIu64 "\n", i, r, off);
			}
	}
	return bad;
}

static void sgl_report(struct wl *w)
{
	(void)w;
	printf("host_copies_dtoh=%" PRIu64 "\nhost_copies_htod=%" PRIu64
	       "\nhost_bytes_copied=%" PRIu64 "\n", sgl.copies_dtoh, sgl.copies_htod,
	       sgl.bytes_copied);
}

static const struct wl_ops sgl_ops = {
	.name = "sglang-like",
	.summary = "SGLang MHA: weights, L K-buffers then L V-buffers, pinned HiCache host pool with block copies",
	.setup = sgl_setup,
	.before_step = sgl_before_step,
	.after_step = sgl_after_step,
	.verify = sgl_verify,
	.report = sgl_report,
};

int main(int argc, char **argv)
{
	return wl_main(argc, argv, &sgl_ops);
}
