/* SPDX-License-Identifier: MIT */
/* The calls kvtier hooks, one id each: trace events name the API the
 * application called with these ids, and the kvtier tool prints the names.
 * The order is part of the trace format: append only. */
#ifndef KVTIER_API_H
#define KVTIER_API_H

#define KVT_API_LIST(X) \
	X(none) \
	/* driver */ \
	X(cuMemAlloc_v2) X(cuMemAllocPitch_v2) X(cuMemFree_v2) X(cuMemAllocManaged) \
	X(cuMemAllocHost_v2) X(cuMemHostAlloc) X(cuMemFreeHost) \
	X(cuMemHostRegister_v2) X(cuMemHostUnregister) \
	X(cuMemAllocAsync) X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync) \
	X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) \
	X(cuMemGetInfo_v2) \
	X(cuMemsetD8_v2) X(cuMemsetD16_v2) X(cuMemsetD32_v2) \
	X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) \
	X(cuMemcpy) X(cuMemcpyAsync) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) \
	X(cuMemcpyDtoD_v2) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) \
	X(cuMemcpyDtoDAsync_v2) \
	X(cuLaunchKernel) \
	X(cuMemAdvise) X(cuMemAdvise_v2) X(cuMemPrefetchAsync) X(cuMemPrefetchAsync_v2) \
	/* runtime */ \
	X(cudaMalloc) X(cudaFree) X(cudaMallocHost) X(cudaHostAlloc) X(cudaFreeHost) \
	X(cudaMallocManaged) X(cudaMallocAsync) X(cudaFreeAsync) \
	/* host */ \
	X(mmap) X(munmap) X(mremap) \
	/* appended */ \
	X(cuLaunchKernelEx) X(cuGraphLaunch) \
	/* heap blocks of 32 MiB or more (preload/hook_heap.c) */ \
	X(malloc) X(calloc) X(realloc) X(free) X(posix_memalign) X(aligned_alloc) \
	X(memalign) X(valloc)

#define KVT_API_ENUM(n) KVT_API_##n,
enum kvt_api { KVT_API_LIST(KVT_API_ENUM) KVT_API__COUNT };
#undef KVT_API_ENUM

/* Name of an api id ("?" when out of range). */
const char *kvt_api_name(unsigned api);
const char *kvt_op_name(unsigned op);
const char *kvt_kind_name(unsigned kind);
const char *kvt_placement_name(unsigned placement);

#endif
