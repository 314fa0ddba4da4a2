/* SPDX-License-Identifier: MIT */
/* kvtier test double: the device/stream/launch half of the stand-in runtime,
 * and cudaGetDriverEntryPoint*, which hands out driver pointers from the same
 * resolver the runtime itself uses (PyTorch fetches cuMemCreate this way). */
#include <stddef.h>

#include "rt_internal.h"

/* ---- devices ---------------------------------------------------------------- */

RT_API cudaError_t cudaGetDeviceCount(int *count)
{
	RT_ENTER();
	RT_NEED(cuDeviceGetCount);
	if (!count)
		return rt_ret(cudaErrorInvalidValue);
	int n = 0;
	CUresult res = rt_drv.cuDeviceGetCount(&n);
	if (res == CUDA_SUCCESS)
		*count = n;
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaSetDevice(int device)
{
	RT_ENTER();
	RT_NEED(cuDeviceGetCount);
	return rt_select_device(device);
}

RT_API cudaError_t cudaGetDevice(int *device)
{
	RT_ENTER();
	if (!device)
		return rt_ret(cudaErrorInvalidValue);
	*device = rt_current_device();
	return cudaSuccess;
}

RT_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	RT_ENTER();
	RT_NEED(cuDeviceGet);
	RT_NEED(cuDeviceGetAttribute);
	if (!value)
		return rt_ret(cudaErrorInvalidValue);
	CUdevice dev;
	CUresult res = rt_drv.cuDeviceGet(&dev, device);
	if (res != CUDA_SUCCESS)
		return rt_ret(cudaErrorInvalidDevice);
	int v = 0;
	/* cudaDeviceAttr values equal CUdevice_attribute values. */
	res = rt_drv.cuDeviceGetAttribute(&v, (CUdevice_attribute)attr, dev);
	if (res == CUDA_SUCCESS)
		*value = v;
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaDeviceSynchronize(void)
{
	RT_ENTER();
	RT_NEED(cuCtxSynchronize);
	return rt_ret_cu(rt_drv.cuCtxSynchronize());
}

/* ---- streams ---------------------------------------------------------------- */

RT_API cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	RT_ENTER();
	RT_NEED(cuStreamCreate);
	if (!pStream)
		return rt_ret(cudaErrorInvalidValue);
	CUstream s = NULL;
	CUresult res = rt_drv.cuStreamCreate(&s, CU_STREAM_DEFAULT);
	if (res == CUDA_SUCCESS)
		*pStream = (cudaStream_t)s;
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
						int priority)
{
	RT_ENTER();
	RT_NEED(cuStreamCreateWithPriority);
	if (!pStream)
		return rt_ret(cudaErrorInvalidValue);
	CUstream s = NULL;
	CUresult res = rt_drv.cuStreamCreateWithPriority(&s, flags, priority);
	if (res == CUDA_SUCCESS)
		*pStream = (cudaStream_t)s;
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	RT_ENTER();
	RT_NEED(cuStreamDestroy);
	return rt_ret_cu(rt_drv.cuStreamDestroy((CUstream)stream));
}

RT_API cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	RT_ENTER();
	RT_NEED(cuStreamSynchronize);
	return rt_ret_cu(rt_drv.cuStreamSynchronize((CUstream)stream));
}

RT_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	RT_ENTER();
	RT_NEED(cuStreamSynchronize_ptsz);
	return rt_ret_cu(rt_drv.cuStreamSynchronize_ptsz((CUstream)stream));
}

/* ---- kernels -----------------------------------------------------------------
 * The stand-in has no fat binaries, so func must already be a driver handle
 * (a CUfunction, or a cudaKernel_t from cudaGetKernel): it is passed to
 * cuLaunchKernel unchanged. */

static cudaError_t rt_launch(PFN_cuLaunchKernel_v4000 fn, const void *func, dim3 grid,
			     dim3 block, void **args, size_t shmem, cudaStream_t stream)
{
	if (!fn)
		return rt_ret(cudaErrorNotSupported);
	if (!func)
		return rt_ret(cudaErrorInvalidDeviceFunction);
	return rt_ret_cu(fn((CUfunction)func, grid.x, grid.y, grid.z, block.x, block.y,
			    block.z, (unsigned int)shmem, (CUstream)stream, args, NULL));
}

RT_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				    size_t sharedMem, cudaStream_t stream)
{
	RT_ENTER();
	return rt_launch(rt_drv.cuLaunchKernel, func, gridDim, blockDim, args, sharedMem, stream);
}

RT_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
					 void **args, size_t sharedMem, cudaStream_t stream)
{
	RT_ENTER();
	return rt_launch(rt_drv.cuLaunchKernel_ptsz, func, gridDim, blockDim, args, sharedMem,
			 stream);
}

/* ---- driver entry points -------------------------------------------------------
 * Same resolver as the runtime's own lookups; the caller's status pointer is
 * filled from a local (the enums share their values). */

static cudaError_t rt_entry_point(const char *symbol, void **funcPtr, unsigned int version,
				  unsigned long long flags,
				  enum cudaDriverEntryPointQueryResult *driverStatus)
{
	if (!symbol || !funcPtr || flags > cudaEnablePerThreadDefaultStream)
		return rt_ret(cudaErrorInvalidValue);
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	void *pfn = NULL;
	CUresult res = rt_drv.resolve(symbol, &pfn, (int)version, flags, &st);
	if (driverStatus)
		*driverStatus = (enum cudaDriverEntryPointQueryResult)st;
	if (res == CUDA_ERROR_NOT_FOUND)          /* cudaErrorSymbolNotFound */
		*funcPtr = NULL;
	else if (res == CUDA_SUCCESS)             /* pfn may be NULL: no ABI match */
		*funcPtr = pfn;
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
					   unsigned long long flags,
					   enum cudaDriverEntryPointQueryResult *driverStatus)
{
	RT_ENTER();
	return rt_entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

RT_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
						unsigned long long flags,
						enum cudaDriverEntryPointQueryResult *driverStatus)
{
	RT_ENTER();
	if (flags == cudaEnableDefault)
		flags = cudaEnablePerThreadDefaultStream;
	return rt_entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

RT_API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
						    unsigned int cudaVersion,
						    unsigned long long flags,
						    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	RT_ENTER();
	return rt_entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus);
}

RT_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
							 unsigned int cudaVersion,
							 unsigned long long flags,
							 enum cudaDriverEntryPointQueryResult *driverStatus)
{
	RT_ENTER();
	if (flags == cudaEnableDefault)
		flags = cudaEnablePerThreadDefaultStream;
	return rt_entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus);
}
