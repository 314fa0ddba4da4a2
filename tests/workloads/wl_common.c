/* SPDX-License-Identifier: MIT */
/* kvtier workloads: the shared driver of every workload program — options,
 * CUDA helpers, allocation bookkeeping by kind, data patterns, the run
 * sequence (setup -> stamp -> decode -> verify) and the report.
 * Test infrastructure: stdio and exit() are fine here. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wl.h"

static const char *const wl_kinds[] = {
	"weights", "activations", "kv", "pinned", "mmap", "host_pool", "compute", "other",
};
#define WL_NR_KINDS (sizeof wl_kinds / sizeof wl_kinds[0])

static const char *wl_prog = "workload";

/* ---- messages ------------------------------------------------------------- */

void wl_set_prog(const char *name)
{
	wl_prog = name;
}

void wl_die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", wl_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(WL_EXIT_FAIL);
}

void wl_log(const struct wl *w, const char *fmt, ...)
{
	if (w->o.quiet)
		return;
	va_list ap;
	fprintf(stderr, "%s: ", wl_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void wl_check(cudaError_t err, const char *what, const char *file, int line)
{
	if (err != cudaSuccess)
		wl_die("%s failed: %s (%d) at %s:%d", what, cudaGetErrorName(err), (int)err,
		       file, line);
}

/* ---- sizes and allocation bookkeeping ---------------------------------------- */

uint64_t wl_round_up(uint64_t x, uint64_t to)
{
	return (x + to - 1) / to * to;
}

/* Device segments as PyTorch's caching allocator asks for them (large pool:
 * a multiple of 2 MiB); the small-pool 2/20 MiB segments are not modelled. */
uint64_t wl_torch_round(uint64_t bytes)
{
	return wl_round_up(bytes ? bytes : 1, WL_CHUNK);
}

void wl_count_bytes(struct wl *w, const char *kind, uint64_t bytes)
{
	for (size_t i = 0; i < WL_NR_KINDS; i++)
		if (!strcmp(kind, wl_kinds[i])) {
			w->bytes_by_kind[i] += bytes;
			return;
		}
	w->bytes_by_kind[WL_NR_KINDS - 1] += bytes;
}

static void wl_record(struct wl *w, void *p, size_t bytes, const char *kind, bool managed)
{
	if (w->nr_allocs >= WL_MAX_ALLOCS)
		wl_die("too many allocations (max %d)", WL_MAX_ALLOCS);
	w->allocs[w->nr_allocs++] = (struct wl_alloc){ p, bytes, kind, managed };
	wl_count_bytes(w, kind, bytes);
}

cudaError_t wl_malloc(struct wl *w, void **p, size_t bytes, const char *kind)
{
	cudaError_t err = cudaMalloc(p, bytes);
	if (err == cudaSuccess)
		wl_record(w, *p, bytes, kind, false);
	return err;
}

/* The KV cache: cudaMalloc natively, managed memory for the UVM baselines. */
cudaError_t wl_malloc_kv(struct wl *w, void **p, size_t bytes)
{
	if (w->o.mode == WL_MODE_NATIVE)
		return wl_malloc(w, p, bytes, "kv");
	cudaError_t err = cudaMallocManaged(p, bytes, cudaMemAttachGlobal);
	if (err != cudaSuccess)
		return err;
	wl_record(w, *p, bytes, "kv", true);
	if (w->o.mode == WL_MODE_ORACLE) {
		/* Home on the host, mapped for the GPU: what is not prefetched is
		 * read over the link instead of faulting (kvtier's own placement). */
		struct cudaMemLocation host = { .type = cudaMemLocationTypeHost, .id = 0 };
		struct cudaMemLocation dev = { .type = cudaMemLocationTypeDevice, .id = 0 };
		WL_CK(cudaMemAdvise(*p, bytes, cudaMemAdviseSetPreferredLocation, host));
		WL_CK(cudaMemAdvise(*p, bytes, cudaMemAdviseSetAccessedBy, dev));
	}
	return cudaSuccess;
}

void wl_free(struct wl *w, void *p)
{
	WL_CK(cudaFree(p));
	for (int i = 0; i < w->nr_allocs; i++)
		if (w->allocs[i].ptr == p) {
			w->allocs[i] = w->allocs[--w->nr_allocs];
			return;
		}
}

int wl_oom(struct wl *w, const char *what, size_t bytes, cudaError_t err)
{
	size_t free_b = 0, total = 0;
	cudaGetLastError();
	cudaMemGetInfo(&free_b, &total);
	fprintf(stderr,
		"%s: out of memory: %s of %zu MiB failed: %s (%d); %zu MiB free of %zu MiB "
		"(kv_over_hbm=%.2f, mode=%s)\n",
		wl_prog, what, bytes >> 20, cudaGetErrorName(err), (int)err, free_b >> 20,
		total >> 20, w->o.kv_over_hbm,
		w->o.mode == WL_MODE_NATIVE ? "native" : "managed");
	printf("workload=%s\nresult=oom\n", w->ops->name);
	return WL_EXIT_OOM;
}

/* ---- data patterns ------------------------------------------------------------- */

static uint64_t wl_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Bytes [off, off+n) of the pattern named (seed, tag). */
void wl_pattern(uint64_t seed, uint64_t tag, uint64_t off, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t word = wl_mix(seed ^ wl_mix(tag) ^ ((off + i) >> 3));
		out[i] = (unsigned char)(word >> (8 * ((off + i) & 7)));
	}
}

void wl_load_pattern(struct wl *w, char *dev, size_t bytes, uint64_t tag, void *staging,
		     size_t staging_bytes, bool async)
{
	for (size_t off = 0; off < bytes; off += staging_bytes) {
		size_t n = bytes - off < staging_bytes ? bytes - off : staging_bytes;
		wl_pattern(w->o.seed, tag, off, staging, n);
		if (async) {
			WL_CK(cudaMemcpyAsync(dev + off, staging, n, cudaMemcpyHostToDevice,
					      w->stream));
			WL_CK(cudaStreamSynchronize(w->stream));
		} else {
			WL_CK(cudaMemcpy(dev + off, staging, n, cudaMemcpyHostToDevice));
		}
	}
}

/* Read back 16 samples of 256 bytes spread over the range. */
uint64_t wl_verify_pattern(struct wl *w, const char *dev, size_t bytes, uint64_t tag)
{
	unsigned char got[256], want[256];
	uint64_t bad = 0;
	for (int i = 0; i < 16; i++) {
		size_t off = (bytes / 16) * (size_t)i;
		size_t n = bytes - off < sizeof got ? bytes - off : sizeof got;
		if (!n)
			continue;
		WL_CK(cudaMemcpy(got, dev + off, n, cudaMemcpyDeviceToHost));
		wl_pattern(w->o.seed, tag, off, want, n);
		if (memcmp(got, want, n)) {
			if (bad++ < 4)
				fprintf(stderr, "%s: CORRUPTION: pattern %" PRIu64
					" at +%zu differs\n", wl_prog, tag, off);
		}
	}
	return bad;
}

/* ---- the GPU "kernel" ----------------------------------------------------------------- */

static void wl_touch_launch(struct wl *w, const void *key, unsigned n)
{
	const struct fakecuda_range *r = key;
	const struct fakecuda_range *rp = r;
	unsigned nr = n;
	void *args[] = { &rp, &nr };
	CUresult res = w->launch(w->fake.touch_kernel(), 1, 1, 1, 1, 1, 1, 0,
				 (CUstream)w->stream, args, NULL);
	if (res != CUDA_SUCCESS)
		wl_die("cuLaunchKernel(touch) failed: CUresult %d", (int)res);
}

/* --graphs: launch(w, key, n) captured once into a graph as a server
 * captures its decode steps (the graph destroyed once instantiated, as
 * PyTorch does), and replayed; the kernel reads the ranges behind key as
 * they are at each replay. Past WL_MAX_GRAPHS shapes, launched directly. */
void wl_launch_maybe_graph(struct wl *w, const void *key, unsigned n, wl_launch_fn launch)
{
	cudaGraphExec_t exec = NULL;
	for (int i = 0; w->o.graphs && !exec && i < w->nr_graphs; i++)
		if (w->graphs[i].r == key && w->graphs[i].n == n)
			exec = w->graphs[i].exec;
	if (w->o.graphs && !exec && w->nr_graphs < WL_MAX_GRAPHS) {
		cudaGraph_t g;
		WL_CK(cudaStreamBeginCapture(w->stream, cudaStreamCaptureModeGlobal));
		launch(w, key, n);
		WL_CK(cudaStreamEndCapture(w->stream, &g));
		WL_CK(cudaGraphInstantiate(&exec, g, 0));
		WL_CK(cudaGraphDestroy(g));
		w->graphs[w->nr_graphs++] = (struct wl_graph){ key, n, exec };
	}
	if (!exec) {
		launch(w, key, n);
		return;
	}
	WL_CK(cudaGraphLaunch(exec, w->stream));
	w->graph_launches++;
}

void wl_touch(struct wl *w, const struct fakecuda_range *r, unsigned n)
{
	if (!w->fake.touch_kernel || !n)
		return;
	wl_launch_maybe_graph(w, r, n, wl_touch_launch);
}

/* ---- options --------------------------------------------------------------------------- */

static int wl_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	double mul = 1;
	switch (*end) {
	case 'k': case 'K': mul = 1024.0; end++; break;
	case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
	case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
	case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
	}
	if (*end == 'i')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	*out = (uint64_t)(v * mul);
	return 0;
}

