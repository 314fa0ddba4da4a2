/* SPDX-License-Identifier: MIT */
/* fakecuda allocations — device memory (cuMemAlloc*, charged against
 * FAKECUDA_DEVICE_BYTES, never evicted, hidden from host code: its address is
 * a PROT_NONE reservation and its bytes a private view only the driver
 * reaches), pinned and registered host memory (host-accessible), managed
 * allocation entry points, and stream-ordered pools. Every ordinal
 * (FAKECUDA_DEVICES) charges the same FAKECUDA_DEVICE_BYTES: the ordinals are
 * views of one HBM. Part of the SIMULATED driver. */
#include "fc_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FC_POOL_MAGIC 0x6663706cu   /* "fcpl" */

struct fc_pool {
	uint32_t magic;
	CUmemPoolProps props;
	bool is_default;
};

/* One default pool per ordinal (its location names the ordinal); all of
 * them allocate from the one shared HBM. */
#define FC_DEFAULT_POOL(i) {                                              \
		.magic = FC_POOL_MAGIC,                                   \
		.props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,    \
			   .location = { CU_MEM_LOCATION_TYPE_DEVICE, i } }, \
		.is_default = true,                                       \
	}
static struct fc_pool fc_default_pools[FC_MAX_DEVICES] = {
	FC_DEFAULT_POOL(0), FC_DEFAULT_POOL(1), FC_DEFAULT_POOL(2), FC_DEFAULT_POOL(3),
	FC_DEFAULT_POOL(4), FC_DEFAULT_POOL(5), FC_DEFAULT_POOL(6), FC_DEFAULT_POOL(7),
};
#undef FC_DEFAULT_POOL
_Static_assert(FC_MAX_DEVICES == 8, "fc_default_pools lists FC_MAX_DEVICES pools");

