/* SPDX-License-Identifier: MIT */
/* kvtier test double: internals of the stand-in CUDA runtime (libcudart.so.13).
 * It reaches the driver only the way the real runtime does: dlopen +
 * dlsym("cuGetProcAddress_v2") + the resolver. Test-only code, never shipped. */
#ifndef RT_INTERNAL_H
#define RT_INTERNAL_H

#include <stdint.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

/* Every runtime export is defined with this (the build hides everything else). */
#define RT_API __attribute__((visibility("default")))

/* Driver entry points, resolved once through cuGetProcAddress@12000 with
 * the versions and flags the real libcudart 13.0 uses.  X(field, symbol,
 * cudaVersion, flags, pfn type).  Flags 2 = per-thread default stream. */
#define RT_DRIVER_ENTRIES(X)                                                          \
	X(cuDriverGetVersion, "cuDriverGetVersion", 2020, 0, PFN_cuDriverGetVersion_v2020) \
	X(cuDeviceGetCount, "cuDeviceGetCount", 2000, 0, PFN_cuDeviceGetCount_v2000)       \
	X(cuDeviceGet, "cuDeviceGet", 2000, 0, PFN_cuDeviceGet_v2000)                      \
	X(cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000, 0, PFN_cuDeviceGetAttribute_v2000) \
	X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0, PFN_cuDevicePrimaryCtxRetain_v7000) \
	X(cuCtxSetCurrent, "cuCtxSetCurrent", 4000, 0, PFN_cuCtxSetCurrent_v4000)          \
	X(cuCtxSynchronize, "cuCtxSynchronize", 2000, 0, PFN_cuCtxSynchronize_v2000)       \
	X(cuMemAlloc, "cuMemAlloc", 3020, 0, PFN_cuMemAlloc_v3020)                         \
	X(cuMemAllocPitch, "cuMemAllocPitch", 3020, 0, PFN_cuMemAllocPitch_v3020)          \
	X(cuMemFree, "cuMemFree", 3020, 0, PFN_cuMemFree_v3020)                            \
	X(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0, PFN_cuMemAllocManaged_v6000)    \
	X(cuMemHostAlloc, "cuMemHostAlloc", 2020, 0, PFN_cuMemHostAlloc_v2020)             \
	X(cuMemFreeHost, "cuMemFreeHost", 2000, 0, PFN_cuMemFreeHost_v2000)                \
	X(cuMemHostRegister, "cuMemHostRegister", 6050, 0, PFN_cuMemHostRegister_v6050)    \
	X(cuMemHostUnregister, "cuMemHostUnregister", 4000, 0, PFN_cuMemHostUnregister_v4000) \
	X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer", 3020, 0,                    \
	  PFN_cuMemHostGetDevicePointer_v3020)                                                \
	X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0, PFN_cuMemAllocAsync_v11020)        \
	X(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0, PFN_cuMemFreeAsync_v11020)           \
	X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0, PFN_cuMemAllocFromPoolAsync_v11020) \
	X(cuMemAdvise, "cuMemAdvise", 12020, 0, PFN_cuMemAdvise_v12020)                    \
	X(cuMemPrefetchAsync, "cuMemPrefetchAsync", 12020, 0, PFN_cuMemPrefetchAsync_v12020) \
	X(cuMemPrefetchBatchAsync, "cuMemPrefetchBatchAsync", 13000, 0,                       \
	  PFN_cuMemPrefetchBatchAsync_v13000)                                                 \
	X(cuMemDiscardBatchAsync, "cuMemDiscardBatchAsync", 13000, 0,                         \
	  PFN_cuMemDiscardBatchAsync_v13000)                                                  \
	X(cuMemDiscardAndPrefetchBatchAsync, "cuMemDiscardAndPrefetchBatchAsync", 13000, 0,   \
	  PFN_cuMemDiscardAndPrefetchBatchAsync_v13000)                                       \
	X(cuMemRangeGetAttribute, "cuMemRangeGetAttribute", 8000, 0, PFN_cuMemRangeGetAttribute_v8000) \
	X(cuPointerGetAttribute, "cuPointerGetAttribute", 4000, 0, PFN_cuPointerGetAttribute_v4000) \
	X(cuMemGetInfo, "cuMemGetInfo", 3020, 0, PFN_cuMemGetInfo_v3020)                   \
	X(cuMemcpy, "cuMemcpy", 4000, 0, PFN_cuMemcpy_v4000)                               \
	X(cuMemcpyAsync, "cuMemcpyAsync", 4000, 0, PFN_cuMemcpyAsync_v4000)                \
	X(cuMemsetD8, "cuMemsetD8", 3020, 0, PFN_cuMemsetD8_v3020)                         \
	X(cuMemsetD8Async, "cuMemsetD8Async", 3020, 0, PFN_cuMemsetD8Async_v3020)          \
	X(cuStreamCreate, "cuStreamCreate", 2000, 0, PFN_cuStreamCreate_v2000)             \
	X(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 5050, 0, PFN_cuStreamCreateWithPriority_v5050) \
	X(cuStreamDestroy, "cuStreamDestroy", 4000, 0, PFN_cuStreamDestroy_v4000)          \
	X(cuStreamSynchronize, "cuStreamSynchronize", 2000, 0, PFN_cuStreamSynchronize_v2000) \
	X(cuLaunchKernel, "cuLaunchKernel", 4000, 0, PFN_cuLaunchKernel_v4000)             \
	X(cuStreamBeginCapture, "cuStreamBeginCapture", 10010, 0, PFN_cuStreamBeginCapture_v10010) \
	X(cuStreamEndCapture, "cuStreamEndCapture", 10000, 0, PFN_cuStreamEndCapture_v10000) \
	X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040, 0, PFN_cuGraphInstantiateWithFlags_v11040) \
	X(cuGraphLaunch, "cuGraphLaunch", 10000, 0, PFN_cuGraphLaunch_v10000)              \
	X(cuGraphExecDestroy, "cuGraphExecDestroy", 10000, 0, PFN_cuGraphExecDestroy_v10000) \
	X(cuGraphDestroy, "cuGraphDestroy", 10000, 0, PFN_cuGraphDestroy_v10000)           \
	X(cuGraphGetNodes, "cuGraphGetNodes", 10000, 0, PFN_cuGraphGetNodes_v10000)        \
	X(cuGraphNodeGetType, "cuGraphNodeGetType", 10000, 0, PFN_cuGraphNodeGetType_v10000) \
	X(cuGraphKernelNodeGetParams, "cuGraphKernelNodeGetParams", 12000, 0, PFN_cuGraphKernelNodeGetParams_v12000) \
	X(cuGraphKernelNodeSetParams, "cuGraphKernelNodeSetParams", 12000, 0, PFN_cuGraphKernelNodeSetParams_v12000) \
	X(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams", 12000, 0, PFN_cuGraphExecKernelNodeSetParams_v12000) \
	X(cuGraphExecUpdate, "cuGraphExecUpdate", 12000, 0, PFN_cuGraphExecUpdate_v12000)  \
	/* per-thread default stream forms, for the _ptsz / _ptds exports */             \
	X(cuMemcpy_ptds, "cuMemcpy", 4000, 2, PFN_cuMemcpy_v4000)                          \
	X(cuMemsetD8_ptds, "cuMemsetD8", 3020, 2, PFN_cuMemsetD8_v3020)                    \
	X(cuMemcpyAsync_ptsz, "cuMemcpyAsync", 4000, 2, PFN_cuMemcpyAsync_v4000)           \
	X(cuMemsetD8Async_ptsz, "cuMemsetD8Async", 3020, 2, PFN_cuMemsetD8Async_v3020)     \
	X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 2, PFN_cuMemAllocAsync_v11020)   \
	X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 2, PFN_cuMemFreeAsync_v11020)      \
	X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, 2, PFN_cuMemAllocFromPoolAsync_v11020) \
	X(cuMemPrefetchAsync_ptsz, "cuMemPrefetchAsync", 12020, 2, PFN_cuMemPrefetchAsync_v12020) \
	X(cuMemPrefetchBatchAsync_ptsz, "cuMemPrefetchBatchAsync", 13000, 2,                  \
	  PFN_cuMemPrefetchBatchAsync_v13000)                                                 \
	X(cuMemDiscardBatchAsync_ptsz, "cuMemDiscardBatchAsync", 13000, 2,                    \
	  PFN_cuMemDiscardBatchAsync_v13000)                                                  \
	X(cuMemDiscardAndPrefetchBatchAsync_ptsz, "cuMemDiscardAndPrefetchBatchAsync", 13000, 2, \
	  PFN_cuMemDiscardAndPrefetchBatchAsync_v13000)                                       \
	X(cuStreamSynchronize_ptsz, "cuStreamSynchronize", 2000, 2, PFN_cuStreamSynchronize_v2000) \
	X(cuLaunchKernel_ptsz, "cuLaunchKernel", 4000, 2, PFN_cuLaunchKernel_v4000)       \
	X(cuStreamBeginCapture_ptsz, "cuStreamBeginCapture", 10010, 2, PFN_cuStreamBeginCapture_v10010) \
	X(cuStreamEndCapture_ptsz, "cuStreamEndCapture", 10000, 2, PFN_cuStreamEndCapture_v10000) \
	X(cuGraphLaunch_ptsz, "cuGraphLaunch", 10000, 2, PFN_cuGraphLaunch_v10000)

