/* SPDX-License-Identifier: MIT */
/* fakecuda's paged-attention kernel (SIMULATED device; a test double): the
 * kernel a server launches per layer, handed the layer's K and V bases and
 * a block table in device memory, computing each row's address itself
 * (fakecuda.h has its parameters). Host code sees only the bases and the
 * table's device address; the table's contents are reached here through
 * the driver's private view, as a GPU reads its own memory. */
#include "fc_internal.h"

#include <string.h>

struct fc_paged_args {
	uintptr_t k, v, table, lens, ranges;
	unsigned nr_seqs, stride, block_tokens, row_bytes, nr_ranges;
};

static void fc_paged_unpack(const struct fc_kargs *a, struct fc_paged_args *p)
{
	*p = (struct fc_paged_args){
		.k = (uintptr_t)a->v[0], .v = (uintptr_t)a->v[1], .table = (uintptr_t)a->v[2],
		.lens = (uintptr_t)a->v[3], .nr_seqs = (unsigned)a->v[4],
		.stride = (unsigned)a->v[5], .block_tokens = (unsigned)a->v[6],
		.row_bytes = (unsigned)a->v[7], .ranges = (uintptr_t)a->v[8],
		.nr_ranges = (unsigned)a->v[9],
	};
}

/* Accesses to consecutive addresses with the same direction become one. */
struct fc_run { uintptr_t addr; size_t len; int write; };

static CUresult fc_run_add(struct fc_run *run, uintptr_t addr, size_t len, int write, int dev)
{
	if (run->len && run->write == write && run->addr + run->len == addr) {
		run->len += len;
		return CUDA_SUCCESS;
	}
	CUresult r = run->len ? fc_gpu_access(run->addr, run->len, run->write, dev)
			      : CUDA_SUCCESS;
	*run = (struct fc_run){ addr, len, write };
	return r;
}

/* One sequence's rows of one tensor: tokens [0, len-1) read, len-1 written. */
static CUresult fc_paged_rows(const struct fc_paged_args *p, uintptr_t base,
			      const int32_t *ids, uint32_t len, int dev)
{
	uint64_t bt = p->block_tokens, row = p->row_bytes;
	struct fc_run run = { 0 };
	CUresult r = CUDA_SUCCESS;
	for (uint32_t j = 0; j < len && r == CUDA_SUCCESS;) {
		int32_t id = ids[j / bt];
		if (id < 0)
			return CUDA_ERROR_ILLEGAL_ADDRESS;
		uint64_t slot = (uint64_t)id * bt + j % bt;
		uint32_t n = (uint32_t)(bt - j % bt);
		int write = j == len - 1;
		if (!write && n > len - 1 - j)
			n = len - 1 - j;
		if (write)
			n = 1;
		r = fc_run_add(&run, base + slot * row, (size_t)(n * row), write, dev);
		j += n;
	}
	if (r == CUDA_SUCCESS && run.len)
		r = fc_gpu_access(run.addr, run.len, run.write, dev);
	return r;
}

static CUresult fc_paged_body(const struct fc_paged_args *p, int dev)
{
	CUresult r = CUDA_SUCCESS;
	for (unsigned i = 0; i < p->nr_ranges && r == CUDA_SUCCESS; i++) {
		struct fakecuda_range rg;
		const char *src = fc_kernel_mem(p->ranges + i * sizeof rg, sizeof rg);
		if (!src)
			return CUDA_ERROR_ILLEGAL_ADDRESS;
		memcpy(&rg, src, sizeof rg);
		r = fc_gpu_access(rg.ptr, rg.len, rg.write, dev);
	}
	if (!p->nr_seqs || r != CUDA_SUCCESS)
		return r;
	size_t lens_bytes = (size_t)p->nr_seqs * sizeof(int32_t);
	const int32_t *lens = (const int32_t *)fc_kernel_mem(p->lens, lens_bytes);
	if (!lens)
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	r = fc_gpu_access(p->lens, lens_bytes, 0, dev);
	size_t row_bytes = (size_t)p->stride * sizeof(int32_t);
	for (unsigned i = 0; i < p->nr_seqs && r == CUDA_SUCCESS; i++) {
		int32_t len = lens[i];
		if (len < 0 || (uint64_t)len > (uint64_t)p->stride * p->block_tokens)
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
			r = fc_paged_rows(p, p->k, ids, (uint32_t)len, dev);
		if (r == CUDA_SUCCESS && p->v)
			r = fc_paged_rows(p, p->v, ids, (uint32_t)len, dev);
	}
	return r;
}

CUresult fc_paged_run(const struct fc_kargs *a, int dev)
{
	struct fc_paged_args p;
	fc_paged_unpack(a, &p);
	if (!p.block_tokens || !p.row_bytes || (p.nr_ranges && !p.ranges) ||
	    (p.nr_seqs && (!p.table || !p.lens || !p.stride)))
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	fc_stats.c.launches++;
	fc_clock_ns(fc_knobs.launch_ns);
	CUresult r = fc_paged_body(&p, dev);
	fc_unlock();
	return r == CUDA_SUCCESS ? r : CUDA_ERROR_ILLEGAL_ADDRESS;
}
