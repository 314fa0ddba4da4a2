/* SPDX-License-Identifier: MIT */
/* serve-like: options, the server's allocation life for each alternative
 * (--alt), and the report: one key=value block and one "serve:" row.
 * Every figure is simulated (fakecuda's virtual clock); the program needs
 * the stand-in's fakecuda_* entries and exits 77 without them.
 * Test infrastructure: stdio and exit() are fine here. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define SV_UTIL 0.90               /* gpu_memory_utilization */
/* --trace defaults (docs/workloads.md "Serving from request traces") */
#define SV_TRACE_MAX_CTX 131072
#define SV_TRACE_DEVICE_BYTES (3ull << 30)
#define SV_TRACE_ROW_BYTES 256       /* K, and V: 512 bytes of KV per token */
#define SV_TRACE_FLOPS_PER_TOKEN 62.5e6
#define SV_TRACE_ATTN_FLOPS 2048.0
#define SV_TRACE_TIME_SCALE 50.0
#define SV_TRACE_SLO_TTFT_MS 2000.0    /* of the trace's time */
#define SV_TRACE_SLO_TPOT_MS 100.0

static const char *const sv_alt_names[] = { "native", "offload", "kvtier", "uvm", "oracle" };

extern const struct sv_persona sv_vllm_v2, sv_vllm_v1_triton, sv_llamacpp, sv_hybrid;

/* ---- options ---- */

static void sv_defaults(struct sv_opts *o)
{
	*o = (struct sv_opts){
		.alt = SV_NATIVE, .pool_over_hbm = 4, .device_bytes = 1280ull << 20,
		.weights_frac = 0.70, .act_frac = 0.02, .layers = 1, .row_bytes = 2048,
		.flops_per_token = 1.0e9, .attn_flops = 32768, .sys_tokens = 2048,
		.turn_min = 256, .turn_max = 1536, .out_min = 128, .out_max = 512,
		.max_ctx = 8192, .sessions = 24, .zipf = 0.8, .rate = 130, .think_s = 0.03,
		.requests = 400, .max_batch = 64, .prefill_budget = 8192, .seed = 1,
		.persona = &sv_vllm_v2, .window = 1024, .cpu_attn_gbps = 400,
		.time_scale = SV_TRACE_TIME_SCALE, .slo_ttft_ms = SV_TRACE_SLO_TTFT_MS,
		.slo_tpot_ms = SV_TRACE_SLO_TPOT_MS,
	};
}

static void sv_usage(FILE *f)
{
	struct sv_opts d;
	sv_defaults(&d);
	fprintf(f,
"usage: serve-like [options]\n"
"  A multi-turn serving benchmark on the SIMULATED GPU (every figure simulated):\n"
"  turns arrive (Poisson, Zipf over sessions, think time), prompts are the\n"
"  session's history plus a new prompt, the server keeps a paged KV pool with an\n"
"  LRU prefix cache. docs/workloads.md \"Serving: multi-turn prefix reuse\".\n"
"\n"
"  --alt A               native (the pool that fits), offload (that pool + a pinned\n"
"                        host pool of N-1 x, copies on eviction and hit; llamacpp:\n"
"                        its own, --no-kv-offload: an N x pool in host memory,\n"
"                        attention on the CPU), kvtier\n"
"                        (an N x pool from cudaMalloc: run it under kvtier), uvm\n"
"                        (N x cudaMallocManaged), oracle (N x managed, home on the\n"
"                        host, mapped; each step's chunks prefetched on a\n"
"                        copy engine, unused ones demoted when HBM is full) [native]\n"
"  --persona P           how the server talks to the GPU each step: vllm-v2,\n"
"                        vllm-v1-fa, vllm-v1-triton, sglang, llamacpp, hybrid\n"
"                        (docs/workloads.md \"Server personas\")        [%s]\n"
"  --window N            hybrid: sliding-window tokens (multiple of 16)   [%d]\n"
"  --kv-order O          hybrid: windows (TensorRT-LLM: window pool, then\n"
"                        full) or full-first (then the window pool)  [windows]\n"
"  --cpu-attn-gbps G     llamacpp --alt offload: GB/s the CPU's attention reads\n"
"                        KV at (assumed: 2-socket DDR5 server)          [%.0f]\n"
"  --pool-over-hbm N     N: the pool asked for / the pool that fits       [%.0f]\n"
"  --pool-force          sglang, llamacpp: take the N x pool under --alt kvtier\n"
"                        too (SGLang clamps its pool to what free memory gives;\n"
"                        llama.cpp's --fit sizes an unset -c so: this is -c N x)\n"
"  --device-bytes B      simulated HBM                                  [%" PRIu64 "M]\n"
"  --weights-frac F      weights / HBM                                  [%.2f]\n"
"  --layers L, --row-bytes B   KV: layers, bytes per token per layer of K  [%d, %u]\n"
"  --flops-per-token F   prefill FLOPs per new token (2 x parameters)     [%.3g]\n"
"  --attn-flops F        prefill FLOPs per new token per context token    [%.3g]\n"
"  --sys-tokens N        shared system prompt (multiple of 16)            [%d]\n"
"  --turn-min/--turn-max N   new prompt tokens per turn               [%d/%d]\n"
"  --out-min/--out-max N     tokens generated per turn                [%d/%d]\n"
"  --max-ctx N           a conversation longer than this starts over      [%d]\n"
"  --sessions N          users                                            [%d]\n"
"  --zipf S              popularity skew over sessions                  [%.2f]\n"
"  --rate R              turns per simulated second (Poisson)           [%.0f]\n"
"  --think S             least simulated seconds between a session's turns [%.3f]\n"
"  --requests N          turns in the run                                 [%d]\n"
"  --max-batch N         running requests at most                         [%d]\n"
"  --prefill-budget N    prompt tokens computed per step                  [%d]\n"
"  --seed N                                                               [%" PRIu64 "]\n"
"  --inject-corruption   (test of the verifier) damage one cached block's stamp\n"
"  --quiet\n"
"\n"
"  --trace FILE          requests from a public trace instead of the generator:\n"
"                        Mooncake JSONL (prefixes shared by hash id) or Azure CSV\n"
"                        (no prefix information: fresh prompts). Not with the\n"
"                        generator's options (--rate, --sessions, --turn-*, ...)\n"
"  --trace-start N       the window's first row (0-based)                 [0]\n"
"  --trace-requests N    rows in the window (0: to the end)               [0]\n"
"  --time-scale F        open loop: a request arrives at its trace time / F [%.0f]\n"
"  --closed-loop         every request at time 0, served as fast as it can be\n"
"  --slo-ttft-ms T, --slo-tpot-ms T  goodput (open loop): requests per trace\n"
"                        second within both, in trace time (simulated x F) [%.0f, %.0f]\n"
"  --trace-stats         print the window's prefix statistics and exit (no GPU)\n"
"  With --trace: --max-ctx defaults to %d; a longer row's prompt is cut.\n"
"  Exit: 0 ok, 1 error or corruption, 2 usage, 3 out of memory, 77 no simulated GPU.\n",
		d.persona->name, d.window, d.cpu_attn_gbps, d.pool_over_hbm, d.device_bytes >> 20, d.weights_frac, d.layers, d.row_bytes,
		d.flops_per_token, d.attn_flops, d.sys_tokens, d.turn_min, d.turn_max, d.out_min,
		d.out_max, d.max_ctx, d.sessions, d.zipf, d.rate, d.think_s, d.requests,
		d.max_batch, d.prefill_budget, d.seed, d.time_scale, d.slo_ttft_ms, d.slo_tpot_ms,
		SV_TRACE_MAX_CTX);
}

