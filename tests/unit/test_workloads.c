/* SPDX-License-Identifier: MIT */
/* CUnit suites for the stand-in CUDA runtime ($BUILD/fakecuda/libcudart.so.13)
 * and the workload programs ($BUILD/workloads/).  Both run as child
 * processes with LD_LIBRARY_PATH=$BUILD/fakecuda, the way the interposer
 * tests use them: rt-probe prints "CHECK <name> rc=<n> val=<v>" lines, the
 * workloads print key=value lines.  Everything simulated; no GPU needed. */
#include "unit/kvt_test.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

static char ld_path[600];

static const char *const *env_fake(void)
{
	static const char *env[3];
	snprintf(ld_path, sizeof ld_path, "LD_LIBRARY_PATH=%s", kvt_path("fakecuda"));
	env[0] = ld_path;
	env[1] = "FAKECUDA_DEVICE_BYTES=1073741824";
	env[2] = NULL;
	return env;
}

/* ---- output parsing ---- */

/* "CHECK <name> rc=R val=V": 1 when found. */
static int probe_get(const char *out, const char *name, long long *rc, long long *val)
{
	char key[160];
	snprintf(key, sizeof key, "CHECK %s rc=", name);
	const char *p = strstr(out, key);
	if (!p)
		return 0;
	return sscanf(p + strlen(key), "%lld val=%lld", rc, val) == 2;
}

/* The value of "key=" at the start of a line, or NULL. */
static const char *kv_get(const char *out, const char *key)
{
	static char val[8][128];
	static int next;
	size_t n = strlen(key);
	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (!strncmp(p, key, n) && p[n] == '=') {
			char *v = val[next++ & 7];
			size_t i = 0;
			for (p += n + 1; *p && *p != '\n' && i + 1 < sizeof val[0]; p++)
				v[i++] = *p;
			v[i] = 0;
			return v;
		}
	}
	return NULL;
}

static double kv_num(const char *out, const char *key)
{
	const char *v = kv_get(out, key);
	return v ? strtod(v, NULL) : -1;
}

/* ---- the runtime ---- */

struct probe_expect {
	const char *name;
	long long rc, val;
};

static const struct probe_expect probe_table[] = {
	{ "cudaRuntimeGetVersion", 0, 13000 },
	{ "cudaDriverGetVersion", 0, 13000 },
	{ "cudaGetDeviceCount", 0, 1 },
	{ "cudaSetDevice", 0, 0 },
	{ "cudaSetDevice.bad", cudaErrorInvalidDevice, 0 },
	{ "cudaPeekAtLastError", cudaErrorInvalidDevice, cudaErrorInvalidDevice },
	{ "cudaGetDevice", 0, 0 },
	{ "cudaDeviceGetAttribute", 0, 1 },              /* concurrent managed access */
	{ "cudaMemGetInfo", 0, 1073741824 },             /* FAKECUDA_DEVICE_BYTES */
	{ "cudaStreamCreate", 0, 1 },
	{ "cudaStreamCreateWithPriority", 0, 1 },
	{ "cudaMalloc", 0, 1 },
	{ "cudaMalloc.charged", 0, 1 },
	{ "cudaMemset", 0, 1 },
	{ "cudaMemcpy", 0, 1 },
	{ "cudaMemcpy.badkind", cudaErrorInvalidMemcpyDirection, 0 },
	{ "cudaMemsetAsync+cudaMemcpyAsync", 0, 1 },
	{ "ptsz.memset+memcpy", 0, 1 },
	{ "ptds.memset+memcpy", 0, 1 },
	{ "cudaPointerGetAttributes.device", 0, cudaMemoryTypeDevice },
	{ "cudaPointerGetAttributes.unregistered", 0, cudaMemoryTypeUnregistered },
	{ "cudaFree", 0, 0 },
	{ "cudaMalloc.zero", 0, 1 },
	{ "cudaMalloc.oom", cudaErrorMemoryAllocation, 1 },   /* output unwritten */
	{ "cudaGetLastError.oom", cudaErrorMemoryAllocation, 1 },
	{ "cudaGetLastError.reset", 0, 0 },
	{ "cudaMallocPitch", 0, 1 },
	{ "cudaMallocHost", 0, cudaMemoryTypeHost },
	{ "cudaFreeHost", 0, 0 },
	{ "cudaHostAlloc", 0, 1 },
	{ "cudaHostRegister", 0, cudaMemoryTypeHost },
	{ "cudaHostUnregister", 0, 0 },
	{ "cudaHostUnregister.twice", cudaErrorHostMemoryNotRegistered, 0 },
	{ "cudaMallocManaged", 0, 1 },
	{ "cudaPointerGetAttributes.managed", 0, cudaMemoryTypeManaged },
	{ "cudaMemAdvise+cudaMemRangeGetAttribute", 0, cudaMemLocationTypeHost },
	{ "cudaMemPrefetchAsync", 0, cudaMemLocationTypeDevice },
	{ "prefetch.block_on_device", 0, CU_MEM_LOCATION_TYPE_DEVICE },
	{ "ptsz.cudaMemPrefetchAsync", 0, CU_MEM_LOCATION_TYPE_HOST_NUMA },
	{ "managed.data", 0, 1 },
	{ "cudaFree.managed", 0, 0 },
	{ "cudaMallocAsync+cudaFreeAsync", 0, 1 },
	{ "ptsz.cudaMallocAsync+cudaFreeAsync", 0, 1 },
	{ "cudaMallocFromPoolAsync", 0, 1 },
	{ "cudaGetDriverEntryPoint", 0, 1 },
	{ "ptsz.cudaGetDriverEntryPoint", 0, 1 },
	{ "cudaGetDriverEntryPointByVersion", 0, 1 },
	{ "ptsz.cudaGetDriverEntryPointByVersion", 0, 1 },
	{ "cudaGetDriverEntryPointByVersion.missing", cudaErrorSymbolNotFound, 1 },
	{ "entry_point.is_driver_symbol", 0, 1 },
	{ "cudaLaunchKernel", 0, 1 },                    /* one launch counted */
	{ "cudaStreamSynchronize", 0, 0 },
	{ "cudaStreamDestroy", 0, 0 },
	{ "cudaDeviceSynchronize", 0, 0 },
	{ "cudaGetErrorString", 0, 1 },
	{ "cudaGetErrorName", 0, 1 },
};

