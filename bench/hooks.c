// SPDX-License-Identifier: MIT
/* `make bench` hook-cost program: one trial of one call pattern, timed in
 * CPU time of the whole process for the loop only. bench/run.sh runs it as
 * separate processes (native, kvtier passthrough, kvtier traced or with a
 * range tracked, heaptrack) because a preload is per process, and takes the
 * median over trials.
 * Never a test: prints figures, fails only on a broken call. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fakecuda/fakecuda.h"

#define NOINLINE __attribute__((noinline))
#define MiB (1ul << 20)

enum bench_mode { MODE_CUDA, MODE_MMAP, MODE_MALLOC, MODE_LAUNCH, MODE_LAUNCH_HOST, MODE_LAUNCH_FA };

struct bench_cfg {
	enum bench_mode mode;
	unsigned long nr_pairs;
	unsigned long nr_warmup;
	int depth;                  /* helper frames above the loop */
	int failed;
	double cpu_ns, thread_ns, wall_ns;
};

/* Small sizes, cycled: the allocator's and the driver's fast paths. */
static const size_t small_bytes[] = { 256, 4096, 65536, 1024 };
#define NR_SMALL (sizeof small_bytes / sizeof small_bytes[0])

static void *volatile sink;

/* ---- the launch patterns ----------------------------------------------
 * launch: cudaLaunchKernel of the stand-in's paged kernel, handed as a
 * server hands its attention kernel the layer's K and V bases (inside a
 * 2 MiB cudaMalloc'd buffer, redirected and tracked under
 * KVTIER_POLICY='device => managed:cxl') and device pointers to its block
 * table and lengths (a second cudaMalloc): the scan finds the bases among
 * the parameters and reads nothing behind the device pointers.
 * launch-host: the touch kernel with (ranges, nr), ranges a HOST array
 * naming the buffer (the old workloads' pattern): the scan follows that
 * pointer (a process_vm_readv on a sampled launch) and finds the address.
 * launch-fa: one 528-byte by-value struct, as FlashAttention 2's
 * Flash_fwd_params (k_ptr at byte 8, v_ptr at 16, block_table at 344: the
 * layout the serve-like FA2 kernel declares), naming the same K/V bases
 * and device table; a kernel the stand-in defines with that one parameter
 * and a body that does nothing.
 * All run nothing (no sequences, nr 0): the figure is the launch path. */
static struct {
	struct fakecuda_range ranges[4096 / sizeof(struct fakecuda_range)];
} launch_arg __attribute__((aligned(4096)));
static struct { unsigned nr; unsigned pad; } launch_nr;    /* 8 readable bytes */
static const struct fakecuda_range *launch_ranges = launch_arg.ranges;
static void *launch_params[3] = { &launch_ranges, &launch_nr, NULL };
static const void *launch_fn;
static void *launch_buf, *launch_table;
static CUdeviceptr paged_k, paged_v, paged_table, paged_lens, paged_ranges;
static unsigned paged_nr, paged_stride = 64, paged_bt = 16, paged_row = 256, paged_nr_ranges;
static void *paged_params[] = { &paged_k, &paged_v, &paged_table, &paged_lens, &paged_nr,
				&paged_stride, &paged_bt, &paged_row, &paged_ranges,
				&paged_nr_ranges };

static unsigned char fa_params[528] __attribute__((aligned(16)));
static void *fa_args[1] = { fa_params };

static int fa_body(void *const *args, void *ctx)
{
	(void)args;
	(void)ctx;
	return 0;
}

