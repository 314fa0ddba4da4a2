/* SPDX-License-Identifier: MIT */
/* fakecuda copies and memsets — every cuMemcpy and cuMemsetD export (sync,
 * _ptds, Async, _ptsz) of the SIMULATED driver. Both sides of a copy are GPU
 * accesses in the cost model (managed blocks fault in); bytes are moved
 * through the driver's views, never through a managed range's user address
 * or device memory's (which host code cannot read: fc_view).
 * A copy runs on the ordinal of its stream (a synchronous one: the calling
 * thread's current context). On a capturing stream an Async copy or memset
 * is recorded into the capture's graph instead; the synchronous ones (the
 * legacy stream) always run. */
#include "fc_internal.h"

#include <string.h>

/* Bytes from addr to the end of its 2 MiB block. */
static size_t fc_to_boundary(uintptr_t addr)
{
	return FC_UMP - (addr & (FC_UMP - 1));
}

static size_t fc_min3(size_t a, size_t b, size_t c)
{
	size_t m = a < b ? a : b;
	return m < c ? m : c;
}

static bool fc_copy_args_ok(uintptr_t dst, uintptr_t src, size_t n)
{
	return !n || (dst && src);
}

/* n bytes from addr do not run past the driver's allocation that addr is
 * in (none: host memory, nothing to check). Checked whole, before any byte
 * moves: piece by piece, a copy whose pieces met at a 2 MiB boundary that
 * was also the allocation's end went on into whatever lay beyond it (the
 * next allocation, or host memory) and succeeded. Caller holds the lock. */
static bool fc_within_alloc(uintptr_t addr, size_t n)
{
	struct fc_alloc *a = fc_reg_find(addr);
	return !a || n <= a->base + a->size - addr;
}

CUresult fc_copy_run(uintptr_t dst, uintptr_t src, size_t n, int dev)
{
	CUresult r = CUDA_SUCCESS;
	if (!fc_copy_args_ok(dst, src, n))
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!fc_within_alloc(src, n) || !fc_within_alloc(dst, n))
		r = CUDA_ERROR_INVALID_VALUE;   /* runs past an allocation */
	while (n && r == CUDA_SUCCESS) {
		size_t k = fc_min3(n, fc_to_boundary(src), fc_to_boundary(dst));
		char *ps, *pd;
		size_t cs, cd;
		r = fc_gpu_span(src, k, 0, dev, &ps, &cs);
		if (r == CUDA_SUCCESS)
			r = fc_gpu_span(dst, k, 1, dev, &pd, &cd);
		if (r == CUDA_SUCCESS && (cs < k || cd < k))
			r = CUDA_ERROR_INVALID_VALUE;   /* runs past an allocation */
		if (r == CUDA_SUCCESS)
			memmove(pd, ps, k);
		dst += k;
		src += k;
		n -= k;
	}
	fc_unlock();
	return r;
}

static void fc_fill(char *p, size_t n_elems, unsigned value, unsigned elem)
{
	if (elem == 1) {
		memset(p, (int)(value & 0xff), n_elems);
		return;
	}
	for (size_t i = 0; i < n_elems; i++)
		memcpy(p + i * elem, &value, elem);   /* little-endian low bytes */
}

CUresult fc_memset_run(uintptr_t dst, unsigned value, size_t n, unsigned elem, int dev)
{
	CUresult r = CUDA_SUCCESS;
	if (dst % elem)
		return CUDA_ERROR_INVALID_VALUE;
	size_t bytes = n * elem;
	fc_lock();
	if (!fc_within_alloc(dst, bytes))
		r = CUDA_ERROR_INVALID_VALUE;
	while (bytes && r == CUDA_SUCCESS) {
		size_t k = bytes < fc_to_boundary(dst) ? bytes : fc_to_boundary(dst);
		char *p;
		size_t c;
		r = fc_gpu_span(dst, k, 1, dev, &p, &c);
		if (r == CUDA_SUCCESS && c < k)
			r = CUDA_ERROR_INVALID_VALUE;
		if (r == CUDA_SUCCESS)
			fc_fill(p, k / elem, value, elem);
		dst += k;
		bytes -= k;
	}
	fc_unlock();
	return r;
}

/* The engine a copy runs on: a copy engine where one side is host memory
 * and the other the device's, the SMs otherwise. Lock held. */
enum fc_eng fc_copy_engine(uintptr_t dst, uintptr_t src)
{
	const struct fc_alloc *d = fc_reg_find(dst), *s = fc_reg_find(src);
	bool dev_d = d && (fc_is_device(d) || d->kind == FC_KIND_MANAGED);
	bool dev_s = s && (fc_is_device(s) || s->kind == FC_KIND_MANAGED);
	if (dev_d && !dev_s)
		return FC_ENG_H2D;
	if (dev_s && !dev_d)
		return FC_ENG_D2H;
	return FC_ENG_SM;
}

/* A synchronous copy: on the legacy stream, and the caller waits for it. */
static CUresult fc_copy_sync(uintptr_t dst, uintptr_t src, size_t n)
{
	int dev = fc_current_dev();
	fc_lock();
	struct fc_op op;
	fc_op_begin(&op, NULL, dev, fc_copy_engine(dst, src));
	CUresult r = fc_copy_run(dst, src, n, dev);
	fc_host_wait_until(fc_op_end(&op));
	fc_unlock();
	return r;
}

static CUresult fc_memset_sync(uintptr_t dst, unsigned value, size_t n, unsigned elem)
{
	int dev = fc_current_dev();
	fc_lock();
	struct fc_op op;
	fc_op_begin(&op, NULL, dev, FC_ENG_SM);
	CUresult r = fc_memset_run(dst, value, n, elem, dev);
	fc_host_wait_until(fc_op_end(&op));
	fc_unlock();
	return r;
}

