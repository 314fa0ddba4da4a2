// SPDX-License-Identifier: MIT
/* `make bench` hook-cost program: one trial of one call pattern, timed in
 * CPU time of the whole process for the loop only. bench/run.sh runs it as
 * separate processes (native, kvtier passthrough, kvtier traced, heaptrack)
 * because a preload is per process, and takes the median over trials.
 * Never a test: prints figures, fails only on a broken call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cuda_runtime_api.h>

#define NOINLINE __attribute__((noinline))
#define MiB (1ul << 20)

enum bench_mode { MODE_CUDA, MODE_MMAP, MODE_MALLOC };

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

static int run_pairs(const struct bench_cfg *c, unsigned long n)
{
	int (*pair)(unsigned long) = c->mode == MODE_CUDA ? pair_cuda :
				     c->mode == MODE_MMAP ? pair_mmap : pair_malloc;
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
	fprintf(stderr, "usage: hooks cuda|mmap|malloc PAIRS [DEPTH]\n"
		"  one trial: PAIRS alloc+free pairs after PAIRS/10 warm-up ones,\n"
		"  DEPTH (default 0) helper frames above the loop\n");
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
	else
		return usage();
	c.nr_pairs = strtoul(argv[2], NULL, 0);
	c.depth = argc > 3 ? atoi(argv[3]) : 0;
	if (!c.nr_pairs || c.depth < 0 || c.depth > 1000)
		return usage();
	c.nr_warmup = c.nr_pairs / 10 + 1;
	at_depth(c.depth, &c);
	if (c.failed) {
		fprintf(stderr, "hooks: %s pair failed (errno %d)\n", argv[1], errno);
		return 1;
	}
	printf("mode=%s pairs=%lu depth=%d cpu_ns_per_pair=%.1f thread_ns_per_pair=%.1f "
	       "wall_ns_per_pair=%.1f\n", argv[1], c.nr_pairs, c.depth,
	       c.cpu_ns / c.nr_pairs, c.thread_ns / c.nr_pairs, c.wall_ns / c.nr_pairs);
	return 0;
}
