/* SPDX-License-Identifier: MIT */
/* fakecuda allocation registry — every range the SIMULATED driver knows
 * (device, pinned host, registered, managed, VMM mappings) in one array sorted
 * by base, the translation of a range to where the driver keeps its bytes
 * (fc_view: device memory is reached only through its private view), and the
 * queries answered from it: cuPointerGetAttribute(s), cuMemGetAddressRange,
 * cuIpcGetMemHandle. Callers hold the global lock. */
#include "fc_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct fc_alloc **fc_reg;
static size_t fc_reg_len, fc_reg_cap;
static uint64_t fc_next_buffer_id = 1;

/* Index of the first entry whose base is > addr. */
static size_t fc_reg_upper(uintptr_t addr)
{
	size_t lo = 0, hi = fc_reg_len;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (fc_reg[mid]->base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct fc_alloc *fc_reg_add(uintptr_t base, size_t size, enum fc_kind kind)
{
	if (fc_reg_len == fc_reg_cap) {
		size_t cap = fc_reg_cap ? fc_reg_cap * 2 : 64;
		struct fc_alloc **n = realloc(fc_reg, cap * sizeof *n);
		if (!n)
			return NULL;
		fc_reg = n;
		fc_reg_cap = cap;
	}
	struct fc_alloc *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	*a = (struct fc_alloc){ .base = base, .size = size, .map_bytes = size,
				.kind = kind, .buffer_id = fc_next_buffer_id++,
				.node = -1, .dev = fc_current_dev(),
				.view = kind == FC_KIND_MANAGED ? NULL : (char *)base };
	size_t at = fc_reg_upper(base);
	memmove(&fc_reg[at + 1], &fc_reg[at], (fc_reg_len - at) * sizeof *fc_reg);
	fc_reg[at] = a;
	fc_reg_len++;
	return a;
}

struct fc_alloc *fc_reg_find(uintptr_t addr)
{
	size_t at = fc_reg_upper(addr);
	if (!at)
		return NULL;
	struct fc_alloc *a = fc_reg[at - 1];
	size_t span = a->size ? a->size : 1;
	return addr - a->base < span ? a : NULL;
}

struct fc_alloc *fc_reg_find_base(uintptr_t base, enum fc_kind kind)
{
	struct fc_alloc *a = fc_reg_find(base);
	return a && a->base == base && a->kind == kind ? a : NULL;
}

bool fc_reg_overlaps(uintptr_t base, size_t size)
{
	if (fc_reg_find(base))
		return true;
	size_t at = fc_reg_upper(base);   /* first entry starting after base */
	return at < fc_reg_len && fc_reg[at]->base < base + size;
}

void fc_reg_remove(struct fc_alloc *a)
{
	for (size_t i = fc_reg_upper(a->base); i-- > 0;) {
		if (fc_reg[i] != a)
			continue;
		memmove(&fc_reg[i], &fc_reg[i + 1], (fc_reg_len - i - 1) * sizeof *fc_reg);
		fc_reg_len--;
		free(a);
		return;
	}
}

/* ---- where the bytes are ---- */

bool fc_is_device(const struct fc_alloc *a)
{
	return a->kind == FC_KIND_DEVICE || (a->kind == FC_KIND_VMM && a->node < 0);
}

char *fc_view(uintptr_t addr, size_t len)
{
	struct fc_alloc *a = fc_reg_find(addr);
	if (!a || a->kind == FC_KIND_MANAGED || !a->view || len > a->base + a->size - addr)
		return NULL;
	return a->view + (addr - a->base);
}

/* Test-only (fakecuda.h): the same, for a test that looks at device memory
 * without a copy; managed memory is host memory to a test: ptr itself. */
FC_EXPORT void *fakecuda_view(const void *ptr, size_t len)
{
	fc_config_init();
	fc_lock();
	struct fc_alloc *a = fc_reg_find((uintptr_t)ptr);
	bool managed = a && a->kind == FC_KIND_MANAGED &&
		       len <= a->base + a->size - (uintptr_t)ptr;
	void *v = managed ? (void *)ptr : fc_view((uintptr_t)ptr, len);
	fc_unlock();
	return v;
}

/* ---- pointer attributes ---- */

static bool fc_host_visible(const struct fc_alloc *a)
{
	return a->kind == FC_KIND_HOST || a->kind == FC_KIND_REGISTERED ||
	       a->kind == FC_KIND_MANAGED || (a->kind == FC_KIND_VMM && a->node >= 0);
}

static CUresult fc_attr_one(void *data, CUpointer_attribute attr,
			    const struct fc_alloc *a, uintptr_t ptr)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = fc_current_ctx();
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = fc_host_visible(a) && a->kind != FC_KIND_MANAGED
				    ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = ptr;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (!fc_host_visible(a))
			return CUDA_ERROR_INVALID_VALUE;
		*(void **)data = (void *)ptr;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_MAPPED:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: {
		bool v = attr == CU_POINTER_ATTRIBUTE_IS_MANAGED ? a->kind == FC_KIND_MANAGED
		       : attr == CU_POINTER_ATTRIBUTE_MAPPED ? true
		       : attr == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS ? false
		       : a->kind == FC_KIND_DEVICE && !a->pool;
		*(int *)data = v;   /* documented as a boolean (int-sized) */
		return CUDA_SUCCESS;
	}
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*(unsigned long long *)data = a->buffer_id;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = a->dev;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(CUdeviceptr *)data = a->base;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = a->size;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = a->pool;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
	FC_GUARD("cuPointerGetAttribute", 0);
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_alloc *a = fc_reg_find(ptr);
	CUresult r = a ? fc_attr_one(data, attr, a, ptr) : CUDA_ERROR_INVALID_VALUE;
	fc_unlock();
	return r;
}

/* Size of one attribute's value, for zero-filling unknown pointers. */
static size_t fc_attr_size(CUpointer_attribute attr)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		return 8;
	default:
		return 4;
	}
}

