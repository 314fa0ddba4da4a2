/* SPDX-License-Identifier: MIT */
/* rt-probe: calls every export of the stand-in runtime once and prints one
 * line per check, "CHECK <name> rc=<cudaError_t> val=<value>", for
 * tests/unit/test_workloads.c to assert on.  `rt-probe nodriver` checks the
 * no-driver contract (35, outputs unwritten).  Built twice: against the
 * stand-in and against the toolkit's real libcudart.so.13. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fakecuda/fakecuda.h"

cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemset_ptds(void *, int, size_t);
cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemsetAsync_ptsz(void *, int, size_t, cudaStream_t);
cudaError_t cudaMallocAsync_ptsz(void **, size_t, cudaStream_t);
cudaError_t cudaFreeAsync_ptsz(void *, cudaStream_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
cudaError_t cudaMemPrefetchAsync_ptsz(const void *, size_t, struct cudaMemLocation, unsigned, cudaStream_t);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *, void **, unsigned long long,
					 enum cudaDriverEntryPointQueryResult *);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *, void **, unsigned int,
						  unsigned long long,
						  enum cudaDriverEntryPointQueryResult *);

static void check(const char *name, cudaError_t rc, long long val)
{
	printf("CHECK %s rc=%d val=%lld\n", name, (int)rc, val);
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static void *drv_sym(const char *name)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *p = h ? dlsym(h, name) : NULL;
	if (h)
		dlclose(h);
	return p;
}

static int probe_nodriver(void)
{
	int n = -7, v = -7;
	void *p = (void *)0x5a5a;
	size_t f = 77, t = 77;
	cudaStream_t s = (cudaStream_t)0x77;
	cudaError_t rc;
	rc = cudaGetDeviceCount(&n);       check("nd.cudaGetDeviceCount", rc, n);
	rc = cudaMalloc(&p, 4096);         check("nd.cudaMalloc", rc, (long long)(uintptr_t)p);
	rc = cudaMallocManaged(&p, 4096, cudaMemAttachGlobal);
	check("nd.cudaMallocManaged", rc, (long long)(uintptr_t)p);
	rc = cudaMallocHost(&p, 4096);     check("nd.cudaMallocHost", rc, (long long)(uintptr_t)p);
	rc = cudaHostAlloc(&p, 4096, 0);   check("nd.cudaHostAlloc", rc, (long long)(uintptr_t)p);
	rc = cudaMemGetInfo(&f, &t);       check("nd.cudaMemGetInfo", rc, (long long)(f + t));
	rc = cudaStreamCreate(&s);         check("nd.cudaStreamCreate", rc, (long long)(uintptr_t)s);
	rc = cudaGetDevice(&v);            check("nd.cudaGetDevice", rc, v);
	struct cudaMemLocation loc = { cudaMemLocationTypeDevice, 0 };
	rc = cudaMemPrefetchAsync((void *)0x1000, 4096, loc, 0, 0);
	check("nd.cudaMemPrefetchAsync", rc, 0);
	enum cudaDriverEntryPointQueryResult st = (enum cudaDriverEntryPointQueryResult)7;
	rc = cudaGetDriverEntryPointByVersion("cuMemAlloc", &p, 12000, 0, &st);
	check("nd.cudaGetDriverEntryPointByVersion", rc, (long long)(uintptr_t)p + st);
	rc = cudaGetLastError();           check("nd.cudaGetLastError", rc, cudaGetLastError());
	v = -7;
	rc = cudaDriverGetVersion(&v);     check("nd.cudaDriverGetVersion", rc, v);
	rc = cudaRuntimeGetVersion(&v);    check("nd.cudaRuntimeGetVersion", rc, v);
	return 0;
}

static void probe_memory(cudaStream_t st)
{
	unsigned char host[4096], back[4096];
	size_t f0, f1, t;
	void *d = NULL;
	cudaError_t rc;
	for (size_t i = 0; i < sizeof host; i++)
		host[i] = (unsigned char)(i * 7 + 3);
	cudaMemGetInfo(&f0, &t);
	rc = cudaMalloc(&d, 1 << 20);      check("cudaMalloc", rc, d != NULL);
	cudaMemGetInfo(&f1, &t);
	check("cudaMalloc.charged", cudaSuccess, f0 - f1 >= (1 << 20));
	rc = cudaMemset(d, 0xab, 1 << 20);
	cudaMemcpy(back, (char *)d + 4096, sizeof back, cudaMemcpyDeviceToHost);
	check("cudaMemset", rc, all_bytes(back, sizeof back, 0xab));
	rc = cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice);
	memset(back, 0, sizeof back);
	cudaError_t rc2 = cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost);
	check("cudaMemcpy", rc ? rc : rc2, !memcmp(host, back, sizeof host));
	rc = cudaMemcpy(back, d, 16, (enum cudaMemcpyKind)9);
	check("cudaMemcpy.badkind", rc, 0);
	rc = cudaMemsetAsync(d, 0x11, 4096, st);
	rc2 = cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, st);
	cudaStreamSynchronize(st);
	check("cudaMemsetAsync+cudaMemcpyAsync", rc ? rc : rc2, all_bytes(back, 4096, 0x11));
	rc = cudaMemsetAsync_ptsz(d, 0x22, 4096, 0);
	rc2 = cudaMemcpyAsync_ptsz(back, d, sizeof back, cudaMemcpyDeviceToHost, 0);
	cudaStreamSynchronize_ptsz(0);
	check("ptsz.memset+memcpy", rc ? rc : rc2, all_bytes(back, 4096, 0x22));
	rc = cudaMemset_ptds(d, 0x33, 4096);
	rc2 = cudaMemcpy_ptds(back, d, sizeof back, cudaMemcpyDeviceToHost);
	check("ptds.memset+memcpy", rc ? rc : rc2, all_bytes(back, 4096, 0x33));

	struct cudaPointerAttributes a;
	rc = cudaPointerGetAttributes(&a, d);
	check("cudaPointerGetAttributes.device", rc, a.type);
	rc = cudaPointerGetAttributes(&a, host);
	check("cudaPointerGetAttributes.unregistered", rc, a.type);
	rc = cudaFree(d);                  check("cudaFree", rc, 0);
	rc = cudaMalloc(&d, 0);            check("cudaMalloc.zero", rc, d == NULL);
	d = (void *)0x77;
	rc = cudaMalloc(&d, (size_t)1 << 50);
	check("cudaMalloc.oom", rc, d == (void *)0x77);
	cudaError_t peek = cudaPeekAtLastError();        /* does not reset */
	check("cudaGetLastError.oom", peek, cudaGetLastError() == cudaErrorMemoryAllocation);
	check("cudaGetLastError.reset", cudaGetLastError(), 0);

	size_t pitch = 0;
	rc = cudaMallocPitch(&d, &pitch, 1000, 4);
	check("cudaMallocPitch", rc, pitch >= 1000 && d != NULL);
	cudaFree(d);

	void *h = NULL;
	rc = cudaMallocHost(&h, 8192);
	if (!rc)
		memset(h, 0x5c, 8192);
	rc2 = cudaPointerGetAttributes(&a, h);
	check("cudaMallocHost", rc ? rc : rc2, a.type);
	rc = cudaFreeHost(h);              check("cudaFreeHost", rc, 0);
	rc = cudaHostAlloc(&h, 8192, cudaHostAllocPortable | cudaHostAllocMapped);
	rc2 = cudaMemcpy(h, host, sizeof host, cudaMemcpyDefault);
	check("cudaHostAlloc", rc ? rc : rc2, h && !memcmp(h, host, sizeof host));
	cudaFreeHost(h);
	void *reg = aligned_alloc(65536, 65536);
	rc = cudaHostRegister(reg, 65536, cudaHostRegisterPortable);
	rc2 = cudaPointerGetAttributes(&a, reg);
	check("cudaHostRegister", rc ? rc : rc2, a.type);
	rc = cudaHostUnregister(reg);      check("cudaHostUnregister", rc, 0);
	rc = cudaHostUnregister(reg);      check("cudaHostUnregister.twice", rc, 0);
	free(reg);
}

