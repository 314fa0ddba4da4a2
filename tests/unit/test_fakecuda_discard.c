/* SPDX-License-Identifier: MIT */
/* CUnit suite for the SIMULATED driver's CUDA 13 batch calls:
 * cuMemDiscardBatchAsync, cuMemDiscardAndPrefetchBatchAsync and
 * cuMemPrefetchBatchAsync (and _ptsz, the resolver rows, the stand-in
 * runtime's wrappers). A discard poisons its bytes (0xdb) and makes the next
 * move of each unit it covers wholly free, until a write or a prefetch. The
 * 64 KiB residency unit (FAKECUDA_UM_PAGE=64K) runs in a child (--child
 * page64k); virtual time is test_fakecuda_vtime's. Runs with
 * FAKECUDA_DEVICE_BYTES=64M (32 blocks of HBM). */
#include "unit/fakecuda_drv.h"

#include <stdbool.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#define POISON 0xdb

static struct {
	PFN_cuMemDiscardBatchAsync_v13000 Discard, DiscardPt;
	PFN_cuMemDiscardAndPrefetchBatchAsync_v13000 DiscardPf, DiscardPfPt;
	PFN_cuMemPrefetchBatchAsync_v13000 PfBatch, PfBatchPt;
	PFN_cuStreamCreate_v2000 StreamCreate;
	PFN_cuStreamDestroy_v4000 StreamDestroy;
	__typeof__(&fakecuda_peek) peek;
	__typeof__(&fakecuda_poke) poke;
} X;

static CUstream st;   /* a created (non-legacy) stream */

