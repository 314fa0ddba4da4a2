/* SPDX-License-Identifier: MIT */
/* fakecuda kernels — the CUfunction handles of the SIMULATED driver: the
 * three built-in kernels and those a workload defines (a name, a declared
 * parameter layout and a host body), their parameter info and names, the
 * copy of the arguments a launch takes, cuLaunchKernel{,Ex}{,_ptsz}
 * (recorded, not run, on a capturing stream), and what a defined body may
 * call to touch memory and spend SM time. A body runs under the global
 * lock on the launching thread: it must not synchronise or wait. */
#include "fc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FC_KERNEL_MAGIC 0x66636b6eu   /* "fckn" */
#define FC_DEFINED_MAX  64            /* defined kernels per process */
#define FC_PARAMS_MAX   1024          /* parameters of one defined kernel */
#define FC_PARAM_BYTES  4096          /* the largest parameter */
#define FC_PARAM_ALIGN  16            /* the largest alignment */

enum fc_kfn { FC_KFN_TOUCH, FC_KFN_PAGED, FC_KFN_COMPUTE, FC_KFN_DEFINED };

struct fc_kernel {
	uint32_t magic;           /* set last (release) for a defined kernel */
	const char *name;
	enum fc_kfn fn;
	/* FC_KFN_DEFINED only: the declared layout and the body */
	unsigned nr;
	uint32_t *size, *offset;  /* nr each; offsets packed as a compiler packs */
	size_t bytes;             /* the parameter buffer: the last one's end */
	fakecuda_body_fn body;
	void *ctx;
};

#define FC_BUILTIN(n, f) { .magic = FC_KERNEL_MAGIC, .name = n, .fn = f }
static struct fc_kernel fc_touch = FC_BUILTIN("fakecuda_touch_kernel", FC_KFN_TOUCH);
static struct fc_kernel fc_paged = FC_BUILTIN("fakecuda_paged_kernel", FC_KFN_PAGED);
static struct fc_kernel fc_compute = FC_BUILTIN("fakecuda_compute_kernel", FC_KFN_COMPUTE);
#undef FC_BUILTIN

/* Defined kernels live until exit; slots are taken in order under
 * fc_define_lock and published by their magic. */
static struct fc_kernel fc_defined[FC_DEFINED_MAX];
static unsigned fc_nr_defined;
static pthread_mutex_t fc_define_lock = PTHREAD_MUTEX_INITIALIZER;

/* The ordinal of the defined body running on this thread, -1: none, and
 * its launch's grid. */
static __thread int fc_body_dev = -1;
static __thread unsigned fc_body_grid[3];

/* Argument sizes of the built-in kernels (fakecuda.h documents them). */
static const uint8_t fc_touch_sizes[] = { 8, 4 };
static const uint8_t fc_paged_sizes[] = { 8, 8, 8, 8, 4, 4, 4, 4, 8, 4 };
static const uint8_t fc_compute_sizes[] = { 8, 8, 8, 8, 8, 8, 4, 4, 4, 4 };

static size_t fc_round_up(size_t n, size_t align)
{
	return (n + align - 1) / align * align;
}

/* ---- handles ---- */

FC_EXPORT CUfunction fakecuda_touch_kernel(void)
{
	return (CUfunction)&fc_touch;
}

FC_EXPORT CUfunction fakecuda_paged_kernel(void)
{
	return (CUfunction)&fc_paged;
}

FC_EXPORT CUfunction fakecuda_compute_kernel(void)
{
	return (CUfunction)&fc_compute;
}

/* The stand-in's kernel behind handle f, or NULL (not one of its kernels). */
static const struct fc_kernel *fc_kernel_of(CUfunction f)
{
	const struct fc_kernel *k = (const struct fc_kernel *)f;
	uintptr_t at = (uintptr_t)f, first = (uintptr_t)fc_defined;
	uint32_t magic = 0;
	if (at >= first && at < first + sizeof fc_defined) {
		if ((at - first) % sizeof fc_defined[0])
			return NULL;
		magic = __atomic_load_n(&k->magic, __ATOMIC_ACQUIRE);
	} else if (f) {                   /* any handle: misaligned ones too */
		memcpy(&magic, (const void *)f, sizeof magic);
	}
	return magic == FC_KERNEL_MAGIC ? k : NULL;
}