static void check_probe_output(const struct kvt_child *c)
{
	CU_ASSERT_EQUAL(c->exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c->out, "\nDONE\n"));
	for (size_t i = 0; i < sizeof probe_table / sizeof probe_table[0]; i++) {
		const struct probe_expect *e = &probe_table[i];
		long long rc = -1, val = -1;
		int found = probe_get(c->out, e->name, &rc, &val);
		if (!found || rc != e->rc || val != e->val)
			fprintf(stderr, "  probe %s: found=%d rc=%lld (want %lld) val=%lld (want %lld)\n",
				e->name, found, rc, e->rc, val, e->val);
		CU_ASSERT_TRUE(found);
		CU_ASSERT_EQUAL(rc, e->rc);
		CU_ASSERT_EQUAL(val, e->val);
	}
}

static void test_rt_roundtrip(void)
{
	struct kvt_child c;
	const char *argv[] = { kvt_path("workloads/rt-probe"), NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env_fake()), 0);
	check_probe_output(&c);
	char want[600];
	snprintf(want, sizeof want, "RUNTIME %s\n", kvt_path("fakecuda/libcudart.so.13"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, want));
}

/* A program linked against the toolkit's real libcudart.so.13 runs against
 * the stand-in: same soname, same version node. */
static void test_rt_real_linked_binary(void)
{
	struct stat st;
	if (stat("/usr/local/cuda/lib64/libcudart.so.13", &st) != 0 &&
	    stat(kvt_path("workloads/rt-probe-real"), &st) != 0) {
		fprintf(stderr, "  (no toolkit libcudart.so.13: skipped)\n");
		return;
	}
	struct kvt_child c;
	const char *argv[] = { kvt_path("workloads/rt-probe-real"), NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env_fake()), 0);
	char want[600];
	snprintf(want, sizeof want, "RUNTIME %s\n", kvt_path("fakecuda/libcudart.so.13"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, want));
	check_probe_output(&c);
}

