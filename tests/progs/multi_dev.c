// SPDX-License-Identifier: MIT
/* Test program for tests/unit/test_migrate_devices.c (SIMULATED GPU with
 * FAKECUDA_DEVICES >= 2): device buffers allocated on devices other than 0,
 * whose hot chunks the migration thread must bring to the device each was
 * allocated for.
 *
 *   multi_dev one MS    device 1 only (its primary context current, never
 *                       device 0's): one 128 MiB buffer (64 chunks), for MS
 *                       ms steps of one touch kernel reading 64 KiB of each
 *                       of its 4 hot chunks (the launch names them).
 *   multi_dev two MS    devices 0 and 1: buffer X allocated with device 0
 *                       current, Y with device 1 current; each step one
 *                       kernel per device, on that device, over its own
 *                       buffer's hot chunks (different chunk numbers).
 *
 * Prints key=value lines: for each buffer, its hot chunks resident on each
 * device (x_hot_on0, x_hot_on1, y_hot_on0, y_hot_on1; in `one` only y_*),
 * and the stand-in's per-device counters (ctx_made0/1: contexts created on
 * each device; pf_to0/1: blocks prefetched to each). Exit 0, 77 without the
 * stand-in or with fewer than 2 devices, 1 on a failed call. Resolves the
 * driver as libcudart does (dlopen, cuGetProcAddress), so kvtier's hooks
 * see every call. */
#include <dlfcn.h>
#include <inttypes.h>
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
#define NR_HOT 4

static const unsigned hot_x[NR_HOT] = { 5, 17, 33, 60 };
static const unsigned hot_y[NR_HOT] = { 8, 21, 40, 51 };

static struct {
	CUresult (*init)(unsigned);
	CUresult (*count)(int *);
	CUresult (*dev_get)(CUdevice *, int);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, CUstream, void **, void **);
	CUresult (*sync)(void);
	CUfunction (*touch)(void);
	int (*location)(const void *, CUmemLocationType *, int *);
	int (*dev_counters)(int, struct fakecuda_device_counters *);
} d;

static int resolve(void)
{
	void *h;
	gpa_t gpa = hot_prog_gpa(&h);
	if (!gpa)
		return -1;
#define GET(f, name, ver) if (gpa(name, (void **)&d.f, ver, 0, NULL) || !d.f) return -1
	GET(init, "cuInit", 2000);
	GET(count, "cuDeviceGetCount", 2000);
	GET(dev_get, "cuDeviceGet", 2000);
	GET(retain, "cuDevicePrimaryCtxRetain", 7000);
	GET(set_current, "cuCtxSetCurrent", 4000);
	GET(alloc, "cuMemAlloc", 3020);
	GET(free, "cuMemFree", 3020);
	GET(launch, "cuLaunchKernel", 4000);
	GET(sync, "cuCtxSynchronize", 2000);
#undef GET
	*(void **)&d.touch = dlsym(h, "fakecuda_touch_kernel");
	*(void **)&d.location = dlsym(h, "fakecuda_block_location");
	*(void **)&d.dev_counters = dlsym(h, "fakecuda_device_counters");
	return d.touch && d.location && d.dev_counters ? 0 : -2;
}

struct buf {
	CUcontext ctx;
	CUdeviceptr base;
	const unsigned *hot;
	struct fakecuda_range r[NR_HOT];   /* the launch's argument: names the hot chunks */
};

static int bind(CUcontext *ctx, int ordinal)
{
	CUdevice dev;
	return d.dev_get(&dev, ordinal) || d.retain(ctx, dev) || d.set_current(*ctx) ? -1 : 0;
}

static int setup(struct buf *b, int ordinal, const unsigned *hot)
{
	b->hot = hot;
	if (bind(&b->ctx, ordinal) || d.alloc(&b->base, NR_CHUNKS * CHUNK))
		return -1;
	return 0;
}

/* One kernel on b's device over b's hot chunks (a different 64 KiB each step). */
static int step(struct buf *b, unsigned n)
{
	for (unsigned i = 0; i < NR_HOT; i++) {
		uint64_t off = b->hot[i] * CHUNK + (uint64_t)(n % (CHUNK / READ_BYTES)) * READ_BYTES;
		b->r[i] = (struct fakecuda_range){ b->base + off, READ_BYTES, 0 };
	}
	const struct fakecuda_range *rp = b->r;
	unsigned nr = NR_HOT;
	void *params[] = { &rp, &nr, NULL };
	if (d.set_current(b->ctx) || d.launch(d.touch(), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL))
		return -1;
	return d.sync() ? -1 : 0;
}

/* b's hot chunks resident on device ordinal. */
static unsigned hot_on(const struct buf *b, int ordinal)
{
	unsigned n = 0;
	for (unsigned i = 0; i < NR_HOT; i++) {
		CUmemLocationType t;
		int id;
		if (!d.location((const void *)(uintptr_t)(b->base + b->hot[i] * CHUNK), &t, &id) &&
		    t == CU_MEM_LOCATION_TYPE_DEVICE && id == ordinal)
			n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	int two = argc > 1 && !strcmp(argv[1], "two");
	unsigned ms = argc > 2 ? (unsigned)atoi(argv[2]) : 1500;
	int r = resolve(), count = 0;
	if (r)
		return r == -1 ? 1 : 77;
	if (d.init(0) || d.count(&count)) {
		fprintf(stderr, "multi_dev: cuInit failed\n");
		return 1;
	}
	if (count < 2) {
		fprintf(stderr, "multi_dev: %d device(s); set FAKECUDA_DEVICES=2\n", count);
		return 77;
	}
	static struct buf x, y;
	if ((two && setup(&x, 0, hot_x)) || setup(&y, 1, hot_y)) {
		fprintf(stderr, "multi_dev: set-up failed\n");
		return 1;
	}
	uint64_t t0 = now_ms();
	unsigned n = 0;
	for (; now_ms() - t0 < ms; n++) {
		if ((two && step(&x, n)) || step(&y, n)) {
			fprintf(stderr, "multi_dev: step %u failed\n", n);
			return 1;
		}
		usleep(500);
	}
	struct fakecuda_device_counters c0, c1;
	if (d.dev_counters(0, &c0) || d.dev_counters(1, &c1)) {
		fprintf(stderr, "multi_dev: no device counters\n");
		return 1;
	}
	printf("steps=%u\n", n);
	if (two)
		printf("x_hot_on0=%u\nx_hot_on1=%u\n", hot_on(&x, 0), hot_on(&x, 1));
	printf("y_hot_on0=%u\ny_hot_on1=%u\n", hot_on(&y, 0), hot_on(&y, 1));
	printf("ctx_made0=%" PRIu64 "\nctx_made1=%" PRIu64 "\npf_to0=%" PRIu64 "\npf_to1=%" PRIu64
	       "\n", c0.contexts_made, c1.contexts_made, c0.prefetch_blocks_to, c1.prefetch_blocks_to);
	fflush(stdout);
	if ((two && (d.set_current(x.ctx) || d.free(x.base))) ||
	    d.set_current(y.ctx) || d.free(y.base)) {
		fprintf(stderr, "multi_dev: cuMemFree failed\n");
		return 1;
	}
	return 0;
}