/* A built-in kernel's argument sizes, *n of them. */
static const uint8_t *fc_builtin_sizes(const struct fc_kernel *k, unsigned *n)
{
	*n = k->fn == FC_KFN_PAGED ? sizeof fc_paged_sizes
	   : k->fn == FC_KFN_COMPUTE ? sizeof fc_compute_sizes : sizeof fc_touch_sizes;
	return k->fn == FC_KFN_PAGED ? fc_paged_sizes
	     : k->fn == FC_KFN_COMPUTE ? fc_compute_sizes : fc_touch_sizes;
}

static bool fc_param_ok(const struct fakecuda_param *p)
{
	return p->size && p->size <= FC_PARAM_BYTES && p->align && p->align <= FC_PARAM_ALIGN &&
	       !(p->align & (p->align - 1));
}

/* Fill slot k from the declaration; 0 or -ENOMEM. */
static int fc_define_fill(struct fc_kernel *k, const char *name,
			  const struct fakecuda_param *params, unsigned nr)
{
	char *copy = strdup(name);
	uint32_t *size = malloc((nr ? nr : 1) * sizeof *size);
	uint32_t *offset = malloc((nr ? nr : 1) * sizeof *offset);
	if (!copy || !size || !offset) {
		free(copy);
		free(size);
		free(offset);
		return -ENOMEM;
	}
	size_t end = 0;
	for (unsigned i = 0; i < nr; i++) {
		end = fc_round_up(end, params[i].align);
		offset[i] = (uint32_t)end;
		size[i] = params[i].size;
		end += params[i].size;
	}
	k->name = copy;
	k->fn = FC_KFN_DEFINED;
	k->nr = nr;
	k->size = size;
	k->offset = offset;
	k->bytes = end;
	return 0;
}

FC_EXPORT CUfunction fakecuda_kernel_define(const char *name,
					    const struct fakecuda_param *params, unsigned nr,
					    fakecuda_body_fn body, void *ctx)
{
	if (!name || !*name || !body || nr > FC_PARAMS_MAX || (nr && !params))
		return NULL;
	for (unsigned i = 0; i < nr; i++)
		if (!fc_param_ok(&params[i]))
			return NULL;
	struct fc_kernel *k = NULL;
	pthread_mutex_lock(&fc_define_lock);
	if (fc_nr_defined < FC_DEFINED_MAX && !fc_define_fill(&fc_defined[fc_nr_defined], name,
							     params, nr)) {
		k = &fc_defined[fc_nr_defined++];
		k->body = body;
		k->ctx = ctx;
		__atomic_store_n(&k->magic, FC_KERNEL_MAGIC, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&fc_define_lock);
	return (CUfunction)k;
}

/* As the driver (12.4+) answers it: offset and size of argument i, the
 * built-ins' packed at natural alignment, a defined kernel's as declared;
 * CUDA_ERROR_INVALID_VALUE past the last. */
CUresult CUDAAPI cuFuncGetParamInfo(CUfunction f, size_t i, size_t *offset, size_t *size)
{
	FC_GUARD("cuFuncGetParamInfo", 0);
	const struct fc_kernel *k = fc_kernel_of(f);
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!offset || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (k->fn == FC_KFN_DEFINED) {
		if (i >= k->nr)
			return CUDA_ERROR_INVALID_VALUE;
		*offset = k->offset[i];
		*size = k->size[i];
		return CUDA_SUCCESS;
	}
	unsigned n;
	const uint8_t *sz = fc_builtin_sizes(k, &n);
	if (i >= n)
		return CUDA_ERROR_INVALID_VALUE;
	size_t off = 0;
	for (size_t j = 0; j <= i; j++) {
		off = fc_round_up(off, sz[j]);
		if (j < i)
			off += sz[j];
	}
	*offset = off;
	*size = sz[i];
	return CUDA_SUCCESS;
}

/* The kernel's name: a defined kernel's as given, a built-in's its
 * fakecuda_*_kernel name. Valid until exit. */
CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
	FC_GUARD("cuFuncGetName", 0);
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	const struct fc_kernel *k = fc_kernel_of(hfunc);
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = k->name;
	return CUDA_SUCCESS;
}

/* ---- arguments: copied at launch and capture ---- */

static size_t fc_kargs_head(unsigned nr)
{
	return fc_round_up((size_t)nr * sizeof(void *), FC_PARAM_ALIGN);
}

/* One block: nr pointers, then the parameter buffer (malloc's alignment,
 * 16 here, serves every declared alignment). */