static int launch_setup(int host_table, int fa)
{
	if (cudaFree(NULL) != cudaSuccess || cudaMalloc(&launch_buf, 2 * MiB) != cudaSuccess ||
	    cudaMalloc(&launch_table, 64 * 1024) != cudaSuccess)
		return -1;
	/* the runtime dlopens the driver RTLD_LOCAL: ask the loaded one */
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CUfunction (*kernel)(void) = drv ? (CUfunction (*)(void))dlsym(drv, host_table ?
		"fakecuda_touch_kernel" : "fakecuda_paged_kernel") : NULL;
	if (!kernel)
		return -1;
	launch_fn = (const void *)kernel();
	if (fa) {
		CUfunction (*define)(const char *, const struct fakecuda_param *, unsigned,
				     fakecuda_body_fn, void *) =
			(CUfunction (*)(const char *, const struct fakecuda_param *, unsigned,
					fakecuda_body_fn, void *))dlsym(drv, "fakecuda_kernel_define");
		static const struct fakecuda_param one_struct = { sizeof fa_params, 8 };
		if (!define || !(launch_fn = define("_Z23flash_fwd_splitkv_kernel16Flash_fwd_params",
						    &one_struct, 1, fa_body, NULL)))
			return -1;
	}
	launch_arg.ranges[0] = (struct fakecuda_range){ (CUdeviceptr)(uintptr_t)launch_buf, 4096, 0 };
	paged_k = (CUdeviceptr)(uintptr_t)launch_buf;
	paged_v = paged_k + MiB;
	paged_table = (CUdeviceptr)(uintptr_t)launch_table;
	paged_lens = paged_table + 32 * 1024;
	memcpy(fa_params + 8, &paged_k, 8);
	memcpy(fa_params + 16, &paged_v, 8);
	memcpy(fa_params + 344, &paged_table, 8);
	return 0;
}

/* Where the launch loop's buffer ended up: managed (redirected by kvtier)
 * or not, and where its 2 MiB block lives now (the migrator promotes it to
 * HBM once the launch evidence has made it hot). */
static void launch_report(void)
{
	unsigned managed = 0;
	CUmemLocationType type = CU_MEM_LOCATION_TYPE_INVALID;
	int id = 0;
	struct cudaPointerAttributes a;
	if (cudaPointerGetAttributes(&a, launch_buf) == cudaSuccess)
		managed = a.type == cudaMemoryTypeManaged;
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	int (*where)(const void *, CUmemLocationType *, int *) = drv ?
		(int (*)(const void *, CUmemLocationType *, int *))dlsym(drv, "fakecuda_block_location") : NULL;
	if (!managed || !where || where(launch_buf, &type, &id))
		type = CU_MEM_LOCATION_TYPE_INVALID;
	printf("launch_buffer managed=%u block=%s\n", managed,
	       type == CU_MEM_LOCATION_TYPE_DEVICE ? "device" :
	       type == CU_MEM_LOCATION_TYPE_INVALID ? "-" : "host");
}

static double clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- one pair of each pattern ---------------------------------------- */

static int pair_cuda(unsigned long i)
{
	void *p = NULL;
	if (cudaMalloc(&p, small_bytes[i % NR_SMALL]) != cudaSuccess)
		return -1;
	sink = p;
	return cudaFree(p) == cudaSuccess ? 0 : -1;
}

static int pair_mmap(unsigned long i)
{
	(void)i;
	void *p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	sink = p;
	return munmap(p, 2 * MiB);
}

static int pair_malloc(unsigned long i)
{
	void *p = malloc(small_bytes[i % NR_SMALL]);
	if (!p)
		return -1;
	sink = p;
	free(p);
	return 0;
}

static int one_launch(unsigned long i)
{
	(void)i;
	dim3 one = { 1, 1, 1 };
	return cudaLaunchKernel(launch_fn, one, one, launch_params, 0, NULL) == cudaSuccess ? 0 : -1;
}

static int one_paged_launch(unsigned long i)
{
	(void)i;
	dim3 one = { 1, 1, 1 };
	return cudaLaunchKernel(launch_fn, one, one, paged_params, 0, NULL) == cudaSuccess ? 0 : -1;
}

static int one_fa_launch(unsigned long i)
{
	(void)i;
	dim3 one = { 1, 1, 1 };
	return cudaLaunchKernel(launch_fn, one, one, fa_args, 0, NULL) == cudaSuccess ? 0 : -1;
}