static void wl_defaults(struct wl_opts *o)
{
	*o = (struct wl_opts){
		.layers = 4, .kv_over_hbm = 1.0, .device_bytes = 512ull << 20,
		.row_bytes = 2048, .ctx_min = 512, .ctx_max = 2048, .decode_min = 4,
		.decode_max = 16, .zipf = 1.0, .prefix_tokens = 512, .prefix_share = 0.5,
		.active_frac = 0.5, .drift_every = 4, .steps = 16, .warmup = 2, .oracle_window = 0,
		.weights_frac = 0.25, .act_frac = 0.08, .host_ratio = 2.0, .seed = 1,
		.mode = WL_MODE_NATIVE,
	};
}

static void wl_usage(const struct wl_ops *ops, FILE *f)
{
	struct wl_opts d;
	wl_defaults(&d);
	fprintf(f,
"usage: %s [options]\n"
"  %s\n"
"  Replays the server's allocation life through the CUDA runtime, then runs a\n"
"  decode loop on the SIMULATED GPU (tests/fakecuda; every figure is simulated).\n"
"\n"
"  --mode native|uvm|oracle  KV in cudaMalloc (fails cleanly when it does not fit),\n"
"                        in fault-driven managed memory, or managed with a\n"
"                        prefetching oracle that knows the future      [native]\n"
"  --kv-over-hbm X       KV = X times the KV budget the server would size from\n"
"                        cudaMemGetInfo (1 = exactly what fits)            [%.1f]\n"
"  --kv-bytes N          KV size in bytes (K/M/G), overrides --kv-over-hbm\n"
"  --device-bytes N      simulated device capacity (sets FAKECUDA_DEVICE_BYTES\n"
"                        unless it is set already)                      [%" PRIu64 "M]\n"
"  --layers L            transformer layers                               [%d]\n"
"  --row-bytes N         KV bytes per token per layer, for K and for V    [%u]\n"
"  --seqs N              cached sessions (0: as many as the KV pool holds) [0]\n"
"  --ctx-min/--ctx-max N cached context per session, tokens          [%d/%d]\n"
"  --decode-min/--decode-max N  tokens decoded per request           [%d/%d]\n"
"  --batch N             concurrent requests (0: --active-frac of sessions) [0]\n"
"  --active-frac F       share of sessions decoding at once              [%.2f]\n"
"  --zipf S              popularity skew over sessions for arrivals      [%.2f]\n"
"  --prefix-tokens N     shared prefix (system prompt) tokens              [%d]\n"
"  --prefix-share F      share of sessions that read the prefix          [%.2f]\n"
"  --drift-every N       steps between popularity shifts (0: never)        [%d]\n"
"  --steps N             timed decode steps                               [%d]\n"
"  --warmup N            untimed decode steps before them                  [%d]\n"
"  --oracle-window N     steps of the future the oracle plans for (0: all) [%d]\n"
"  --cache-bound C       replay the schedule's KV chunk uses through an LRU, a\n"
"                        FIFO and an OPT (Belady) cache of C 2 MiB chunks,\n"
"                        demand-filled:\n"
"                        window misses of each (0: none)                   [%d]\n"
"  --weights-frac F      weights as a fraction of the device             [%.2f]\n"
"  --act-frac F          profiling activations / compute buffer fraction [%.2f]\n"
"  --host-ratio F        sglang-like: pinned host pool / device KV       [%.1f]\n"
"  --seed N              everything is deterministic given the seed        [%" PRIu64 "]\n"
"  --graphs              launch the decode kernels from CUDA graphs, each shape\n"
"                        captured once and replayed (simulated GPU)\n"
"  --tables device|host  device: each step uploads int32 block tables and\n"
"                        lengths to device memory and each layer's kernel gets\n"
"                        the K/V bases and the table's device pointer, as\n"
"                        servers do; host: the kernel gets a host array of\n"
"                        exact row ranges (the older, too generous path) [device]\n"
"  --quiet               no progress lines on stderr\n"
"  --inject-corruption   (test of the verifier) damage one KV stamp after prefill\n"
"\n"
"  Output: key=value lines, then a short human summary.  Exit: 0 ok, 1 error or\n"
"  data corruption, 2 usage, 3 out of memory (native KV does not fit),\n"
"  77 no simulated GPU (allocation phase done, decode skipped).\n",
		ops->name, ops->summary, d.kv_over_hbm, d.device_bytes >> 20, d.layers,
		d.row_bytes, d.ctx_min, d.ctx_max, d.decode_min, d.decode_max, d.active_frac,
		d.zipf, d.prefix_tokens, d.prefix_share, d.drift_every, d.steps, d.warmup,
		d.oracle_window, d.cache_bound, d.weights_frac, d.act_frac, d.host_ratio, d.seed);
}

