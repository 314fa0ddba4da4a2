/* SPDX-License-Identifier: MIT */
/* CUnit suite for kernels a workload defines on the SIMULATED CUDA driver
 * (fakecuda_kernel_define and what a body may call, fc_kernel.c), for
 * cuFuncGetName, and for graph editing: kernel node params in a graph and
 * in an exec, and cuGraphExecUpdate (fc_graph.c), through the driver's
 * resolver and through the stand-in runtime. Runs with
 * FAKECUDA_DEVICE_BYTES=64M. */
#include "unit/fakecuda_drv.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sched.h>
#include <time.h>
#include <sys/uio.h>

/* The older ABIs, which cuda.h declares only to the driver's own build. */
typedef CUresult (*exec_update_v1_fn)(CUgraphExec, CUgraph, CUgraphNode *,
				      CUgraphExecUpdateResult *);
typedef CUresult (*set_params_v1_fn)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1 *);
typedef CUresult (*exec_set_params_v1_fn)(CUgraphExec, CUgraphNode,
					  const CUDA_KERNEL_NODE_PARAMS_v1 *);

static struct {
	__typeof__(&fakecuda_kernel_define) define;
	__typeof__(&fakecuda_kread) kread;
	__typeof__(&fakecuda_kwrite) kwrite;
	__typeof__(&fakecuda_kaccess) kaccess;
	__typeof__(&fakecuda_kflops) kflops;
	__typeof__(&fakecuda_view) view;
	__typeof__(&cuFuncGetParamInfo) ParamInfo;
	__typeof__(&cuFuncGetName) Name;
	__typeof__(&cuMemHostAlloc) HostAlloc;
	__typeof__(&cuMemFreeHost) FreeHost;
	__typeof__(&cuMemHostRegister_v2) HostRegister;
	__typeof__(&cuMemHostUnregister) HostUnregister;
	__typeof__(&cuMemHostGetDevicePointer_v2) HostDevPtr;
	__typeof__(&cuLaunchKernelEx) LaunchEx;
	__typeof__(&cuStreamCreate) StreamCreate;
	__typeof__(&cuStreamDestroy) StreamDestroy;
	__typeof__(&cuStreamBeginCapture_v2) BeginCapture;
	__typeof__(&cuStreamEndCapture) EndCapture;
	__typeof__(&cuMemsetD8Async) MemsetAsync;
	__typeof__(&cuGraphDestroy) GraphDestroy;
	__typeof__(&cuGraphGetNodes) GetNodes;
	__typeof__(&cuGraphKernelNodeGetParams_v2) GetParams;
	__typeof__(&cuGraphKernelNodeSetParams_v2) SetParams;
	set_params_v1_fn SetParamsV1;
	__typeof__(&cuGraphExecKernelNodeSetParams_v2) ExecSetParams;
	exec_set_params_v1_fn ExecSetParamsV1;
	__typeof__(&cuGraphExecUpdate_v2) ExecUpdate;
	exec_update_v1_fn ExecUpdateV1;
	__typeof__(&cuGraphInstantiateWithFlags) Instantiate;
	__typeof__(&cuGraphExecDestroy) ExecDestroy;
	__typeof__(&cuGraphLaunch) GraphLaunch;
} K;

static int load_kernel_api(void)
{
#define S(f, s) K.f = (__typeof__(K.f))dlsym(drv, s)
	S(define, "fakecuda_kernel_define");
	S(kread, "fakecuda_kread");
	S(kwrite, "fakecuda_kwrite");
	S(kaccess, "fakecuda_kaccess");
	S(kflops, "fakecuda_kflops");
	S(view, "fakecuda_view");
#undef S
#define L(f, s, v) K.f = get(s, v, 0)
	L(ParamInfo, "cuFuncGetParamInfo", 12040);
	L(Name, "cuFuncGetName", 12030);
	L(HostAlloc, "cuMemHostAlloc", 2020);
	L(FreeHost, "cuMemFreeHost", 2000);
	L(HostRegister, "cuMemHostRegister", 6050);
	L(HostUnregister, "cuMemHostUnregister", 4000);
	L(HostDevPtr, "cuMemHostGetDevicePointer", 3020);
	L(LaunchEx, "cuLaunchKernelEx", 11060);
	L(StreamCreate, "cuStreamCreate", 2000);
	L(StreamDestroy, "cuStreamDestroy", 4000);
	L(BeginCapture, "cuStreamBeginCapture", 10010);
	L(EndCapture, "cuStreamEndCapture", 10000);
	L(MemsetAsync, "cuMemsetD8Async", 3020);
	L(GraphDestroy, "cuGraphDestroy", 10000);
	L(GetNodes, "cuGraphGetNodes", 10000);
	L(GetParams, "cuGraphKernelNodeGetParams", 12000);
	L(SetParams, "cuGraphKernelNodeSetParams", 12000);
	L(SetParamsV1, "cuGraphKernelNodeSetParams", 10000);
	L(ExecSetParams, "cuGraphExecKernelNodeSetParams", 12000);
	L(ExecSetParamsV1, "cuGraphExecKernelNodeSetParams", 10010);
	L(ExecUpdate, "cuGraphExecUpdate", 12000);
	L(ExecUpdateV1, "cuGraphExecUpdate", 10020);
	L(Instantiate, "cuGraphInstantiate", 12000);
	L(ExecDestroy, "cuGraphExecDestroy", 10000);
	L(GraphLaunch, "cuGraphLaunch", 10000);
#undef L
	void **f = (void **)&K;
	for (size_t i = 0; i < sizeof K / sizeof(void *); i++)
		if (!f[i])
			return -1;
	return 0;
}

/* ---- kernels of this suite ---- */

/* FlashAttention's by-value params struct is about 600 bytes. */
struct fa_params {
	uint64_t tag;
	CUdeviceptr q, k, v;
	char rest[568];
};
_Static_assert(sizeof(struct fa_params) == 600, "a 600-byte struct");

/* What the bodies saw. */
static struct seen {
	int calls;
	uint64_t tag;
	const void *arg0;
	int64_t sum;
	int rc;
} seen;

