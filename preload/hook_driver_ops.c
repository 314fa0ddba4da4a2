// SPDX-License-Identifier: MIT
/* Driver hooks for everything that is not an allocation: memory info,
 * memsets, copies, kernel launches, advice and prefetch (both ABIs of the
 * last two, each calling its own real function). They record one event and
 * pass the call through unchanged. No malloc, no stdio. */
#include "hook_driver.h"
#include "../place/place.h"
#include "../profiler/decode.h"
#include "../profiler/evidence.h"
#include "../profiler/params.h"
#include "../tier/step.h"

/* The old (CUdevice) ABIs keep their plain export names; cuda.h maps the
 * plain names to the _v2 ABIs, so undo that here. */
#undef cuMemAdvise
#undef cuMemPrefetchAsync
CUresult cuMemAdvise(CUdeviceptr, size_t, CUmem_advise, CUdevice);
CUresult cuMemPrefetchAsync(CUdeviceptr, size_t, CUdevice, CUstream);
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr, size_t, CUdevice, CUstream);
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream);

KVT_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
	DRV_PROLOGUE(cuMemGetInfo_v2, free_bytes, total_bytes);
	CUresult r = real(free_bytes, total_bytes);
	int ok = r == CUDA_SUCCESS;
	kvt_rec_event(KVT_OP_MEMINFO, KVT_KIND_NONE, KVT_API_cuMemGetInfo_v2,
		      ok && free_bytes ? *free_bytes : 0, ok && total_bytes ? *total_bytes : 0,
		      0, 0, r);
	if (ok && free_bytes && total_bytes)
		kvt_place_on_meminfo(*free_bytes, *total_bytes);
	kvt_hook_exit();
	return r;
}

/* ---- memsets: synchronous (legacy and _ptds) and stream-ordered ---- */

#define MEMSET_HOOK(exp, api, T, elem)                                         \
KVT_EXPORT CUresult exp(CUdeviceptr d, T v, size_t n)                          \
{                                                                              \
	DRV_PROLOGUE(exp, d, v, n);                                            \
	CUresult r = real(d, v, n);                                            \
	kvt_rec_event(KVT_OP_MEMSET, KVT_KIND_NONE, api, d, (uint64_t)n * (elem), v, 0, r); \
	if (r == CUDA_SUCCESS) {                                               \
		kvt_place_on_memset(d, (uint64_t)n * (elem), (int)v);          \
		kvt_prof_on_memset(d, (uint64_t)n * (elem));                   \
	}                                                                      \
	kvt_hook_exit();                                                       \
	return r;                                                              \
}
#define MEMSET_ASYNC_HOOK(exp, api, T, elem)                                   \
KVT_EXPORT CUresult exp(CUdeviceptr d, T v, size_t n, CUstream s)              \
{                                                                              \
	DRV_PROLOGUE(exp, d, v, n, s);                                         \
	CUresult r = real(d, v, n, s);                                         \
	kvt_rec_event(KVT_OP_MEMSET, KVT_KIND_NONE, api, d, (uint64_t)n * (elem), v, U64(s), r); \
	if (r == CUDA_SUCCESS) {                                               \
		kvt_place_on_memset(d, (uint64_t)n * (elem), (int)v);          \
		kvt_prof_on_memset(d, (uint64_t)n * (elem));                   \
	}                                                                      \
	kvt_hook_exit();                                                       \
	return r;                                                              \
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr, unsigned char, size_t);
CUresult cuMemsetD16_v2_ptds(CUdeviceptr, unsigned short, size_t);
CUresult cuMemsetD32_v2_ptds(CUdeviceptr, unsigned int, size_t);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuMemsetD16Async_ptsz(CUdeviceptr, unsigned short, size_t, CUstream);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr, unsigned int, size_t, CUstream);
MEMSET_HOOK(cuMemsetD8_v2, KVT_API_cuMemsetD8_v2, unsigned char, 1)
MEMSET_HOOK(cuMemsetD8_v2_ptds, KVT_API_cuMemsetD8_v2, unsigned char, 1)
MEMSET_HOOK(cuMemsetD16_v2, KVT_API_cuMemsetD16_v2, unsigned short, 2)
MEMSET_HOOK(cuMemsetD16_v2_ptds, KVT_API_cuMemsetD16_v2, unsigned short, 2)
MEMSET_HOOK(cuMemsetD32_v2, KVT_API_cuMemsetD32_v2, unsigned int, 4)
MEMSET_HOOK(cuMemsetD32_v2_ptds, KVT_API_cuMemsetD32_v2, unsigned int, 4)
MEMSET_ASYNC_HOOK(cuMemsetD8Async, KVT_API_cuMemsetD8Async, unsigned char, 1)
MEMSET_ASYNC_HOOK(cuMemsetD8Async_ptsz, KVT_API_cuMemsetD8Async, unsigned char, 1)
MEMSET_ASYNC_HOOK(cuMemsetD16Async, KVT_API_cuMemsetD16Async, unsigned short, 2)
MEMSET_ASYNC_HOOK(cuMemsetD16Async_ptsz, KVT_API_cuMemsetD16Async, unsigned short, 2)
MEMSET_ASYNC_HOOK(cuMemsetD32Async, KVT_API_cuMemsetD32Async, unsigned int, 4)
MEMSET_ASYNC_HOOK(cuMemsetD32Async_ptsz, KVT_API_cuMemsetD32Async, unsigned int, 4)

