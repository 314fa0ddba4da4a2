// SPDX-License-Identifier: MIT
/* Writes a synthetic kvtier trace of N events (for `make bench-report`):
 * modules and stacks of a made-up program, a weights phase, a meminfo, a
 * KV burst of redirected allocations, then copies, launches and prefetches
 * over the KV ranges with some churn. Deterministic (fixed seed).
 * usage: gen_trace OUT [NR_EVENTS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier/api.h"
#include "kvtier/trace_format.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void put_module(FILE *f, const char *path, uint64_t start, uint64_t end)
{
	struct kvt_rec_module m = { .head = { KVT_REC_MODULE, 0 } };
	m.path_bytes = (uint32_t)strlen(path);
	m.bias = start;
	m.start = start;
	m.end = end;
	m.head.bytes = (uint16_t)(sizeof m + m.path_bytes);
	fwrite(&m, sizeof m, 1, f);
	fwrite(path, m.path_bytes, 1, f);
}

static void put_stack(FILE *f, uint32_t id, uint64_t site)
{
	uint64_t ips[3] = { 0x7f0000001234ull, 0x7f0000102345ull, site };
	struct kvt_rec_stack s = { .head = { KVT_REC_STACK, sizeof s + sizeof ips }, .id = id,
				   .nr_frames = 3 };
	fwrite(&s, sizeof s, 1, f);
	fwrite(ips, sizeof ips, 1, f);
}

static void put_event(FILE *f, uint16_t op, uint16_t api, uint64_t t, uint64_t addr,
		      uint64_t size, uint32_t stack, uint8_t kind, uint8_t place)
{
	struct kvt_rec_event e = { .head = { KVT_REC_EVENT, sizeof e }, .op = op, .api = api,
				   .t_ns = t, .addr = addr, .size = size, .tid = 1,
				   .stack_id = stack, .kind = kind, .placement = place };
	fwrite(&e, sizeof e, 1, f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: gen_trace OUT [NR_EVENTS]\n");
		return 2;
	}
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 10000000ull;
	FILE *f = fopen(argv[1], "wb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	static char buf[1 << 20];
	setvbuf(f, buf, _IOFBF, sizeof buf);
	struct kvt_trace_header h = { .magic = KVT_TRACE_MAGIC, .version = KVT_TRACE_VERSION,
				      .header_bytes = sizeof h, .pid = 1, .exe = "gen_trace" };
	fwrite(&h, sizeof h, 1, f);
	put_module(f, "/nonexistent/libcudart.so.13", 0x7f0000000000ull, 0x7f0000100000ull);
	put_module(f, "/nonexistent/libkvtier.so", 0x7f0000100000ull, 0x7f0000200000ull);
	put_module(f, "/nonexistent/server", 0x550000000000ull, 0x550000100000ull);
	for (uint32_t s = 1; s <= 64; s++)
		put_stack(f, s, 0x550000001000ull + s * 0x40);
	uint64_t t = 0, i = 0, kv = 0x7e0000000000ull, layer = 64ull << 20;
	for (; i < 32 && i < n; i++, t += 1000)
		put_event(f, KVT_OP_ALLOC, KVT_API_cudaMalloc, t, 0x700000000000ull + (i << 26),
			  (1 + next_rand() % 32) << 20, 1 + (uint32_t)(i % 8), KVT_KIND_DEVICE, 0);
	put_event(f, KVT_OP_MEMINFO, KVT_API_cuMemGetInfo_v2, t, 1ull << 30, 8ull << 30, 0, 0, 0);
	for (uint64_t l = 0; l < 32 && i < n; l++, i++, t += 1000)
		put_event(f, KVT_OP_ALLOC, KVT_API_cudaMalloc, t, kv + l * layer, layer, 9,
			  KVT_KIND_DEVICE, KVT_PLACE_MANAGED_FAR);
	for (; i < n; i++, t += 50 + next_rand() % 100) {
		uint64_t r = next_rand(), a = kv + (r >> 20) % (32 * layer);
		switch (r % 16) {
		case 0:
			put_event(f, KVT_OP_ALLOC, KVT_API_cudaMalloc, t, 0x600000000000ull + (i << 12),
				  4096ull << (r >> 8) % 12, 10 + (uint32_t)(r >> 40) % 50,
				  KVT_KIND_HOST, 0);
			break;
		case 1:
			put_event(f, KVT_OP_FREE, KVT_API_cudaFree, t, 0x600000000000ull + (i << 12),
				  4096, 0, KVT_KIND_HOST, 0);
			break;
		case 2:
			put_event(f, KVT_OP_PREFETCH, KVT_API_cuMemPrefetchAsync, t, a, 2 << 20, 0, 0, 0);
			break;
		case 3:
			put_event(f, KVT_OP_LAUNCH, KVT_API_cuLaunchKernel, t, 0x550000002000ull, 256, 0, 0, 0);
			break;
		default:
			put_event(f, KVT_OP_COPY, KVT_API_cuMemcpyAsync, t, a, 4096, 0, 0, 0);
			break;
		}
	}
	struct kvt_rec_end e = { .head = { KVT_REC_END, sizeof e }, .nr_events = n + 1,
				 .nr_stacks = 64 };
	fwrite(&e, sizeof e, 1, f);
	if (fclose(f)) {
		perror(argv[1]);
		return 1;
	}
	return 0;
}