static long wl_int(const char *opt, const char *s, long min, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || *end || v < min || v > max) {
		fprintf(stderr, "%s: bad value for --%s: '%s' (%ld..%ld)\n", wl_prog, opt, s,
			min, max);
		exit(WL_EXIT_USAGE);
	}
	return v;
}

static double wl_double(const char *opt, const char *s, double min, double max)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !(v >= min && v <= max)) {
		fprintf(stderr, "%s: bad value for --%s: '%s' (%g..%g)\n", wl_prog, opt, s,
			min, max);
		exit(WL_EXIT_USAGE);
	}
	return v;
}

static void wl_parse(struct wl_opts *o, const struct wl_ops *ops, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "mode", 1, 0, 'm' }, { "kv-over-hbm", 1, 0, 'x' }, { "kv-bytes", 1, 0, 'K' },
		{ "device-bytes", 1, 0, 'D' }, { "layers", 1, 0, 'L' }, { "row-bytes", 1, 0, 'r' },
		{ "seqs", 1, 0, 'n' }, { "ctx-min", 1, 0, 1 }, { "ctx-max", 1, 0, 2 },
		{ "decode-min", 1, 0, 3 }, { "decode-max", 1, 0, 4 }, { "batch", 1, 0, 'b' },
		{ "active-frac", 1, 0, 5 }, { "zipf", 1, 0, 'z' }, { "prefix-tokens", 1, 0, 6 },
		{ "prefix-share", 1, 0, 7 }, { "drift-every", 1, 0, 8 }, { "steps", 1, 0, 's' },
		{ "oracle-window", 1, 0, 9 }, { "warmup", 1, 0, 13 }, { "weights-frac", 1, 0, 10 },
		{ "act-frac", 1, 0, 11 }, { "host-ratio", 1, 0, 12 }, { "seed", 1, 0, 'S' },
		{ "cache-bound", 1, 0, 15 }, { "graphs", 0, 0, 16 }, { "tables", 1, 0, 17 },
		{ "quiet", 0, 0, 'q' }, { "inject-corruption", 0, 0, 14 }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
	};
	int c;
	uint64_t sz;
	while ((c = getopt_long(argc, argv, "m:x:K:D:L:r:n:b:z:s:S:qh", lo, NULL)) != -1) {
		const char *name = "option";
		for (const struct option *p = lo; p->name; p++)
			if (p->val == c)
				name = p->name;
		switch (c) {
		case 'm':
			if (!strcmp(optarg, "native")) o->mode = WL_MODE_NATIVE;
			else if (!strcmp(optarg, "uvm")) o->mode = WL_MODE_UVM;
			else if (!strcmp(optarg, "oracle")) o->mode = WL_MODE_ORACLE;
			else {
				fprintf(stderr, "%s: --mode must be native, uvm or oracle\n", wl_prog);
				exit(WL_EXIT_USAGE);
			}
			break;
		case 'x': o->kv_over_hbm = wl_double(name, optarg, 0.01, 64); break;
		case 'K': case 'D':
			if (wl_parse_size(optarg, &sz) || sz == 0) {
				fprintf(stderr, "%s: bad size for --%s: '%s'\n", wl_prog, name, optarg);
				exit(WL_EXIT_USAGE);
			}
			if (c == 'K') o->kv_bytes = sz; else o->device_bytes = sz;
			break;
		case 'L': o->layers = (int)wl_int(name, optarg, 1, WL_MAX_LAYERS); break;
		case 'r': o->row_bytes = (unsigned)wl_int(name, optarg, 64, 1 << 20); break;
		case 'n': o->seqs = (int)wl_int(name, optarg, 0, 1 << 20); break;
		case 1: o->ctx_min = (int)wl_int(name, optarg, 1, 1 << 24); break;
		case 2: o->ctx_max = (int)wl_int(name, optarg, 1, 1 << 24); break;
		case 3: o->decode_min = (int)wl_int(name, optarg, 1, 1 << 20); break;
		case 4: o->decode_max = (int)wl_int(name, optarg, 1, 1 << 20); break;
		case 'b': o->batch = (int)wl_int(name, optarg, 0, 1 << 20); break;
		case 5: o->active_frac = wl_double(name, optarg, 0.0, 1.0); break;
		case 'z': o->zipf = wl_double(name, optarg, 0.0, 10.0); break;
		case 6: o->prefix_tokens = (int)wl_int(name, optarg, 0, 1 << 24); break;
		case 7: o->prefix_share = wl_double(name, optarg, 0.0, 1.0); break;
		case 8: o->drift_every = (int)wl_int(name, optarg, 0, 1 << 30); break;
		case 's': o->steps = (int)wl_int(name, optarg, 0, 1 << 24); break;
		case 9: o->oracle_window = (int)wl_int(name, optarg, 0, 1 << 24); break;
		case 10: o->weights_frac = wl_double(name, optarg, 0.0, 0.9); break;
		case 11: o->act_frac = wl_double(name, optarg, 0.0, 0.5); break;
		case 13: o->warmup = (int)wl_int(name, optarg, 0, 1 << 24); break;
		case 15: o->cache_bound = (int)wl_int(name, optarg, 0, 1 << 24); break;
		case 16: o->graphs = 1; break;
		case 17:
			if (!strcmp(optarg, "device")) o->host_tables = 0;
			else if (!strcmp(optarg, "host")) o->host_tables = 1;
			else {
				fprintf(stderr, "%s: --tables must be device or host\n", wl_prog);
				exit(WL_EXIT_USAGE);
			}
			break;
		case 12: o->host_ratio = wl_double(name, optarg, 0.0, 16.0); break;
		case 'S': o->seed = (uint64_t)strtoull(optarg, NULL, 0); break;
		case 'q': o->quiet = 1; break;
		case 14: o->inject_corruption = 1; break;
		case 'h': wl_usage(ops, stdout); exit(WL_EXIT_OK);
		default: wl_usage(ops, stderr); exit(WL_EXIT_USAGE);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", wl_prog, argv[optind]);
		exit(WL_EXIT_USAGE);
	}
	if (o->ctx_min > o->ctx_max || o->decode_min > o->decode_max) {
		fprintf(stderr, "%s: --ctx-min/--decode-min must not exceed the max\n", wl_prog);
		exit(WL_EXIT_USAGE);
	}
}