/* ---- copies: event addr = dst, aux = src, size = bytes, aux2 = stream ---- */

#define COPY_HOOK(exp, api, TD, TS)                                            \
KVT_EXPORT CUresult exp(TD dst, TS src, size_t n)                              \
{                                                                              \
	DRV_PROLOGUE(exp, dst, src, n);                                        \
	CUresult r = real(dst, src, n);                                        \
	kvt_rec_event(KVT_OP_COPY, KVT_KIND_NONE, api, U64(dst), n, U64(src), 0, r); \
	if (r == CUDA_SUCCESS) {                                               \
		kvt_prof_on_copy(U64(dst), U64(src), n);                       \
		kvt_decode_on_copy(U64(dst), U64(src), n);                     \
		kvt_step_after_copy(0);                                        \
	}                                                                      \
	kvt_hook_exit();                                                       \
	return r;                                                              \
}
#define COPY_ASYNC_HOOK(exp, api, TD, TS)                                      \
KVT_EXPORT CUresult exp(TD dst, TS src, size_t n, CUstream s)                  \
{                                                                              \
	DRV_PROLOGUE(exp, dst, src, n, s);                                     \
	CUresult r = real(dst, src, n, s);                                     \
	kvt_rec_event(KVT_OP_COPY, KVT_KIND_NONE, api, U64(dst), n, U64(src), U64(s), r); \
	if (r == CUDA_SUCCESS) {                                               \
		kvt_prof_on_copy(U64(dst), U64(src), n);                       \
		kvt_decode_on_copy(U64(dst), U64(src), n);                     \
		kvt_step_after_copy(U64(s));                                   \
	}                                                                      \
	kvt_hook_exit();                                                       \
	return r;                                                              \
}
CUresult cuMemcpy_ptds(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuMemcpyAsync_ptsz(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2_ptds(void *, CUdeviceptr, size_t);
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *, CUdeviceptr, size_t, CUstream);
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr, CUdeviceptr, size_t, CUstream);
COPY_HOOK(cuMemcpy, KVT_API_cuMemcpy, CUdeviceptr, CUdeviceptr)
COPY_HOOK(cuMemcpy_ptds, KVT_API_cuMemcpy, CUdeviceptr, CUdeviceptr)
COPY_HOOK(cuMemcpyHtoD_v2, KVT_API_cuMemcpyHtoD_v2, CUdeviceptr, const void *)
COPY_HOOK(cuMemcpyHtoD_v2_ptds, KVT_API_cuMemcpyHtoD_v2, CUdeviceptr, const void *)
COPY_HOOK(cuMemcpyDtoH_v2, KVT_API_cuMemcpyDtoH_v2, void *, CUdeviceptr)
COPY_HOOK(cuMemcpyDtoH_v2_ptds, KVT_API_cuMemcpyDtoH_v2, void *, CUdeviceptr)
COPY_HOOK(cuMemcpyDtoD_v2, KVT_API_cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr)
COPY_HOOK(cuMemcpyDtoD_v2_ptds, KVT_API_cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr)
COPY_ASYNC_HOOK(cuMemcpyAsync, KVT_API_cuMemcpyAsync, CUdeviceptr, CUdeviceptr)
COPY_ASYNC_HOOK(cuMemcpyAsync_ptsz, KVT_API_cuMemcpyAsync, CUdeviceptr, CUdeviceptr)
COPY_ASYNC_HOOK(cuMemcpyHtoDAsync_v2, KVT_API_cuMemcpyHtoDAsync_v2, CUdeviceptr, const void *)
COPY_ASYNC_HOOK(cuMemcpyHtoDAsync_v2_ptsz, KVT_API_cuMemcpyHtoDAsync_v2, CUdeviceptr, const void *)
COPY_ASYNC_HOOK(cuMemcpyDtoHAsync_v2, KVT_API_cuMemcpyDtoHAsync_v2, void *, CUdeviceptr)
COPY_ASYNC_HOOK(cuMemcpyDtoHAsync_v2_ptsz, KVT_API_cuMemcpyDtoHAsync_v2, void *, CUdeviceptr)
COPY_ASYNC_HOOK(cuMemcpyDtoDAsync_v2, KVT_API_cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr)
COPY_ASYNC_HOOK(cuMemcpyDtoDAsync_v2_ptsz, KVT_API_cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr)

/* ---- kernel launches: addr = function, aux = stream, aux2 = grid x*y*z ---- */

