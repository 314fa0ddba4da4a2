// SPDX-License-Identifier: MIT
/* Test program: 16 threads x 10,000 random cudaMalloc / cudaFree / kernel
 * launches through the runtime; everything is freed at the end. Prints the
 * totals so the test can check the trace against them. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define NR_THREADS 16
#define NR_OPS 10000
#define SLOTS 32

typedef CUresult (*launch_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			     unsigned, unsigned, CUstream, void **, void **);
static launch_t launch;
static CUfunction touch;
static unsigned long allocs[NR_THREADS], frees[NR_THREADS], launches[NR_THREADS], errors;

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	void *live[SLOTS] = { 0 };
	unsigned long long x = 0x9e3779b97f4a7c15ull * (unsigned)(id + 1);
	for (int i = 0; i < NR_OPS; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		unsigned s = (unsigned)(x % SLOTS);
		if ((x >> 32) % 4 == 0 && live[s] && launch && touch) {
			struct { CUdeviceptr p; size_t len; int w; } rg = { (CUdeviceptr)live[s], 64, 1 };
			void *rgp = &rg;
			unsigned nr = 1;
			void *params[] = { &rgp, &nr };
			if (launch(touch, 1, 1, 1, 1, 1, 1, 0, 0, params, NULL) == CUDA_SUCCESS)
				launches[id]++;
			else
				__atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
		} else if (live[s]) {
			if (cudaFree(live[s]) == cudaSuccess)
				frees[id]++;
			else
				__atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
			live[s] = NULL;
		} else {
			size_t n = 256 + (size_t)((x >> 40) % (64 << 10));
			if (cudaMalloc(&live[s], n) == cudaSuccess)
				allocs[id]++;
			else
				__atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
		}
	}
	for (int s = 0; s < SLOTS; s++)
		if (live[s] && cudaFree(live[s]) == cudaSuccess)
			frees[id]++;
	return NULL;
}

int main(void)
{
	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;
	if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess)
		launch = (launch_t)fn;
	cudaFree(NULL);      /* initialize: the runtime loads the driver */
	void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	CUfunction (*get_touch)(void) = drv ? (CUfunction (*)(void))dlsym(drv, "fakecuda_touch_kernel") : NULL;
	if (get_touch)
		touch = get_touch();
	pthread_t t[NR_THREADS];
	for (long i = 0; i < NR_THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	unsigned long a = 0, f = 0, l = 0;
	for (int i = 0; i < NR_THREADS; i++) {
		pthread_join(t[i], NULL);
		a += allocs[i];
		f += frees[i];
		l += launches[i];
	}
	printf("allocs=%lu frees=%lu launches=%lu errors=%lu\n", a, f, l, errors);
	return errors || a != f ? 1 : 0;
}