/* Unlike the singular form, unknown pointers are not an error: every value
 * reads as zero (DEVICE_ORDINAL as -2), as cuda.h documents. */
CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs,
					void **data, CUdeviceptr ptr)
{
	FC_GUARD("cuPointerGetAttributes", 0);
	if (!attrs || !data)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_alloc *a = fc_reg_find(ptr);
	CUresult r = CUDA_SUCCESS;
	for (unsigned i = 0; i < n && r == CUDA_SUCCESS; i++) {
		if (!data[i])
			continue;
		if (!a) {
			memset(data[i], 0, fc_attr_size(attrs[i]));
			if (attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
				*(int *)data[i] = -2;
			continue;
		}
		r = fc_attr_one(data[i], attrs[i], a, ptr);
		if (r == CUDA_ERROR_INVALID_VALUE &&
		    attrs[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) {
			*(void **)data[i] = NULL;
			r = CUDA_SUCCESS;
		}
	}
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	FC_GUARD("cuMemGetAddressRange_v2", 0);
	fc_lock();
	struct fc_alloc *a = fc_reg_find(dptr);
	bool ok = a && (a->kind == FC_KIND_DEVICE || a->kind == FC_KIND_MANAGED ||
			a->kind == FC_KIND_VMM);
	if (ok && pbase)
		*pbase = a->base;
	if (ok && psize)
		*psize = a->size;
	fc_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* ---- IPC: handles for cuMemAlloc memory only (managed memory breaks IPC) ---- */

CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
	FC_GUARD("cuIpcGetMemHandle", FC_CTX);
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_alloc *a = fc_reg_find(dptr);
	bool ok = a && a->kind == FC_KIND_DEVICE && !a->pool;
	if (ok) {
		memset(handle, 0, sizeof *handle);
		uint64_t words[3] = { (uint64_t)getpid(), a->base, a->buffer_id };
		memcpy(handle->reserved, words, sizeof words);
	}
	fc_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	FC_GUARD("cuIpcOpenMemHandle_v2", FC_CTX);
	(void)pdptr; (void)handle; (void)flags;
	return CUDA_ERROR_NOT_SUPPORTED;   /* single-process simulation */
}
