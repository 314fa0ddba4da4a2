// SPDX-License-Identifier: MIT
/* Test preload: another interposer, placed before or after kvtier. It wraps
 * cudaMalloc and mmap with RTLD_NEXT and reports its counts at exit, so the
 * test sees that both libraries got every call. */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/types.h>

static unsigned long n_malloc, n_mmap;

int cudaMalloc(void **p, size_t n)
{
	static int (*real)(void **, size_t);
	if (!real)
		real = (int (*)(void **, size_t))dlsym(RTLD_NEXT, "cudaMalloc");
	n_malloc++;
	return real ? real(p, n) : 35;
}

void *mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
	static void *(*real)(void *, size_t, int, int, int, off_t);
	if (!real)
		real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
	if (flags & MAP_ANONYMOUS)
		n_mmap++;
	return real(a, n, prot, flags, fd, off);
}

__attribute__((destructor)) static void report(void)
{
	fprintf(stderr, "second: cudaMalloc=%lu mmap=%lu\n", n_malloc, n_mmap);
}
