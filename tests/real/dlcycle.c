// SPDX-License-Identifier: MIT
/* kvtier real-program check: the CUDA driver loaded and unloaded 50 times.
 *   dlcycle LIBCUDA [CYCLES]
 * Each cycle: dlopen(LIBCUDA), dlsym cuGetProcAddress_v2, resolve cuInit,
 * cuDeviceGet, cuDevicePrimaryCtxRetain/Release, cuCtxSetCurrent, cuMemAlloc,
 * cuMemFree through it (as libcudart does), allocate and free 1 MiB, dlclose.
 * Prints one summary line per 10 cycles and a total; no addresses.
 * Exit 0 when every call returned CUDA_SUCCESS. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void *get(gpa_t gpa, const char *sym, int ver)
{
	void *fn = NULL;
	if (gpa(sym, &fn, ver, 0, NULL) != CUDA_SUCCESS || !fn) {
		printf("cannot resolve %s\n", sym);
		exit(3);
	}
	return fn;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int cycles = argc > 2 ? atoi(argv[2]) : 50;
	unsigned ok = 0, allocs = 0, frees = 0, unloaded = 0;
	for (int i = 0; i < cycles; i++) {
		void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			printf("cycle %d: dlopen: %s\n", i, dlerror());
			return 4;
		}
		gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
		if (!gpa) {
			printf("cycle %d: no cuGetProcAddress_v2\n", i);
			return 5;
		}
		CUresult (*init)(unsigned) = get(gpa, "cuInit", 2000);
		CUresult (*devget)(CUdevice *, int) = get(gpa, "cuDeviceGet", 2000);
		CUresult (*retain)(CUcontext *, CUdevice) = get(gpa, "cuDevicePrimaryCtxRetain", 7000);
		CUresult (*release)(CUdevice) = get(gpa, "cuDevicePrimaryCtxRelease", 11000);
		CUresult (*setcur)(CUcontext) = get(gpa, "cuCtxSetCurrent", 4000);
		CUresult (*alloc)(CUdeviceptr *, size_t) = get(gpa, "cuMemAlloc", 3020);
		CUresult (*dfree)(CUdeviceptr) = get(gpa, "cuMemFree", 3020);
		CUdevice dev;
		CUcontext ctx;
		CUdeviceptr d = 0;
		CUresult r = init(0);
		if (!r) r = devget(&dev, 0);
		if (!r) r = retain(&ctx, dev);
		if (!r) r = setcur(ctx);
		if (!r) { r = alloc(&d, 1 << 20); allocs += !r && d; }
		if (!r) { r = dfree(d); frees += !r; }
		if (!r) r = setcur(NULL);
		if (!r) r = release(dev);
		if (r)
			printf("cycle %d: CUDA error %d\n", i, (int)r);
		else
			ok++;
		if (dlclose(h)) {
			printf("cycle %d: dlclose: %s\n", i, dlerror());
			return 6;
		}
		/* Was it really unloaded? (kvtier may keep its own reference.) */
		void *again = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
		if (again)
			dlclose(again);
		else
			unloaded++;
		if ((i + 1) % 10 == 0)
			printf("cycles %d: ok %u allocs %u frees %u\n", i + 1, ok, allocs, frees);
	}
	printf("total: %d cycles, %u ok, %u allocs, %u frees\n", cycles, ok, allocs, frees);
	fprintf(stderr, "dlcycle: the driver was unloaded after %u of %d dlcloses\n", unloaded, cycles);
	return ok == (unsigned)cycles ? 0 : 1;
}
