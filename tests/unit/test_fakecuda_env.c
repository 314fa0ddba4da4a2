/* SPDX-License-Identifier: MIT */
/* CUnit suite for the SIMULATED CUDA driver's environment knobs, each read
 * once per process: this binary re-runs itself as a child (--child MODE)
 * with the variables set (FAKECUDA_FAIL, FAKECUDA_CUPTI_BUSY, FAKECUDA_PACE,
 * FAKECUDA_RECLAIM, FAKECUDA_FAULT_MAPS, FAKECUDA_EVICT, FAKECUDA_UM_PAGE). Runs with FAKECUDA_DEVICE_BYTES=64M. */
#include "unit/fakecuda_drv.h"

#include <cupti_activity.h>
#include <math.h>
#include <time.h>

/* ---- child modes: environment read once per process ---- */

static int child_fail(void)
{
	CUdeviceptr p;
	int m1 = D.MemAllocManaged(&p, BLK, CU_MEM_ATTACH_GLOBAL);
	int m2 = D.MemAllocManaged(&p, BLK, CU_MEM_ATTACH_GLOBAL);
	int fails = 0, oom = 0;
	for (int i = 0; i < 200; i++) {
		CUdeviceptr x;
		CUresult r = D.MemAlloc(&x, 4096);
		fails += r != CUDA_SUCCESS;
		oom += r == CUDA_ERROR_OUT_OF_MEMORY;
		if (r == CUDA_SUCCESS)
			D.MemFree(x);
	}
	printf("managed=%d,%d fails=%d oom=%d\n", m1, m2, fails, oom);
	return 0;
}

static int child_advise(void)
{
	CUdeviceptr p = 0;
	D.MemAllocManaged(&p, BLK, CU_MEM_ATTACH_GLOBAL);
	for (int i = 0; i < 6; i++)
		printf("%d,", D.MemAdvise(p, BLK, CU_MEM_ADVISE_SET_READ_MOSTLY, DEV));
	printf("\n");
	return 0;
}

