/* SPDX-License-Identifier: MIT */
/* fakecuda's prefill kernel (SIMULATED device; a test double): the cost of
 * a compute-bound launch, FLOPs / (peak x efficiency) of device time, plus
 * the paged KV rows a prefill reads (the cached prefix) and writes (the new
 * tokens), addressed through a block table in device memory as
 * fc_paged.c's kernel is (fakecuda.h has the parameters). Also the quiet
 * byte access a test uses to stamp and check KV without moving it. */
#include "fc_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- knobs: FAKECUDA_MMA_PEAK (FLOP/s), FAKECUDA_MMA_EFF (0..1] ---- */

#define FC_MMA_PEAK_DEFAULT 790e12   /* H200 bf16 dense matrix rate, as measured */
#define FC_MMA_EFF_DEFAULT  0.5

static double fc_mma_rate;          /* FLOP per ns */
static pthread_once_t fc_mma_once = PTHREAD_ONCE_INIT;

static double fc_env_double(const char *var, double def, double lo, double hi)
{
	const char *s = getenv(var);
	if (!s || !*s)
		return def;
	char *end;
	double v = strtod(s, &end);
	return (*end || !(v > lo && v <= hi)) ? def : v;
}

static void fc_mma_init(void)
{
	double peak = fc_env_double("FAKECUDA_MMA_PEAK", FC_MMA_PEAK_DEFAULT, 0, 1e18);
	double eff = fc_env_double("FAKECUDA_MMA_EFF", FC_MMA_EFF_DEFAULT, 0, 1);
	fc_mma_rate = peak * eff / 1e9;
}

/* ---- the kernel ---- */

struct fc_compute_args {
	uint64_t flops;
	uintptr_t k, v, table, lens, starts;
	unsigned nr_seqs, stride, block_tokens, row_bytes;
};

static void fc_compute_unpack(const struct fc_kargs *a, struct fc_compute_args *p)
{
	*p = (struct fc_compute_args){
		.flops = a->v[0], .k = (uintptr_t)a->v[1], .v = (uintptr_t)a->v[2],
		.table = (uintptr_t)a->v[3], .lens = (uintptr_t)a->v[4],
		.starts = (uintptr_t)a->v[5], .nr_seqs = (unsigned)a->v[6],
		.stride = (unsigned)a->v[7], .block_tokens = (unsigned)a->v[8],
		.row_bytes = (unsigned)a->v[9],
	};
}

/* Tokens [0, start) of one sequence read, [start, len) written, in runs of
 * consecutive rows (a block is block_tokens rows). */
static CUresult fc_compute_rows(const struct fc_compute_args *p, uintptr_t base,
				const int32_t *ids, uint32_t start, uint32_t len, int dev)
{
	uint64_t bt = p->block_tokens, row = p->row_bytes;
	uintptr_t run = 0;
	size_t run_len = 0;
	int run_w = 0;
	CUresult r = CUDA_SUCCESS;
	for (uint32_t j = 0; j < len && r == CUDA_SUCCESS;) {
		int32_t id = ids[j / bt];
		if (id < 0)
			return CUDA_ERROR_ILLEGAL_ADDRESS;
		int write = j >= start;
		uint32_t n = (uint32_t)(bt - j % bt), edge = write ? len : start;
		if (n > edge - j)
			n = edge - j;
		uintptr_t at = base + ((uint64_t)id * bt + j % bt) * row;
		if (run_len && run_w == write && run + run_len == at) {
			run_len += (size_t)n * row;
		} else {
			if (run_len)
				r = fc_gpu_access(run, run_len, run_w, dev);
			run = at;
			run_len = (size_t)n * row;
			run_w = write;
		}
		j += n;
	}
	if (r == CUDA_SUCCESS && run_len)
		r = fc_gpu_access(run, run_len, run_w, dev);
	return r;
}