static CUresult launch(CUfunction f, CUstream s, void **params)
{
	return D.Launch(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
}

/* [0] struct fa_params: records its tag and where its copy lies, then
 * scribbles on the copy (a kernel may change its own parameters). */
static int fa_body(void *const *args, void *ctx)
{
	struct seen *s = ctx;
	struct fa_params *p = args[0];
	s->calls++;
	s->tag = p->tag;
	s->arg0 = p;
	p->tag = 0xdead;
	return 0;
}

static CUfunction fa_kernel(void)
{
	static CUfunction f;
	static const struct fakecuda_param decl[] = { { sizeof(struct fa_params), 8 } };
	if (!f)
		f = K.define("flash_fwd_kernel", decl, 1, fa_body, &seen);
	return f;
}

/* [0] const int32_t *table, [1] unsigned n: sums the table, read as the
 * kernel reads it, 256 entries at a time. */
static int sum_body(void *const *args, void *ctx)
{
	struct seen *s = ctx;
	const int32_t *table = *(const int32_t *const *)args[0];
	unsigned n = *(const unsigned *)args[1];
	int32_t buf[256];
	s->calls++;
	s->sum = 0;
	for (unsigned i = 0; i < n; i += 256) {
		unsigned k = n - i < 256 ? n - i : 256;
		s->rc = K.kread(table + i, buf, k * sizeof *buf);
		if (s->rc)
			return s->rc;
		for (unsigned j = 0; j < k; j++)
			s->sum += buf[j];
	}
	return 0;
}

static CUfunction sum_kernel(void)
{
	static CUfunction f;
	static const struct fakecuda_param decl[] = { { 8, 8 }, { 4, 4 } };
	if (!f)
		f = K.define("table_sum", decl, 2, sum_body, &seen);
	return f;
}

static CUresult run_sum(CUdeviceptr table, unsigned n)
{
	void *params[] = { &table, &n };
	return launch(sum_kernel(), NULL, params);
}

/* [0] void *ptr, [1] uint64_t value: writes value at ptr. */
static int store_body(void *const *args, void *ctx)
{
	(void)ctx;
	void *ptr = *(void *const *)args[0];
	return K.kwrite(ptr, args[1], sizeof(uint64_t));
}

static CUresult run_store(CUdeviceptr at, uint64_t value)
{
	static CUfunction f;
	static const struct fakecuda_param decl[] = { { 8, 8 }, { 8, 8 } };
	if (!f)
		f = K.define("store_u64", decl, 2, store_body, NULL);
	void *params[] = { &at, &value };
	return launch(f, NULL, params);
}

/* [0] double flops, [1] CUdeviceptr ptr, [2] size_t len, [3] int write:
 * SM time, then an access without data (len 0: none). */
static int work_body(void *const *args, void *ctx)
{
	(void)ctx;
	K.kflops(*(const double *)args[0]);
	const void *ptr = *(void *const *)args[1];
	size_t len = *(const size_t *)args[2];
	return K.kaccess(ptr, len, *(const int *)args[3]);
}

static CUresult run_work(double flops, CUdeviceptr p, size_t len, int write)
{
	static CUfunction f;
	static const struct fakecuda_param decl[] = { { 8, 8 }, { 8, 8 }, { 8, 8 }, { 4, 4 } };
	if (!f)
		f = K.define("work", decl, 4, work_body, NULL);
	void *params[] = { &flops, &p, &len, &write };
	return launch(f, NULL, params);
}

static CUstream new_stream(void)
{
	CUstream s = NULL;
	CU_ASSERT_EQUAL_FATAL(K.StreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	return s;
}

static CUdeviceptr device_alloc(size_t bytes)
{
	CUdeviceptr p = 0;
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&p, bytes), CUDA_SUCCESS);
	return p;
}

/* ---- declaration and layout ---- */

/*  | fa_params 600 | 1 |pad| 4 | 8 | 2 |pad| 16 | 1 |pad| 12 | ... | 4096 | 1 |
 *  0              600 601 604 608 616 618 624  640 641 644  656     784  4880 */
static const struct fakecuda_param layout_decl[] = {
	{ 600, 8 }, { 1, 1 }, { 4, 4 }, { 8, 8 }, { 2, 2 }, { 16, 16 }, { 1, 1 },
	{ 12, 4 }, { 8, 8 }, { 3, 1 }, { 16, 8 }, { 4, 4 }, { 2, 2 }, { 8, 8 },
	{ 1, 1 }, { 32, 16 }, { 4, 4 }, { 8, 8 }, { 2, 2 }, { 4096, 16 }, { 1, 1 },
};
static const size_t layout_off[] = {
	0, 600, 604, 608, 616, 624, 640, 644, 656, 664, 672, 688, 692, 696,
	704, 720, 752, 760, 768, 784, 4880,
};
#define NR_LAYOUT (sizeof layout_decl / sizeof layout_decl[0])
_Static_assert(NR_LAYOUT == sizeof layout_off / sizeof layout_off[0], "one offset each");

/* Every argument arrives with its bytes at its declared alignment. */
static unsigned char layout_src[NR_LAYOUT][4096];
static int layout_bad;

static int layout_body(void *const *args, void *ctx)
{
	(void)ctx;
	layout_bad = 0;
	for (unsigned i = 0; i < NR_LAYOUT; i++)
		if ((uintptr_t)args[i] % layout_decl[i].align || args[i] == layout_src[i] ||
		    memcmp(args[i], layout_src[i], layout_decl[i].size))
			layout_bad |= 1 << (i % 30);
	return layout_bad;
}