#define LAUNCH_HOOK(exp)                                                        \
KVT_EXPORT CUresult exp(CUfunction f, unsigned gx, unsigned gy, unsigned gz,    \
			unsigned bx, unsigned by, unsigned bz, unsigned shmem,  \
			CUstream s, void **params, void **extra)                \
{                                                                               \
	DRV_PROLOGUE(exp, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);  \
	CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);  \
	kvt_rec_event(KVT_OP_LAUNCH, KVT_KIND_NONE, KVT_API_cuLaunchKernel, U64(f), \
		      (uint64_t)bx * by * bz, U64(s), (uint64_t)gx * gy * gz, r);  \
	if (r == CUDA_SUCCESS) {                                                \
		kvt_prof_on_launch(U64(f), params, U64(s));                     \
		if (kvt_decode_on_launch(U64(f), params, gx, U64(s)))           \
			kvt_step_after_copy(U64(s));                            \
	}                                                                       \
	kvt_hook_exit();                                                        \
	return r;                                                               \
}
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
			     unsigned, unsigned, unsigned, CUstream, void **, void **);
LAUNCH_HOOK(cuLaunchKernel)
LAUNCH_HOOK(cuLaunchKernel_ptsz)

/* An unloaded module's or library's function handles may come back for
 * other kernels: the parameter layouts the launch scan kept go stale. */
KVT_EXPORT CUresult cuModuleUnload(CUmodule m)
{
	DRV_PROLOGUE(cuModuleUnload, m);
	CUresult r = real(m);
	if (r == CUDA_SUCCESS) {
		kvt_param_layouts_forget();
		kvt_decode_forget();
	}
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuLibraryUnload(CUlibrary l)
{
	DRV_PROLOGUE(cuLibraryUnload, l);
	CUresult r = real(l);
	if (r == CUDA_SUCCESS) {
		kvt_param_layouts_forget();
		kvt_decode_forget();
	}
	kvt_hook_exit();
	return r;
}

/* ---- advice and prefetch: aux = advice / stream, aux2 = location ---- */

static inline uint64_t loc_word(CUmemLocation l)
{
	return ((uint64_t)(uint32_t)l.type << 32) | (uint32_t)l.id;
}

KVT_EXPORT CUresult cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise adv, CUdevice dev)
{
	DRV_PROLOGUE(cuMemAdvise, p, n, adv, dev);
	CUresult r = real(p, n, adv, dev);
	kvt_rec_event(KVT_OP_ADVISE, KVT_KIND_NONE, KVT_API_cuMemAdvise, p, n,
		      (uint64_t)adv, (uint64_t)(uint32_t)dev, r);
	kvt_hook_exit();
	return r;
}

KVT_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise adv, CUmemLocation loc)
{
	DRV_PROLOGUE(cuMemAdvise_v2, p, n, adv, loc);
	CUresult r = real(p, n, adv, loc);
	kvt_rec_event(KVT_OP_ADVISE, KVT_KIND_NONE, KVT_API_cuMemAdvise_v2, p, n,
		      (uint64_t)adv, loc_word(loc), r);
	kvt_hook_exit();
	return r;
}

#define PREFETCH_OLD_HOOK(exp)                                                  \
KVT_EXPORT CUresult exp(CUdeviceptr p, size_t n, CUdevice dev, CUstream s)      \
{                                                                               \
	DRV_PROLOGUE(exp, p, n, dev, s);                                        \
	CUresult r = real(p, n, dev, s);                                        \
	kvt_rec_event(KVT_OP_PREFETCH, KVT_KIND_NONE, KVT_API_cuMemPrefetchAsync, p, n, \
		      U64(s), (uint64_t)(uint32_t)dev, r);                      \
	kvt_hook_exit();                                                        \
	return r;                                                               \
}
#define PREFETCH_V2_HOOK(exp)                                                   \
KVT_EXPORT CUresult exp(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, \
			CUstream s)                                             \
{                                                                               \
	DRV_PROLOGUE(exp, p, n, loc, flags, s);                                 \
	CUresult r = real(p, n, loc, flags, s);                                 \
	kvt_rec_event(KVT_OP_PREFETCH, KVT_KIND_NONE, KVT_API_cuMemPrefetchAsync_v2, p, n, \
		      U64(s), loc_word(loc), r);                                \
	kvt_hook_exit();                                                        \
	return r;                                                               \
}
PREFETCH_OLD_HOOK(cuMemPrefetchAsync)
PREFETCH_OLD_HOOK(cuMemPrefetchAsync_ptsz)
PREFETCH_V2_HOOK(cuMemPrefetchAsync_v2)
PREFETCH_V2_HOOK(cuMemPrefetchAsync_v2_ptsz)

/* ---- IPC export of redirected memory: managed memory has no IPC handle ---- */

KVT_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
	DRV_PROLOGUE(cuIpcGetMemHandle, h, p);
	struct kvt_alloc a;
	if (!kvt_reg_find(kvt_mem_reg, p, &a) && a.placement != KVT_PLACE_NATIVE &&
	    a.kind != KVT_KIND_MANAGED) {
		kvt_place_fallback(KVT_FB_IPC);
		kvt_warn("cuIpcGetMemHandle on %#llx: kvtier placed this %s allocation in "
			 "managed memory, which cannot be exported; exclude its call site "
			 "in KVTIER_POLICY (e.g. 'site~*allreduce* => native')",
			 (unsigned long long)p, kvt_kind_name(a.kind));
	}
	CUresult r = real(h, p);
	kvt_hook_exit();
	return r;
}