static void probe_managed(cudaStream_t st)
{
	char *m = NULL;
	cudaError_t rc = cudaMallocManaged((void **)&m, 4 << 20, cudaMemAttachGlobal);
	check("cudaMallocManaged", rc, m != NULL);
	if (rc)
		return;
	memset(m, 0x42, 4 << 20);                          /* host access */
	struct cudaPointerAttributes a;
	rc = cudaPointerGetAttributes(&a, m);
	check("cudaPointerGetAttributes.managed", rc, a.type);
	struct cudaMemLocation host = { cudaMemLocationTypeHost, 0 };
	struct cudaMemLocation dev = { cudaMemLocationTypeDevice, 0 };
	rc = cudaMemAdvise(m, 4 << 20, cudaMemAdviseSetPreferredLocation, host);
	int v = -1;
	cudaError_t rc2 = cudaMemRangeGetAttribute(&v, sizeof v,
		cudaMemRangeAttributePreferredLocationType, m, 4 << 20);
	check("cudaMemAdvise+cudaMemRangeGetAttribute", rc ? rc : rc2, v);
	rc = cudaMemPrefetchAsync(m, 2 << 20, dev, 0, st);
	cudaStreamSynchronize(st);
	v = -1;
	rc2 = cudaMemRangeGetAttribute(&v, sizeof v, cudaMemRangeAttributeLastPrefetchLocationType,
				       m, 2 << 20);
	check("cudaMemPrefetchAsync", rc ? rc : rc2, v);
	int (*loc)(const void *, CUmemLocationType *, int *) =
		(int (*)(const void *, CUmemLocationType *, int *))drv_sym("fakecuda_block_location");
	CUmemLocationType lt = CU_MEM_LOCATION_TYPE_INVALID;
	int id = -1;
	if (loc)
		loc(m, &lt, &id);
	check("prefetch.block_on_device", loc ? cudaSuccess : cudaErrorNotSupported, lt);
	rc = cudaMemPrefetchAsync_ptsz(m, 2 << 20, host, 0, 0);
	cudaStreamSynchronize_ptsz(0);
	if (loc)
		loc(m, &lt, &id);
	check("ptsz.cudaMemPrefetchAsync", rc, lt);
	check("managed.data", cudaSuccess, all_bytes((unsigned char *)m, 4 << 20, 0x42));
	rc = cudaFree(m);                  check("cudaFree.managed", rc, 0);
}

