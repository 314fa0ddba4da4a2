// SPDX-License-Identifier: MIT
/* The soak workload (make soak, tests/soak/soak.sh; SIMULATED GPU): a
 * serving loop where sequences arrive and leave until SIGTERM. Each
 * sequence allocates its KV blocks (one cudaMalloc per block of 1 or 2
 * chunks) and a token block, writes its prompt (cudaMemcpy), decodes (a
 * touch kernel over its blocks and a 4 KiB token write per step, a new
 * block every 32 tokens) and at the end checks every prompt block and its
 * last token, swaps a block out to a shared anonymous map now and then,
 * and frees everything. Shared weights are read every step. Single
 * threaded (kvtier adds its migration thread).
 *
 *   rt_migr_soak [SEED]
 *
 * SIGTERM ends it: everything left is checked and freed, then one line of
 * key=value totals; exit 0 when nothing was corrupt and no call failed. */
#include <dlfcn.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define CHUNK (2u << 20)
/* at most 16 x (12 + 1) + 1 = 209 live allocations: under the 1024 ranges
 * kvtier's migrator tracks (KVT_HEAT_MAX_RANGES) */
#define MAX_SEQS 16
#define MAX_BLOCKS 12
#define TOKEN_BYTES 4096u
#define WEIGHTS_BYTES (32u << 20)

struct block {
	char *d;
	size_t bytes;
};

struct seq {
	int live;
	uint64_t seed;
	struct block blk[MAX_BLOCKS];
	unsigned nr_blk, prompt_blk;
	char *tok;                       /* token block: one chunk */
	uint64_t tokens, last_token;     /* tokens written; value of the last */
	unsigned steps_left;
};

