/* SPDX-License-Identifier: MIT */
/* fakecuda advice, range attributes and prefetch — cuMemAdvise (CUdevice and
 * CUmemLocation ABIs), cuMemRangeGetAttribute(s), cuMemPrefetchAsync (both
 * ABIs, _ptsz) with the semantics cuda.h documents, applied per residency
 * unit (FC_UMP) of the SIMULATED device; the batch forms and discards are
 * fc_discard.c. Prefetches execute at submission (stream order).
 * Where cuda.h leaves the mapping effects open ("may be removed at any
 * time"), the behaviour measured on an H200 is followed (docs/simulated-device.md). */
#include "fc_internal.h"

#include <string.h>

CUresult fc_blocks(CUdeviceptr ptr, size_t count, struct fc_span_blocks *out)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_alloc *a = fc_reg_find(ptr);
	if (!a || a->kind != FC_KIND_MANAGED || count > a->base + a->size - ptr)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_mrange *r = a->owner;
	size_t i0 = (ptr - r->base) / FC_UMP;
	size_t i1 = (ptr + count - 1 - r->base) / FC_UMP;
	*out = (struct fc_span_blocks){ &r->blocks[i0], i1 - i0 + 1 };
	return CUDA_SUCCESS;
}

CUresult fc_norm_loc(CUmemLocation *l)
{
	switch (l->type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		return fc_valid_dev(l->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
	case CU_MEM_LOCATION_TYPE_HOST:
		l->id = 0;
		return CUDA_SUCCESS;
	case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
		l->type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
		l->id = fc_current_node();
		return CUDA_SUCCESS;
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
		return fc_node_valid(l->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* The legacy CUdevice form: CU_DEVICE_CPU is the host. */
static CUresult fc_dev_to_loc(CUdevice dev, CUmemLocation *l)
{
	if (dev == CU_DEVICE_CPU) {
		*l = (CUmemLocation){ CU_MEM_LOCATION_TYPE_HOST, 0 };
		return CUDA_SUCCESS;
	}
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*l = (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, dev };
	return CUDA_SUCCESS;
}

/* ---- advice ---- */

static void fc_advise_block(struct fc_block *b, CUmem_advise advice, CUmemLocation l)
{
	bool dev = l.type == CU_MEM_LOCATION_TYPE_DEVICE;
	switch (advice) {
	case CU_MEM_ADVISE_SET_READ_MOSTLY:
		b->read_mostly = 1;
		if (b->loc != FC_LOC_DEV)
			b->dev_mapped = 0;   /* read duplication breaks remote mappings */
		break;
	case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
		b->read_mostly = 0;
		if (b->dup)   /* duplicates collapse onto the device copy */
			fc_block_to_dev(b, b->dev, FC_CAUSE_FAULT, false);
		break;
	case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
		/* as a real H200 with driver 580 (device NUMA config NONE):
		 * success, and the preference is simply not kept */
		if (l.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && fc_knobs.drop_host_numa_home)
			break;
		b->pref_type = (int8_t)l.type;
		b->pref_id = l.id;
		if (l.type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
			fc_block_set_policy(b, l.id);
		break;
	case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
		b->pref_type = 0;
		b->pref_id = 0;
		break;
	case CU_MEM_ADVISE_SET_ACCESSED_BY:
	case CU_MEM_ADVISE_UNSET_ACCESSED_BY: {
		bool on = advice == CU_MEM_ADVISE_SET_ACCESSED_BY;
		uint8_t bit = dev ? (uint8_t)(1u << l.id) : 0;
		/* unset changes the policy only: the mapping accessed-by made
		 * stays until something unmaps it (a migration, read-mostly) */
		if (!on && (b->accessed_by_devs & bit) && b->loc != FC_LOC_DEV)
			b->dev_mapped |= bit;
		if (dev)
			b->accessed_by_devs = on ? b->accessed_by_devs | bit
						 : b->accessed_by_devs & (uint8_t)~bit;
		else
			b->accessed_by_host = on;
		break;
	}
	default:
		break;
	}
}

static CUresult fc_check_advice(CUmem_advise advice, CUmemLocation *l)
{
	switch (advice) {
	case CU_MEM_ADVISE_SET_READ_MOSTLY:
	case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
	case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
		return CUDA_SUCCESS;   /* the location is ignored */
	case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
		return fc_norm_loc(l);
	case CU_MEM_ADVISE_SET_ACCESSED_BY:
	case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
		if (l->type != CU_MEM_LOCATION_TYPE_DEVICE &&
		    l->type != CU_MEM_LOCATION_TYPE_HOST)
			return CUDA_ERROR_INVALID_VALUE;   /* DEVICE or HOST only */
		return fc_norm_loc(l);
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult fc_advise(CUdeviceptr ptr, size_t count, CUmem_advise advice, CUmemLocation l)
{
	CUresult r = fc_check_advice(advice, &l);
	if (r != CUDA_SUCCESS)
		return r;
	fc_spend_cpu(fc_knobs.advise_ns);   /* measured on an H200: 16-28 us */
	fc_lock();
	struct fc_span_blocks s;
	r = fc_blocks(ptr, count, &s);
	for (size_t i = 0; r == CUDA_SUCCESS && i < s.nr; i++)
		fc_advise_block(&s.first[i], advice, l);
	if (r == CUDA_SUCCESS && advice == CU_MEM_ADVISE_SET_ACCESSED_BY &&
	    l.type == CU_MEM_LOCATION_TYPE_DEVICE)
		fc_stats.dev[l.id].accessed_by_advice++;
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr ptr, size_t count, CUmem_advise advice,
				CUmemLocation location)
{
	FC_GUARD("cuMemAdvise_v2", 0);
	return fc_advise(ptr, count, advice, location);
}

CUresult CUDAAPI cuMemAdvise(CUdeviceptr ptr, size_t count, CUmem_advise advice, CUdevice dev)
{
	FC_GUARD("cuMemAdvise", 0);
	CUmemLocation l = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	bool loc_used = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
			advice == CU_MEM_ADVISE_SET_ACCESSED_BY ||
			advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
	CUresult r = loc_used ? fc_dev_to_loc(dev, &l) : CUDA_SUCCESS;
	return r ? r : fc_advise(ptr, count, advice, l);
}

/* ---- range attributes ---- */

/* Fold one (type, id) per block into "all the same" or INVALID. */
struct fc_fold { int type, id; bool first; };

static void fc_fold(struct fc_fold *f, int type, int id)
{
	if (f->first) {
		*f = (struct fc_fold){ type, id, false };
	} else if (f->type != type || f->id != id) {
		f->type = CU_MEM_LOCATION_TYPE_INVALID;
		f->id = CU_DEVICE_INVALID;
	}
}

static int fc_legacy_dev(const struct fc_fold *f)
{
	switch (f->type) {
	case CU_MEM_LOCATION_TYPE_DEVICE: return f->id;
	case CU_MEM_LOCATION_TYPE_HOST:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA: return CU_DEVICE_CPU;
	default: return CU_DEVICE_INVALID;
	}
}

/* The ordinals (ascending), then the CPU, that every block names. */
static CUresult fc_accessed_by(const struct fc_span_blocks *s, void *data, size_t size)
{
	if (!size || size % 4)
		return CUDA_ERROR_INVALID_VALUE;
	uint8_t devs = 0xff;
	bool host = true;
	for (size_t i = 0; i < s->nr; i++) {
		devs &= s->first[i].accessed_by_devs;
		host &= s->first[i].accessed_by_host;
	}
	int32_t *out = data;
	size_t n = size / 4, k = 0;
	for (int d = 0; d < FC_MAX_DEVICES && k < n; d++)
		if (devs & (1u << d))
			out[k++] = d;
	if (host && k < n)
		out[k++] = CU_DEVICE_CPU;
	while (k < n)
		out[k++] = CU_DEVICE_INVALID;
	return CUDA_SUCCESS;
}

static CUresult fc_range_attr(void *data, size_t size, CUmem_range_attribute attr,
			      const struct fc_span_blocks *s)
{
	struct fc_fold pref = { 0, 0, true }, last = { 0, 0, true };
	bool rm = true;
	for (size_t i = 0; i < s->nr; i++) {
		const struct fc_block *b = &s->first[i];
		rm &= b->read_mostly;
		fc_fold(&pref, b->pref_type, b->pref_type ? b->pref_id : CU_DEVICE_INVALID);
		fc_fold(&last, b->last_pf_type, b->last_pf_type ? b->last_pf_id : CU_DEVICE_INVALID);
	}
	if (attr == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY)
		return fc_accessed_by(s, data, size);
	if (size != 4)
		return CUDA_ERROR_INVALID_VALUE;
	int32_t *out = data;
	switch (attr) {
	case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:       *out = rm; break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION: *out = fc_legacy_dev(&pref); break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: *out = fc_legacy_dev(&last); break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE: *out = pref.type; break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:   *out = pref.id; break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: *out = last.type; break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:   *out = last.id; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRangeGetAttribute(void *data, size_t size, CUmem_range_attribute attr,
					CUdeviceptr ptr, size_t count)
{
	FC_GUARD("cuMemRangeGetAttribute", 0);
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_span_blocks s;
	CUresult r = fc_blocks(ptr, count, &s);
	if (r == CUDA_SUCCESS)
		r = fc_range_attr(data, size, attr, &s);
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuMemRangeGetAttributes(void **data, size_t *sizes,
					 CUmem_range_attribute *attrs, size_t n,
					 CUdeviceptr ptr, size_t count)
{
	FC_GUARD("cuMemRangeGetAttributes", 0);
	if (!data || !sizes || !attrs || !n)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_span_blocks s;
	CUresult r = fc_blocks(ptr, count, &s);
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		r = data[i] ? fc_range_attr(data[i], sizes[i], attrs[i], &s)
			    : CUDA_ERROR_INVALID_VALUE;
	fc_unlock();
	return r;
}

/* ---- prefetch ---- */

/* True when the block moved (to the host, or onto another ordinal). A
 * prefetch ends a discard, moved or not (cuda.h: "undone ... by prefetching
 * it"); a discarded block that moves copies nothing (fc_managed.c). */
static bool fc_prefetch_block(struct fc_block *b, CUmemLocation l)
{
	fc_vt_working();
	b->last_pf_type = (int8_t)l.type;
	b->last_pf_id = l.id;
	uint8_t was = b->loc, was_dev = b->dev;
	bool moved = false;
	if (l.type == CU_MEM_LOCATION_TYPE_DEVICE) {
		/* HBM full of non-evictable memory: it stays */
		if (fc_block_to_dev(b, l.id, FC_CAUSE_PREFETCH, b->read_mostly) == CUDA_SUCCESS) {
			fc_block_touch(b);
			moved = b->loc != was || b->dev != was_dev;
		}
		if (moved)
			fc_stats.dev[l.id].prefetch_blocks_to++;
	} else {
		int node = l.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ? l.id : fc_host_target(b);
		fc_block_to_host(b, FC_CAUSE_PREFETCH, node);
		moved = b->loc != was;
	}
	fc_block_undiscard(b);
	return moved;
}

CUresult fc_prefetch_span(CUdeviceptr ptr, size_t count, CUmemLocation l, CUstream s)
{
	struct fc_span_blocks sb;
	struct fc_op op;               /* on a copy engine, in the stream's order */
	fc_op_begin(&op, s, fc_stream_dev(s),
		    l.type == CU_MEM_LOCATION_TYPE_DEVICE ? FC_ENG_H2D : FC_ENG_D2H);
	CUresult r = fc_blocks(ptr, count, &sb);
	for (size_t i = 0; r == CUDA_SUCCESS && i < sb.nr; i++)
		if (fc_prefetch_block(&sb.first[i], l))
			fc_stats.c.prefetch_blocks++;
	fc_op_end(&op);
	return r;
}

static CUresult fc_prefetch(CUdeviceptr ptr, size_t count, CUmemLocation l,
			    unsigned flags, CUstream s)
{
	if (flags || !fc_valid_stream(s))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = fc_norm_loc(&l);
	if (r != CUDA_SUCCESS)
		return r;
	fc_lock();
	r = fc_prefetch_span(ptr, count, l, s);
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr ptr, size_t count, CUmemLocation l,
				       unsigned int flags, CUstream s)
{
	FC_GUARD("cuMemPrefetchAsync_v2", FC_CTX);
	return fc_prefetch(ptr, count, l, flags, s);
}

CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr ptr, size_t count, CUmemLocation l,
					    unsigned int flags, CUstream s)
{
	FC_GUARD("cuMemPrefetchAsync_v2_ptsz", FC_CTX);
	return fc_prefetch(ptr, count, l, flags, s);
}

static CUresult fc_prefetch_legacy(CUdeviceptr ptr, size_t count, CUdevice dev, CUstream s)
{
	CUmemLocation l;
	CUresult r = fc_dev_to_loc(dev, &l);
	return r ? r : fc_prefetch(ptr, count, l, 0, s);
}

CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr ptr, size_t count, CUdevice dev, CUstream s)
{
	FC_GUARD("cuMemPrefetchAsync", FC_CTX);
	return fc_prefetch_legacy(ptr, count, dev, s);
}

CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr ptr, size_t count, CUdevice dev, CUstream s)
{
	FC_GUARD("cuMemPrefetchAsync_ptsz", FC_CTX);
	return fc_prefetch_legacy(ptr, count, dev, s);
}