static void probe_async(cudaStream_t st)
{
	void *p = NULL;
	cudaError_t rc = cudaMallocAsync(&p, 1 << 20, st);
	cudaError_t rc2 = cudaFreeAsync(p, st);
	check("cudaMallocAsync+cudaFreeAsync", rc ? rc : rc2, p != NULL);
	p = NULL;
	rc = cudaMallocAsync_ptsz(&p, 1 << 20, 0);
	rc2 = cudaFreeAsync_ptsz(p, 0);
	check("ptsz.cudaMallocAsync+cudaFreeAsync", rc ? rc : rc2, p != NULL);
	cudaStreamSynchronize(st);
	CUresult (*get_pool)(CUmemoryPool *, CUdevice) = NULL;
	enum cudaDriverEntryPointQueryResult q;
	cudaGetDriverEntryPointByVersion("cuDeviceGetDefaultMemPool", (void **)&get_pool, 11020, 0, &q);
	CUmemoryPool pool = NULL;
	if (get_pool)
		get_pool(&pool, 0);
	p = NULL;
	rc = cudaMallocFromPoolAsync(&p, 1 << 20, (cudaMemPool_t)pool, st);
	if (!rc)
		cudaFreeAsync(p, st);
	cudaStreamSynchronize(st);
	check("cudaMallocFromPoolAsync", rc, p != NULL);
}

static void probe_entry_points(void)
{
	enum cudaDriverEntryPointQueryResult q = (enum cudaDriverEntryPointQueryResult)7;
	void *fn = NULL;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"   /* deprecated in 13.0 */
	cudaError_t rc = cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &q);
#pragma GCC diagnostic pop
	check("cudaGetDriverEntryPoint", rc, fn != NULL && q == cudaDriverEntryPointSuccess);
	fn = NULL;
	rc = cudaGetDriverEntryPoint_ptsz("cuMemcpyAsync", &fn, cudaEnableDefault, &q);
	check("ptsz.cudaGetDriverEntryPoint", rc, fn != NULL && q == cudaDriverEntryPointSuccess);
	fn = NULL;
	rc = cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, 0, &q);
	check("cudaGetDriverEntryPointByVersion", rc, fn != NULL && q == cudaDriverEntryPointSuccess);
	fn = NULL;
	rc = cudaGetDriverEntryPointByVersion_ptsz("cuLaunchKernel", &fn, 12000, 0, &q);
	check("ptsz.cudaGetDriverEntryPointByVersion", rc, fn != NULL);
	fn = (void *)0x1;
	rc = cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 12000, 0, &q);
	check("cudaGetDriverEntryPointByVersion.missing", rc, fn == NULL && q == cudaDriverEntryPointSymbolNotFound);
	cudaGetLastError();
	/* the pointer must be the driver's own: cuMemAlloc_v2 by name */
	fn = NULL;
	cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 3020, 0, &q);
	check("entry_point.is_driver_symbol", cudaSuccess, fn && fn == drv_sym("cuMemAlloc_v2"));
}

