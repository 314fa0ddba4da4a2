/* SPDX-License-Identifier: MIT */
/* kvtier test double: the memory half of the stand-in runtime — allocation,
 * host pinning, managed memory advice/prefetch/discard, copies and fills.  Each
 * export maps onto the driver entry the real libcudart 13.0 uses (see
 * rt_internal.h) and writes its outputs only on success. */
#include <stddef.h>
#include <string.h>

#include "rt_internal.h"

static CUmemLocation rt_location(struct cudaMemLocation loc)
{
	CUmemLocation l = { .type = (CUmemLocationType)loc.type, .id = loc.id };
	return l;
}

/* ---- device allocations -------------------------------------------------- */

RT_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	RT_ENTER();
	RT_NEED(cuMemAlloc);
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	if (size == 0) {               /* the runtime answers size 0 itself */
		*devPtr = NULL;
		return cudaSuccess;
	}
	CUdeviceptr d = 0;
	CUresult res = rt_drv.cuMemAlloc(&d, size);
	if (res == CUDA_SUCCESS)
		*devPtr = rt_vptr(d);
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaFree(void *devPtr)
{
	RT_ENTER();
	RT_NEED(cuMemFree);
	if (!devPtr)                   /* cudaFree(0): the classic context init */
		return cudaSuccess;
	return rt_ret_cu(rt_drv.cuMemFree(rt_dptr(devPtr)));
}

RT_API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	RT_ENTER();
	RT_NEED(cuMemAlloc);
	if (!devPtr || !pitch)
		return rt_ret(cudaErrorInvalidValue);
	CUdeviceptr d = 0;
	size_t p = 0;
	CUresult res;
	if (rt_drv.cuMemAllocPitch) {
		res = rt_drv.cuMemAllocPitch(&d, &p, width, height, 16);
	} else {                       /* driver without pitch: 512-byte rows */
		p = (width + 511) & ~(size_t)511;
		res = rt_drv.cuMemAlloc(&d, p * height);
	}
	if (res == CUDA_SUCCESS) {
		*devPtr = rt_vptr(d);
		*pitch = p;
	}
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	RT_ENTER();
	RT_NEED(cuMemAllocManaged);
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	CUdeviceptr d = 0;
	CUresult res = rt_drv.cuMemAllocManaged(&d, size, flags);
	if (res == CUDA_SUCCESS)
		*devPtr = rt_vptr(d);
	return rt_ret_cu(res);
}

/* ---- stream-ordered allocations ------------------------------------------ */

static cudaError_t rt_malloc_async(PFN_cuMemAllocAsync_v11020 fn, void **devPtr,
				   size_t size, cudaStream_t stream)
{
	if (!fn)
		return rt_ret(cudaErrorNotSupported);
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	CUdeviceptr d = 0;
	CUresult res = fn(&d, size, (CUstream)stream);
	if (res == CUDA_SUCCESS)
		*devPtr = rt_vptr(d);
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	RT_ENTER();
	return rt_malloc_async(rt_drv.cuMemAllocAsync, devPtr, size, hStream);
}

RT_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
	RT_ENTER();
	return rt_malloc_async(rt_drv.cuMemAllocAsync_ptsz, devPtr, size, hStream);
}

RT_API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	RT_ENTER();
	RT_NEED(cuMemFreeAsync);
	return rt_ret_cu(rt_drv.cuMemFreeAsync(rt_dptr(devPtr), (CUstream)hStream));
}

RT_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
	RT_ENTER();
	RT_NEED(cuMemFreeAsync_ptsz);
	return rt_ret_cu(rt_drv.cuMemFreeAsync_ptsz(rt_dptr(devPtr), (CUstream)hStream));
}

static cudaError_t rt_malloc_pool(PFN_cuMemAllocFromPoolAsync_v11020 fn, void **ptr,
				  size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
	if (!fn)
		return rt_ret(cudaErrorNotSupported);
	if (!ptr)
		return rt_ret(cudaErrorInvalidValue);
	CUdeviceptr d = 0;
	CUresult res = fn(&d, size, (CUmemoryPool)pool, (CUstream)stream);
	if (res == CUDA_SUCCESS)
		*ptr = rt_vptr(d);
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
					   cudaStream_t stream)
{
	RT_ENTER();
	return rt_malloc_pool(rt_drv.cuMemAllocFromPoolAsync, ptr, size, memPool, stream);
}

