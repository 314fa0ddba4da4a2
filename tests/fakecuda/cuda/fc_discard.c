/* SPDX-License-Identifier: MIT */
/* fakecuda batched discards and prefetches — cuMemDiscardBatchAsync,
 * cuMemDiscardAndPrefetchBatchAsync and cuMemPrefetchBatchAsync (CUDA 13,
 * _ptsz too) of the SIMULATED driver, with the checks cuda.h documents. A
 * discard poisons the bytes of its range and marks the units it covers
 * wholly, whose next move copies nothing (fc_managed.c). A batch is checked
 * whole before any of it runs; it runs at submission, in stream order, as
 * cuMemPrefetchAsync does (fc_advise.c). */
#include "fc_internal.h"

/* One call's arguments. A discard alone has no locations. */
struct fc_batch {
	CUdeviceptr *dptrs;
	size_t *sizes;
	size_t count;
	CUmemLocation *locs;
	size_t *loc_idxs;
	size_t nr_locs;
	unsigned long long flags;
	CUstream s;
	bool ptsz;      /* the _ptsz export: NULL names the per-thread stream */
};

/* cuda.h: "Must not be legacy NULL stream". In a _ptsz export a NULL
 * handle is the per-thread default stream, which may be used. */
static CUresult fc_batch_stream(struct fc_batch *bt)
{
	if (bt->s == CU_STREAM_LEGACY || (!bt->s && !bt->ptsz))
		return CUDA_ERROR_INVALID_VALUE;
	if (!bt->s)
		bt->s = CU_STREAM_PER_THREAD;
	return fc_valid_stream(bt->s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The locations: prefetchLocIdxs starts at 0, increases, stays below
 * count; numPrefetchLocs is 1..count; every location is valid (a bad one,
 * an ordinal out of range too, is CUDA_ERROR_INVALID_VALUE here). */
static CUresult fc_batch_locs(const struct fc_batch *bt)
{
	if (!bt->locs || !bt->loc_idxs || !bt->nr_locs || bt->nr_locs > bt->count ||
	    bt->loc_idxs[0] != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t k = 0; k < bt->nr_locs; k++) {
		CUmemLocation l = bt->locs[k];
		if (bt->loc_idxs[k] >= bt->count ||
		    (k && bt->loc_idxs[k] <= bt->loc_idxs[k - 1]) ||
		    fc_norm_loc(&l) != CUDA_SUCCESS)
			return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static CUresult fc_batch_args(struct fc_batch *bt, bool prefetch)
{
	if (bt->flags || !bt->count || !bt->dptrs || !bt->sizes)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = fc_batch_stream(bt);
	if (r == CUDA_SUCCESS && prefetch)
		r = fc_batch_locs(bt);
	return r;
}

/* Every range lies wholly in one managed allocation. Lock held. */
static CUresult fc_batch_ranges(const struct fc_batch *bt)
{
	for (size_t i = 0; i < bt->count; i++) {
		struct fc_span_blocks sb;
		CUresult r = fc_blocks(bt->dptrs[i], bt->sizes[i], &sb);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* Poison [ptr, ptr+count), a checked range; mark the units it covers
 * wholly (a unit cut short by the allocation's end is whole at that end). */
static void fc_discard_range(CUdeviceptr ptr, size_t count)
{
	struct fc_span_blocks sb;
	if (fc_blocks(ptr, count, &sb) != CUDA_SUCCESS)
		return;
	const struct fc_mrange *r = sb.first->r;
	uintptr_t end = ptr + count, alloc_end = r->base + r->size;
	for (size_t i = 0; i < sb.nr; i++) {
		struct fc_block *b = &sb.first[i];
		uintptr_t lo = r->base + (uintptr_t)b->idx * FC_UMP;
		uintptr_t hi = lo + FC_UMP < alloc_end ? lo + FC_UMP : alloc_end;
		uintptr_t from = ptr > lo ? ptr : lo, to = end < hi ? end : hi;
		fc_block_poison(b, from - lo, to - from);
		if (from == lo && to == hi) {
			fc_block_discard(b);
			fc_stats.c.bytes_discarded += FC_UMP;
		}
	}
	fc_stats.c.discard_ops++;
}

/* Check the whole batch, then discard every range (one operation in the
 * stream's order, on no engine: it moves nothing), then prefetch each to
 * its location (one operation each on a copy engine, as cuMemPrefetchAsync). */
static CUresult fc_batch_run(struct fc_batch *bt, bool discard, bool prefetch)
{
	CUresult r = fc_batch_args(bt, prefetch);
	if (r != CUDA_SUCCESS)
		return r;
	fc_lock();
	r = fc_batch_ranges(bt);
	if (r == CUDA_SUCCESS && discard) {
		struct fc_op op;
		fc_op_begin(&op, bt->s, fc_stream_dev(bt->s), FC_ENG_NONE);
		for (size_t i = 0; i < bt->count; i++)
			fc_discard_range(bt->dptrs[i], bt->sizes[i]);
		fc_op_end(&op);
	}
	for (size_t i = 0, k = 0; r == CUDA_SUCCESS && prefetch && i < bt->count; i++) {
		while (k + 1 < bt->nr_locs && bt->loc_idxs[k + 1] <= i)
			k++;
		CUmemLocation l = bt->locs[k];
		r = fc_norm_loc(&l);
		if (r == CUDA_SUCCESS)
			r = fc_prefetch_span(bt->dptrs[i], bt->sizes[i], l, bt->s);
	}
	fc_unlock();
	return r;
}

/* ---- exports ---- */

static CUresult fc_discard_batch(CUdeviceptr *dptrs, size_t *sizes, size_t count,
				 unsigned long long flags, CUstream s, bool ptsz)
{
	struct fc_batch bt = { .dptrs = dptrs, .sizes = sizes, .count = count,
			       .flags = flags, .s = s, .ptsz = ptsz };
	return fc_batch_run(&bt, true, false);
}

static CUresult fc_located_batch(CUdeviceptr *dptrs, size_t *sizes, size_t count,
				 CUmemLocation *locs, size_t *idxs, size_t nr_locs,
				 unsigned long long flags, CUstream s, bool ptsz, bool discard)
{
	struct fc_batch bt = { dptrs, sizes, count, locs, idxs, nr_locs, flags, s, ptsz };
	return fc_batch_run(&bt, discard, true);
}

CUresult CUDAAPI cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
					unsigned long long flags, CUstream s)
{
	FC_GUARD("cuMemDiscardBatchAsync", FC_CTX);
	return fc_discard_batch(dptrs, sizes, count, flags, s, false);
}

CUresult CUDAAPI cuMemDiscardBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
					     unsigned long long flags, CUstream s)
{
	FC_GUARD("cuMemDiscardBatchAsync_ptsz", FC_CTX);
	return fc_discard_batch(dptrs, sizes, count, flags, s, true);
}

CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes,
						   size_t count, CUmemLocation *locs,
						   size_t *idxs, size_t nr_locs,
						   unsigned long long flags, CUstream s)
{
	FC_GUARD("cuMemDiscardAndPrefetchBatchAsync", FC_CTX);
	return fc_located_batch(dptrs, sizes, count, locs, idxs, nr_locs, flags, s, false, true);
}

CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes,
							size_t count, CUmemLocation *locs,
							size_t *idxs, size_t nr_locs,
							unsigned long long flags, CUstream s)
{
	FC_GUARD("cuMemDiscardAndPrefetchBatchAsync_ptsz", FC_CTX);
	return fc_located_batch(dptrs, sizes, count, locs, idxs, nr_locs, flags, s, true, true);
}

CUresult CUDAAPI cuMemPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
					 CUmemLocation *locs, size_t *idxs, size_t nr_locs,
					 unsigned long long flags, CUstream s)
{
	FC_GUARD("cuMemPrefetchBatchAsync", FC_CTX);
	return fc_located_batch(dptrs, sizes, count, locs, idxs, nr_locs, flags, s, false, false);
}

CUresult CUDAAPI cuMemPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
					      CUmemLocation *locs, size_t *idxs, size_t nr_locs,
					      unsigned long long flags, CUstream s)
{
	FC_GUARD("cuMemPrefetchBatchAsync_ptsz", FC_CTX);
	return fc_located_batch(dptrs, sizes, count, locs, idxs, nr_locs, flags, s, true, false);
}