static double sv_num(const char *opt, const char *s, double lo, double hi)
{
	char *end;
	errno = 0;
	double x = strtod(s, &end), mul = 1;
	switch (errno || end == s ? 0 : *end) {
	case 'K': mul = 1024.0; end++; break;
	case 'M': mul = 1024.0 * 1024; end++; break;
	case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
	}
	x *= mul;
	if (errno || end == s || *end || !(x >= lo && x <= hi)) {
		fprintf(stderr, "serve-like: bad value for --%s: '%s' (%g..%g)\n", opt, s, lo, hi);
		exit(WL_EXIT_USAGE);
	}
	return x;
}

static void sv_parse(struct sv_opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "alt", 1, 0, 'a' }, { "pool-over-hbm", 1, 0, 'N' }, { "device-bytes", 1, 0, 'D' },
		{ "weights-frac", 1, 0, 1 }, { "layers", 1, 0, 2 }, { "row-bytes", 1, 0, 3 },
		{ "flops-per-token", 1, 0, 4 }, { "attn-flops", 1, 0, 5 }, { "sys-tokens", 1, 0, 6 },
		{ "turn-min", 1, 0, 7 }, { "turn-max", 1, 0, 8 }, { "out-min", 1, 0, 9 },
		{ "out-max", 1, 0, 10 }, { "max-ctx", 1, 0, 11 }, { "sessions", 1, 0, 12 },
		{ "zipf", 1, 0, 13 }, { "rate", 1, 0, 14 }, { "think", 1, 0, 15 },
		{ "requests", 1, 0, 16 }, { "max-batch", 1, 0, 17 }, { "prefill-budget", 1, 0, 18 },
		{ "seed", 1, 0, 'S' }, { "inject-corruption", 0, 0, 19 }, { "quiet", 0, 0, 'q' },
		{ "persona", 1, 0, 'p' }, { "help", 0, 0, 'h' }, { "window", 1, 0, 20 },
		{ "kv-order", 1, 0, 21 }, { "cpu-attn-gbps", 1, 0, 22 }, { "pool-force", 0, 0, 23 },
		{ "trace", 1, 0, 24 }, { "trace-start", 1, 0, 25 }, { "trace-requests", 1, 0, 26 },
		{ "time-scale", 1, 0, 27 }, { "closed-loop", 0, 0, 28 }, { "trace-stats", 0, 0, 29 },
		{ "slo-ttft-ms", 1, 0, 30 }, { "slo-tpot-ms", 1, 0, 31 },
		{ 0, 0, 0, 0 },
	};
	int c, idx;
	uint64_t given = 0;                   /* 1 << option code, codes under 64 */
	const char *gen_opt = NULL;           /* a generator option given */
	while ((c = getopt_long(argc, argv, "qh", lo, &idx)) != -1) {
		const char *n = c == '?' ? "" : lo[idx].name;
		if (c > 0 && c < 64)
			given |= 1ull << c;
		if ((c >= 6 && c <= 10) || (c >= 12 && c <= 16))
			gen_opt = n;
		switch (c) {
		case 'a': {
			size_t i = 0;
			while (i < 5 && strcmp(optarg, sv_alt_names[i]))
				i++;
			if (i == 5) {
				fprintf(stderr, "serve-like: --alt must be native, offload, kvtier, "
					"uvm or oracle\n");
				exit(WL_EXIT_USAGE);
			}
			o->alt = (enum sv_alt)i;
			break;
		}
		case 'p':
			if (!(o->persona = sv_persona_find(optarg))) {
				fprintf(stderr, "serve-like: unknown --persona '%s' (vllm-v2, vllm-v1-fa, "
					"vllm-v1-triton, sglang, llamacpp, hybrid)\n", optarg);
				exit(WL_EXIT_USAGE);
			}
			break;
		case 'N': o->pool_over_hbm = sv_num(n, optarg, 1, 64); break;
		case 'D':
			o->device_bytes = (uint64_t)sv_num(n, optarg, 64 << 20, 1e15);
			given |= 1;               /* code 0 is no option's */
			break;
		case 1: o->weights_frac = sv_num(n, optarg, 0, 0.9); break;
		case 2: o->layers = (int)sv_num(n, optarg, 1, WL_MAX_LAYERS); break;
		case 20: o->window = (int)sv_num(n, optarg, 16, 1 << 24); break;
		case 21:
			if (strcmp(optarg, "windows") && strcmp(optarg, "full-first")) {
				fprintf(stderr, "serve-like: --kv-order must be windows or full-first\n");
				exit(WL_EXIT_USAGE);
			}
			o->full_first = !strcmp(optarg, "full-first");
			break;
		case 22: o->cpu_attn_gbps = sv_num(n, optarg, 0.001, 1e6); break;
		case 23: o->pool_force = true; break;
		case 3: o->row_bytes = (unsigned)sv_num(n, optarg, 64, 1 << 20); break;
		case 4: o->flops_per_token = sv_num(n, optarg, 0, 1e15); break;
		case 5: o->attn_flops = sv_num(n, optarg, 0, 1e12); break;
		case 6: o->sys_tokens = (int)sv_num(n, optarg, 0, 1 << 20); break;
		case 7: o->turn_min = (int)sv_num(n, optarg, 1, 1 << 20); break;
		case 8: o->turn_max = (int)sv_num(n, optarg, 1, 1 << 20); break;
		case 9: o->out_min = (int)sv_num(n, optarg, 1, 1 << 20); break;
		case 10: o->out_max = (int)sv_num(n, optarg, 1, 1 << 20); break;
		case 11: o->max_ctx = (int)sv_num(n, optarg, 32, 1 << 24); break;
		case 24: o->trace = optarg; break;
		case 25: o->trace_start = (int)sv_num(n, optarg, 0, 1 << 30); break;
		case 26: o->trace_requests = (int)sv_num(n, optarg, 0, 1 << 30); break;
		case 27: o->time_scale = sv_num(n, optarg, 1e-6, 1e9); break;
		case 28: o->closed = true; break;
		case 29: o->trace_stats = true; break;
		case 30: o->slo_ttft_ms = sv_num(n, optarg, 0, 1e12); break;
		case 31: o->slo_tpot_ms = sv_num(n, optarg, 0, 1e12); break;
		case 12: o->sessions = (int)sv_num(n, optarg, 1, 1 << 20); break;
		case 13: o->zipf = sv_num(n, optarg, 0, 10); break;
		case 14: o->rate = sv_num(n, optarg, 1e-3, 1e9); break;
		case 15: o->think_s = sv_num(n, optarg, 0, 1e6); break;
		case 16: o->requests = (int)sv_num(n, optarg, 1, 1 << 22); break;
		case 17: o->max_batch = (int)sv_num(n, optarg, 1, 4096); break;
		case 18: o->prefill_budget = (int)sv_num(n, optarg, 16, 1 << 24); break;
		case 'S': o->seed = (uint64_t)sv_num(n, optarg, 0, 1e18); break;
		case 19: o->inject_corruption = 1; break;
		case 'q': o->quiet = 1; break;
		case 'h': sv_usage(stdout); exit(WL_EXIT_OK);
		default: sv_usage(stderr); exit(WL_EXIT_USAGE);
		}
	}
	if (o->persona == &sv_hybrid && o->alt == SV_OFFLOAD) {
		fprintf(stderr, "serve-like: --persona hybrid --alt offload: vLLM's "
			"OffloadingConnector does not support hybrid (sliding-window) models\n");
		exit(WL_EXIT_USAGE);
	}
	if (o->persona == &sv_hybrid && !(given & 1ull << 2))
		o->layers = 2;                   /* one sliding-window, one full layer */
	if (o->persona == &sv_hybrid && (o->layers < 2 || o->window % WL_BLOCK_TOKENS)) {
		fprintf(stderr, "serve-like: --persona hybrid needs --layers >= 2 and --window a "
			"multiple of %d\n", WL_BLOCK_TOKENS);
		exit(WL_EXIT_USAGE);
	}
	if (o->trace) {
		if (gen_opt) {
			fprintf(stderr, "serve-like: --%s is the generator's: it does not apply "
				"with --trace\n", gen_opt);
			exit(WL_EXIT_USAGE);
		}
		o->sys_tokens = 0;               /* the trace's prompts are whole */
		/* the trace model (docs/workloads.md "Serving from request
		 * traces"), where the option was not given */
		if (!(given & 1ull << 11))
			o->max_ctx = SV_TRACE_MAX_CTX;
		if (!(given & 1))
			o->device_bytes = SV_TRACE_DEVICE_BYTES;
		if (!(given & 1ull << 3))
			o->row_bytes = SV_TRACE_ROW_BYTES;
		if (!(given & 1ull << 4))
			o->flops_per_token = SV_TRACE_FLOPS_PER_TOKEN;
		if (!(given & 1ull << 5))
			o->attn_flops = SV_TRACE_ATTN_FLOPS;
	} else if (o->trace_stats || o->closed || o->trace_start || o->trace_requests) {
		fprintf(stderr, "serve-like: --trace-stats, --closed-loop, --trace-start and "
			"--trace-requests need --trace FILE\n");
		exit(WL_EXIT_USAGE);
	}
	if (optind < argc || (!o->trace && o->turn_min > o->turn_max) || o->out_min > o->out_max ||
	    o->sys_tokens % WL_BLOCK_TOKENS ||
	    (!o->trace && o->sys_tokens + o->turn_max + o->out_max > o->max_ctx)) {
		fprintf(stderr, "serve-like: bad arguments (min > max, --sys-tokens not a "
			"multiple of %d, or one turn longer than --max-ctx)\n", WL_BLOCK_TOKENS);
		exit(WL_EXIT_USAGE);
	}
}