static CUfunction touch;
static struct seq seqs[MAX_SEQS];
static char *weights;
static uint64_t *want, *got;
static uint64_t rs = 0x9e3779b97f4a7c15ull;
static volatile sig_atomic_t stop;
static uint64_t started, finished, blocks, swaps, steps, checked, corrupt, errors;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static void pattern(uint64_t *p, size_t bytes, uint64_t seed)
{
	uint64_t x = seed | 1;
	for (size_t i = 0; i < bytes / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
}

static void ck(cudaError_t e)
{
	if (e != cudaSuccess)
		errors++;
}

static void launch_on(const char *p, size_t bytes)
{
	struct { CUdeviceptr ptr; size_t len; int write; } rg = { (CUdeviceptr)(uintptr_t)p, bytes, 0 };
	void *rgp = &rg;
	unsigned nr = 1;
	void *params[] = { &rgp, &nr };
	dim3 one = { 1, 1, 1 };
	ck(cudaLaunchKernel((const void *)touch, one, one, params, 0, 0));
}

static uint64_t blk_seed(const struct seq *s, unsigned b)
{
	return s->seed ^ ((uint64_t)(b + 1) * 0xd1b54a32d192ed03ull);
}

static int add_block(struct seq *s, int prompt)
{
	if (s->nr_blk == MAX_BLOCKS)
		return 0;
	struct block *b = &s->blk[s->nr_blk];
	b->bytes = (rnd() % 4 == 0 ? 2 : 1) * (size_t)CHUNK;
	if (cudaMalloc((void **)&b->d, b->bytes) != cudaSuccess) {
		errors++;
		return -1;
	}
	blocks++;
	for (size_t off = 0; off < b->bytes; off += CHUNK) {
		if (prompt)
			pattern(want, CHUNK, blk_seed(s, s->nr_blk) ^ off);
		else
			memset(want, 0, CHUNK);
		ck(cudaMemcpy(b->d + off, want, CHUNK, cudaMemcpyHostToDevice));
	}
	s->nr_blk++;
	return 0;
}

static void arrive(struct seq *s)
{
	memset(s, 0, sizeof *s);
	s->seed = rnd();
	s->steps_left = 50 + (unsigned)(rnd() % 400);
	if (cudaMalloc((void **)&s->tok, CHUNK) != cudaSuccess) {
		errors++;
		return;
	}
	unsigned n = 1 + (unsigned)(rnd() % 8);
	for (unsigned i = 0; i < n; i++)
		if (add_block(s, 1))
			break;
	s->prompt_blk = s->nr_blk;
	s->live = 1;
	started++;
}

static void check(const char *d, size_t bytes, uint64_t seed)
{
	ck(cudaMemcpy(got, d, bytes, cudaMemcpyDeviceToHost));
	pattern(want, bytes, seed);
	checked++;
	if (memcmp(want, got, bytes) && corrupt++ < 8)
		fprintf(stderr, "CORRUPTION at %p (+%zu)\n", (const void *)d, bytes);
}

/* Now and then a leaving sequence's first block is swapped out to a shared
 * anonymous map first (a host swap space), checked there. */
static void swap_out(const struct seq *s)
{
	char *m = mmap(NULL, 4u << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		errors++;
		return;
	}
	ck(cudaMemcpy(m, s->blk[0].d, CHUNK, cudaMemcpyDeviceToHost));
	pattern(want, CHUNK, blk_seed(s, 0));
	checked++;
	if (memcmp(want, m, CHUNK) && corrupt++ < 8)
		fprintf(stderr, "CORRUPTION in swap of %p\n", (const void *)s->blk[0].d);
	munmap(m, 4u << 20);
	swaps++;
}

static void leave(struct seq *s)
{
	if (s->prompt_blk && rnd() % 8 == 0)
		swap_out(s);
	for (unsigned b = 0; b < s->prompt_blk; b++)
		for (size_t off = 0; off < s->blk[b].bytes; off += CHUNK)
			check(s->blk[b].d + off, CHUNK, blk_seed(s, b) ^ off);
	if (s->tokens)
		check(s->tok + ((s->tokens - 1) % (CHUNK / TOKEN_BYTES)) * TOKEN_BYTES, TOKEN_BYTES,
		      s->last_token);
	for (unsigned b = 0; b < s->nr_blk; b++)
		ck(cudaFree(s->blk[b].d));
	ck(cudaFree(s->tok));
	s->live = 0;
	finished++;
}

static void decode(struct seq *s)
{
	for (unsigned b = 0; b < s->nr_blk; b++)
		launch_on(s->blk[b].d, s->blk[b].bytes);
	s->last_token = rnd();
	pattern(want, TOKEN_BYTES, s->last_token);
	ck(cudaMemcpy(s->tok + (s->tokens % (CHUNK / TOKEN_BYTES)) * TOKEN_BYTES, want, TOKEN_BYTES,
		      cudaMemcpyHostToDevice));
	s->tokens++;
	if (s->tokens % 32 == 0)
		add_block(s, 0);
	if (--s->steps_left == 0)
		leave(s);
}

static void step(void)
{
	launch_on(weights, WEIGHTS_BYTES);
	/* arrivals keep most slots busy */
	for (unsigned i = 0; i < MAX_SEQS; i++)
		if (!seqs[i].live && rnd() % 16 == 0)
			arrive(&seqs[i]);
	/* a popular subset decodes each step */
	for (unsigned i = 0; i < MAX_SEQS; i++)
		if (seqs[i].live && (i % 4 == steps % 4 || rnd() % 8 == 0))
			decode(&seqs[i]);
	if (steps % 64 == 0) {
		void *h;
		ck(cudaMallocHost(&h, 1u << 20));
		ck(cudaFreeHost(h));
	}
	steps++;
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rs = strtoull(argv[1], NULL, 0) | 1;
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	want = malloc(CHUNK);
	got = malloc(CHUNK);
	if (!want || !got || cudaFree(NULL) != cudaSuccess)
		return 2;
	void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	CUfunction (*get_touch)(void) = drv ? (CUfunction (*)(void))dlsym(drv, "fakecuda_touch_kernel") : NULL;
	if (!get_touch)
		return 77;
	touch = get_touch();
	if (cudaMalloc((void **)&weights, WEIGHTS_BYTES) != cudaSuccess)
		return 1;
	ck(cudaMemset(weights, 1, WEIGHTS_BYTES));
	while (!stop)
		step();
	for (unsigned i = 0; i < MAX_SEQS; i++)
		if (seqs[i].live)
			leave(&seqs[i]);
	ck(cudaFree(weights));
	free(want);
	free(got);
	printf("steps=%" PRIu64 " seqs_started=%" PRIu64 " seqs_finished=%" PRIu64 " blocks=%" PRIu64
	       " swaps=%" PRIu64 " checked=%" PRIu64 " corrupt=%" PRIu64 " errors=%" PRIu64 "\n",
	       steps, started, finished, blocks, swaps, checked, corrupt, errors);
	return corrupt || errors || started != finished ? 1 : 0;
}