static void probe_launch(cudaStream_t st)
{
	CUfunction (*touch)(void) = (CUfunction (*)(void))drv_sym("fakecuda_touch_kernel");
	int (*counters)(struct fakecuda_counters *) =
		(int (*)(struct fakecuda_counters *))drv_sym("fakecuda_get_counters");
	if (!touch || !counters) {
		check("cudaLaunchKernel", cudaErrorNotSupported, 0);
		return;
	}
	char *m = NULL;
	cudaMallocManaged((void **)&m, 2 << 20, cudaMemAttachGlobal);
	struct fakecuda_range r = { (CUdeviceptr)(uintptr_t)m, 2 << 20, 0 };
	const struct fakecuda_range *rp = &r;
	unsigned nr = 1;
	void *args[] = { &rp, &nr };
	struct fakecuda_counters c0, c1;
	counters(&c0);
	dim3 one = { 1, 1, 1 };
	cudaError_t rc = cudaLaunchKernel((const void *)touch(), one, one, args, 0, st);
	cudaStreamSynchronize(st);
	counters(&c1);
	check("cudaLaunchKernel", rc, (long long)(c1.launches - c0.launches));
	cudaFree(m);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);      /* lines survive a sanitizer exit */
	if (argc > 1 && !strcmp(argv[1], "nodriver"))
		return probe_nodriver();
	Dl_info info;
	if (dladdr((void *)cudaMalloc, &info) && info.dli_fname)
		printf("RUNTIME %s\n", info.dli_fname);
	int v = 0, n = 0;
	cudaError_t rc = cudaRuntimeGetVersion(&v);  check("cudaRuntimeGetVersion", rc, v);
	rc = cudaDriverGetVersion(&v);     check("cudaDriverGetVersion", rc, v);
	rc = cudaGetDeviceCount(&n);       check("cudaGetDeviceCount", rc, n);
	rc = cudaSetDevice(0);             check("cudaSetDevice", rc, 0);
	rc = cudaSetDevice(99);            check("cudaSetDevice.bad", rc, 0);
	rc = cudaPeekAtLastError();        check("cudaPeekAtLastError", rc, cudaPeekAtLastError());
	cudaGetLastError();
	v = -1;
	rc = cudaGetDevice(&v);            check("cudaGetDevice", rc, v);
	v = -1;
	rc = cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, 0);
	check("cudaDeviceGetAttribute", rc, v);
	size_t f = 0, t = 0;
	rc = cudaMemGetInfo(&f, &t);       check("cudaMemGetInfo", rc, (long long)t);
	cudaStream_t st = NULL, sp = NULL;
	rc = cudaStreamCreate(&st);        check("cudaStreamCreate", rc, st != NULL);
	rc = cudaStreamCreateWithPriority(&sp, 1 /* cudaStreamNonBlocking */, -1);
	check("cudaStreamCreateWithPriority", rc, sp != NULL);
	probe_memory(st);
	probe_managed(st);
	probe_async(st);
	probe_entry_points();
	probe_launch(st);
	rc = cudaStreamSynchronize(sp);    check("cudaStreamSynchronize", rc, 0);
	rc = cudaStreamDestroy(sp);        check("cudaStreamDestroy", rc, 0);
	cudaStreamDestroy(st);
	rc = cudaDeviceSynchronize();      check("cudaDeviceSynchronize", rc, 0);
	check("cudaGetErrorString", cudaSuccess,
	      !strcmp(cudaGetErrorString(cudaErrorInsufficientDriver),
		      "CUDA driver version is insufficient for CUDA runtime version"));
	check("cudaGetErrorName", cudaSuccess,
	      !strcmp(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation"));
	printf("DONE\n");
	return 0;
}
