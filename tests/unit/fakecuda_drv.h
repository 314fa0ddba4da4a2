/* SPDX-License-Identifier: MIT */
/* Shared by the suites of the SIMULATED CUDA driver (test_fakecuda.c,
 * test_fakecuda_env.c): the driver reached exactly as libcudart reaches it
 * (dlopen + dlsym("cuGetProcAddress_v2") + lookups by base name and
 * version), its entry points in D, and small helpers. Test code only. */
#ifndef KVT_TEST_FAKECUDA_DRV_H
#define KVT_TEST_FAKECUDA_DRV_H

#include "unit/kvt_test.h"

#include <dlfcn.h>
#include <stdint.h>

#include "fakecuda/fakecuda.h"

#define MiB (1ull << 20)
#define BLK FAKECUDA_BLOCK_BYTES

static void *drv __attribute__((unused)), *cupti __attribute__((unused));
static const char *self_path __attribute__((unused));
static __typeof__(&cuGetProcAddress_v2) gpa;
static CUresult pre_init_alloc __attribute__((unused)) = CUDA_SUCCESS;

/* ---- resolving like libcudart ---- */

static inline void *get(const char *sym, int ver, int flags)
{
	void *p = NULL;
	return gpa(sym, &p, ver, (cuuint64_t)flags, NULL) == CUDA_SUCCESS ? p : NULL;
}

typedef CUresult (*advise_v1_fn)(CUdeviceptr, size_t, CUmem_advise, CUdevice);
typedef CUresult (*prefetch_v1_fn)(CUdeviceptr, size_t, CUdevice, CUstream);

static struct {
	__typeof__(&cuInit) Init;
	__typeof__(&cuDriverGetVersion) DriverGetVersion;
	__typeof__(&cuDeviceGetCount) DeviceGetCount;
	__typeof__(&cuDeviceGetAttribute) DeviceGetAttribute;
	__typeof__(&cuDevicePrimaryCtxRetain) PrimaryCtxRetain;
	__typeof__(&cuCtxSetCurrent) CtxSetCurrent;
	__typeof__(&cuMemAlloc_v2) MemAlloc;
	__typeof__(&cuMemFree_v2) MemFree;
	__typeof__(&cuMemGetInfo_v2) MemGetInfo;
	__typeof__(&cuMemAllocManaged) MemAllocManaged;
	__typeof__(&cuMemAdvise_v2) MemAdvise;
	advise_v1_fn MemAdviseV1;
	__typeof__(&cuMemPrefetchAsync_v2) Prefetch;
	prefetch_v1_fn PrefetchV1;
	__typeof__(&cuMemRangeGetAttribute) RangeAttr;
	__typeof__(&cuMemRangeGetAttributes) RangeAttrs;
	__typeof__(&cuPointerGetAttribute) PtrAttr;
	__typeof__(&cuMemGetAddressRange_v2) AddrRange;
	__typeof__(&cuIpcGetMemHandle) IpcGet;
	__typeof__(&cuMemAllocAsync) AllocAsync;
	__typeof__(&cuMemFreeAsync) FreeAsync;
	__typeof__(&cuMemsetD8_v2) MemsetD8;
	__typeof__(&cuMemsetD32_v2) MemsetD32;
	__typeof__(&cuMemcpyHtoD_v2) HtoD;
	__typeof__(&cuMemcpyDtoH_v2) DtoH;
	__typeof__(&cuLaunchKernel) Launch;
	__typeof__(&cuMemAddressReserve) AddrReserve;
	__typeof__(&cuMemCreate) MemCreate;
	__typeof__(&cuMemMap) MemMap;
	__typeof__(&cuMemSetAccess) SetAccess;
	__typeof__(&cuMemUnmap) Unmap;
	__typeof__(&cuMemRelease) Release;
	__typeof__(&fakecuda_access) access;
	__typeof__(&fakecuda_get_counters) counters;
	__typeof__(&fakecuda_reset_counters) reset;
	__typeof__(&fakecuda_block_location) where;
	__typeof__(&fakecuda_touch_kernel) touch;
	__typeof__(&fakecuda_proc_entry) proc_entry;
} D;

