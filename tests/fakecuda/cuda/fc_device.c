/* SPDX-License-Identifier: MIT */
/* fakecuda device and contexts — cuInit, the one SIMULATED device (an
 * H200-like part with FAKECUDA_DEVICE_BYTES of HBM), its attributes, the
 * primary context and the per-thread context stack, and error strings.
 * Nothing here touches memory; see fc_mem.c / fc_managed.c. */
#include "fc_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FC_CTX_MAGIC 0x66637478u   /* "fctx" */

struct fc_ctx {
	uint32_t magic;
	CUdevice dev;
	unsigned flags;
	int refs;
	bool primary;
};

static struct fc_ctx fc_primary = { FC_CTX_MAGIC, 0, 0, 0, true };
static atomic_bool fc_inited;
static __thread CUcontext fc_ctx_stack[16];
static __thread int fc_ctx_depth;

bool fc_initialized(void) { return atomic_load(&fc_inited); }

CUcontext fc_current_ctx(void)
{
	return fc_ctx_depth ? fc_ctx_stack[fc_ctx_depth - 1] : NULL;
}

static bool fc_valid_ctx(CUcontext c)
{
	return c && ((struct fc_ctx *)c)->magic == FC_CTX_MAGIC;
}

/* ---- init and version ---- */

CUresult CUDAAPI cuInit(unsigned int flags)
{
	FC_GUARD("cuInit", FC_NOINIT);
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_managed_install_handler();
	atomic_store(&fc_inited, true);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *version)
{
	FC_GUARD("cuDriverGetVersion", FC_NOINIT);
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = FC_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

/* ---- devices ---- */

CUresult CUDAAPI cuDeviceGet(CUdevice *dev, int ordinal)
{
	FC_GUARD("cuDeviceGet", 0);
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	FC_GUARD("cuDeviceGetCount", 0);
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = FC_NR_DEVICES;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	FC_GUARD("cuDeviceGetName", 0);
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	strncpy(name, "fakecuda simulated GPU", (size_t)len - 1);
	name[len - 1] = 0;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	FC_GUARD("cuDeviceTotalMem_v2", 0);
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = fc_knobs.device_bytes;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	FC_GUARD("cuDeviceGetUuid_v2", 0);
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	memcpy(uuid->bytes, "fakecuda-dev-000", 16);
	return CUDA_SUCCESS;
}

struct fc_attr { CUdevice_attribute attr; int value; };

/* An H200-like device; anything not listed reads 0. */
static const struct fc_attr fc_attrs[] = {
	{ CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
	{ CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024 },
	{ CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024 },
	{ CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64 },
	{ CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647 },
	{ CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535 },
	{ CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535 },
	{ CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152 },
	{ CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
	{ CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132 },
	{ CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000 },
	{ CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2619000 },
	{ CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 6144 },
	{ CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800 },
	{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 },
	{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
	{ CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
	{ CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1 },
	{ CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1 },
	{ CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 2 },
	{ CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1 },
	{ CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1 },
	{ CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0 },
	{ CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0 },
	{ CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 0 },
	{ CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1 },
	{ CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
	{ CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1 },
	{ CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1 },
	{ CU_DEVICE_ATTRIBUTE_NUMA_CONFIG, CU_DEVICE_NUMA_CONFIG_NONE },
	{ CU_DEVICE_ATTRIBUTE_NUMA_ID, -1 },
	{ CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0 },
	{ CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
	{ CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 1 },
	{ CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0x1b },
	{ CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536 },
	{ CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048 },
	{ CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448 },
};

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attr, CUdevice dev)
{
	FC_GUARD("cuDeviceGetAttribute", 0);
	if (!pi || (int)attr <= 0 || attr >= CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	*pi = 0;
	for (size_t i = 0; i < FC_ARRAY_SIZE(fc_attrs); i++)
		if (fc_attrs[i].attr == attr)
			*pi = fc_attrs[i].value;
	return CUDA_SUCCESS;
}

/* ---- primary context ---- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	FC_GUARD("cuDevicePrimaryCtxRetain", 0);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	fc_primary.refs++;
	fc_unlock();
	*pctx = (CUcontext)&fc_primary;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	FC_GUARD("cuDevicePrimaryCtxRelease_v2", 0);
	if (dev < 0 || dev >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	CUresult r = fc_primary.refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
	if (fc_primary.refs > 0)
		fc_primary.refs--;
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	FC_GUARD("cuDevicePrimaryCtxGetState", 0);
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	*flags = fc_primary.flags;
	*active = fc_primary.refs > 0;
	fc_unlock();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	FC_GUARD("cuDevicePrimaryCtxSetFlags_v2", 0);
	if (dev < 0 || dev >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	fc_primary.flags = flags;
	return CUDA_SUCCESS;
}

/* ---- the calling thread's context stack ---- */

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	FC_GUARD("cuCtxGetCurrent", 0);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = fc_current_ctx();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	FC_GUARD("cuCtxSetCurrent", 0);
	if (ctx && !fc_valid_ctx(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!fc_ctx_depth) {
		if (ctx)
			fc_ctx_stack[fc_ctx_depth++] = ctx;
	} else if (ctx) {
		fc_ctx_stack[fc_ctx_depth - 1] = ctx;
	} else {
		fc_ctx_depth--;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
	FC_GUARD("cuCtxPushCurrent_v2", 0);
	if (!fc_valid_ctx(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (fc_ctx_depth == (int)FC_ARRAY_SIZE(fc_ctx_stack))
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_ctx_stack[fc_ctx_depth++] = ctx;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
	FC_GUARD("cuCtxPopCurrent_v2", 0);
	if (!fc_ctx_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUcontext c = fc_ctx_stack[--fc_ctx_depth];
	if (pctx)
		*pctx = c;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *dev)
{
	FC_GUARD("cuCtxGetDevice", FC_CTX);
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = ((struct fc_ctx *)fc_current_ctx())->dev;
	return CUDA_SUCCESS;
}

/* Every operation completes at submission (see docs), so this only checks. */
CUresult CUDAAPI cuCtxSynchronize(void)
{
	FC_GUARD("cuCtxSynchronize", FC_CTX);
	fc_pace_wait();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params,
				unsigned int flags, CUdevice dev)
{
	FC_GUARD("cuCtxCreate_v4", 0);
	(void)params;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= FC_NR_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	struct fc_ctx *c = calloc(1, sizeof *c);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*c = (struct fc_ctx){ FC_CTX_MAGIC, dev, flags, 1, false };
	if (fc_ctx_depth == (int)FC_ARRAY_SIZE(fc_ctx_stack)) {
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	fc_ctx_stack[fc_ctx_depth++] = (CUcontext)c;
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
	FC_GUARD("cuCtxDestroy_v2", 0);
	struct fc_ctx *c = (struct fc_ctx *)ctx;
	if (!fc_valid_ctx(ctx) || c->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (fc_ctx_depth && fc_ctx_stack[fc_ctx_depth - 1] == ctx)
		fc_ctx_depth--;
	c->magic = 0;
	free(c);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
	FC_GUARD("cuCtxGetStreamPriorityRange", 0);
	if (least)
		*least = 0;
	if (greatest)
		*greatest = -5;
	return CUDA_SUCCESS;
}

/* ---- error strings ---- */

struct fc_errstr { CUresult code; const char *name, *text; };

#define E(c, t) { c, #c, t }
static const struct fc_errstr fc_errs[] = {
	E(CUDA_SUCCESS, "no error"),
	E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
	E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
	E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
	E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
	E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
	E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
	E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
	E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
	E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
	E(CUDA_ERROR_NOT_READY, "device not ready"),
	E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
	E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
	  "part or all of the requested memory range is already mapped"),
	E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
	  "pointer does not correspond to a registered memory region"),
	E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
	E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
	  "operation not permitted when stream is capturing"),
	E(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef E

static const struct fc_errstr *fc_err_find(CUresult e)
{
	for (size_t i = 0; i < FC_ARRAY_SIZE(fc_errs); i++)
		if (fc_errs[i].code == e)
			return &fc_errs[i];
	return NULL;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pstr)
{
	const struct fc_errstr *e = fc_err_find(error);
	if (!pstr)
		return CUDA_ERROR_INVALID_VALUE;
	*pstr = e ? e->text : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pstr)
{
	const struct fc_errstr *e = fc_err_find(error);
	if (!pstr)
		return CUDA_ERROR_INVALID_VALUE;
	*pstr = e ? e->name : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