/* No libcuda.so.1 reachable: 35 everywhere, outputs untouched. */
static void test_rt_no_driver(void)
{
	void *real = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (real) {                       /* a real driver is installed */
		dlclose(real);
		fprintf(stderr, "  (a libcuda.so.1 is installed: no-driver case skipped)\n");
		return;
	}
	char dir[] = "/tmp/kvt-nodrv-XXXXXX", link[700], rtpath[600], env_ld[700];
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(kvt_path("fakecuda/libcudart.so.13"), rtpath));
	snprintf(link, sizeof link, "%s/libcudart.so.13", dir);
	CU_ASSERT_EQUAL_FATAL(symlink(rtpath, link), 0);
	snprintf(env_ld, sizeof env_ld, "LD_LIBRARY_PATH=%s", dir);
	const char *env[] = { env_ld, NULL };
	const char *argv[] = { kvt_path("workloads/rt-probe"), "nodriver", NULL };
	struct kvt_child c;
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	unlink(link);
	rmdir(dir);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	static const struct probe_expect nd[] = {
		{ "nd.cudaGetDeviceCount", 35, -7 },
		{ "nd.cudaMalloc", 35, 0x5a5a },
		{ "nd.cudaMallocManaged", 35, 0x5a5a },
		{ "nd.cudaMallocHost", 35, 0x5a5a },
		{ "nd.cudaHostAlloc", 35, 0x5a5a },
		{ "nd.cudaMemGetInfo", 35, 154 },
		{ "nd.cudaStreamCreate", 35, 0x77 },
		{ "nd.cudaGetDevice", 35, -7 },
		{ "nd.cudaMemPrefetchAsync", 35, 0 },
		{ "nd.cudaGetDriverEntryPointByVersion", 35, 0x5a5a + 7 },
		{ "nd.cudaGetLastError", 35, 0 },
		{ "nd.cudaDriverGetVersion", 0, 0 },
		{ "nd.cudaRuntimeGetVersion", 0, 13000 },
	};
	for (size_t i = 0; i < sizeof nd / sizeof nd[0]; i++) {
		long long rc = -1, val = -1;
		CU_ASSERT_TRUE(probe_get(c.out, nd[i].name, &rc, &val));
		CU_ASSERT_EQUAL(rc, nd[i].rc);
		CU_ASSERT_EQUAL(val, nd[i].val);
	}
}

/* The production path: dlopen, one dlsym, the bootstrap lookups, then
 * everything through the pointer returned for cuGetProcAddress@12000. */
static void test_rt_resolution_path(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* the sanitizer runtime resolves its interceptors through dlsym during
	 * its own init; a dlsym-wrapping test preload spins there. The plain
	 * build covers this path. */
	fprintf(stderr, "  (sanitizer build: resolution trace skipped)\n");
	return;
#endif
	char pre[700];
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s", kvt_path("workloads/librt-trace.so"));
	const char *const *fe = env_fake();
	const char *env[] = { fe[0], fe[1], pre, NULL };
	const char *argv[] = { kvt_path("workloads/rt-probe"), NULL };
	static struct kvt_child c;
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	const char *boot =
		"TRACE dlopen libcuda.so.1 2\n"
		"TRACE dlsym cuGetProcAddress_v2\n"
		"TRACE gpa dlsym '' 0 0 null\n"
		"TRACE gpa dlsym 'cuInit' 2000 0 null\n"
		"TRACE gpa dlsym 'cuGetProcAddress' 11030 0 null\n"
		"TRACE gpa dlsym 'cuGetProcAddress' 12000 0 null\n";
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, boot));
	static const char *const via_returned[] = {
		"'cuMemAlloc' 3020 0 null", "'cuMemFree' 3020 0 null",
		"'cuMemAllocManaged' 6000 0 null", "'cuMemHostAlloc' 2020 0 null",
		"'cuMemFreeHost' 2000 0 null", "'cuMemHostRegister' 6050 0 null",
		"'cuMemAllocAsync' 11020 0 null", "'cuMemAllocAsync' 11020 2 null",
		"'cuMemFreeAsync' 11020 0 null", "'cuMemAllocFromPoolAsync' 11020 0 null",
		"'cuMemAdvise' 12020 0 null", "'cuMemPrefetchAsync' 12020 0 null",
		"'cuMemPrefetchAsync' 12020 2 null", "'cuMemRangeGetAttribute' 8000 0 null",
		"'cuMemGetInfo' 3020 0 null", "'cuMemcpy' 4000 0 null",
		"'cuMemcpyAsync' 4000 0 null", "'cuMemcpyAsync' 4000 2 null",
		"'cuMemsetD8' 3020 0 null", "'cuMemsetD8Async' 3020 0 null",
		"'cuLaunchKernel' 4000 0 null",
		/* the application's own lookup, with its status pointer */
		"'cuLaunchKernel' 12000 0 status",
	};
	for (size_t i = 0; i < sizeof via_returned / sizeof via_returned[0]; i++) {
		char line[200];
		snprintf(line, sizeof line, "TRACE gpa returned %s\n", via_returned[i]);
		if (!strstr(c.err, line))
			fprintf(stderr, "  missing: %s", line);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.err, line));
	}
	/* exactly one dlsym of a cu* name by the runtime (the probe's own
	 * identity check looks up cuMemAlloc_v2) and 4 lookups through it */
	int dlsym_cu = 0, gpa_direct = 0;
	for (const char *p = c.err; (p = strstr(p, "TRACE ")); p++) {
		dlsym_cu += !strncmp(p, "TRACE dlsym cu", 14) &&
			    strncmp(p, "TRACE dlsym cuMemAlloc_v2\n", 26);
		gpa_direct += !strncmp(p, "TRACE gpa dlsym ", 16);
	}
	CU_ASSERT_EQUAL(dlsym_cu, 1);
	CU_ASSERT_EQUAL(gpa_direct, 4);
}

