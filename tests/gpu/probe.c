// SPDX-License-Identifier: MIT
/* The real-GPU probe (tests/gpu/run.sh): linked to the toolkit's
 * libcudart.so.13, run natively or under kvtier. It reports free device
 * memory, and allocates buffers with cudaMalloc, touches them from the GPU
 * (a PTX kernel the driver JIT-compiles: no nvcc on the GPU machine) and
 * says where each one lives: managed or not, its preferred location
 * (cuMemRangeGetAttribute) and its host pages per node (numa_maps).
 * Never a unit test: exits 77 when no GPU is present. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define SKIP 77
#define MAX_BUFS 64

/* touch(base, nr_pages, stride): thread i increments byte i*stride */
static const char touch_ptx[] =
	".version 8.0\n"
	".target sm_80\n"
	".address_size 64\n"
	".visible .entry kvt_touch(.param .u64 base, .param .u64 n, .param .u64 stride)\n"
	"{\n"
	"  .reg .pred %p<2>;\n"
	"  .reg .b16 %rs<3>;\n"
	"  .reg .b32 %r<5>;\n"
	"  .reg .b64 %rd<8>;\n"
	"  ld.param.u64 %rd1, [base];\n"
	"  ld.param.u64 %rd2, [n];\n"
	"  ld.param.u64 %rd3, [stride];\n"
	"  mov.u32 %r1, %ctaid.x;\n"
	"  mov.u32 %r2, %ntid.x;\n"
	"  mov.u32 %r3, %tid.x;\n"
	"  mad.lo.u32 %r4, %r1, %r2, %r3;\n"
	"  cvt.u64.u32 %rd4, %r4;\n"
	"  setp.ge.u64 %p1, %rd4, %rd2;\n"
	"  @%p1 bra DONE;\n"
	"  mul.lo.u64 %rd5, %rd4, %rd3;\n"
	"  add.u64 %rd6, %rd1, %rd5;\n"
	"  ld.global.u8 %rs1, [%rd6];\n"
	"  add.u16 %rs2, %rs1, 1;\n"
	"  st.global.u8 [%rd6], %rs2;\n"
	"DONE:\n"
	"  ret;\n"
	"}\n";

struct drv {
	CUresult (*module_load)(CUmodule *, const void *);
	CUresult (*get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, unsigned, CUstream, void **, void **);
	CUresult (*range_attr)(void *, size_t, CUmem_range_attribute, CUdeviceptr, size_t);
	CUresult (*ptr_attr)(void *, CUpointer_attribute, CUdeviceptr);
};

static int drv_open(struct drv *d)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return -1;
	*(void **)&d->module_load = dlsym(h, "cuModuleLoadData");
	*(void **)&d->get_function = dlsym(h, "cuModuleGetFunction");
	*(void **)&d->launch = dlsym(h, "cuLaunchKernel");
	*(void **)&d->range_attr = dlsym(h, "cuMemRangeGetAttribute");
	*(void **)&d->ptr_attr = dlsym(h, "cuPointerGetAttribute");
	return d->module_load && d->get_function && d->launch && d->range_attr &&
	       d->ptr_attr ? 0 : -1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- meminfo: free device memory, for sizing every other run ------------- */

static int cmd_meminfo(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
		printf("gpu=none\n");
		return SKIP;
	}
	size_t free_b = 0, total_b = 0;
	struct cudaDeviceProp prop;
	if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess ||
	    cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
		return 1;
	printf("gpu=%s\nfree_bytes=%zu\ntotal_bytes=%zu\ndevices=%d\n", prop.name, free_b,
	       total_b, n);
	return 0;
}

/* ---- place: allocate, touch from the GPU, say where it lives ------------- */

/* Pages per node of the numa_maps line starting at addr: "N0=12 N1=500". */
static void numa_pages(uintptr_t addr, char *out, size_t len)
{
	char line[4096];
	FILE *f = fopen("/proc/self/numa_maps", "r");
	snprintf(out, len, "-");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		if (strtoull(line, NULL, 16) != addr)
			continue;
		size_t o = 0;
		out[0] = 0;
		for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n"))
			if (t[0] == 'N' && strchr(t, '=') && o + strlen(t) + 2 < len)
				o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "", t);
		if (!o)
			snprintf(out, len, "none");
		break;
	}
	fclose(f);
}

