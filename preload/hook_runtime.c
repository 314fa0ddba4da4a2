// SPDX-License-Identifier: MIT
/* The runtime's own exports (libcudart.so.12/13 linked dynamically: vLLM's
 * ctypes wrappers, torch_memory_saver, PyTorch). Each calls the next
 * definition (RTLD_NEXT, so another preload keeps working). A runtime call
 * that reaches the driver through kvtier's resolver hooks is recorded once,
 * by the driver hook, attributed to the runtime API; the runtime hook records
 * only when nothing underneath did (e.g. the runtime failed early). */
#include <cuda_runtime_api.h>

#include "../base/kvt.h"
#include "guard.h"
#include "../cuda_shim/real.h"
#include "hook_table.h"
#include "record.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define U64(x) ((uint64_t)(uintptr_t)(x))

/* Declares `real`; passes through when it must not record. */
#define RT_PROLOGUE(name, api, ...)                                        \
	__typeof__(&name) real = RT_REAL(name);                              \
	if (KVT_UNLIKELY(!real))                                             \
		return cudaErrorInsufficientDriver;                          \
	if (!kvt_rt_enter(api))                                              \
		return real(__VA_ARGS__)

/* After the real call: record it here only if no driver hook did. */
static void rt_alloc_done(uint8_t kind, uint16_t api, cudaError_t e, void **pp,
			  size_t size, uint64_t aux)
{
	if (kvt_rt_exit() && kvt_hook_enter()) {
		int ok = e == cudaSuccess && pp;
		kvt_rec_alloc(kvt_mem_reg, kind, api, ok, ok ? U64(*pp) : 0, size, aux, e);
		kvt_hook_exit();
	}
}

static void rt_free_done(uint8_t kind, uint16_t api, cudaError_t e, void *p)
{
	if (kvt_rt_exit() && kvt_hook_enter()) {
		struct kvt_alloc rec;
		int tracked = e == cudaSuccess && !kvt_rec_free_begin(kvt_mem_reg, U64(p), &rec);
		kvt_rec_free_end(kvt_mem_reg, kind, api, tracked, &rec, U64(p), 1, e);
		kvt_hook_exit();
	}
}

KVT_EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
	RT_PROLOGUE(cudaMalloc, KVT_API_cudaMalloc, p, size);
	cudaError_t e = real(p, size);
	rt_alloc_done(KVT_KIND_DEVICE, KVT_API_cudaMalloc, e, p, size, 0);
	return e;
}

KVT_EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned flags)
{
	RT_PROLOGUE(cudaMallocManaged, KVT_API_cudaMallocManaged, p, size, flags);
	cudaError_t e = real(p, size, flags);
	rt_alloc_done(KVT_KIND_MANAGED, KVT_API_cudaMallocManaged, e, p, size, flags);
	return e;
}

KVT_EXPORT cudaError_t cudaMallocHost(void **p, size_t size)
{
	RT_PROLOGUE(cudaMallocHost, KVT_API_cudaMallocHost, p, size);
	cudaError_t e = real(p, size);
	rt_alloc_done(KVT_KIND_HOST, KVT_API_cudaMallocHost, e, p, size, 0);
	return e;
}

KVT_EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags)
{
	RT_PROLOGUE(cudaHostAlloc, KVT_API_cudaHostAlloc, p, size, flags);
	cudaError_t e = real(p, size, flags);
	rt_alloc_done(KVT_KIND_HOST, KVT_API_cudaHostAlloc, e, p, size, flags);
	return e;
}

KVT_EXPORT cudaError_t cudaFree(void *p)
{
	RT_PROLOGUE(cudaFree, KVT_API_cudaFree, p);
	cudaError_t e = real(p);
	rt_free_done(KVT_KIND_DEVICE, KVT_API_cudaFree, e, p);
	return e;
}

KVT_EXPORT cudaError_t cudaFreeHost(void *p)
{
	RT_PROLOGUE(cudaFreeHost, KVT_API_cudaFreeHost, p);
	cudaError_t e = real(p);
	rt_free_done(KVT_KIND_HOST, KVT_API_cudaFreeHost, e, p);
	return e;
}

#define RT_MALLOC_ASYNC(name)                                                  \
KVT_EXPORT cudaError_t name(void **p, size_t size, cudaStream_t s)             \
{                                                                              \
	RT_PROLOGUE(name, KVT_API_cudaMallocAsync, p, size, s);                \
	cudaError_t e = real(p, size, s);                                      \
	rt_alloc_done(KVT_KIND_ASYNC, KVT_API_cudaMallocAsync, e, p, size, U64(s)); \
	return e;                                                              \
}
#define RT_FREE_ASYNC(name)                                                    \
KVT_EXPORT cudaError_t name(void *p, cudaStream_t s)                           \
{                                                                              \
	RT_PROLOGUE(name, KVT_API_cudaFreeAsync, p, s);                        \
	cudaError_t e = real(p, s);                                            \
	rt_free_done(KVT_KIND_ASYNC, KVT_API_cudaFreeAsync, e, p);             \
	return e;                                                              \
}
cudaError_t cudaMallocAsync_ptsz(void **, size_t, cudaStream_t);
cudaError_t cudaFreeAsync_ptsz(void *, cudaStream_t);
RT_MALLOC_ASYNC(cudaMallocAsync)
RT_MALLOC_ASYNC(cudaMallocAsync_ptsz)
RT_FREE_ASYNC(cudaFreeAsync)
RT_FREE_ASYNC(cudaFreeAsync_ptsz)

/* ---- driver entry points handed out by the runtime (PyTorch's VMM path) ---- */

cudaError_t cudaGetDriverEntryPoint_ptsz(const char *, void **, unsigned long long,
					 enum cudaDriverEntryPointQueryResult *);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *, void **, unsigned int,
						  unsigned long long,
						  enum cudaDriverEntryPointQueryResult *);

#define RT_ENTRY(name)                                                         \
KVT_EXPORT cudaError_t name(const char *sym, void **fn, unsigned long long flags, \
			    enum cudaDriverEntryPointQueryResult *st)          \
{                                                                              \
	__typeof__(&name) real = RT_REAL(name);                                \
	if (!real)                                                             \
		return cudaErrorInsufficientDriver;                            \
	cudaError_t e = real(sym, fn, flags, st);                              \
	if (e == cudaSuccess && fn && *fn)                                     \
		*fn = kvt_substitute(sym, *fn);                                \
	return e;                                                              \
}
#define RT_ENTRY_BY_VERSION(name)                                              \
KVT_EXPORT cudaError_t name(const char *sym, void **fn, unsigned int ver,      \
			    unsigned long long flags,                          \
			    enum cudaDriverEntryPointQueryResult *st)          \
{                                                                              \
	__typeof__(&name) real = RT_REAL(name);                                \
	if (!real)                                                             \
		return cudaErrorInsufficientDriver;                            \
	cudaError_t e = real(sym, fn, ver, flags, st);                         \
	if (e == cudaSuccess && fn && *fn)                                     \
		*fn = kvt_substitute(sym, *fn);                                \
	return e;                                                              \
}
RT_ENTRY(cudaGetDriverEntryPoint)
RT_ENTRY(cudaGetDriverEntryPoint_ptsz)
RT_ENTRY_BY_VERSION(cudaGetDriverEntryPointByVersion)
RT_ENTRY_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz)