/* ---- the simulated GPU ---- */

static void *sv_sym(void *drv, const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	return (p || !drv) ? p : dlsym(drv, name);
}

static int sv_init_cuda(struct sv *v)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%" PRIu64, v->o.device_bytes);
	setenv("FAKECUDA_DEVICE_BYTES", buf, 0);
	WL_CK(cudaFree(NULL));
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	v->get_counters = (int (*)(struct fakecuda_counters *))sv_sym(drv, "fakecuda_get_counters");
	v->peek = (int (*)(const void *, void *, size_t))sv_sym(drv, "fakecuda_peek");
	v->poke = (int (*)(void *, const void *, size_t))sv_sym(drv, "fakecuda_poke");
	v->block_location = (int (*)(const void *, CUmemLocationType *, int *))
		sv_sym(drv, "fakecuda_block_location");
	CUfunction (*paged)(void) = (CUfunction (*)(void))sv_sym(drv, "fakecuda_paged_kernel");
	CUfunction (*comp)(void) = (CUfunction (*)(void))sv_sym(drv, "fakecuda_compute_kernel");
	v->kdefine = (CUfunction (*)(const char *, const struct fakecuda_param *, unsigned,
				     fakecuda_body_fn, void *))sv_sym(drv, "fakecuda_kernel_define");
	v->kread = (int (*)(const void *, void *, size_t))sv_sym(drv, "fakecuda_kread");
	v->kwrite = (int (*)(void *, const void *, size_t))sv_sym(drv, "fakecuda_kwrite");
	v->kaccess = (int (*)(const void *, size_t, int))sv_sym(drv, "fakecuda_kaccess");
	v->kflops = (void (*)(double))sv_sym(drv, "fakecuda_kflops");
	v->kgrid = (void (*)(unsigned *))sv_sym(drv, "fakecuda_kgrid");
	int (*vjoin)(void) = (int (*)(void))sv_sym(drv, "fakecuda_vclock_join");
	void (*vhost)(uint64_t) = (void (*)(uint64_t))sv_sym(drv, "fakecuda_vclock_host");
	if (vjoin && vhost && vjoin() == 0)
		v->vhost = vhost;
	if (drv)
		dlclose(drv);
	if (!v->get_counters || !v->peek || !v->poke || !v->block_location || !paged || !comp) {
		fprintf(stderr, "serve-like: no simulated GPU (fakecuda_* entries absent): this "
			"workload has no real-GPU path yet (docs/workloads.md)\n");
		printf("workload=serve-like\nsimulated=0\nresult=skip\n");
		return WL_EXIT_SKIP;
	}
	v->paged_fn = paged();
	v->compute_fn = comp();
	enum cudaDriverEntryPointQueryResult st;
	void *fn = NULL;
	WL_CK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault,
					       &st));
	if (!fn || st != cudaDriverEntryPointSuccess)
		wl_die("cuLaunchKernel not found");
	v->launch = (PFN_cuLaunchKernel_v4000)fn;
	static const char *const evn[4] = { "cuEventCreate", "cuEventRecord", "cuEventQuery",
					      "cuEventSynchronize" };
	void *evf[4];
	for (int i = 0; i < 4; i++) {
		evf[i] = NULL;
		WL_CK(cudaGetDriverEntryPointByVersion(evn[i], &evf[i], 12000, cudaEnableDefault,
						       &st));
		if (!evf[i] || st != cudaDriverEntryPointSuccess)
			wl_die("%s not found", evn[i]);
	}
	v->ev_create = (CUresult (*)(CUevent *, unsigned))evf[0];
	v->ev_record = (CUresult (*)(CUevent, CUstream))evf[1];
	v->ev_query = (CUresult (*)(CUevent))evf[2];
	v->ev_sync = (CUresult (*)(CUevent))evf[3];
	WL_CK(cudaStreamCreate(&v->stream));
	WL_CK(cudaStreamCreate(&v->side));
	size_t free_b;
	WL_CK(cudaMemGetInfo(&free_b, &v->dev_total));
	const char *pace = getenv("FAKECUDA_PACE");
	v->pace = pace ? atof(pace) : 0;
	return 0;
}