#define RT_ENTRY_FIELD(field, sym, ver, flags, type) type field;
struct rt_driver {
	PFN_cuGetProcAddress_v12000 resolve;        /* the @12000 pointer */
	PFN_cuGetProcAddress_v11030 resolve_11030;  /* fetched as cudart does; unused */
	int version;                                /* cuDriverGetVersion */
	RT_DRIVER_ENTRIES(RT_ENTRY_FIELD)
};
#undef RT_ENTRY_FIELD

extern struct rt_driver rt_drv;

/* Lazily load the driver and bind this thread to the current device's
 * primary context. cudaSuccess, or the error to return (already recorded). */
cudaError_t rt_enter(void);

/* Return early (with the error) when the runtime cannot work. */
#define RT_ENTER()                              \
	do {                                    \
		cudaError_t rt_e_ = rt_enter(); \
		if (rt_e_ != cudaSuccess)       \
			return rt_e_;           \
	} while (0)

/* Record err as this thread's last error (if non-zero) and return it. */
cudaError_t rt_ret(cudaError_t err);

/* CUresult -> cudaError_t, recorded as the last error. */
cudaError_t rt_ret_cu(CUresult res);

/* Driver entry absent: cudaErrorNotSupported (recorded). */
#define RT_NEED(fn)                                          \
	do {                                                 \
		if (!rt_drv.fn)                              \
			return rt_ret(cudaErrorNotSupported); \
	} while (0)

/* Calling thread's device (cudaSetDevice); 0 by default. */
int rt_current_device(void);
cudaError_t rt_select_device(int device);

/* Name/description of a runtime error, NULL when the code is unknown. */
const char *rt_error_name(cudaError_t err);
const char *rt_error_string(cudaError_t err);

static inline CUdeviceptr rt_dptr(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

static inline void *rt_vptr(CUdeviceptr d)
{
	return (void *)(uintptr_t)d;
}

/* Runtime exports the C header hides (only declared under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM). */
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream);
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream);
cudaError_t cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count, struct cudaMemLocation location, unsigned int flags, cudaStream_t stream);
cudaError_t cudaMemPrefetchBatchAsync_ptsz(void **dptrs, size_t *sizes, size_t count, struct cudaMemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, cudaStream_t stream);
cudaError_t cudaMemDiscardBatchAsync_ptsz(void **dptrs, size_t *sizes, size_t count, unsigned long long flags, cudaStream_t stream);
cudaError_t cudaMemDiscardAndPrefetchBatchAsync_ptsz(void **dptrs, size_t *sizes, size_t count, struct cudaMemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus);

#endif
