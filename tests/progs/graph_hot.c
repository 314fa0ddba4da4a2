// SPDX-License-Identifier: MIT
/* Test program for tests/unit/test_launch_graph.c (SIMULATED GPU): the hot
 * chunks of a device buffer are read by kernels that reach the driver other
 * than through cuLaunchKernel.
 *
 *   graph_hot MODE MS [devarg]
 *                       one 128 MiB device buffer (64 chunks; kvtier
 *                       redirects it to managed memory on the far tier);
 *                       for MS milliseconds, steps of one touch kernel over
 *                       64 KiB of each hot chunk (HOT below, a different
 *                       64 KiB each step), launched:
 *     eager   with cuLaunchKernel;
 *     ex      with cuLaunchKernelEx;
 *     graph   from a CUDA graph: the kernel is captured once on a stream
 *             (cuStreamBeginCapture/EndCapture), the graph instantiated and
 *             destroyed (as PyTorch does), and each step updates the ranges
 *             array the kernel reads and calls cuGraphLaunch;
 *     update  the same, but the graph instantiated first is one whose
 *             kernel reads an empty ranges array, and the executable graph
 *             is then updated in place (cuGraphExecUpdate, as llama.cpp
 *             does) from a second capture, the one graph mode instantiates.
 *   devarg      the ranges array lives in device memory (a 4 KiB cuMemAlloc,
 *               filled with cuMemcpyHtoD before each step), as a real
 *               kernel's would: kvtier's launch scan must not read it.
 *
 * Prints key=value lines: hot chunks resident in HBM at the end
 * (hot_in_hbm), other chunks in HBM (cold_in_hbm), steps, and the bytes
 * the simulated GPU accessed (gpu_bytes: the kernel did read its ranges).
 * Exit 0, 77
 * without the stand-in, 1 on a failed call. Resolves the driver as
 * libcudart does (dlopen, cuGetProcAddress), so kvtier's hooks see every
 * call. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "fakecuda/fakecuda.h"
#include "hot_prog.h"

#define CHUNK (2ull << 20)
#define NR_CHUNKS 64
#define READ_BYTES (64u << 10)

static const unsigned hot[] = { 7, 19, 38, 50 };
#define NR_HOT (sizeof hot / sizeof hot[0])

static struct {
	CUresult (*init)(unsigned);
	CUresult (*dev_get)(CUdevice *, int);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*stream_create)(CUstream *, unsigned);
	CUresult (*stream_sync)(CUstream);
	CUresult (*stream_destroy)(CUstream);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, CUstream, void **, void **);
	CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
	CUresult (*begin_capture)(CUstream, CUstreamCaptureMode);
	CUresult (*end_capture)(CUstream, CUgraph *);
	CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*graph_destroy)(CUgraph);
	CUresult (*graph_launch)(CUgraphExec, CUstream);
	CUresult (*exec_destroy)(CUgraphExec);
	CUresult (*exec_update)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
	CUfunction (*touch)(void);
	int (*location)(const void *, CUmemLocationType *, int *);
	int (*counters)(struct fakecuda_counters *);
} d;

/* The kernel's argument, alone on its page: updated before every step. */
static struct {
	struct fakecuda_range r[4096 / sizeof(struct fakecuda_range)];
} arg __attribute__((aligned(4096)));

static int resolve(void)
{
	void *h;
	gpa_t gpa = hot_prog_gpa(&h);
	if (!gpa)
		return -1;
#define GET(f, name, ver) if (gpa(name, (void **)&d.f, ver, 0, NULL) || !d.f) return -1
	GET(init, "cuInit", 2000);
	GET(dev_get, "cuDeviceGet", 2000);
	GET(retain, "cuDevicePrimaryCtxRetain", 7000);
	GET(set_current, "cuCtxSetCurrent", 4000);
	GET(alloc, "cuMemAlloc", 3020);
	GET(free, "cuMemFree", 3020);
	GET(htod, "cuMemcpyHtoD", 3020);
	GET(stream_create, "cuStreamCreate", 2000);
	GET(stream_sync, "cuStreamSynchronize", 2000);
	GET(stream_destroy, "cuStreamDestroy", 4000);
	GET(launch, "cuLaunchKernel", 4000);
	GET(launch_ex, "cuLaunchKernelEx", 11060);
	GET(begin_capture, "cuStreamBeginCapture", 10010);
	GET(end_capture, "cuStreamEndCapture", 10000);
	GET(instantiate, "cuGraphInstantiate", 12000);
	GET(graph_destroy, "cuGraphDestroy", 10000);
	GET(graph_launch, "cuGraphLaunch", 10000);
	GET(exec_destroy, "cuGraphExecDestroy", 10000);
	GET(exec_update, "cuGraphExecUpdate", 12000);
#undef GET
	*(void **)&d.touch = dlsym(h, "fakecuda_touch_kernel");
	*(void **)&d.location = dlsym(h, "fakecuda_block_location");
	*(void **)&d.counters = dlsym(h, "fakecuda_get_counters");
	return d.touch && d.location && d.counters ? 0 : -2;
}

/* Step n's 64 KiB of each hot chunk, into the array the kernel reads. */
static void fill(CUdeviceptr base, unsigned n)
{
	for (unsigned i = 0; i < NR_HOT; i++) {
		uint64_t off = hot[i] * CHUNK + (uint64_t)(n % (CHUNK / READ_BYTES)) * READ_BYTES;
		arg.r[i] = (struct fakecuda_range){ base + off, READ_BYTES, 0 };
	}
}