void *fc_map_anon(size_t bytes, int prot)
{
	void *p = mmap(NULL, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* What an allocation costs in HBM: 2 MiB pages for large ones, 512 B
 * granules for small ones (sub-allocated on a real GPU). */
static uint64_t fc_charge_bytes(size_t size)
{
	uint64_t g = size >= (1u << 20) ? FC_BLOCK : 512;
	return ((uint64_t)size + g - 1) / g * g;
}

/* ---- device memory ----
 * On a discrete GPU host code cannot reach device memory: a dereference
 * faults and process_vm_readv fails (EFAULT). So the address handed out is
 * a PROT_NONE reservation (MAP_NORESERVE: no memory behind it), and the
 * bytes are a second, private anonymous mapping (the allocation's view) that
 * only the driver's copies, memsets and kernels reach (fc_view). With
 * FAKECUDA_COHERENT=1 (a platform where the CPU reads GPU memory, as over
 * NVLink-C2C) the address is the read-write bytes themselves. */

/* FAKECUDA_REUSE_MAPS=1: a freed device allocation under 1 MiB keeps its
 * two mappings here, and the next allocation of the same charge takes them
 * (no syscall), much as a real driver sub-allocates small allocations from
 * pages it keeps. For make bench: its cudaMalloc+cudaFree pair is then a
 * few hundred ns instead of four syscalls (~6 us), so kvtier's added cost
 * is not lost in the kernel's noise. The address stays unreadable by host
 * code; the bytes are stale, as a real cudaMalloc's are. Lock held. */
#define FC_MAP_CACHE 16
static struct { void *p; char *view; size_t bytes; } fc_map_cache[FC_MAP_CACHE];
static unsigned fc_map_cached;

static bool fc_map_cache_take(size_t bytes, void **p, char **view)
{
	for (unsigned i = 0; i < fc_map_cached; i++)
		if (fc_map_cache[i].bytes == bytes) {
			*p = fc_map_cache[i].p;
			*view = fc_map_cache[i].view;
			fc_map_cache[i] = fc_map_cache[--fc_map_cached];
			return true;
		}
	return false;
}

static bool fc_map_cache_put(void *p, char *view, size_t bytes)
{
	if (!fc_knobs.reuse_maps || bytes >= (1u << 20) || fc_map_cached == FC_MAP_CACHE)
		return false;
	fc_map_cache[fc_map_cached].p = p;
	fc_map_cache[fc_map_cached].view = view;
	fc_map_cache[fc_map_cached].bytes = bytes;
	fc_map_cached++;
	return true;
}

static void *fc_device_map(size_t bytes, char **view)
{
	void *cached;
	if (fc_knobs.reuse_maps && fc_map_cache_take(bytes, &cached, view))
		return cached;
	if (fc_knobs.coherent) {
		*view = fc_map_anon(bytes, PROT_READ | PROT_WRITE);
		return *view;
	}
	void *p = fc_map_anon(bytes, PROT_NONE);
	*view = p ? fc_map_anon(bytes, PROT_READ | PROT_WRITE) : NULL;
	if (p && !*view) {
		munmap(p, bytes);
		p = NULL;
	}
	return p;
}

static void fc_device_unmap(void *p, char *view, size_t bytes)
{
	if (fc_map_cache_put(p, view, bytes))
		return;
	if (view != p)
		munmap(view, bytes);
	munmap(p, bytes);
}

static CUresult fc_device_alloc(CUdeviceptr *dptr, size_t size, struct fc_pool *pool)
{
	if (!dptr || !size)
		return CUDA_ERROR_INVALID_VALUE;
	bool host = pool && pool->props.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
	uint64_t charge = fc_charge_bytes(size);
	fc_lock();
	CUresult r = host ? CUDA_SUCCESS : fc_charge_device(charge);
	char *view = NULL;
	void *p = r != CUDA_SUCCESS ? NULL
		: host ? fc_map_anon(charge, PROT_READ | PROT_WRITE)
		: fc_device_map(charge, &view);
	struct fc_alloc *a = p ? fc_reg_add((uintptr_t)p, size,
					    host ? FC_KIND_HOST : FC_KIND_DEVICE) : NULL;
	if (a) {
		a->map_bytes = charge;
		a->pool = (CUmemoryPool)pool;
		if (!host)
			a->view = view;
		if (pool && !host)
			a->dev = pool->props.location.id;
		if (host) {
			a->node = pool->props.location.id;
			fc_bind_node(p, charge, a->node);
		}
		*dptr = (CUdeviceptr)p;
	} else if (r == CUDA_SUCCESS) {
		if (p && host)
			munmap(p, charge);
		else if (p)
			fc_device_unmap(p, view, charge);
		if (!host)
			fc_uncharge_device(charge);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	fc_unlock();
	return r;
}

/* Free a DEVICE/managed/pool allocation at its base. Lock held. */
static CUresult fc_free_locked(uintptr_t base, bool async)
{
	struct fc_alloc *a = fc_reg_find(base);
	if (!a || a->base != base)
		return CUDA_ERROR_INVALID_VALUE;
	if (a->kind == FC_KIND_MANAGED)
		return async ? CUDA_ERROR_INVALID_VALUE : fc_managed_free(a);
	bool pool_host = a->kind == FC_KIND_HOST && a->pool;
	if (a->kind != FC_KIND_DEVICE && !pool_host)
		return CUDA_ERROR_INVALID_VALUE;
	if (a->kind == FC_KIND_DEVICE) {
		fc_uncharge_device(a->map_bytes);
		fc_device_unmap((void *)a->base, a->view, a->map_bytes);
	} else {
		munmap((void *)a->base, a->map_bytes);
	}
	fc_reg_remove(a);
	return CUDA_SUCCESS;
}

CUresult fc_device_free(uintptr_t base, bool async_ok, bool from_async)
{
	(void)async_ok;
	if (!base)
		return CUDA_SUCCESS;
	fc_lock();
	CUresult r = fc_free_locked(base, from_async);
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	FC_GUARD("cuMemAlloc_v2", FC_CTX | FC_ALLOC);
	return fc_device_alloc(dptr, bytesize, NULL);
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
				    size_t height, unsigned int elem)
{
	FC_GUARD("cuMemAllocPitch_v2", FC_CTX | FC_ALLOC);
	if (!pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	size_t p = (width + 511) / 512 * 512;
	CUresult r = fc_device_alloc(dptr, p * height, NULL);
	if (r == CUDA_SUCCESS)
		*pitch = p;
	return r;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	FC_GUARD("cuMemFree_v2", FC_CTX);
	return fc_device_free(dptr, false, false);
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	FC_GUARD("cuMemGetInfo_v2", FC_CTX);
	if (!free_bytes || !total)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	uint64_t used = fc_stats.device_alloc_bytes + fc_stats.c.managed_resident_bytes;
	*total = fc_knobs.device_bytes;
	*free_bytes = used < fc_knobs.device_bytes ? fc_knobs.device_bytes - used : 0;
	fc_unlock();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	FC_GUARD("cuMemAllocManaged", FC_CTX | FC_ALLOC);
	fc_lock();
	CUresult r = fc_managed_alloc(dptr, bytesize, flags);
	fc_unlock();
	return r;
}

/* ---- pinned and registered host memory ---- */

static CUresult fc_host_alloc(void **pp, size_t size, unsigned flags)
{
	if (!pp || !size || flags > (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
				     CU_MEMHOSTALLOC_WRITECOMBINED))
		return CUDA_ERROR_INVALID_VALUE;
	void *p = fc_map_anon(size, PROT_READ | PROT_WRITE);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_lock();
	struct fc_alloc *a = fc_reg_add((uintptr_t)p, size, FC_KIND_HOST);
	if (a)
		a->flags = flags;
	fc_unlock();
	if (!a) {
		munmap(p, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
	FC_GUARD("cuMemHostAlloc", FC_CTX | FC_ALLOC);
	return fc_host_alloc(pp, bytesize, flags);
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	FC_GUARD("cuMemAllocHost_v2", FC_CTX | FC_ALLOC);
	return fc_host_alloc(pp, bytesize, 0);
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
	FC_GUARD("cuMemFreeHost", FC_CTX);
	fc_lock();
	struct fc_alloc *a = fc_reg_find_base((uintptr_t)p, FC_KIND_HOST);
	int ok = a && !a->pool;
	if (ok) {
		munmap(p, a->map_bytes);
		fc_reg_remove(a);
	}
	fc_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fc_host_register(void *p, size_t bytesize, unsigned int flags)
{
	if (!p || !bytesize || flags > 0xf)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	CUresult r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	if (!fc_reg_overlaps((uintptr_t)p, bytesize)) {
		struct fc_alloc *a = fc_reg_add((uintptr_t)p, bytesize, FC_KIND_REGISTERED);
		if (a)
			a->flags = flags;
		r = a ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	}
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
	FC_GUARD("cuMemHostRegister_v2", FC_CTX | FC_ALLOC);
	return fc_host_register(p, bytesize, flags);
}

CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int flags)
{
	FC_GUARD("cuMemHostRegister", FC_CTX | FC_ALLOC);
	return fc_host_register(p, bytesize, flags);
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	FC_GUARD("cuMemHostUnregister", FC_CTX);
	fc_lock();
	struct fc_alloc *a = fc_reg_find_base((uintptr_t)p, FC_KIND_REGISTERED);
	if (a)
		fc_reg_remove(a);
	fc_unlock();
	return a ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
	FC_GUARD("cuMemHostGetDevicePointer_v2", FC_CTX);
	if (!pdptr || flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_alloc *a = fc_reg_find((uintptr_t)p);
	bool ok = a && (a->kind == FC_KIND_HOST || a->kind == FC_KIND_REGISTERED);
	fc_unlock();
	if (ok)
		*pdptr = (CUdeviceptr)p;   /* unified addressing */
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int *flags, void *p)
{
	FC_GUARD("cuMemHostGetFlags", FC_CTX);
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_alloc *a = fc_reg_find((uintptr_t)p);
	bool ok = a && (a->kind == FC_KIND_HOST || a->kind == FC_KIND_REGISTERED);
	if (ok)
		*flags = a->flags;
	fc_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- pools and stream-ordered allocation ---- */

static struct fc_pool *fc_pool(CUmemoryPool p)
{
	struct fc_pool *pool = (struct fc_pool *)p;
	return pool && pool->magic == FC_POOL_MAGIC ? pool : NULL;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	FC_GUARD("cuDeviceGetDefaultMemPool", 0);
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fc_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*pool = (CUmemoryPool)&fc_default_pools[dev];
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	return cuDeviceGetDefaultMemPool(pool, dev);
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *out, const CUmemPoolProps *props)
{
	FC_GUARD("cuMemPoolCreate", FC_ALLOC);
	if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	const CUmemLocation *l = &props->location;
	bool ok = (l->type == CU_MEM_LOCATION_TYPE_DEVICE && fc_valid_dev(l->id)) ||
		  (l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA && fc_node_valid(l->id));
	if (!ok)   /* HOST_NUMA_CURRENT and HOST are rejected, as documented */
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_pool *p = calloc(1, sizeof *p);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p->magic = FC_POOL_MAGIC;
	p->props = *props;
	*out = (CUmemoryPool)p;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool h)
{
	FC_GUARD("cuMemPoolDestroy", 0);
	struct fc_pool *p = fc_pool(h);
	if (!p || p->is_default)
		return CUDA_ERROR_INVALID_VALUE;
	p->magic = 0;
	free(p);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool h, size_t keep)
{
	FC_GUARD("cuMemPoolTrimTo", 0);
	(void)keep;
	return fc_pool(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fc_alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool h, CUstream s)
{
	struct fc_pool *pool = fc_pool(h);
	if (!pool || !fc_valid_stream(s))
		return CUDA_ERROR_INVALID_VALUE;
	return fc_device_alloc(dptr, size, pool);
}

/* cuMemAllocAsync: the default pool of the stream's ordinal. */
static CUresult fc_alloc_async_default(CUdeviceptr *dptr, size_t size, CUstream s)
{
	if (!fc_valid_stream(s))
		return CUDA_ERROR_INVALID_VALUE;
	return fc_alloc_async(dptr, size, (CUmemoryPool)&fc_default_pools[fc_stream_dev(s)], s);
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s)
{
	FC_GUARD("cuMemAllocAsync", FC_CTX | FC_ALLOC);
	return fc_alloc_async_default(dptr, size, s);
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s)
{
	FC_GUARD("cuMemAllocAsync_ptsz", FC_CTX | FC_ALLOC);
	return fc_alloc_async_default(dptr, size, s);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size,
					 CUmemoryPool pool, CUstream s)
{
	FC_GUARD("cuMemAllocFromPoolAsync", FC_CTX | FC_ALLOC);
	return fc_alloc_async(dptr, size, pool, s);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size,
					      CUmemoryPool pool, CUstream s)
{
	FC_GUARD("cuMemAllocFromPoolAsync_ptsz", FC_CTX | FC_ALLOC);
	return fc_alloc_async(dptr, size, pool, s);
}

/* Managed pointers are rejected (CUDA_ERROR_INVALID_VALUE), as on a GPU. */
static CUresult fc_free_async(CUdeviceptr dptr, CUstream s)
{
	if (!fc_valid_stream(s))
		return CUDA_ERROR_INVALID_VALUE;
	return fc_device_free(dptr, true, true);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
	FC_GUARD("cuMemFreeAsync", FC_CTX);
	return fc_free_async(dptr, s);
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
	FC_GUARD("cuMemFreeAsync_ptsz", FC_CTX);
	return fc_free_async(dptr, s);
}