static const char *loc_name(int t)
{
	switch (t) {
	case CU_MEM_LOCATION_TYPE_DEVICE: return "DEVICE";
	case CU_MEM_LOCATION_TYPE_HOST: return "HOST";
	case CU_MEM_LOCATION_TYPE_HOST_NUMA: return "HOST_NUMA";
	case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return "HOST_NUMA_CURRENT";
	case CU_MEM_LOCATION_TYPE_INVALID: return "INVALID";
	default: return "?";
	}
}

static int touch(const struct drv *d, CUfunction fn, void *base, size_t bytes)
{
	uint64_t stride = 4096, n = bytes / stride;
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)base;
	void *args[] = { &p, &n, &stride };
	unsigned threads = 256, blocks = (unsigned)((n + threads - 1) / threads);
	return d->launch(fn, blocks, 1, 1, threads, 1, 1, 0, NULL, args, NULL) == CUDA_SUCCESS ? 0 : -1;
}

/* expect: 0 native (nothing managed), 1 far (some HOST_NUMA), 2 any */
static int cmd_place(size_t bytes, int count, int steps, int expect)
{
	struct drv d;
	void *buf[MAX_BUFS];
	CUmodule mod;
	CUfunction fn;
	if (count < 1 || count > MAX_BUFS || !bytes)
		return 2;
	if (cudaFree(0) != cudaSuccess || drv_open(&d)) {
		printf("gpu=none\n");
		return SKIP;
	}
	if (d.module_load(&mod, touch_ptx) || d.get_function(&fn, mod, "kvt_touch")) {
		fprintf(stderr, "probe: the touch kernel did not load\n");
		return 1;
	}
	for (int i = 0; i < count; i++)
		if (cudaMalloc(&buf[i], bytes) != cudaSuccess) {
			fprintf(stderr, "probe: cudaMalloc %d of %zu bytes failed\n", i, bytes);
			return 1;
		}
	double t0 = now_s();
	for (int i = 0; i < count; i++)
		if (cudaMemset(buf[i], 0, bytes) != cudaSuccess)
			return 1;
	cudaDeviceSynchronize();
	double t1 = now_s();
	for (int s = 0; s < steps; s++)
		for (int i = 0; i < count; i++)
			if (touch(&d, fn, buf[i], bytes))
				return 1;
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 1;
	double t2 = now_s();

	int nr_far = 0, nr_managed = 0;
	for (int i = 0; i < count; i++) {
		unsigned managed = 0;
		int type = -1, id = -1;
		char nodes[512];
		CUdeviceptr p = (CUdeviceptr)(uintptr_t)buf[i];
		d.ptr_attr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p);
		if (managed) {
			d.range_attr(&type, sizeof type, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, bytes);
			d.range_attr(&id, sizeof id, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, p, bytes);
		}
		numa_pages((uintptr_t)buf[i], nodes, sizeof nodes);
		nr_managed += managed != 0;
		/* far: homed on a host node, or on the plain host where the driver
		 * keeps no host-NUMA home (kvtier's counted fallback; an H200 with
		 * driver 580 and NUMA config NONE reads back INVALID otherwise) */
		nr_far += managed && (type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
				      type == CU_MEM_LOCATION_TYPE_HOST);
		printf("buf=%d addr=%p managed=%u preferred=%s preferred_id=%d host_pages=%s\n", i,
		       buf[i], managed, managed ? loc_name(type) : "-", id, nodes);
	}
	double touched = (double)bytes * count / 4096 * steps;
	printf("buffers=%d managed=%d far_home=%d memset_gib_per_s=%.2f touch_pages_per_s=%.0f\n",
	       count, nr_managed, nr_far, (double)bytes * count / (t1 - t0) / (1 << 30),
	       steps ? touched / (t2 - t1) : 0.0);
	for (int i = 0; i < count; i++)
		cudaFree(buf[i]);
	if (expect == 1 && nr_far == 0)
		return 1;
	if (expect == 0 && nr_managed)
		return 1;
	return 0;
}

/* ---- calibrate: the costs the simulated device models (issue 23) -------- */