static const struct fakecuda_range *rp = arg.r;
static unsigned nr = NR_HOT;
static void *params[] = { &rp, &nr, NULL };
static CUdeviceptr dev_arg;          /* devarg: the array the kernel reads */

/* devarg: the step's ranges into the device copy the kernel reads. */
static int publish(void)
{
	return dev_arg && d.htod(dev_arg, arg.r, NR_HOT * sizeof arg.r[0]) ? -1 : 0;
}

static int launch_with(CUstream s, void **p)
{
	return d.launch(d.touch(), 1, 1, 1, 1, 1, 1, 0, s, p, NULL) ? -1 : 0;
}

static int launch_eager(CUstream s)
{
	return launch_with(s, params);
}

/* update: the first graph's kernel reads no range */
static const struct fakecuda_range none[1];
static const struct fakecuda_range *rp_none = none;
static unsigned nr_none;
static void *params_none[] = { &rp_none, &nr_none, NULL };

/* A graph of one kernel launched with p, captured on s. */
static int capture(CUstream s, void **p, CUgraph *g)
{
	*g = NULL;
	return d.begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) || launch_with(s, p) ||
	       d.end_capture(s, g) || !*g ? -1 : 0;
}

static int launch_ex(CUstream s)
{
	CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
			       .blockDimY = 1, .blockDimZ = 1, .hStream = s };
	return d.launch_ex(&cfg, d.touch(), params, NULL) ? -1 : 0;
}

static int on_device(CUdeviceptr p)
{
	CUmemLocationType t;
	int id;
	return !d.location((const void *)(uintptr_t)p, &t, &id) && t == CU_MEM_LOCATION_TYPE_DEVICE;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "graph";
	unsigned ms = argc > 2 ? (unsigned)atoi(argv[2]) : 1500;
	int update = !strcmp(mode, "update");
	int graph = update || !strcmp(mode, "graph"), ex = !strcmp(mode, "ex");
	int devarg = argc > 3 && !strcmp(argv[3], "devarg");
	if ((!graph && !ex && strcmp(mode, "eager")) || (argc > 3 && !devarg)) {
		fprintf(stderr, "usage: graph_hot eager|ex|graph|update [MS [devarg]]\n");
		return 2;
	}
	int r = resolve();
	if (r)
		return r == -1 ? 1 : 77;
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr base;
	CUstream s;
	if (d.init(0) || d.dev_get(&dev, 0) || d.retain(&ctx, dev) || d.set_current(ctx) ||
	    d.alloc(&base, NR_CHUNKS * CHUNK) || d.stream_create(&s, CU_STREAM_NON_BLOCKING)) {
		fprintf(stderr, "graph_hot: driver set-up failed\n");
		return 1;
	}
	if (devarg && d.alloc(&dev_arg, sizeof arg)) {
		fprintf(stderr, "graph_hot: device argument allocation failed\n");
		return 1;
	}
	if (devarg)
		rp = (const struct fakecuda_range *)(uintptr_t)dev_arg;
	CUgraphExec exec = NULL;
	fill(base, 0);
	if (publish()) {
		fprintf(stderr, "graph_hot: copy of the ranges failed\n");
		return 1;
	}
	if (graph) {
		CUgraph g = NULL, g2 = NULL;
		CUgraphExecUpdateResultInfo info;
		if (capture(s, update ? params_none : params, &g) || d.instantiate(&exec, g, 0) ||
		    d.graph_destroy(g) ||
		    (update && (capture(s, params, &g2) || d.exec_update(exec, g2, &info) ||
				d.graph_destroy(g2)))) {
			fprintf(stderr, "graph_hot: capture failed\n");
			return 1;
		}
	}
	struct fakecuda_counters c0, c1;
	d.counters(&c0);
	uint64_t t0 = now_ms();
	unsigned n = 0;
	for (; now_ms() - t0 < ms; n++) {
		fill(base, n);
		int bad = publish() ||
			  (graph ? d.graph_launch(exec, s) != CUDA_SUCCESS
				 : ex ? launch_ex(s) : launch_eager(s));
		if (bad || d.stream_sync(s)) {
			fprintf(stderr, "graph_hot: step %u failed\n", n);
			return 1;
		}
		usleep(500);
	}
	d.counters(&c1);
	unsigned hot_hbm = 0, cold_hbm = 0;
	for (unsigned c = 0; c < NR_CHUNKS; c++) {
		int is_hot = 0;
		for (unsigned i = 0; i < NR_HOT; i++)
			is_hot |= hot[i] == c;
		if (on_device(base + c * CHUNK))
			*(is_hot ? &hot_hbm : &cold_hbm) += 1;
	}
	printf("steps=%u\nhot_chunks=%zu\nhot_in_hbm=%u\ncold_in_hbm=%u\ngpu_bytes=%llu\n", n,
	       NR_HOT, hot_hbm, cold_hbm,
	       (unsigned long long)(c1.bytes_hbm + c1.bytes_remote - c0.bytes_hbm - c0.bytes_remote));
	fflush(stdout);
	if ((graph && d.exec_destroy(exec)) || d.stream_destroy(s) || d.free(base) ||
	    (dev_arg && d.free(dev_arg))) {
		fprintf(stderr, "graph_hot: teardown failed\n");
		return 1;
	}
	return 0;
}