static CUresult fc_defined_args(const struct fc_kernel *k, void *const *params,
				struct fc_kargs *out)
{
	*out = (struct fc_kargs){ .nr = k->nr };
	if (!k->nr)
		return CUDA_SUCCESS;
	if (!params)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < k->nr; i++)
		if (!params[i])
			return CUDA_ERROR_INVALID_VALUE;
	size_t head = fc_kargs_head(k->nr);
	char *block = malloc(head + k->bytes);
	if (!block)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memset(block + head, 0, k->bytes);
	void **ptrs = (void **)block;
	for (unsigned i = 0; i < k->nr; i++) {
		ptrs[i] = block + head + k->offset[i];
		memcpy(ptrs[i], params[i], k->size[i]);
	}
	out->params = ptrs;
	out->block_bytes = head + k->bytes;
	return CUDA_SUCCESS;
}

CUresult fc_kernel_args(CUfunction f, void *const *params, struct fc_kargs *out)
{
	const struct fc_kernel *k = fc_kernel_of(f);
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if (k->fn == FC_KFN_DEFINED)
		return fc_defined_args(k, params, out);
	unsigned n;
	const uint8_t *sz = fc_builtin_sizes(k, &n);
	if (!params)
		return CUDA_ERROR_INVALID_VALUE;
	*out = (struct fc_kargs){ .nr = 0 };
	for (unsigned i = 0; i < n; i++) {
		if (!params[i])
			return CUDA_ERROR_INVALID_VALUE;
		memcpy(&out->v[i], params[i], sz[i]);
	}
	return CUDA_SUCCESS;
}