/* ---- setup of the simulated GPU ------------------------------------------------------------ */

static void *wl_fake_sym(void *drv, const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	return (p || !drv) ? p : dlsym(drv, name);
}

/* The runtime dlopens libcuda.so.1 RTLD_LOCAL, so RTLD_DEFAULT does not see
 * the fake's exports: look in the already loaded driver too. */
static void wl_find_fake(struct wl *w)
{
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	w->fake.get_counters = (int (*)(struct fakecuda_counters *))
		wl_fake_sym(drv, "fakecuda_get_counters");
	w->fake.reset_counters = (void (*)(void))wl_fake_sym(drv, "fakecuda_reset_counters");
	w->fake.touch_kernel = (CUfunction (*)(void))wl_fake_sym(drv, "fakecuda_touch_kernel");
	w->fake.paged_kernel = (CUfunction (*)(void))wl_fake_sym(drv, "fakecuda_paged_kernel");
	w->fake.block_location = (int (*)(const void *, CUmemLocationType *, int *))
		wl_fake_sym(drv, "fakecuda_block_location");
	/* FAKECUDA_VTIME: this (the host) thread joins the simulation */
	int (*vjoin)(void) = (int (*)(void))wl_fake_sym(drv, "fakecuda_vclock_join");
	if (vjoin)
		vjoin();
	if (drv)
		dlclose(drv);
}