static int sv_oom(struct sv *v, const char *what, size_t bytes, cudaError_t err)
{
	cudaGetLastError();
	fprintf(stderr, "serve-like: out of memory: %s of %zu MiB failed: %s (alt %s, N %.1f)\n",
		what, bytes >> 20, cudaGetErrorName(err), sv_alt_names[v->o.alt],
		v->o.pool_over_hbm);
	printf("workload=serve-like\nalternative=%s\npool_over_hbm=%.0f\nresult=oom\n",
	       sv_alt_names[v->o.alt], v->o.pool_over_hbm);
	return WL_EXIT_OOM;
}

/* ---- the allocation life: weights, a profiling trough, the KV pool ---- */

static int sv_weights(struct sv *v)
{
	static const unsigned shape[4] = { 3, 2, 8, 4 };   /* qkv, o, gate_up, down */
	int L = v->o.layers;
	uint64_t total = (uint64_t)(v->o.weights_frac * (double)v->dev_total);
	uint64_t unit = total / ((uint64_t)L + 1) / 17;
	struct fakecuda_range wr[WL_MAX_LAYERS * 4];
	for (int i = 0; i <= 4 * L; i++) {
		uint64_t b = wl_torch_round(i == 4 * L ? unit * 17 : unit * shape[i % 4]);
		void *p;
		cudaError_t err = cudaMalloc(&p, b);
		if (err)
			return sv_oom(v, "cudaMalloc(weights)", b, err);
		v->weights[v->nr_weights].ptr = p;
		v->weights[v->nr_weights++].len = b;
		v->weights_bytes += b;
		if (i < 4 * L)
			wr[i] = (struct fakecuda_range){ (CUdeviceptr)(uintptr_t)p, b, 0 };
	}
	WL_CK(cudaMalloc((void **)&v->d_weights, sizeof wr[0] * 4 * (size_t)L));
	WL_CK(cudaMemcpy(v->d_weights, wr, sizeof wr[0] * 4 * (size_t)L, cudaMemcpyHostToDevice));
	return 0;
}

