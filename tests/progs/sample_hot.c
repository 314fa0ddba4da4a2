// SPDX-License-Identifier: MIT
/* Test program for tests/unit/test_sample.c (SIMULATED GPU): a kernel that
 * is handed only a tensor's base pointer and reads a few chunks of it at
 * offsets it computes, which no launch parameter shows.
 *
 *   sample_hot hot LIMIT_MS      one 128 MiB device buffer (64 chunks; kvtier
 *   sample_hot epochs N LIMIT_MS redirects it to managed memory on the far
 *                     tier) and steps of: one touch-kernel launch that names
 *                     only the first 4 KiB of the buffer, then reads of
 *                     64 KiB in each hot chunk (HOT below) through
 *                     fakecuda_access, the stand-in's GPU access that no
 *                     hook sees: the "kernel's" computed addresses.
 *   Two phases, each ended by progress, never by the clock alone (a loaded
 *   machine runs fewer epochs in a second):
 *     hot     until chunk 0 and the hot chunks are all in HBM and the
 *             migration thread has promoted at least as many chunks
 *             (kvtier's live counters: a probe's fault also brings a chunk
 *             in, before any promotion), then MEASURE_STEPS more steps
 *             measured;
 *     epochs  until the migration thread has run N/2 epochs (kvtier's live
 *             counters), then measured until it has run N.
 *   LIMIT_MS bounds each phase; reaching it prints limit_hit=1 (the test
 *   then fails, saying so) instead of hanging.
 *
 * Prints key=value lines: hot chunks resident in HBM at the end
 * (hot_in_hbm), other chunks in HBM except chunk 0 (cold_in_hbm), and the
 * bytes of the hot reads of the measured phase served from HBM and over
 * the link (hot_hbm_bytes, hot_remote_bytes), steps, epochs. Exit 0, 77
 * without the stand-in, 1 on a failed call or bad arguments. Resolves the driver as libcudart does (dlopen,
 * cuGetProcAddress), so kvtier's hooks see every call. */
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
#define MEASURE_STEPS 400u

static const unsigned hot[] = { 9, 22, 41, 57 };
#define NR_HOT (sizeof hot / sizeof hot[0])

/* The launch's argument, alone on its page: the launch scan reads windows
 * behind pointers, and must find nothing there but the base. */
static struct {
	struct fakecuda_range r[4096 / sizeof(struct fakecuda_range)];
} arg __attribute__((aligned(4096)));

static struct {
	CUresult (*init)(unsigned);
	CUresult (*dev_get)(CUdevice *, int);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, CUstream, void **, void **);
	int (*access)(const void *, size_t, int);
	CUfunction (*touch)(void);
	int (*counters)(struct fakecuda_counters *);
	int (*location)(const void *, CUmemLocationType *, int *);
} d;

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
	GET(launch, "cuLaunchKernel", 4000);
#undef GET
	*(void **)&d.access = dlsym(h, "fakecuda_access");
	*(void **)&d.touch = dlsym(h, "fakecuda_touch_kernel");
	*(void **)&d.counters = dlsym(h, "fakecuda_get_counters");
	*(void **)&d.location = dlsym(h, "fakecuda_block_location");
	return d.access && d.touch && d.counters && d.location ? 0 : -2;
}

/* One step: the launch names the base; the hot reads are computed. */
static int step(CUdeviceptr base, unsigned n, uint64_t *hbm, uint64_t *remote)
{
	const struct fakecuda_range *rp = arg.r;
	unsigned nr = 1;
	void *params[] = { &rp, &nr, NULL };
	if (d.launch(d.touch(), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL))
		return -1;
	struct fakecuda_counters a, b;
	d.counters(&a);
	for (unsigned i = 0; i < NR_HOT; i++) {
		uint64_t off = hot[i] * CHUNK + (uint64_t)(n % (CHUNK / READ_BYTES)) * READ_BYTES;
		if (d.access((const void *)(uintptr_t)(base + off), READ_BYTES, 0))
			return -1;
	}
	d.counters(&b);
	*hbm += b.bytes_hbm - a.bytes_hbm;
	*remote += b.bytes_remote - a.bytes_remote;
	return 0;
}