static void wl_init_cuda(struct wl *w)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%" PRIu64, w->o.device_bytes);
	setenv("FAKECUDA_DEVICE_BYTES", buf, 0);
	cudaError_t err = cudaFree(NULL);
	if (err != cudaSuccess)
		wl_die("no usable CUDA: %s (%d): %s", cudaGetErrorName(err), (int)err,
		       cudaGetErrorString(err));
	wl_find_fake(w);
	enum cudaDriverEntryPointQueryResult st;
	void *fn = NULL;
	WL_CK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault,
					       &st));
	if (!fn || st != cudaDriverEntryPointSuccess)
		wl_die("cuLaunchKernel not found through cudaGetDriverEntryPointByVersion");
	w->launch = (PFN_cuLaunchKernel_v4000)fn;
	WL_CK(cudaStreamCreate(&w->stream));
	size_t free_b;
	WL_CK(cudaMemGetInfo(&free_b, &w->dev_total));
}

/* ---- report ------------------------------------------------------------------------------ */

static double wl_gib(uint64_t b)
{
	return (double)b / (1024.0 * 1024 * 1024);
}

static void wl_report(struct wl *w, uint64_t checked, uint64_t bad, double wall_s)
{
	const struct fakecuda_counters *a = &w->c0, *b = &w->c1;
	const char *mode = w->o.mode == WL_MODE_NATIVE ? "native"
			 : w->o.mode == WL_MODE_UVM ? "uvm" : "oracle";
	uint64_t vns = b->virtual_ns - a->virtual_ns;
	double tps = vns ? (double)w->tokens * 1e9 / (double)vns : 0;
	uint64_t kv = w->bytes_by_kind[2];
	printf("workload=%s\nsimulated=1\nmode=%s\nseed=%" PRIu64 "\n", w->ops->name, mode,
	       w->o.seed);
	printf("kv_over_hbm=%.2f\nkv_over_device=%.2f\n", w->o.kv_over_hbm,
	       (double)kv / (double)w->dev_total);
	printf("device_bytes=%zu\nkv_budget_bytes=%" PRIu64 "\nlayers=%d\n", w->dev_total,
	       w->kv_budget, w->o.layers);
	for (size_t i = 0; i < WL_NR_KINDS; i++)
		printf("bytes_%s=%" PRIu64 "\n", wl_kinds[i], w->bytes_by_kind[i]);
	printf("warmup_steps=%d\n", w->o.warmup);
	int nr_kv = 0, same = 1;
	size_t kv0 = 0;
	for (int i = 0; i < w->nr_allocs; i++)
		if (!strcmp(w->allocs[i].kind, "kv")) {
			if (!nr_kv++)
				kv0 = w->allocs[i].bytes;
			same &= w->allocs[i].bytes == kv0;
		}
	printf("kv_allocations=%d\nkv_allocation_bytes=%zu\nkv_allocations_identical=%d\n", nr_kv,
	       kv0, same);
	printf("sessions=%d\nbatch=%d\nsteps=%d\narrivals=%" PRIu64 "\ncompletions=%" PRIu64 "\n",
	       w->nr_sess, w->batch, w->o.steps, w->nr_arrivals, w->nr_completions);
	printf("tokens=%" PRIu64 "\nvirtual_ns=%" PRIu64 "\ntokens_per_s=%.1f\n", w->tokens, vns,
	       tps);
	printf("bytes_htod=%" PRIu64 "\nbytes_dtoh=%" PRIu64 "\nbytes_hbm=%" PRIu64
	       "\nbytes_remote=%" PRIu64 "\n", b->bytes_htod - a->bytes_htod,
	       b->bytes_dtoh - a->bytes_dtoh, b->bytes_hbm - a->bytes_hbm,
	       b->bytes_remote - a->bytes_remote);
	printf("faults=%" PRIu64 "\nfault_groups=%" PRIu64 "\nevictions=%" PRIu64
	       "\nprefetch_blocks=%" PRIu64 "\nlaunches=%" PRIu64 "\n", b->faults - a->faults,
	       b->fault_groups - a->fault_groups, b->evictions - a->evictions,
	       b->prefetch_blocks - a->prefetch_blocks, b->launches - a->launches);
	printf("device_used_bytes=%" PRIu64 "\nmanaged_resident_bytes=%" PRIu64 "\n",
	       b->device_used_bytes, b->managed_resident_bytes);
	printf("graphs=%d\ngraph_launches=%" PRIu64 "\n", w->nr_graphs, w->graph_launches);
	printf("tables=%s\nbytes_tables=%" PRIu64 "\n", wl_tables_on(w) ? "device" : "host",
	       w->bytes_tables);
	printf("window_kv_chunks=%" PRIu64 "\nwindow_new_kv_chunks=%" PRIu64 "\n",
	       w->window_kv_chunks, w->window_new_kv_chunks);
	if (w->o.cache_bound)
		printf("cache_bound_chunks=%d\nwindow_misses_lru=%" PRIu64 "\nwindow_misses_fifo=%" PRIu64
		       "\nwindow_misses_opt=%" PRIu64 "\n", w->o.cache_bound, w->window_misses_lru,
		       w->window_misses_fifo, w->window_misses_opt);
	if (w->ops->report)
		w->ops->report(w);
	printf("verified=%" PRIu64 "\ncorrupt=%" PRIu64 "\nresult=%s\n", checked, bad,
	       bad ? "corrupt" : "ok");
	printf("\n--- %s, mode %s (SIMULATED GPU: figures come from the fakecuda cost model) ---\n",
	       w->ops->name, mode);
	printf("  device %.2f GiB; KV %.2f GiB = %.2fx the native KV budget (%.2f GiB); "
	       "weights %.2f GiB\n", wl_gib(w->dev_total), wl_gib(kv), w->o.kv_over_hbm,
	       wl_gib(w->kv_budget), wl_gib(w->bytes_by_kind[0]));
	printf("  %d sessions, batch %d, %d steps: %" PRIu64 " tokens in %.3f ms virtual "
	       "= %.0f tokens/s (simulated)\n", w->nr_sess, w->batch, w->o.steps, w->tokens,
	       (double)vns / 1e6, tps);
	printf("  moved HtoD %.2f GiB, DtoH %.2f GiB, remote reads %.2f GiB; %" PRIu64
	       " faults, %" PRIu64 " evictions\n", wl_gib(b->bytes_htod - a->bytes_htod),
	       wl_gib(b->bytes_dtoh - a->bytes_dtoh), wl_gib(b->bytes_remote - a->bytes_remote),
	       b->faults - a->faults, b->evictions - a->evictions);
	printf("  data: %" PRIu64 " stamps/samples checked, %" PRIu64 " corrupt; wall %.2f s\n",
	       checked, bad, wall_s);
}