RT_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
						cudaStream_t stream)
{
	RT_ENTER();
	return rt_malloc_pool(rt_drv.cuMemAllocFromPoolAsync_ptsz, ptr, size, memPool, stream);
}

/* ---- host memory ---------------------------------------------------------- */

RT_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	RT_ENTER();
	RT_NEED(cuMemHostAlloc);
	if (!pHost || (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
					   cudaHostAllocWriteCombined)))
		return rt_ret(cudaErrorInvalidValue);
	void *p = NULL;
	CUresult res = rt_drv.cuMemHostAlloc(&p, size, flags);
	if (res == CUDA_SUCCESS)
		*pHost = p;
	return rt_ret_cu(res);
}

/* cudaMallocHost goes through cuMemHostAlloc@2020 too, as the real one does. */
RT_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

RT_API cudaError_t cudaFreeHost(void *ptr)
{
	RT_ENTER();
	RT_NEED(cuMemFreeHost);
	if (!ptr)
		return cudaSuccess;
	return rt_ret_cu(rt_drv.cuMemFreeHost(ptr));
}

RT_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	RT_ENTER();
	RT_NEED(cuMemHostRegister);
	if (!ptr || !size)
		return rt_ret(cudaErrorInvalidValue);
	return rt_ret_cu(rt_drv.cuMemHostRegister(ptr, size, flags));
}

RT_API cudaError_t cudaHostUnregister(void *ptr)
{
	RT_ENTER();
	RT_NEED(cuMemHostUnregister);
	return rt_ret_cu(rt_drv.cuMemHostUnregister(ptr));
}

/* The device address of mapped pinned memory (UVA: the same address). */
RT_API cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
	RT_ENTER();
	RT_NEED(cuMemHostGetDevicePointer);
	if (!pDevice || !pHost)
		return rt_ret(cudaErrorInvalidValue);
	CUdeviceptr d = 0;
	CUresult res = rt_drv.cuMemHostGetDevicePointer(&d, pHost, flags);
	if (res == CUDA_SUCCESS)
		*pDevice = (void *)(uintptr_t)d;
	return rt_ret_cu(res);
}

/* ---- copies and fills ----------------------------------------------------- */

static int rt_kind_ok(enum cudaMemcpyKind kind)
{
	return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault;
}

RT_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	RT_ENTER();
	RT_NEED(cuMemcpy);
	if (!rt_kind_ok(kind))
		return rt_ret(cudaErrorInvalidMemcpyDirection);
	if (!count)
		return cudaSuccess;
	return rt_ret_cu(rt_drv.cuMemcpy(rt_dptr(dst), rt_dptr(src), count));
}

RT_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	RT_ENTER();
	RT_NEED(cuMemcpy_ptds);
	if (!rt_kind_ok(kind))
		return rt_ret(cudaErrorInvalidMemcpyDirection);
	if (!count)
		return cudaSuccess;
	return rt_ret_cu(rt_drv.cuMemcpy_ptds(rt_dptr(dst), rt_dptr(src), count));
}

static cudaError_t rt_memcpy_async(PFN_cuMemcpyAsync_v4000 fn, void *dst, const void *src,
				   size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	if (!fn)
		return rt_ret(cudaErrorNotSupported);
	if (!rt_kind_ok(kind))
		return rt_ret(cudaErrorInvalidMemcpyDirection);
	if (!count)
		return cudaSuccess;
	return rt_ret_cu(fn(rt_dptr(dst), rt_dptr(src), count, (CUstream)stream));
}

RT_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
				   enum cudaMemcpyKind kind, cudaStream_t stream)
{
	RT_ENTER();
	return rt_memcpy_async(rt_drv.cuMemcpyAsync, dst, src, count, kind, stream);
}

RT_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
					enum cudaMemcpyKind kind, cudaStream_t stream)
{
	RT_ENTER();
	return rt_memcpy_async(rt_drv.cuMemcpyAsync_ptsz, dst, src, count, kind, stream);
}

RT_API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	RT_ENTER();
	RT_NEED(cuMemsetD8);
	return rt_ret_cu(rt_drv.cuMemsetD8(rt_dptr(devPtr), (unsigned char)value, count));
}

RT_API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
	RT_ENTER();
	RT_NEED(cuMemsetD8_ptds);
	return rt_ret_cu(rt_drv.cuMemsetD8_ptds(rt_dptr(devPtr), (unsigned char)value, count));
}