static inline int load_driver(void)
{
	drv = dlopen(kvt_path("fakecuda/libcuda.so.1"), RTLD_NOW);
	if (!drv)
		return -1;
	gpa = (__typeof__(gpa))dlsym(drv, "cuGetProcAddress_v2");
	void *p;
	gpa("", &p, 0, 0, NULL);   /* libcudart's opening sequence */
	D.Init = get("cuInit", 2000, 0);
	D.MemAlloc = get("cuMemAlloc", 3020, 0);
	CUdeviceptr x;
	pre_init_alloc = D.MemAlloc(&x, 4096);
	if (!D.Init || D.Init(0))
		return -1;
#define L(f, s, v) D.f = get(s, v, 0)
	L(DriverGetVersion, "cuDriverGetVersion", 2020);
	L(DeviceGetCount, "cuDeviceGetCount", 2000);
	L(DeviceGetAttribute, "cuDeviceGetAttribute", 2000);
	L(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000);
	L(CtxSetCurrent, "cuCtxSetCurrent", 4000);
	L(MemFree, "cuMemFree", 3020);
	L(MemGetInfo, "cuMemGetInfo", 3020);
	L(MemAllocManaged, "cuMemAllocManaged", 6000);
	L(MemAdvise, "cuMemAdvise", 12020);
	L(MemAdviseV1, "cuMemAdvise", 8000);
	L(Prefetch, "cuMemPrefetchAsync", 12020);
	L(PrefetchV1, "cuMemPrefetchAsync", 8000);
	L(RangeAttr, "cuMemRangeGetAttribute", 8000);
	L(RangeAttrs, "cuMemRangeGetAttributes", 8000);
	L(PtrAttr, "cuPointerGetAttribute", 4000);
	L(AddrRange, "cuMemGetAddressRange", 3020);
	L(IpcGet, "cuIpcGetMemHandle", 4010);
	L(AllocAsync, "cuMemAllocAsync", 11020);
	L(FreeAsync, "cuMemFreeAsync", 11020);
	L(MemsetD8, "cuMemsetD8", 3020);
	L(MemsetD32, "cuMemsetD32", 3020);
	L(HtoD, "cuMemcpyHtoD", 3020);
	L(DtoH, "cuMemcpyDtoH", 3020);
	L(Launch, "cuLaunchKernel", 4000);
	L(AddrReserve, "cuMemAddressReserve", 10020);
	L(MemCreate, "cuMemCreate", 10020);
	L(MemMap, "cuMemMap", 10020);
	L(SetAccess, "cuMemSetAccess", 10020);
	L(Unmap, "cuMemUnmap", 10020);
	L(Release, "cuMemRelease", 10020);
#undef L
#define S(f, s) D.f = (__typeof__(D.f))dlsym(drv, s)
	S(access, "fakecuda_access");
	S(counters, "fakecuda_get_counters");
	S(reset, "fakecuda_reset_counters");
	S(where, "fakecuda_block_location");
	S(touch, "fakecuda_touch_kernel");
	S(proc_entry, "fakecuda_proc_entry");
#undef S
	CUcontext ctx;
	if (D.PrimaryCtxRetain(&ctx, 0) || D.CtxSetCurrent(ctx))
		return -1;
	return 0;
}

static inline struct fakecuda_counters ctr(void)
{
	struct fakecuda_counters c;
	D.counters(&c);
	return c;
}

static inline CUmemLocationType loc_of(CUdeviceptr p, int *id)
{
	CUmemLocationType t = CU_MEM_LOCATION_TYPE_INVALID;
	int i = -9;
	D.where((void *)p, &t, &i);
	if (id)
		*id = i;
	return t;
}

static const CUmemLocation DEV __attribute__((unused)) = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
static const CUmemLocation HOST __attribute__((unused)) = { CU_MEM_LOCATION_TYPE_HOST, 0 };
static const CUmemLocation NUMA0 __attribute__((unused)) = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 };

/* Free every managed block's HBM so tests start from an empty device. */
static inline CUdeviceptr managed(size_t bytes)
{
	CUdeviceptr p = 0;
	CU_ASSERT_EQUAL_FATAL(D.MemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
	return p;
}

/* Eviction order on a 32-block device, p managed with >= 34 blocks: fault in
 * blocks 0..31, hit block 0, prefetch block 1 (already resident), then fault
 * in blocks 32 and 33. Returns which of blocks 0..2 are still on the device
 * (bit i for block i): 4 when arrival order decides (FIFO, the driver's: 0
 * and 1 go), 3 when hits refresh (LRU: 2 and 3 go), anything else is a bug;
 * ~0u when a call fails or the counters are not 34 faults and 2 evictions. */
static inline unsigned evict_probe(CUdeviceptr p)
{
	D.reset();
	for (int i = 0; i < 32; i++)
		if (D.access((void *)(p + (CUdeviceptr)i * BLK), 64, 0))
			return ~0u;
	if (D.access((void *)p, 64, 0) || D.Prefetch(p + BLK, BLK, DEV, 0, NULL) ||
	    D.access((void *)(p + 32 * BLK), 64, 0) ||
	    D.access((void *)(p + 33 * BLK), 64, 0))
		return ~0u;
	struct fakecuda_counters c = ctr();
	if (c.faults != 34 || c.evictions != 2 || c.bytes_htod != 34 * BLK ||
	    c.bytes_dtoh != 2 * BLK)
		return ~0u;
	unsigned on = 0;
	for (int i = 0; i < 3; i++)
		on |= (unsigned)(loc_of(p + (CUdeviceptr)i * BLK, NULL) ==
				 CU_MEM_LOCATION_TYPE_DEVICE) << i;
	return on;
}

#endif
