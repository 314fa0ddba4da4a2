// SPDX-License-Identifier: MIT
/* kvtier's own driver calls (contract in shim.h): typed entry points fetched
 * once through the real cuGetProcAddress_v2 at fixed ABI versions.
 * Runs inside hooks: no malloc, no stdio, no locks beyond pthread_once. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "shim.h"
#include "real.h"
#include "../base/kvt.h"

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
			   CUdriverProcAddressQueryResult *);

static struct {
	CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*advise)(CUdeviceptr, size_t, CUmem_advise, CUmemLocation);
	CUresult (*ctx_get_device)(CUdevice *);
	CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus *);
	CUresult (*stream_sync)(CUstream);
	CUresult (*host_register)(void *, size_t, unsigned);
	CUresult (*host_unregister)(void *);
	CUresult (*range_attr)(void *, size_t, CUmem_range_attribute, CUdeviceptr, size_t);
	/* the migrator's */
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*primary_release)(CUdevice);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*prio_range)(int *, int *);
	CUresult (*stream_create_prio)(CUstream *, unsigned, int);
	CUresult (*stream_destroy)(CUstream);
	CUresult (*prefetch)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream);
	/* dead KV dropped (13.0+; NULL before) */
	CUresult (*discard)(CUdeviceptr *, size_t *, size_t, unsigned long long, CUstream);
	CUresult (*mem_info)(size_t *, size_t *);
	/* the launch source's, for CUDA graphs */
	CUresult (*graph_nodes)(CUgraph, CUgraphNode *, size_t *);
	CUresult (*node_type)(CUgraphNode, CUgraphNodeType *);
	CUresult (*kernel_node_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
	/* the launch scan's parameter layouts (12.4+; NULL before) */
	CUresult (*param_info)(CUfunction, size_t, size_t *, size_t *);
	/* the server decoders' kernel names (12.3+; NULL before) */
	CUresult (*func_name)(const char **, CUfunction);
	int ok;
} drv;

static void *entry(gpa_fn gpa, const char *name, int version)
{
	void *fn = NULL;
	if (gpa(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, NULL) != CUDA_SUCCESS)
		return NULL;
	return fn;
}

/* A simulated driver's virtual clock (fakecuda, FAKECUDA_VTIME=1; a real
 * libcuda exports none of these): kvtier's clock and timed waits move to
 * it, so a simulated run gives the same figures every time. */
static void use_virtual_clock(void)
{
	int (*active)(void) = (int (*)(void))kvt_drv_extra("fakecuda_vclock_active");
	if (!active || !active())
		return;
	struct kvt_vclock vc = {
		.now = (uint64_t (*)(void))kvt_drv_extra("fakecuda_vclock_now"),
		.wait = (int (*)(const void *, uint64_t))kvt_drv_extra("fakecuda_vclock_wait"),
		.wake = (void (*)(const void *))kvt_drv_extra("fakecuda_vclock_wake"),
		.charge = (void (*)(uint64_t))kvt_drv_extra("fakecuda_vclock_charge"),
		.leave = (void (*)(void))kvt_drv_extra("fakecuda_vclock_leave"),
		.spawn = (void *(*)(void))kvt_drv_extra("fakecuda_vclock_spawn"),
		.adopt = (void (*)(void *))kvt_drv_extra("fakecuda_vclock_adopt"),
		.cancel = (void (*)(void *))kvt_drv_extra("fakecuda_vclock_cancel"),
	};
	kvt_clock_set_virtual(&vc);
}