static int on_device(CUdeviceptr p)
{
	CUmemLocationType t;
	int id;
	return !d.location((const void *)(uintptr_t)p, &t, &id) && t == CU_MEM_LOCATION_TYPE_DEVICE;
}

static CUdeviceptr base;

/* chunk 0 and every hot chunk in HBM, and as many promoted */
static int all_hot_in(void)
{
	if (!on_device(base) || hot_prog_promoted() < (int64_t)(1 + NR_HOT))
		return 0;
	for (unsigned i = 0; i < NR_HOT; i++)
		if (!on_device(base + hot[i] * CHUNK))
			return 0;
	return 1;
}

enum mode { UNTIL_HOT, UNTIL_EPOCHS };

/* Steps until done(n) (checked every 8 steps) or limit_ms; 1 on the limit,
 * -1 on a failed step. */
static int phase(enum mode mode, int64_t epochs, unsigned steps, unsigned *n, unsigned limit_ms,
		 uint64_t *hbm, uint64_t *remote)
{
	uint64_t t0 = now_ms();
	for (unsigned i = 0;; i++, (*n)++) {
		if (i % 8 == 0) {
			int done = mode == UNTIL_HOT ? (steps ? i >= steps : all_hot_in())
						     : hot_prog_epochs() >= epochs;
			if (done)
				return 0;
			if (now_ms() - t0 >= limit_ms)
				return 1;
		}
		if (step(base, *n, hbm, remote)) {
			fprintf(stderr, "sample_hot: step %u failed\n", *n);
			return -1;
		}
		usleep(500);
	}
}

int main(int argc, char **argv)
{
	enum mode mode = argc == 3 && !strcmp(argv[1], "hot") ? UNTIL_HOT :
			 argc == 4 && !strcmp(argv[1], "epochs") ? UNTIL_EPOCHS : (enum mode)-1;
	if ((int)mode < 0) {
		fprintf(stderr, "usage: sample_hot hot LIMIT_MS | sample_hot epochs N LIMIT_MS\n");
		return 1;
	}
	int64_t epochs = mode == UNTIL_EPOCHS ? atoll(argv[2]) : 0;
	unsigned limit_ms = (unsigned)atoi(argv[argc - 1]);
	int r = resolve();
	if (r)
		return r == -1 ? 1 : 77;
	CUdevice dev;
	CUcontext ctx;
	if (d.init(0) || d.dev_get(&dev, 0) || d.retain(&ctx, dev) || d.set_current(ctx) ||
	    d.alloc(&base, NR_CHUNKS * CHUNK)) {
		fprintf(stderr, "sample_hot: driver set-up failed\n");
		return 1;
	}
	arg.r[0] = (struct fakecuda_range){ base, 4096, 0 };
	uint64_t hbm = 0, remote = 0, junk_h = 0, junk_r = 0;
	unsigned n = 0;
	int lim = phase(mode, epochs / 2, 0, &n, limit_ms, &junk_h, &junk_r);
	unsigned warm = n;
	if (lim >= 0)
		lim |= phase(mode, epochs, mode == UNTIL_HOT ? MEASURE_STEPS : 0, &n, limit_ms,
			     &hbm, &remote);
	if (lim < 0)
		return 1;
	unsigned hot_hbm = 0, cold_hbm = 0;
	for (unsigned c = 1; c < NR_CHUNKS; c++) {
		int is_hot = 0;
		for (unsigned i = 0; i < NR_HOT; i++)
			is_hot |= hot[i] == c;
		if (on_device(base + c * CHUNK))
			*(is_hot ? &hot_hbm : &cold_hbm) += 1;
	}
	printf("steps=%u\nwarm_steps=%u\nepochs=%lld\nlimit_hit=%d\nhot_chunks=%zu\nhot_in_hbm=%u\n"
	       "cold_in_hbm=%u\nhot_hbm_bytes=%" PRIu64 "\nhot_remote_bytes=%" PRIu64 "\n", n, warm,
	       (long long)hot_prog_epochs(), lim, NR_HOT, hot_hbm, cold_hbm, hbm, remote);
	if (d.free(base)) {
		fprintf(stderr, "sample_hot: cuMemFree failed\n");
		return 1;
	}
	return 0;
}