static CUresult fc_stream_ok(CUstream s)
{
	return fc_valid_stream(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- stream submission: run now, or record on a capturing stream ----
 * A recorded copy or memset keeps its addresses and value; the bytes move
 * (and a copy past an allocation's end is found) when the graph runs. */

static CUresult fc_recorded(CUstream s, CUresult r)
{
	if (r == CUDA_ERROR_OUT_OF_MEMORY)
		fc_stream_capture_invalidate(s);
	return r;
}

static CUresult fc_copy_on(CUstream s, uintptr_t dst, uintptr_t src, size_t n)
{
	CUresult r = fc_stream_ok(s);
	if (r != CUDA_SUCCESS)
		return r;
	int dev = fc_stream_dev(s);
	fc_lock();
	struct fc_graph *g = fc_stream_capture(s);
	if (!g) {
		struct fc_op op;
		fc_op_begin(&op, s, dev, fc_copy_engine(dst, src));
		r = fc_copy_run(dst, src, n, dev);
		fc_op_end(&op);
	} else if (!fc_copy_args_ok(dst, src, n))
		r = CUDA_ERROR_INVALID_VALUE;
	else
		r = fc_recorded(s, fc_graph_add_copy(g, dst, src, n, dev));
	fc_unlock();
	return r;
}

static CUresult fc_memset_on(CUstream s, uintptr_t dst, unsigned value, size_t n,
			     unsigned elem)
{
	CUresult r = fc_stream_ok(s);
	if (r != CUDA_SUCCESS)
		return r;
	int dev = fc_stream_dev(s);
	fc_lock();
	struct fc_graph *g = fc_stream_capture(s);
	if (!g) {
		struct fc_op op;
		fc_op_begin(&op, s, dev, FC_ENG_SM);
		r = fc_memset_run(dst, value, n, elem, dev);
		fc_op_end(&op);
	} else if (dst % elem)
		r = CUDA_ERROR_INVALID_VALUE;
	else
		r = fc_recorded(s, fc_graph_add_memset(g, dst, value, n, elem, dev));
	fc_unlock();
	return r;
}

/* ---- exports: each a guard and one call ---- */

#define FC_COPY_SYNC(name, dtype, stype)                                     \
	CUresult CUDAAPI name(dtype dst, stype src, size_t n)                \
	{                                                                    \
		FC_GUARD(#name, FC_CTX);                                     \
		return fc_copy_sync((uintptr_t)dst, (uintptr_t)src, n);      \
	}
#define FC_COPY_ASYNC(name, dtype, stype)                                    \
	CUresult CUDAAPI name(dtype dst, stype src, size_t n, CUstream s)    \
	{                                                                    \
		FC_GUARD(#name, FC_CTX);                                     \
		return fc_copy_on(s, (uintptr_t)dst, (uintptr_t)src, n);     \
	}

FC_COPY_SYNC(cuMemcpy, CUdeviceptr, CUdeviceptr)
FC_COPY_SYNC(cuMemcpy_ptds, CUdeviceptr, CUdeviceptr)
FC_COPY_ASYNC(cuMemcpyAsync, CUdeviceptr, CUdeviceptr)
FC_COPY_ASYNC(cuMemcpyAsync_ptsz, CUdeviceptr, CUdeviceptr)
FC_COPY_SYNC(cuMemcpyHtoD_v2, CUdeviceptr, const void *)
FC_COPY_SYNC(cuMemcpyHtoD_v2_ptds, CUdeviceptr, const void *)
FC_COPY_SYNC(cuMemcpyDtoH_v2, void *, CUdeviceptr)
FC_COPY_SYNC(cuMemcpyDtoH_v2_ptds, void *, CUdeviceptr)
FC_COPY_SYNC(cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr)
FC_COPY_SYNC(cuMemcpyDtoD_v2_ptds, CUdeviceptr, CUdeviceptr)
FC_COPY_ASYNC(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void *)
FC_COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, CUdeviceptr, const void *)
FC_COPY_ASYNC(cuMemcpyDtoHAsync_v2, void *, CUdeviceptr)
FC_COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, void *, CUdeviceptr)
FC_COPY_ASYNC(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr)
FC_COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, CUdeviceptr, CUdeviceptr)

#define FC_SET_SYNC(name, vtype, elem)                                       \
	CUresult CUDAAPI name(CUdeviceptr dst, vtype v, size_t n)            \
	{                                                                    \
		FC_GUARD(#name, FC_CTX);                                     \
		return fc_memset_sync(dst, v, n, elem);                      \
	}
#define FC_SET_ASYNC(name, vtype, elem)                                      \
	CUresult CUDAAPI name(CUdeviceptr dst, vtype v, size_t n, CUstream s) \
	{                                                                    \
		FC_GUARD(#name, FC_CTX);                                     \
		return fc_memset_on(s, dst, v, n, elem);                     \
	}

FC_SET_SYNC(cuMemsetD8_v2, unsigned char, 1)
FC_SET_SYNC(cuMemsetD8_v2_ptds, unsigned char, 1)
FC_SET_SYNC(cuMemsetD16_v2, unsigned short, 2)
FC_SET_SYNC(cuMemsetD16_v2_ptds, unsigned short, 2)
FC_SET_SYNC(cuMemsetD32_v2, unsigned int, 4)
FC_SET_SYNC(cuMemsetD32_v2_ptds, unsigned int, 4)
FC_SET_ASYNC(cuMemsetD8Async, unsigned char, 1)
FC_SET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1)
FC_SET_ASYNC(cuMemsetD16Async, unsigned short, 2)
FC_SET_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2)
FC_SET_ASYNC(cuMemsetD32Async, unsigned int, 4)
FC_SET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4)
