// SPDX-License-Identifier: MIT
/* Test program: large heap blocks (the way llama.cpp's CPU KV buffer and
 * PyTorch's CPU tensors are made) through every wrapped call, with their
 * contents checked across realloc, and small blocks churned by 4 threads
 * beside big ones. For each big block it prints the NUMA policy of the map
 * that holds its middle, read from /proc/self/numa_maps while it is live:
 *   block <call> <MiB> <addr> <policy>
 * Exit 0 when every content check held. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ul << 20)

/* The numa_maps policy of the map that contains addr ("?" if none). */
static void policy_of(const void *addr, char *out, size_t cap)
{
	snprintf(out, cap, "?");
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return;
	unsigned long a = (unsigned long)(uintptr_t)addr, lo, hi, start = 0;
	char line[512];
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= a && a < hi)
			start = lo;
	fclose(f);
	f = start ? fopen("/proc/self/numa_maps", "r") : NULL;
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		unsigned long s;
		char pol[64];
		if (sscanf(line, "%lx %63s", &s, pol) == 2 && s == start) {
			snprintf(out, cap, "%s", pol);
			break;
		}
	}
	fclose(f);
}

static void show(const char *call, const void *p, size_t n)
{
	char pol[64];
	policy_of((const char *)p + n / 2, pol, sizeof pol);
	printf("block %s %zu %p %s\n", call, n / MiB, p, pol);
}

static int filled(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i += 4096)
		if (p[i] != v)
			return 0;
	return p[n - 1] == v;
}

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg, bad = 0;
	for (int i = 0; i < 3000; i++) {
		seed = seed * 1103515245u + 12345u;
		size_t n = 16 + (seed >> 8) % 8192;
		unsigned char *p = malloc(n);
		if (!p)
			return (void *)1;
		memset(p, (int)(i & 0xff), n);
		p = realloc(p, n * 2);
		bad += !p || p[n - 1] != (unsigned char)(i & 0xff);
		free(p);
		if (i % 500 == 0) {          /* a big one now and then, beside the small */
			unsigned char *b = malloc(33 * MiB);
			if (!b)
				return (void *)1;
			b[0] = b[33 * MiB - 1] = 7;
			bad += b[0] != 7;
			free(b);
		}
	}
	return (void *)(uintptr_t)(bad != 0);
}

int main(void)
{
	int bad = 0;
	void *v = NULL;
	if (posix_memalign(&v, 64, 48 * MiB))
		return 2;
	unsigned char *kv = v;
	memset(kv, 1, 48 * MiB);
	show("posix_memalign", kv, 48 * MiB);

	unsigned char *small = malloc(16 * MiB);      /* below the heap hook's size */
	unsigned char *z = calloc(40, MiB);
	if (!small || !z)
		return 3;
	bad |= !filled(z, 40 * MiB, 0);
	show("calloc", z, 40 * MiB);
	memset(small, 2, 16 * MiB);

	kv = realloc(kv, 96 * MiB);                   /* contents survive the move */
	if (!kv)
		return 4;
	bad |= !filled(kv, 48 * MiB, 1);
	memset(kv + 48 * MiB, 3, 48 * MiB);
	show("realloc", kv, 96 * MiB);

	unsigned char *al = aligned_alloc(4096, 36 * MiB);
	if (!al)
		return 5;
	memset(al, 4, 36 * MiB);
	show("aligned_alloc", al, 36 * MiB);

	pthread_t t[4];
	for (uintptr_t i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, churn, (void *)(i + 1)))
			return 6;
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad |= r != NULL;
	}

	bad |= !filled(kv + 48 * MiB, 48 * MiB, 3) || !filled(small, 16 * MiB, 2) ||
	       !filled(al, 36 * MiB, 4);
	free(al);
	free(z);
	free(small);
	kv = realloc(kv, 8 * MiB);                    /* shrinks below the size: untracked */
	bad |= !kv || !filled(kv, 8 * MiB, 1);
	free(kv);
	printf("contents %s\n", bad ? "CORRUPT" : "intact");
	return bad;
}
