/* SPDX-License-Identifier: MIT */
/* CUnit suite: what host code can see of the SIMULATED device. Device memory
 * (cuMemAlloc*, pools, cuMemMap of a device handle) faults when host code
 * touches it and process_vm_readv fails on it, as on a discrete GPU; managed,
 * pinned, registered and host-pool memory stay host-accessible; copies,
 * memsets and the touch kernel still move the right bytes through the
 * driver's private views. FAKECUDA_COHERENT=1 (host-visible device memory)
 * runs in a child (--child coherent). Runs with FAKECUDA_DEVICE_BYTES=64M. */
#include "unit/fakecuda_drv.h"

#include <errno.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>

static __typeof__(&fakecuda_view) view;

/* ---- probes ---- */

/* How a forked child that reads (write 0) or writes the byte at p ends: 0
 * when the access went through, the signal that killed it, or -1. dfl: the
 * child first resets SIGSEGV to its default action (a sanitizer's handler
 * would report and exit instead); without it the driver's own handler
 * serves managed memory's CPU faults. */
static int child_access(uintptr_t p, int write, int dfl)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if (dfl) {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = SIG_DFL;
			sigemptyset(&sa.sa_mask);
			sigaction(SIGSEGV, &sa, NULL);
		}
		volatile unsigned char *b = (volatile unsigned char *)p;
		if (write)
			*b = 0x5a;
		else
			(void)*b;
		_exit(0);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st))
		return WTERMSIG(st);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* process_vm_readv of n bytes at p from this process: bytes read, or -errno. */
static long vm_read(uintptr_t p, size_t n)
{
	unsigned char buf[256];
	struct iovec l = { buf, n < sizeof buf ? n : sizeof buf }, r = { (void *)p, l.iov_len };
	errno = 0;
	ssize_t got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	return got < 0 ? -errno : (long)got;
}

/* Device memory at p: no host read or write, no process_vm_readv. */
static void expect_hidden(uintptr_t p, const char *what)
{
	int rd = child_access(p, 0, 1), wr = child_access(p, 1, 1);
	long vm = vm_read(p, 64);
	if (rd != SIGSEGV || wr != SIGSEGV || vm != -EFAULT)
		fprintf(stderr, "\n%s: read %d write %d process_vm_readv %ld\n", what, rd, wr, vm);
	CU_ASSERT_EQUAL(rd, SIGSEGV);
	CU_ASSERT_EQUAL(wr, SIGSEGV);
	CU_ASSERT_EQUAL(vm, -EFAULT);
}

/* Memory host code may use at p (n >= 64 bytes). */
static void expect_visible(uintptr_t p, const char *what)
{
	int rd = child_access(p, 0, 0), wr = child_access(p, 1, 0);
	long vm = vm_read(p, 64);
	if (rd || wr || vm != 64)
		fprintf(stderr, "\n%s: read %d write %d process_vm_readv %ld\n", what, rd, wr, vm);
	CU_ASSERT_EQUAL(rd, 0);
	CU_ASSERT_EQUAL(wr, 0);
	CU_ASSERT_EQUAL(vm, 64);
}

