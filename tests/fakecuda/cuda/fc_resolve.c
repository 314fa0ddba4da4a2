/* SPDX-License-Identifier: MIT */
/* fakecuda resolver — cuGetProcAddress (4-argument ABI) and
 * cuGetProcAddress_v2 of the SIMULATED driver: one table of {base name,
 * first cudaVersion, export, per-thread-stream export}. Every pointer handed
 * out is the exported function itself (the library links -Bsymbolic), i.e.
 * exactly dlsym(handle, "<export>"), so interposers can match by identity. */
#include "fc_internal.h"

#include <string.h>

struct fc_proc {
	const char *base;
	int version;            /* first cudaVersion this ABI serves */
	const char *name;       /* export for flags 0 / LEGACY_STREAM */
	void *fn;
	const char *pt_name;    /* export for PER_THREAD_DEFAULT_STREAM, or NULL */
	void *pt_fn;
};

#define R(b, v, e)      { b, v, #e, (void *)e, NULL, NULL }
#define RP(b, v, e, p)  { b, v, #e, (void *)e, #p, (void *)p }

/* Rows of one base name are in ascending version order. */
static const struct fc_proc fc_procs[] = {
	R("cuGetProcAddress", 11030, cuGetProcAddress),
	R("cuGetProcAddress", 12000, cuGetProcAddress_v2),
	R("cuGetExportTable", 3000, cuGetExportTable),
	R("cuGetErrorString", 6000, cuGetErrorString),
	R("cuGetErrorName", 6000, cuGetErrorName),
	R("cuInit", 2000, cuInit),
	R("cuDriverGetVersion", 2020, cuDriverGetVersion),
	/* devices and contexts */
	R("cuDeviceGet", 2000, cuDeviceGet),
	R("cuDeviceGetCount", 2000, cuDeviceGetCount),
	R("cuDeviceGetName", 2000, cuDeviceGetName),
	R("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
	R("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
	R("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
	R("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
	R("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
	R("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
	R("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
	R("cuDevicePrimaryCtxSetFlags", 11000, cuDevicePrimaryCtxSetFlags_v2),
	R("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
	R("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
	R("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
	R("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
	R("cuCtxGetDevice", 2000, cuCtxGetDevice),
	R("cuCtxSynchronize", 2000, cuCtxSynchronize),
	R("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
	R("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
	R("cuCtxCreate", 12050, cuCtxCreate_v4),
	R("cuCtxDestroy", 4000, cuCtxDestroy_v2),
	R("cuCtxGetStreamPriorityRange", 5050, cuCtxGetStreamPriorityRange),
	/* streams and events */
	R("cuStreamCreate", 2000, cuStreamCreate),
	R("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
	R("cuStreamDestroy", 4000, cuStreamDestroy_v2),
	R("cuStreamGetPriority", 5050, cuStreamGetPriority),
	RP("cuStreamSynchronize", 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
	RP("cuStreamQuery", 2000, cuStreamQuery, cuStreamQuery_ptsz),
	RP("cuStreamIsCapturing", 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
	RP("cuStreamBeginCapture", 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz),
	RP("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
	RP("cuStreamEndCapture", 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
	RP("cuStreamWaitEvent", 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
	R("cuEventCreate", 2000, cuEventCreate),
	RP("cuEventRecord", 2000, cuEventRecord, cuEventRecord_ptsz),
	R("cuEventSynchronize", 2000, cuEventSynchronize),
	R("cuEventQuery", 2000, cuEventQuery),
	R("cuEventDestroy", 4000, cuEventDestroy_v2),
	R("cuEventElapsedTime", 2000, cuEventElapsedTime),
	R("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),
	/* allocations */
	R("cuMemAlloc", 3020, cuMemAlloc_v2),
	R("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
	R("cuMemFree", 3020, cuMemFree_v2),
	R("cuMemGetInfo", 3020, cuMemGetInfo_v2),
	R("cuMemAllocManaged", 6000, cuMemAllocManaged),
	R("cuMemAllocHost", 3020, cuMemAllocHost_v2),
	R("cuMemHostAlloc", 2020, cuMemHostAlloc),
	R("cuMemFreeHost", 2000, cuMemFreeHost),
	R("cuMemHostRegister", 4000, cuMemHostRegister),
	R("cuMemHostRegister", 6050, cuMemHostRegister_v2),
	R("cuMemHostUnregister", 4000, cuMemHostUnregister),
	R("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
	R("cuMemHostGetFlags", 2030, cuMemHostGetFlags),
	R("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
	RP("cuMemAllocAsync", 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
	RP("cuMemFreeAsync", 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
	RP("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
	R("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
	R("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
	R("cuMemPoolCreate", 11020, cuMemPoolCreate),
	R("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
	R("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
	/* virtual memory management */
	R("cuMemAddressReserve", 10020, cuMemAddressReserve),
	R("cuMemAddressFree", 10020, cuMemAddressFree),
	R("cuMemCreate", 10020, cuMemCreate),
	R("cuMemRelease", 10020, cuMemRelease),
	R("cuMemMap", 10020, cuMemMap),
	R("cuMemUnmap", 10020, cuMemUnmap),
	R("cuMemSetAccess", 10020, cuMemSetAccess),
	R("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
	R("cuMemGetAllocationPropertiesFromHandle", 10020, cuMemGetAllocationPropertiesFromHandle),
	R("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
	/* copies and memsets */
	RP("cuMemcpy", 4000, cuMemcpy, cuMemcpy_ptds),
	RP("cuMemcpyAsync", 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
	RP("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
	RP("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
	RP("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
	RP("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
	RP("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
	RP("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
	RP("cuMemsetD8", 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
	RP("cuMemsetD16", 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
	RP("cuMemsetD32", 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
	RP("cuMemsetD8Async", 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz),
	RP("cuMemsetD16Async", 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz),
	RP("cuMemsetD32Async", 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz),
	/* kernels, unified memory, pointers, IPC */
	RP("cuLaunchKernel", 4000, cuLaunchKernel, cuLaunchKernel_ptsz),
	RP("cuLaunchKernelEx", 11060, cuLaunchKernelEx, cuLaunchKernelEx_ptsz),
	R("cuFuncGetParamInfo", 12040, cuFuncGetParamInfo),
	R("cuFuncGetName", 12030, cuFuncGetName),
	R("cuMemAdvise", 8000, cuMemAdvise),
	R("cuMemAdvise", 12020, cuMemAdvise_v2),
	RP("cuMemPrefetchAsync", 8000, cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz),
	RP("cuMemPrefetchAsync", 12020, cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz),
	RP("cuMemPrefetchBatchAsync", 13000, cuMemPrefetchBatchAsync, cuMemPrefetchBatchAsync_ptsz),
	RP("cuMemDiscardBatchAsync", 13000, cuMemDiscardBatchAsync, cuMemDiscardBatchAsync_ptsz),
	RP("cuMemDiscardAndPrefetchBatchAsync", 13000, cuMemDiscardAndPrefetchBatchAsync,
	   cuMemDiscardAndPrefetchBatchAsync_ptsz),
	R("cuMemRangeGetAttribute", 8000, cuMemRangeGetAttribute),
	R("cuMemRangeGetAttributes", 8000, cuMemRangeGetAttributes),
	R("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
	R("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
	R("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
	R("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
	/* graphs (made by stream capture; kernel params and execs updatable).
	 * cuda.h 12+ maps cuGraphInstantiate to cuGraphInstantiateWithFlags;
	 * before, two 5-argument ABIs. */
	R("cuGraphCreate", 10000, cuGraphCreate),
	R("cuGraphDestroy", 10000, cuGraphDestroy),
	R("cuGraphGetNodes", 10000, cuGraphGetNodes),
	R("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
	R("cuGraphKernelNodeGetParams", 10000, cuGraphKernelNodeGetParams),
	R("cuGraphKernelNodeGetParams", 12000, cuGraphKernelNodeGetParams_v2),
	R("cuGraphKernelNodeSetParams", 10000, cuGraphKernelNodeSetParams),
	R("cuGraphKernelNodeSetParams", 12000, cuGraphKernelNodeSetParams_v2),
	R("cuGraphExecKernelNodeSetParams", 10010, cuGraphExecKernelNodeSetParams),
	R("cuGraphExecKernelNodeSetParams", 12000, cuGraphExecKernelNodeSetParams_v2),
	R("cuGraphExecUpdate", 10020, cuGraphExecUpdate),
	R("cuGraphExecUpdate", 12000, cuGraphExecUpdate_v2),
	R("cuGraphInstantiate", 10000, cuGraphInstantiate),
	R("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
	R("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
	R("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
	RP("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams,
	   cuGraphInstantiateWithParams_ptsz),
	R("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
	RP("cuGraphLaunch", 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
	RP("cuGraphUpload", 11010, cuGraphUpload, cuGraphUpload_ptsz),
};

static CUresult fc_resolve(const char *symbol, void **pfn, int version, cuuint64_t flags,
			   CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn || version < 0 || version > FC_DRIVER_VERSION ||
	    flags > (CU_GET_PROC_ADDRESS_LEGACY_STREAM |
		     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	const struct fc_proc *best = NULL;
	bool known = false;
	for (size_t i = 0; i < FC_ARRAY_SIZE(fc_procs); i++) {
		if (strcmp(fc_procs[i].base, symbol))
			continue;
		known = true;
		if (fc_procs[i].version <= version)
			best = &fc_procs[i];
	}
	if (status)
		*status = !known ? CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
			: !best ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
			: CU_GET_PROC_ADDRESS_SUCCESS;
	if (!known)
		return CUDA_ERROR_NOT_FOUND;
	if (best) {
		bool pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->pt_fn;
		*pfn = pt ? best->pt_fn : best->fn;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				     cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	FC_GUARD("cuGetProcAddress_v2", FC_NOINIT);
	return fc_resolve(symbol, pfn, cudaVersion, flags, status);
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
				  cuuint64_t flags)
{
	FC_GUARD("cuGetProcAddress", FC_NOINIT);
	return fc_resolve(symbol, pfn, cudaVersion, flags, NULL);
}

/* cudart's private tables are not simulated. */
CUresult CUDAAPI cuGetExportTable(const void **table, const CUuuid *id)
{
	FC_GUARD("cuGetExportTable", FC_NOINIT);
	if (!table || !id)
		return CUDA_ERROR_INVALID_VALUE;
	*table = NULL;
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* Test API: row i of the table (0 or -1 past the end). */
FC_EXPORT int fakecuda_proc_entry(size_t i, const char **base, int *min_version,
				  const char **export_name, const char **pt_export_name)
{
	if (i >= FC_ARRAY_SIZE(fc_procs))
		return -1;
	const struct fc_proc *p = &fc_procs[i];
	if (base) *base = p->base;
	if (min_version) *min_version = p->version;
	if (export_name) *export_name = p->name;
	if (pt_export_name) *pt_export_name = p->pt_name;
	return 0;
}
