// SPDX-License-Identifier: MIT
/* Driver allocation hooks: device, pitch, managed, host, registration,
 * stream-ordered, and VMM (cuMemCreate/Map). Each records one event and
 * keeps the registry; results pass through unchanged.
 * Runs inside the host process: no malloc, no stdio. */
#include "hook_driver.h"
#include "../place/place.h"
#include "../cuda_shim/shim.h"

/* ---- device, pitch, managed, host ---- */

/* Device memory the policy redirects becomes managed memory (homed on the
 * far node, or on the GPU while provisional); anything that fails falls
 * back to the real call. stream: non-NULL for stream-ordered allocations,
 * which are never redirected while the stream is being captured. */
static CUresult device_alloc(CUresult (*native)(CUdeviceptr *, size_t, void *), void *arg,
			     CUdeviceptr *dptr, size_t size, uint8_t kind, uint16_t api,
			     int check_capture, CUstream s)
{
	struct kvt_place pl;
	CUresult r = CUDA_ERROR_UNKNOWN;
	kvt_place_decide(kind, size, &pl);
	if (pl.placement != KVT_PLACE_NATIVE && check_capture && kvt_cuda_stream_capturing(s) == 1) {
		kvt_place_fallback(KVT_FB_CAPTURE);
		pl.placement = KVT_PLACE_NATIVE;
	}
	if (pl.placement != KVT_PLACE_NATIVE && dptr && size)
		r = kvt_place_managed(dptr, size, &pl);
	else
		pl.placement = KVT_PLACE_NATIVE;
	if (pl.placement == KVT_PLACE_NATIVE)
		r = native(dptr, size, arg);
	int ok = r == CUDA_SUCCESS;
	kvt_rec_alloc_placed(kvt_mem_reg, kind, api, ok, ok ? *dptr : 0, size,
			     kind == KVT_KIND_ASYNC ? U64(s) : 0, r, &pl);
	kvt_place_commit(&pl, ok ? *dptr : 0, size);
	return r;
}

static CUresult native_alloc(CUdeviceptr *p, size_t n, void *real)
{
	return ((CUresult (*)(CUdeviceptr *, size_t))real)(p, n);
}

KVT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	DRV_PROLOGUE(cuMemAlloc_v2, dptr, bytesize);
	CUresult r = device_alloc(native_alloc, (void *)real, dptr, bytesize, KVT_KIND_DEVICE,
				  KVT_API_cuMemAlloc_v2, 0, NULL);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch,
				       size_t width, size_t height, unsigned elem)
{
	DRV_PROLOGUE(cuMemAllocPitch_v2, dptr, pitch, width, height, elem);
	CUresult r = real(dptr, pitch, width, height, elem);
	int ok = r == CUDA_SUCCESS;
	kvt_rec_alloc(kvt_mem_reg, KVT_KIND_DEVICE, KVT_API_cuMemAllocPitch_v2, ok,
		      ok ? *dptr : 0, ok ? (uint64_t)*pitch * height : (uint64_t)width * height,
		      ok ? *pitch : 0, r);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned flags)
{
	DRV_PROLOGUE(cuMemAllocManaged, dptr, bytesize, flags);
	struct kvt_place pl;
	kvt_place_decide(KVT_KIND_MANAGED, bytesize, &pl);
	CUresult r = real(dptr, bytesize, flags);
	int ok = r == CUDA_SUCCESS;
	if (ok && pl.placement != KVT_PLACE_NATIVE)
		kvt_place_advise(*dptr, bytesize, &pl);      /* its home, not a new allocation */
	kvt_rec_alloc_placed(kvt_mem_reg, KVT_KIND_MANAGED, KVT_API_cuMemAllocManaged,
			     ok, ok ? *dptr : 0, bytesize, flags, r, &pl);
	kvt_place_commit(&pl, ok ? *dptr : 0, bytesize);
	kvt_hook_exit();
	return r;
}

static void free_common(CUresult (*real)(CUdeviceptr), CUdeviceptr p, uint16_t api,
			CUresult *out)
{
	struct kvt_alloc rec;
	int tracked = !kvt_rec_free_begin(kvt_mem_reg, p, &rec);
	CUresult r = real(p);
	kvt_rec_free_end(kvt_mem_reg, KVT_KIND_DEVICE, api, tracked, &rec, p,
			 r == CUDA_SUCCESS, r);
	*out = r;
}

KVT_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	DRV_PROLOGUE(cuMemFree_v2, dptr);
	CUresult r;
	free_common(real, dptr, KVT_API_cuMemFree_v2, &r);
	kvt_hook_exit();
	return r;
}

/* Pinned host memory the policy sends to the far node is kvtier's own
 * mapping, bound and registered; else the real call. */
