/* SPDX-License-Identifier: MIT */
/* The real entry points (cuda_shim/real.c): the list of driver and runtime
 * functions kvtier interposes, one slot each for the real function, and its
 * resolution (the driver object the resolver was seen in, then RTLD_NEXT;
 * never one of kvtier's own exports). Each hook calls the real function
 * through its slot; the substitution that puts the hooks in front of the
 * application is preload/hook_table.c's. No malloc; safe inside hooks. */
#ifndef KVT_REAL_H
#define KVT_REAL_H

/* X(base name as cuGetProcAddress sees it, export name = ABI) */
#define KVT_DRIVER_HOOKS(X) \
	X(cuGetProcAddress, cuGetProcAddress) \
	X(cuGetProcAddress, cuGetProcAddress_v2) \
	X(cuMemAlloc, cuMemAlloc_v2) \
	X(cuMemAllocPitch, cuMemAllocPitch_v2) \
	X(cuMemFree, cuMemFree_v2) \
	X(cuMemAllocManaged, cuMemAllocManaged) \
	X(cuMemAllocHost, cuMemAllocHost_v2) \
	X(cuMemHostAlloc, cuMemHostAlloc) \
	X(cuMemFreeHost, cuMemFreeHost) \
	X(cuMemHostRegister, cuMemHostRegister_v2) \
	X(cuMemHostUnregister, cuMemHostUnregister) \
	X(cuMemAllocAsync, cuMemAllocAsync) \
	X(cuMemAllocAsync, cuMemAllocAsync_ptsz) \
	X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync) \
	X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz) \
	X(cuMemFreeAsync, cuMemFreeAsync) \
	X(cuMemFreeAsync, cuMemFreeAsync_ptsz) \
	X(cuMemCreate, cuMemCreate) \
	X(cuMemRelease, cuMemRelease) \
	X(cuMemMap, cuMemMap) \
	X(cuMemUnmap, cuMemUnmap) \
	X(cuMemGetInfo, cuMemGetInfo_v2) \
	X(cuMemsetD8, cuMemsetD8_v2) \
	X(cuMemsetD8, cuMemsetD8_v2_ptds) \
	X(cuMemsetD16, cuMemsetD16_v2) \
	X(cuMemsetD16, cuMemsetD16_v2_ptds) \
	X(cuMemsetD32, cuMemsetD32_v2) \
	X(cuMemsetD32, cuMemsetD32_v2_ptds) \
	X(cuMemsetD8Async, cuMemsetD8Async) \
	X(cuMemsetD8Async, cuMemsetD8Async_ptsz) \
	X(cuMemsetD16Async, cuMemsetD16Async) \
	X(cuMemsetD16Async, cuMemsetD16Async_ptsz) \
	X(cuMemsetD32Async, cuMemsetD32Async) \
	X(cuMemsetD32Async, cuMemsetD32Async_ptsz) \
	X(cuMemcpy, cuMemcpy) \
	X(cuMemcpy, cuMemcpy_ptds) \
	X(cuMemcpyAsync, cuMemcpyAsync) \
	X(cuMemcpyAsync, cuMemcpyAsync_ptsz) \
	X(cuMemcpyHtoD, cuMemcpyHtoD_v2) \
	X(cuMemcpyHtoD, cuMemcpyHtoD_v2_ptds) \
	X(cuMemcpyDtoH, cuMemcpyDtoH_v2) \
	X(cuMemcpyDtoH, cuMemcpyDtoH_v2_ptds) \
	X(cuMemcpyDtoD, cuMemcpyDtoD_v2) \
	X(cuMemcpyDtoD, cuMemcpyDtoD_v2_ptds) \
	X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2) \
	X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2_ptsz) \
	X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2) \
	X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2_ptsz) \
	X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2) \
	X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2_ptsz) \
	X(cuLaunchKernel, cuLaunchKernel) \
	X(cuLaunchKernel, cuLaunchKernel_ptsz) \
	X(cuLaunchKernelEx, cuLaunchKernelEx) \
	X(cuLaunchKernelEx, cuLaunchKernelEx_ptsz) \
	X(cuModuleUnload, cuModuleUnload) \
	X(cuLibraryUnload, cuLibraryUnload) \
	X(cuGraphInstantiate, cuGraphInstantiateWithFlags) \
	X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams) \
	X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams_ptsz) \
	X(cuGraphLaunch, cuGraphLaunch) \
	X(cuGraphLaunch, cuGraphLaunch_ptsz) \
	X(cuGraphExecDestroy, cuGraphExecDestroy) \
	X(cuGraphExecUpdate, cuGraphExecUpdate_v2) \
	X(cuMemAdvise, cuMemAdvise) \
	X(cuMemAdvise, cuMemAdvise_v2) \
	X(cuMemPrefetchAsync, cuMemPrefetchAsync) \
	X(cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz) \
	X(cuMemPrefetchAsync, cuMemPrefetchAsync_v2) \
	X(cuMemPrefetchAsync, cuMemPrefetchAsync_v2_ptsz) \
	X(cuIpcGetMemHandle, cuIpcGetMemHandle)

