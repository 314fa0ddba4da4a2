// SPDX-License-Identifier: MIT
/* Test library for tests/real/deepbind.c, dlopen'ed with RTLD_DEEPBIND:
 * its own definition of kvt_deep_whoami() must win over the executable's,
 * and it maps/unmaps memory directly, through dlsym(RTLD_NEXT, "mmap") and
 * through dlsym(RTLD_DEFAULT, "munmap"). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

const char *kvt_deep_whoami(void) { return "library"; }

typedef void *(*mmap_t)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_t)(void *, size_t);

static uint64_t touch(unsigned char *p, size_t n, unsigned seed)
{
	uint64_t s = 0;
	for (size_t i = 0; i < n; i += 4096) {
		p[i] = (unsigned char)(i / 4096 + seed);
		s += p[i];
	}
	return s;
}

/* Returns 0 when every call worked; prints what it did (no addresses). */
int kvt_deep_run(void)
{
	int bad = 0;
	const char *who = kvt_deep_whoami();
	printf("deep: whoami from inside the library: %s\n", who);
	unsigned char *a = mmap(NULL, 6 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return 1;
	printf("deep: direct mmap 6 MiB sum=%llu\n", (unsigned long long)touch(a, 6 << 20, 1));
	bad |= munmap(a, 6 << 20) != 0;

	mmap_t next_mmap = (mmap_t)dlsym(RTLD_NEXT, "mmap");
	munmap_t def_munmap = (munmap_t)dlsym(RTLD_DEFAULT, "munmap");
	printf("deep: dlsym(RTLD_NEXT, mmap) %s, dlsym(RTLD_DEFAULT, munmap) %s\n",
	       next_mmap ? "found" : "missing", def_munmap ? "found" : "missing");
	if (!next_mmap || !def_munmap)
		return 1;
	unsigned char *b = next_mmap(NULL, 10 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED)
		return 1;
	printf("deep: RTLD_NEXT mmap 10 MiB sum=%llu\n", (unsigned long long)touch(b, 10 << 20, 2));
	bad |= def_munmap(b, 10 << 20) != 0;
	return bad;
}