RT_API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	RT_ENTER();
	RT_NEED(cuMemsetD8Async);
	return rt_ret_cu(rt_drv.cuMemsetD8Async(rt_dptr(devPtr), (unsigned char)value, count,
						(CUstream)stream));
}

RT_API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	RT_ENTER();
	RT_NEED(cuMemsetD8Async_ptsz);
	return rt_ret_cu(rt_drv.cuMemsetD8Async_ptsz(rt_dptr(devPtr), (unsigned char)value,
						     count, (CUstream)stream));
}

/* ---- information, advice, prefetch ----------------------------------------- */

RT_API cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
	RT_ENTER();
	RT_NEED(cuMemGetInfo);
	if (!free || !total)
		return rt_ret(cudaErrorInvalidValue);
	size_t f = 0, t = 0;
	CUresult res = rt_drv.cuMemGetInfo(&f, &t);
	if (res == CUDA_SUCCESS) {
		*free = f;
		*total = t;
	}
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
				 struct cudaMemLocation location)
{
	RT_ENTER();
	RT_NEED(cuMemAdvise);
	return rt_ret_cu(rt_drv.cuMemAdvise(rt_dptr(devPtr), count, (CUmem_advise)advice,
					    rt_location(location)));
}

RT_API cudaError_t cudaMemPrefetchAsync(const void *devPtr, size_t count,
					struct cudaMemLocation location, unsigned int flags,
					cudaStream_t stream)
{
	RT_ENTER();
	RT_NEED(cuMemPrefetchAsync);
	return rt_ret_cu(rt_drv.cuMemPrefetchAsync(rt_dptr(devPtr), count, rt_location(location),
						   flags, (CUstream)stream));
}

RT_API cudaError_t cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count,
					     struct cudaMemLocation location, unsigned int flags,
					     cudaStream_t stream)
{
	RT_ENTER();
	RT_NEED(cuMemPrefetchAsync_ptsz);
	return rt_ret_cu(rt_drv.cuMemPrefetchAsync_ptsz(rt_dptr(devPtr), count,
							rt_location(location), flags,
							(CUstream)stream));
}

RT_API cudaError_t cudaMemRangeGetAttribute(void *data, size_t dataSize,
					    enum cudaMemRangeAttribute attribute,
					    const void *devPtr, size_t count)
{
	RT_ENTER();
	RT_NEED(cuMemRangeGetAttribute);
	if (!data)
		return rt_ret(cudaErrorInvalidValue);
	return rt_ret_cu(rt_drv.cuMemRangeGetAttribute(data, dataSize,
						       (CUmem_range_attribute)attribute,
						       rt_dptr(devPtr), count));
}

/* ---- batched discards and prefetches (CUDA 13) ---------------------------- */

/* The arrays pass through to the driver as they are: a void * and a
 * CUdeviceptr, a cudaMemLocation and a CUmemLocation share one layout. */
_Static_assert(sizeof(void *) == sizeof(CUdeviceptr), "dptrs pass through");
_Static_assert(sizeof(struct cudaMemLocation) == sizeof(CUmemLocation) &&
	       offsetof(struct cudaMemLocation, id) == offsetof(CUmemLocation, id),
	       "prefetchLocs pass through");

static cudaError_t rt_located_batch(PFN_cuMemPrefetchBatchAsync_v13000 fn, void **dptrs,
				    size_t *sizes, size_t count, struct cudaMemLocation *locs,
				    size_t *idxs, size_t nr_locs, unsigned long long flags,
				    cudaStream_t stream)
{
	if (!fn)
		return rt_ret(cudaErrorNotSupported);
	return rt_ret_cu(fn((CUdeviceptr *)dptrs, sizes, count, (CUmemLocation *)locs, idxs,
			    nr_locs, flags, (CUstream)stream));
}

static cudaError_t rt_discard_batch(PFN_cuMemDiscardBatchAsync_v13000 fn, void **dptrs,
				    size_t *sizes, size_t count, unsigned long long flags,
				    cudaStream_t stream)
{
	if (!fn)
		return rt_ret(cudaErrorNotSupported);
	return rt_ret_cu(fn((CUdeviceptr *)dptrs, sizes, count, flags, (CUstream)stream));
}

RT_API cudaError_t cudaMemPrefetchBatchAsync(void **dptrs, size_t *sizes, size_t count,
					     struct cudaMemLocation *prefetchLocs,
					     size_t *prefetchLocIdxs, size_t numPrefetchLocs,
					     unsigned long long flags, cudaStream_t stream)
{
	RT_ENTER();
	return rt_located_batch(rt_drv.cuMemPrefetchBatchAsync, dptrs, sizes, count,
				prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream);
}

