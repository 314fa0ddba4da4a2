/* SPDX-License-Identifier: MIT */
/* CUnit suite for the SIMULATED CUDA driver (build/fakecuda/libcuda.so.1) and
 * its CUPTI stand-in. The driver is reached exactly as libcudart reaches it
 * (tests/unit/fakecuda_drv.h). Runs with FAKECUDA_DEVICE_BYTES=64M (32
 * blocks of HBM); the knobs read from the environment are tested in
 * test_fakecuda_env.c. */
#include "unit/fakecuda_drv.h"

#include <cupti_activity.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>

/* ---- resolver ---- */

static void test_resolver_table(void)
{
	size_t rows = 0;
	const char *base, *exp, *pt;
	int ver;
	for (size_t i = 0; D.proc_entry(i, &base, &ver, &exp, &pt) == 0; i++, rows++) {
		const char *nbase = NULL, *nexp, *npt;
		int nver = 13001;
		if (D.proc_entry(i + 1, &nbase, &nver, &nexp, &npt) || strcmp(nbase, base))
			nver = 13001;
		void *want = dlsym(drv, exp), *want_pt = dlsym(drv, pt ? pt : exp);
		CU_ASSERT_PTR_NOT_NULL(want);
		CU_ASSERT_PTR_NOT_NULL(want_pt);
		int vers[] = { ver, (ver + nver - 1) / 2, nver - 1 };
		for (size_t k = 0; k < 3; k++) {
			CU_ASSERT_PTR_EQUAL(get(base, vers[k], 0), want);
			CU_ASSERT_PTR_EQUAL(get(base, vers[k], 1), want);
			CU_ASSERT_PTR_EQUAL(get(base, vers[k], 2), want_pt);
		}
		{
			/* just below the row: the previous row of this base, or none */
			const char *pbase = NULL, *pexp = NULL, *ppt;
			int pver;
			bool prev = i > 0 && !D.proc_entry(i - 1, &pbase, &pver, &pexp, &ppt) &&
				    !strcmp(pbase, base);
			void *p = (void *)1;
			CUdriverProcAddressQueryResult st = 99;
			CU_ASSERT_EQUAL(gpa(base, &p, ver - 1, 0, &st), CUDA_SUCCESS);
			if (prev) {
				CU_ASSERT_PTR_EQUAL(p, dlsym(drv, pexp));
				CU_ASSERT_EQUAL(st, CU_GET_PROC_ADDRESS_SUCCESS);
			} else {
				CU_ASSERT_PTR_NULL(p);
				CU_ASSERT_EQUAL(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
			}
		}
	}
	CU_ASSERT(rows >= 90);
}

static void expect(const char *sym, int ver, int flags, const char *export_name)
{
	void *p = get(sym, ver, flags);
	void *want = dlsym(drv, export_name);
	CU_ASSERT_PTR_NOT_NULL(want);
	if (p != want)
		fprintf(stderr, "resolver: %s@%d/%d != %s\n", sym, ver, flags, export_name);
	CU_ASSERT_PTR_EQUAL(p, want);
}

static void test_resolver_spec(void)
{
	expect("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
	expect("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
	expect("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
	expect("cuMemAlloc", 13000, 2, "cuMemAlloc_v2");
	expect("cuMemHostAlloc", 2020, 0, "cuMemHostAlloc");
	expect("cuMemHostRegister", 4000, 0, "cuMemHostRegister");
	expect("cuMemHostRegister", 6050, 0, "cuMemHostRegister_v2");
	expect("cuMemAdvise", 8000, 0, "cuMemAdvise");
	expect("cuMemAdvise", 12010, 0, "cuMemAdvise");
	expect("cuMemAdvise", 12020, 0, "cuMemAdvise_v2");
	expect("cuMemPrefetchAsync", 8000, 2, "cuMemPrefetchAsync_ptsz");
	expect("cuMemPrefetchAsync", 12020, 0, "cuMemPrefetchAsync_v2");
	expect("cuMemPrefetchAsync", 13000, 2, "cuMemPrefetchAsync_v2_ptsz");
	expect("cuMemAllocAsync", 11020, 2, "cuMemAllocAsync_ptsz");
	expect("cuMemsetD8", 3020, 2, "cuMemsetD8_v2_ptds");
	expect("cuMemcpy", 4000, 2, "cuMemcpy_ptds");
	expect("cuMemcpyHtoDAsync", 3020, 2, "cuMemcpyHtoDAsync_v2_ptsz");
	expect("cuLaunchKernel", 4000, 2, "cuLaunchKernel_ptsz");
	expect("cuStreamSynchronize", 2000, 2, "cuStreamSynchronize_ptsz");
	void *p = (void *)1;
	CUdriverProcAddressQueryResult st = 99;
	CU_ASSERT_EQUAL(gpa("cuMemAlloc", &p, 13010, 0, &st), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(gpa("cuNoSuchFunction", &p, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
	CU_ASSERT_EQUAL(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CU_ASSERT_PTR_NULL(p);
	p = (void *)1;
	CU_ASSERT_EQUAL(gpa("cuMemAlloc", &p, 3010, 0, &st), CUDA_SUCCESS);
	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_EQUAL(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CU_ASSERT_EQUAL(gpa("", &p, 0, 0, NULL), CUDA_ERROR_NOT_FOUND);
	/* the 4-argument ABI answers the same */
	CUresult (*gpa4)(const char *, void **, int, cuuint64_t) = get("cuGetProcAddress", 11030, 0);
	CU_ASSERT_EQUAL(gpa4("cuMemAdvise", &p, 8000, 0), CUDA_SUCCESS);
	CU_ASSERT_PTR_EQUAL(p, dlsym(drv, "cuMemAdvise"));
	CU_ASSERT_EQUAL(gpa4("cuMemAdvise", &p, 99999, 0), CUDA_ERROR_INVALID_VALUE);
}

/* ---- device, init, contexts ---- */

static void *no_ctx_thread(void *arg)
{
	CUdeviceptr p;
	*(CUresult *)arg = D.MemAlloc(&p, 4096);
	return NULL;
}

static void test_device(void)
{
	int v = 0, n = 0;
	CU_ASSERT_EQUAL(pre_init_alloc, CUDA_ERROR_NOT_INITIALIZED);
	CU_ASSERT_EQUAL(D.DriverGetVersion(&v), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(v, 13000);
	CU_ASSERT_EQUAL(D.DeviceGetCount(&n), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(n, 1);
	struct { CUdevice_attribute a; int want; } attrs[] = {
		{ CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1 },
		{ CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1 },
		{ CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0 },
		{ CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0 },
		{ CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
		{ CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1 },
	};
	for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
		v = -7;
		CU_ASSERT_EQUAL(D.DeviceGetAttribute(&v, attrs[i].a, 0), CUDA_SUCCESS);
		CU_ASSERT_EQUAL(v, attrs[i].want);
	}
	CU_ASSERT_EQUAL(D.DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
	CUresult r = CUDA_SUCCESS;
	pthread_t t;
	pthread_create(&t, NULL, no_ctx_thread, &r);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(r, CUDA_ERROR_INVALID_CONTEXT);
}

/* ---- advice and range attributes ---- */

static int32_t rattr(CUmem_range_attribute a, CUdeviceptr p, size_t n)
{
	int32_t v = -99;
	CU_ASSERT_EQUAL(D.RangeAttr(&v, 4, a, p, n), CUDA_SUCCESS);
	return v;
}

static void test_advice_attributes(void)
{
	CUdeviceptr p = managed(4 * BLK);   /* blocks 0..3 */
	CU_ASSERT_EQUAL(p % BLK, 0);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, 4 * BLK), CU_DEVICE_INVALID);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, 4 * BLK),
			CU_MEM_LOCATION_TYPE_INVALID);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, 4 * BLK), CU_DEVICE_INVALID);
	CU_ASSERT_EQUAL(D.MemAdvise(p, 4 * BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, NUMA0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, 4 * BLK),
			CU_MEM_LOCATION_TYPE_HOST_NUMA);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, p, 4 * BLK), 0);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, 4 * BLK), CU_DEVICE_CPU);
	/* |DEV|DEV|NUMA0|NUMA0| : mixed over the whole range, uniform per half */
	CU_ASSERT_EQUAL(D.MemAdvise(p, 2 * BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, 4 * BLK), CU_DEVICE_INVALID);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, 2 * BLK), 0);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p + 2 * BLK, 100),
			CU_MEM_LOCATION_TYPE_HOST_NUMA);
	CU_ASSERT_EQUAL(D.MemAdvise(p, 4 * BLK, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, HOST), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, 4 * BLK),
			CU_MEM_LOCATION_TYPE_INVALID);
	/* accessed-by: DEVICE or HOST only */
	CUmemLocation bad = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 };
	CU_ASSERT_EQUAL(D.MemAdvise(p, BLK, CU_MEM_ADVISE_SET_ACCESSED_BY, bad), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.MemAdvise(p, 4 * BLK, CU_MEM_ADVISE_SET_ACCESSED_BY, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemAdvise(p, BLK, CU_MEM_ADVISE_SET_ACCESSED_BY, HOST), CUDA_SUCCESS);
	int32_t ab[3] = { 7, 7, 7 };
	CU_ASSERT_EQUAL(D.RangeAttr(ab, sizeof ab, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, 4 * BLK), CUDA_SUCCESS);
	CU_ASSERT(ab[0] == 0 && ab[1] == CU_DEVICE_INVALID && ab[2] == CU_DEVICE_INVALID);
	CU_ASSERT_EQUAL(D.RangeAttr(ab, sizeof ab, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, BLK), CUDA_SUCCESS);
	CU_ASSERT(ab[0] == 0 && ab[1] == CU_DEVICE_CPU && ab[2] == CU_DEVICE_INVALID);
	CU_ASSERT_EQUAL(D.RangeAttr(ab, 6, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, BLK), CUDA_ERROR_INVALID_VALUE);
	/* read mostly: all pages, or 0 */
	CU_ASSERT_EQUAL(D.MemAdvise(p, BLK, CU_MEM_ADVISE_SET_READ_MOSTLY, HOST), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, BLK), 1);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 2 * BLK), 0);
	/* the old CUdevice ABI: CU_DEVICE_CPU is the host */
	CU_ASSERT_EQUAL(D.MemAdviseV1(p, BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_DEVICE_CPU), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, BLK), CU_MEM_LOCATION_TYPE_HOST);
	CU_ASSERT_EQUAL(D.MemAdviseV1(p, BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, 3), CUDA_ERROR_INVALID_DEVICE);
	/* last prefetch location: requested, per page */
	CU_ASSERT_EQUAL(D.Prefetch(p + BLK, BLK, DEV, 0, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p + BLK, BLK), 0);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, 2 * BLK), CU_DEVICE_INVALID);
	CU_ASSERT_EQUAL(D.PrefetchV1(p + BLK, BLK, CU_DEVICE_CPU, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(rattr(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, p + BLK, BLK),
			CU_MEM_LOCATION_TYPE_HOST);
	/* several at once */
	int32_t rm = -1, pt = -1;
	void *data[2] = { &rm, &pt };
	size_t sizes[2] = { 4, 4 };
	CUmem_range_attribute as[2] = { CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
					CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE };
	CU_ASSERT_EQUAL(D.RangeAttrs(data, sizes, as, 2, p, BLK), CUDA_SUCCESS);
	CU_ASSERT(rm == 1 && pt == CU_MEM_LOCATION_TYPE_HOST);
	/* errors */
	CUmemLocation nonode = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 63 };
	CU_ASSERT_EQUAL(D.MemAdvise(p, BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, nonode), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.Prefetch(p, BLK, nonode, 0, NULL), CUDA_ERROR_INVALID_VALUE);
	CUdeviceptr d;
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&d, BLK), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemAdvise(d, BLK, CU_MEM_ADVISE_SET_READ_MOSTLY, DEV), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.RangeAttr(&rm, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, BLK), CUDA_ERROR_INVALID_VALUE);
	D.MemFree(d);
	D.MemFree(p);
}

