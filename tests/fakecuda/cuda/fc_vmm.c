/* SPDX-License-Identifier: MIT */
/* fakecuda virtual memory management — cuMemAddressReserve / cuMemCreate /
 * cuMemMap / cuMemSetAccess / cuMemUnmap / cuMemRelease on host memory: a
 * physical handle is a memfd (charged to HBM when its location is the
 * device, mbind()-ed when it is a host NUMA node) with a private read-write
 * view the driver moves bytes through; a reservation is a PROT_NONE mapping.
 * A mapping of a device handle stays PROT_NONE to host code whatever
 * cuMemSetAccess grants (that is the GPU's access), as on a discrete GPU; a
 * host-node handle's mapping gets the access as its host protection. Part of
 * the SIMULATED driver (test double). */
#include "fc_internal.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define FC_HANDLE_MAGIC 0x6663686eu   /* "fchn" */

struct fc_handle {
	uint32_t magic;
	int fd;
	size_t size;
	CUmemAllocationProp prop;
	int refs;            /* 1 until cuMemRelease, +1 per mapping */
	char *view;          /* the whole handle, read-write, for the driver only */
};

struct fc_resv { uintptr_t base; size_t size; };
static struct fc_resv fc_resvs[256];

static struct fc_handle *fc_handle(CUmemGenericAllocationHandle h)
{
	struct fc_handle *m = (struct fc_handle *)(uintptr_t)h;
	return m && m->magic == FC_HANDLE_MAGIC ? m : NULL;
}

static bool fc_on_device(const struct fc_handle *m)
{
	return m->prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE;
}

static void fc_handle_put(struct fc_handle *m)
{
	if (--m->refs)
		return;
	if (fc_on_device(m))
		fc_uncharge_device(m->size);
	munmap(m->view, m->size);
	close(m->fd);
	m->magic = 0;
	free(m);
}

static struct fc_resv *fc_resv_find(uintptr_t p, size_t size)
{
	for (size_t i = 0; i < FC_ARRAY_SIZE(fc_resvs); i++) {
		struct fc_resv *r = &fc_resvs[i];
		if (r->size && p >= r->base && p + size <= r->base + r->size)
			return r;
	}
	return NULL;
}

/* ---- granularity and properties ---- */

static bool fc_prop_ok(const CUmemAllocationProp *prop)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return false;
	const CUmemLocation *l = &prop->location;
	if (l->type == CU_MEM_LOCATION_TYPE_DEVICE)
		return fc_valid_dev(l->id);   /* any ordinal: all charge the one HBM */
	/* HOST_NUMA_CURRENT is rejected, as cuda.h documents */
	return l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA && fc_node_valid(l->id);
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *gran, const CUmemAllocationProp *prop,
					       CUmemAllocationGranularity_flags option)
{
	FC_GUARD("cuMemGetAllocationGranularity", 0);
	(void)option;
	if (!gran || !fc_prop_ok(prop))
		return CUDA_ERROR_INVALID_VALUE;
	*gran = FC_BLOCK;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
							CUmemGenericAllocationHandle h)
{
	FC_GUARD("cuMemGetAllocationPropertiesFromHandle", 0);
	struct fc_handle *m = fc_handle(h);
	if (!prop || !m)
		return CUDA_ERROR_INVALID_VALUE;
	*prop = m->prop;
	return CUDA_SUCCESS;
}

