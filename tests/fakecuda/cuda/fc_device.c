/* SPDX-License-Identifier: MIT */
/* fakecuda device and contexts — cuInit, the SIMULATED devices (FAKECUDA_DEVICES
 * ordinals of an H200-like part, all views of one FAKECUDA_DEVICE_BYTES HBM),
 * their attributes, one primary context per ordinal and the per-thread
 * context stack, and error strings.
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

/* One primary context per possible ordinal; only the first
 * FAKECUDA_DEVICES are reachable (cuDevicePrimaryCtxRetain checks). */
#define FC_PRIMARY(i) { FC_CTX_MAGIC, i, 0, 0, true }
static struct fc_ctx fc_primary[FC_MAX_DEVICES] = {
	FC_PRIMARY(0), FC_PRIMARY(1), FC_PRIMARY(2), FC_PRIMARY(3),
	FC_PRIMARY(4), FC_PRIMARY(5), FC_PRIMARY(6), FC_PRIMARY(7),
};
#undef FC_PRIMARY
_Static_assert(FC_MAX_DEVICES == 8, "fc_primary lists FC_MAX_DEVICES contexts");
_Static_assert(FC_MAX_DEVICES <= 8, "fc_block keeps ordinals in 8-bit masks");

static atomic_bool fc_inited;
static __thread CUcontext fc_ctx_stack[16];
static __thread int fc_ctx_depth;

bool fc_initialized(void) { return atomic_load(&fc_inited); }

CUcontext fc_current_ctx(void)
{
	return fc_ctx_depth ? fc_ctx_stack[fc_ctx_depth - 1] : NULL;
}

int fc_current_dev(void)
{
	CUcontext c = fc_current_ctx();
	return c ? ((struct fc_ctx *)c)->dev : 0;
}

bool fc_ctx_push_body(int dev)
{
	CUcontext c = fc_current_ctx();
	if ((c && ((struct fc_ctx *)c)->dev == dev) || !fc_valid_dev(dev) ||
	    fc_ctx_depth >= (int)FC_ARRAY_SIZE(fc_ctx_stack))
		return false;
	fc_ctx_stack[fc_ctx_depth++] = (CUcontext)&fc_primary[dev];
	return true;
}

void fc_ctx_pop_body(void)
{
	fc_ctx_depth--;
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
	if (!fc_valid_dev(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	FC_GUARD("cuDeviceGetCount", 0);
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = fc_knobs.nr_devices;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	FC_GUARD("cuDeviceGetName", 0);
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fc_valid_dev(dev))
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
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = fc_knobs.device_bytes;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	FC_GUARD("cuDeviceGetUuid_v2", 0);
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	/* ordinal 0 keeps the UUID it always had; the others differ in the
	 * last character, so tools that key devices by UUID see N devices */
	memcpy(uuid->bytes, "fakecuda-dev-000", 16);
	uuid->bytes[15] = (char)('0' + dev);
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
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*pi = 0;
	for (size_t i = 0; i < FC_ARRAY_SIZE(fc_attrs); i++)
		if (fc_attrs[i].attr == attr)
			*pi = fc_attrs[i].value;
	if (attr == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)
		*pi += dev;   /* one bus per ordinal; ordinal 0 keeps its old one */
	return CUDA_SUCCESS;
}

/* ---- primary contexts: one per ordinal ---- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	FC_GUARD("cuDevicePrimaryCtxRetain", 0);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	if (fc_primary[dev].refs++ == 0)   /* the context becomes active: made anew */
		fc_stats.dev[dev].contexts_made++;
	fc_unlock();
	*pctx = (CUcontext)&fc_primary[dev];
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	FC_GUARD("cuDevicePrimaryCtxRelease_v2", 0);
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	struct fc_ctx *c = &fc_primary[dev];
	CUresult r = c->refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
	if (c->refs > 0)
		c->refs--;
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
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	*flags = fc_primary[dev].flags;
	*active = fc_primary[dev].refs > 0;
	fc_unlock();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	FC_GUARD("cuDevicePrimaryCtxSetFlags_v2", 0);
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	fc_primary[dev].flags = flags;
	return CUDA_SUCCESS;
}

/* The simulation keeps no per-context resources (every operation completes at
 * submission and memory belongs to the process), so a reset only returns the
 * flags to their default; the refcount, and the handle, stay valid. */
CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	FC_GUARD("cuDevicePrimaryCtxReset_v2", 0);
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	fc_primary[dev].flags = 0;
	fc_unlock();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
	return cuDevicePrimaryCtxReset_v2(dev);
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

/* Serial device: every operation completed at submission, so this only
 * checks. FAKECUDA_VTIME: the caller waits for all of its ordinal's work. */
CUresult CUDAAPI cuCtxSynchronize(void)
{
	FC_GUARD("cuCtxSynchronize", FC_CTX);
	if (fc_vt_on()) {
		fc_lock();
		fc_host_wait_until(fc_dev_idle_ps(fc_current_dev()));
		fc_unlock();
		fc_vt_sync_point();
	}
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
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	struct fc_ctx *c = calloc(1, sizeof *c);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*c = (struct fc_ctx){ FC_CTX_MAGIC, dev, flags, 1, false };
	if (fc_ctx_depth == (int)FC_ARRAY_SIZE(fc_ctx_stack)) {
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	fc_lock();
	fc_stats.dev[dev].contexts_made++;
	fc_unlock();
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

/* ---- test API ---- */

FC_EXPORT int fakecuda_device_counters(int ordinal, struct fakecuda_device_counters *out)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	fc_config_init();
	if (!fc_valid_dev(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	const struct fc_dev_stats *d = &fc_stats.dev[ordinal];
	*out = (struct fakecuda_device_counters){
		.primary_refs = (uint64_t)fc_primary[ordinal].refs,
		.contexts_made = d->contexts_made,
		.prefetch_blocks_to = d->prefetch_blocks_to,
		.accessed_by_advice = d->accessed_by_advice,
		.faults = d->faults,
		.resident_blocks = fc_resident_blocks_on(ordinal),
	};
	fc_unlock();
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
	E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
	E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
	  "operation not permitted when stream is capturing"),
	E(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
	  "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"),
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