static void resolve(void)
{
	gpa_fn gpa = (gpa_fn)kvt_drv_real(KVT_H_cuGetProcAddress_v2);
	if (!gpa)
		return;
	drv.alloc_managed = entry(gpa, "cuMemAllocManaged", 6000);
	drv.mem_free = entry(gpa, "cuMemFree", 3020);
	drv.advise = entry(gpa, "cuMemAdvise", 12020);
	drv.ctx_get_device = entry(gpa, "cuCtxGetDevice", 2000);
	drv.is_capturing = entry(gpa, "cuStreamIsCapturing", 10000);
	drv.stream_sync = entry(gpa, "cuStreamSynchronize", 2000);
	drv.host_register = entry(gpa, "cuMemHostRegister", 6050);
	drv.host_unregister = entry(gpa, "cuMemHostUnregister", 4000);
	drv.range_attr = entry(gpa, "cuMemRangeGetAttribute", 8000);
	drv.primary_retain = entry(gpa, "cuDevicePrimaryCtxRetain", 7000);
	drv.primary_release = entry(gpa, "cuDevicePrimaryCtxRelease", 11000);
	drv.ctx_set_current = entry(gpa, "cuCtxSetCurrent", 4000);
	drv.prio_range = entry(gpa, "cuCtxGetStreamPriorityRange", 5050);
	drv.stream_create_prio = entry(gpa, "cuStreamCreateWithPriority", 5050);
	drv.stream_destroy = entry(gpa, "cuStreamDestroy", 4000);
	drv.prefetch = entry(gpa, "cuMemPrefetchAsync", 12020);
	drv.discard = entry(gpa, "cuMemDiscardBatchAsync", 13000);
	drv.mem_info = entry(gpa, "cuMemGetInfo", 3020);
	drv.graph_nodes = entry(gpa, "cuGraphGetNodes", 10000);
	drv.node_type = entry(gpa, "cuGraphNodeGetType", 10000);
	drv.kernel_node_params = entry(gpa, "cuGraphKernelNodeGetParams", 12000);
	drv.param_info = entry(gpa, "cuFuncGetParamInfo", 12040);
	drv.func_name = entry(gpa, "cuFuncGetName", 12030);
	drv.ok = drv.alloc_managed && drv.mem_free && drv.advise;
	if (drv.ok)
		use_virtual_clock();
}

int kvt_cuda_ready(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, resolve);
	return drv.ok ? 0 : -1;
}

#define CALL(fn, ...) (kvt_cuda_ready(), drv.fn ? drv.fn(__VA_ARGS__) : CUDA_ERROR_NOT_INITIALIZED)

CUresult kvt_cuda_alloc_managed(CUdeviceptr *p, size_t bytes)
{
	return CALL(alloc_managed, p, bytes, CU_MEM_ATTACH_GLOBAL);
}

CUresult kvt_cuda_free(CUdeviceptr p)
{
	return CALL(mem_free, p);
}

CUresult kvt_cuda_advise(CUdeviceptr p, size_t bytes, CUmem_advise advice,
			 CUmemLocationType type, int id)
{
	CUmemLocation loc = { .type = type, .id = id };
	return CALL(advise, p, bytes, advice, loc);
}

CUresult kvt_cuda_current_device(CUdevice *dev)
{
	return CALL(ctx_get_device, dev);
}

int kvt_cuda_stream_capturing(CUstream s)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult r = CALL(is_capturing, s, &st);
	if (r != CUDA_SUCCESS)
		return -1;
	return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult kvt_cuda_stream_sync(CUstream s)
{
	return CALL(stream_sync, s);
}

CUresult kvt_cuda_host_register(void *p, size_t bytes, unsigned flags)
{
	return CALL(host_register, p, bytes, flags);
}

CUresult kvt_cuda_host_unregister(void *p)
{
	return CALL(host_unregister, p);
}

CUresult kvt_cuda_range_attr(void *data, size_t data_bytes, CUmem_range_attribute attr,
			     CUdeviceptr p, size_t bytes)
{
	return CALL(range_attr, data, data_bytes, attr, p, bytes);
}

int kvt_cuda_preferred_is(CUdeviceptr p, size_t bytes, CUmemLocationType type, int id)
{
	int t = -1, i = -1;
	if (kvt_cuda_range_attr(&t, sizeof t, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, bytes) !=
		    CUDA_SUCCESS ||
	    kvt_cuda_range_attr(&i, sizeof i, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, p, bytes) !=
		    CUDA_SUCCESS)
		return -1;
	return t == (int)type && (type != CU_MEM_LOCATION_TYPE_HOST_NUMA || i == id);
}

int kvt_cuda_accessed_by(CUdeviceptr p, size_t bytes, CUdevice dev)
{
	int32_t devs[8];                 /* a device list, padded with CU_DEVICE_INVALID */
	if (kvt_cuda_range_attr(devs, sizeof devs, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, bytes) !=
	    CUDA_SUCCESS)
		return -1;
	for (unsigned i = 0; i < sizeof devs / sizeof devs[0]; i++)
		if (devs[i] == dev)
			return 1;
	return 0;
}

/* ---- the migrator's calls ---- */

CUresult kvt_cuda_bind_primary(CUdevice dev, CUcontext *ctx)
{
	*ctx = NULL;
	CUresult r = CALL(primary_retain, ctx, dev);
	if (r != CUDA_SUCCESS)
		return r;
	r = CALL(ctx_set_current, *ctx);
	if (r != CUDA_SUCCESS)
		CALL(primary_release, dev);
	return r;
}

CUresult kvt_cuda_set_current(CUcontext ctx)
{
	return CALL(ctx_set_current, ctx);
}

CUresult kvt_cuda_release_primary(CUdevice dev)
{
	return CALL(primary_release, dev);
}