/* Runtime exports, chained with RTLD_NEXT. */
#define KVT_RUNTIME_HOOKS(X) \
	X(cudaMalloc) X(cudaFree) X(cudaMallocHost) X(cudaHostAlloc) \
	X(cudaFreeHost) X(cudaMallocManaged) X(cudaMallocAsync) \
	X(cudaMallocAsync_ptsz) X(cudaFreeAsync) X(cudaFreeAsync_ptsz) \
	X(cudaGetDriverEntryPoint) X(cudaGetDriverEntryPoint_ptsz) \
	X(cudaGetDriverEntryPointByVersion) X(cudaGetDriverEntryPointByVersion_ptsz)

#define KVT_H_ENUM(base, exp) KVT_H_##exp,
#define KVT_R_ENUM(name) KVT_R_##name,
enum { KVT_DRIVER_HOOKS(KVT_H_ENUM) KVT_H__COUNT };
enum { KVT_RUNTIME_HOOKS(KVT_R_ENUM) KVT_R__COUNT };
#undef KVT_H_ENUM
#undef KVT_R_ENUM

extern void *kvt_drv_slot[KVT_H__COUNT];
extern void *kvt_rt_slot[KVT_R__COUNT];

void *kvt_drv_resolve(unsigned idx);     /* slow path: driver handle, then RTLD_NEXT */
/* A symbol of the loaded driver that is not one of its CUDA entry points
 * (a simulator's extras), NULL where it has none. */
void *kvt_drv_extra(const char *name);
void *kvt_rt_resolve(unsigned idx);      /* slow path: RTLD_NEXT */

static inline void *kvt_drv_real(unsigned idx)
{
	void *p = __atomic_load_n(&kvt_drv_slot[idx], __ATOMIC_ACQUIRE);
	return p ? p : kvt_drv_resolve(idx);
}

static inline void *kvt_rt_real(unsigned idx)
{
	void *p = __atomic_load_n(&kvt_rt_slot[idx], __ATOMIC_ACQUIRE);
	return p ? p : kvt_rt_resolve(idx);
}

#define DRV_REAL(exp) ((__typeof__(&exp))kvt_drv_real(KVT_H_##exp))
#define RT_REAL(name) ((__typeof__(&name))kvt_rt_real(KVT_R_##name))

/* The names of slot idx: as cuGetProcAddress sees it (base) and as the
 * object exports it (the ABI). Runtime slots have one name, given twice. */
const char *kvt_real_drv_base(unsigned idx);
const char *kvt_real_drv_export(unsigned idx);
const char *kvt_real_rt_name(unsigned idx);
/* Substitution found the real function: keep it (release store). */
void kvt_real_set_drv(unsigned idx, void *p);
void kvt_real_set_rt(unsigned idx, void *p);
/* The driver object whose pointers were substituted, for resolving the
 * slots of programs linked with -lcuda that never used dlsym. The first
 * path given is kept; a path too long for the slot is not. */
void kvt_real_set_driver_path(const char *path);

#endif