/* ---- the run ------------------------------------------------------------------------------ */

int wl_main(int argc, char **argv, const struct wl_ops *ops)
{
	static struct wl w;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wl_prog = ops->name;
	w.ops = ops;
	wl_defaults(&w.o);
	wl_parse(&w.o, ops, argc, argv);
	wl_init_cuda(&w);

	int rc = ops->setup(&w);
	if (rc)
		return rc;
	wl_make_sessions(&w);
	wl_make_schedule(&w);
	wl_stamp_kv(&w);
	if (w.o.inject_corruption)            /* one byte of the second stamp */
		WL_CK(cudaMemset(w.k[0].base + WL_STAMP_EVERY + 20, 0xee, 1));
	WL_CK(cudaDeviceSynchronize());

	bool simulated = w.fake.touch_kernel && w.fake.get_counters, real = false;
	if (simulated) {
		rc = wl_decode(&w);              /* snapshots c0 once warm */
		if (rc)
			return rc;
		w.fake.get_counters(&w.c1);
	} else if ((real = wl_real_init(&w))) {   /* a real GPU: wl_real.c */
		rc = wl_real_decode(&w);
		if (rc)
			return rc;
	} else {
		fprintf(stderr, "%s: no simulated GPU (fakecuda_* symbols absent): allocation "
			"phase done, simulated decode skipped\n", ops->name);
	}
	for (int i = 0; i < w.nr_graphs; i++)
		WL_CK(cudaGraphExecDestroy(w.graphs[i].exec));
	uint64_t checked = 0, bad = wl_verify_kv(&w, &checked);
	if (ops->verify)
		bad += ops->verify(&w, &checked);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (real) {
		wl_real_report(&w, checked, bad, wall);
		return bad ? WL_EXIT_FAIL : WL_EXIT_OK;
	}
	if (!simulated) {
		printf("workload=%s\nsimulated=0\nverified=%" PRIu64 "\ncorrupt=%" PRIu64 "\n",
		       ops->name, checked, bad);
		return bad ? WL_EXIT_FAIL : WL_EXIT_SKIP;
	}
	wl_report(&w, checked, bad, wall);
	if (bad) {
		fprintf(stderr, "%s: DATA CORRUPTION: %" PRIu64 " of %" PRIu64
			" checks failed\n", ops->name, bad, checked);
		return WL_EXIT_FAIL;
	}
	return WL_EXIT_OK;
}
