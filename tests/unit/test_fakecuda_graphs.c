/* SPDX-License-Identifier: MIT */
/* CUnit suite for stream capture, graphs and cuLaunchKernelEx in the
 * SIMULATED CUDA driver (build/fakecuda/libcuda.so.1), reached as libcudart
 * reaches it (tests/unit/fakecuda_drv.h), and for the stand-in runtime's
 * capture and graph wrappers. Runs with FAKECUDA_DEVICE_BYTES=64M. */
#include "unit/fakecuda_drv.h"

#include <cuda_runtime_api.h>
#include <stdbool.h>

/* The older ABIs, which cuda.h declares only to the driver's own build. */
typedef CUresult (*instantiate_v11_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
typedef CUresult (*kernel_params_v10_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v1 *);

/* Driver entry points this suite needs beyond fakecuda_drv.h's D. */
static struct {
	__typeof__(&cuLaunchKernelEx) LaunchEx;
	__typeof__(&cuLaunchKernelEx) LaunchExPt;     /* the _ptsz export */
	__typeof__(&cuStreamCreate) StreamCreate;
	__typeof__(&cuStreamDestroy) StreamDestroy;
	__typeof__(&cuStreamBeginCapture_v2) BeginCapture;
	__typeof__(&cuStreamEndCapture) EndCapture;
	__typeof__(&cuStreamIsCapturing) IsCapturing;
	__typeof__(&cuMemsetD8Async) MemsetAsync;
	__typeof__(&cuMemcpyHtoDAsync_v2) HtoDAsync;
	__typeof__(&cuGraphCreate) GraphCreate;
	__typeof__(&cuGraphDestroy) GraphDestroy;
	__typeof__(&cuGraphGetNodes) GetNodes;
	__typeof__(&cuGraphNodeGetType) NodeType;
	__typeof__(&cuGraphKernelNodeGetParams_v2) KernelParams;
	kernel_params_v10_fn KernelParamsV1;
	__typeof__(&cuGraphInstantiateWithFlags) Instantiate;
	instantiate_v11_fn InstantiateV2;   /* 5 arguments, CUDA 11 */
	__typeof__(&cuGraphInstantiateWithParams) InstantiateParams;
	__typeof__(&cuGraphExecDestroy) ExecDestroy;
	__typeof__(&cuGraphLaunch) GraphLaunch;
	__typeof__(&cuGraphUpload) Upload;
} G;

static int load_graph_api(void)
{
#define L(f, s, v, fl) G.f = get(s, v, fl)
	L(LaunchEx, "cuLaunchKernelEx", 11060, 0);
	L(LaunchExPt, "cuLaunchKernelEx", 11060, 2);
	L(StreamCreate, "cuStreamCreate", 2000, 0);
	L(StreamDestroy, "cuStreamDestroy", 4000, 0);
	L(BeginCapture, "cuStreamBeginCapture", 10010, 0);
	L(EndCapture, "cuStreamEndCapture", 10000, 0);
	L(IsCapturing, "cuStreamIsCapturing", 10000, 0);
	L(MemsetAsync, "cuMemsetD8Async", 3020, 0);
	L(HtoDAsync, "cuMemcpyHtoDAsync", 3020, 0);
	L(GraphCreate, "cuGraphCreate", 10000, 0);
	L(GraphDestroy, "cuGraphDestroy", 10000, 0);
	L(GetNodes, "cuGraphGetNodes", 10000, 0);
	L(NodeType, "cuGraphNodeGetType", 10000, 0);
	L(KernelParams, "cuGraphKernelNodeGetParams", 12000, 0);
	L(KernelParamsV1, "cuGraphKernelNodeGetParams", 10000, 0);
	L(Instantiate, "cuGraphInstantiate", 12000, 0);
	L(InstantiateV2, "cuGraphInstantiate", 11000, 0);
	L(InstantiateParams, "cuGraphInstantiateWithParams", 12000, 0);
	L(ExecDestroy, "cuGraphExecDestroy", 10000, 0);
	L(GraphLaunch, "cuGraphLaunch", 10000, 0);
	L(Upload, "cuGraphUpload", 11010, 0);
#undef L
	void **f = (void **)&G;
	for (size_t i = 0; i < sizeof G / sizeof(void *); i++)
		if (!f[i])
			return -1;
	return 0;
}

/* ---- helpers ---- */

static CUstream new_stream(void)
{
	CUstream s = NULL;
	CU_ASSERT_EQUAL_FATAL(G.StreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	return s;
}

/* One touch-kernel launch of ranges[0..nr) on s, by cuLaunchKernel. */
static CUresult touch(CUstream s, const struct fakecuda_range *ranges, unsigned nr)
{
	void *params[] = { &ranges, &nr };
	return D.Launch(D.touch(), 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}

static CUlaunchConfig config(CUstream s)
{
	CUlaunchConfig c = { .gridDimX = 2, .gridDimY = 3, .gridDimZ = 4, .blockDimX = 32,
			     .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = 128, .hStream = s };
	return c;
}

static CUgraphExec instantiate(CUgraph g)
{
	CUgraphExec e = NULL;
	CU_ASSERT_EQUAL_FATAL(G.Instantiate(&e, g, 0), CUDA_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	return e;
}

/* The counter deltas a launch cares about, b - a. */
struct delta { uint64_t launches, faults, htod, hbm, ns; };

static struct delta diff(struct fakecuda_counters a, struct fakecuda_counters b)
{
	return (struct delta){ b.launches - a.launches, b.faults - a.faults,
			       b.bytes_htod - a.bytes_htod, b.bytes_hbm - a.bytes_hbm,
			       b.virtual_ns - a.virtual_ns };
}

static void free_managed(CUdeviceptr p)
{
	CU_ASSERT_EQUAL(D.MemFree(p), CUDA_SUCCESS);
}

/* ---- cuLaunchKernelEx ---- */

/* The same first touch of a host-resident block, once by cuLaunchKernel and
 * once by each cuLaunchKernelEx export: the same counter and clock deltas. */
static void test_launch_ex(void)
{
	CUdeviceptr p = managed(3 * BLK);
	struct fakecuda_range r[3] = { { p, 64, 1 }, { p + BLK, 64, 1 }, { p + 2 * BLK, 64, 1 } };
	D.reset();
	struct fakecuda_counters c0 = ctr();
	CU_ASSERT_EQUAL(touch(NULL, &r[0], 1), CUDA_SUCCESS);
	struct fakecuda_counters c1 = ctr();
	const struct fakecuda_range *rp = &r[1];
	unsigned nr = 1;
	void *params[] = { &rp, &nr };
	CUlaunchConfig cfg = config(NULL);
	CU_ASSERT_EQUAL(G.LaunchEx(&cfg, D.touch(), params, NULL), CUDA_SUCCESS);
	struct fakecuda_counters c2 = ctr();
	rp = &r[2];
	CU_ASSERT_EQUAL(G.LaunchExPt(&cfg, D.touch(), params, NULL), CUDA_SUCCESS);
	struct fakecuda_counters c3 = ctr();
	struct delta plain = diff(c0, c1), ex = diff(c1, c2), expt = diff(c2, c3);
	CU_ASSERT_EQUAL(plain.launches, 1);
	CU_ASSERT_EQUAL(plain.faults, 1);
	CU_ASSERT_EQUAL(plain.htod, BLK);
	CU_ASSERT(plain.ns > 0);
	CU_ASSERT(memcmp(&plain, &ex, sizeof plain) == 0);
	CU_ASSERT(memcmp(&plain, &expt, sizeof plain) == 0);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(loc_of(p + (CUdeviceptr)i * BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	/* what cuLaunchKernel refuses, cuLaunchKernelEx refuses too */
	CU_ASSERT_EQUAL(G.LaunchEx(NULL, D.touch(), params, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.LaunchEx(&cfg, (CUfunction)&nr, params, NULL), CUDA_ERROR_INVALID_HANDLE);
	CU_ASSERT_EQUAL(G.LaunchEx(&cfg, D.touch(), NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	cfg.numAttrs = 1;   /* attributes announced, none given */
	CU_ASSERT_EQUAL(G.LaunchEx(&cfg, D.touch(), params, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(ctr().launches, 3);
	free_managed(p);
}

/* ---- capture and replay ---- */

/* A touch kernel captured on s runs at neither capture nor EndCapture, and
 * at each cuGraphLaunch costs what the same launch costs; other streams
 * keep running at submission meanwhile. */
static void test_capture_replay(void)
{
	CUdeviceptr p = managed(2 * BLK);
	struct fakecuda_range r = { p, 4096, 1 }, other = { p + BLK, 64, 0 };
	CUstream s = new_stream(), s2 = new_stream();
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
	D.reset();
	CU_ASSERT_EQUAL(G.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.IsCapturing(s, &st), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	CU_ASSERT_EQUAL(touch(s, &r, 1), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.launches, 0);
	CU_ASSERT_EQUAL(c.faults, 0);
	CU_ASSERT_EQUAL(c.virtual_ns, 0);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	/* another stream is not captured */
	CU_ASSERT_EQUAL(touch(s2, &other, 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().launches, 1);
	CU_ASSERT_EQUAL(loc_of(p + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CUgraph g = NULL;
	CU_ASSERT_EQUAL(G.EndCapture(s, &g), CUDA_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(G.IsCapturing(s, &st), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(st, CU_STREAM_CAPTURE_STATUS_NONE);
	CUgraphExec e = instantiate(g);
	CU_ASSERT_EQUAL(G.Upload(e, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().launches, 1);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);

	/* first replay: the fault a plain launch of r would take */
	struct fakecuda_counters a = ctr();
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_SUCCESS);
	struct fakecuda_counters b = ctr();
	struct delta first = diff(a, b);
	CU_ASSERT_EQUAL(first.launches, 1);
	CU_ASSERT_EQUAL(first.faults, 1);
	CU_ASSERT_EQUAL(first.htod, BLK);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	/* second replay (resident now) costs what a plain launch costs */
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_SUCCESS);
	struct fakecuda_counters c2 = ctr();
	CU_ASSERT_EQUAL(touch(s, &r, 1), CUDA_SUCCESS);
	struct fakecuda_counters c3 = ctr();
	struct delta replay = diff(b, c2), plain = diff(c2, c3);
	CU_ASSERT_EQUAL(replay.launches, 1);
	CU_ASSERT_EQUAL(replay.faults, 0);
	CU_ASSERT_EQUAL(replay.hbm, 4096);
	CU_ASSERT(memcmp(&replay, &plain, sizeof plain) == 0);
	CU_ASSERT_EQUAL(G.ExecDestroy(e), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.GraphDestroy(g), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.StreamDestroy(s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.StreamDestroy(s2), CUDA_SUCCESS);
	free_managed(p);
}

/* The node holds the VALUES of the arguments at capture: the ranges pointer
 * and the count. What the pointer points to is read at each replay.
 *   ranges[0].ptr:  block 0 at capture and first launch, block 1 after
 *   |blk0|blk1|blk2|
 *     1st   2nd   -    (blk2 was the variable's value after capture: unused)
 */
static void test_replay_reads_ranges(void)
{
	CUdeviceptr p = managed(3 * BLK);
	struct fakecuda_range ranges[1] = { { p, 64, 1 } }, late = { p + 2 * BLK, 64, 1 };
	const struct fakecuda_range *rp = ranges;
	unsigned nr = 1;
	void *params[] = { &rp, &nr };
	CUstream s = new_stream();
	CUlaunchConfig cfg = config(s);
	CU_ASSERT_EQUAL(G.BeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.LaunchEx(&cfg, D.touch(), params, NULL), CUDA_SUCCESS);
	CUgraph g = NULL;
	CU_ASSERT_EQUAL(G.EndCapture(s, &g), CUDA_SUCCESS);
	/* the argument variables change after capture: the node kept copies */
	rp = &late;
	nr = 0;
	CUgraphExec e = instantiate(g);
	D.reset();
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(loc_of(p + BLK, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	/* the memory the recorded pointer names changes between launches */
	ranges[0].ptr = p + BLK;
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(loc_of(p + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(loc_of(p + 2 * BLK, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.launches, 2);
	CU_ASSERT_EQUAL(c.faults, 2);
	CU_ASSERT_EQUAL(c.bytes_htod, 2 * BLK);
	/* a recorded range that is no longer memory: the replay's error */
	ranges[0].ptr = 0x10;
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_ASSERT_EQUAL(G.ExecDestroy(e), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.GraphDestroy(g), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.StreamDestroy(s), CUDA_SUCCESS);
	free_managed(p);
}

/* PyTorch destroys the graph right after instantiating it. */
static void test_exec_outlives_graph(void)
{
	CUdeviceptr p = managed(BLK);
	struct fakecuda_range r = { p, 64, 0 };
	CUstream s = new_stream();
	CU_ASSERT_EQUAL(G.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(touch(s, &r, 1), CUDA_SUCCESS);
	CUgraph g = NULL;
	CU_ASSERT_EQUAL(G.EndCapture(s, &g), CUDA_SUCCESS);
	CUgraphExec e = instantiate(g);
	CU_ASSERT_EQUAL(G.GraphDestroy(g), CUDA_SUCCESS);
	D.reset();
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.GraphLaunch(e, NULL), CUDA_SUCCESS);   /* any stream */
	CU_ASSERT_EQUAL(ctr().launches, 2);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	/* the graph itself is gone */
	size_t n = 99;
	CU_ASSERT_EQUAL(G.GetNodes(g, NULL, &n), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(n, 99);
	CU_ASSERT_EQUAL(G.GraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
	CUgraphExec e2 = NULL;
	CU_ASSERT_EQUAL(G.Instantiate(&e2, g, 0), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_PTR_NULL(e2);
	CU_ASSERT_EQUAL(G.ExecDestroy(e), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.StreamDestroy(s), CUDA_SUCCESS);
	free_managed(p);
}

/* ---- inspecting a captured graph ---- */

/* A memset, a kernel (by cuLaunchKernelEx) and a copy, in that order; the
 * kernel node reports its geometry and its own copies of the arguments. */
static void test_nodes_and_params(void)
{
	CUdeviceptr d = 0, p = managed(BLK);
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&d, 4096), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemsetD8(d, 0x11, 4096), CUDA_SUCCESS);
	unsigned char host[16];
	memset(host, 0x22, sizeof host);
	struct fakecuda_range r = { p, 64, 1 };
	const struct fakecuda_range *rp = &r;
	unsigned nr = 1;
	void *params[] = { &rp, &nr };
	CUstream s = new_stream();
	CUlaunchConfig cfg = config(s);
	CU_ASSERT_EQUAL(G.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.MemsetAsync(d, 0xab, 1024, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.LaunchEx(&cfg, D.touch(), params, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.HtoDAsync(d + 1024, host, sizeof host, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.MemsetAsync(d + 1, 0, 1, s), CUDA_SUCCESS);   /* D8: any address */
	CUgraph g = NULL;
	CU_ASSERT_EQUAL(G.EndCapture(s, &g), CUDA_SUCCESS);
	unsigned char dev[4096];            /* device memory: read back with copies */
	CU_ASSERT_EQUAL(D.DtoH(dev, d, sizeof dev), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(dev[0], 0x11);      /* nothing ran at capture */
	CU_ASSERT_EQUAL(dev[1024], 0x11);

	size_t n = 0;
	CU_ASSERT_EQUAL(G.GetNodes(g, NULL, &n), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	CUgraphNode nodes[6] = { 0 };
	for (int i = 0; i < 6; i++)
		nodes[i] = (CUgraphNode)(uintptr_t)(i + 1);
	n = 6;
	CU_ASSERT_EQUAL(G.GetNodes(g, nodes, &n), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(n, 4);
	CU_ASSERT_PTR_NULL(nodes[4]);
	CU_ASSERT_PTR_NULL(nodes[5]);
	CUgraphNode one = NULL;
	n = 1;
	CU_ASSERT_EQUAL(G.GetNodes(g, &one, &n), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_PTR_EQUAL(one, nodes[0]);
	CU_ASSERT_EQUAL(G.GetNodes(g, nodes, NULL), CUDA_ERROR_INVALID_VALUE);
	const CUgraphNodeType want[] = { CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_KERNEL,
					 CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_MEMSET };
	for (int i = 0; i < 4; i++) {
		CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
		CU_ASSERT_EQUAL(G.NodeType(nodes[i], &t), CUDA_SUCCESS);
		CU_ASSERT_EQUAL(t, want[i]);
	}

	/* the caller's argument variables change: the node's copies do not */
	const struct fakecuda_range *captured = rp;
	rp = NULL;
	nr = 7;
	CUDA_KERNEL_NODE_PARAMS kp;
	memset(&kp, 0x5a, sizeof kp);
	CU_ASSERT_EQUAL(G.KernelParams(nodes[1], &kp), CUDA_SUCCESS);
	CU_ASSERT_PTR_EQUAL(kp.func, D.touch());
	CU_ASSERT(kp.gridDimX == 2 && kp.gridDimY == 3 && kp.gridDimZ == 4);
	CU_ASSERT(kp.blockDimX == 32 && kp.blockDimY == 1 && kp.blockDimZ == 1);
	CU_ASSERT_EQUAL(kp.sharedMemBytes, 128);
	CU_ASSERT_PTR_NULL(kp.extra);
	CU_ASSERT_PTR_NOT_NULL_FATAL(kp.kernelParams);
	CU_ASSERT(kp.kernelParams[0] != (void *)&rp && kp.kernelParams[1] != (void *)&nr);
	CU_ASSERT_PTR_EQUAL(*(const struct fakecuda_range *const *)kp.kernelParams[0], captured);
	CU_ASSERT_EQUAL(*(const unsigned *)kp.kernelParams[1], 1);
	CUDA_KERNEL_NODE_PARAMS_v1 k1;
	memset(&k1, 0x5a, sizeof k1);
	CU_ASSERT_EQUAL(G.KernelParamsV1(nodes[1], &k1), CUDA_SUCCESS);
	CU_ASSERT_PTR_EQUAL(k1.func, D.touch());
	CU_ASSERT_EQUAL(k1.gridDimZ, 4);
	CU_ASSERT_PTR_EQUAL(k1.kernelParams, kp.kernelParams);
	CU_ASSERT_EQUAL(G.KernelParams(nodes[0], &kp), CUDA_ERROR_INVALID_VALUE);   /* a memset */
	CU_ASSERT_EQUAL(G.KernelParams(nodes[1], NULL), CUDA_ERROR_INVALID_VALUE);

	/* replay: the memset, then the copy of the host bytes as they are now */
	memset(host, 0x33, sizeof host);
	CUgraphExec e = instantiate(g);
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.DtoH(dev, d, sizeof dev), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(dev[0], 0xab);
	CU_ASSERT_EQUAL(dev[1], 0);
	CU_ASSERT_EQUAL(dev[1023], 0xab);
	CU_ASSERT_EQUAL(dev[1024], 0x33);
	CU_ASSERT_EQUAL(dev[1039], 0x33);
	CU_ASSERT_EQUAL(dev[1040], 0x11);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);

	/* node handles die with their graph; the exec does not */
	CU_ASSERT_EQUAL(G.GraphDestroy(g), CUDA_SUCCESS);
	CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
	CU_ASSERT_EQUAL(G.NodeType(nodes[1], &t), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(t, CU_GRAPH_NODE_TYPE_EMPTY);
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.ExecDestroy(e), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.StreamDestroy(s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemFree(d), CUDA_SUCCESS);
	free_managed(p);
}

/* ---- handles, errors and the other entry points ---- */

/* A destroyed exec is refused, and its handle is never handed out again
 * (its header stays as a tombstone), so it stays refused. */
static void test_destroyed_exec(void)
{
	CUdeviceptr p = managed(BLK);
	struct fakecuda_range r = { p, 64, 0 };
	CUstream s = new_stream();
	CU_ASSERT_EQUAL(G.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(touch(s, &r, 1), CUDA_SUCCESS);
	CUgraph g = NULL;
	CU_ASSERT_EQUAL(G.EndCapture(s, &g), CUDA_SUCCESS);
	CUgraphExec e = instantiate(g);
	CU_ASSERT_EQUAL(G.ExecDestroy(e), CUDA_SUCCESS);
	D.reset();
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.Upload(e, s), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.ExecDestroy(e), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(ctr().launches, 0);
	CUgraphExec again[4];
	for (int i = 0; i < 4; i++) {
		again[i] = instantiate(g);
		CU_ASSERT(again[i] != e);
	}
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.GraphLaunch(again[3], s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().launches, 1);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(G.ExecDestroy(again[i]), CUDA_SUCCESS);
	/* handles that never were */
	int junk = 0;
	CU_ASSERT_EQUAL(G.GraphLaunch(NULL, s), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.GraphLaunch((CUgraphExec)&junk, s), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.GraphDestroy((CUgraph)&junk), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.NodeType((CUgraphNode)&junk, &(CUgraphNodeType){ 0 }),
			CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.GraphDestroy(g), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.StreamDestroy(s), CUDA_SUCCESS);
	free_managed(p);
}

static void test_capture_states(void)
{
	CUstream s = new_stream();
	CUgraph g = (CUgraph)&g;
	CU_ASSERT_EQUAL(G.EndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
	CU_ASSERT_EQUAL(G.BeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
			CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CU_ASSERT_EQUAL(G.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
	/* an empty capture is an empty graph; a graph cannot be launched into
	 * a capturing stream (that would be a child graph) */
	CUgraph empty = NULL;
	CU_ASSERT_EQUAL(G.GraphCreate(&empty, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.GraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
	CUgraphExec e = instantiate(empty);
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CU_ASSERT_EQUAL(G.EndCapture(s, &g), CUDA_SUCCESS);
	size_t n = 99;
	CU_ASSERT_EQUAL(G.GetNodes(g, NULL, &n), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(n, 0);
	D.reset();
	CU_ASSERT_EQUAL(G.GraphLaunch(e, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().virtual_ns, 0);
	/* the other instantiation ABIs */
	CUgraphExec e2 = NULL, e3 = NULL;
	CUgraphNode err = (CUgraphNode)&n;
	char log[8] = "xxxxxxx";
	CU_ASSERT_EQUAL(G.InstantiateV2(&e2, g, &err, log, sizeof log), CUDA_SUCCESS);
	CU_ASSERT_PTR_NULL(err);
	CU_ASSERT_EQUAL(log[0], '\0');
	CUDA_GRAPH_INSTANTIATE_PARAMS ip = { .flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
					     .hUploadStream = s,
					     .hErrNode_out = (CUgraphNode)&n,
					     .result_out = CUDA_GRAPH_INSTANTIATE_ERROR };
	CU_ASSERT_EQUAL(G.InstantiateParams(&e3, g, &ip), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
	CU_ASSERT_PTR_NULL(ip.hErrNode_out);
	CU_ASSERT(e2 && e3 && e2 != e3);
	CU_ASSERT_EQUAL(G.InstantiateParams(&e3, g, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.Instantiate(&e3, g, 1ull << 40), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(G.ExecDestroy(e2), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.ExecDestroy(e3), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.ExecDestroy(e), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.GraphDestroy(g), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.GraphDestroy(empty), CUDA_SUCCESS);
	/* a stream destroyed mid-capture takes its graph with it */
	CU_ASSERT_EQUAL(G.BeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(G.MemsetAsync(0x1000, 0, 1, s), CUDA_SUCCESS);   /* recorded, not run */
	CU_ASSERT_EQUAL(G.StreamDestroy(s), CUDA_SUCCESS);
}

/* The graph rows of the resolver: versions, the cuGraphInstantiate ABIs
 * and the per-thread exports. */
static void expect(const char *sym, int ver, int flags, const char *export_name)
{
	void *want = export_name ? dlsym(drv, export_name) : NULL;
	if (export_name)
		CU_ASSERT_PTR_NOT_NULL(want);
	CU_ASSERT_PTR_EQUAL(get(sym, ver, flags), want);
}

static void test_resolver_rows(void)
{
	expect("cuLaunchKernelEx", 11060, 0, "cuLaunchKernelEx");
	expect("cuLaunchKernelEx", 12000, 2, "cuLaunchKernelEx_ptsz");
	expect("cuLaunchKernelEx", 11050, 0, NULL);
	expect("cuGraphInstantiate", 10000, 0, "cuGraphInstantiate");
	expect("cuGraphInstantiate", 11080, 0, "cuGraphInstantiate_v2");
	expect("cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags");
	expect("cuGraphInstantiate", 13000, 2, "cuGraphInstantiateWithFlags");
	expect("cuGraphInstantiateWithFlags", 11040, 0, "cuGraphInstantiateWithFlags");
	expect("cuGraphInstantiateWithParams", 12000, 2, "cuGraphInstantiateWithParams_ptsz");
	expect("cuGraphKernelNodeGetParams", 11080, 0, "cuGraphKernelNodeGetParams");
	expect("cuGraphKernelNodeGetParams", 12000, 0, "cuGraphKernelNodeGetParams_v2");
	expect("cuGraphLaunch", 10000, 2, "cuGraphLaunch_ptsz");
	expect("cuGraphLaunch", 13000, 0, "cuGraphLaunch");
	expect("cuGraphUpload", 11010, 2, "cuGraphUpload_ptsz");
	expect("cuGraphUpload", 11000, 0, NULL);
	expect("cuGraphDestroy", 10000, 0, "cuGraphDestroy");
	expect("cuGraphExecDestroy", 10000, 0, "cuGraphExecDestroy");
	expect("cuGraphGetNodes", 10000, 0, "cuGraphGetNodes");
	expect("cuGraphNodeGetType", 10000, 0, "cuGraphNodeGetType");
	expect("cuStreamEndCapture", 10000, 2, "cuStreamEndCapture_ptsz");
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
	__typeof__(&cudaGetLastError) LastError;
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
	S(LastError, "cudaGetLastError");
#undef S
	void **f = (void **)&RT;
	for (size_t i = 0; i < sizeof RT / sizeof(void *); i++)
		if (!f[i])
			return -1;
	return 0;
}

/* Capture, instantiate, destroy the graph, replay twice, destroy the exec:
 * all through libcudart.so.13, which reaches the driver by its resolver. */
static void test_cudart(void)
{
	CU_ASSERT_EQUAL_FATAL(load_cudart(), 0);
	CUdeviceptr p = managed(2 * BLK);
	struct fakecuda_range ranges[1] = { { p, 64, 1 } };
	const struct fakecuda_range *rp = ranges;
	unsigned nr = 1;
	void *args[] = { &rp, &nr };
	cudaStream_t s = NULL;
	CU_ASSERT_EQUAL_FATAL(RT.StreamCreate(&s), cudaSuccess);
	D.reset();
	CU_ASSERT_EQUAL(RT.BeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	dim3 one = { 1, 1, 1 };
	CU_ASSERT_EQUAL(RT.Launch((const void *)D.touch(), one, one, args, 0, s), cudaSuccess);
	CU_ASSERT_EQUAL(ctr().launches, 0);
	cudaGraph_t g = NULL;
	CU_ASSERT_EQUAL(RT.EndCapture(s, &g), cudaSuccess);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	cudaGraphExec_t e = NULL;
	CU_ASSERT_EQUAL(RT.Instantiate(&e, g, 0), cudaSuccess);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_EQUAL(RT.GraphDestroy(g), cudaSuccess);
	CU_ASSERT_EQUAL(RT.GraphLaunch(e, s), cudaSuccess);
	ranges[0].ptr = p + BLK;
	CU_ASSERT_EQUAL(RT.GraphLaunch(e, s), cudaSuccess);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.launches, 2);
	CU_ASSERT_EQUAL(c.faults, 2);
	CU_ASSERT_EQUAL(loc_of(p + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(RT.ExecDestroy(e), cudaSuccess);
	CU_ASSERT_EQUAL(RT.GraphLaunch(e, s), cudaErrorInvalidValue);
	CU_ASSERT_EQUAL(RT.LastError(), cudaErrorInvalidValue);
	CU_ASSERT_EQUAL(RT.EndCapture(s, &g), cudaErrorIllegalState);
	CU_ASSERT_EQUAL(RT.Instantiate(NULL, g, 0), cudaErrorInvalidValue);
	CU_ASSERT_EQUAL(RT.StreamDestroy(s), cudaSuccess);
	free_managed(p);
}

static CU_TestInfo tests_graphs[] = {
	{ "cuLaunchKernelEx touches like cuLaunchKernel", test_launch_ex },
	{ "captured kernel runs at graph launch only", test_capture_replay },
	{ "replay reads the ranges as of replay", test_replay_reads_ranges },
	{ "exec outlives its graph", test_exec_outlives_graph },
	{ "nodes, types, kernel params, memset/memcpy replay", test_nodes_and_params },
	{ "destroyed exec fails cleanly", test_destroyed_exec },
	{ "capture states and instantiation ABIs", test_capture_states },
	{ "resolver rows", test_resolver_rows },
	{ "stand-in runtime capture and graphs", test_cudart },
	CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {
	{ "fakecuda_graphs", NULL, NULL, NULL, NULL, tests_graphs },
	CU_SUITE_INFO_NULL,
};

int main(void)
{
	setenv("FAKECUDA_DEVICE_BYTES", "64M", 1);
	if (load_driver() || load_graph_api()) {
		fprintf(stderr, "cannot load %s: %s\n", kvt_path("fakecuda/libcuda.so.1"), dlerror());
		return 1;
	}
	return kvt_test_main(suites);
}
