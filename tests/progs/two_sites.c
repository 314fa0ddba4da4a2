// SPDX-License-Identifier: MIT
/* Test program: 2 MiB anonymous maps from two call sites of the same shape
 * (f1 and f2 call g, which maps; g's frame is at the same address from
 * both), in turns of three, 240 maps. Prints "map ADDR RA" per map, RA
 * being g's return address (in f1 or f2): the traced stack of each map
 * must hold it (kvtier's stack cache must tell the sites apart). */
#include <stdio.h>
#include <sys/mman.h>

#define NOINL __attribute__((noinline))
static volatile int sink;

static NOINL void *g(void)
{
	void *ra = __builtin_return_address(0);
	void *p = mmap(NULL, 2u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("map %p %p\n", p, ra);
	return p;
}

static NOINL void *f1(void)
{
	void *p = g();
	sink += 1;
	return p;
}

static NOINL void *f2(void)
{
	void *p = g();
	sink += 2;
	return p;
}

int main(void)
{
	for (int i = 0; i < 240; i++) {
		void *p = (i / 3) % 2 ? f1() : f2();
		if (p == MAP_FAILED)
			return 1;
		munmap(p, 2u << 20);
	}
	return 0;
}