static CUstream new_stream(void)
{
	__typeof__(&cuStreamCreate) create = get("cuStreamCreate", 2000, 0);
	CUstream s = NULL;
	CU_ASSERT_EQUAL_FATAL(create(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	return s;
}

static void destroy_stream(CUstream s)
{
	__typeof__(&cuStreamDestroy_v2) destroy = get("cuStreamDestroy", 4000, 0);
	CU_ASSERT_EQUAL(destroy(s), CUDA_SUCCESS);
}

/* A device handle of bytes mapped at a fresh reservation; *h its handle. */
static CUdeviceptr vmm_map(size_t bytes, int node, CUmemGenericAllocationHandle *h)
{
	CUdeviceptr va = 0;
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	if (node >= 0)
		prop.location = (CUmemLocation){ CU_MEM_LOCATION_TYPE_HOST_NUMA, node };
	CU_ASSERT_EQUAL_FATAL(D.AddrReserve(&va, bytes, 0, 0, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(D.MemCreate(h, bytes, &prop, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(D.MemMap(va, bytes, 0, *h, 0), CUDA_SUCCESS);
	return va;
}

static CUresult vmm_access(CUdeviceptr va, size_t bytes, CUmemAccess_flags flags)
{
	CUmemAccessDesc ad = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, flags };
	return D.SetAccess(va, bytes, &ad, 1);
}

static void vmm_unmap(CUdeviceptr va, size_t bytes, CUmemGenericAllocationHandle h)
{
	__typeof__(&cuMemAddressFree) afree = get("cuMemAddressFree", 10020, 0);
	CU_ASSERT_EQUAL(D.Unmap(va, bytes), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.Release(h), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(afree(va, bytes), CUDA_SUCCESS);
}

/* ---- device memory is hidden ---- */

/* Every kind of device memory faults and defeats process_vm_readv, and is
 * charged exactly as before: 512 B granules under 1 MiB, 2 MiB pages from
 * 1 MiB, a VMM handle its size. */
static void test_device_hidden(void)
{
	__typeof__(&cuMemAllocPitch_v2) pitch_alloc = get("cuMemAllocPitch", 3020, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pitch_alloc);
	CUdeviceptr small, big, async, pitched;
	size_t pitch = 0;
	uint64_t used0 = ctr().device_used_bytes;
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&small, 4096), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&big, 3 * MiB), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(D.AllocAsync(&async, 100000, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(pitch_alloc(&pitched, &pitch, 1000, 16, 4), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(pitch, 1024);
	CU_ASSERT_EQUAL(ctr().device_used_bytes - used0, 4096 + 4 * MiB + 100352 + 16384);
	expect_hidden(small, "cuMemAlloc 4 KiB");
	expect_hidden(big + 3 * MiB - 1, "cuMemAlloc 3 MiB, last byte");
	expect_hidden(async, "cuMemAllocAsync");
	expect_hidden(pitched + 1024, "cuMemAllocPitch");
	CUmemGenericAllocationHandle h;
	CUdeviceptr va = vmm_map(2 * BLK, -1, &h);
	CU_ASSERT_EQUAL(ctr().device_used_bytes - used0, 4096 + 4 * MiB + 100352 + 16384 + 2 * BLK);
	CU_ASSERT_EQUAL(vmm_access(va, 2 * BLK, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
	expect_hidden(va + BLK, "cuMemMap of a device handle");
	vmm_unmap(va, 2 * BLK, h);
	CU_ASSERT_EQUAL(D.MemFree(small), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemFree(big), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.FreeAsync(async, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemFree(pitched), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(ctr().device_used_bytes, used0);
}

/* Managed (host-resident, and device-resident: a CPU fault brings it back),
 * pinned, registered, host-pool and host-node VMM memory: host code reads
 * and writes them at their addresses, as on a real GPU. */
static void test_host_memory_visible(void)
{
	CUdeviceptr m = managed(2 * BLK);
	CU_ASSERT_EQUAL(D.access((void *)(m + BLK), 64, 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(loc_of(m + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	expect_visible(m, "managed, on the host");
	CU_ASSERT_EQUAL(child_access(m + BLK, 0, 0), 0);      /* on the device: CPU fault */
	CU_ASSERT_EQUAL(D.MemFree(m), CUDA_SUCCESS);

	__typeof__(&cuMemHostAlloc) host_alloc = get("cuMemHostAlloc", 2020, 0);
	__typeof__(&cuMemFreeHost) free_host = get("cuMemFreeHost", 2000, 0);
	void *pinned = NULL;
	CU_ASSERT_EQUAL_FATAL(host_alloc(&pinned, 8192, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
	expect_visible((uintptr_t)pinned, "cuMemHostAlloc");
	CU_ASSERT_EQUAL(free_host(pinned), CUDA_SUCCESS);

	__typeof__(&cuMemHostRegister_v2) reg = get("cuMemHostRegister", 6050, 0);
	__typeof__(&cuMemHostUnregister) unreg = get("cuMemHostUnregister", 4000, 0);
	static unsigned char mine[8192] __attribute__((aligned(4096)));
	CU_ASSERT_EQUAL_FATAL(reg(mine, sizeof mine, 0), CUDA_SUCCESS);
	expect_visible((uintptr_t)mine, "cuMemHostRegister");
	CU_ASSERT_EQUAL(unreg(mine), CUDA_SUCCESS);

	__typeof__(&cuMemPoolCreate) pool_create = get("cuMemPoolCreate", 11020, 0);
	__typeof__(&cuMemPoolDestroy) pool_destroy = get("cuMemPoolDestroy", 11020, 0);
	__typeof__(&cuMemAllocFromPoolAsync) from_pool = get("cuMemAllocFromPoolAsync", 11020, 0);
	CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				 .location = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 } };
	CUmemoryPool pool;
	CUdeviceptr hp = 0;
	CU_ASSERT_EQUAL_FATAL(pool_create(&pool, &props), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(from_pool(&hp, 8192, pool, NULL), CUDA_SUCCESS);
	expect_visible(hp, "host-NUMA pool");
	CU_ASSERT_EQUAL(D.FreeAsync(hp, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(pool_destroy(pool), CUDA_SUCCESS);

	CUmemGenericAllocationHandle h;
	CUdeviceptr va = vmm_map(BLK, 0, &h);
	CU_ASSERT_EQUAL(vmm_access(va, BLK, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
	expect_visible(va, "cuMemMap of a host-node handle");
	vmm_unmap(va, BLK, h);
}

/* ---- the bytes still move, through the views ---- */

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 31 + seed + (i >> 8));
}

/* Every copy direction, sync and async, and the three memset widths move
 * the right bytes; fakecuda_view shows the same bytes the copies do. */
static void test_copies_memsets(void)
{
	__typeof__(&cuMemcpy) cpy = get("cuMemcpy", 4000, 0);
	__typeof__(&cuMemcpyDtoD_v2) dtod = get("cuMemcpyDtoD", 3020, 0);
	__typeof__(&cuMemcpyHtoDAsync_v2) htod_a = get("cuMemcpyHtoDAsync", 3020, 0);
	__typeof__(&cuMemcpyDtoHAsync_v2) dtoh_a = get("cuMemcpyDtoHAsync", 3020, 0);
	__typeof__(&cuMemcpyDtoDAsync_v2) dtod_a = get("cuMemcpyDtoDAsync", 3020, 0);
	__typeof__(&cuMemsetD16_v2) set16 = get("cuMemsetD16", 3020, 0);
	__typeof__(&cuMemsetD8Async) set8_a = get("cuMemsetD8Async", 3020, 0);
	__typeof__(&cuStreamSynchronize) sync = get("cuStreamSynchronize", 2000, 0);
	static unsigned char pat[8192], back[8192], want[8192];
	CUdeviceptr d1, d2;
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&d1, sizeof pat), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&d2, sizeof pat), CUDA_SUCCESS);
	pattern(pat, sizeof pat, 7);
	CU_ASSERT_EQUAL(D.HtoD(d1, pat, sizeof pat), CUDA_SUCCESS);
	const unsigned char *v1 = view((const void *)d1, sizeof pat);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v1);
	CU_ASSERT_NOT_EQUAL((uintptr_t)v1, d1);                 /* a private mapping */
	CU_ASSERT(memcmp(v1, pat, sizeof pat) == 0);
	CU_ASSERT_EQUAL(dtod(d2, d1, sizeof pat), CUDA_SUCCESS);
	memset(back, 0, sizeof back);
	CU_ASSERT_EQUAL(D.DtoH(back, d2, sizeof back), CUDA_SUCCESS);
	CU_ASSERT(memcmp(back, pat, sizeof pat) == 0);
	memset(back, 0, sizeof back);
	CU_ASSERT_EQUAL(cpy((CUdeviceptr)(uintptr_t)back, d2 + 100, 200), CUDA_SUCCESS);
	CU_ASSERT(memcmp(back, pat + 100, 200) == 0);

	CUstream s = new_stream();
	pattern(pat, sizeof pat, 99);
	CU_ASSERT_EQUAL(htod_a(d1 + 4096, pat, 4096, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(dtod_a(d2, d1 + 4096, 4096, s), CUDA_SUCCESS);
	memset(back, 0, sizeof back);
	CU_ASSERT_EQUAL(dtoh_a(back, d2, 4096, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(sync(s), CUDA_SUCCESS);
	CU_ASSERT(memcmp(back, pat, 4096) == 0);

	CU_ASSERT_EQUAL(D.MemsetD8(d1, 0xa5, 100), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(set16(d1 + 100, 0xbeef, 50), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemsetD32(d1 + 200, 0x01020304, 25), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(set8_a(d1 + 300, 0x3c, 12, s), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(sync(s), CUDA_SUCCESS);
	memset(want, 0xa5, 100);
	for (int i = 0; i < 50; i++)
		memcpy(want + 100 + 2 * i, &(uint16_t){ 0xbeef }, 2);
	for (int i = 0; i < 25; i++)
		memcpy(want + 200 + 4 * i, &(uint32_t){ 0x01020304 }, 4);
	memset(want + 300, 0x3c, 12);
	CU_ASSERT_EQUAL(D.DtoH(back, d1, 312), CUDA_SUCCESS);
	CU_ASSERT(memcmp(back, want, 312) == 0);
	CU_ASSERT(memcmp(v1, want, 312) == 0);

	/* a range past an allocation's end fails cleanly: no copy, no view */
	CU_ASSERT_EQUAL(D.DtoH(back, d1 + sizeof pat - 16, 32), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.HtoD(d2 + sizeof pat - 16, pat, 32), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.MemsetD8(d1 + sizeof pat - 8, 0, 16), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_PTR_NULL(view((const void *)(d1 + sizeof pat - 16), 32));
	CU_ASSERT_PTR_EQUAL(view((const void *)(d1 + sizeof pat - 16), 16), v1 + sizeof pat - 16);
	CU_ASSERT_PTR_NULL(view(back, 16));                     /* not the driver's */
	CUdeviceptr m = managed(BLK);
	CU_ASSERT_PTR_EQUAL(view((const void *)m, 64), (void *)m);  /* host memory to a test */
	CU_ASSERT_EQUAL(D.MemFree(m), CUDA_SUCCESS);
	destroy_stream(s);
	CU_ASSERT_EQUAL(D.MemFree(d1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemFree(d2), CUDA_SUCCESS);
}

/* The touch kernel reads a ranges array that lies in device memory (as a
 * real kernel reads its arguments) through the view: its two ranges fault
 * two managed blocks in. An array that runs past its allocation's end is an
 * illegal address. */
static void test_touch_device_ranges(void)
{
	CUdeviceptr m = managed(2 * BLK), dr;
	struct fakecuda_range rg[2] = { { m, 4096, 0 }, { m + BLK, 8192, 1 } };
	CU_ASSERT_EQUAL_FATAL(D.MemAlloc(&dr, sizeof rg), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.HtoD(dr, rg, sizeof rg), CUDA_SUCCESS);
	const struct fakecuda_range *rp = (const struct fakecuda_range *)(uintptr_t)dr;
	unsigned nr = 2;
	void *params[2] = { &rp, &nr };
	D.reset();
	CU_ASSERT_EQUAL(D.Launch(D.touch(), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
	struct fakecuda_counters c = ctr();
	CU_ASSERT_EQUAL(c.launches, 1);
	CU_ASSERT_EQUAL(c.faults, 2);
	CU_ASSERT_EQUAL(c.bytes_hbm, 4096 + 8192);
	CU_ASSERT_EQUAL(loc_of(m, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	CU_ASSERT_EQUAL(loc_of(m + BLK, NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	rp = (const struct fakecuda_range *)(uintptr_t)(dr + sizeof rg - 8);
	nr = 1;
	CU_ASSERT_EQUAL(D.Launch(D.touch(), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
			CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_ASSERT_EQUAL(D.MemFree(dr), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.MemFree(m), CUDA_SUCCESS);
}

/* A VMM mapping moves bytes only as far as cuMemSetAccess let the GPU:
 * none, read-only, read-write. */
static void test_vmm_access(void)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr va = vmm_map(BLK, -1, &h);
	unsigned char pat[256], back[256];
	pattern(pat, sizeof pat, 3);
	CU_ASSERT_EQUAL(D.MemsetD8(va, 1, 64), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.DtoH(back, va, 64), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(vmm_access(va, BLK, CU_MEM_ACCESS_FLAGS_PROT_READ), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.HtoD(va, pat, sizeof pat), CUDA_ERROR_INVALID_VALUE);
	CU_ASSERT_EQUAL(D.DtoH(back, va, sizeof back), CUDA_SUCCESS);
	expect_hidden(va, "read-only device mapping");
	CU_ASSERT_EQUAL(vmm_access(va, BLK, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.HtoD(va + BLK - sizeof pat, pat, sizeof pat), CUDA_SUCCESS);
	memset(back, 0, sizeof back);
	CU_ASSERT_EQUAL(D.DtoH(back, va + BLK - sizeof pat, sizeof back), CUDA_SUCCESS);
	CU_ASSERT(memcmp(back, pat, sizeof pat) == 0);
	const unsigned char *v = view((const void *)(va + BLK - sizeof pat), sizeof pat);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	CU_ASSERT(memcmp(v, pat, sizeof pat) == 0);
	vmm_unmap(va, BLK, h);
}

/* ---- FAKECUDA_COHERENT=1 ---- */

/* Prints what host code could do with cuMemAlloc and device VMM memory
 * (no CUnit here: a child process). */
static int child_coherent(void)
{
	CUdeviceptr d;
	CUmemGenericAllocationHandle h;
	unsigned char back[64] = { 0 };
	if (D.MemAlloc(&d, 4096))
		return 1;
	memset((void *)d, 0x6b, 64);                        /* host code writes it */
	int same = !D.DtoH(back, d, 64) && back[0] == 0x6b && back[63] == 0x6b &&
		   view((const void *)d, 64) == (void *)d;
	CUdeviceptr va = 0;
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	if (D.AddrReserve(&va, BLK, 0, 0, 0) || D.MemCreate(&h, BLK, &prop, 0) ||
	    D.MemMap(va, BLK, 0, h, 0) || vmm_access(va, BLK, CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
		return 1;
	((volatile unsigned char *)va)[0] = 0x6c;
	int vmm = !D.DtoH(back, va, 1) && back[0] == 0x6c;
	printf("vm_read=%ld same=%d vmm=%d vm_read_vmm=%ld\n", vm_read(d, 64), same, vmm,
	       vm_read(va, 64));
	return 0;
}

static void test_coherent(void)
{
	static struct kvt_child c;
	const char *argv[] = { self_path, "--child", "coherent", NULL };
	const char *env[] = { "FAKECUDA_COHERENT=1", NULL };
	long vm = 0, vm_vmm = 0;
	int same = 0, vmm = 0;
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(sscanf(c.out, "vm_read=%ld same=%d vmm=%d vm_read_vmm=%ld", &vm, &same,
			       &vmm, &vm_vmm), 4);
	CU_ASSERT_EQUAL(vm, 64);
	CU_ASSERT_EQUAL(same, 1);
	CU_ASSERT_EQUAL(vmm, 1);
	CU_ASSERT_EQUAL(vm_vmm, 64);
	/* without it the child's first host write kills it */
	const char *env0[] = { "FAKECUDA_COHERENT=", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env0), 0);
	CU_ASSERT_NOT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NULL(strstr(c.out, "vm_read="));
}

/* ---- FAKECUDA_REUSE_MAPS=1 (make bench) ---- */

/* Frees a small allocation and takes one of the same size: prints whether
 * it came back at the same address, what host code can read there, the
 * round trip of a copy, and whether free memory came back after the free
 * (no CUnit here: a child process). */
static int child_reuse(void)
{
	CUdeviceptr d, d2, big, big2;
	size_t free0, free1, total;
	unsigned char pat[64], back[64] = { 0 };
	memset(pat, 0x3c, sizeof pat);
	if (D.MemGetInfo(&free0, &total) || D.MemAlloc(&d, 4096) || D.HtoD(d, pat, sizeof pat) ||
	    D.MemFree(d) || D.MemGetInfo(&free1, &total) || D.MemAlloc(&d2, 4096) ||
	    D.HtoD(d2 + 64, pat, sizeof pat) || D.DtoH(back, d2 + 64, sizeof back))
		return 1;
	int rt = !memcmp(back, pat, sizeof pat);
	long vm = vm_read(d2, 64);
	int rd = child_access(d2, 0, 1);
	/* 2 MiB and up: unmapped at the free, never kept */
	if (D.MemFree(d2) || D.MemAlloc(&big, BLK) || D.MemFree(big) || D.MemAlloc(&big2, 4096) ||
	    D.MemFree(big2))
		return 1;
	printf("same=%d vm_read=%ld read=%d rt=%d free_back=%d big_kept=%d\n", d2 == d, vm, rd, rt,
	       free1 == free0, big2 == big);
	return 0;
}

static void test_reuse_maps(void)
{
	static struct kvt_child c;
	const char *argv[] = { self_path, "--child", "reuse", NULL };
	const char *env[] = { "FAKECUDA_REUSE_MAPS=1", NULL };
	long vm = 0;
	int same = 0, rd = 0, rt = 0, free_back = 0, big_kept = 1;
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL_FATAL(sscanf(c.out, "same=%d vm_read=%ld read=%d rt=%d free_back=%d big_kept=%d",
				     &same, &vm, &rd, &rt, &free_back, &big_kept), 6);
	CU_ASSERT_EQUAL(same, 1);            /* the kept mappings were taken */
	CU_ASSERT_EQUAL(vm, -EFAULT);        /* and are as hidden as new ones */
	CU_ASSERT_EQUAL(rd, SIGSEGV);
	CU_ASSERT_EQUAL(rt, 1);
	CU_ASSERT_EQUAL(free_back, 1);       /* the charge went back at the free */
	CU_ASSERT_EQUAL(big_kept, 0);
}

static int suite_init(void)
{
	return view ? 0 : -1;
}

static CU_TestInfo tests[] = {
	{ "device memory: host access faults, process_vm_readv fails", test_device_hidden },
	{ "managed, pinned, registered, host-pool memory: host-accessible",
	  test_host_memory_visible },
	{ "copies and memsets move the bytes through the view", test_copies_memsets },
	{ "touch kernel: ranges array in device memory", test_touch_device_ranges },
	{ "VMM: bytes move as far as cuMemSetAccess allows", test_vmm_access },
	{ "FAKECUDA_COHERENT=1: host code sees device memory", test_coherent },
	{ "FAKECUDA_REUSE_MAPS=1: a small allocation's maps reused, still hidden", test_reuse_maps },
	CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {
	{ "fakecuda_hidden", suite_init, NULL, NULL, NULL, tests },
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
	view = (__typeof__(view))dlsym(drv, "fakecuda_view");
	if (argc == 3 && !strcmp(argv[1], "--child"))
		return !view ? 2 : !strcmp(argv[2], "coherent") ? child_coherent()
			 : !strcmp(argv[2], "reuse") ? child_reuse() : 2;
	return kvt_test_main(suites);
}