static int run_pairs(const struct bench_cfg *c, unsigned long n)
{
	int (*pair)(unsigned long) = c->mode == MODE_CUDA ? pair_cuda :
				     c->mode == MODE_MMAP ? pair_mmap :
				     c->mode == MODE_LAUNCH ? one_paged_launch :
				     c->mode == MODE_LAUNCH_HOST ? one_launch :
				     c->mode == MODE_LAUNCH_FA ? one_fa_launch : pair_malloc;
	for (unsigned long i = 0; i < n; i++)
		if (pair(i))
			return -1;
	return 0;
}

/* ---- the timed loop, called `depth` frames deep ------------------------ */

static NOINLINE void timed_loop(struct bench_cfg *c)
{
	if (run_pairs(c, c->nr_warmup)) {
		c->failed = 1;
		return;
	}
	double w0 = clock_ns(CLOCK_MONOTONIC);
	double t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	double p0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	c->failed = run_pairs(c, c->nr_pairs) != 0;
	c->cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - p0;
	c->thread_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	c->wall_ns = clock_ns(CLOCK_MONOTONIC) - w0;
}

/* Recursion that the compiler may neither inline nor turn into a loop or a
 * tail call: every level is a real frame the unwinder must walk. */
static NOINLINE void at_depth(int left, struct bench_cfg *c)
{
	if (left <= 0)
		timed_loop(c);
	else
		at_depth(left - 1, c);
	__asm__ volatile("" ::: "memory");
}

static int usage(void)
{
	fprintf(stderr, "usage: hooks cuda|mmap|malloc|launch|launch-host|launch-fa PAIRS [DEPTH]\n"
		"  one trial: PAIRS alloc+free pairs (launch: kernel launches) after\n"
		"  PAIRS/10 warm-up ones, DEPTH (default 0) helper frames above the loop\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct bench_cfg c = { 0 };
	if (argc < 3)
		return usage();
	if (!strcmp(argv[1], "cuda"))
		c.mode = MODE_CUDA;
	else if (!strcmp(argv[1], "mmap"))
		c.mode = MODE_MMAP;
	else if (!strcmp(argv[1], "malloc"))
		c.mode = MODE_MALLOC;
	else if (!strcmp(argv[1], "launch"))
		c.mode = MODE_LAUNCH;
	else if (!strcmp(argv[1], "launch-host"))
		c.mode = MODE_LAUNCH_HOST;
	else if (!strcmp(argv[1], "launch-fa"))
		c.mode = MODE_LAUNCH_FA;
	else
		return usage();
	c.nr_pairs = strtoul(argv[2], NULL, 0);
	c.depth = argc > 3 ? atoi(argv[3]) : 0;
	if (!c.nr_pairs || c.depth < 0 || c.depth > 1000)
		return usage();
	c.nr_warmup = c.nr_pairs / 10 + 1;
	int launching = c.mode == MODE_LAUNCH || c.mode == MODE_LAUNCH_HOST ||
			c.mode == MODE_LAUNCH_FA;
	if (launching && launch_setup(c.mode == MODE_LAUNCH_HOST, c.mode == MODE_LAUNCH_FA)) {
		fprintf(stderr, "hooks: launch setup failed (cudaMalloc or the stand-in's kernel)\n");
		return 1;
	}
	at_depth(c.depth, &c);
	if (c.failed) {
		fprintf(stderr, "hooks: %s pair failed (errno %d)\n", argv[1], errno);
		return 1;
	}
	printf("mode=%s pairs=%lu depth=%d cpu_ns_per_pair=%.1f thread_ns_per_pair=%.1f "
	       "wall_ns_per_pair=%.1f\n", argv[1], c.nr_pairs, c.depth,
	       c.cpu_ns / c.nr_pairs, c.thread_ns / c.nr_pairs, c.wall_ns / c.nr_pairs);
	if (launching)
		launch_report();
	return 0;
}
