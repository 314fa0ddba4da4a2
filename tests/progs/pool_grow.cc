// SPDX-License-Identifier: MIT
/* A C++ program for the symbolization tests (tests/unit/test_symbolize.c),
 * built with g++ -g -O0: serve::Pool::grow(unsigned long) maps 64 MiB with
 * mmap, and serve::Pool::grow_small() maps 2 MiB through an always-inlined
 * helper (a frame that exists only in the DWARF). The lines the tests
 * expect are marked with a comment. The "rebuilt" variant (pool_grow_v2)
 * is compiled with -DKVT_POOL_V2: other code, another build id. */
#include <sys/mman.h>
#include <cstdio>
#include <cstring>

/* Always inlined into its caller. */
__attribute__((always_inline)) static inline void *map_region(unsigned long bytes)
{
	return mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); // MAP_REGION_LINE
}

namespace serve {

class Pool {
public:
	void *grow(unsigned long bytes);
	void *grow_small();
};

void *Pool::grow(unsigned long bytes)
{
#ifdef KVT_POOL_V2
	std::fprintf(stderr, "pool: v2\n");
#endif
	return mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); // GROW_LINE
}

void *Pool::grow_small()
{
	return map_region(2ul << 20); // GROW_SMALL_LINE
}

} // namespace serve

int main()
{
	serve::Pool pool;
	void *p = pool.grow(64ul << 20), *q = pool.grow_small();
	if (p == MAP_FAILED || q == MAP_FAILED) {
		std::perror("mmap");
		return 1;
	}
	std::memset(p, 1, 4096);
	munmap(p, 64ul << 20);
	munmap(q, 2ul << 20);
	return 0;
}
