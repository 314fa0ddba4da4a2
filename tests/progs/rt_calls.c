// SPDX-License-Identifier: MIT
/* Test program: every runtime allocation export once, each pointer used
 * (written and read back through cudaMemcpy), then an out-of-memory request.
 * Prints "CALL <api> rc=<r> size=<n> ok=<0|1>" (no addresses, so runs with
 * and without kvtier compare equal) and "ADDR <api> 0x..." lines for traces. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

static int bad;

static int usable(void *p, size_t n, int host)
{
	unsigned char pat[256], back[256];
	size_t k = n < sizeof pat ? n : sizeof pat;
	for (size_t i = 0; i < k; i++)
		pat[i] = (unsigned char)(i * 7 + 3);
	if (host) {
		memcpy(p, pat, k);
		memcpy(back, p, k);
	} else if (cudaMemcpy(p, pat, k, cudaMemcpyHostToDevice) ||
		   cudaMemcpy(back, p, k, cudaMemcpyDeviceToHost)) {
		return 0;
	}
	return !memcmp(pat, back, k);
}

static void report(const char *api, cudaError_t e, size_t size, void *p, int host)
{
	int ok = e == cudaSuccess && p && usable(p, size, host);
	printf("CALL %s rc=%d size=%zu ok=%d\n", api, (int)e, size, ok);
	fprintf(stderr, "ADDR %s 0x%llx\n", api, (unsigned long long)(uintptr_t)p);
	if (e == cudaSuccess && !ok)
		bad++;
}

int main(void)
{
	void *d = NULL, *h = NULL, *ha = NULL, *m = NULL, *a = NULL, *big = NULL;
	cudaError_t e;
	e = cudaMalloc(&d, 3 << 20);                 report("cudaMalloc", e, 3 << 20, d, 0);
	e = cudaMallocHost(&h, 1 << 20);             report("cudaMallocHost", e, 1 << 20, h, 1);
	e = cudaHostAlloc(&ha, 2 << 20, cudaHostAllocPortable);
	report("cudaHostAlloc", e, 2 << 20, ha, 1);
	e = cudaMallocManaged(&m, 4 << 20, cudaMemAttachGlobal);
	report("cudaMallocManaged", e, 4 << 20, m, 0);
	e = cudaMallocAsync(&a, 1 << 20, 0);         report("cudaMallocAsync", e, 1 << 20, a, 0);
	e = cudaFreeAsync(a, 0);                     printf("CALL cudaFreeAsync rc=%d\n", (int)e);
	e = cudaStreamSynchronize(0);                printf("CALL sync rc=%d\n", (int)e);
	e = cudaMalloc(&big, (size_t)1 << 50);       /* never fits: out of memory */
	printf("CALL cudaMalloc-oom rc=%d ptr-written=%d\n", (int)e, big != NULL);
	e = cudaFree(m);                             printf("CALL cudaFree rc=%d\n", (int)e);
	e = cudaFree(d);                             printf("CALL cudaFree rc=%d\n", (int)e);
	e = cudaFreeHost(ha);                        printf("CALL cudaFreeHost rc=%d\n", (int)e);
	e = cudaFreeHost(h);                         printf("CALL cudaFreeHost rc=%d\n", (int)e);
	e = cudaFree((void *)0x1000);                /* never allocated */
	printf("CALL cudaFree-bogus rc=%d\n", (int)e);
	printf("DONE bad=%d\n", bad);
	return bad ? 1 : 0;
}