static CUresult host_alloc(CUresult (*real2)(void **, size_t), CUresult (*real3)(void **, size_t, unsigned),
			   void **pp, size_t size, unsigned flags, uint16_t api)
{
	struct kvt_place pl;
	kvt_place_decide(KVT_KIND_HOST, size, &pl);
	void *p = NULL;
	if (pl.placement == KVT_PLACE_PINNED_FAR && pp)
		p = kvt_place_pinned(size, flags, &pl);
	else
		pl.placement = KVT_PLACE_NATIVE;
	CUresult r = CUDA_SUCCESS;
	if (p)
		*pp = p;
	else
		r = real3 ? real3(pp, size, flags) : real2(pp, size);
	int ok = r == CUDA_SUCCESS;
	kvt_rec_alloc_placed(kvt_mem_reg, KVT_KIND_HOST, api, ok, ok ? U64(*pp) : 0, size,
			     flags, r, &pl);
	kvt_place_commit(&pl, ok ? U64(*pp) : 0, size);
	return r;
}

KVT_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	DRV_PROLOGUE(cuMemAllocHost_v2, pp, bytesize);
	CUresult r = host_alloc(real, NULL, pp, bytesize, 0, KVT_API_cuMemAllocHost_v2);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned flags)
{
	DRV_PROLOGUE(cuMemHostAlloc, pp, bytesize, flags);
	CUresult r = host_alloc(NULL, real, pp, bytesize, flags, KVT_API_cuMemHostAlloc);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemFreeHost(void *p)
{
	DRV_PROLOGUE(cuMemFreeHost, p);
	struct kvt_alloc rec;
	int tracked = !kvt_rec_free_begin(kvt_mem_reg, U64(p), &rec);
	CUresult r = CUDA_SUCCESS;
	if (tracked && rec.placement == KVT_PLACE_PINNED_FAR)
		kvt_place_unpin(p, rec.size);             /* kvtier's own mapping */
	else
		r = real(p);
	kvt_rec_free_end(kvt_mem_reg, KVT_KIND_HOST, KVT_API_cuMemFreeHost, tracked, &rec,
			 U64(p), r == CUDA_SUCCESS, r);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned flags)
{
	DRV_PROLOGUE(cuMemHostRegister_v2, p, bytesize, flags);
	struct kvt_place pl;
	kvt_place_decide(KVT_KIND_REGISTER, bytesize, &pl);
	if (pl.placement != KVT_PLACE_NATIVE && p)
		kvt_place_bind(p, bytesize, &pl, 1);      /* move its pages first */
	CUresult r = real(p, bytesize, flags);
	kvt_rec_alloc_placed(kvt_host_reg, KVT_KIND_REGISTER, KVT_API_cuMemHostRegister_v2,
			     r == CUDA_SUCCESS, U64(p), bytesize, flags, r, &pl);
	kvt_place_commit(&pl, r == CUDA_SUCCESS ? U64(p) : 0, bytesize);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemHostUnregister(void *p)
{
	DRV_PROLOGUE(cuMemHostUnregister, p);
	struct kvt_alloc rec;
	int tracked = !kvt_rec_free_begin(kvt_host_reg, U64(p), &rec);
	CUresult r = real(p);
	kvt_rec_free_end(kvt_host_reg, KVT_KIND_REGISTER, KVT_API_cuMemHostUnregister,
			 tracked, &rec, U64(p), r == CUDA_SUCCESS, r);
	kvt_hook_exit();
	return r;
}

/* ---- stream-ordered allocation (legacy and per-thread default stream) ---- */

struct async_args {
	CUresult (*fn)(CUdeviceptr *, size_t, CUstream);
	CUstream s;
};

static CUresult native_async(CUdeviceptr *p, size_t n, void *arg)
{
	struct async_args *a = arg;
	return a->fn(p, n, a->s);
}

#define ALLOC_ASYNC_HOOK(exp)                                                    \
KVT_EXPORT CUresult exp(CUdeviceptr *dptr, size_t bytesize, CUstream s)          \
{                                                                                \
	DRV_PROLOGUE(exp, dptr, bytesize, s);                                    \
	struct async_args a = { real, s };                                       \
	CUresult r = device_alloc(native_async, &a, dptr, bytesize, KVT_KIND_ASYNC, \
				  KVT_API_cuMemAllocAsync, 1, s);                \
	kvt_hook_exit();                                                         \
	return r;                                                                \
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
ALLOC_ASYNC_HOOK(cuMemAllocAsync)
ALLOC_ASYNC_HOOK(cuMemAllocAsync_ptsz)

#define ALLOC_POOL_HOOK(exp)                                                     \
KVT_EXPORT CUresult exp(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,   \
			CUstream s)                                              \
{                                                                                \
	DRV_PROLOGUE(exp, dptr, bytesize, pool, s);                              \
	CUresult r = real(dptr, bytesize, pool, s);                              \
	kvt_rec_alloc(kvt_mem_reg, KVT_KIND_ASYNC, KVT_API_cuMemAllocFromPoolAsync, \
		      r == CUDA_SUCCESS, r == CUDA_SUCCESS ? *dptr : 0, bytesize, U64(pool), r); \
	kvt_hook_exit();                                                         \
	return r;                                                                \
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
ALLOC_POOL_HOOK(cuMemAllocFromPoolAsync)
ALLOC_POOL_HOOK(cuMemAllocFromPoolAsync_ptsz)

/* cuMemFreeAsync rejects managed memory: kvtier's redirected allocations
 * wait for their stream, then go back with cuMemFree. 0: not ours. */
static int free_async_redirected(const struct kvt_alloc *rec, CUstream s, CUresult *r)
{
	if (rec->placement != KVT_PLACE_MANAGED_FAR && rec->placement != KVT_PLACE_MANAGED_HBM)
		return 0;
	if (rec->kind == KVT_KIND_MANAGED)
		return 0;               /* the application's own managed memory */
	kvt_cuda_stream_sync(s);
	*r = kvt_cuda_free(rec->base);
	return 1;
}

#define FREE_ASYNC_HOOK(exp)                                                     \
KVT_EXPORT CUresult exp(CUdeviceptr p, CUstream s)                               \
{                                                                                \
	DRV_PROLOGUE(exp, p, s);                                                 \
	struct kvt_alloc rec;                                                    \
	int tracked = !kvt_rec_free_begin(kvt_mem_reg, p, &rec);                 \
	CUresult r;                                                              \
	if (!tracked || !free_async_redirected(&rec, s, &r))                     \
		r = real(p, s);                                                  \
	kvt_rec_free_end(kvt_mem_reg, KVT_KIND_ASYNC, KVT_API_cuMemFreeAsync,    \
			 tracked, &rec, p, r == CUDA_SUCCESS, r);                \
	kvt_hook_exit();                                                         \
	return r;                                                                \
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
FREE_ASYNC_HOOK(cuMemFreeAsync)
FREE_ASYNC_HOOK(cuMemFreeAsync_ptsz)

/* ---- virtual memory management: handles, then mappings ---- */

KVT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
				const CUmemAllocationProp *prop, unsigned long long flags)
{
	DRV_PROLOGUE(cuMemCreate, h, size, prop, flags);
	CUresult r = real(h, size, prop, flags);
	uint64_t loc = prop ? ((uint64_t)prop->location.type << 32) |
			      (uint32_t)prop->location.id : 0;
	kvt_rec_alloc(kvt_vmm_reg, KVT_KIND_VMM, KVT_API_cuMemCreate,
		      r == CUDA_SUCCESS, r == CUDA_SUCCESS ? *h : 0, size, loc, r);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	DRV_PROLOGUE(cuMemRelease, h);
	struct kvt_alloc rec;
	int tracked = !kvt_rec_free_begin(kvt_vmm_reg, h, &rec);
	CUresult r = real(h);
	kvt_rec_free_end(kvt_vmm_reg, KVT_KIND_VMM, KVT_API_cuMemRelease, tracked, &rec,
			 h, r == CUDA_SUCCESS, r);
	kvt_hook_exit();
	return r;
}

static int is_vmm_mapping(const struct kvt_alloc *a)
{
	return a->kind == KVT_KIND_VMM;
}

KVT_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			     CUmemGenericAllocationHandle h, unsigned long long flags)
{
	DRV_PROLOGUE(cuMemMap, ptr, size, offset, h, flags);
	CUresult r = real(ptr, size, offset, h, flags);
	if (r == CUDA_SUCCESS) {
		struct kvt_alloc a = { .base = ptr, .size = size, .t_ns = kvt_coarse_ns(),
				       .aux = h, .tid = (uint32_t)kvt_gettid(),
				       .api = KVT_API_cuMemMap, .kind = KVT_KIND_VMM, .node = -1 };
		kvt_reg_insert(kvt_mem_reg, &a);
	}
	kvt_rec_event(KVT_OP_MAP, KVT_KIND_VMM, KVT_API_cuMemMap, ptr, size, h, offset, r);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	DRV_PROLOGUE(cuMemUnmap, ptr, size);
	CUresult r = real(ptr, size);
	if (r == CUDA_SUCCESS)
		kvt_reg_carve(kvt_mem_reg, ptr, size, is_vmm_mapping);
	kvt_rec_event(KVT_OP_UNMAP, KVT_KIND_VMM, KVT_API_cuMemUnmap, ptr, size, 0, 0, r);
	kvt_hook_exit();
	return r;
}