/* The persona's own offload (llama.cpp --no-kv-offload): its KV tensors go
 * to the CPU backend's buffer type, ggml_backend_cpu_buffer_type() (src/
 * llama-kv-cache.cpp), one ggml_aligned_malloc of plain pageable memory,
 * not the CUDA host type's cudaMallocHost; ggml_backend_buffer_clear is a
 * memset. No driver call: the GPU never reads it. */
static int sv_kv_host_alloc(struct sv *v, void **ptr, uint64_t bytes)
{
	if (posix_memalign(ptr, 64, bytes)) {
		printf("workload=serve-like\nalternative=offload\npool_over_hbm=%.0f\nresult=oom\n",
		       v->o.pool_over_hbm);
		fprintf(stderr, "serve-like: out of host memory for the KV cache (%" PRIu64
			" MiB)\n", bytes >> 20);
		return WL_EXIT_OOM;
	}
	if (v->o.persona->zero_fill)
		memset(*ptr, 0, bytes);
	v->host_kv = true;
	return 0;
}

/* The KV pool's allocations as the persona's server makes them (one, one
 * per layer, or L K tensors then L V tensors; PyTorch's servers get whole
 * 2 MiB units from the caching allocator), each zeroed at birth where the
 * server zeroes it, and the K and V region of every layer in them. */
static int sv_kv_alloc(struct sv *v)
{
	const struct sv_persona *p = v->o.persona;
	int L = v->o.layers;
	uint64_t lead = (uint64_t)p->lead_rows * v->o.row_bytes;
	uint64_t region = (uint64_t)v->nr_blocks * v->block_region + lead;
	int per = p->allocs == SV_KV_ONE ? 2 * L : p->allocs == SV_KV_PER_LAYER ? 2 : 1;
	v->nr_kv = 2 * L / per;
	for (int i = 0; i < v->nr_kv; i++) {
		uint64_t bytes = region * (uint64_t)per;
		if (p->allocs != SV_KV_ONE)
			bytes = wl_torch_round(bytes);
		void *ptr;
		cudaError_t err;
		int rc;
		if (v->o.alt == SV_OFFLOAD && p->host_kv_offload) {
			if ((rc = sv_kv_host_alloc(v, &ptr, bytes)))
				return rc;
			err = cudaSuccess;
		} else if (v->o.alt == SV_UVM || v->o.alt == SV_ORACLE) {
			err = cudaMallocManaged(&ptr, bytes, cudaMemAttachGlobal);
			v->managed = true;
		} else {
			err = cudaMalloc(&ptr, bytes);
		}
		if (err)
			return sv_oom(v, "the KV pool", bytes, err);
		if (v->o.alt == SV_ORACLE) {             /* home on the host, mapped */
			struct cudaMemLocation host = { .type = cudaMemLocationTypeHost, .id = 0 };
			struct cudaMemLocation dev = { .type = cudaMemLocationTypeDevice, .id = 0 };
			WL_CK(cudaMemAdvise(ptr, bytes, cudaMemAdviseSetPreferredLocation, host));
			WL_CK(cudaMemAdvise(ptr, bytes, cudaMemAdviseSetAccessedBy, dev));
		}
		if (p->zero_fill && !v->host_kv) {
			WL_CK(cudaMemsetAsync(ptr, 0, bytes, v->stream));
			WL_CK(cudaStreamSynchronize(v->stream));
		}
		v->kv[i].ptr = ptr;
		v->kv[i].len = bytes;
		v->kv_bytes += bytes;
		v->kv_ch0[i + 1] = v->kv_ch0[i] + (bytes + WL_CHUNK - 1) / WL_CHUNK;
	}
	for (int r = 0; r < 2 * L; r++) {
		int a = p->allocs == SV_KV_ONE ? 0 : p->allocs == SV_KV_PER_LAYER ? r / 2
		      : (r % 2) * L + r / 2;
		uint64_t off = p->allocs == SV_KV_ONE ? (uint64_t)r * region
			     : p->allocs == SV_KV_PER_LAYER ? (uint64_t)(r % 2) * region : 0;
		v->region_kv[r] = a;
		v->region[r] = v->kv[a].ptr + off + lead;
	}
	v->pool = v->kv[0].ptr;
	return 0;
}