static CUresult fc_compute_body(const struct fc_compute_args *p, int dev)
{
	if (!p->nr_seqs)
		return CUDA_SUCCESS;
	size_t nb = (size_t)p->nr_seqs * sizeof(int32_t);
	const int32_t *lens = (const int32_t *)fc_kernel_mem(p->lens, nb);
	const int32_t *starts = (const int32_t *)fc_kernel_mem(p->starts, nb);
	if (!lens || !starts)
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	CUresult r = fc_gpu_access(p->lens, nb, 0, dev);
	if (r == CUDA_SUCCESS)
		r = fc_gpu_access(p->starts, nb, 0, dev);
	size_t row_bytes = (size_t)p->stride * sizeof(int32_t);
	for (unsigned i = 0; i < p->nr_seqs && r == CUDA_SUCCESS; i++) {
		int32_t len = lens[i], start = starts[i];
		if (len < 0 || start < 0 || start > len ||
		    (uint64_t)len > (uint64_t)p->stride * p->block_tokens)
			return CUDA_ERROR_ILLEGAL_ADDRESS;
		if (!len)
			continue;
		uintptr_t at = p->table + i * row_bytes;
		const int32_t *ids = (const int32_t *)fc_kernel_mem(at, row_bytes);
		if (!ids)
			return CUDA_ERROR_ILLEGAL_ADDRESS;
		uint64_t used = ((uint64_t)len + p->block_tokens - 1) / p->block_tokens;
		r = fc_gpu_access(at, (size_t)used * sizeof(int32_t), 0, dev);
		if (r == CUDA_SUCCESS && p->k)
			r = fc_compute_rows(p, p->k, ids, (uint32_t)start, (uint32_t)len, dev);
		if (r == CUDA_SUCCESS && p->v)
			r = fc_compute_rows(p, p->v, ids, (uint32_t)start, (uint32_t)len, dev);
	}
	return r;
}

/* SM time of flops (lock held). */
void fc_compute_flops(double flops)
{
	pthread_once(&fc_mma_once, fc_mma_init);
	fc_clock_ns((uint64_t)(flops / fc_mma_rate));
}

CUresult fc_compute_run(const struct fc_kargs *a, int dev)
{
	struct fc_compute_args p;
	fc_compute_unpack(a, &p);
	if (p.nr_seqs && (!p.table || !p.lens || !p.starts || !p.stride || !p.block_tokens ||
			  !p.row_bytes))
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	fc_stats.c.launches++;
	fc_clock_ns(fc_knobs.launch_ns);
	fc_compute_flops((double)p.flops);
	CUresult r = fc_compute_body(&p, dev);
	fc_unlock();
	return r == CUDA_SUCCESS ? r : CUDA_ERROR_ILLEGAL_ADDRESS;
}

/* ---- quiet access: no cost, no counter, no migration ---- */

/* Copy between buf and the driver's bytes of [p, p+len) wherever they are
 * now, in pieces that do not cross a managed block. Lock held inside. */
static int fc_quiet(uintptr_t p, void *buf, size_t len, bool write)
{
	fc_config_init();
	fc_lock();
	int rc = 0;
	while (len && !rc) {
		struct fc_alloc *a = fc_reg_find(p);
		size_t n = len;
		char *at = NULL;
		if (a && a->kind == FC_KIND_MANAGED) {
			struct fc_block *b = fc_block_of(p);
			size_t in_block = FC_UMP - (p & (FC_UMP - 1));
			n = n < in_block ? n : in_block;
			at = b ? fc_block_store(b) + (p & (FC_UMP - 1)) : NULL;
			if (at && n > a->base + a->size - p)
				at = NULL;
			if (at && write)   /* stands for a kernel's write */
				fc_block_undiscard(b);
		} else if (a) {
			at = fc_view(p, n);
		}
		if (!at) {
			rc = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		if (write)
			memcpy(at, buf, n);
		else
			memcpy(buf, at, n);
		p += n;
		buf = (char *)buf + n;
		len -= n;
	}
	fc_unlock();
	return rc;
}

FC_EXPORT int fakecuda_peek(const void *ptr, void *out, size_t len)
{
	return fc_quiet((uintptr_t)ptr, out, len, false);
}

FC_EXPORT int fakecuda_poke(void *ptr, const void *in, size_t len)
{
	return fc_quiet((uintptr_t)ptr, (void *)in, len, true);
}
