// SPDX-License-Identifier: MIT
/* Driver allocation hooks: device, pitch, managed, host, registration,
 * stream-ordered, and VMM (cuMemCreate/Map). Each records one event and
 * keeps the registry; results pass through unchanged.
 * Runs inside the host process: no malloc, no stdio. */
#include "hook_driver.h"

/* ---- device, pitch, managed, host ---- */

KVT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	DRV_PROLOGUE(cuMemAlloc_v2, dptr, bytesize);
	CUresult r = real(dptr, bytesize);
	kvt_rec_alloc(kvt_mem_reg, KVT_KIND_DEVICE, KVT_API_cuMemAlloc_v2,
		      r == CUDA_SUCCESS, r == CUDA_SUCCESS ? *dptr : 0, bytesize, 0, r);
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
	CUresult r = real(dptr, bytesize, flags);
	kvt_rec_alloc(kvt_mem_reg, KVT_KIND_MANAGED, KVT_API_cuMemAllocManaged,
		      r == CUDA_SUCCESS, r == CUDA_SUCCESS ? *dptr : 0, bytesize, flags, r);
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

KVT_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	DRV_PROLOGUE(cuMemAllocHost_v2, pp, bytesize);
	CUresult r = real(pp, bytesize);
	kvt_rec_alloc(kvt_mem_reg, KVT_KIND_HOST, KVT_API_cuMemAllocHost_v2,
		      r == CUDA_SUCCESS, r == CUDA_SUCCESS ? U64(*pp) : 0, bytesize, 0, r);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned flags)
{
	DRV_PROLOGUE(cuMemHostAlloc, pp, bytesize, flags);
	CUresult r = real(pp, bytesize, flags);
	kvt_rec_alloc(kvt_mem_reg, KVT_KIND_HOST, KVT_API_cuMemHostAlloc,
		      r == CUDA_SUCCESS, r == CUDA_SUCCESS ? U64(*pp) : 0, bytesize, flags, r);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemFreeHost(void *p)
{
	DRV_PROLOGUE(cuMemFreeHost, p);
	struct kvt_alloc rec;
	int tracked = !kvt_rec_free_begin(kvt_mem_reg, U64(p), &rec);
	CUresult r = real(p);
	kvt_rec_free_end(kvt_mem_reg, KVT_KIND_HOST, KVT_API_cuMemFreeHost, tracked, &rec,
			 U64(p), r == CUDA_SUCCESS, r);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned flags)
{
	DRV_PROLOGUE(cuMemHostRegister_v2, p, bytesize, flags);
	CUresult r = real(p, bytesize, flags);
	kvt_rec_alloc(kvt_host_reg, KVT_KIND_REGISTER, KVT_API_cuMemHostRegister_v2,
		      r == CUDA_SUCCESS, U64(p), bytesize, flags, r);
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

#define ALLOC_ASYNC_HOOK(exp)                                                    \
KVT_EXPORT CUresult exp(CUdeviceptr *dptr, size_t bytesize, CUstream s)          \
{                                                                                \
	DRV_PROLOGUE(exp, dptr, bytesize, s);                                    \
	CUresult r = real(dptr, bytesize, s);                                    \
	kvt_rec_alloc(kvt_mem_reg, KVT_KIND_ASYNC, KVT_API_cuMemAllocAsync,      \
		      r == CUDA_SUCCESS, r == CUDA_SUCCESS ? *dptr : 0, bytesize, U64(s), r); \
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

#define FREE_ASYNC_HOOK(exp)                                                     \
KVT_EXPORT CUresult exp(CUdeviceptr p, CUstream s)                               \
{                                                                                \
	DRV_PROLOGUE(exp, p, s);                                                 \
	struct kvt_alloc rec;                                                    \
	int tracked = !kvt_rec_free_begin(kvt_mem_reg, p, &rec);                 \
	CUresult r = real(p, s);                                                 \
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
		struct kvt_alloc a = { .base = ptr, .size = size, .t_ns = kvt_now_ns(),
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