static int touch_stride(const struct drv *d, CUfunction fn, void *base, size_t bytes,
			uint64_t stride)
{
	uint64_t n = bytes / stride;
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)base;
	void *args[] = { &p, &n, &stride };
	unsigned threads = 256, blocks = (unsigned)((n + threads - 1) / threads);
	return d->launch(fn, blocks, 1, 1, threads, 1, 1, 0, NULL, args, NULL) == CUDA_SUCCESS &&
	       cudaDeviceSynchronize() == cudaSuccess ? 0 : -1;
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One managed buffer of `blocks` 2 MiB blocks (at most half the free memory,
 * checked by run.sh's sizing): each figure beside the stand-in's default
 * (docs/simulated-device.md, "Calibration"). */
static int cmd_calibrate(unsigned blocks)
{
	const size_t blk = 2u << 20, bytes = blk * blocks;
	struct drv d;
	CUmodule mod;
	CUfunction fn;
	char *p;
	if (blocks < 4 || cudaFree(0) != cudaSuccess || drv_open(&d)) {
		printf("gpu=none\n");
		return SKIP;
	}
	if (d.module_load(&mod, touch_ptx) || d.get_function(&fn, mod, "kvt_touch") ||
	    cudaMallocManaged((void **)&p, bytes, cudaMemAttachGlobal) != cudaSuccess)
		return 1;
	struct cudaMemLocation dev = { cudaMemLocationTypeDevice, 0 };
	struct cudaMemLocation host = { cudaMemLocationTypeHost, 0 };
	memset(p, 1, bytes);                                 /* CPU-resident */
	/* 1. a kernel's read of one 2 MiB block that faults and migrates */
	double t0 = now_s();
	for (unsigned i = 0; i < blocks / 2; i++)
		if (touch_stride(&d, fn, p + i * blk, blk, 4096))
			return 1;
	double fault_us = (now_s() - t0) / (blocks / 2) * 1e6;
	/* 2. prefetch bandwidth, both ways, whole buffer */
	t0 = now_s();
	if (cudaMemPrefetchAsync(p, bytes, dev, 0, 0) != cudaSuccess ||
	    cudaDeviceSynchronize() != cudaSuccess)
		return 1;
	double htod = bytes / (now_s() - t0) / 1e9;
	t0 = now_s();
	if (cudaMemPrefetchAsync(p, bytes, host, 0, 0) != cudaSuccess ||
	    cudaDeviceSynchronize() != cudaSuccess)
		return 1;
	double dtoh = bytes / (now_s() - t0) / 1e9;
	/* 3. cuMemAdvise's CPU time: accessed-by on each block */
	double c0 = thread_cpu_s();
	for (unsigned i = 0; i < blocks; i++)
		if (cudaMemAdvise(p + i * blk, blk, cudaMemAdviseSetAccessedBy, dev) != cudaSuccess)
			return 1;
	double advise_us = (thread_cpu_s() - c0) / blocks * 1e6;
	/* 4. remote reads, host-resident and mapped, from a kernel with a thread
	 * per 64-byte line (enough warps to keep the link busy) */
	if (cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, host) != cudaSuccess ||
	    touch_stride(&d, fn, p, bytes, 64))          /* warm the mapping */
		return 1;
	t0 = now_s();
	if (touch_stride(&d, fn, p, bytes, 64))
		return 1;
	double remote = bytes / (now_s() - t0) / 1e9;
	printf("calibrate: blocks=%u\n", blocks);
	printf("fault_migrate_us_per_2mib=%.0f standin=628\n", fault_us);
	printf("remote_read_gbps=%.1f standin=55\n", remote);
	printf("prefetch_htod_gbps=%.1f standin=55\n", htod);
	printf("prefetch_dtoh_gbps=%.1f standin=55\n", dtoh);
	printf("advise_cpu_us=%.1f standin=20\n", advise_us);
	cudaFree(p);
	return 0;
}

/* ---- advise: does this driver keep a HOST_NUMA preferred location? ------ */

/* Plain driver calls, no kvtier: cuMemAllocManaged, cuMemAdvise (v2 ABI,
 * resolved at 12020 as kvtier does) and the range attributes read back after
 * each advice, with every CUresult printed. */