static void test_layout(void)
{
	CUfunction f = K.define("fa_layout", layout_decl, NR_LAYOUT, layout_body, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	for (size_t i = 0; i < NR_LAYOUT; i++) {
		size_t off = 1, size = 0;
		CU_ASSERT_EQUAL(K.ParamInfo(f, i, &off, &size), CUDA_SUCCESS);
		CU_ASSERT_EQUAL(off, layout_off[i]);
		CU_ASSERT_EQUAL(size, layout_decl[i].size);
	}
	size_t off, size;
	CU_ASSERT_EQUAL(K.ParamInfo(f, NR_LAYOUT, &off, &size), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(K.ParamInfo(f, 0, NULL, &size), CUDA_ERROR_INVALID_VALUE);
	/* a launch copies every argument as declared */
	void *params[NR_LAYOUT];
	for (size_t i = 0; i < NR_LAYOUT; i++) {
		for (size_t b = 0; b < layout_decl[i].size; b++)
			layout_src[i][b] = (unsigned char)(i * 31 + b * 7 + 1);
		params[i] = layout_src[i];
	}
	layout_bad = -1;
	CU_ASSERT_EQUAL(launch(f, NULL, params), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(layout_bad, 0);
	params[7] = NULL;
	CU_ASSERT_EQUAL(launch(f, NULL, params), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(launch(f, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
}

static int nop_body(void *const *args, void *ctx)
{
	(void)args;
	(void)ctx;
	return 0;
}

/* 64 ints and one 4 KiB struct after them; a kernel with no parameters. */
static void test_many_params(void)
{
	struct fakecuda_param decl[65];
	for (int i = 0; i < 64; i++)
		decl[i] = (struct fakecuda_param){ 4, 4 };
	decl[64] = (struct fakecuda_param){ 4096, 16 };
	CUfunction f = K.define("many", decl, 65, nop_body, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	size_t off = 0, size = 0;
	CU_ASSERT_EQUAL(K.ParamInfo(f, 63, &off, &size), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(off, 252);
	CU_ASSERT_EQUAL(K.ParamInfo(f, 64, &off, &size), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(off, 256);
	CU_ASSERT_EQUAL(size, 4096);
	CU_ASSERT_EQUAL(K.ParamInfo(f, 65, &off, &size), CUDA_ERROR_INVALID_VALUE);
	CUfunction none = K.define("none", NULL, 0, nop_body, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(none);
	CU_ASSERT_EQUAL(K.ParamInfo(none, 0, &off, &size), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(launch(none, NULL, NULL), CUDA_SUCCESS);
}

static void test_bad_declarations(void)
{
	struct fakecuda_param ok = { 8, 8 };
	struct fakecuda_param bad[] = { { 0, 1 }, { 4097, 8 }, { 8, 0 }, { 8, 3 }, { 8, 32 } };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CU_ASSERT_PTR_NULL(K.define("bad", &bad[i], 1, nop_body, NULL));
	CU_ASSERT_PTR_NULL(K.define(NULL, &ok, 1, nop_body, NULL));
	CU_ASSERT_PTR_NULL(K.define("", &ok, 1, nop_body, NULL));
	CU_ASSERT_PTR_NULL(K.define("nobody", &ok, 1, NULL, NULL));
	CU_ASSERT_PTR_NULL(K.define("noparams", NULL, 1, nop_body, NULL));
	CU_ASSERT_PTR_NULL(K.define("toomany", &ok, 100000, nop_body, NULL));
}

/* ---- names ---- */

static void test_names(void)
{
	const char *name = NULL;
	CU_ASSERT_EQUAL(K.Name(&name, fa_kernel()), CUDA_SUCCESS);
	CU_ASSERT_STRING_EQUAL(name ? name : "", "flash_fwd_kernel");
	CU_ASSERT_EQUAL(K.Name(&name, D.touch()), CUDA_SUCCESS);
	CU_ASSERT_STRING_EQUAL(name ? name : "", "fakecuda_touch_kernel");
	CUfunction paged = ((__typeof__(&fakecuda_paged_kernel))dlsym(drv,
						"fakecuda_paged_kernel"))();
	CUfunction compute = ((__typeof__(&fakecuda_compute_kernel))dlsym(drv,
						"fakecuda_compute_kernel"))();
	CU_ASSERT_EQUAL(K.Name(&name, paged), CUDA_SUCCESS);
	CU_ASSERT_STRING_EQUAL(name ? name : "", "fakecuda_paged_kernel");
	CU_ASSERT_EQUAL(K.Name(&name, compute), CUDA_SUCCESS);
	CU_ASSERT_STRING_EQUAL(name ? name : "", "fakecuda_compute_kernel");
	int junk = 0;
	CU_ASSERT_EQUAL(K.Name(&name, (CUfunction)&junk), CUDA_ERROR_INVALID_HANDLE);
	CU_ASSERT_EQUAL(K.Name(NULL, fa_kernel()), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_PTR_NULL(get("cuFuncGetName", 12020, 0));
	CU_ASSERT_PTR_EQUAL(get("cuFuncGetName", 13000, 2), dlsym(drv, "cuFuncGetName"));
}

/* ---- what a body reads and writes ---- */

/* process_vm_readv of 64 bytes at p: bytes read, or -errno. */
static long vm_read(uintptr_t p)
{
	unsigned char buf[64];
	struct iovec l = { buf, sizeof buf }, r = { (void *)p, sizeof buf };
	errno = 0;
	ssize_t got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	return got < 0 ? -errno : (long)got;
}

/* A table in device memory: host code cannot read it, the body can, at
 * HBM cost; a read past its end is an illegal address. */
static void test_kread_device(void)
{
	enum { N = 1000 };
	int32_t table[N];
	int64_t want = 0;
	for (int i = 0; i < N; i++)
		want += table[i] = i * 3 - 7;
	CUdeviceptr d = device_alloc(sizeof table);
	CU_ASSERT_EQUAL_FATAL(D.HtoD(d, table, sizeof table), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(vm_read(d), -EFAULT);
	struct fakecuda_counters c0 = ctr();
	seen = (struct seen){ 0 };
	CU_ASSERT_EQUAL(run_sum(d, N), CUDA_SUCCESS);
	struct fakecuda_counters c1 = ctr();
	CU_ASSERT_EQUAL(seen.calls, 1);
	CU_ASSERT_EQUAL(seen.sum, want);
	CU_ASSERT_EQUAL(c1.launches - c0.launches, 1);
	CU_ASSERT_EQUAL(c1.bytes_hbm - c0.bytes_hbm, sizeof table);
	CU_ASSERT_EQUAL(c1.bytes_remote - c0.bytes_remote, 0);
	CU_ASSERT(c1.virtual_ns - c0.virtual_ns >= 5000);
	/* the body's write lands where the driver keeps the bytes */
	CU_ASSERT_EQUAL(run_store(d + 8, 0x1122334455667788ull), CUDA_SUCCESS);
	uint64_t back = 0;
	CU_ASSERT_EQUAL(D.DtoH(&back, d + 8, sizeof back), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(back, 0x1122334455667788ull);
	/* past the allocation's end: nothing read, the launch fails */
	seen = (struct seen){ 0 };
	CU_ASSERT_EQUAL(run_sum(d, N + 256), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_ASSERT_EQUAL(seen.rc, CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_ASSERT_EQUAL(D.MemFree(d), CUDA_SUCCESS);
}

/* Pinned memory through its device pointer, and registered memory: read in
 * place over the link (bytes_remote, link time), no HBM bytes. Pageable
 * memory the driver does not know: an illegal address. */
static void test_kread_zero_copy(void)
{
	const size_t bytes = 1 << 20;
	const unsigned n = (unsigned)(bytes / sizeof(int32_t));
	int32_t *h = NULL;
	CU_ASSERT_EQUAL_FATAL(K.HostAlloc((void **)&h, bytes, CU_MEMHOSTALLOC_DEVICEMAP),
			      CUDA_SUCCESS);
	int64_t want = 0;
	for (unsigned i = 0; i < n; i++)
		want += h[i] = (int32_t)(i % 97);
	CUdeviceptr dp = 0;
	CU_ASSERT_EQUAL_FATAL(K.HostDevPtr(&dp, h, 0), CUDA_SUCCESS);
	struct fakecuda_counters c0 = ctr();
	seen = (struct seen){ 0 };
	CU_ASSERT_EQUAL(run_sum(dp, n), CUDA_SUCCESS);
	struct fakecuda_counters c1 = ctr();
	CU_ASSERT_EQUAL(seen.sum, want);
	CU_ASSERT_EQUAL(c1.bytes_remote - c0.bytes_remote, bytes);
	CU_ASSERT_EQUAL(c1.bytes_hbm - c0.bytes_hbm, 0);
	CU_ASSERT_EQUAL(c1.faults - c0.faults, 0);
	/* 5 us launch + 1 MiB at 55 GB/s (19 065 ns) */
	uint64_t ns = c1.virtual_ns - c0.virtual_ns;
	CU_ASSERT(ns >= 5000 + 19000 && ns <= 5000 + 19200);
	/* the body's write is in host memory at once */
	CU_ASSERT_EQUAL(run_store(dp + 16, 42), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(((uint64_t *)h)[2], 42);
	CU_ASSERT_EQUAL(K.FreeHost(h), CUDA_SUCCESS);

	int32_t *r = NULL;
	CU_ASSERT_EQUAL_FATAL(posix_memalign((void **)&r, 4096, 65536), 0);
	for (unsigned i = 0; i < 16384; i++)
		r[i] = 2;
	CU_ASSERT_EQUAL_FATAL(K.HostRegister(r, 65536, 0), CUDA_SUCCESS);
	c0 = ctr();
	CU_ASSERT_EQUAL(run_sum((CUdeviceptr)r, 16384), CUDA_SUCCESS);
	c1 = ctr();
	CU_ASSERT_EQUAL(seen.sum, 2 * 16384);
	CU_ASSERT_EQUAL(c1.bytes_remote - c0.bytes_remote, 65536);
	CU_ASSERT_EQUAL(K.HostUnregister(r), CUDA_SUCCESS);
	c0 = ctr();
	seen = (struct seen){ 0 };
	CU_ASSERT_EQUAL(run_sum((CUdeviceptr)r, 16384), CUDA_ERROR_ILLEGAL_ADDRESS);
	c1 = ctr();
	CU_ASSERT_EQUAL(seen.rc, CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_ASSERT_EQUAL(c1.bytes_remote - c0.bytes_remote, 0);
	free(r);
}

/* Managed memory faults and migrates as the touch kernel's ranges do; SM
 * time as fakecuda_compute_kernel charges it. */
static void test_kaccess_kflops(void)
{
	CUdeviceptr m = managed(BLK);
	CU_ASSERT_EQUAL(loc_of(m, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	struct fakecuda_counters c0 = ctr();
	CU_ASSERT_EQUAL(run_work(0, m, 4096, 0), CUDA_SUCCESS);
	struct fakecuda_counters c1 = ctr();
	CU_ASSERT_EQUAL(c1.faults - c0.faults, 1);
	CU_ASSERT_EQUAL(c1.bytes_htod - c0.bytes_htod, BLK);
	CU_ASSERT_EQUAL(loc_of(m, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	/* resident now: HBM bytes, no fault */
	CU_ASSERT_EQUAL(run_work(0, m, 4096, 1), CUDA_SUCCESS);
	struct fakecuda_counters c2 = ctr();
	CU_ASSERT_EQUAL(c2.faults - c1.faults, 0);
	CU_ASSERT_EQUAL(c2.bytes_hbm - c1.bytes_hbm, 4096);
	/* 1e12 FLOPs at 790e12 x 0.5 FLOP/s: 2 531 645 ns, plus the launch */
	CU_ASSERT_EQUAL(run_work(1e12, 0, 0, 0), CUDA_SUCCESS);
	struct fakecuda_counters c3 = ctr();
	uint64_t ns = c3.virtual_ns - c2.virtual_ns;
	CU_ASSERT(ns >= 5000 + 2531640 && ns <= 5000 + 2531650);
	/* unknown memory: nothing charged, the launch fails */
	static char pageable[4096];
	CU_ASSERT_EQUAL(run_work(0, (CUdeviceptr)pageable, 64, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
	struct fakecuda_counters c4 = ctr();
	CU_ASSERT_EQUAL(c4.bytes_remote - c3.bytes_remote, 0);
	CU_ASSERT_EQUAL(D.MemFree(m), CUDA_SUCCESS);
}

/* The serial device runs a body inside its launch, under the driver's
 * lock. In real time (no FAKECUDA_VTIME) another thread's call that queued
 * meanwhile goes through at the body's next memory access, as a GPU runs a
 * kernel while other threads call the driver: the body below accesses
 * memory until the other thread's cuMemGetInfo has returned (10 s at most).
 * With a lock held for the whole body the call would return only after. */
struct yield_run {
	CUdeviceptr d;
	atomic_int inside, answered;
	int accesses;
};

static int yield_body(void *const *args, void *ctx)
{
	struct yield_run *y = ctx;
	(void)args;
	atomic_store(&y->inside, 1);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (K.kaccess((void *)y->d, 64, 0))
			return 1;
		y->accesses++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!atomic_load(&y->answered) && t.tv_sec - t0.tv_sec < 10);
	return 0;
}

static void *yield_caller(void *arg)
{
	struct yield_run *y = arg;
	CUcontext ctx;
	if (D.PrimaryCtxRetain(&ctx, 0) || D.CtxSetCurrent(ctx))
		return NULL;                  /* answered stays 0: the test fails */
	while (!atomic_load(&y->inside))
		sched_yield();
	size_t fr = 0, tot = 0;
	if (D.MemGetInfo(&fr, &tot) == CUDA_SUCCESS && tot)
		atomic_store(&y->answered, 1);
	return NULL;
}

static void test_body_lets_calls_through(void)
{
	static struct yield_run y;
	y.d = device_alloc(4096);
	static const struct fakecuda_param decl[] = { { 8, 8 } };
	CUfunction f = K.define("yield_probe", decl, 1, yield_body, &y);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	pthread_t th;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, yield_caller, &y), 0);
	void *params[] = { &y.d };
	CU_ASSERT_EQUAL(launch(f, NULL, params), CUDA_SUCCESS);
	int during = atomic_load(&y.answered);   /* the body ended: answered before? */
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(during, 1);
	CU_ASSERT(y.accesses >= 1);
	CU_ASSERT_EQUAL(D.MemFree(y.d), CUDA_SUCCESS);
}

/* Outside a body these refuse and charge nothing. */
static void test_outside_body(void)
{
	CUdeviceptr d = device_alloc(4096);
	char buf[64];
	struct fakecuda_counters c0 = ctr();
	CU_ASSERT_EQUAL(K.kread((void *)d, buf, sizeof buf), CUDA_ERROR_NOT_PERMITTED);
	CU_ASSERT_EQUAL(K.kwrite((void *)d, buf, sizeof buf), CUDA_ERROR_NOT_PERMITTED);
	CU_ASSERT_EQUAL(K.kaccess((void *)d, sizeof buf, 0), CUDA_ERROR_NOT_PERMITTED);
	K.kflops(1e15);
	struct fakecuda_counters c1 = ctr();
	CU_ASSERT_EQUAL(c1.virtual_ns, c0.virtual_ns);
	CU_ASSERT_EQUAL(c1.bytes_hbm, c0.bytes_hbm);
	CU_ASSERT_EQUAL(D.MemFree(d), CUDA_SUCCESS);
}

static int fail_body(void *const *args, void *ctx)
{
	(void)args;
	(void)ctx;
	return 1;
}

/* A nonzero return fails the launch as a bad access does; it still ran. */
static void test_body_failure(void)
{
	CUfunction f = K.define("fails", NULL, 0, fail_body, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	struct fakecuda_counters c0 = ctr();
	CU_ASSERT_EQUAL(launch(f, NULL, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_ASSERT_EQUAL(ctr().launches - c0.launches, 1);
	CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
			       .blockDimY = 1, .blockDimZ = 1 };
	CU_ASSERT_EQUAL(K.LaunchEx(&cfg, f, NULL, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
}

/* ---- arguments are copies ---- */

/* The body gets a copy of its own, made at launch: not the caller's bytes,
 * and what it scribbles there does not reach the caller. */
static void test_args_copied(void)
{
	struct fa_params p = { .tag = 11 };
	void *params[] = { &p };
	seen = (struct seen){ 0 };
	CU_ASSERT_EQUAL(launch(fa_kernel(), NULL, params), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(seen.calls, 1);
	CU_ASSERT_EQUAL(seen.tag, 11);
	CU_ASSERT_PTR_NOT_EQUAL(seen.arg0, &p);
	CU_ASSERT_EQUAL(p.tag, 11);
	/* through cuLaunchKernelEx too */
	CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
			       .blockDimY = 1, .blockDimZ = 1 };
	p.tag = 12;
	CU_ASSERT_EQUAL(K.LaunchEx(&cfg, fa_kernel(), params, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(seen.tag, 12);
}

/* ---- graphs ---- */

/* Capture launches of fa_kernel with tags[0..nr) on s; the caller's struct
 * changes after each launch, as a server reuses its buffers. */
static CUgraph capture(CUstream s, const uint64_t *tags, unsigned nr)
{
	struct fa_params p = { 0 };
	void *params[] = { &p };
	CU_ASSERT_EQUAL(K.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	for (unsigned i = 0; i < nr; i++) {
		p.tag = tags[i];
		CU_ASSERT_EQUAL(launch(fa_kernel(), s, params), CUDA_SUCCESS);
		p.tag = 0xbad;
	}
	CUgraph g = NULL;
	CU_ASSERT_EQUAL(K.EndCapture(s, &g), CUDA_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	return g;
}

static CUgraphNode first_node(CUgraph g)
{
	CUgraphNode n[1] = { NULL };
	size_t nr = 1;
	CU_ASSERT_EQUAL(K.GetNodes(g, n, &nr), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(nr, 1);
	return n[0];
}

/* The tag the body sees at the next replay of e. */
static uint64_t replay_tag(CUgraphExec e, CUstream s)
{
	seen = (struct seen){ 0 };
	CU_ASSERT_EQUAL(K.GraphLaunch(e, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(seen.calls, 1);
	return seen.tag;
}

static uint64_t node_tag(CUgraphNode n)
{
	CUDA_KERNEL_NODE_PARAMS_v2 p = { 0 };
	CU_ASSERT_EQUAL_FATAL(K.GetParams(n, &p), CUDA_SUCCESS);
	CU_ASSERT_PTR_EQUAL(p.func, fa_kernel());
	CU_ASSERT_PTR_NOT_NULL_FATAL(p.kernelParams);
	return ((const struct fa_params *)p.kernelParams[0])->tag;
}

static CUDA_KERNEL_NODE_PARAMS_v2 fa_node_params(struct fa_params *p, void **params)
{
	params[0] = p;
	return (CUDA_KERNEL_NODE_PARAMS_v2){ .func = fa_kernel(), .gridDimX = 1, .gridDimY = 1,
					     .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
					     .blockDimZ = 1, .kernelParams = params };
}

/* Capture records the arguments as they were at the launch; every replay
 * runs the body on them again (its scribbles of one replay are gone by the
 * next); the node hands them back. */
static void test_capture_replay(void)
{
	CUstream s = new_stream();
	uint64_t tag = 21;
	struct fakecuda_counters c0 = ctr();
	seen = (struct seen){ 0 };
	CUgraph g = capture(s, &tag, 1);
	CU_ASSERT_EQUAL(seen.calls, 0);
	CU_ASSERT_EQUAL(ctr().launches, c0.launches);
	CU_ASSERT_EQUAL(node_tag(first_node(g)), 21);
	CUgraphExec e = NULL;
	CU_ASSERT_EQUAL_FATAL(K.Instantiate(&e, g, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(K.GraphDestroy(g), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(replay_tag(e, s), 21);
	CU_ASSERT_EQUAL(replay_tag(e, s), 21);
	CU_ASSERT_EQUAL(ctr().launches - c0.launches, 2);
	CU_ASSERT_EQUAL(K.ExecDestroy(e), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(K.StreamDestroy(s), CUDA_SUCCESS);
}

/* Setting an exec's node changes the next replay, not the graph; setting
 * the graph's node changes the graph, not the exec, until an update. */
static void test_set_params(void)
{
	CUstream s = new_stream();
	uint64_t tag = 31;
	CUgraph g = capture(s, &tag, 1);
	CUgraphNode n = first_node(g);
	CUgraphExec e = NULL;
	CU_ASSERT_EQUAL_FATAL(K.Instantiate(&e, g, 0), CUDA_SUCCESS);
	struct fa_params p = { .tag = 32 };
	void *params[1];
	CUDA_KERNEL_NODE_PARAMS_v2 np = fa_node_params(&p, params);
	CU_ASSERT_EQUAL(K.ExecSetParams(e, n, &np), CUDA_SUCCESS);
	p.tag = 0xbad;   /* copied at the call */
	CU_ASSERT_EQUAL(replay_tag(e, s), 32);
	CU_ASSERT_EQUAL(node_tag(n), 31);
	p.tag = 33;
	CU_ASSERT_EQUAL(K.SetParams(n, &np), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(node_tag(n), 33);
	CU_ASSERT_EQUAL(replay_tag(e, s), 32);
	/* the CUDA 10 ABIs */
	CUDA_KERNEL_NODE_PARAMS_v1 v1 = { .func = fa_kernel(), .gridDimX = 1, .gridDimY = 1,
					  .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1,
					  .blockDimZ = 1, .kernelParams = params };
	p.tag = 34;
	CU_ASSERT_EQUAL(K.ExecSetParamsV1(e, n, &v1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(replay_tag(e, s), 34);
	p.tag = 35;
	CU_ASSERT_EQUAL(K.SetParamsV1(n, &v1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(node_tag(n), 35);
	/* bad calls change nothing */
	int junk;
	CU_ASSERT_EQUAL(K.ExecSetParams(e, (CUgraphNode)&junk, &np), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(K.ExecSetParams((CUgraphExec)&junk, n, &np), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(K.SetParams(n, NULL), CUDA_ERROR_INVALID_VALUE);
	np.func = (CUfunction)&junk;
	CU_ASSERT_EQUAL(K.SetParams(n, &np), CUDA_ERROR_INVALID_HANDLE);
	CU_ASSERT_EQUAL(node_tag(n), 35);
	CU_ASSERT_EQUAL(replay_tag(e, s), 34);
	CU_ASSERT_EQUAL(K.ExecDestroy(e), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(K.GraphDestroy(g), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(K.StreamDestroy(s), CUDA_SUCCESS);
}

/* A graph of the exec's shape updates it in place; another topology or
 * node type fails and leaves it as it was. */
static void test_exec_update(void)
{
	CUstream s = new_stream();
	uint64_t tags[2] = { 41, 42 };
	CUgraph g1 = capture(s, &tags[0], 1), g2 = capture(s, &tags[1], 1);
	CUgraph g3 = capture(s, tags, 2);
	CUdeviceptr d = device_alloc(4096);
	CU_ASSERT_EQUAL(K.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(K.MemsetAsync(d, 0, 64, s), CUDA_SUCCESS);
	CUgraph g4 = NULL;
	CU_ASSERT_EQUAL_FATAL(K.EndCapture(s, &g4), CUDA_SUCCESS);
	CUgraphExec e = NULL;
	CU_ASSERT_EQUAL_FATAL(K.Instantiate(&e, g1, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(replay_tag(e, s), 41);

	CUgraphExecUpdateResultInfo info = { CU_GRAPH_EXEC_UPDATE_ERROR, NULL, NULL };
	CU_ASSERT_EQUAL(K.ExecUpdate(e, g2, &info), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
	CU_ASSERT_EQUAL(replay_tag(e, s), 42);
	/* after an update, g2's node names the exec's */
	struct fa_params p = { .tag = 43 };
	void *params[1];
	CUDA_KERNEL_NODE_PARAMS_v2 np = fa_node_params(&p, params);
	CU_ASSERT_EQUAL(K.ExecSetParams(e, first_node(g2), &np), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(replay_tag(e, s), 43);

	info = (CUgraphExecUpdateResultInfo){ CU_GRAPH_EXEC_UPDATE_SUCCESS, NULL, NULL };
	CU_ASSERT_EQUAL(K.ExecUpdate(e, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	CU_ASSERT_EQUAL(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
	CU_ASSERT_EQUAL(replay_tag(e, s), 43);

	info = (CUgraphExecUpdateResultInfo){ CU_GRAPH_EXEC_UPDATE_SUCCESS, NULL, NULL };
	CU_ASSERT_EQUAL(K.ExecUpdate(e, g4, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	CU_ASSERT_EQUAL(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
	CUgraphNode n4[1] = { NULL };
	size_t nr = 1;
	CU_ASSERT_EQUAL(K.GetNodes(g4, n4, &nr), CUDA_SUCCESS);
	CU_ASSERT_PTR_EQUAL(info.errorNode, n4[0]);
	CU_ASSERT_EQUAL(replay_tag(e, s), 43);

	/* the CUDA 10.2 ABI */
	CUgraphNode err = (CUgraphNode)&nr;
	CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_SUCCESS;
	CU_ASSERT_EQUAL(K.ExecUpdateV1(e, g3, &err, &res), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	CU_ASSERT_EQUAL(res, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
	CU_ASSERT_EQUAL(K.ExecUpdateV1(e, g1, &err, &res), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(res, CU_GRAPH_EXEC_UPDATE_SUCCESS);
	CU_ASSERT_PTR_NULL(err);
	CU_ASSERT_EQUAL(replay_tag(e, s), 41);
	CU_ASSERT_EQUAL(K.ExecUpdate(e, g1, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(K.ExecUpdate(e, (CUgraph)&nr, &info), CUDA_ERROR_INVALID_VALUE);

	CU_ASSERT_EQUAL(K.ExecDestroy(e), CUDA_SUCCESS);
	CUgraph all[] = { g1, g2, g3, g4 };
	for (size_t i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(K.GraphDestroy(all[i]), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemFree(d), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(K.StreamDestroy(s), CUDA_SUCCESS);
}

/* A graph that replays a failing body fails as the launch would. */
static void test_replay_failure(void)
{
	CUfunction f = K.define("fails_in_graph", NULL, 0, fail_body, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CUstream s = new_stream();
	CU_ASSERT_EQUAL(K.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(launch(f, s, NULL), CUDA_SUCCESS);
	CUgraph g = NULL;
	CU_ASSERT_EQUAL_FATAL(K.EndCapture(s, &g), CUDA_SUCCESS);
	CUgraphExec e = NULL;
	CU_ASSERT_EQUAL_FATAL(K.Instantiate(&e, g, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(K.GraphLaunch(e, s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_ASSERT_EQUAL(K.ExecDestroy(e), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(K.GraphDestroy(g), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(K.StreamDestroy(s), CUDA_SUCCESS);
}

/* ---- the stand-in runtime ---- */

static struct {
	__typeof__(&cudaStreamCreate) StreamCreate;
	__typeof__(&cudaStreamDestroy) StreamDestroy;
	__typeof__(&cudaStreamBeginCapture) BeginCapture;
	__typeof__(&cudaStreamEndCapture) EndCapture;
	__typeof__(&cudaLaunchKernel) Launch;
	__typeof__(&cudaGraphInstantiate) Instantiate;
	__typeof__(&cudaGraphLaunch) GraphLaunch;
	__typeof__(&cudaGraphExecDestroy) ExecDestroy;
	__typeof__(&cudaGraphDestroy) GraphDestroy;
	__typeof__(&cudaGraphGetNodes) GetNodes;
	__typeof__(&cudaGraphNodeGetType) NodeType;
	__typeof__(&cudaGraphKernelNodeGetParams) GetParams;
	__typeof__(&cudaGraphKernelNodeSetParams) SetParams;
	__typeof__(&cudaGraphExecKernelNodeSetParams) ExecSetParams;
	__typeof__(&cudaGraphExecUpdate) ExecUpdate;
} RT;

static int load_cudart(void)
{
	void *rt = dlopen(kvt_path("fakecuda/libcudart.so.13"), RTLD_NOW);
	if (!rt)
		return -1;
#define S(f, s) RT.f = (__typeof__(RT.f))dlsym(rt, s)
	S(StreamCreate, "cudaStreamCreate");
	S(StreamDestroy, "cudaStreamDestroy");
	S(BeginCapture, "cudaStreamBeginCapture");
	S(EndCapture, "cudaStreamEndCapture");
	S(Launch, "cudaLaunchKernel");
	S(Instantiate, "cudaGraphInstantiate");
	S(GraphLaunch, "cudaGraphLaunch");
	S(ExecDestroy, "cudaGraphExecDestroy");
	S(GraphDestroy, "cudaGraphDestroy");
	S(GetNodes, "cudaGraphGetNodes");
	S(NodeType, "cudaGraphNodeGetType");
	S(GetParams, "cudaGraphKernelNodeGetParams");
	S(SetParams, "cudaGraphKernelNodeSetParams");
	S(ExecSetParams, "cudaGraphExecKernelNodeSetParams");
	S(ExecUpdate, "cudaGraphExecUpdate");
#undef S
	void **f = (void **)&RT;
	for (size_t i = 0; i < sizeof RT / sizeof(void *); i++)
		if (!f[i])
			return -1;
	return 0;
}

static cudaGraph_t rt_capture(cudaStream_t s, const uint64_t *tags, unsigned nr)
{
	struct fa_params p = { 0 };
	void *args[] = { &p };
	dim3 one = { 1, 1, 1 };
	CU_ASSERT_EQUAL(RT.BeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	for (unsigned i = 0; i < nr; i++) {
		p.tag = tags[i];
		CU_ASSERT_EQUAL(RT.Launch((const void *)fa_kernel(), one, one, args, 0, s),
				cudaSuccess);
	}
	cudaGraph_t g = NULL;
	CU_ASSERT_EQUAL(RT.EndCapture(s, &g), cudaSuccess);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	return g;
}

static uint64_t rt_replay_tag(cudaGraphExec_t e, cudaStream_t s)
{
	seen = (struct seen){ 0 };
	CU_ASSERT_EQUAL(RT.GraphLaunch(e, s), cudaSuccess);
	return seen.calls == 1 ? seen.tag : 0;
}

/* llama.cpp's path: capture, nodes and their params, set them on the graph
 * and on the exec, update the exec from a new capture. */
static void test_cudart(void)
{
	CU_ASSERT_EQUAL_FATAL(load_cudart(), 0);
	cudaStream_t s = NULL;
	CU_ASSERT_EQUAL_FATAL(RT.StreamCreate(&s), cudaSuccess);
	uint64_t tags[3] = { 51, 52, 53 };
	cudaGraph_t g = rt_capture(s, &tags[0], 1);
	cudaGraphExec_t e = NULL;
	CU_ASSERT_EQUAL_FATAL(RT.Instantiate(&e, g, 0), cudaSuccess);
	CU_ASSERT_EQUAL(rt_replay_tag(e, s), 51);
	size_t nr = 0;
	CU_ASSERT_EQUAL(RT.GetNodes(g, NULL, &nr), cudaSuccess);
	CU_ASSERT_EQUAL_FATAL(nr, 1);
	cudaGraphNode_t n = NULL;
	CU_ASSERT_EQUAL(RT.GetNodes(g, &n, &nr), cudaSuccess);
	enum cudaGraphNodeType type = cudaGraphNodeTypeCount;
	CU_ASSERT_EQUAL(RT.NodeType(n, &type), cudaSuccess);
	CU_ASSERT_EQUAL(type, cudaGraphNodeTypeKernel);
	struct cudaKernelNodeParams kp = { 0 };
	CU_ASSERT_EQUAL_FATAL(RT.GetParams(n, &kp), cudaSuccess);
	CU_ASSERT_PTR_EQUAL(kp.func, (void *)fa_kernel());
	CU_ASSERT_EQUAL(((const struct fa_params *)kp.kernelParams[0])->tag, 51);
	struct fa_params p = { .tag = 54 };
	void *args[] = { &p };
	kp.kernelParams = args;
	CU_ASSERT_EQUAL(RT.ExecSetParams(e, n, &kp), cudaSuccess);
	CU_ASSERT_EQUAL(rt_replay_tag(e, s), 54);
	p.tag = 55;
	CU_ASSERT_EQUAL(RT.SetParams(n, &kp), cudaSuccess);
	cudaGraphExecUpdateResultInfo info = { cudaGraphExecUpdateError, NULL, NULL };
	CU_ASSERT_EQUAL(RT.ExecUpdate(e, g, &info), cudaSuccess);
	CU_ASSERT_EQUAL(info.result, cudaGraphExecUpdateSuccess);
	CU_ASSERT_EQUAL(rt_replay_tag(e, s), 55);
	cudaGraph_t g2 = rt_capture(s, &tags[1], 2);
	CU_ASSERT_EQUAL(RT.ExecUpdate(e, g2, &info), cudaErrorGraphExecUpdateFailure);
	CU_ASSERT_EQUAL(info.result, cudaGraphExecUpdateErrorTopologyChanged);
	CU_ASSERT_EQUAL(rt_replay_tag(e, s), 55);
	CU_ASSERT_EQUAL(RT.ExecDestroy(e), cudaSuccess);
	CU_ASSERT_EQUAL(RT.GraphDestroy(g), cudaSuccess);
	CU_ASSERT_EQUAL(RT.GraphDestroy(g2), cudaSuccess);
	CU_ASSERT_EQUAL(RT.StreamDestroy(s), cudaSuccess);
}

/* ---- the table ---- */

static void *define_some(void *out)
{
	CUfunction *f = out;
	struct fakecuda_param decl = { 8, 8 };
	for (int i = 0; i < 4; i++)
		f[i] = K.define("threaded", &decl, 1, nop_body, NULL);
	return NULL;
}

/* Four threads define four kernels each: sixteen distinct handles. Then
 * the table fills: a define past the last slot is NULL, and the handles
 * made before still answer. Runs last. */
static void test_define_threads_and_limit(void)
{
	CUfunction f[4][4];
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, define_some, f[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 16; i++) {
		CU_ASSERT_PTR_NOT_NULL(f[i / 4][i % 4]);
		for (int j = 0; j < i; j++)
			CU_ASSERT_PTR_NOT_EQUAL(f[i / 4][i % 4], f[j / 4][j % 4]);
	}
	int made = 0;
	while (made < 100 && K.define("filler", NULL, 0, nop_body, NULL))
		made++;
	CU_ASSERT(made > 0 && made < 64);
	CU_ASSERT_PTR_NULL(K.define("one more", NULL, 0, nop_body, NULL));
	const char *name = NULL;
	CU_ASSERT_EQUAL(K.Name(&name, f[3][3]), CUDA_SUCCESS);
	CU_ASSERT_STRING_EQUAL(name ? name : "", "threaded");
	seen = (struct seen){ 0 };
	struct fa_params p = { .tag = 61 };
	void *params[] = { &p };
	CU_ASSERT_EQUAL(launch(fa_kernel(), NULL, params), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(seen.tag, 61);
}

static CU_TestInfo tests_kernels[] = {
	{ "declared layout: 600-byte struct and 20 more", test_layout },
	{ "65 parameters; none", test_many_params },
	{ "bad declarations are refused", test_bad_declarations },
	{ "cuFuncGetName", test_names },
	{ "body reads hidden device memory at HBM cost", test_kread_device },
	{ "body reads pinned/registered memory zero-copy", test_kread_zero_copy },
	{ "kaccess faults managed memory; kflops", test_kaccess_kflops },
	{ "kread/kwrite/kaccess/kflops outside a body", test_outside_body },
	{ "a body's accesses let another thread's call through", test_body_lets_calls_through },
	{ "a failing body fails the launch", test_body_failure },
	{ "arguments are copied at launch", test_args_copied },
	{ "captured graph replays the body", test_capture_replay },
	{ "kernel node params in graph and exec", test_set_params },
	{ "cuGraphExecUpdate", test_exec_update },
	{ "a failing body fails the graph launch", test_replay_failure },
	{ "stand-in runtime: node params and exec update", test_cudart },
	{ "define from threads; the table fills", test_define_threads_and_limit },
	CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {
	{ "fakecuda_kernels", NULL, NULL, NULL, NULL, tests_kernels },
	CU_SUITE_INFO_NULL,
};

int main(void)
{
	setenv("FAKECUDA_DEVICE_BYTES", "64M", 1);
	if (load_driver() || load_kernel_api()) {
		fprintf(stderr, "cannot load %s: %s\n", kvt_path("fakecuda/libcuda.so.1"), dlerror());
		return 1;
	}
	return kvt_test_main(suites);
}
