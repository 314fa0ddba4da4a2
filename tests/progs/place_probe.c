// SPDX-License-Identifier: MIT
/* Test program for placement: resolves the driver as libcudart does, makes
 * one allocation of each kind, uses it (data written and read back), asks
 * the driver where its home is, reads its NUMA policy from numa_maps, and
 * frees it (twice for device memory: the second must fail as the driver
 * says). One "<name> key=value..." line per allocation. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cuda.h>

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static gpa_t gpa;

static void *get(const char *sym, int ver)
{
	void *fn = NULL;
	if (gpa(sym, &fn, ver, 0, NULL) != CUDA_SUCCESS || !fn) {
		fprintf(stderr, "place_probe: cannot resolve %s\n", sym);
		exit(3);
	}
	return fn;
}

/* The NUMA policy numa_maps shows for the mapping at addr ("default" if none). */
static void numa_policy(const void *addr, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/numa_maps", "r");
	char line[1024];
	snprintf(out, len, "none");
	while (f && fgets(line, sizeof line, f)) {
		unsigned long a = strtoul(line, NULL, 16);
		if (a == (unsigned long)(uintptr_t)addr) {
			char *sp = strchr(line, ' ');
			sscanf(sp ? sp + 1 : line, "%63s", out);
			break;
		}
	}
	if (f)
		fclose(f);
}

#define R(T, var, sym, ver) __typeof__(T) var = (__typeof__(T))get(sym, ver)

int main(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return 77;
	gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
	gpa = (gpa_t)get("cuGetProcAddress", 12000);
	R(CUresult (*)(unsigned), init, "cuInit", 2000);
	R(CUresult (*)(CUcontext *, CUdevice), retain, "cuDevicePrimaryCtxRetain", 7000);
	R(CUresult (*)(CUcontext), setcur, "cuCtxSetCurrent", 4000);
	CUcontext ctx;
	if (init(0) || retain(&ctx, 0) || setcur(ctx))
		return 5;
	R(CUresult (*)(CUdeviceptr *, size_t), alloc, "cuMemAlloc", 3020);
	R(CUresult (*)(CUdeviceptr), dfree, "cuMemFree", 3020);
	R(CUresult (*)(CUdeviceptr *, size_t, CUstream), aalloc, "cuMemAllocAsync", 11020);
	R(CUresult (*)(CUdeviceptr, CUstream), afree, "cuMemFreeAsync", 11020);
	R(CUresult (*)(CUdeviceptr, const void *, size_t), htod, "cuMemcpyHtoD", 3020);
	R(CUresult (*)(void *, CUdeviceptr, size_t), dtoh, "cuMemcpyDtoH", 3020);
	R(CUresult (*)(void *, CUpointer_attribute, CUdeviceptr), ptrattr, "cuPointerGetAttribute", 4000);
	R(CUresult (*)(void *, size_t, CUmem_range_attribute, CUdeviceptr, size_t), rattr,
	  "cuMemRangeGetAttribute", 8000);
	R(CUresult (*)(void **, size_t, unsigned), hostalloc, "cuMemHostAlloc", 2020);
	R(CUresult (*)(void *), freehost, "cuMemFreeHost", 2000);

	static char pat[4096], back[4096];
	for (size_t i = 0; i < sizeof pat; i++)
		pat[i] = (char)(i * 13 + 1);
	size_t sizes[] = { 16u << 20, 1u << 20 };
	for (int i = 0; i < 2; i++) {
		CUdeviceptr d = 0;
		CUresult r = alloc(&d, sizes[i]);
		int ok = r == CUDA_SUCCESS && !htod(d + sizes[i] - sizeof pat, pat, sizeof pat) &&
			 !dtoh(back, d + sizes[i] - sizeof pat, sizeof pat) &&
			 !memcmp(pat, back, sizeof pat);
		unsigned managed = 0;
		int type = -1, id = -1;
		ptrattr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d);
		if (managed) {
			rattr(&type, sizeof type, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, d, sizes[i]);
			rattr(&id, sizeof id, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, d, sizes[i]);
		}
		CUresult f1 = dfree(d), f2 = dfree(d);
		printf("device%d size=%zu rc=%d data=%d managed=%u home_type=%d home_id=%d free=%d refree=%d\n",
		       i, sizes[i], r, ok, managed, type, id, f1, f2);
	}
	CUdeviceptr a = 0;
	CUresult r = aalloc(&a, 8u << 20, 0);
	unsigned managed = 0;
	ptrattr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a);
	printf("async rc=%d managed=%u freeasync=%d\n", r, managed, afree(a, 0));

	void *hp = NULL;
	r = hostalloc(&hp, 8u << 20, CU_MEMHOSTALLOC_PORTABLE);
	char pol[64];
	numa_policy(hp, pol, sizeof pol);
	memset(hp, 7, 8u << 20);
	printf("host rc=%d numa=%s freehost=%d\n", r, pol, freehost(hp));

	void *m = mmap(NULL, 32u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(m, 1, 32u << 20);
	numa_policy(m, pol, sizeof pol);
	printf("mmap numa=%s\n", pol);
	munmap(m, 32u << 20);
	return 0;
}