static int child_busy(void)
{
	cupti = dlopen(kvt_path("fakecuda/libcupti.so.13"), RTLD_NOW);
	__typeof__(&cuptiActivityEnable) en = dlsym(cupti, "cuptiActivityEnable");
	printf("enable=%d\n", en(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* FAKECUDA_PACE: 20 launches of 1 ms virtual each (FAKECUDA_LAUNCH_NS set by
 * the parent), then a context synchronise; prints both clocks. */
static int child_pace(void)
{
	__typeof__(&cuCtxSynchronize) sync = get("cuCtxSynchronize", 2000, 0);
	unsigned nr = 0;
	const struct fakecuda_range *rp = NULL;
	void *params[2] = { &rp, &nr };
	D.reset();
	double t0 = now_ms();
	for (int i = 0; i < 20; i++)
		if (D.Launch(D.touch(), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL))
			return 1;
	if (!sync || sync())
		return 1;
	double real = now_ms() - t0;
	printf("virtual_ms=%.3f real_ms=%.3f\n", (double)ctr().virtual_ns / 1e6, real);
	return 0;
}

/* FAKECUDA_RECLAIM=0: blocks migrated both ways keep their data. */
static int child_reclaim(void)
{
	const size_t nb = 6;
	CUdeviceptr p = 0;
	if (D.MemAllocManaged(&p, nb * BLK, CU_MEM_ATTACH_GLOBAL))
		return 1;
	uint32_t *w = (uint32_t *)p;
	size_t n = nb * BLK / 4;
	for (size_t i = 0; i < n; i++)
		w[i] = (uint32_t)(i * 2654435761u);
	for (int round = 0; round < 20; round++) {
		CUmemLocation to = round & 1 ? HOST : DEV;
		if (D.Prefetch(p + (size_t)(round % 3) * BLK, 4 * BLK, to, 0, NULL))
			return 1;
		if (round % 4 == 3)                      /* a CPU write while some are on the device */
			w[(size_t)round * 1000] = (uint32_t)(round * 1000 * 2654435761u);
	}
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += w[i] != (uint32_t)(i * 2654435761u);
	struct fakecuda_counters c = ctr();
	printf("bad=%zu moved=%llu\n", bad, (unsigned long long)(c.bytes_htod + c.bytes_dtoh));
	return 0;
}

/* A block preferred on HOST_NUMA 0, written by the CPU, read twice by the
 * GPU: prints where it ends up and what the reads cost. */
static int child_fault_maps(void)
{
	CUdeviceptr p = 0;
	if (D.MemAllocManaged(&p, BLK, CU_MEM_ATTACH_GLOBAL) ||
	    D.MemAdvise(p, BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, NUMA0))
		return 1;
	memset((void *)p, 7, BLK);
	D.reset();
	if (D.access((void *)p, BLK, 0) || D.access((void *)p, BLK, 0))
		return 1;
	int id = -1;
	struct fakecuda_counters c = ctr();
	printf("loc=%d faults=%llu htod=%llu remote=%llu\n", (int)loc_of(p, &id),
	       (unsigned long long)c.faults, (unsigned long long)c.bytes_htod,
	       (unsigned long long)c.bytes_remote);
	return 0;
}

static int child_evict(void)
{
	CUdeviceptr p = 0;
	if (D.MemAllocManaged(&p, 40 * BLK, CU_MEM_ATTACH_GLOBAL))
		return 1;
	printf("on=%u\n", evict_probe(p));
	return 0;
}

/* FAKECUDA_UM_PAGE: 4 regions of 2 MiB written by the CPU; a prefetch of
 * 64 KiB + 1 byte at page 3; a GPU read in region 1, then one at page 10
 * of region 0; a device allocation that needs one region's room; then the
 * CPU reads everything back. Prints what moved after each. */
static int child_um_page(void)
{
	const size_t K64 = 64u << 10;
	CUdeviceptr p = 0;
	if (D.MemAllocManaged(&p, 4 * BLK, CU_MEM_ATTACH_GLOBAL))
		return 1;
	uint32_t *w = (uint32_t *)p;
	size_t n = 4 * BLK / 4;
	for (size_t i = 0; i < n; i++)
		w[i] = (uint32_t)(i * 2654435761u);
	D.reset();
	if (D.Prefetch(p + 3 * K64, K64 + 1, DEV, 0, NULL))
		return 1;
	struct fakecuda_counters c = ctr();
	printf("prefetch htod=%llu resident=%llu p3=%d p0=%d\n", (unsigned long long)c.bytes_htod,
	       (unsigned long long)c.managed_resident_bytes, (int)loc_of(p + 3 * K64, NULL),
	       (int)loc_of(p, NULL));
	if (D.access((void *)(p + BLK), 64, 0))
		return 1;
	c = ctr();
	printf("fault1 faults=%llu htod=%llu resident=%llu\n", (unsigned long long)c.faults,
	       (unsigned long long)c.bytes_htod, (unsigned long long)c.managed_resident_bytes);
	if (D.access((void *)(p + 10 * K64), 64, 0))
		return 1;
	c = ctr();
	printf("fault0 faults=%llu htod=%llu resident=%llu p0=%d\n", (unsigned long long)c.faults,
	       (unsigned long long)c.bytes_htod, (unsigned long long)c.managed_resident_bytes,
	       (int)loc_of(p, NULL));
	CUdeviceptr x = 0;                         /* 64M of HBM: room for one region more */
	if (D.MemAlloc(&x, 61u << 20))
		return 1;
	c = ctr();
	printf("evict evictions=%llu resident=%llu r0=%d r1=%d\n", (unsigned long long)c.evictions,
	       (unsigned long long)c.managed_resident_bytes, (int)loc_of(p + 3 * K64, NULL),
	       (int)loc_of(p + BLK, NULL));
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += w[i] != (uint32_t)(i * 2654435761u);
	printf("bad=%zu\n", bad);
	D.MemFree(x);
	return 0;
}

static void run_child(const char *mode, const char *const env[], struct kvt_child *c)
{
	const char *argv[] = { self_path, "--child", mode, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(c, argv, env), 0);
	CU_ASSERT_EQUAL(c->exit_code, 0);
}

static void test_fail_injection(void)
{
	static struct kvt_child c;
	const char *env1[] = { "FAKECUDA_FAIL=cuMemAllocManaged:1,cuMemAlloc_v2:0.25",
			       "FAKECUDA_SEED=7", NULL };
	run_child("fail", env1, &c);
	int m1 = -1, m2 = -1, fails = -1, oom = -1;
	CU_ASSERT_EQUAL(sscanf(c.out, "managed=%d,%d fails=%d oom=%d", &m1, &m2, &fails, &oom), 4);
	CU_ASSERT(m1 == CUDA_ERROR_OUT_OF_MEMORY && m2 == CUDA_ERROR_OUT_OF_MEMORY);
	CU_ASSERT(fails >= 25 && fails <= 75);   /* 200 x 0.25 */
	CU_ASSERT_EQUAL(oom, fails);
	const char *env2[] = { "FAKECUDA_FAIL=cuMemAdvise_v2:3", NULL };
	run_child("advise", env2, &c);
	CU_ASSERT_STRING_EQUAL(c.out, "0,0,1,0,0,1,\n");   /* 1 = INVALID_VALUE */
	const char *env3[] = { "FAKECUDA_FAIL=", NULL };
	run_child("advise", env3, &c);
	CU_ASSERT_STRING_EQUAL(c.out, "0,0,0,0,0,0,\n");
}

static void test_cupti_busy(void)
{
	static struct kvt_child c;
	const char *env[] = { "FAKECUDA_CUPTI_BUSY=1", NULL };
	run_child("busy", env, &c);
	CU_ASSERT_STRING_EQUAL(c.out, "enable=39\n");
	const char *env0[] = { "FAKECUDA_CUPTI_BUSY=", NULL };
	run_child("busy", env0, &c);
	CU_ASSERT_STRING_EQUAL(c.out, "enable=0\n");
}

static void test_pace(void)
{
	static struct kvt_child c;
	double v = -1, r = -1;
	const char *paced[] = { "FAKECUDA_LAUNCH_NS=1000000", "FAKECUDA_PACE=2", NULL };
	run_child("pace", paced, &c);
	CU_ASSERT_EQUAL(sscanf(c.out, "virtual_ms=%lf real_ms=%lf", &v, &r), 2);
	CU_ASSERT(fabs(v - 20.0) < 0.01);
	CU_ASSERT(r >= 2 * v - 0.5);            /* the sync waited for 2 x virtual */
	const char *fast[] = { "FAKECUDA_LAUNCH_NS=1000000", "FAKECUDA_PACE=", NULL };
	run_child("pace", fast, &c);
	CU_ASSERT_EQUAL(sscanf(c.out, "virtual_ms=%lf real_ms=%lf", &v, &r), 2);
	CU_ASSERT(fabs(v - 20.0) < 0.01);
	CU_ASSERT(r < v);                       /* unpaced: 20 empty launches take microseconds */
	const char *bad[] = { "FAKECUDA_LAUNCH_NS=1000000", "FAKECUDA_PACE=-3", NULL };
	run_child("pace", bad, &c);
	CU_ASSERT(strstr(c.err, "bad FAKECUDA_PACE") != NULL);
	CU_ASSERT_EQUAL(sscanf(c.out, "virtual_ms=%lf real_ms=%lf", &v, &r), 2);
}

static void test_reclaim_off(void)
{
	static struct kvt_child c;
	size_t bad = 99;
	unsigned long long moved = 0;
	const char *env[] = { "FAKECUDA_RECLAIM=0", NULL };
	run_child("reclaim", env, &c);
	CU_ASSERT_EQUAL(sscanf(c.out, "bad=%zu moved=%llu", &bad, &moved), 2);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(moved >= 20 * BLK);
	CU_ASSERT(strstr(c.err, "bad FAKECUDA_RECLAIM") == NULL);
	const char *env2[] = { "FAKECUDA_RECLAIM=maybe", NULL };
	run_child("reclaim", env2, &c);
	CU_ASSERT(strstr(c.err, "bad FAKECUDA_RECLAIM=\"maybe\", using 1") != NULL);
	CU_ASSERT_EQUAL(sscanf(c.out, "bad=%zu moved=%llu", &bad, &moved), 2);
	CU_ASSERT_EQUAL(bad, 0);
}

/* FAKECUDA_FAULT_MAPS=1: the GPU's fault maps the block (one fault, both
 * reads over the link, nothing migrated); by default it migrates. */
static void test_fault_maps(void)
{
	static struct kvt_child c;
	int loc = -1;
	unsigned long long faults = 9, htod = 9, remote = 9;
	const char *env[] = { "FAKECUDA_FAULT_MAPS=1", NULL };
	run_child("fault_maps", env, &c);
	CU_ASSERT_EQUAL(sscanf(c.out, "loc=%d faults=%llu htod=%llu remote=%llu",
			       &loc, &faults, &htod, &remote), 4);
	CU_ASSERT_NOT_EQUAL(loc, CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(faults, 1);
	CU_ASSERT_EQUAL(htod, 0);
	CU_ASSERT_EQUAL(remote, 2 * BLK);
	const char *env0[] = { NULL };
	run_child("fault_maps", env0, &c);
	CU_ASSERT_EQUAL(sscanf(c.out, "loc=%d faults=%llu htod=%llu remote=%llu",
			       &loc, &faults, &htod, &remote), 4);
	CU_ASSERT_EQUAL(loc, CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(faults, 1);
	CU_ASSERT_EQUAL(htod, BLK);
	CU_ASSERT_EQUAL(remote, 0);
}

/* FAKECUDA_EVICT=lru: hits and prefetches refresh a block; fifo and the
 * default keep the order of arrival; anything else warns once, fifo. */
static void test_evict_order(void)
{
	static const struct { const char *env, *warn; unsigned on; } cases[] = {
		{ "FAKECUDA_EVICT=lru", NULL, 3 },
		{ "FAKECUDA_EVICT=fifo", NULL, 4 },
		{ "FAKECUDA_EVICT=", NULL, 4 },
		{ "FAKECUDA_EVICT=LRU", "bad FAKECUDA_EVICT=\"LRU\", using fifo", 4 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		static struct kvt_child c;
		const char *env[] = { cases[i].env, NULL };
		unsigned on = 99;
		run_child("evict", env, &c);
		CU_ASSERT_EQUAL(sscanf(c.out, "on=%u", &on), 1);
		CU_ASSERT_EQUAL(on, cases[i].on);
		const char *want = cases[i].warn ? cases[i].warn : "bad FAKECUDA_EVICT";
		CU_ASSERT((strstr(c.err, want) != NULL) == (cases[i].warn != NULL));
	}
}

/* FAKECUDA_UM_PAGE=64K: a prefetch moves only its range's pages; a GPU
 * fault brings its whole 2 MiB region (one fault); an eviction takes a
 * whole region; the bytes survive it all. The default (2 MiB) moves the
 * whole block for the same prefetch; a bad value warns and keeps it. */
static void test_um_page(void)
{
	static struct kvt_child c;
	const unsigned long long K64 = 64u << 10, B = BLK;
	unsigned long long htod = 0, res = 0, faults = 0, ev = 0;
	int p3 = -1, p0 = -1, r0 = -1, r1 = -1;
	size_t bad = 99;
	const char *env[] = { "FAKECUDA_UM_PAGE=64K", NULL };
	run_child("um_page", env, &c);
	const char *l = c.out;
	CU_ASSERT_EQUAL_FATAL(sscanf(l, "prefetch htod=%llu resident=%llu p3=%d p0=%d", &htod, &res,
				     &p3, &p0), 4);
	CU_ASSERT_EQUAL(htod, 2 * K64);            /* pages 3 and 4, not the block */
	CU_ASSERT_EQUAL(res, 2 * K64);
	CU_ASSERT_EQUAL(p3, CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_NOT_EQUAL(p0, CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l = strstr(l, "fault1"));
	CU_ASSERT_EQUAL_FATAL(sscanf(l, "fault1 faults=%llu htod=%llu resident=%llu", &faults, &htod,
				     &res), 3);
	CU_ASSERT_EQUAL(faults, 1);
	CU_ASSERT_EQUAL(htod, 2 * K64 + B);        /* the whole region on one fault */
	CU_ASSERT_EQUAL(res, 2 * K64 + B);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l = strstr(l, "fault0"));
	CU_ASSERT_EQUAL_FATAL(sscanf(l, "fault0 faults=%llu htod=%llu resident=%llu p0=%d", &faults,
				     &htod, &res, &p0), 4);
	CU_ASSERT_EQUAL(faults, 2);
	CU_ASSERT_EQUAL(htod, 2 * B);              /* the region's other 30 pages */
	CU_ASSERT_EQUAL(res, 2 * B);
	CU_ASSERT_EQUAL(p0, CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l = strstr(l, "evict"));
	CU_ASSERT_EQUAL_FATAL(sscanf(l, "evict evictions=%llu resident=%llu r0=%d r1=%d", &ev, &res,
				     &r0, &r1), 4);
	CU_ASSERT_EQUAL(ev, 1);
	CU_ASSERT_EQUAL(res, B);                   /* region 0 went whole, oldest first */
	CU_ASSERT_NOT_EQUAL(r0, CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(r1, CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l = strstr(l, "bad="));
	CU_ASSERT_EQUAL(sscanf(l, "bad=%zu", &bad), 1);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(strstr(c.err, "bad FAKECUDA_UM_PAGE") == NULL);
	const char *envd[] = { "FAKECUDA_UM_PAGE=", NULL };
	run_child("um_page", envd, &c);
	CU_ASSERT_EQUAL(sscanf(c.out, "prefetch htod=%llu resident=%llu", &htod, &res), 2);
	CU_ASSERT_EQUAL(htod, B);
	CU_ASSERT_EQUAL(res, B);
	const char *envb[] = { "FAKECUDA_UM_PAGE=96K", NULL };
	run_child("um_page", envb, &c);
	CU_ASSERT(strstr(c.err, "bad FAKECUDA_UM_PAGE=\"96K\", using 2M") != NULL);
	CU_ASSERT_EQUAL(sscanf(c.out, "prefetch htod=%llu", &htod), 1);
	CU_ASSERT_EQUAL(htod, B);
}

static CU_TestInfo tests_env[] = {
	{ "FAKECUDA_FAIL", test_fail_injection },
	{ "CUPTI busy", test_cupti_busy },
	{ "FAKECUDA_PACE", test_pace },
	{ "FAKECUDA_RECLAIM=0", test_reclaim_off },
	{ "FAKECUDA_FAULT_MAPS=1", test_fault_maps },
	{ "FAKECUDA_EVICT", test_evict_order },
	{ "FAKECUDA_UM_PAGE", test_um_page },
	CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {
	{ "fakecuda_env", NULL, NULL, NULL, NULL, tests_env },
	CU_SUITE_INFO_NULL,
};

int main(int argc, char **argv)
{
	self_path = argv[0];
	setenv("FAKECUDA_DEVICE_BYTES", "64M", 1);
	if (load_driver()) {
		fprintf(stderr, "cannot load %s: %s\n", kvt_path("fakecuda/libcuda.so.1"), dlerror());
		return 1;
	}
	if (argc == 3 && !strcmp(argv[1], "--child")) {
		if (!strcmp(argv[2], "fail")) return child_fail();
		if (!strcmp(argv[2], "advise")) return child_advise();
		if (!strcmp(argv[2], "busy")) return child_busy();
		if (!strcmp(argv[2], "pace")) return child_pace();
		if (!strcmp(argv[2], "reclaim")) return child_reclaim();
		if (!strcmp(argv[2], "fault_maps")) return child_fault_maps();
		if (!strcmp(argv[2], "evict")) return child_evict();
		if (!strcmp(argv[2], "um_page")) return child_um_page();
		return 2;
	}
	return kvt_test_main(suites);
}