CUresult kvt_cuda_stream_lowest(CUstream *s)
{
	int least = 0, greatest = 0;
	if (CALL(prio_range, &least, &greatest) != CUDA_SUCCESS)
		least = 0;
	/* numerically greatest = lowest priority */
	return CALL(stream_create_prio, s, CU_STREAM_NON_BLOCKING, least);
}

CUresult kvt_cuda_stream_destroy(CUstream s)
{
	return CALL(stream_destroy, s);
}

CUresult kvt_cuda_prefetch(CUdeviceptr p, size_t bytes, CUmemLocationType type, int id,
			   CUstream s)
{
	CUmemLocation loc = { .type = type, .id = id };
	return CALL(prefetch, p, bytes, loc, 0, s);
}

/* The stream a discard ordered with the legacy default stream goes on: a
 * blocking stream of the device (the legacy stream waits for it, and it
 * for the legacy stream's earlier work), made once per device. */
#define DISCARD_DEVS 64
static CUstream legacy_twin[DISCARD_DEVS];

static CUstream discard_stream(CUstream s)
{
	if (s != (CUstream)0 && s != CU_STREAM_LEGACY)
		return s;
	CUdevice dev;
	if (CALL(ctx_get_device, &dev) != CUDA_SUCCESS || dev < 0 || dev >= DISCARD_DEVS)
		return NULL;
	CUstream t = __atomic_load_n(&legacy_twin[dev], __ATOMIC_ACQUIRE);
	if (t)
		return t;
	if (CALL(stream_create_prio, &t, CU_STREAM_DEFAULT, 0) != CUDA_SUCCESS)
		return NULL;
	CUstream none = NULL;
	if (!__atomic_compare_exchange_n(&legacy_twin[dev], &none, t, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		CALL(stream_destroy, t);
		return none;
	}
	return t;
}

int kvt_cuda_can_discard(void)
{
	kvt_cuda_ready();
	return drv.discard != NULL;
}

CUresult kvt_cuda_discard(const uint64_t *addr, const uint64_t *bytes, size_t n, CUstream s)
{
	_Static_assert(sizeof(CUdeviceptr) == sizeof(uint64_t) && sizeof(size_t) == sizeof(uint64_t),
		       "the batch arrays are passed as they are");
	if (!kvt_cuda_can_discard())
		return CUDA_ERROR_NOT_SUPPORTED;
	CUstream t = discard_stream(s);
	if (!t)
		return CUDA_ERROR_INVALID_HANDLE;
	return drv.discard((CUdeviceptr *)(uintptr_t)addr, (size_t *)(uintptr_t)bytes, n, 0, t);
}

CUresult kvt_cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
	return CALL(mem_info, free_bytes, total_bytes);
}

int kvt_cuda_graph_kernels(CUgraph g, void (*fn)(uint64_t func, void **params, void *arg),
			   void *arg)
{
	size_t n = 0;
	if (CALL(graph_nodes, g, NULL, &n) != CUDA_SUCCESS)
		return -1;
	if (!n)
		return 0;
	size_t bytes = n * sizeof(CUgraphNode);
	CUgraphNode *nodes = kvt_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (nodes == MAP_FAILED)
		return -1;
	int k = -1;
	if (CALL(graph_nodes, g, nodes, &n) == CUDA_SUCCESS) {
		k = 0;
		for (size_t i = 0; i < n && i < bytes / sizeof *nodes; i++) {
			CUgraphNodeType t;
			CUDA_KERNEL_NODE_PARAMS p;
			if (!nodes[i] || CALL(node_type, nodes[i], &t) != CUDA_SUCCESS ||
			    t != CU_GRAPH_NODE_TYPE_KERNEL ||
			    CALL(kernel_node_params, nodes[i], &p) != CUDA_SUCCESS)
				continue;
			fn((uint64_t)(uintptr_t)p.func, p.kernelParams, arg);
			k++;
		}
	}
	kvt_sys_munmap(nodes, bytes);
	return k;
}

int kvt_cuda_param_size(uint64_t f, unsigned i, size_t *size)
{
	size_t offset = 0;
	CUresult r = CALL(param_info, (CUfunction)(uintptr_t)f, i, &offset, size);
	if (r == CUDA_SUCCESS)
		return 0;
	return r == CUDA_ERROR_INVALID_VALUE ? 1 : -1;
}

int kvt_cuda_func_name(uint64_t f, const char **name)
{
	*name = NULL;
	if (CALL(func_name, name, (CUfunction)(uintptr_t)f) != CUDA_SUCCESS || !*name)
		return -1;
	return 0;
}