/* ---- physical handles ---- */

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *out, size_t size,
			     const CUmemAllocationProp *prop, unsigned long long flags)
{
	FC_GUARD("cuMemCreate", FC_ALLOC);
	if (!out || !size || size % FC_BLOCK || flags || !fc_prop_ok(prop))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_handle *m = calloc(1, sizeof *m);
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*m = (struct fc_handle){ FC_HANDLE_MAGIC, -1, size, *prop, 1, NULL };
	m->fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
	void *v = m->fd >= 0 && !ftruncate(m->fd, (off_t)size)
		? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0) : MAP_FAILED;
	if (v == MAP_FAILED) {
		if (m->fd >= 0)
			close(m->fd);
		free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->view = v;
	fc_lock();
	CUresult r = fc_on_device(m) ? fc_charge_device(size) : CUDA_SUCCESS;
	fc_unlock();
	if (r != CUDA_SUCCESS) {
		munmap(m->view, size);
		close(m->fd);
		free(m);
		return r;
	}
	*out = (CUmemGenericAllocationHandle)(uintptr_t)m;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle h)
{
	FC_GUARD("cuMemRelease", 0);
	fc_lock();
	struct fc_handle *m = fc_handle(h);
	if (m)
		fc_handle_put(m);
	fc_unlock();
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- address reservations ---- */

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align,
				     CUdeviceptr addr, unsigned long long flags)
{
	FC_GUARD("cuMemAddressReserve", FC_ALLOC);
	if (!ptr || !size || size % FC_BLOCK || flags || (align & (align - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	size_t a = align > FC_BLOCK ? align : FC_BLOCK;
	fc_lock();
	struct fc_resv *slot = NULL;
	for (size_t i = 0; i < FC_ARRAY_SIZE(fc_resvs) && !slot; i++)
		if (!fc_resvs[i].size)
			slot = &fc_resvs[i];
	char *p = slot ? mmap((void *)addr, size + a, PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) : MAP_FAILED;
	if (p == MAP_FAILED) {
		fc_unlock();
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	uintptr_t base = ((uintptr_t)p + a - 1) & ~(uintptr_t)(a - 1);
	if (base > (uintptr_t)p)
		munmap(p, base - (uintptr_t)p);
	munmap((char *)base + size, (uintptr_t)p + size + a - base - size);
	*slot = (struct fc_resv){ base, size };
	fc_unlock();
	*ptr = base;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	FC_GUARD("cuMemAddressFree", 0);
	fc_lock();
	struct fc_resv *r = fc_resv_find(ptr, size);
	bool ok = r && r->base == ptr && r->size == size && !fc_reg_overlaps(ptr, size);
	if (ok) {
		munmap((void *)ptr, size);
		r->size = 0;
	}
	fc_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- mapping ---- */

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			  CUmemGenericAllocationHandle h, unsigned long long flags)
{
	FC_GUARD("cuMemMap", 0);
	fc_lock();
	struct fc_handle *m = fc_handle(h);
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	if (!m || flags || !size || size % FC_BLOCK || offset % FC_BLOCK ||
	    offset + size > m->size || !fc_resv_find(ptr, size) ||
	    fc_reg_overlaps(ptr, size))
		goto out;
	if (mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, m->fd,
		 (off_t)offset) == MAP_FAILED) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	struct fc_alloc *a = fc_reg_add(ptr, size, FC_KIND_VMM);
	if (!a) {
		mmap((void *)ptr, size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->owner = m;
	a->view = m->view + offset;
	if (fc_on_device(m)) {
		a->dev = m->prop.location.id;
	} else {
		a->node = m->prop.location.id;
		fc_bind_node((void *)ptr, size, a->node);
	}
	m->refs++;
	r = CUDA_SUCCESS;
out:
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	FC_GUARD("cuMemUnmap", 0);
	fc_lock();
	CUresult r = CUDA_SUCCESS;
	for (uintptr_t p = ptr; p < ptr + size && r == CUDA_SUCCESS;) {
		struct fc_alloc *a = fc_reg_find(p);
		if (!a || a->kind != FC_KIND_VMM || a->base != p ||
		    a->base + a->size > ptr + size) {
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		struct fc_handle *m = a->owner;
		p += a->size;
		mmap((void *)a->base, a->size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		fc_reg_remove(a);
		fc_handle_put(m);
	}
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				size_t count)
{
	FC_GUARD("cuMemSetAccess", 0);
	if (!desc || !count || !size)
		return CUDA_ERROR_INVALID_VALUE;
	int prot = PROT_NONE;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
		    !fc_valid_dev(desc[i].location.id))
			return CUDA_ERROR_INVALID_DEVICE;
		if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			prot = PROT_READ | PROT_WRITE;
		else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE)
			prot = PROT_READ;
	}
	fc_lock();
	bool ok = true;
	for (uintptr_t p = ptr; p < ptr + size && ok;) {
		struct fc_alloc *a = fc_reg_find(p);
		ok = a && a->kind == FC_KIND_VMM;
		if (ok)
			p = a->base + a->size;
	}
	for (uintptr_t p = ptr; p < ptr + size && ok;) {
		struct fc_alloc *a = fc_reg_find(p);
		uintptr_t end = a->base + a->size < ptr + size ? a->base + a->size : ptr + size;
		a->access = prot;
		if (!fc_is_device(a) || fc_knobs.coherent)   /* device memory: GPU access only */
			ok = mprotect((void *)p, end - p, prot) == 0;
		p = end;
	}
	fc_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *out, void *addr)
{
	FC_GUARD("cuMemRetainAllocationHandle", 0);
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_alloc *a = fc_reg_find((uintptr_t)addr);
	bool ok = a && a->kind == FC_KIND_VMM;
	if (ok) {
		struct fc_handle *m = a->owner;
		m->refs++;
		*out = (CUmemGenericAllocationHandle)(uintptr_t)m;
	}
	fc_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
