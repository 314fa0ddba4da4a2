/* SPDX-License-Identifier: MIT */
/* The CUDA driver calls kvtier makes on its own behalf (placement now,
 * migration later). Entry points are resolved once through the driver's
 * real resolver (never through kvtier's hooks, so nothing is recorded
 * twice) at the ABI versions named here. Every function returns the
 * CUresult, or CUDA_ERROR_NOT_INITIALIZED when the driver has none. */
#ifndef KVT_CUDA_SHIM_H
#define KVT_CUDA_SHIM_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* Resolve the entry points (idempotent, thread-safe). 0 when the driver's
 * resolver is known (kvtier saw it being looked up or linked), else -1. */
int kvt_cuda_ready(void);

CUresult kvt_cuda_alloc_managed(CUdeviceptr *p, size_t bytes);
CUresult kvt_cuda_free(CUdeviceptr p);
CUresult kvt_cuda_advise(CUdeviceptr p, size_t bytes, CUmem_advise advice,
			 CUmemLocationType type, int id);
CUresult kvt_cuda_current_device(CUdevice *dev);
/* 1 when the stream is being captured into a graph, 0 when not, <0 error. */
int kvt_cuda_stream_capturing(CUstream s);
CUresult kvt_cuda_stream_sync(CUstream s);
CUresult kvt_cuda_host_register(void *p, size_t bytes, unsigned flags);
CUresult kvt_cuda_host_unregister(void *p);
/* Whether [p, p+bytes) reads back with this preferred location: 1, 0, or -1
 * when the driver cannot say (no _TYPE/_ID range attributes before 12.2). */
int kvt_cuda_preferred_is(CUdeviceptr p, size_t bytes, CUmemLocationType type, int id);
CUresult kvt_cuda_range_attr(void *data, size_t data_bytes, CUmem_range_attribute attr,
			     CUdeviceptr p, size_t bytes);
/* Does every page of [p, p+bytes) have dev in its accessed-by set
 * (CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY)? 1, 0, or -1 when the query fails.
 * The sample source (profiler/src_sample.c) probes only such memory. */
int kvt_cuda_accessed_by(CUdeviceptr p, size_t bytes, CUdevice dev);

/* fn(kernelParams, arg) for each kernel node of graph g (child graphs are
 * not entered); the number of kernel nodes, or -1. Maps a scratch array of
 * the graph's node handles: for instantiation, not for every launch. */
int kvt_cuda_graph_kernels(CUgraph g, void (*fn)(uint64_t func, void **params, void *arg),
			   void *arg);

/* Byte size of parameter i of kernel f (cuFuncGetParamInfo, CUDA 12.4+):
 * 0 with *size; 1 when i is past its last parameter; -1 when the driver
 * cannot say (no entry point, a handle it does not know). The launch scan
 * asks once per function (profiler/params.h). */
int kvt_cuda_param_size(uint64_t f, unsigned i, size_t *size);

/* The name of kernel f (cuFuncGetName, CUDA 12.3+): 0 with *name (the
 * driver's string, valid while the module is loaded), -1 when the driver
 * cannot say. The server decoders ask once per function
 * (profiler/decode.h). */
int kvt_cuda_func_name(uint64_t f, const char **name);

/* The migrator (tier/migrator.c): its thread binds each device's
 * primary context (retained, made current, *ctx kept to switch back to it),
 * makes a lowest-priority non-blocking stream per device and prefetches
 * with the CUmemLocation ABI (cuMemPrefetchAsync_v2). */
CUresult kvt_cuda_bind_primary(CUdevice dev, CUcontext *ctx);
CUresult kvt_cuda_set_current(CUcontext ctx);
CUresult kvt_cuda_release_primary(CUdevice dev);
CUresult kvt_cuda_stream_lowest(CUstream *s);
CUresult kvt_cuda_stream_destroy(CUstream s);
CUresult kvt_cuda_prefetch(CUdeviceptr p, size_t bytes, CUmemLocationType type, int id,
			   CUstream s);
/* Drop the contents of [addr[i], addr[i] + bytes[i]) for i < n
 * (cuMemDiscardBatchAsync, CUDA 13), in s's order; on the legacy default
 * stream's behalf, on a blocking stream of the current device. A range
 * must be managed memory whose contents nothing will read before writing.
 * CUDA_ERROR_NOT_SUPPORTED when the driver has no such call. */
int kvt_cuda_can_discard(void);
CUresult kvt_cuda_discard(const uint64_t *addr, const uint64_t *bytes, size_t n, CUstream s);
CUresult kvt_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);

#endif