static int load_batch_api(void)
{
	X.Discard = get("cuMemDiscardBatchAsync", 13000, 0);
	X.DiscardPt = get("cuMemDiscardBatchAsync", 13000, 2);
	X.DiscardPf = get("cuMemDiscardAndPrefetchBatchAsync", 13000, 0);
	X.DiscardPfPt = get("cuMemDiscardAndPrefetchBatchAsync", 13000, 2);
	X.PfBatch = get("cuMemPrefetchBatchAsync", 13000, 0);
	X.PfBatchPt = get("cuMemPrefetchBatchAsync", 13000, 2);
	X.StreamCreate = get("cuStreamCreate", 2000, 0);
	X.StreamDestroy = get("cuStreamDestroy", 4000, 0);
	X.peek = (__typeof__(X.peek))dlsym(drv, "fakecuda_peek");
	X.poke = (__typeof__(X.poke))dlsym(drv, "fakecuda_poke");
	void **f = (void **)&X;
	for (size_t i = 0; i < sizeof X / sizeof(void *); i++)
		if (!f[i])
			return -1;
	return X.StreamCreate(&st, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS ? 0 : -1;
}

/* ---- helpers ---- */

static CUresult discard1(CUdeviceptr p, size_t n)
{
	CUdeviceptr d[1] = { p };
	size_t s[1] = { n };
	return X.Discard(d, s, 1, 0, st);
}

static CUresult prefetch1(CUdeviceptr p, size_t n, CUmemLocation l)
{
	return D.Prefetch(p, n, l, 0, st);
}

/* Bytes of [p, p+n) equal to v, read from the driver's store without a
 * move (fakecuda_peek); SIZE_MAX when it cannot read them. No CUnit
 * assertion: the child uses it too. */
static size_t count_byte(CUdeviceptr p, size_t n, unsigned char v)
{
	unsigned char *buf = malloc(n);
	if (!buf || X.peek((const void *)p, buf, n)) {
		free(buf);
		return SIZE_MAX;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += buf[i] == v;
	free(buf);
	return k;
}

static void fill(CUdeviceptr p, size_t n, unsigned char v)
{
	memset((void *)p, v, n);   /* a CPU write: faults the blocks back if needed */
}

/* ---- content ---- */

/* The CPU sees exactly the discarded bytes poisoned, on a host-resident
 * block at once and on a device-resident one after its CPU fault. */
static void test_poison_visible(void)
{
	CUdeviceptr p = managed(3 * BLK);
	fill(p, 3 * BLK, 0x11);
	CU_ASSERT_EQUAL_FATAL(prefetch1(p + 2 * BLK, BLK, DEV), CUDA_SUCCESS);
	D.reset();
	CUdeviceptr d[2] = { p + 4096, p + 2 * BLK + 100 };
	size_t s[2] = { 8192, 50 };
	CU_ASSERT_EQUAL_FATAL(X.Discard(d, s, 2, 0, st), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.discard_ops, 2);
	CU_ASSERT_EQUAL(c.bytes_discarded, 0);   /* no block wholly covered */
	CU_ASSERT_EQUAL(c.virtual_ns, 0);
	const unsigned char *h = (const unsigned char *)p;
	size_t poisoned = 0, kept = 0;
	for (size_t i = 0; i < 3 * BLK; i++) {
		bool in = (i >= 4096 && i < 4096 + 8192) || (i >= 2 * BLK + 100 && i < 2 * BLK + 150);
		poisoned += in && h[i] == POISON;
		kept += !in && h[i] == 0x11;
	}
	CU_ASSERT_EQUAL(poisoned, 8192 + 50);
	CU_ASSERT_EQUAL(kept, 3 * BLK - 8192 - 50);
	CU_ASSERT_EQUAL(loc_of(p + 2 * BLK, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	c = ctr();
	CU_ASSERT_EQUAL(c.cpu_faults, 1);
	CU_ASSERT_EQUAL(c.bytes_dtoh, BLK);        /* partly covered: a real copy */
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, 0);
	D.MemFree(p);
}

/* A whole block discarded on the host goes to the device for nothing: no
 * link bytes, no link time, resident there, and it reads as poison. */
static void test_discarded_prefetch_free(void)
{
	CUdeviceptr p = managed(2 * BLK);
	fill(p, 2 * BLK, 0x22);
	D.reset();
	CU_ASSERT_EQUAL_FATAL(discard1(p, BLK), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().bytes_discarded, BLK);
	CU_ASSERT_EQUAL_FATAL(prefetch1(p, 2 * BLK, DEV), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.prefetch_blocks, 2);
	CU_ASSERT_EQUAL(c.bytes_htod, BLK);        /* block 1 only */
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, BLK);
	CU_ASSERT_EQUAL(c.managed_resident_bytes, 2 * BLK);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	/* the one copied block's link time, 2 MiB at 55 GB/s, and nothing more */
	CU_ASSERT(c.virtual_ns >= 38129 && c.virtual_ns <= 38131);
	CU_ASSERT_EQUAL(count_byte(p, BLK, POISON), BLK);
	CU_ASSERT_EQUAL(count_byte(p + BLK, BLK, 0x22), BLK);
	/* the prefetch ended the discard: back to the host is a copy again */
	D.reset();
	CU_ASSERT_EQUAL(prefetch1(p, BLK, HOST), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().bytes_dtoh, BLK);
	/* so does one that finds the block in place already (cuda.h: a
	 * discard is "undone ... by prefetching it") */
	CU_ASSERT_EQUAL_FATAL(discard1(p + BLK, BLK), CUDA_SUCCESS);
	D.reset();
	CU_ASSERT_EQUAL(prefetch1(p + BLK, BLK, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().prefetch_blocks, 0);
	CU_ASSERT_EQUAL(prefetch1(p + BLK, BLK, HOST), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().bytes_dtoh, BLK);
	CU_ASSERT_EQUAL(ctr().bytes_discard_skipped, 0);
	D.MemFree(p);
}

/* Discarded on the device: the eviction, a GPU-read fault and a CPU fault
 * of such blocks move nothing; a discarded block that another block's
 * eviction does not reach costs its copy as usual. */
static void test_discarded_moves_free(void)
{
	CUdeviceptr p = managed(3 * BLK);
	fill(p, 3 * BLK, 0x33);
	CU_ASSERT_EQUAL_FATAL(prefetch1(p, 2 * BLK, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(discard1(p, 3 * BLK), CUDA_SUCCESS);
	D.reset();
	CUdeviceptr x = 0;                          /* 62 MiB more: block 0 (oldest) goes */
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&x, 62 * MiB), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.evictions, 1);
	CU_ASSERT_EQUAL(c.bytes_dtoh, 0);
	CU_ASSERT_EQUAL(c.bytes_evicted, 0);
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, BLK);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	CU_ASSERT_EQUAL(D.MemFree(x), CUDA_SUCCESS);
	D.reset();                                  /* block 2 (host): a GPU read faults it in */
	CU_ASSERT_EQUAL(D.access((void *)(p + 2 * BLK), 64, 0), CUDA_SUCCESS);
	c = ctr();
	CU_ASSERT_EQUAL(c.faults, 1);
	CU_ASSERT_EQUAL(c.bytes_htod, 0);
	CU_ASSERT_EQUAL(c.bytes_fault_in, 0);
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, BLK);
	CU_ASSERT_EQUAL(loc_of(p + 2 * BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	D.reset();                                  /* block 1 (device): a CPU read */
	CU_ASSERT_EQUAL(((volatile unsigned char *)p)[BLK + 7], POISON);
	c = ctr();
	CU_ASSERT_EQUAL(c.cpu_faults, 1);
	CU_ASSERT_EQUAL(c.bytes_dtoh, 0);
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, BLK);
	D.reset();                                  /* each move ended its discard */
	CU_ASSERT_EQUAL(prefetch1(p, 2 * BLK, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(prefetch1(p + 2 * BLK, BLK, HOST), CUDA_SUCCESS);
	c = ctr();
	CU_ASSERT_EQUAL(c.bytes_htod, 2 * BLK);
	CU_ASSERT_EQUAL(c.bytes_dtoh, BLK);
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, 0);
	D.MemFree(p);
}

/* A write ends the discard (the CPU's, a memset's, a GPU kernel's, a
 * workload's content stamp through fakecuda_poke), and the block's next
 * move is a copy again; a GPU read does not end it. */
static void test_write_ends_discard(void)
{
	CUdeviceptr p = managed(5 * BLK);
	fill(p, 5 * BLK, 0x44);
	CU_ASSERT_EQUAL_FATAL(prefetch1(p + 2 * BLK, 3 * BLK, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(discard1(p, 5 * BLK), CUDA_SUCCESS);
	((volatile unsigned char *)p)[10] = 0x99;          /* block 0: a CPU write */
	CU_ASSERT_EQUAL(((volatile unsigned char *)p)[10], 0x99);
	CU_ASSERT_EQUAL(D.MemsetD8(p + BLK + 5, 0x77, 3), CUDA_SUCCESS);   /* block 1 */
	CU_ASSERT_EQUAL(D.access((void *)(p + 2 * BLK), 64, 1), CUDA_SUCCESS);  /* block 2 */
	CU_ASSERT_EQUAL(D.access((void *)(p + 3 * BLK), 64, 0), CUDA_SUCCESS);  /* block 3: read */
	CU_ASSERT_EQUAL(X.poke((void *)(p + 4 * BLK), "stamp", 5), 0);          /* block 4 */
	CU_ASSERT_EQUAL(loc_of(p + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);    /* memset faulted it */
	CU_ASSERT_EQUAL_FATAL(prefetch1(p + BLK, BLK, HOST), CUDA_SUCCESS);    /* back for the test */
	D.reset();
	CU_ASSERT_EQUAL(prefetch1(p, BLK, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(prefetch1(p + BLK, BLK, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(prefetch1(p + 2 * BLK, 3 * BLK, HOST), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.bytes_htod, 2 * BLK);      /* blocks 0 and 1 were written */
	CU_ASSERT_EQUAL(c.bytes_dtoh, 2 * BLK);      /* blocks 2 and 4 too, 3 only read */
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, BLK);
	/* the writes landed, the rest stayed poison */
	CU_ASSERT_EQUAL(count_byte(p, BLK, POISON), BLK - 1);
	CU_ASSERT_EQUAL(count_byte(p + BLK + 5, 3, 0x77), 3);
	CU_ASSERT_EQUAL(count_byte(p + BLK, BLK, POISON), BLK - 3);
	CU_ASSERT_EQUAL(memcmp((const void *)(p + 4 * BLK), "stamp", 5), 0);
	D.MemFree(p);
}

/* A block only partly covered is poisoned in the range alone and still
 * costs its copy; one wholly covered in the same range is free. */
static void test_partial_block(void)
{
	CUdeviceptr p = managed(2 * BLK);
	fill(p, 2 * BLK, 0x55);
	D.reset();
	CU_ASSERT_EQUAL_FATAL(discard1(p + 100, 2 * BLK - 100), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.discard_ops, 1);
	CU_ASSERT_EQUAL(c.bytes_discarded, BLK);
	CU_ASSERT_EQUAL(count_byte(p, 100, 0x55), 100);
	CU_ASSERT_EQUAL(count_byte(p + 100, 2 * BLK - 100, POISON), 2 * BLK - 100);
	CU_ASSERT_EQUAL(prefetch1(p, 2 * BLK, DEV), CUDA_SUCCESS);
	c = ctr();
	CU_ASSERT_EQUAL(c.bytes_htod, BLK);
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, BLK);
	CU_ASSERT_EQUAL(count_byte(p, 100, 0x55), 100);        /* the copy kept them */
	CU_ASSERT_EQUAL(count_byte(p + 100, 2 * BLK - 100, POISON), 2 * BLK - 100);
	D.MemFree(p);
}

/* The last block of an allocation that is not a whole number of blocks is
 * wholly covered by a range that reaches the allocation's end. */
static void test_tail_block(void)
{
	CUdeviceptr p = managed(BLK + 4096);
	D.reset();
	CU_ASSERT_EQUAL_FATAL(discard1(p + BLK, 4096), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().bytes_discarded, BLK);
	CU_ASSERT_EQUAL(prefetch1(p, BLK + 4096, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().bytes_htod, BLK);
	CU_ASSERT_EQUAL(ctr().bytes_discard_skipped, BLK);
	D.MemFree(p);
}

/* Discard-and-prefetch: each range to its location, discarded blocks for
 * nothing; the plain batch prefetch moves (and keeps) the bytes. */
static void test_discard_and_prefetch(void)
{
	CUdeviceptr p = managed(4 * BLK);
	fill(p, 4 * BLK, 0x66);
	CU_ASSERT_EQUAL_FATAL(prefetch1(p + 2 * BLK, BLK, DEV), CUDA_SUCCESS);
	D.reset();
	CUdeviceptr d[3] = { p, p + BLK, p + 2 * BLK };
	size_t s[3] = { BLK, BLK, BLK }, idx[2] = { 0, 2 };
	CUmemLocation l[2] = { DEV, HOST };
	CU_ASSERT_EQUAL_FATAL(X.DiscardPf(d, s, 3, l, idx, 2, 0, st), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.discard_ops, 3);
	CU_ASSERT_EQUAL(c.bytes_discarded, 3 * BLK);
	CU_ASSERT_EQUAL(c.prefetch_blocks, 3);
	CU_ASSERT_EQUAL(c.bytes_htod + c.bytes_dtoh, 0);
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, 3 * BLK);
	CU_ASSERT_EQUAL(c.virtual_ns, 0);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(loc_of(p + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(loc_of(p + 2 * BLK, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	CU_ASSERT_EQUAL(count_byte(p, 3 * BLK, POISON), 3 * BLK);
	D.reset();
	CUdeviceptr d2[2] = { p + 3 * BLK, p };
	size_t s2[2] = { BLK, BLK }, idx2[2] = { 0, 1 };
	CUmemLocation l2[2] = { DEV, HOST };
	CU_ASSERT_EQUAL(X.PfBatch(d2, s2, 2, l2, idx2, 2, 0, st), CUDA_SUCCESS);
	c = ctr();
	CU_ASSERT_EQUAL(c.discard_ops, 0);
	CU_ASSERT_EQUAL(c.bytes_htod, BLK);
	CU_ASSERT_EQUAL(c.bytes_dtoh, BLK);
	CU_ASSERT_EQUAL(loc_of(p + 3 * BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	CU_ASSERT_EQUAL(count_byte(p + 3 * BLK, BLK, 0x66), BLK);
	D.MemFree(p);
}

/* A read-mostly block duplicated on the device: both copies are poisoned,
 * so the CPU reads the poison from its duplicate without a fault. */
static void test_read_mostly_duplicate(void)
{
	CUdeviceptr p = managed(BLK);
	fill(p, BLK, 0x71);
	CU_ASSERT_EQUAL_FATAL(D.MemAdvise(p, BLK, CU_MEM_ADVISE_SET_READ_MOSTLY, DEV), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(D.access((void *)p, 64, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	D.reset();
	CU_ASSERT_EQUAL_FATAL(discard1(p + 64, 64), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(count_byte(p + 64, 64, POISON), 64);        /* the device copy */
	const volatile unsigned char *h = (const volatile unsigned char *)p;
	CU_ASSERT_EQUAL(h[63], 0x71);
	CU_ASSERT_EQUAL(h[64], POISON);
	CU_ASSERT_EQUAL(h[127], POISON);
	CU_ASSERT_EQUAL(h[128], 0x71);
	CU_ASSERT_EQUAL(ctr().cpu_faults, 0);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	D.MemFree(p);
}

/* ---- errors: the whole batch is checked before anything happens ---- */

static void test_errors(void)
{
	CUdeviceptr p = managed(2 * BLK), q = managed(BLK), dm = 0;
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&dm, BLK), CUDA_SUCCESS);
	fill(p, 2 * BLK, 0x12);
	D.reset();
	CUdeviceptr d[2] = { p, p + BLK };
	size_t s[2] = { BLK, BLK }, idx[2] = { 0, 1 };
	CUmemLocation l[2] = { DEV, HOST };
	const CUresult INV = CUDA_ERROR_INVALID_VALUE;
	CU_ASSERT_EQUAL(X.Discard(d, s, 2, 1, st), INV);           /* flags */
	CU_ASSERT_EQUAL(X.Discard(d, s, 0, 0, st), INV);           /* count 0 */
	CU_ASSERT_EQUAL(X.Discard(NULL, s, 2, 0, st), INV);
	CU_ASSERT_EQUAL(X.Discard(d, NULL, 2, 0, st), INV);
	CU_ASSERT_EQUAL(X.Discard(d, s, 2, 0, NULL), INV);         /* legacy NULL stream */
	CU_ASSERT_EQUAL(X.Discard(d, s, 2, 0, CU_STREAM_LEGACY), INV);
	CU_ASSERT_EQUAL(X.DiscardPt(d, s, 2, 0, CU_STREAM_LEGACY), INV);
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, l, idx, 2, 0, NULL), INV);
	CU_ASSERT_EQUAL(X.PfBatch(d, s, 2, l, idx, 2, 0, CU_STREAM_LEGACY), INV);
	/* ranges: the second of each batch is bad, so the first must not happen */
	static const struct { CUdeviceptr off; size_t len; int base; } bad[] = {
		{ BLK, BLK + 1, 0 },           /* runs past the allocation */
		{ BLK, 0, 0 },                 /* empty */
		{ 0, BLK, 1 },                 /* device memory */
		{ 0, 2 * BLK, 2 },             /* past q into whatever follows */
		{ 4096, 1, 3 },                /* no allocation */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CUdeviceptr base = bad[i].base == 1 ? dm : bad[i].base == 2 ? q
				 : bad[i].base == 3 ? 0 : p;
		CUdeviceptr bd[2] = { p, base + bad[i].off };
		size_t bs[2] = { BLK, bad[i].len };
		CU_ASSERT_EQUAL(X.Discard(bd, bs, 2, 0, st), INV);
		CU_ASSERT_EQUAL(X.DiscardPf(bd, bs, 2, l, idx, 2, 0, st), INV);
		CU_ASSERT_EQUAL(X.PfBatch(bd, bs, 2, l, idx, 2, 0, st), INV);
	}
	/* locations */
	size_t idx_1[2] = { 1, 1 }, idx_eq[2] = { 0, 0 }, idx_hi[2] = { 0, 2 };
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, l, idx_1, 2, 0, st), INV);   /* not from 0 */
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, l, idx_eq, 2, 0, st), INV);  /* not increasing */
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, l, idx_hi, 2, 0, st), INV);  /* past count */
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 1, l, idx, 2, 0, st), INV);     /* more locations than ranges */
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, l, idx, 0, 0, st), INV);
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, NULL, idx, 2, 0, st), INV);
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, l, NULL, 2, 0, st), INV);
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, l, idx, 2, 1, st), INV);     /* flags */
	CU_ASSERT_EQUAL(X.PfBatch(d, s, 2, l, idx_eq, 2, 0, st), INV);
	static const CUmemLocation badloc[] = {
		{ CU_MEM_LOCATION_TYPE_DEVICE, 5 },        /* no such ordinal */
		{ CU_MEM_LOCATION_TYPE_DEVICE, -1 },
		{ CU_MEM_LOCATION_TYPE_HOST_NUMA, 63 },    /* no such node */
		{ CU_MEM_LOCATION_TYPE_INVALID, 0 },
		{ (CUmemLocationType)99, 0 },
	};
	for (size_t i = 0; i < sizeof badloc / sizeof badloc[0]; i++) {
		CUmemLocation lb[2] = { DEV, badloc[i] };
		CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, lb, idx, 2, 0, st), INV);
		CU_ASSERT_EQUAL(X.PfBatch(d, s, 2, lb, idx, 2, 0, st), INV);
	}
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.discard_ops, 0);
	CU_ASSERT_EQUAL(c.prefetch_blocks, 0);
	CU_ASSERT_EQUAL(c.bytes_htod + c.bytes_dtoh, 0);
	CU_ASSERT_EQUAL(count_byte(p, 2 * BLK, 0x12), 2 * BLK);   /* nothing poisoned */
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_HOST_NUMA);
	/* the same batches with good arguments do run */
	CU_ASSERT_EQUAL(X.Discard(d, s, 2, 0, st), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().discard_ops, 2);
	CU_ASSERT_EQUAL(X.DiscardPf(d, s, 2, l, idx, 2, 0, st), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(loc_of(p, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	D.MemFree(dm);
	D.MemFree(q);
	D.MemFree(p);
}

/* ---- the other ways in ---- */

/* The resolver's rows (13000, _ptsz on flag 2); a _ptsz export takes a NULL
 * stream (the per-thread one), never the legacy stream. */
static void test_resolver_ptsz(void)
{
	static const char *const names[] = { "cuMemDiscardBatchAsync",
		"cuMemDiscardAndPrefetchBatchAsync", "cuMemPrefetchBatchAsync" };
	for (size_t i = 0; i < 3; i++) {
		char pt[80];
		snprintf(pt, sizeof pt, "%s_ptsz", names[i]);
		CU_ASSERT_PTR_NOT_NULL(dlsym(drv, names[i]));
		CU_ASSERT_PTR_EQUAL(get(names[i], 13000, 0), dlsym(drv, names[i]));
		CU_ASSERT_PTR_EQUAL(get(names[i], 13000, 1), dlsym(drv, names[i]));
		CU_ASSERT_PTR_EQUAL(get(names[i], 13000, 2), dlsym(drv, pt));
		void *f = (void *)1;
		CUdriverProcAddressQueryResult q = 99;
		CU_ASSERT_EQUAL(gpa(names[i], &f, 12090, 0, &q), CUDA_SUCCESS);
		CU_ASSERT_PTR_NULL(f);
		CU_ASSERT_EQUAL(q, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	}
	CUdeviceptr p = managed(3 * BLK);
	fill(p, 3 * BLK, 0x21);
	D.reset();
	CUdeviceptr d[1] = { p };
	size_t s[1] = { BLK }, idx[1] = { 0 };
	CUmemLocation dev = DEV;
	CU_ASSERT_EQUAL(X.DiscardPt(d, s, 1, 0, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(X.DiscardPt(d, s, 1, 0, st), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(X.DiscardPt(d, s, 1, 0, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(X.Discard(d, s, 1, 0, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	d[0] = p + BLK;
	CU_ASSERT_EQUAL(X.DiscardPfPt(d, s, 1, &dev, idx, 1, 0, NULL), CUDA_SUCCESS);
	d[0] = p + 2 * BLK;
	CU_ASSERT_EQUAL(X.PfBatchPt(d, s, 1, &dev, idx, 1, 0, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(X.DiscardPfPt(d, s, 1, &dev, idx, 1, 0, CU_STREAM_LEGACY),
			CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(X.PfBatchPt(d, s, 1, &dev, idx, 1, 0, CU_STREAM_LEGACY),
			CUDA_ERROR_INVALID_VALUE);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.discard_ops, 5);
	CU_ASSERT_EQUAL(c.bytes_discarded, 5 * BLK);
	CU_ASSERT_EQUAL(c.bytes_htod, BLK);           /* block 2, not discarded */
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, BLK);
	CU_ASSERT_EQUAL(loc_of(p + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(loc_of(p + 2 * BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(count_byte(p, 2 * BLK, POISON), 2 * BLK);
	CU_ASSERT_EQUAL(count_byte(p + 2 * BLK, BLK, 0x21), BLK);
	D.MemFree(p);
}

/* The stand-in runtime's wrappers reach the same calls. */
static void test_cudart(void)
{
	void *rt = dlopen(kvt_path("fakecuda/libcudart.so.13"), RTLD_NOW);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	__typeof__(&cudaMemDiscardBatchAsync) dis = dlsym(rt, "cudaMemDiscardBatchAsync");
	__typeof__(&cudaMemDiscardBatchAsync) dis_pt = dlsym(rt, "cudaMemDiscardBatchAsync_ptsz");
	__typeof__(&cudaMemDiscardAndPrefetchBatchAsync) dpf =
		dlsym(rt, "cudaMemDiscardAndPrefetchBatchAsync");
	__typeof__(&cudaMemDiscardAndPrefetchBatchAsync) dpf_pt =
		dlsym(rt, "cudaMemDiscardAndPrefetchBatchAsync_ptsz");
	__typeof__(&cudaMemPrefetchBatchAsync) pf = dlsym(rt, "cudaMemPrefetchBatchAsync");
	__typeof__(&cudaMemPrefetchBatchAsync) pf_pt = dlsym(rt, "cudaMemPrefetchBatchAsync_ptsz");
	__typeof__(&cudaStreamCreate) mk = dlsym(rt, "cudaStreamCreate");
	__typeof__(&cudaStreamDestroy) rm = dlsym(rt, "cudaStreamDestroy");
	__typeof__(&cudaGetLastError) last = dlsym(rt, "cudaGetLastError");
	CU_ASSERT_FATAL(dis && dis_pt && dpf && dpf_pt && pf && pf_pt && mk && rm && last);
	cudaStream_t s = NULL;
	CU_ASSERT_EQUAL_FATAL(mk(&s), cudaSuccess);
	CUdeviceptr p = managed(4 * BLK);
	fill(p, 4 * BLK, 0x31);
	D.reset();
	void *d[1] = { (void *)p };
	size_t sz[1] = { BLK }, idx[1] = { 0 };
	struct cudaMemLocation dev = { cudaMemLocationTypeDevice, 0 };
	CU_ASSERT_EQUAL(dis(d, sz, 1, 0, s), cudaSuccess);
	CU_ASSERT_EQUAL(dis(d, sz, 1, 0, 0), cudaErrorInvalidValue);   /* legacy stream */
	CU_ASSERT_EQUAL(last(), cudaErrorInvalidValue);
	CU_ASSERT_EQUAL(dis(d, sz, 1, 7, s), cudaErrorInvalidValue);
	CU_ASSERT_EQUAL(dis_pt(d, sz, 1, 0, 0), cudaSuccess);          /* per-thread stream */
	d[0] = (void *)(p + BLK);
	CU_ASSERT_EQUAL(dpf(d, sz, 1, &dev, idx, 1, 0, s), cudaSuccess);
	d[0] = (void *)(p + 2 * BLK);
	CU_ASSERT_EQUAL(dpf_pt(d, sz, 1, &dev, idx, 1, 0, 0), cudaSuccess);
	d[0] = (void *)(p + 3 * BLK);
	CU_ASSERT_EQUAL(pf(d, sz, 1, &dev, idx, 1, 0, 0), cudaErrorInvalidValue);
	CU_ASSERT_EQUAL(pf(d, sz, 1, &dev, idx, 1, 0, s), cudaSuccess);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.discard_ops, 4);
	CU_ASSERT_EQUAL(c.bytes_htod, BLK);            /* block 3 alone was kept */
	CU_ASSERT_EQUAL(c.bytes_discard_skipped, 2 * BLK);
	CU_ASSERT_EQUAL(loc_of(p + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(loc_of(p + 3 * BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(count_byte(p + 3 * BLK, BLK, 0x31), BLK);
	CU_ASSERT_EQUAL(((volatile unsigned char *)p)[123], POISON);
	CU_ASSERT_EQUAL(rm(s), cudaSuccess);
	D.MemFree(p);
}

/* ---- FAKECUDA_UM_PAGE=64K (child) ---- */

/* Four 64 KiB pages written; [page 1, page 3 + 10 bytes) discarded; the
 * four prefetched to the device; printed: what each step counted. */
static int child_page64k(void)
{
	const size_t K64 = 64u << 10;
	CUdeviceptr p = 0;
	if (D.MemAllocManaged(&p, BLK, CU_MEM_ATTACH_GLOBAL) || load_batch_api())
		return 1;
	memset((void *)p, 0x5a, 4 * K64);
	D.reset();
	if (discard1(p + K64, 2 * K64 + 10))
		return 1;
	struct fakecuda_counters c = ctr();
	printf("discard ops=%llu bytes=%llu\n", (unsigned long long)c.discard_ops,
	       (unsigned long long)c.bytes_discarded);
	if (prefetch1(p, 4 * K64, DEV))
		return 1;
	c = ctr();
	printf("prefetch htod=%llu skipped=%llu\n", (unsigned long long)c.bytes_htod,
	       (unsigned long long)c.bytes_discard_skipped);
	size_t kept = count_byte(p, K64, 0x5a) + count_byte(p + 3 * K64 + 10, K64 - 10, 0x5a);
	size_t poisoned = count_byte(p + K64, 2 * K64 + 10, POISON);
	printf("kept=%zu poisoned=%zu\n", kept, poisoned);
	return 0;
}

static void test_page64k(void)
{
	static struct kvt_child c;
	const unsigned long long K64 = 64u << 10;
	const char *argv[] = { self_path, "--child", "page64k", NULL };
	const char *env[] = { "FAKECUDA_UM_PAGE=64K", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	unsigned long long ops = 0, bytes = 0, htod = 0, skipped = 0;
	size_t kept = 0, poisoned = 0;
	const char *l = c.out;
	CU_ASSERT_EQUAL_FATAL(sscanf(l, "discard ops=%llu bytes=%llu", &ops, &bytes), 2);
	CU_ASSERT_EQUAL(ops, 1);
	CU_ASSERT_EQUAL(bytes, 2 * K64);             /* pages 1 and 2; page 3 only partly */
	CU_ASSERT_PTR_NOT_NULL_FATAL(l = strstr(l, "prefetch"));
	CU_ASSERT_EQUAL_FATAL(sscanf(l, "prefetch htod=%llu skipped=%llu", &htod, &skipped), 2);
	CU_ASSERT_EQUAL(htod, 2 * K64);              /* pages 0 and 3 copied */
	CU_ASSERT_EQUAL(skipped, 2 * K64);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l = strstr(l, "kept"));
	CU_ASSERT_EQUAL_FATAL(sscanf(l, "kept=%zu poisoned=%zu", &kept, &poisoned), 2);
	CU_ASSERT_EQUAL(kept, 2 * K64 - 10);
	CU_ASSERT_EQUAL(poisoned, 2 * K64 + 10);
}

static CU_TestInfo tests_discard[] = {
	{ "poison visible to the CPU", test_poison_visible },
	{ "discarded host block prefetched for nothing", test_discarded_prefetch_free },
	{ "eviction, GPU and CPU faults of discarded blocks", test_discarded_moves_free },
	{ "a write ends the discard", test_write_ends_discard },
	{ "partly covered block: poisoned, still copied", test_partial_block },
	{ "tail block of an odd-sized allocation", test_tail_block },
	{ "discard-and-prefetch; batch prefetch", test_discard_and_prefetch },
	{ "read-mostly duplicate poisoned too", test_read_mostly_duplicate },
	{ "errors: the whole batch checked first", test_errors },
	{ "resolver rows and _ptsz", test_resolver_ptsz },
	{ "stand-in runtime wrappers", test_cudart },
	{ "FAKECUDA_UM_PAGE=64K", test_page64k },
	CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {
	{ "fakecuda_discard", NULL, NULL, NULL, NULL, tests_discard },
	CU_SUITE_INFO_NULL,
};

int main(int argc, char **argv)
{
	self_path = argv[0];
	setenv("FAKECUDA_DEVICE_BYTES", "64M", 1);
	if (load_driver()) {
		fprintf(stderr, "cannot load %s: %s\n", kvt_path("fakecuda/libcuda.so.1"), dlerror());
		return 1;
	}
	if (argc == 3 && !strcmp(argv[1], "--child")) {
		if (!strcmp(argv[2], "page64k")) return child_page64k();
		return 2;
	}
	if (load_batch_api()) {
		fprintf(stderr, "the batch calls are missing from the driver\n");
		return 1;
	}
	return kvt_test_main(suites);
}
