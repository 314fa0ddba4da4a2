// SPDX-License-Identifier: MIT
/* Test program: resolves the CUDA driver exactly as libcudart does
 * (dlopen libcuda.so.1, dlsym cuGetProcAddress_v2, then every entry point
 * through it at the runtime's versions, legacy and per-thread flags) and
 * calls each allocation/copy/memset/launch/advice entry point kvtier hooks.
 * Prints "CALL <api> rc=<r> addr=<hex> size=<n>" per call for the tests to
 * compare with the trace. Exit 0 when every call behaved as CUDA says. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cuda.h>

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static gpa_t gpa;
static int failures;

static void *get(const char *sym, int ver, int ptsz)
{
	void *fn = NULL;
	CUresult r = gpa(sym, &fn, ver, ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, NULL);
	if (r != CUDA_SUCCESS || !fn) {
		fprintf(stderr, "drvapi: cannot resolve %s@%d (%d)\n", sym, ver, r);
		exit(3);
	}
	return fn;
}

#define CALLED(api, r, addr, size) do { \
	printf("CALL %s rc=%d addr=0x%" PRIx64 " size=%" PRIu64 "\n", api, (int)(r), \
	       (uint64_t)(uintptr_t)(addr), (uint64_t)(size)); \
	if ((r) != CUDA_SUCCESS) { failures++; fprintf(stderr, "drvapi: %s failed: %d\n", api, (int)(r)); } \
} while (0)

#define RESOLVE(T, var, sym, ver, ptsz) __typeof__(T) var = (__typeof__(T))get(sym, ver, ptsz)

int main(int argc, char **argv)
{
	int ptsz = argc > 1 && !strcmp(argv[1], "--ptsz");
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "drvapi: no driver: %s\n", dlerror());
		return 77;
	}
	gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
	if (!gpa)
		return 4;
	gpa = (gpa_t)get("cuGetProcAddress", 12000, 0);   /* as cudart does */

	RESOLVE(CUresult (*)(unsigned), init, "cuInit", 2000, 0);
	RESOLVE(CUresult (*)(CUdevice *, int), devget, "cuDeviceGet", 2000, 0);
	RESOLVE(CUresult (*)(CUcontext *, CUdevice), retain, "cuDevicePrimaryCtxRetain", 7000, 0);
	RESOLVE(CUresult (*)(CUcontext), setcur, "cuCtxSetCurrent", 4000, 0);
	CUdevice dev;
	CUcontext ctx;
	if (init(0) || devget(&dev, 0) || retain(&ctx, dev) || setcur(ctx)) {
		fprintf(stderr, "drvapi: driver init failed\n");
		return 5;
	}

	RESOLVE(CUresult (*)(size_t *, size_t *), meminfo, "cuMemGetInfo", 3020, 0);
	size_t fr = 0, tot = 0;
	CUresult r = meminfo(&fr, &tot);
	CALLED("cuMemGetInfo_v2", r, fr, tot);

	RESOLVE(CUresult (*)(CUdeviceptr *, size_t), alloc, "cuMemAlloc", 3020, 0);
	RESOLVE(CUresult (*)(CUdeviceptr), dfree, "cuMemFree", 3020, 0);
	CUdeviceptr d = 0, d2 = 0;
	r = alloc(&d, 1 << 20);
	CALLED("cuMemAlloc_v2", r, d, 1 << 20);
	r = alloc(&d2, 1 << 20);
	CALLED("cuMemAlloc_v2", r, d2, 1 << 20);

	RESOLVE(CUresult (*)(CUdeviceptr, unsigned char, size_t), set8, "cuMemsetD8", 3020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, unsigned short, size_t), set16, "cuMemsetD16", 3020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, unsigned int, size_t), set32, "cuMemsetD32", 3020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream), set8a, "cuMemsetD8Async", 3020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, unsigned short, size_t, CUstream), set16a, "cuMemsetD16Async", 3020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, unsigned int, size_t, CUstream), set32a, "cuMemsetD32Async", 3020, ptsz);
	r = set8(d, 0x5a, 4096);      CALLED("cuMemsetD8_v2", r, d, 4096);
	r = set16(d, 0x5a5a, 2048);   CALLED("cuMemsetD16_v2", r, d, 4096);
	r = set32(d, 0x5a5a5a5a, 1024); CALLED("cuMemsetD32_v2", r, d, 4096);
	r = set8a(d, 1, 100, 0);      CALLED("cuMemsetD8Async", r, d, 100);
	r = set16a(d, 1, 100, 0);     CALLED("cuMemsetD16Async", r, d, 200);
	r = set32a(d, 1, 100, 0);     CALLED("cuMemsetD32Async", r, d, 400);

	static char host[8192];
	RESOLVE(CUresult (*)(CUdeviceptr, const void *, size_t), htod, "cuMemcpyHtoD", 3020, ptsz);
	RESOLVE(CUresult (*)(void *, CUdeviceptr, size_t), dtoh, "cuMemcpyDtoH", 3020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, CUdeviceptr, size_t), dtod, "cuMemcpyDtoD", 3020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, CUdeviceptr, size_t), cpy, "cuMemcpy", 4000, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, const void *, size_t, CUstream), htoda, "cuMemcpyHtoDAsync", 3020, ptsz);
	RESOLVE(CUresult (*)(void *, CUdeviceptr, size_t, CUstream), dtoha, "cuMemcpyDtoHAsync", 3020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream), dtoda, "cuMemcpyDtoDAsync", 3020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream), cpya, "cuMemcpyAsync", 4000, ptsz);
	memset(host, 7, sizeof host);
	r = htod(d, host, 8192);      CALLED("cuMemcpyHtoD_v2", r, d, 8192);
	r = dtoh(host, d, 4096);      CALLED("cuMemcpyDtoH_v2", r, host, 4096);
	r = dtod(d2, d, 4096);        CALLED("cuMemcpyDtoD_v2", r, d2, 4096);
	r = cpy(d2, d, 512);          CALLED("cuMemcpy", r, d2, 512);
	r = htoda(d, host, 256, 0);   CALLED("cuMemcpyHtoDAsync_v2", r, d, 256);
	r = dtoha(host, d, 256, 0);   CALLED("cuMemcpyDtoHAsync_v2", r, host, 256);
	r = dtoda(d2, d, 256, 0);     CALLED("cuMemcpyDtoDAsync_v2", r, d2, 256);
	r = cpya(d2, d, 128, 0);      CALLED("cuMemcpyAsync", r, d2, 128);

	RESOLVE(CUresult (*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned), pitch, "cuMemAllocPitch", 3020, 0);
	CUdeviceptr dp = 0;
	size_t pit = 0;
	r = pitch(&dp, &pit, 1000, 16, 4);
	CALLED("cuMemAllocPitch_v2", r, dp, (uint64_t)pit * 16);

	RESOLVE(CUresult (*)(CUdeviceptr *, size_t, unsigned), mng, "cuMemAllocManaged", 6000, 0);
	CUdeviceptr m = 0;
	r = mng(&m, 4 << 20, CU_MEM_ATTACH_GLOBAL);
	CALLED("cuMemAllocManaged", r, m, 4 << 20);
	RESOLVE(CUresult (*)(CUdeviceptr, size_t, CUmem_advise, CUdevice), adv_old, "cuMemAdvise", 8000, 0);
	RESOLVE(CUresult (*)(CUdeviceptr, size_t, CUmem_advise, CUmemLocation), adv, "cuMemAdvise", 12020, 0);
	RESOLVE(CUresult (*)(CUdeviceptr, size_t, CUdevice, CUstream), pf_old, "cuMemPrefetchAsync", 8000, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream), pf, "cuMemPrefetchAsync", 12020, ptsz);
	CUmemLocation host_numa0 = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 };
	CUmemLocation gpu0 = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	r = adv_old(m, 4 << 20, CU_MEM_ADVISE_SET_ACCESSED_BY, dev);
	CALLED("cuMemAdvise", r, m, 4 << 20);
	r = adv(m, 4 << 20, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host_numa0);
	CALLED("cuMemAdvise_v2", r, m, 4 << 20);
	r = pf_old(m, 2 << 20, dev, 0);
	CALLED("cuMemPrefetchAsync", r, m, 2 << 20);
	r = pf(m, 2 << 20, gpu0, 0, 0);
	CALLED("cuMemPrefetchAsync_v2", r, m, 2 << 20);

	CUfunction (*touch)(void) = (CUfunction (*)(void))dlsym(h, "fakecuda_touch_kernel");
	RESOLVE(CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			     unsigned, CUstream, void **, void **), launch, "cuLaunchKernel", 4000, ptsz);
	if (touch) {
		struct { CUdeviceptr ptr; size_t len; int write; } rg = { m, 4096, 0 };
		void *rgp = &rg;
		unsigned nr = 1;
		void *params[] = { &rgp, &nr };
		r = launch(touch(), 1, 1, 1, 32, 1, 1, 0, 0, params, NULL);
		CALLED("cuLaunchKernel", r, touch(), 32);
	}

	RESOLVE(CUresult (*)(void **, size_t), ahost, "cuMemAllocHost", 3020, 0);
	RESOLVE(CUresult (*)(void **, size_t, unsigned), hostalloc, "cuMemHostAlloc", 2020, 0);
	RESOLVE(CUresult (*)(void *), freehost, "cuMemFreeHost", 2000, 0);
	void *hp1 = NULL, *hp2 = NULL;
	r = ahost(&hp1, 65536);       CALLED("cuMemAllocHost_v2", r, hp1, 65536);
	r = hostalloc(&hp2, 131072, CU_MEMHOSTALLOC_PORTABLE);
	CALLED("cuMemHostAlloc", r, hp2, 131072);
	r = freehost(hp1);            CALLED("cuMemFreeHost", r, hp1, 65536);
	r = freehost(hp2);            CALLED("cuMemFreeHost", r, hp2, 131072);

	RESOLVE(CUresult (*)(void *, size_t, unsigned), reg, "cuMemHostRegister", 6050, 0);
	RESOLVE(CUresult (*)(void *), unreg, "cuMemHostUnregister", 4000, 0);
	void *buf = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r = reg(buf, 1 << 20, 0);     CALLED("cuMemHostRegister_v2", r, buf, 1 << 20);
	r = unreg(buf);               CALLED("cuMemHostUnregister", r, buf, 1 << 20);
	munmap(buf, 1 << 20);

	RESOLVE(CUresult (*)(CUdeviceptr *, size_t, CUstream), aa, "cuMemAllocAsync", 11020, ptsz);
	RESOLVE(CUresult (*)(CUdeviceptr, CUstream), fa, "cuMemFreeAsync", 11020, ptsz);
	RESOLVE(CUresult (*)(CUmemoryPool *, CUdevice), defpool, "cuDeviceGetDefaultMemPool", 11020, 0);
	RESOLVE(CUresult (*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream), ap, "cuMemAllocFromPoolAsync", 11020, ptsz);
	CUdeviceptr a1 = 0, a2 = 0;
	CUmemoryPool pool;
	r = aa(&a1, 3 << 20, 0);      CALLED("cuMemAllocAsync", r, a1, 3 << 20);
	if (defpool(&pool, dev) == CUDA_SUCCESS) {
		r = ap(&a2, 1 << 20, pool, 0);
		CALLED("cuMemAllocFromPoolAsync", r, a2, 1 << 20);
		r = fa(a2, 0);         CALLED("cuMemFreeAsync", r, a2, 1 << 20);
	}
	r = fa(a1, 0);                CALLED("cuMemFreeAsync", r, a1, 3 << 20);

	RESOLVE(CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			     unsigned long long), create, "cuMemCreate", 10020, 0);
	RESOLVE(CUresult (*)(CUmemGenericAllocationHandle), release, "cuMemRelease", 10020, 0);
	RESOLVE(CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long),
		reserve, "cuMemAddressReserve", 10020, 0);
	RESOLVE(CUresult (*)(CUdeviceptr, size_t), afree, "cuMemAddressFree", 10020, 0);
	RESOLVE(CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			     unsigned long long), map, "cuMemMap", 10020, 0);
	RESOLVE(CUresult (*)(CUdeviceptr, size_t), unmap, "cuMemUnmap", 10020, 0);
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUmemGenericAllocationHandle hd = 0;
	CUdeviceptr va = 0;
	r = create(&hd, 2 << 20, &prop, 0);  CALLED("cuMemCreate", r, hd, 2 << 20);
	if (reserve(&va, 2 << 20, 0, 0, 0) == CUDA_SUCCESS) {
		r = map(va, 2 << 20, 0, hd, 0);  CALLED("cuMemMap", r, va, 2 << 20);
		r = unmap(va, 2 << 20);          CALLED("cuMemUnmap", r, va, 2 << 20);
		afree(va, 2 << 20);
	}
	r = release(hd);                     CALLED("cuMemRelease", r, hd, 2 << 20);

	r = dfree(dp);  CALLED("cuMemFree_v2", r, dp, (uint64_t)pit * 16);
	r = dfree(m);   CALLED("cuMemFree_v2", r, m, 4 << 20);
	r = dfree(d2);  CALLED("cuMemFree_v2", r, d2, 1 << 20);
	r = dfree(d);   CALLED("cuMemFree_v2", r, d, 1 << 20);
	printf("DONE failures=%d\n", failures);
	return failures ? 1 : 0;
}
