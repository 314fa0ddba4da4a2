/* SPDX-License-Identifier: MIT */
/* kvtier test double: how the stand-in libcudart.so.13 finds the driver.
 * Exactly the real runtime's path: dlopen("libcuda.so.1", RTLD_NOW), one
 * dlsym(h, "cuGetProcAddress_v2"), then ""@0, cuInit@2000, cuGetProcAddress
 * @11030 and @12000 through it, and every other entry through the @12000
 * pointer with symbolStatus NULL.  Also owns the per-thread state (last
 * error, current device, bound context).  Never call a cu* symbol by name. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "rt_internal.h"

struct rt_driver rt_drv;

static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static cudaError_t rt_init_err;              /* sticky: no driver, no device */
static pthread_mutex_t rt_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext rt_primary[64];             /* retained primary contexts */

static __thread cudaError_t rt_last_error;
static __thread int rt_device;               /* cudaSetDevice */
static __thread int rt_bound = -1;           /* device whose context is current */

/* ---- driver loading ------------------------------------------------------ */

static void *rt_lookup(const char *sym, int version, cuuint64_t flags)
{
	void *pfn = NULL;
	if (rt_drv.resolve(sym, &pfn, version, flags, NULL) != CUDA_SUCCESS)
		return NULL;
	return pfn;
}

static cudaError_t rt_init_cu_error(CUresult res)
{
	switch (res) {
	case CUDA_ERROR_NO_DEVICE:        return cudaErrorNoDevice;
	case CUDA_ERROR_STUB_LIBRARY:     return cudaErrorStubLibrary;
	case CUDA_ERROR_NOT_INITIALIZED:  return cudaErrorInitializationError;
	default:                          return cudaErrorInsufficientDriver;
	}
}

static void rt_init_once(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		rt_init_err = cudaErrorInsufficientDriver;
		return;
	}
	PFN_cuGetProcAddress_v12000 gpa =
		(PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
	if (!gpa) {
		rt_init_err = cudaErrorInsufficientDriver;
		return;
	}
	void *p = NULL;
	PFN_cuInit_v2000 init = NULL;
	gpa("", &p, 0, 0, NULL);                      /* probe, as cudart does */
	if (gpa("cuInit", (void **)&init, 2000, 0, NULL) != CUDA_SUCCESS || !init) {
		rt_init_err = cudaErrorInsufficientDriver;
		return;
	}
	gpa("cuGetProcAddress", (void **)&rt_drv.resolve_11030, 11030, 0, NULL);
	if (gpa("cuGetProcAddress", (void **)&rt_drv.resolve, 12000, 0, NULL) != CUDA_SUCCESS ||
	    !rt_drv.resolve) {
		rt_init_err = cudaErrorInsufficientDriver;
		return;
	}
	CUresult res = init(0);
	if (res != CUDA_SUCCESS) {
		rt_init_err = rt_init_cu_error(res);
		return;
	}
#define RT_ENTRY_LOOKUP(field, sym, ver, flags, type) \
	rt_drv.field = (type)rt_lookup(sym, ver, flags);
	RT_DRIVER_ENTRIES(RT_ENTRY_LOOKUP)
#undef RT_ENTRY_LOOKUP
	if (!rt_drv.cuDriverGetVersion ||
	    rt_drv.cuDriverGetVersion(&rt_drv.version) != CUDA_SUCCESS ||
	    rt_drv.version < CUDART_VERSION) {
		rt_init_err = cudaErrorInsufficientDriver;
		return;
	}
}

/* ---- per-thread state ---------------------------------------------------- */

cudaError_t rt_ret(cudaError_t err)
{
	if (err != cudaSuccess)
		rt_last_error = err;
	return err;
}

cudaError_t rt_ret_cu(CUresult res)
{
	/* Driver and runtime codes share their numbers wherever both exist. */
	cudaError_t err = (cudaError_t)res;
	if (res == CUDA_ERROR_CONTEXT_ALREADY_CURRENT)
		err = cudaErrorInvalidValue;
	else if (res == CUDA_ERROR_NOT_FOUND)
		err = cudaErrorSymbolNotFound;
	else if (res != CUDA_SUCCESS && !rt_error_name(err))
		err = cudaErrorUnknown;
	return rt_ret(err);
}

/* Make the primary context of the thread's device current (if the driver
 * has contexts at all: a driver without cuDevicePrimaryCtxRetain is fine). */
static cudaError_t rt_bind(int device)
{
	if (!rt_drv.cuDevicePrimaryCtxRetain || !rt_drv.cuCtxSetCurrent) {
		rt_bound = device;
		return cudaSuccess;
	}
	if (device < 0 || device >= (int)(sizeof rt_primary / sizeof rt_primary[0]))
		return cudaErrorInvalidDevice;
	CUresult res = CUDA_SUCCESS;
	pthread_mutex_lock(&rt_ctx_lock);
	if (!rt_primary[device]) {
		CUdevice dev;
		res = rt_drv.cuDeviceGet(&dev, device);
		if (res == CUDA_SUCCESS)
			res = rt_drv.cuDevicePrimaryCtxRetain(&rt_primary[device], dev);
	}
	CUcontext ctx = rt_primary[device];
	pthread_mutex_unlock(&rt_ctx_lock);
	if (res == CUDA_SUCCESS)
		res = rt_drv.cuCtxSetCurrent(ctx);
	if (res != CUDA_SUCCESS)
		return (cudaError_t)rt_ret_cu(res);
	rt_bound = device;
	return cudaSuccess;
}

cudaError_t rt_enter(void)
{
	pthread_once(&rt_once, rt_init_once);
	if (rt_init_err != cudaSuccess)
		return rt_ret(rt_init_err);
	if (rt_bound != rt_device)
		return rt_ret(rt_bind(rt_device));
	return cudaSuccess;
}

int rt_current_device(void)
{
	return rt_device;
}

cudaError_t rt_select_device(int device)
{
	int count = 0;
	CUresult res = rt_drv.cuDeviceGetCount(&count);
	if (res != CUDA_SUCCESS)
		return rt_ret_cu(res);
	if (device < 0 || device >= count)
		return rt_ret(cudaErrorInvalidDevice);
	rt_device = device;
	return rt_ret(rt_bind(device));
}

/* ---- error state exports ------------------------------------------------- */

RT_API cudaError_t cudaGetLastError(void)
{
	cudaError_t err = rt_last_error;
	rt_last_error = cudaSuccess;
	return err;
}

RT_API cudaError_t cudaPeekAtLastError(void)
{
	return rt_last_error;
}

RT_API cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return rt_ret(cudaErrorInvalidValue);
	pthread_once(&rt_once, rt_init_once);
	/* No driver: success with 0, as the real runtime answers. */
	*driverVersion = rt_drv.cuDriverGetVersion ? rt_drv.version : 0;
	return cudaSuccess;
}

RT_API cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return rt_ret(cudaErrorInvalidValue);
	*runtimeVersion = CUDART_VERSION;
	return cudaSuccess;
}