RT_API cudaError_t cudaMemPrefetchBatchAsync_ptsz(void **dptrs, size_t *sizes, size_t count,
						  struct cudaMemLocation *prefetchLocs,
						  size_t *prefetchLocIdxs, size_t numPrefetchLocs,
						  unsigned long long flags, cudaStream_t stream)
{
	RT_ENTER();
	return rt_located_batch(rt_drv.cuMemPrefetchBatchAsync_ptsz, dptrs, sizes, count,
				prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream);
}

RT_API cudaError_t cudaMemDiscardBatchAsync(void **dptrs, size_t *sizes, size_t count,
					    unsigned long long flags, cudaStream_t stream)
{
	RT_ENTER();
	return rt_discard_batch(rt_drv.cuMemDiscardBatchAsync, dptrs, sizes, count, flags,
				stream);
}

RT_API cudaError_t cudaMemDiscardBatchAsync_ptsz(void **dptrs, size_t *sizes, size_t count,
						 unsigned long long flags, cudaStream_t stream)
{
	RT_ENTER();
	return rt_discard_batch(rt_drv.cuMemDiscardBatchAsync_ptsz, dptrs, sizes, count, flags,
				stream);
}

RT_API cudaError_t cudaMemDiscardAndPrefetchBatchAsync(void **dptrs, size_t *sizes, size_t count,
						       struct cudaMemLocation *prefetchLocs,
						       size_t *prefetchLocIdxs,
						       size_t numPrefetchLocs,
						       unsigned long long flags,
						       cudaStream_t stream)
{
	RT_ENTER();
	return rt_located_batch(rt_drv.cuMemDiscardAndPrefetchBatchAsync, dptrs, sizes, count,
				prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream);
}

RT_API cudaError_t cudaMemDiscardAndPrefetchBatchAsync_ptsz(void **dptrs, size_t *sizes,
							    size_t count,
							    struct cudaMemLocation *prefetchLocs,
							    size_t *prefetchLocIdxs,
							    size_t numPrefetchLocs,
							    unsigned long long flags,
							    cudaStream_t stream)
{
	RT_ENTER();
	return rt_located_batch(rt_drv.cuMemDiscardAndPrefetchBatchAsync_ptsz, dptrs, sizes,
				count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
				stream);
}

/* ---- pointer attributes ----------------------------------------------------- */

static CUresult rt_ptr_attr(void *out, CUpointer_attribute attr, const void *ptr)
{
	return rt_drv.cuPointerGetAttribute(out, attr, rt_dptr(ptr));
}

RT_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
					    const void *ptr)
{
	RT_ENTER();
	RT_NEED(cuPointerGetAttribute);
	if (!attributes)
		return rt_ret(cudaErrorInvalidValue);
	struct cudaPointerAttributes a;
	memset(&a, 0, sizeof a);
	unsigned int memtype = 0;
	int managed = 0;
	CUresult res = rt_ptr_attr(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr);
	if (res == CUDA_ERROR_INVALID_VALUE) {   /* not known to CUDA */
		a.type = cudaMemoryTypeUnregistered;
		a.device = -2;
		a.hostPointer = (void *)ptr;
		*attributes = a;
		return cudaSuccess;
	}
	if (res != CUDA_SUCCESS)
		return rt_ret_cu(res);
	if (rt_ptr_attr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr) != CUDA_SUCCESS)
		managed = 0;
	if (managed)
		a.type = cudaMemoryTypeManaged;
	else
		a.type = memtype == CU_MEMORYTYPE_HOST ? cudaMemoryTypeHost : cudaMemoryTypeDevice;
	if (rt_ptr_attr(&a.device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) != CUDA_SUCCESS)
		a.device = rt_current_device();
	CUdeviceptr d = 0;
	void *h = NULL;
	if (rt_ptr_attr(&d, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, ptr) == CUDA_SUCCESS)
		a.devicePointer = rt_vptr(d);
	else if (a.type != cudaMemoryTypeHost)
		a.devicePointer = (void *)ptr;
	if (rt_ptr_attr(&h, CU_POINTER_ATTRIBUTE_HOST_POINTER, ptr) == CUDA_SUCCESS)
		a.hostPointer = h;
	else if (a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeManaged)
		a.hostPointer = (void *)ptr;
	*attributes = a;
	return cudaSuccess;
}