CUresult fc_kargs_copy(struct fc_kargs *dst, const struct fc_kargs *src)
{
	*dst = *src;
	if (!src->params)
		return CUDA_SUCCESS;
	char *block = malloc(src->block_bytes);
	if (!block) {
		dst->params = NULL;
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(block, src->params, src->block_bytes);
	void **ptrs = (void **)block;
	for (unsigned i = 0; i < src->nr; i++)
		ptrs[i] = block + ((char *)src->params[i] - (char *)src->params);
	dst->params = ptrs;
	return CUDA_SUCCESS;
}

void fc_kargs_release(struct fc_kargs *a)
{
	free(a->params);
	a->params = NULL;
}

/* ---- running ---- */

/* A defined kernel: one launch's cost, then its body on a copy of the
 * arguments of its own (a graph node's stay as they were captured), with
 * ordinal dev's context current. A nonzero return is an illegal address. */
static CUresult fc_defined_run(const struct fc_kernel *k, const struct fc_kargs *a, int dev,
			       const unsigned grid[3])
{
	struct fc_kargs mine;
	if (fc_kargs_copy(&mine, a) != CUDA_SUCCESS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_lock();
	fc_stats.c.launches++;
	fc_clock_ns(fc_knobs.launch_ns);
	int outer = fc_body_dev;
	unsigned outer_grid[3];
	memcpy(outer_grid, fc_body_grid, sizeof outer_grid);
	bool pushed = fc_ctx_push_body(dev);
	fc_body_dev = dev;
	memcpy(fc_body_grid, grid, sizeof fc_body_grid);
	int rc = k->body(mine.params, k->ctx);
	fc_body_dev = outer;
	memcpy(fc_body_grid, outer_grid, sizeof fc_body_grid);
	if (pushed)
		fc_ctx_pop_body();
	fc_unlock();
	fc_kargs_release(&mine);
	return rc ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS;
}

CUresult fc_kernel_run(CUfunction f, const struct fc_kargs *a, int dev, const unsigned grid[3])
{
	const struct fc_kernel *k = (const struct fc_kernel *)f;
	switch (k->fn) {
	case FC_KFN_PAGED:
		return fc_paged_run(a, dev);
	case FC_KFN_COMPUTE:
		return fc_compute_run(a, dev);
	case FC_KFN_DEFINED:
		return fc_defined_run(k, a, dev, grid);
	default:
		return fc_touch_run((const struct fakecuda_range *)(uintptr_t)a->v[0],
				    (unsigned)a->v[1], dev);
	}
}

/* ---- inside a defined body ---- */

/* The running body's launch grid (all 1 outside a body). */
FC_EXPORT void fakecuda_kgrid(unsigned grid[3])
{
	for (int i = 0; i < 3; i++)
		grid[i] = fc_body_dev < 0 ? 1 : fc_body_grid[i];
}

FC_EXPORT int fakecuda_kread(const void *ptr, void *out, size_t len)
{
	if (fc_body_dev < 0)
		return CUDA_ERROR_NOT_PERMITTED;
	if (!len)
		return CUDA_SUCCESS;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	CUresult r = fc_kernel_copy((uintptr_t)ptr, out, len, 0, fc_body_dev);
	fc_unlock();
	return r;
}

FC_EXPORT int fakecuda_kwrite(void *ptr, const void *in, size_t len)
{
	if (fc_body_dev < 0)
		return CUDA_ERROR_NOT_PERMITTED;
	if (!len)
		return CUDA_SUCCESS;
	if (!in)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	CUresult r = fc_kernel_copy((uintptr_t)ptr, (void *)in, len, 1, fc_body_dev);
	fc_unlock();
	return r;
}

FC_EXPORT int fakecuda_kaccess(const void *ptr, size_t len, int write)
{
	if (fc_body_dev < 0)
		return CUDA_ERROR_NOT_PERMITTED;
	if (!len)
		return CUDA_SUCCESS;
	fc_lock();
	CUresult r = fc_kernel_copy((uintptr_t)ptr, NULL, len, write, fc_body_dev);
	fc_unlock();
	return r;
}

FC_EXPORT void fakecuda_kflops(double flops)
{
	if (fc_body_dev < 0 || !(flops > 0))
		return;
	fc_lock();
	fc_compute_flops(flops);
	fc_unlock();
}

/* ---- launch ---- */

/* On a capturing stream the launch becomes a graph node holding the
 * arguments as they are now (values, not the memory behind them: a kernel
 * reads memory when it runs); elsewhere it runs at submission. Either way
 * the caller may reuse its argument buffers at once. */
static CUresult fc_launch(CUfunction f, const struct fc_dims *d, CUstream s, void **params,
			  void **extra)
{
	struct fc_kargs a;
	CUresult r = fc_kernel_args(f, params, &a);
	if (r != CUDA_SUCCESS)
		return r;
	if (!fc_valid_stream(s) || extra) {
		fc_kargs_release(&a);
		return CUDA_ERROR_INVALID_VALUE;
	}
	int dev = fc_stream_dev(s);
	bool kept = false;
	fc_lock();
	struct fc_graph *g = fc_stream_capture(s);
	if (!g) {
		struct fc_op op;
		fc_op_begin(&op, s, dev, FC_ENG_SM);
		r = fc_kernel_run(f, &a, dev, d->grid);
		fc_op_end(&op);
	} else {
		r = fc_graph_add_kernel(g, f, d, &a, dev);
		kept = r == CUDA_SUCCESS;
		if (!kept)
			fc_stream_capture_invalidate(s);
	}
	fc_unlock();
	if (!kept)
		fc_kargs_release(&a);
	return r;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
				unsigned bx, unsigned by, unsigned bz, unsigned shmem,
				CUstream s, void **params, void **extra)
{
	FC_GUARD("cuLaunchKernel", FC_CTX);
	struct fc_dims d = { { gx, gy, gz }, { bx, by, bz }, shmem };
	return fc_launch(f, &d, s, params, extra);
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
				     unsigned bx, unsigned by, unsigned bz, unsigned shmem,
				     CUstream s, void **params, void **extra)
{
	FC_GUARD("cuLaunchKernel_ptsz", FC_CTX);
	struct fc_dims d = { { gx, gy, gz }, { bx, by, bz }, shmem };
	return fc_launch(f, &d, s, params, extra);
}

/* cuLaunchKernel with its geometry and stream in a config; the launch
 * attributes (clusters, priorities, ...) change nothing here. */
static CUresult fc_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params,
			     void **extra)
{
	if (!c || (c->numAttrs && !c->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_dims d = { { c->gridDimX, c->gridDimY, c->gridDimZ },
			     { c->blockDimX, c->blockDimY, c->blockDimZ }, c->sharedMemBytes };
	return fc_launch(f, &d, c->hStream, params, extra);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
				  void **kernelParams, void **extra)
{
	FC_GUARD("cuLaunchKernelEx", FC_CTX);
	return fc_launch_ex(config, f, kernelParams, extra);
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
				       void **kernelParams, void **extra)
{
	FC_GUARD("cuLaunchKernelEx_ptsz", FC_CTX);
	return fc_launch_ex(config, f, kernelParams, extra);
}