/* Preferred host + accessed-by: remote accesses; a prefetch still moves it. */
static void test_prefetch_against_preferred(void)
{
	CUdeviceptr p = managed(2 * BLK);
	memset((void *)p, 0x5a, 2 * BLK);
	D.MemAdvise(p, 2 * BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, NUMA0);
	D.MemAdvise(p, 2 * BLK, CU_MEM_ADVISE_SET_ACCESSED_BY, DEV);
	D.reset();
	CU_ASSERT_EQUAL(D.access((void *)p, 4096, 0), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.faults, 0);
	CU_ASSERT_EQUAL(c.bytes_remote, 4096);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	CU_ASSERT_EQUAL(D.Prefetch(p, 2 * BLK, DEV, 0, NULL), CUDA_SUCCESS);
	c = ctr();
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(loc_of(p + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(c.bytes_htod, 2 * BLK);
	CU_ASSERT_EQUAL(c.prefetch_blocks, 2);
	CU_ASSERT_EQUAL(c.managed_resident_bytes, 2 * BLK);
	CU_ASSERT_EQUAL(D.access((void *)p, 4096, 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().bytes_hbm, 4096);
	/* a CPU touch pulls the block back to its preferred node */
	CU_ASSERT_EQUAL(((volatile unsigned char *)p)[BLK + 5], 0x5a);
	int id = -1;
	CU_ASSERT_EQUAL(loc_of(p + BLK, &id), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	CU_ASSERT_EQUAL(id, 0);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	c = ctr();
	CU_ASSERT_EQUAL(c.cpu_faults, 1);
	CU_ASSERT_EQUAL(c.bytes_dtoh, BLK);
	D.MemFree(p);
	CU_ASSERT_EQUAL(ctr().managed_resident_bytes, 0);
}

/* 64 MiB of HBM = 32 blocks. The driver evicts in order of arrival: a hit
 * or a prefetch of a resident block does not save it (FAKECUDA_EVICT=lru is
 * tested in test_fakecuda_env). */
static void test_eviction_order(void)
{
	CUdeviceptr p = managed(40 * BLK);
	CU_ASSERT_EQUAL(evict_probe(p), 4);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	CU_ASSERT_EQUAL(loc_of(p + 3 * BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(ctr().managed_resident_bytes, 32 * BLK);
	D.MemFree(p);
}

static void test_cumemalloc_never_evicted(void)
{
	CUdeviceptr d1, d2, d3, m = managed(32 * BLK);
	for (int i = 0; i < 32; i++)
		D.access((void *)(m + i * BLK), 64, 1);
	CU_ASSERT_EQUAL(ctr().managed_resident_bytes, 32 * BLK);
	/* device memory evicts managed blocks to make room ... */
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&d1, 40 * MiB), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().managed_resident_bytes, 12 * BLK);
	D.MemsetD32(d1, 0xabcdef01, 40 * MiB / 4);
	/* ... but is never evicted itself: faults now only churn 12 blocks */
	for (int i = 0; i < 32; i++)
		D.access((void *)(m + i * BLK), 64, 0);
	CU_ASSERT_EQUAL(ctr().managed_resident_bytes, 12 * BLK);
	uint32_t last = 0;     /* device memory: read back with a copy */
	CU_ASSERT_EQUAL(D.DtoH(&last, d1 + 40 * MiB - 4, 4), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(last, 0xabcdef01);
	CU_ASSERT_EQUAL(D.MemAlloc(&d2, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	size_t fr = 0, tot = 0;
	CU_ASSERT_EQUAL(D.MemGetInfo(&fr, &tot), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(tot, 64 * MiB);
	CU_ASSERT_EQUAL(ctr().device_used_bytes, 64 * MiB - fr);
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&d3, 24 * MiB), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().managed_resident_bytes, 0);
	D.MemFree(d1);
	D.MemFree(d3);
	D.MemFree(m);
	CU_ASSERT_EQUAL(ctr().device_used_bytes, 0);
}

/* ---- data integrity under thousands of random migrations ---- */

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
	return rng;
}

static void random_op(CUdeviceptr p, unsigned char *shadow, size_t nb)
{
	size_t b = rnd() % nb, off = rnd() % BLK, len = 1 + rnd() % 8192;
	if (b * BLK + off + len > nb * BLK)
		len = nb * BLK - b * BLK - off;
	CUdeviceptr a = p + b * BLK + off;
	unsigned char v = (unsigned char)rnd();
	switch (rnd() % 7) {
	case 0: D.Prefetch(p + b * BLK, BLK * (1 + rnd() % 3 < nb - b ? 1 + rnd() % 3 : 1), DEV, 0, NULL); break;
	case 1: D.Prefetch(p + b * BLK, BLK, rnd() & 1 ? HOST : NUMA0, 0, NULL); break;
	case 2: D.access((void *)a, len, (int)(rnd() & 1)); break;
	case 3: CU_ASSERT_EQUAL(((volatile unsigned char *)a)[0], shadow[a - p]); break;
	case 4: memset((void *)a, v, len); memset(shadow + (a - p), v, len); break;
	case 5: D.MemsetD8(a, v, len); memset(shadow + (a - p), v, len); break;
	default: {
		unsigned char buf[64];
		size_t n = len < sizeof buf ? len : sizeof buf;
		memset(buf, v ^ 0x33, n);
		D.HtoD(a, buf, n);
		memcpy(shadow + (a - p), buf, n);
	}
	}
}

static void test_data_integrity(void)
{
	const size_t nb = 48;   /* 96 MiB managed over 64 MiB of HBM */
	CUdeviceptr p = managed(nb * BLK);
	unsigned char *shadow = malloc(nb * BLK);
	for (size_t i = 0; i < nb * BLK; i++)
		shadow[i] = (unsigned char)(i * 131 + (i >> 20));
	memcpy((void *)p, shadow, nb * BLK);
	D.MemAdvise(p + 40 * BLK, 8 * BLK, CU_MEM_ADVISE_SET_READ_MOSTLY, DEV);
	D.reset();
	for (int i = 0; i < 4000; i++)
		random_op(p, shadow, nb);
	struct fakecuda_counters c = ctr();
	CU_ASSERT(c.evictions > 50);
	CU_ASSERT(c.cpu_faults > 50);
	CU_ASSERT(c.faults > 100);
	unsigned char *back = malloc(nb * BLK);
	CU_ASSERT_EQUAL(D.DtoH(back, p, nb * BLK), CUDA_SUCCESS);
	CU_ASSERT(memcmp(back, shadow, nb * BLK) == 0);
	CU_ASSERT(memcmp((void *)p, shadow, nb * BLK) == 0);   /* CPU view */
	free(back);
	free(shadow);
	D.MemFree(p);
}

/* A CPU writer and a migrator thread at once: no write may be lost. */
struct race { CUdeviceptr p; atomic_int stop; };

static void *migrator(void *arg)
{
	struct race *r = arg;
	CUcontext ctx;
	__typeof__(&cuDevicePrimaryCtxRetain) retain = get("cuDevicePrimaryCtxRetain", 7000, 0);
	retain(&ctx, 0);
	D.CtxSetCurrent(ctx);
	for (unsigned i = 0; !atomic_load(&r->stop); i++) {
		D.Prefetch(r->p + (i % 4) * BLK, BLK, i & 1 ? HOST : DEV, 0, NULL);
		D.access((void *)(r->p + ((i + 1) % 4) * BLK), 4096, 0);
	}
	return NULL;
}

static void test_concurrent_migration(void)
{
#ifdef __SANITIZE_THREAD__
	/* TSan models mmap(MAP_FIXED) as a write to the range and cannot see
	 * that the CPU's faulting write is ordered by the SIGSEGV handler's
	 * lock: it reports the coherence protocol itself. Covered by the
	 * plain and ASan builds. */
	return;
#endif
	struct race r = { managed(4 * BLK), 0 };
	pthread_t t;
	pthread_create(&t, NULL, migrator, &r);
	uint32_t *w = (uint32_t *)r.p;
	size_t n = 4 * BLK / 4;
	for (uint32_t round = 1; round <= 3; round++)
		for (size_t i = 0; i < n; i += 97)
			w[i] = round * 0x10000 + (uint32_t)(i & 0xffff);
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	size_t bad = 0;
	for (size_t i = 0; i < n; i += 97)
		bad += w[i] != 3 * 0x10000 + (uint32_t)(i & 0xffff);
	CU_ASSERT_EQUAL(bad, 0);
	D.MemFree(r.p);
}

/* ---- counters and the virtual clock ---- */

static void test_counters_clock(void)
{
	CUdeviceptr p = managed(24 * BLK);
	D.reset();
	CU_ASSERT_EQUAL(D.access((void *)p, 4096, 0), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	double want = 25000 + BLK / 55.0 + 4096 / 4800.0;
	CU_ASSERT(fabs((double)c.virtual_ns - want) <= 2);
	CU_ASSERT_EQUAL(c.faults, 1);
	CU_ASSERT_EQUAL(c.fault_groups, 1);
	CU_ASSERT_EQUAL(c.bytes_htod, BLK);
	CU_ASSERT_EQUAL(c.bytes_hbm, 4096);
	/* 20 faulting blocks in one access: ceil(20/16) = 2 groups */
	D.reset();
	CU_ASSERT_EQUAL(D.access((void *)(p + 2 * BLK), 20 * BLK, 1), CUDA_SUCCESS);
	c = ctr();
	CU_ASSERT_EQUAL(c.faults, 20);
	CU_ASSERT_EQUAL(c.fault_groups, 2);
	CU_ASSERT_EQUAL(c.bytes_htod, c.faults * BLK);
	want = 2 * 25000 + 20 * (BLK / 55.0) + 20 * (BLK / 4800.0);
	CU_ASSERT(fabs((double)c.virtual_ns - want) <= 20);
	/* prefetch back: bytes moved = blocks x 2 MiB */
	D.reset();
	CU_ASSERT_EQUAL(D.Prefetch(p, 24 * BLK, HOST, 0, NULL), CUDA_SUCCESS);
	c = ctr();
	CU_ASSERT_EQUAL(c.prefetch_blocks, 21);
	CU_ASSERT_EQUAL(c.bytes_dtoh, c.prefetch_blocks * BLK);
	CU_ASSERT(fabs((double)c.virtual_ns - 21 * (BLK / 55.0)) <= 21);
	/* a launch of the touch kernel */
	D.reset();
	struct fakecuda_range rg[2] = { { p, 4096, 0 }, { p, 8192, 1 } };
	const struct fakecuda_range *rp = rg;
	unsigned nr = 2;
	void *params[2] = { &rp, &nr };
	CU_ASSERT_EQUAL(D.Launch(D.touch(), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
	c = ctr();
	CU_ASSERT_EQUAL(c.launches, 1);
	CU_ASSERT_EQUAL(c.faults, 1);
	CU_ASSERT_EQUAL(c.bytes_hbm, 4096 + 8192);
	want = 5000 + 25000 + BLK / 55.0 + (4096 + 8192) / 4800.0;
	CU_ASSERT(fabs((double)c.virtual_ns - want) <= 3);
	CU_ASSERT_EQUAL(D.Launch((CUfunction)&nr, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
			CUDA_ERROR_INVALID_HANDLE);
	D.MemFree(p);
}

/* ---- pointers, async free, IPC, VMM ---- */

static void test_pointers_ipc_async(void)
{
	CUdeviceptr m = managed(3 * MiB), d, a;
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&d, 5 * MiB), CUDA_SUCCESS);
	int v = -1;
	CU_ASSERT_EQUAL(D.PtrAttr(&v, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 100), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(v, 1);
	CU_ASSERT_EQUAL(D.PtrAttr(&v, CU_POINTER_ATTRIBUTE_IS_MANAGED, d), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(v, 0);
	CU_ASSERT_EQUAL(D.PtrAttr(&v, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(v, CU_MEMORYTYPE_DEVICE);
	CUdeviceptr start = 0;
	size_t size = 0;
	CU_ASSERT_EQUAL(D.PtrAttr(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 4242), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(start, d);
	CU_ASSERT_EQUAL(D.PtrAttr(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, m + 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(size, 3 * MiB);
	int stackvar;
	CU_ASSERT_EQUAL(D.PtrAttr(&v, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)&stackvar),
			CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.AddrRange(&start, &size, m + 2 * MiB), CUDA_SUCCESS);
	CU_ASSERT(start == m && size == 3 * MiB);
	CUipcMemHandle h;
	CU_ASSERT_EQUAL(D.IpcGet(&h, d), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.IpcGet(&h, m), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.FreeAsync(m, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL_FATAL(D.AllocAsync(&a, MiB, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.FreeAsync(a, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemFree(m + 64), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.MemFree(m), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemFree(d), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().device_used_bytes, 0);
}

static void test_vmm(void)
{
	CUdeviceptr va;
	CUmemGenericAllocationHandle hd;
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CU_ASSERT_EQUAL_FATAL(D.AddrReserve(&va, 4 * BLK, 0, 0, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(va % BLK, 0);
	CU_ASSERT_EQUAL_FATAL(D.MemCreate(&hd, 2 * BLK, &prop, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().device_used_bytes, 2 * BLK);
	CU_ASSERT_EQUAL(D.MemMap(va + BLK, 2 * BLK, 0, hd, 0), CUDA_SUCCESS);
	CUmemAccessDesc ad = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CU_ASSERT_EQUAL(D.SetAccess(va + BLK, 2 * BLK, &ad, 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemsetD8(va + BLK, 0x77, 2 * BLK), CUDA_SUCCESS);
	unsigned char last = 0;   /* device memory: read back with a copy */
	CU_ASSERT_EQUAL(D.DtoH(&last, va + 3 * BLK - 1, 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(last, 0x77);
	CU_ASSERT_EQUAL(D.Release(hd), CUDA_SUCCESS);          /* still mapped */
	CU_ASSERT_EQUAL(ctr().device_used_bytes, 2 * BLK);
	CU_ASSERT_EQUAL(D.Unmap(va + BLK, 2 * BLK), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().device_used_bytes, 0);
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
	CU_ASSERT_EQUAL(D.MemCreate(&hd, BLK, &prop, 0), CUDA_ERROR_INVALID_VALUE);
}

/* ---- NUMA binding ---- */

static void test_numa_maps(void)
{
	CUdeviceptr p = managed(4 * BLK);
	CU_ASSERT_EQUAL(D.MemAdvise(p, 4 * BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, NUMA0), CUDA_SUCCESS);
	memset((void *)p, 1, 4 * BLK);
	D.Prefetch(p + BLK, BLK, DEV, 0, NULL);
	D.Prefetch(p + BLK, BLK, NUMA0, 0, NULL);   /* and back */
	char *maps = kvt_slurp("/proc/self/numa_maps", NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(maps);
	int bound = 0;
	for (int i = 0; i < 4; i++) {
		char key[64];
		snprintf(key, sizeof key, "\n%lx ", (unsigned long)(p + (CUdeviceptr)i * BLK));
		char *line = strstr(maps, key);
		if (!line && i > 0)
			continue;   /* merged into the previous mapping */
		CU_ASSERT_PTR_NOT_NULL(line);
		if (line) {
			char *eol = strchr(line + 1, '\n');
			if (eol) *eol = 0;
			bound += strstr(line, " bind:0 ") != NULL;
			CU_ASSERT_PTR_NOT_NULL(strstr(line, " bind:0 "));
			if (eol) *eol = '\n';
		}
	}
	CU_ASSERT(bound >= 1);
	free(maps);
	D.MemFree(p);
}

/* ---- CUPTI ---- */

static uint8_t cupti_buf[1 << 16];
static CUpti_ActivityUnifiedMemoryCounter3 got[512];
static size_t nr_got;

static void CUPTIAPI buf_req(uint8_t **b, size_t *size, size_t *max)
{
	*b = cupti_buf;
	*size = sizeof cupti_buf;
	*max = 0;
}

static void CUPTIAPI buf_done(CUcontext c, uint32_t s, uint8_t *b, size_t size, size_t valid)
{
	(void)c; (void)s; (void)size;
	__typeof__(&cuptiActivityGetNextRecord) next = dlsym(cupti, "cuptiActivityGetNextRecord");
	CUpti_Activity *rec = NULL;
	while (next(b, valid, &rec) == CUPTI_SUCCESS && nr_got < 512)
		memcpy(&got[nr_got++], rec, sizeof got[0]);
}

static const CUpti_ActivityUnifiedMemoryCounter3 *find_rec(int kind, uint64_t addr)
{
	for (size_t i = 0; i < nr_got; i++)
		if ((int)got[i].counterKind == kind && got[i].address == addr)
			return &got[i];
	return NULL;
}

static void test_cupti(void)
{
	cupti = dlopen(kvt_path("fakecuda/libcupti.so.13"), RTLD_NOW);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cupti);
	__typeof__(&cuptiActivityRegisterCallbacks) reg = dlsym(cupti, "cuptiActivityRegisterCallbacks");
	__typeof__(&cuptiActivityConfigureUnifiedMemoryCounter) conf =
		dlsym(cupti, "cuptiActivityConfigureUnifiedMemoryCounter");
	__typeof__(&cuptiActivityEnable) en = dlsym(cupti, "cuptiActivityEnable");
	__typeof__(&cuptiActivityFlushAll) flush = dlsym(cupti, "cuptiActivityFlushAll");
	CUpti_ActivityUnifiedMemoryCounterConfig cfg[3] = {
		{ CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
		  CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD, 0, 1 },
		{ CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
		  CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH, 0, 1 },
		{ CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
		  CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT, 0, 1 },
	};
	CU_ASSERT_EQUAL(reg(buf_req, buf_done), CUPTI_SUCCESS);
	CU_ASSERT_EQUAL(conf(cfg, 3), CUPTI_SUCCESS);
	CU_ASSERT_EQUAL(en(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER), CUPTI_SUCCESS);
	CUdeviceptr p = managed(4 * BLK);
	D.access((void *)(p + 2 * BLK + 12345), 100, 1);
	D.Prefetch(p + 2 * BLK, BLK, HOST, 0, NULL);
	nr_got = 0;
	CU_ASSERT_EQUAL(flush(0), CUPTI_SUCCESS);
	CU_ASSERT_EQUAL(nr_got, 3);
	const CUpti_ActivityUnifiedMemoryCounter3 *f =
		find_rec(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
			 (p + 2 * BLK + 12345) & ~4095ull);
	CU_ASSERT_PTR_NOT_NULL(f);
	if (f)
		CU_ASSERT_EQUAL(f->flags, CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_WRITE);
	const CUpti_ActivityUnifiedMemoryCounter3 *h =
		find_rec(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD, p + 2 * BLK);
	CU_ASSERT_PTR_NOT_NULL(h);
	if (h) {
		CU_ASSERT_EQUAL(h->value, BLK);
		CU_ASSERT_EQUAL(h->kind, CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
		CU_ASSERT(h->end > h->start);
	}
	const CUpti_ActivityUnifiedMemoryCounter3 *d =
		find_rec(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH, p + 2 * BLK);
	CU_ASSERT_PTR_NOT_NULL(d);
	if (d)
		CU_ASSERT_EQUAL(d->flags, CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH);
	D.MemFree(p);
}

/* A device that faults while the flush drains: each delivered buffer (one
 * record each) makes the device fault and migrate again. The flush must
 * deliver what was buffered when it began and return, as CUPTI's does; the
 * stand-in once drained for as long as new records came (minutes, in
 * serve-like under kvtier). Production stops at 200 rounds so that the old
 * behaviour fails here instead of hanging. */
static CUdeviceptr flush_p;
static unsigned flush_rounds, flush_done_calls;

static void CUPTIAPI buf_req_one(uint8_t **b, size_t *size, size_t *max)
{
	*b = cupti_buf;
	*size = sizeof cupti_buf;
	*max = 1;
}

static void CUPTIAPI buf_done_refault(CUcontext c, uint32_t s, uint8_t *b, size_t size,
				      size_t valid)
{
	(void)c; (void)s; (void)b; (void)size; (void)valid;
	flush_done_calls++;
	if (flush_rounds >= 200)
		return;
	flush_rounds++;
	D.Prefetch(flush_p, BLK, HOST, 0, NULL);       /* a DTOH record */
	D.access((void *)flush_p, 64, 0);               /* a fault and an HTOD */
}

static void test_cupti_flush_bounded(void)
{
	CU_ASSERT_PTR_NOT_NULL_FATAL(cupti);
	__typeof__(&cuptiActivityRegisterCallbacks) reg = dlsym(cupti, "cuptiActivityRegisterCallbacks");
	__typeof__(&cuptiActivityFlushAll) flush = dlsym(cupti, "cuptiActivityFlushAll");
	flush_p = managed(2 * BLK);
	CU_ASSERT_EQUAL(reg(buf_req, buf_done), CUPTI_SUCCESS);
	CU_ASSERT_EQUAL(flush(0), CUPTI_SUCCESS);       /* an empty feed to start */
	D.access((void *)flush_p, 64, 0);               /* 2 records buffered: fault, HTOD */
	flush_rounds = flush_done_calls = 0;
	CU_ASSERT_EQUAL(reg(buf_req_one, buf_done_refault), CUPTI_SUCCESS);
	CU_ASSERT_EQUAL(flush(0), CUPTI_SUCCESS);
	CU_ASSERT_EQUAL(flush_done_calls, 2);           /* the 2 buffered, not what came after */
	CU_ASSERT_EQUAL(flush_rounds, 2);
	/* what came meanwhile waits for the next flush, none lost */
	nr_got = 0;
	flush_rounds = 200;
	CU_ASSERT_EQUAL(reg(buf_req, buf_done), CUPTI_SUCCESS);
	CU_ASSERT_EQUAL(flush(0), CUPTI_SUCCESS);
	CU_ASSERT_EQUAL(nr_got, 6);
	D.MemFree(flush_p);
}

static int suite_init(void) { return 0; }

static CU_TestInfo tests_resolver[] = {
	{ "resolver table vs dlsym", test_resolver_table },
	{ "resolver documented cases", test_resolver_spec },
	{ "device, init, context", test_device },
	CU_TEST_INFO_NULL,
};
static CU_TestInfo tests_um[] = {
	{ "advice and range attributes", test_advice_attributes },
	{ "prefetch against preferred location", test_prefetch_against_preferred },
	{ "eviction in order of arrival", test_eviction_order },
	{ "cuMemAlloc never evicted, OOM", test_cumemalloc_never_evicted },
	{ "data integrity under migrations", test_data_integrity },
	{ "CPU writes vs migrator thread", test_concurrent_migration },
	{ "counters and virtual clock", test_counters_clock },
	{ "pointers, IPC, async free", test_pointers_ipc_async },
	{ "VMM", test_vmm },
	{ "numa_maps bind", test_numa_maps },
	CU_TEST_INFO_NULL,
};
static CU_TestInfo tests_cupti[] = {
	{ "CUPTI records", test_cupti },
	{ "CUPTI flush ends while the device faults", test_cupti_flush_bounded },
	CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {
	{ "fakecuda_driver", suite_init, NULL, NULL, NULL, tests_resolver },
	{ "fakecuda_managed", suite_init, NULL, NULL, NULL, tests_um },
	{ "fakecuda_cupti", suite_init, NULL, NULL, NULL, tests_cupti },
	CU_SUITE_INFO_NULL,
};

int main(void)
{
	setenv("FAKECUDA_DEVICE_BYTES", "64M", 1);
	/* the cost arithmetic below is checked at these (pre-calibration) knobs */
	setenv("FAKECUDA_FAULT_NS", "25000", 1);
	setenv("FAKECUDA_FAULT_BATCH", "16", 1);
	setenv("FAKECUDA_ADVISE_NS", "0", 1);
	if (load_driver()) {
		fprintf(stderr, "cannot load %s: %s\n", kvt_path("fakecuda/libcuda.so.1"), dlerror());
		return 1;
	}
	return kvt_test_main(suites);
}