/* Exports live under the version node libcudart.so.13, nothing else leaks. */
static void test_rt_version_node(void)
{
	void *h = dlopen(kvt_path("fakecuda/libcudart.so.13"), RTLD_LAZY | RTLD_LOCAL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	static const char *const names[] = {
		"cudaMalloc", "cudaFree", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost",
		"cudaMallocManaged", "cudaMallocAsync", "cudaMallocAsync_ptsz", "cudaFreeAsync",
		"cudaFreeAsync_ptsz", "cudaMallocFromPoolAsync", "cudaMallocPitch",
		"cudaHostRegister", "cudaHostUnregister", "cudaMemcpy", "cudaMemcpyAsync",
		"cudaMemcpyAsync_ptsz", "cudaMemset", "cudaMemsetAsync", "cudaMemsetAsync_ptsz",
		"cudaMemGetInfo", "cudaMemAdvise", "cudaMemPrefetchAsync",
		"cudaMemRangeGetAttribute", "cudaPointerGetAttributes", "cudaStreamCreate",
		"cudaStreamCreateWithPriority", "cudaStreamDestroy", "cudaStreamSynchronize",
		"cudaDeviceSynchronize", "cudaGetDeviceCount", "cudaSetDevice", "cudaGetDevice",
		"cudaDeviceGetAttribute", "cudaDriverGetVersion", "cudaRuntimeGetVersion",
		"cudaGetErrorString", "cudaGetErrorName", "cudaGetLastError",
		"cudaPeekAtLastError", "cudaGetDriverEntryPoint", "cudaGetDriverEntryPoint_ptsz",
		"cudaGetDriverEntryPointByVersion", "cudaGetDriverEntryPointByVersion_ptsz",
		"cudaLaunchKernel",
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		void *p = dlvsym(h, names[i], "libcudart.so.13");
		if (!p)
			fprintf(stderr, "  %s@libcudart.so.13 missing\n", names[i]);
		CU_ASSERT_PTR_NOT_NULL(p);
		CU_ASSERT_PTR_NULL(dlvsym(h, names[i], "libcudart.so.12"));
	}
	CU_ASSERT_PTR_NULL(dlsym(h, "rt_enter"));          /* internals hidden */
	CU_ASSERT_PTR_NULL(dlsym(h, "rt_drv"));
	dlclose(h);
	/* every defined dynamic symbol is cuda* (plus the version node itself) */
	char cmd[700];
	snprintf(cmd, sizeof cmd, "readelf --dyn-syms -W %s", kvt_path("fakecuda/libcudart.so.13"));
	FILE *f = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	char line[512];
	int defined = 0, foreign = 0;
	while (fgets(line, sizeof line, f)) {
		char num[16], val[32], size[16], type[16], bind[16], vis[16], ndx[16], name[256];
		if (sscanf(line, "%15s %31s %15s %15s %15s %15s %15s %255s", num, val, size, type,
			   bind, vis, ndx, name) != 8 || !strcmp(ndx, "UND") || strcmp(bind, "GLOBAL"))
			continue;
		if (!strncmp(name, "libcudart.so.13", 15))
			continue;
		defined++;
		foreign += strncmp(name, "cuda", 4) != 0 || !strstr(name, "@@libcudart.so.13");
	}
	pclose(f);
	CU_ASSERT(defined >= (int)(sizeof names / sizeof names[0]));
	CU_ASSERT_EQUAL(foreign, 0);
}

/* ---- the workloads ---- */

static struct kvt_child wl_out;

static int run_wl(const char *name, const char *const *args)
{
	const char *argv[24];
	int n = 0;
	argv[n++] = kvt_path(name);
	argv[n++] = "--quiet";
	for (int i = 0; args && args[i] && n < 23; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	const char *const *fe = env_fake();
	const char *env[] = { fe[0], "FAKECUDA_DEVICE_BYTES=", NULL };   /* workload default */
	if (kvt_run(&wl_out, argv, env) != 0)
		return -1;
	return wl_out.exit_code;
}

static void check_sane(const char *o, const char *mode)
{
	CU_ASSERT_STRING_EQUAL(kv_get(o, "result"), "ok");
	CU_ASSERT_STRING_EQUAL(kv_get(o, "simulated"), "1");
	CU_ASSERT_STRING_EQUAL(kv_get(o, "mode"), mode);
	CU_ASSERT_EQUAL(kv_num(o, "corrupt"), 0);
	CU_ASSERT(kv_num(o, "verified") > 100);
	CU_ASSERT(kv_num(o, "tokens") >= kv_num(o, "steps"));
	CU_ASSERT(kv_num(o, "tokens_per_s") > 0);
	CU_ASSERT(kv_num(o, "virtual_ns") > 0);
	CU_ASSERT_EQUAL(kv_num(o, "launches"), kv_num(o, "steps") * kv_num(o, "layers"));
	CU_ASSERT(kv_num(o, "bytes_weights") > 0);
	CU_ASSERT(kv_num(o, "bytes_kv") > 0);
	CU_ASSERT(kv_num(o, "bytes_hbm") > 0);
	CU_ASSERT_EQUAL(kv_num(o, "device_bytes"), 512.0 * 1024 * 1024);
	CU_ASSERT_EQUAL(kv_num(o, "kv_allocations_identical"), 1);
	CU_ASSERT(kv_num(o, "window_kv_chunks") > 0);
	CU_ASSERT(kv_num(o, "window_new_kv_chunks") <= kv_num(o, "window_kv_chunks"));
}

static void test_wl_vllm(void)
{
	const char *args[] = { "--steps", "4", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/vllm-like", args), 0);
	const char *o = wl_out.out;
	check_sane(o, "native");
	CU_ASSERT_EQUAL(kv_num(o, "kv_allocations"), kv_num(o, "layers"));   /* L identical */
	CU_ASSERT(kv_num(o, "bytes_activations") > 0);                        /* the trough */
	CU_ASSERT_EQUAL((uint64_t)kv_num(o, "kv_allocation_bytes") % (2u << 20), 0);
	/* at 1x the KV is the budget: it fits and nothing migrates */
	CU_ASSERT_EQUAL(kv_num(o, "faults"), 0);
	CU_ASSERT_EQUAL(kv_num(o, "bytes_htod"), 0);
	/* with no warm-up every chunk the window uses is new to it; a long
	 * warm-up over the same popular sessions leaves fewer new ones */
	const char *cold[] = { "--steps", "4", "--warmup", "0", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/vllm-like", cold), 0);
	double all = kv_num(wl_out.out, "window_kv_chunks");
	CU_ASSERT(all > 0);
	CU_ASSERT_EQUAL(kv_num(wl_out.out, "window_new_kv_chunks"), all);
	const char *warm[] = { "--steps", "4", "--warmup", "64", "--zipf", "2.5", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/vllm-like", warm), 0);
	CU_ASSERT(kv_num(wl_out.out, "window_new_kv_chunks") <
		  kv_num(wl_out.out, "window_kv_chunks"));
	/* --cache-bound: Belady never misses more than LRU or FIFO; a cache that
	 * holds every chunk misses exactly the chunks new to the window */
	const char *small[] = { "--steps", "16", "--warmup", "32", "--zipf", "2.5",
				"--kv-over-hbm", "2", "--mode", "uvm", "--cache-bound", "24", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/vllm-like", small), 0);
	o = wl_out.out;
	CU_ASSERT_EQUAL(kv_num(o, "cache_bound_chunks"), 24);
	CU_ASSERT(kv_num(o, "window_misses_opt") <= kv_num(o, "window_misses_lru"));
	CU_ASSERT(kv_num(o, "window_misses_opt") <= kv_num(o, "window_misses_fifo"));
	CU_ASSERT(kv_num(o, "window_misses_lru") > kv_num(o, "window_new_kv_chunks"));
	CU_ASSERT(kv_num(o, "window_misses_fifo") > kv_num(o, "window_new_kv_chunks"));
	const char *every[] = { "--steps", "16", "--warmup", "2", "--zipf", "2.5",
				"--kv-over-hbm", "2", "--mode", "uvm", "--cache-bound", "100000", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/vllm-like", every), 0);
	o = wl_out.out;
	CU_ASSERT_EQUAL(kv_num(o, "window_misses_lru"), kv_num(o, "window_new_kv_chunks"));
	CU_ASSERT_EQUAL(kv_num(o, "window_misses_fifo"), kv_num(o, "window_new_kv_chunks"));
	CU_ASSERT_EQUAL(kv_num(o, "window_misses_opt"), kv_num(o, "window_new_kv_chunks"));
	CU_ASSERT(kv_num(o, "window_new_kv_chunks") > 0);
}

static void test_wl_sglang(void)
{
	const char *args[] = { "--steps", "4", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/sglang-like", args), 0);
	const char *o = wl_out.out;
	check_sane(o, "native");
	CU_ASSERT_EQUAL(kv_num(o, "kv_allocations"), 2 * kv_num(o, "layers"));  /* 2L */
	CU_ASSERT(kv_num(o, "bytes_host_pool") >= 2 * kv_num(o, "bytes_kv") * 0.9);
	CU_ASSERT(kv_num(o, "host_copies_dtoh") > 0);      /* completions backed up */
	CU_ASSERT(kv_num(o, "host_bytes_copied") > 0);
}

static void test_wl_llamacpp(void)
{
	const char *args[] = { "--steps", "4", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/llamacpp-like", args), 0);
	const char *o = wl_out.out;
	check_sane(o, "native");
	CU_ASSERT_EQUAL(kv_num(o, "kv_allocations"), 1);
	CU_ASSERT_EQUAL(kv_num(o, "bytes_pinned"), 4.0 * 1024 * 1024);   /* 4 x 1 MiB staging */
	CU_ASSERT_EQUAL(kv_num(o, "bytes_mmap"), kv_num(o, "bytes_weights"));
	CU_ASSERT(kv_num(o, "bytes_compute") > 0);
}

/* At 2x, fault-driven UVM moves more than the oracle and is slower. */
static void test_wl_uvm_vs_oracle(void)
{
	const char *uvm[] = { "--mode", "uvm", "--kv-over-hbm", "2", "--steps", "2", "--warmup",
			      "1", NULL };
	const char *orc[] = { "--mode", "oracle", "--kv-over-hbm", "2", "--steps", "2", "--warmup",
			      "1", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/llamacpp-like", uvm), 0);
	static char u[sizeof wl_out.out];
	snprintf(u, sizeof u, "%s", wl_out.out);
	check_sane(u, "uvm");
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/llamacpp-like", orc), 0);
	const char *o = wl_out.out;
	check_sane(o, "oracle");
	CU_ASSERT(kv_num(u, "bytes_htod") > kv_num(o, "bytes_htod"));
	CU_ASSERT(kv_num(u, "bytes_htod") + kv_num(u, "bytes_dtoh") >
		  2 * (kv_num(o, "bytes_htod") + kv_num(o, "bytes_dtoh")));
	CU_ASSERT(kv_num(u, "faults") > 0);
	CU_ASSERT_EQUAL(kv_num(o, "faults"), 0);
	CU_ASSERT(kv_num(u, "tokens_per_s") < kv_num(o, "tokens_per_s"));
	CU_ASSERT_EQUAL(kv_num(u, "tokens"), kv_num(o, "tokens"));   /* same schedule */
	CU_ASSERT(kv_num(u, "kv_over_device") > 1.0);
}

static void test_wl_native_oom(void)
{
	const char *args[] = { "--mode", "native", "--kv-over-hbm", "2", NULL };
	CU_ASSERT_EQUAL(run_wl("workloads/vllm-like", args), 3);
	CU_ASSERT_PTR_NOT_NULL(strstr(wl_out.err, "out of memory"));
	CU_ASSERT_PTR_NOT_NULL(strstr(wl_out.err, "cudaErrorMemoryAllocation"));
	CU_ASSERT_STRING_EQUAL(kv_get(wl_out.out, "result"), "oom");
}

static void key_lines(const char *out, char *dst, size_t len)
{
	const char *end = strstr(out, "\n\n---");           /* human block: has wall time */
	size_t n = end ? (size_t)(end - out) : strlen(out);
	snprintf(dst, len, "%.*s", (int)n, out);
}

static void test_wl_deterministic(void)
{
	static char a[8192], b[8192];
	const char *s5[] = { "--mode", "uvm", "--kv-over-hbm", "1.5", "--steps", "2", "--warmup",
			     "1", "--seed", "5", NULL };
	const char *s6[] = { "--mode", "uvm", "--kv-over-hbm", "1.5", "--steps", "2", "--warmup",
			     "1", "--seed", "6", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/sglang-like", s5), 0);
	key_lines(wl_out.out, a, sizeof a);
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/sglang-like", s5), 0);
	key_lines(wl_out.out, b, sizeof b);
	CU_ASSERT_STRING_EQUAL(a, b);
	CU_ASSERT(strlen(a) > 500);
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/sglang-like", s6), 0);
	key_lines(wl_out.out, b, sizeof b);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
}

/* The verifier catches a damaged KV stamp. */
static void test_wl_detects_corruption(void)
{
	const char *args[] = { "--steps", "2", "--inject-corruption", NULL };
	CU_ASSERT_EQUAL(run_wl("workloads/llamacpp-like", args), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(wl_out.err, "CORRUPTION: KV region 0"));
	CU_ASSERT_EQUAL(kv_num(wl_out.out, "corrupt"), 1);
	CU_ASSERT_STRING_EQUAL(kv_get(wl_out.out, "result"), "corrupt");
}

static void test_wl_usage(void)
{
	const char *bad[] = { "--mode", "bogus", NULL };
	CU_ASSERT_EQUAL(run_wl("workloads/vllm-like", bad), 2);
	const char *help[] = { "--help", NULL };
	CU_ASSERT_EQUAL(run_wl("workloads/sglang-like", help), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(wl_out.out, "--kv-over-hbm"));
	CU_ASSERT_PTR_NOT_NULL(strstr(wl_out.out, "--zipf"));
}

/* --graphs: each launch shape captured once and replayed from a graph; the
 * simulation is the same (the stand-in charges a replay as the launch), only
 * the path the kernels take to the driver differs. */
static void test_wl_graphs(void)
{
	const char *eager[] = { "--steps", "8", "--warmup", "4", "--kv-over-hbm", "2",
				"--mode", "uvm", NULL };
	const char *graphs[] = { "--steps", "8", "--warmup", "4", "--kv-over-hbm", "2",
				 "--mode", "uvm", "--graphs", NULL };
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/sglang-like", eager), 0);
	static char e[sizeof wl_out.out];
	memcpy(e, wl_out.out, sizeof e);
	CU_ASSERT_EQUAL(kv_num(e, "graph_launches"), 0);
	CU_ASSERT_EQUAL(kv_num(e, "graphs"), 0);
	CU_ASSERT_EQUAL_FATAL(run_wl("workloads/sglang-like", graphs), 0);
	const char *g = wl_out.out;
	CU_ASSERT_EQUAL(kv_num(g, "corrupt"), 0);
	CU_ASSERT(kv_num(g, "graphs") >= 1);
	CU_ASSERT(kv_num(g, "graph_launches") >= kv_num(g, "steps") * kv_num(g, "layers"));
	CU_ASSERT_EQUAL(kv_num(g, "virtual_ns"), kv_num(e, "virtual_ns"));
	CU_ASSERT_EQUAL(kv_num(g, "faults"), kv_num(e, "faults"));
	CU_ASSERT_EQUAL(kv_num(g, "bytes_hbm"), kv_num(e, "bytes_hbm"));
	CU_ASSERT_EQUAL(kv_num(g, "tokens"), kv_num(e, "tokens"));
}

/* --tables device (the default) and host decode the same rows: the same
 * tokens, the same KV bytes read in HBM (plus the tables' own reads, a
 * few KiB a step), and the uploaded tables cross the link; graphs replay
 * the device-table kernels with the same figures. */
static void test_wl_tables(void)
{
	const char *dev[] = { "--steps", "6", "--warmup", "2", NULL };
	const char *host[] = { "--steps", "6", "--warmup", "2", "--tables", "host", NULL };
	const char *graphs[] = { "--steps", "6", "--warmup", "2", "--graphs", NULL };
	static char d[sizeof wl_out.out], h[sizeof wl_out.out];
	const char *wls[] = { "workloads/vllm-like", "workloads/sglang-like",
			      "workloads/llamacpp-like" };
	for (size_t i = 0; i < sizeof wls / sizeof wls[0]; i++) {
		CU_ASSERT_EQUAL_FATAL(run_wl(wls[i], dev), 0);
		memcpy(d, wl_out.out, sizeof d);
		CU_ASSERT_EQUAL_FATAL(run_wl(wls[i], host), 0);
		memcpy(h, wl_out.out, sizeof h);
		check_sane(d, "native");
		check_sane(h, "native");
		CU_ASSERT_STRING_EQUAL(kv_get(d, "tables"), "device");
		CU_ASSERT_STRING_EQUAL(kv_get(h, "tables"), "host");
		CU_ASSERT_EQUAL(kv_num(d, "tokens"), kv_num(h, "tokens"));
		CU_ASSERT(kv_num(d, "bytes_tables") > 0);
		CU_ASSERT_EQUAL(kv_num(h, "bytes_tables"), 0);
		CU_ASSERT(kv_num(d, "bytes_hbm") >= kv_num(h, "bytes_hbm"));
		CU_ASSERT(kv_num(d, "bytes_hbm") <= kv_num(h, "bytes_hbm") * 1.01);
		CU_ASSERT_EQUAL(kv_num(d, "bytes_remote") - kv_num(h, "bytes_remote"),
				kv_num(d, "bytes_tables"));
		CU_ASSERT_EQUAL_FATAL(run_wl(wls[i], graphs), 0);
		const char *g = wl_out.out;
		CU_ASSERT_STRING_EQUAL(kv_get(g, "tables"), "device");
		CU_ASSERT(kv_num(g, "graph_launches") >= kv_num(g, "steps") * kv_num(g, "layers"));
		CU_ASSERT_EQUAL(kv_num(g, "bytes_hbm"), kv_num(d, "bytes_hbm"));
		CU_ASSERT_EQUAL(kv_num(g, "virtual_ns"), kv_num(d, "virtual_ns"));
	}
	const char *bad[] = { "--tables", "pinned", NULL };
	CU_ASSERT_EQUAL(run_wl("workloads/vllm-like", bad), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(wl_out.err, "--tables must be device or host"));
}

static CU_TestInfo tests_runtime[] = {
	{ "every export round-trips through the stand-in driver", test_rt_roundtrip },
	{ "binary linked to the real libcudart runs on the stand-in", test_rt_real_linked_binary },
	{ "no driver: 35 and outputs unwritten", test_rt_no_driver },
	{ "driver reached through dlopen + cuGetProcAddress_v2", test_rt_resolution_path },
	{ "exports under the libcudart.so.13 version node", test_rt_version_node },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo tests_workloads[] = {
	{ "vllm-like runs, verifies, L identical KV tensors", test_wl_vllm },
	{ "block tables in device memory (default) and --tables host: same rows", test_wl_tables },
	{ "sglang-like runs, verifies, 2L buffers + host pool", test_wl_sglang },
	{ "llamacpp-like runs, verifies, one KV buffer + staging", test_wl_llamacpp },
	{ "uvm moves more than oracle at 2x", test_wl_uvm_vs_oracle },
	{ "native at 2x fails cleanly with OOM", test_wl_native_oom },
	{ "same seed, same output; other seed differs", test_wl_deterministic },
	{ "the data verifier catches a damaged stamp", test_wl_detects_corruption },
	{ "usage errors and --help", test_wl_usage },
	{ "--graphs: replayed from graphs, the same simulation", test_wl_graphs },
	CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
	{ "fakecudart", NULL, NULL, NULL, NULL, tests_runtime },
	{ "workloads", NULL, NULL, NULL, NULL, tests_workloads },
	CU_SUITE_INFO_NULL,
};

int main(void)
{
	return kvt_test_main(suites);
}
