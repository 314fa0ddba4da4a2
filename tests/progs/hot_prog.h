/* SPDX-License-Identifier: MIT */
/* What the preload test programs that read hot chunks share (sample_hot,
 * multi_dev, graph_hot): the driver's resolver, found as libcudart finds it
 * (dlopen, then cuGetProcAddress_v2, so kvtier's resolver hooks see every
 * entry point they fetch), and a millisecond clock. */
#ifndef KVT_HOT_PROG_H
#define KVT_HOT_PROG_H

#include <dlfcn.h>
#include <stdint.h>
#include <time.h>

#include <cuda.h>

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* The driver's cuGetProcAddress_v2 (NULL without a driver); *h the
 * driver's handle, for its test-only fakecuda_* exports. */
static inline gpa_t hot_prog_gpa(void **h)
{
	*h = dlopen("libcuda.so.1", RTLD_NOW);
	return *h ? (gpa_t)dlsym(*h, "cuGetProcAddress_v2") : NULL;
}

static inline uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