static int sv_pool(struct sv *v)
{
	void *act;
	uint64_t peak = wl_torch_round((uint64_t)(v->o.act_frac * (double)v->dev_total));
	cudaError_t err = cudaMalloc(&act, peak);      /* profile_run, then empty_cache */
	if (err)
		return sv_oom(v, "cudaMalloc(activations)", peak, err);
	WL_CK(cudaFree(act));
	size_t free_b, total;
	WL_CK(cudaMemGetInfo(&free_b, &total));
	uint64_t want = (uint64_t)(SV_UTIL * (double)total), non_kv = v->weights_bytes + peak;
	if (want <= non_kv)
		wl_die("no memory left for the KV pool");
	v->block_region = (uint64_t)WL_BLOCK_TOKENS * v->o.row_bytes;
	v->kv_regions = 2 * v->o.layers;
	double n = v->o.pool_over_hbm;
	int rc;
	if (v->o.persona->pools) {
		if ((rc = v->o.persona->pools(v, want - non_kv)))
			return rc;
	} else {
		uint64_t block = (uint64_t)v->kv_regions * v->block_region;
		uint32_t fit = (uint32_t)((want - non_kv) / block);
		v->kv_budget = (uint64_t)fit * block;
		v->fit_blocks = fit;
		bool big = v->o.alt == SV_KVTIER || v->o.alt == SV_UVM || v->o.alt == SV_ORACLE ||
			   (v->o.alt == SV_OFFLOAD && v->o.persona->host_kv_offload);
		v->nr_blocks = big ? (uint32_t)((double)fit * n) : fit;
		if (v->o.alt == SV_KVTIER && v->o.persona->pool_capped && !v->o.pool_force &&
		    v->nr_blocks > fit) {
			/* the server's own words when the pool asked for is over what
			 * free memory gives */
			v->o.persona->capped_says(v->nr_blocks * WL_BLOCK_TOKENS,
						  fit * WL_BLOCK_TOKENS);
			v->nr_blocks = fit;
			v->pool_capped = true;
		}
		if ((rc = sv_kv_alloc(v)))
			return rc;
	}
	uint32_t fit = v->fit_blocks;
	uint64_t block = (uint64_t)v->kv_regions * v->block_region;
	uint64_t bytes = v->kv_bytes;
	if (v->o.alt == SV_ORACLE) {
		v->chunk_mark = calloc(v->kv_ch0[v->nr_kv] + 2, 1);
		if (!v->chunk_mark)
			wl_die("out of host memory");
	}
	if (v->o.alt == SV_OFFLOAD && n > 1 && !v->host_kv) {
		v->nr_host = (uint32_t)((double)fit * (n - 1));
		uint64_t hb = (uint64_t)v->nr_host * block;
		err = cudaMallocHost((void **)&v->host, hb);
		if (err)
			return sv_oom(v, "cudaMallocHost(host pool)", hb, err);
	}
	sv_pool_init(&v->gpu, v->nr_blocks);
	sv_pool_init(&v->hostp, v->nr_host);
	v->store_seq = calloc(v->nr_blocks, sizeof *v->store_seq);
	v->load_seq = calloc(v->nr_blocks, sizeof *v->load_seq);
	v->mark = calloc(v->nr_blocks, sizeof *v->mark);
	v->ev_cap = 256;
	v->ev = calloc(v->ev_cap, sizeof *v->ev);
	if (!v->store_seq || !v->load_seq || !v->mark || !v->ev)
		wl_die("out of host memory");
	for (uint32_t i = 0; i < v->ev_cap; i++)
		if (v->ev_create(&v->ev[i], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
			wl_die("cuEventCreate failed");
	/* offload: the first blocks of the queue are stored ahead of their
	 * eviction, about what one step's admissions take */
	v->store_ahead = (uint32_t)v->o.prefill_budget / WL_BLOCK_TOKENS;
	wl_log(&(struct wl){ .o.quiet = v->o.quiet }, "KV pool %u blocks (%.0f MiB, %s), fits %u; "
	       "host pool %u blocks", v->nr_blocks, (double)bytes / (1 << 20),
	       v->managed ? "managed" : v->host_kv ? "host memory" : "cudaMalloc", fit, v->nr_host);
	return 0;
}

static void sv_tables_init(struct sv *v)
{
	unsigned max = (unsigned)v->o.max_batch;
	v->stride = (v->s.max_stream + WL_BLOCK_TOKENS - 1) / WL_BLOCK_TOKENS + 1;
	/* the prefill budget, or one longer prompt alone, and one token a decode */
	v->max_step_tokens = (unsigned)v->o.prefill_budget + v->s.max_stream + max;
	v->width = ((unsigned)v->o.max_ctx + WL_BLOCK_TOKENS - 1) / WL_BLOCK_TOKENS;
	v->width = (v->width + 7) / 8 * 8;
	if (v->width < v->stride)
		v->width = v->stride;
	v->run = calloc(max, sizeof *v->run);
	v->pending = calloc((size_t)v->s.nr, sizeof *v->pending);
	v->sess_free_s = calloc((size_t)v->s.nr_sess, sizeof *v->sess_free_s);
	v->sess_busy = calloc((size_t)v->s.nr_sess, sizeof *v->sess_busy);
	if (!v->run || !v->pending || !v->sess_free_s || !v->sess_busy)
		wl_die("out of host memory");
	v->o.persona->setup(v);
}

/* ---- the end: every cached block's stamps, then the report ---- */

static void sv_sweep(struct sv *v)
{
	for (uint32_t i = 0; i < v->gpu.nr; i++)
		if (v->gpu.b[i].keyed)
			sv_check_block(v, v->pool, v->nr_blocks, i, v->gpu.b[i].key);
	for (uint32_t i = 0; i < v->hostp.nr; i++)
		if (v->hostp.b[i].keyed)
			sv_check_block(v, v->host, v->nr_host, i, v->hostp.b[i].key);
	if (v->o.persona->sweep)
		v->o.persona->sweep(v);
}

static int sv_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double sv_pct(double *x, int n, double p)
{
	if (!n)
		return 0;
	qsort(x, (size_t)n, sizeof *x, sv_cmp);
	int i = (int)ceil(p * n) - 1;
	return x[i < 0 ? 0 : i];
}

static void sv_report(struct sv *v)
{
	int n = v->s.nr, nt = 0;
	double *ttft = malloc(sizeof *ttft * (size_t)n), *tpot = malloc(sizeof *tpot * (size_t)n);
	if (!ttft || !tpot)
		wl_die("out of host memory");
	double t0 = v->s.req[0].arrive_s, t1 = 0;
	int met = 0;                       /* requests within both SLO bounds */
	for (int i = 0; i < n; i++) {
		const struct sv_req *q = &v->s.req[i];
		ttft[i] = (q->first_s - q->send_s) * 1e3;
		double tp = q->out > 1 ? (q->done_s - q->first_s) * 1e3 / (q->out - 1) : 0;
		if (q->out > 1)
			tpot[nt++] = tp;
		/* the SLO is in the trace's time: simulated x --time-scale */
		met += ttft[i] * v->o.time_scale <= v->o.slo_ttft_ms &&
		       tp * v->o.time_scale <= v->o.slo_tpot_ms;
		t1 = fmax(t1, q->done_s);
	}
	const struct fakecuda_counters *a = &v->c0, *b = &v->c1;
	uint64_t link = (b->bytes_htod - a->bytes_htod) + (b->bytes_dtoh - a->bytes_dtoh) +
			(b->bytes_remote - a->bytes_remote);
	double span = t1 - t0;
	double tps = v->out_tokens / span, rps = n / span;
	double hit = v->prompt_tokens ? (double)v->hit_tokens / (double)v->prompt_tokens : 0;
	double p50 = sv_pct(ttft, n, 0.5), p99 = sv_pct(ttft, n, 0.99);
	double q50 = sv_pct(tpot, nt, 0.5), q99 = sv_pct(tpot, nt, 0.99);
	const char *alt = sv_alt_names[v->o.alt];
	const char *mode = !v->o.trace ? "generated" : v->o.closed ? "closed" : "open";
	char trace[512] = "-";
	if (v->o.trace) {                  /* file name and window */
		const char *base = strrchr(v->o.trace, '/');
		snprintf(trace, sizeof trace, "%s[%d+%d]", base ? base + 1 : v->o.trace,
			 v->s.first_row, n);
	}
	printf("workload=serve-like\nsimulated=1\npersona=%s\nalternative=%s\npool_over_hbm=%.0f\n",
	       v->o.persona->name, alt, v->o.pool_over_hbm);
	printf("mode=%s\ntrace=%s\n", mode, trace);
	if (v->o.trace)
		printf("trace_format=%s\ntrace_truncated=%d\nmax_ctx=%d\n", v->s.format,
		       v->s.truncated, v->o.max_ctx);
	if (v->o.trace && !v->o.closed)    /* goodput: per trace second */
		printf("time_scale=%.6g\nslo_ttft_ms=%.3f\nslo_tpot_ms=%.3f\nslo_met=%d\n"
		       "goodput_rps=%.4f\n", v->o.time_scale, v->o.slo_ttft_ms, v->o.slo_tpot_ms,
		       met, met / (span * v->o.time_scale));
	printf("seed=%" PRIu64 "\ndevice_bytes=%zu\nkv_budget_bytes=%" PRIu64 "\npool_blocks=%u\n"
	       "host_blocks=%u\npool_capped=%d\n", v->o.seed, v->dev_total, v->kv_budget, v->nr_blocks,
	       v->nr_host, v->pool_capped);
	printf("requests=%d\nsteps=%" PRIu64 "\noutput_tokens=%" PRIu64 "\nprompt_tokens=%" PRIu64
	       "\nhit_tokens=%" PRIu64 "\nhost_hit_tokens=%" PRIu64 "\ncomputed_tokens=%" PRIu64
	       "\n", n, v->steps, v->out_tokens, v->prompt_tokens, v->hit_tokens,
	       v->host_hit_tokens, v->computed_tokens);
	printf("span_s=%.6f\nidle_s=%.6f\nprefill_flops=%" PRIu64 "\n", span, v->idle_s,
	       v->prefill_flops);
	printf("running_kv_max_bytes=%" PRIu64 "\nsteps_running_kv_over_fit=%" PRIu64
	       "\nsteps_running_kv_over_fit_1_5=%" PRIu64 "\n",
	       (uint64_t)v->running_blocks_max * (uint64_t)v->kv_regions * v->block_region,
	       v->steps_over_fit, v->steps_over_fit15);
	printf("output_tokens_per_s=%.1f\nrequests_per_s=%.2f\nttft_ms_p50=%.3f\nttft_ms_p99=%.3f\n"
	       "tpot_ms_p50=%.4f\ntpot_ms_p99=%.4f\nprefix_hit_rate=%.4f\n", tps, rps, p50, p99,
	       q50, q99, hit);
	printf("bytes_htod=%" PRIu64 "\nbytes_dtoh=%" PRIu64 "\nbytes_remote=%" PRIu64
	       "\nbytes_offload_out=%" PRIu64 "\nbytes_offload_in=%" PRIu64 "\nbytes_tables=%" PRIu64
	       "\nbytes_link=%" PRIu64 "\nfaults=%" PRIu64 "\nevictions=%" PRIu64 "\n",
	       b->bytes_htod - a->bytes_htod, b->bytes_dtoh - a->bytes_dtoh,
	       b->bytes_remote - a->bytes_remote, v->bytes_offload_out, v->bytes_offload_in,
	       v->bytes_tables, link, b->faults - a->faults, b->evictions - a->evictions);
	printf("fresh_blocks=%" PRIu64 "\nfresh_far_bytes=%" PRIu64 "\n", v->fresh_blocks,
	       v->fresh_far_bytes);
	printf("table_row_bytes=%zu\nmax_step_upload_bytes=%" PRIu64 "\ngraph_launches=%" PRIu64
	       "\ngraph_updates=%" PRIu64 "\n", (size_t)(v->o.persona == &sv_vllm_v1_triton ? v->stride : v->width) * sizeof(int32_t),
	       v->max_upload,
	       v->graph_launches, v->graph_updates);
	if (v->host_kv)
		printf("kv_memory=host\ncpu_attn_gbps=%.3f\ncpu_attn_bytes=%" PRIu64
		       "\ncpu_attn_s=%.6f\n", v->o.cpu_attn_gbps, v->cpu_attn_bytes, v->cpu_attn_s);
	sv_persona_facts(v);
	printf("tables=device\nverified=%" PRIu64 "\ncorrupt=%" PRIu64 "\nresult=%s\n", v->checked,
	       v->bad, v->bad ? "corrupt" : "ok");
	printf("serve: alt=%s pool_over_hbm=%.0f output_tokens_per_s=%.1f requests_per_s=%.2f "
	       "ttft_ms_p50=%.3f ttft_ms_p99=%.3f tpot_ms_p50=%.4f tpot_ms_p99=%.4f "
	       "prefix_hit_rate=%.4f bytes_link=%" PRIu64 " tables=device verified=%" PRIu64
	       " corrupt=%" PRIu64 " simulated=1 persona=%s mode=%s trace=%s\n", alt,
	       v->o.pool_over_hbm, tps, rps, p50, p99, q50, q99, hit, link, v->checked, v->bad,
	       v->o.persona->name, mode, trace);
	free(ttft);
	free(tpot);
}

int main(int argc, char **argv)
{
	static struct sv v;
	v.prog = "serve-like";
	wl_set_prog(v.prog);
	sv_defaults(&v.o);
	sv_parse(&v.o, argc, argv);
	if (v.o.trace)                   /* a bad file fails before the GPU is touched */
		sv_trace_load(&v.o, &v.s);
	if (v.o.trace_stats) {
		sv_trace_stats(&v.o, &v.s);
		return WL_EXIT_OK;
	}
	int rc = sv_init_cuda(&v);
	if (rc || (rc = sv_weights(&v)) || (rc = sv_pool(&v)))
		return rc;
	if (!v.o.trace)
		sv_make_schedule(&v.o, &v.s);
	sv_tables_init(&v);
	sv_serve(&v);
	sv_sweep(&v);
	sv_report(&v);
	if (v.bad) {
		fprintf(stderr, "serve-like: DATA CORRUPTION: %" PRIu64 " of %" PRIu64
			" stamps wrong\n", v.bad, v.checked);
		return WL_EXIT_FAIL;
	}
	return WL_EXIT_OK;
}