static int cmd_advise(void)
{
	typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h || cudaFree(0) != cudaSuccess)
		return SKIP;
	gpa_fn gpa = (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
	CUresult (*alloc)(CUdeviceptr *, size_t, unsigned) = NULL;
	CUresult (*adv)(CUdeviceptr, size_t, CUmem_advise, CUmemLocation) = NULL;
	CUresult (*attr)(void *, size_t, CUmem_range_attribute, CUdeviceptr, size_t) = NULL;
	CUresult (*dattr)(int *, CUdevice_attribute, CUdevice) = NULL;
	if (!gpa || gpa("cuMemAllocManaged", (void **)&alloc, 6000, 0, NULL) ||
	    gpa("cuMemAdvise", (void **)&adv, 12020, 0, NULL) ||
	    gpa("cuMemRangeGetAttribute", (void **)&attr, 8000, 0, NULL) ||
	    gpa("cuDeviceGetAttribute", (void **)&dattr, 2000, 0, NULL))
		return 1;
	int v[4] = { -9, -9, -9, -9 };
	dattr(&v[0], CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0);
	dattr(&v[1], CU_DEVICE_ATTRIBUTE_NUMA_CONFIG, 0);
	dattr(&v[2], CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0);
	printf("advise: device host_numa_id=%d numa_config=%d concurrent_managed=%d\n", v[0], v[1], v[2]);
	const size_t bytes = 64u << 20;
	CUdeviceptr p = 0;
	CUresult r = alloc(&p, bytes, CU_MEM_ATTACH_GLOBAL);
	printf("advise: cuMemAllocManaged rc=%d\n", (int)r);
	if (r)
		return 1;
	const struct { const char *what; CUmem_advise a; CUmemLocation loc; } steps[] = {
		{ "preferred HOST_NUMA 0", CU_MEM_ADVISE_SET_PREFERRED_LOCATION, { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 } },
		{ "accessed-by DEVICE 0", CU_MEM_ADVISE_SET_ACCESSED_BY, { CU_MEM_LOCATION_TYPE_DEVICE, 0 } },
		{ "preferred HOST", CU_MEM_ADVISE_SET_PREFERRED_LOCATION, { CU_MEM_LOCATION_TYPE_HOST, 0 } },
		{ "preferred DEVICE 0", CU_MEM_ADVISE_SET_PREFERRED_LOCATION, { CU_MEM_LOCATION_TYPE_DEVICE, 0 } },
		{ "preferred HOST_NUMA 0 again", CU_MEM_ADVISE_SET_PREFERRED_LOCATION, { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 } },
	};
	for (unsigned i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		CUresult ra = adv(p, bytes, steps[i].a, steps[i].loc);
		int type = -9, id = -9, legacy = -9;
		CUresult r1 = attr(&type, sizeof type, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, bytes);
		CUresult r2 = attr(&id, sizeof id, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, p, bytes);
		CUresult r3 = attr(&legacy, sizeof legacy, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, bytes);
		printf("advise: %-28s rc=%d -> type=%d (rc %d) id=%d (rc %d) legacy=%d (rc %d)\n",
		       steps[i].what, (int)ra, type, (int)r1, id, (int)r2, legacy, (int)r3);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "advise"))
		return cmd_advise();
	if (argc >= 2 && !strcmp(argv[1], "meminfo"))
		return cmd_meminfo();
	if (argc == 3 && !strcmp(argv[1], "calibrate"))
		return cmd_calibrate((unsigned)strtoul(argv[2], NULL, 0));
	if (argc == 6 && !strcmp(argv[1], "place"))
		return cmd_place(strtoull(argv[2], NULL, 0), atoi(argv[3]), atoi(argv[4]),
				 !strcmp(argv[5], "far") ? 1 : !strcmp(argv[5], "native") ? 0 : 2);
	fprintf(stderr, "usage: probe meminfo\n"
		"       probe calibrate BLOCKS   (fault, remote-read, prefetch, advise costs)\n"
		"       probe place BYTES COUNT TOUCH_STEPS far|native|any\n"
		"  place: COUNT cudaMalloc buffers, memset, TOUCH_STEPS GPU passes touching\n"
		"  every 4 KiB page, then each buffer's placement; exit 1 when no buffer\n"
		"  is managed with a HOST_NUMA preferred location (far) or any is (native)\n"
		"  in the output: its touch rate, memset rate and each buffer's placement\n");
	return 2;
}
