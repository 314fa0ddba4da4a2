// SPDX-License-Identifier: MIT
/* Data integrity under migration (SIMULATED GPU): a program that writes and
 * checks checksummed 2 MiB blocks of device memory while kvtier's migrator
 * moves them. Run under the preload with every device allocation redirected
 * (KVTIER_POLICY='device => managed:cxl; * => native'), a small
 * KVTIER_HBM_BUDGET and a short epoch, so chunks go back and forth.
 *
 *   migrate_integrity BUFFERS CHUNKS_PER_BUFFER ROUNDS [SEED]
 *
 * Each round a hot window of buffers (shifting every round) gets, per chunk,
 * a fresh block (header: buffer, chunk, version; body: a pattern of all
 * three) written with cudaMemcpy HtoD, and a random other chunk is read
 * back with cudaMemcpy DtoH and checked against the version last written.
 * At the end every chunk is checked. Prints key=value lines:
 * checked=, corrupt=, writes=; exit 0 when nothing was corrupt. */
#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK (2u << 20)

static uint64_t rs;
static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static void fill(uint64_t *p, uint32_t b, uint32_t c, uint32_t v)
{
	uint64_t x = ((uint64_t)b << 40) ^ ((uint64_t)c << 20) ^ v ^ 0x9e3779b97f4a7c15ull;
	p[0] = 0x4b56494e54454752ull;             /* "KVINTEGR" */
	p[1] = ((uint64_t)b << 32) | c;
	p[2] = v;
	for (size_t i = 3; i < CHUNK / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s BUFFERS CHUNKS_PER_BUFFER ROUNDS [SEED]\n", argv[0]);
		return 2;
	}
	uint32_t nb = (uint32_t)atoi(argv[1]), nc = (uint32_t)atoi(argv[2]);
	uint64_t rounds = strtoull(argv[3], NULL, 0);
	rs = argc > 4 ? strtoull(argv[4], NULL, 0) | 1 : 88172645463325252ull;
	if (!nb || !nc || nb > 4096 || nc > 4096)
		return 2;
	char **buf = calloc(nb, sizeof *buf);
	uint32_t *ver = calloc((size_t)nb * nc, sizeof *ver);
	uint64_t *want = malloc(CHUNK), *got = malloc(CHUNK);
	if (!buf || !ver || !want || !got)
		return 1;
	for (uint32_t b = 0; b < nb; b++) {
		cudaError_t e = cudaMalloc((void **)&buf[b], (size_t)nc * CHUNK);
		if (e != cudaSuccess) {
			fprintf(stderr, "cudaMalloc: %d\n", (int)e);
			return 1;
		}
		for (uint32_t c = 0; c < nc; c++) {
			fill(want, b, c, 0);
			if (cudaMemcpy(buf[b] + (size_t)c * CHUNK, want, CHUNK, cudaMemcpyHostToDevice))
				return 1;
		}
	}
	uint64_t checked = 0, corrupt = 0, writes = 0;
	uint32_t win = nb / 4 ? nb / 4 : 1;
	for (uint64_t r = 0; r < rounds; r++) {
		for (uint32_t k = 0; k < win; k++) {
			uint32_t b = (uint32_t)((r / 4 + k) % nb);
			for (uint32_t c = 0; c < nc; c++) {
				uint32_t v = ++ver[(size_t)b * nc + c];
				fill(want, b, c, v);
				if (cudaMemcpy(buf[b] + (size_t)c * CHUNK, want, CHUNK,
					       cudaMemcpyHostToDevice))
					return 1;
				writes++;
			}
			/* read back one chunk anywhere: hot or cold, HBM or far */
			uint32_t rb = (uint32_t)(rnd() % nb), rc = (uint32_t)(rnd() % nc);
			if (cudaMemcpy(got, buf[rb] + (size_t)rc * CHUNK, CHUNK, cudaMemcpyDeviceToHost))
				return 1;
			fill(want, rb, rc, ver[(size_t)rb * nc + rc]);
			checked++;
			if (memcmp(want, got, CHUNK) && corrupt++ < 8)
				fprintf(stderr, "CORRUPTION: buffer %u chunk %u (round %" PRIu64 ")\n",
					rb, rc, r);
		}
	}
	for (uint32_t b = 0; b < nb; b++)
		for (uint32_t c = 0; c < nc; c++) {
			if (cudaMemcpy(got, buf[b] + (size_t)c * CHUNK, CHUNK, cudaMemcpyDeviceToHost))
				return 1;
			fill(want, b, c, ver[(size_t)b * nc + c]);
			checked++;
			if (memcmp(want, got, CHUNK) && corrupt++ < 8)
				fprintf(stderr, "CORRUPTION: buffer %u chunk %u (final check)\n", b, c);
		}
	for (uint32_t b = 0; b < nb; b++)
		cudaFree(buf[b]);
	free(buf);
	free(ver);
	free(want);
	free(got);
	printf("writes=%" PRIu64 "\nchecked=%" PRIu64 "\ncorrupt=%" PRIu64 "\nresult=%s\n", writes,
	       checked, corrupt, corrupt ? "corrupt" : "ok");
	return corrupt ? 1 : 0;
}
