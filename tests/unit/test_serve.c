/* SPDX-License-Identifier: MIT */
/* CUnit suite for serve-like ($BUILD/workloads/serve-like), the serving
 * workload of bench-serve: its stamps are checked after reuse and a damaged
 * one fails the run, the prefix cache's hits come out exactly where a
 * schedule makes them computable, and every alternative runs and prints
 * its row. Child processes on the SIMULATED GPU; no assertion on speed. */
#include "unit/kvt_test.h"

#include <stdbool.h>
#include <stdint.h>

/* generous: the suite must pass beside CPU hogs */
#define SV_LIMIT_S 240

/* The value of "key=" at the start of a line, or NULL. */
static const char *sv_get(const char *out, const char *key)
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

static double sv_num(const char *out, const char *key)
{
	const char *v = sv_get(out, key);
	return v ? strtod(v, NULL) : -1;
}

/* Run serve-like with args (NULL-ended) on the stand-in, optionally under
 * libkvtier; a small run unless the args say otherwise. */
static void sv_run(struct kvt_child *c, const char *const *args, bool kvtier)
{
	static char ld[600], lib[512], fake[512], ldpath[600], pre[600];
	const char *argv[40];
	int n = 0;
	argv[n++] = kvt_path("workloads/serve-like");
	argv[n++] = "--quiet";
	for (int i = 0; args[i] && n < 38; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", kvt_path("fakecuda"));
	const char *env[4] = { ld, "FAKECUDA_RECLAIM=0", NULL, NULL };
	if (kvtier) {
		CU_ASSERT_EQUAL_FATAL(kvt_preload_env(lib, fake, ldpath, pre), 0);
		env[2] = pre;
	}
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(c, argv, env, SV_LIMIT_S), 0);
}

/* ---- correctness ---- */

static void test_serve_verifies(void)
{
	static struct kvt_child c;
	const char *args[] = { "--requests", "60", NULL };
	sv_run(&c, args, false);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(sv_get(c.out, "result"), "ok");
	CU_ASSERT_STRING_EQUAL(sv_get(c.out, "tables"), "device");
	CU_ASSERT_EQUAL(sv_num(c.out, "corrupt"), 0);
	/* every hit checks its blocks: more stamps than blocks that were hit */
	CU_ASSERT(sv_num(c.out, "verified") > sv_num(c.out, "hit_tokens") / 16);
	CU_ASSERT(sv_num(c.out, "hit_tokens") > 0);
	CU_ASSERT_EQUAL(sv_num(c.out, "requests"), 60);
}

static void test_serve_corruption_detected(void)
{
	static struct kvt_child c;
	const char *args[] = { "--requests", "30", "--inject-corruption", NULL };
	sv_run(&c, args, false);
	CU_ASSERT_EQUAL(c.exit_code, 1);
	CU_ASSERT_STRING_EQUAL(sv_get(c.out, "result"), "corrupt");
	CU_ASSERT(sv_num(c.out, "corrupt") >= 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "CORRUPTION"));
}

/* One session, three turns of 100 new tokens and 50 generated, a 64-token
 * system prompt, a pool that holds everything:
 *   turn 0: prompt 64+100        = 164, nothing cached        hit   0
 *           cached after it: (164+50-1)/16 = 13 blocks
 *   turn 1: prompt 64+150+100    = 314, 13 blocks cached      hit 208
 *           cached after it: (314+50-1)/16 = 22 blocks
 *   turn 2: prompt 64+300+100    = 464, 22 blocks cached      hit 352
 * hits 560 of 942 prompt tokens; 3 x 50 tokens generated. The running KV
 * is largest in turn 2: its stream of 464 + 50 tokens holds 33 blocks of
 * 2 x 16 tokens x 2048 bytes. */
static void test_serve_hits_one_session(void)
{
	static struct kvt_child c;
	const char *args[] = { "--sessions", "1", "--requests", "3", "--sys-tokens", "64",
			       "--turn-min", "100", "--turn-max", "100", "--out-min", "50",
			       "--out-max", "50", "--think", "0", NULL };
	sv_run(&c, args, false);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(sv_num(c.out, "prompt_tokens"), 942);
	CU_ASSERT_EQUAL(sv_num(c.out, "hit_tokens"), 560);
	CU_ASSERT_EQUAL(sv_num(c.out, "computed_tokens"), 382);
	CU_ASSERT_EQUAL(sv_num(c.out, "output_tokens"), 150);
	CU_ASSERT_DOUBLE_EQUAL(sv_num(c.out, "prefix_hit_rate"), 560.0 / 942, 1e-4);
	CU_ASSERT_EQUAL(sv_num(c.out, "running_kv_max_bytes"), 33.0 * 2 * 16 * 2048);
	CU_ASSERT_EQUAL(sv_num(c.out, "steps_running_kv_over_fit"), 0);
}

/* Two sessions, one turn each, far apart (a long think time makes the
 * second turn another session's): the second finds only the shared system
 * prompt, 4 blocks of 16 tokens. */
static void test_serve_hits_shared_prompt(void)
{
	static struct kvt_child c;
	const char *args[] = { "--sessions", "2", "--requests", "2", "--sys-tokens", "64",
			       "--turn-min", "100", "--turn-max", "100", "--out-min", "50",
			       "--out-max", "50", "--think", "1000", "--rate", "1", NULL };
	sv_run(&c, args, false);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(sv_num(c.out, "prompt_tokens"), 328);
	CU_ASSERT_EQUAL(sv_num(c.out, "hit_tokens"), 64);
	CU_ASSERT(sv_num(c.out, "idle_s") > 0);          /* the gap was skipped */
}

/* A small pool: offload's host pool serves hits the native pool lost, and
 * the blocks copied back carry their stamps. */
static void test_serve_offload_host_hits(void)
{
	static struct kvt_child nat, off;
	const char *an[] = { "--requests", "120", "--alt", "native", NULL };
	const char *ao[] = { "--requests", "120", "--alt", "offload", "--pool-over-hbm", "4", NULL };
	sv_run(&nat, an, false);
	sv_run(&off, ao, false);
	CU_ASSERT_EQUAL(nat.exit_code, 0);
	CU_ASSERT_EQUAL(off.exit_code, 0);
	CU_ASSERT(sv_num(off.out, "host_hit_tokens") > 0);
	CU_ASSERT(sv_num(off.out, "bytes_offload_in") > 0);
	CU_ASSERT(sv_num(off.out, "bytes_offload_out") > 0);
	CU_ASSERT(sv_num(off.out, "prefix_hit_rate") > sv_num(nat.out, "prefix_hit_rate"));
	/* a host hit copies one block (K and V of 16 tokens) back per 16 tokens */
	CU_ASSERT_EQUAL(sv_num(off.out, "host_hit_tokens"),
			sv_num(off.out, "bytes_offload_in") / (2.0 * 16 * 2048) * 16);
	CU_ASSERT_EQUAL(sv_num(nat.out, "host_hit_tokens"), 0);
	/* the native pool is what fits: its running KV never exceeds it */
	CU_ASSERT(sv_num(nat.out, "running_kv_max_bytes") > 0);
	CU_ASSERT(sv_num(nat.out, "running_kv_max_bytes") <= sv_num(nat.out, "kv_budget_bytes"));
	CU_ASSERT_EQUAL(sv_num(nat.out, "steps_running_kv_over_fit"), 0);
	CU_ASSERT_EQUAL(sv_num(off.out, "corrupt"), 0);
}

/* The prefill kernel costs FLOPs / (peak x efficiency): one turn alone, so
 * its TTFT is its prefill step; halving FAKECUDA_MMA_EFF adds exactly the
 * prefill's FLOPs / (790e12 x 0.5) seconds (TTFT printed to 1 us). */
static void test_serve_prefill_cost(void)
{
	static struct kvt_child c5, c25;
	static char ld[600];
	const char *argv[] = { kvt_path("workloads/serve-like"), "--quiet", "--requests", "1",
			       "--sys-tokens", "64", "--turn-min", "100", "--turn-max", "100",
			       "--out-min", "8", "--out-max", "8", NULL };
	snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", kvt_path("fakecuda"));
	const char *e5[] = { ld, "FAKECUDA_MMA_EFF=0.5", NULL };
	const char *e25[] = { ld, "FAKECUDA_MMA_EFF=0.25", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&c5, argv, e5, SV_LIMIT_S), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&c25, argv, e25, SV_LIMIT_S), 0);
	CU_ASSERT_EQUAL(c5.exit_code, 0);
	CU_ASSERT_EQUAL(c25.exit_code, 0);
	/* 164 new tokens: 164 x 1e9 + 164 x 82 x 32768 */
	double flops = sv_num(c5.out, "prefill_flops");
	CU_ASSERT_DOUBLE_EQUAL(flops, 164e9 + 164.0 * 82 * 32768, 1e3);
	CU_ASSERT_DOUBLE_EQUAL(sv_num(c25.out, "prefill_flops"), flops, 1);
	double extra_ms = flops / (790e12 * 0.5) * 1e3;
	CU_ASSERT_DOUBLE_EQUAL(sv_num(c25.out, "ttft_ms_p50") - sv_num(c5.out, "ttft_ms_p50"),
			       extra_ms, 0.002);
}

/* ---- every alternative prints its row ---- */

static void sv_check_row(const struct kvt_child *c, const char *alt)
{
	char want[64];
	snprintf(want, sizeof want, "serve: alt=%s pool_over_hbm=2 ", alt);
	CU_ASSERT_EQUAL(c->exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c->out, want));
	CU_ASSERT(sv_num(c->out, "output_tokens_per_s") > 0);
	CU_ASSERT(sv_num(c->out, "ttft_ms_p50") > 0);
	CU_ASSERT(sv_num(c->out, "tpot_ms_p99") >= sv_num(c->out, "tpot_ms_p50"));
	CU_ASSERT_STRING_EQUAL(sv_get(c->out, "result"), "ok");
	if (!strstr(c->out, want))
		fprintf(stderr, "%s\n%s\n", c->out, c->err);
}

static void test_serve_alternatives(void)
{
	static const char *const alts[] = { "native", "offload", "uvm", "oracle" };
	for (size_t i = 0; i < sizeof alts / sizeof alts[0]; i++) {
		static struct kvt_child c;
		const char *args[] = { "--requests", "40", "--alt", alts[i], "--pool-over-hbm", "2",
				       NULL };
		sv_run(&c, args, false);
		sv_check_row(&c, alts[i]);
	}
}

/* kvtier's row: the N x pool from plain cudaMalloc does not fit alone
 * (out of memory, exit 3) and runs under libkvtier. */
static void test_serve_kvtier(void)
{
	static struct kvt_child c;
	const char *args[] = { "--requests", "40", "--alt", "kvtier", "--pool-over-hbm", "2", NULL };
	sv_run(&c, args, false);
	CU_ASSERT_EQUAL(c.exit_code, 3);
	CU_ASSERT_STRING_EQUAL(sv_get(c.out, "result"), "oom");
	sv_run(&c, args, true);
	sv_check_row(&c, "kvtier");
}


/* ---- server personas (docs/workloads.md "Server personas") ---- */

static const char *const sv_personas[] = { "vllm-v2", "vllm-v1-fa", "vllm-v1-triton", "sglang",
					   "llamacpp" };

/* The kernel= line of the kernel whose name holds part, or NULL. */
static const char *sv_kernel(const char *out, const char *part)
{
	for (const char *p = strstr(out, "kernel="); p; p = strstr(p + 1, "\nkernel=")) {
		if (*p == '\n')
			p++;
		const char *end = strchr(p, '\n');
		const char *hit = strstr(p, part);
		if (hit && (!end || hit < end))
			return p;
	}
	return NULL;
}

/* Parameter i of a kernel= line: offset and size, as the driver reports. */
static int sv_param(const char *line, int i, unsigned *off, unsigned *size)
{
	const char *p = line ? strstr(line, " params=") : NULL;
	const char *end = line ? strchr(line, '\n') : NULL;
	if (!p || (end && p > end))
		return -1;
	p += 8;
	for (int k = 0; k < i; k++) {
		p = strchr(p, ',');
		if (!p || (end && p > end))
			return -1;
		p++;
	}
	return sscanf(p, "%u:%u", off, size) == 2 ? 0 : -1;
}

/* Every persona serves, reuses blocks and verifies them, natively and in
 * an N x pool under libkvtier; llama.cpp's own offload (--no-kv-offload)
 * too, from an N x cache in host memory that no kernel reads. */
static void test_serve_personas_verify(void)
{
	/* under ThreadSanitizer only the runs under libkvtier: the native ones
	 * have no kvtier thread to race (ASan and the plain build run both) */
	const char *san = getenv("SAN");
	int tsan = san && strstr(san, "thread");
	for (size_t i = 0; i < sizeof sv_personas / sizeof sv_personas[0]; i++) {
		static struct kvt_child c;
		for (int kv = tsan; kv < 2; kv++) {
			/* --pool-force: sglang and llamacpp too take the N x pool under kvtier */
			const char *args[] = { "--requests", "40", "--persona", sv_personas[i],
					       "--alt", kv ? "kvtier" : "native", "--pool-over-hbm",
					       "2", "--pool-force", NULL };
			sv_run(&c, args, kv);
			CU_ASSERT_EQUAL(c.exit_code, 0);
			CU_ASSERT_STRING_EQUAL(sv_get(c.out, "persona"), sv_personas[i]);
			CU_ASSERT_STRING_EQUAL(sv_get(c.out, "result"), "ok");
			CU_ASSERT_EQUAL(sv_num(c.out, "corrupt"), 0);
			CU_ASSERT(sv_num(c.out, "verified") > sv_num(c.out, "hit_tokens") / 16);
			CU_ASSERT(sv_num(c.out, "hit_tokens") > 0);
			if (kv)
				CU_ASSERT_EQUAL(sv_num(c.out, "pool_capped"), 0);
			if (c.exit_code)
				fprintf(stderr, "%s %s: %s\n", sv_personas[i], kv ? "kvtier" : "native",
					c.err);
		}
	}
	static struct kvt_child c;
	const char *args[] = { "--requests", "40", "--persona", "llamacpp", "--alt", "offload",
			       "--pool-over-hbm", "2", NULL };
	sv_run(&c, args, false);
	sv_check_row(&c, "offload");
	CU_ASSERT_EQUAL(sv_num(c.out, "corrupt"), 0);
	CU_ASSERT(sv_num(c.out, "verified") > sv_num(c.out, "hit_tokens") / 16);
	CU_ASSERT(sv_num(c.out, "hit_tokens") > 0);
	CU_ASSERT_STRING_EQUAL(sv_get(c.out, "kv_memory"), "host");
	/* the N x cache: twice the blocks the budget holds, no host pool */
	CU_ASSERT_EQUAL(sv_num(c.out, "pool_blocks"),
			2 * (sv_num(c.out, "kv_budget_bytes") / (2.0 * 16 * 2048)));
	CU_ASSERT_EQUAL(sv_num(c.out, "host_blocks"), 0);
	CU_ASSERT_PTR_NULL(sv_kernel(c.out, "flash_attn_ext"));    /* attention on the CPU */
	CU_ASSERT_PTR_NULL(sv_kernel(c.out, "k_set_rows"));
	CU_ASSERT_PTR_NOT_NULL(sv_kernel(c.out, "gemm"));
}

/* SGLang sizes its pool from free memory and clamps a larger
 * --max-total-tokens to it, and llama.cpp's --fit (on by default) sizes an
 * unset -c to the free memory, each with its own words: unmodified under
 * kvtier (which reports the device's free memory) both keep the pool that
 * fits; --pool-force (llama.cpp: -c given) takes the N x pool. vLLM takes
 * the number it is given (kv_cache_memory_bytes). */
static void test_serve_pool_capped(void)
{
	static const char *const capped[][2] = {
		{ "sglang", "is larger than the profiled value" },
		{ "llamacpp", "llama_params_fit_impl: context size reduced from" },
	};
	double fit = 0;
	for (size_t i = 0; i < sizeof capped / sizeof *capped; i++) {
		static struct kvt_child c, f;
		const char *args[] = { "--requests", "20", "--persona", capped[i][0], "--alt",
				       "kvtier", "--pool-over-hbm", "2", NULL };
		sv_run(&c, args, true);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		CU_ASSERT_EQUAL(sv_num(c.out, "pool_capped"), 1);
		fit = sv_num(c.out, "kv_budget_bytes") / (2.0 * 16 * 2048);   /* K and V, 1 layer */
		CU_ASSERT_EQUAL(sv_num(c.out, "pool_blocks"), fit);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.err, capped[i][1]));
		if (!strstr(c.err, capped[i][1]))
			fprintf(stderr, "%s: %.400s\n", capped[i][0], c.err);
		char says[96];    /* the tokens asked for and kept */
		snprintf(says, sizeof says, "%s %.0f to %.0f\n", capped[i][1], 2 * 16 * fit, 16 * fit);
		if (i == 1)
			CU_ASSERT_PTR_NOT_NULL(strstr(c.err, says));
		/* a few requests: the forced cache is read whole every step (slow
		 * under ThreadSanitizer), and only its size is checked */
		const char *forced[] = { "--requests", "3", "--persona", capped[i][0], "--alt",
					 "kvtier", "--pool-over-hbm", "2", "--pool-force", NULL };
		sv_run(&f, forced, true);
		CU_ASSERT_EQUAL(f.exit_code, 0);
		CU_ASSERT_EQUAL(sv_num(f.out, "pool_capped"), 0);
		CU_ASSERT_EQUAL(sv_num(f.out, "pool_blocks"), 2 * fit);
		CU_ASSERT_PTR_NULL(strstr(f.err, capped[i][1]));
	}
	/* vllm-v2 at 2x: the N x pool, no clamp */
	static struct kvt_child f;
	const char *v2[] = { "--requests", "20", "--persona", "vllm-v2", "--alt", "kvtier",
			     "--pool-over-hbm", "2", NULL };
	sv_run(&f, v2, true);
	CU_ASSERT_EQUAL(sv_num(f.out, "pool_capped"), 0);
	CU_ASSERT_EQUAL(sv_num(f.out, "pool_blocks"), 2 * fit);
}

/* llama.cpp --no-kv-offload charges its CPU attention: one session, two
 * turns (164 prompt tokens, then 284 with 176 cached; 20 out each): 2
 * prefill and 38 decode ubatches, 310 new rows. Turn 1's ubatches see
 * cells [0, 256), turn 2's [0, 512) (its new blocks follow turn 1's cached
 * ones); per ubatch the CPU reads K and V of those cells and writes the
 * new rows: 2 x 2048 x (20 x 256 + 20 x 512 + 310) bytes. Without virtual
 * time the steps are the same at any bandwidth, so halving it lengthens
 * the run by exactly the CPU time charged at the first (printed to 1 us);
 * Q, K and V go down and the output up: 4 x 310 rows on the link besides
 * the token and position uploads. */
static void test_serve_llamacpp_cpu_attention(void)
{
	static struct kvt_child c;
	double span[2], tpot[2], cpu_s[2];
	for (int i = 0; i < 2; i++) {
		const char *a[] = { "--sessions", "1", "--requests", "2", "--sys-tokens", "64",
				    "--turn-min", "100", "--turn-max", "100", "--out-min", "20",
				    "--out-max", "20", "--persona", "llamacpp", "--alt", "offload",
				    "--cpu-attn-gbps", i ? "200" : "400", NULL };
		sv_run(&c, a, false);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		CU_ASSERT_EQUAL(sv_num(c.out, "steps"), 40);
		CU_ASSERT_EQUAL(sv_num(c.out, "cpu_attn_bytes"),
				2.0 * 2048 * (20 * 256 + 20 * 512 + 310));
		CU_ASSERT_EQUAL(sv_num(c.out, "bytes_tables"), 2 * 4 * 310);
		CU_ASSERT_EQUAL(sv_num(c.out, "bytes_link"), 4 * 310 * 2048 + 2 * 4 * 310);
		span[i] = sv_num(c.out, "span_s");
		tpot[i] = sv_num(c.out, "tpot_ms_p50");
		cpu_s[i] = sv_num(c.out, "cpu_attn_s");
		CU_ASSERT_DOUBLE_EQUAL(cpu_s[i], sv_num(c.out, "cpu_attn_bytes") /
				       (i ? 200e9 : 400e9), 1e-6);
	}
	CU_ASSERT(cpu_s[0] > 100e-6);
	CU_ASSERT_DOUBLE_EQUAL(cpu_s[1], 2 * cpu_s[0], 2e-6);
	CU_ASSERT_DOUBLE_EQUAL(span[1] - span[0], cpu_s[0], 2e-6);
	CU_ASSERT(tpot[1] > tpot[0]);
}

/* What a run under libkvtier with a trace needs: the preload settings
 * (*pre), KVTIER_TRACE=<tmp>/kvt-<tag>-<pid>.trace (*tr, its path in
 * *trace) and serve-like's path (*bin); static buffers, one set per test. */
struct sv_traced {
	char lib[512], fake[512], ldpath[600], pre[600], tr[600], trace[256], bin[512];
};

static void sv_traced_env(struct sv_traced *t, const char *tag)
{
	CU_ASSERT_EQUAL_FATAL(kvt_preload_env(t->lib, t->fake, t->ldpath, t->pre), 0);
	snprintf(t->trace, sizeof t->trace, "%s/kvt-%s-%d.trace",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag, (int)getpid());
	snprintf(t->tr, sizeof t->tr, "KVTIER_TRACE=%s", t->trace);
	snprintf(t->bin, sizeof t->bin, "%s", kvt_path("workloads/serve-like"));
}

/* The hybrid persona (persona_hybrid.c): a sliding-window and a
 * full-attention pool, in TensorRT-LLM's order (window pool first) and in
 * llama.cpp's (full first, both zeroed: the window pool comes after the
 * main KV took most of free memory). Natively and under libkvtier it
 * serves and verifies; under libkvtier its trace, replayed through the
 * default policy (kvtier replay), has both pools as KV allocations on the
 * far tier (managed:cxl) in TensorRT-LLM's order, the full pool only in
 * llama.cpp's (the window pool is then a late pool: not placed by default). */
static void test_serve_hybrid(void)
{
	static struct kvt_child c, rp;
	static struct sv_traced t;
	sv_traced_env(&t, "hybrid");
	char *const fake = t.fake, *const pre = t.pre, *const tr = t.tr, *const trace = t.trace,
		   *const bin = t.bin;
	for (int order = 0; order < 2; order++) {
		const char *ko = order ? "full-first" : "windows";
		const char *nat[] = { "--requests", "40", "--persona", "hybrid", "--kv-order", ko,
				      NULL };
		sv_run(&c, nat, false);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		CU_ASSERT_STRING_EQUAL(sv_get(c.out, "result"), "ok");
		CU_ASSERT_EQUAL(sv_num(c.out, "corrupt"), 0);
		CU_ASSERT(sv_num(c.out, "verified") > 0);
		CU_ASSERT_EQUAL(sv_num(c.out, "window_layers"), 1);
		CU_ASSERT_EQUAL(sv_num(c.out, "full_layers"), 1);
		CU_ASSERT(sv_num(c.out, "window_pool_bytes") > 0);
		CU_ASSERT(sv_num(c.out, "window_pool_bytes") < sv_num(c.out, "full_pool_bytes") / 4);
		CU_ASSERT(sv_num(c.out, "window_blocks_released") > 0);
		if (c.exit_code)
			fprintf(stderr, "hybrid %s native: %s\n", ko, c.err);

		const char *argv[] = { bin, "--quiet", "--requests", "40", "--persona", "hybrid",
				       "--kv-order", ko, "--alt", "kvtier", "--pool-over-hbm", "2",
				       NULL };
		char ld[600];
		snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", fake);
		const char *env[] = { ld, "FAKECUDA_RECLAIM=0", pre, tr, "KVTIER_POLICY=", NULL };
		unlink(trace);
		CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&c, argv, env, SV_LIMIT_S), 0);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		CU_ASSERT_STRING_EQUAL(sv_get(c.out, "result"), "ok");
		CU_ASSERT_EQUAL(sv_num(c.out, "corrupt"), 0);
		CU_ASSERT(sv_num(c.out, "hit_tokens") > 0);
		CU_ASSERT(sv_num(c.out, "window_hit_blocks") > 0);   /* window blocks reused, checked */
		CU_ASSERT(sv_num(c.out, "verified") > sv_num(c.out, "hit_tokens") / 16);
		if (c.exit_code)
			fprintf(stderr, "hybrid %s kvtier: %s\n", ko, c.err);

		const char *rargv[] = { kvt_path("kvtier"), "replay", trace, NULL };
		CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&rp, rargv, NULL, SV_LIMIT_S), 0);
		unsigned kv = 0, far = 0;
		for (const char *p = rp.out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
			const char *e = strchr(p, '\n') ? strchr(p, '\n') : p + strlen(p);
			const char *m = strstr(p, "[kv");
			if (!m || m > e)
				continue;
			kv++;
			const char *cxl = strstr(p, "managed:cxl");
			far += cxl && cxl < e;
		}
		/* full-first (llama.cpp's iswa order): the window pool comes after
		 * a pool that took most of free memory, a late pool, which the
		 * default classifier reports (late-kv) but does not place
		 * (docs/policy.md): both KV, one far */
		unsigned want = order ? 1 : 2;
		CU_ASSERT_EQUAL(kv, 2u);
		CU_ASSERT_EQUAL(far, want);
		if (kv != 2 || far != want)
			fprintf(stderr, "hybrid %s: kvtier replay:\n%s\n", ko, rp.out);
		unlink(trace);
	}
	const char *off[] = { "--requests", "10", "--persona", "hybrid", "--alt", "offload", NULL };
	sv_run(&c, off, false);
	CU_ASSERT_EQUAL(c.exit_code, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "does not support hybrid"));
}

/* vllm-v2 keeps its block table on the GPU: under libkvtier the V2
 * decoders (profiler/decode_vllm.c) name its two kernels, keep the table in
 * shadow and feed the step's rows to the tables source under the address
 * attention names, whose layout is then learned at the block stride
 * (16 tokens x 2048 bytes), with no mismatch. */
static void test_serve_v2_decoded(void)
{
	static struct kvt_child c, dp;
	static struct sv_traced tv;
	sv_traced_env(&tv, "v2");
	char *const fake = tv.fake, *const pre = tv.pre, *const tr = tv.tr, *const trace = tv.trace,
		   *const bin = tv.bin;
	const char *argv[] = { bin, "--quiet", "--requests", "120", "--persona", "vllm-v2",
			       "--alt", "kvtier", "--pool-over-hbm", "4", NULL };
	char ld[600];
	snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", fake);
	const char *env[] = { ld, "FAKECUDA_RECLAIM=0", "FAKECUDA_VTIME=1", pre, tr, NULL };
	unlink(trace);
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&c, argv, env, SV_LIMIT_S), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(sv_get(c.out, "result"), "ok");
	CU_ASSERT_EQUAL(sv_num(c.out, "corrupt"), 0);
	CU_ASSERT_EQUAL(sv_num(c.out, "num_computed_restaged"), 0);
	CU_ASSERT(sv_num(c.out, "num_computed_checked") > 0);
	CU_ASSERT_EQUAL(sv_num(c.out, "num_computed_bad"), 0);
	static char cmd[1400];                    /* the info lines: the whole dump is larger */
	snprintf(cmd, sizeof cmd, "'%s' dump '%s' | grep '^info prof'", kvt_path("kvtier"), trace);
	const char *dargv[] = { "/bin/sh", "-c", cmd, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&dp, dargv, NULL, SV_LIMIT_S), 0);
	const char *d = strstr(dp.out, "info prof.decode=");
	const char *t = strstr(dp.out, "info prof.tables=");
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	unsigned long long fn, matched, launches, fed, mism, acc, stride;
	CU_ASSERT_EQUAL(sscanf(d, "info prof.decode=functions=%llu matched=%llu launches=%llu "
			       "fed=%llu mismatches=%llu", &fn, &matched, &launches, &fed, &mism), 5);
	CU_ASSERT_EQUAL(matched, 5);              /* apply, gather, prep, slots, cache write */
	CU_ASSERT_EQUAL(mism, 0);
	CU_ASSERT(fed > 100);
	/* the blocks taken fresh: each told once, when its first token is
	 * written (those of the first steps, before the kernels were named,
	 * are not); their dead pages dropped, and every block still verifies
	 * (corrupt above: the stand-in poisons what is dropped) */
	const char *fr = strstr(d, "fresh="), *kk = strstr(d, "kv_known="), *dd = strstr(d, " dead=");
	CU_ASSERT_PTR_NOT_NULL_FATAL(fr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(kk);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dd);
	unsigned long long fresh = strtoull(fr + 6, NULL, 10), taken = sv_num(c.out, "fresh_blocks");
	CU_ASSERT(fresh <= taken && fresh * 10 >= taken * 9);
	CU_ASSERT_EQUAL(strtoull(kk + 9, NULL, 10), 2);   /* K and V, from reshape_and_cache_flash */
	CU_ASSERT(strtoull(dd + 6, NULL, 10) > 0);
	CU_ASSERT(launches > fed);                /* each step: a gather, and an apply when it appends */
	const char *a = strstr(t, "accepted="), *st = strstr(t, "stride=");
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	acc = strtoull(a + 9, NULL, 10);
	stride = strtoull(st + 7, NULL, 10);
	CU_ASSERT(acc >= 1);
	CU_ASSERT_EQUAL(stride, 32768);
	if (matched != 5 || mism || stride != 32768)
		fprintf(stderr, "vllm-v2 kvtier: %.300s\n%.400s\n", d, t);
	unlink(trace);
}

/* vllm-v2's request state (vllm/v1/worker/gpu/states.py, input_batch.py):
 * _prepare_pos_seq_lens_kernel(pos, seq_lens, idx_mapping,
 * query_start_loc, num_computed_tokens: five pointers, max_num_reqs: int32)
 * reads num_computed_tokens from a device tensor that _apply_write_kernel
 * (6 x 8 B) sets when a request is added and _post_update_kernel
 * (13 x 8 B: pointers and int64 strides) advances after each step. Its UVA
 * buffers: indices, starts, cu_lens for each of the two staged-write
 * tensors (block table, num_computed_tokens) and num_blocks, none for
 * num_computed_tokens itself. Each step's device value, read back at no
 * cost, is the scheduler's; the host mirror never needs staging again. */
static void sv_check_v2(const struct kvt_child *c)
{
	unsigned off, size;
	const char *k = sv_kernel(c->out, "_prepare_pos_seq_lens_kernel");
	CU_ASSERT(k && strstr(k, " nparams=6\n") != NULL);
	for (int i = 0; i < 6; i++)
		CU_ASSERT(sv_param(k, i, &off, &size) == 0 && off == 8u * i &&
			  size == (i < 5 ? 8u : 4u));
	k = sv_kernel(c->out, "_post_update_kernel");
	CU_ASSERT(k && strstr(k, " nparams=13\n") != NULL);
	for (int i = 0; i < 13; i++)
		CU_ASSERT(sv_param(k, i, &off, &size) == 0 && off == 8u * i && size == 8);
	k = sv_kernel(c->out, "_apply_write_kernel");
	CU_ASSERT(k && strstr(k, " params=0:8,8:8,16:8,24:8,32:8,40:8 nparams=6\n") != NULL);
	CU_ASSERT_EQUAL(sv_num(c->out, "uva_buffers"), 3 + 1 + 3);
	CU_ASSERT_EQUAL(sv_num(c->out, "num_computed_restaged"), 0);
	CU_ASSERT(sv_num(c->out, "num_computed_checked") > 0);
	CU_ASSERT_EQUAL(sv_num(c->out, "num_computed_bad"), 0);
	CU_ASSERT_EQUAL(sv_num(c->out, "corrupt"), 0);
	CU_ASSERT_STRING_EQUAL(sv_get(c->out, "result"), "ok");
}

/* What an interposer reads of each persona's attention kernel: FA2's
 * 528-byte Flash_fwd_params and FA3's params struct as one by-value
 * parameter, llama.cpp's flash_attn_ext with ne11 and nb11 past the 16th
 * parameter; vllm-v1-triton's built-in kernels define none. */
static void test_serve_persona_layouts(void)
{
	static struct kvt_child c;
	unsigned off, size;
	const char *fa[] = { "--requests", "10", "--persona", "vllm-v1-fa", NULL };
	sv_run(&c, fa, false);
	const char *k = sv_kernel(c.out, "flash_fwd_splitkv_kernel");
	CU_ASSERT_PTR_NOT_NULL(k);
	CU_ASSERT(k && strstr(k, " params=0:528 nparams=1\n") != NULL);
	CU_ASSERT_PTR_NOT_NULL(sv_kernel(c.out, "reshape_and_cache_flash_kernel"));
	CU_ASSERT_PTR_NOT_NULL(sv_kernel(c.out, "_compute_slot_mapping_kernel"));
	for (int i = 0; i < 2; i++) {
		const char *a[] = { "--requests", "10", "--persona", i ? "sglang" : "vllm-v2", NULL };
		sv_run(&c, a, false);
		k = sv_kernel(c.out, "FlashAttnFwdSm90");
		CU_ASSERT(k && strstr(k, " params=0:1024 nparams=1\n") != NULL);
		CU_ASSERT_PTR_NOT_NULL(sv_kernel(c.out, i ? "write_req_to_token_pool_triton"
						       : "_gather_block_tables_kernel"));
		if (!i)
			sv_check_v2(&c);
	}
	const char *lc[] = { "--requests", "10", "--persona", "llamacpp", NULL };
	sv_run(&c, lc, false);
	k = sv_kernel(c.out, "flash_attn_ext");
	CU_ASSERT(k && strstr(k, " nparams=37\n") != NULL);
	CU_ASSERT(sv_param(k, 22, &off, &size) == 0 && off == 128 && size == 4);   /* ne11 */
	CU_ASSERT(sv_param(k, 25, &off, &size) == 0 && off == 140 && size == 4);   /* nb11 */
	CU_ASSERT(sv_param(k, 15, &off, &size) == 0 && size == 12);                /* ne01: uint3 */
	const char *tr[] = { "--requests", "10", "--persona", "vllm-v1-triton", NULL };
	sv_run(&c, tr, false);
	CU_ASSERT_PTR_NULL(strstr(c.out, "kernel="));
}

/* At max_model_len 131072 (16-token blocks: 32 KiB rows) vLLM V1 uploads
 * whole rows each step; V2 uploads only appended ids; SGLang request
 * indices and lengths, never a slot id. */
static void test_serve_persona_uploads(void)
{
	static struct kvt_child c;
	double up[3], row[3];
	static const char *const p[] = { "vllm-v1-fa", "vllm-v2", "sglang" };
	for (int i = 0; i < 3; i++) {
		const char *a[] = { "--requests", "60", "--persona", p[i], "--max-ctx", "131072", NULL };
		sv_run(&c, a, false);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		up[i] = sv_num(c.out, "max_step_upload_bytes");
		row[i] = sv_num(c.out, "table_row_bytes");
		CU_ASSERT_EQUAL(row[i], 32768);
	}
	CU_ASSERT(up[0] >= 8 * row[0]);                /* eight or more whole rows in a step */
	CU_ASSERT(up[1] > 0 && up[1] < row[1] / 2);
	CU_ASSERT(up[2] > 0 && up[2] <= 5 * 8 * 64);   /* five int64 per request, 64 at most */
}

/* Decode from CUDA graphs: vllm-v2 and sglang replay graphs captured at
 * start-up; llama.cpp captures a one-token ubatch and updates the
 * instantiated graph in place; vllm-v1-fa runs eagerly here. */
static void test_serve_persona_graphs(void)
{
	static struct kvt_child c;
	for (int i = 0; i < 2; i++) {
		const char *a[] = { "--requests", "20", "--persona", i ? "sglang" : "vllm-v2", NULL };
		sv_run(&c, a, false);
		CU_ASSERT(sv_num(c.out, "graph_launches") > 0);
	}
	const char *one[] = { "--sessions", "1", "--requests", "2", "--sys-tokens", "64",
			      "--turn-min", "100", "--turn-max", "100", "--out-min", "20",
			      "--out-max", "20", "--persona", "llamacpp", NULL };
	sv_run(&c, one, false);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT(sv_num(c.out, "graph_launches") >= 2 * 19);
	CU_ASSERT(sv_num(c.out, "graph_updates") >= 2 * 19 - 1);
	const char *fa[] = { "--requests", "20", "--persona", "vllm-v1-fa", NULL };
	sv_run(&c, fa, false);
	CU_ASSERT_EQUAL(sv_num(c.out, "graph_launches"), 0);
}

/* ---- --trace: public request traces as the schedule ---- */

/* A file in $TMPDIR (or /tmp) holding text; the path is static storage. */
static const char *sv_tmp_file(char *path, size_t n, const char *suffix, const char *text)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, n, "%s/serve-trace-XXXXXX%s", dir && *dir ? dir : "/tmp", suffix);
	int fd = mkstemps(path, (int)strlen(suffix));
	CU_ASSERT_FATAL(fd >= 0);
	size_t len = strlen(text);
	CU_ASSERT_FATAL(write(fd, text, len) == (ssize_t)len);
	close(fd);
	return path;
}

/* Five Mooncake rows a second apart (ids as a file may write them, far
 * from dense), 16-token blocks, a pool that holds them all, one at a time:
 *   A 1024 tokens, ids [7 9]       nothing cached                 hit    0
 *     cached after it: its 64 whole prompt blocks (ids 7, 9)
 *   B 1500, ids [7 9 11]           blocks 0..63 (7, 9)            hit 1024
 *   C  600, ids [7 12]             blocks 0..31 (7)               hit  512
 *   D 1024, ids [7 9]              at most the prompt less one
 *                                  token: blocks 0..62            hit 1008
 *   E  100, ids [13] (D's time)    nothing                        hit    0
 * 2544 of 4248 prompt tokens; ids: 10, distinct 5. */
static const char sv_moon[] =
	"{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 8, \"hash_ids\": "
	"[1000000007, 9]}\n"
	"{\"timestamp\": 1000, \"input_length\": 1500, \"output_length\": 8, \"hash_ids\": "
	"[1000000007, 9, 11]}\n"
	"{\"timestamp\": 2000, \"input_length\": 600, \"output_length\": 8, \"hash_ids\": "
	"[1000000007, 12]}\n"
	"{\"timestamp\": 3000, \"input_length\": 1024, \"output_length\": 8, \"hash_ids\": "
	"[1000000007, 9]}\n"
	"{\"timestamp\": 3000, \"input_length\": 100, \"output_length\": 4, \"hash_ids\": [13]}\n";

static void test_serve_trace_mooncake(void)
{
	static struct kvt_child c, w, k, s, t;
	char path[256];
	sv_tmp_file(path, sizeof path, ".jsonl", sv_moon);
	const char *stats[] = { "--trace", path, "--trace-stats", NULL };
	sv_run(&s, stats, false);
	CU_ASSERT_EQUAL(s.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(sv_get(s.out, "format"), "mooncake");
	CU_ASSERT_EQUAL(sv_num(s.out, "requests"), 5);
	CU_ASSERT_EQUAL(sv_num(s.out, "prompt_tokens"), 4248);
	CU_ASSERT_EQUAL(sv_num(s.out, "block_ids"), 10);
	CU_ASSERT_EQUAL(sv_num(s.out, "distinct_block_ids"), 5);
	CU_ASSERT_DOUBLE_EQUAL(sv_num(s.out, "hit_ratio_unbounded"), 2544.0 / 4248, 1e-4);
	/* 64 Ki tokens of LRU cache hold the whole trace: the same */
	CU_ASSERT_DOUBLE_EQUAL(sv_num(s.out, "hit_ratio_lru_64k_tokens"), 2544.0 / 4248, 1e-4);
	/* D and E share 3 s; the last group spreads over the mean gap, 0.75 s */
	CU_ASSERT_DOUBLE_EQUAL(sv_num(s.out, "span_trace_s"), 3.375, 1e-6);

	const char *run[] = { "--trace", path, "--time-scale", "1", NULL };
	sv_run(&c, run, false);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sv_get(c.out, "mode"));
	CU_ASSERT_STRING_EQUAL(sv_get(c.out, "mode"), "open");
	CU_ASSERT_PTR_NOT_NULL(strstr(sv_get(c.out, "trace"), "[0+5]"));
	CU_ASSERT_EQUAL(sv_num(c.out, "prompt_tokens"), 4248);
	CU_ASSERT_EQUAL(sv_num(c.out, "hit_tokens"), 2544);
	CU_ASSERT_EQUAL(sv_num(c.out, "output_tokens"), 36);
	CU_ASSERT_EQUAL(sv_num(c.out, "corrupt"), 0);
	/* every reused block's two regions were checked at admission */
	CU_ASSERT(sv_num(c.out, "verified") >= 2 * 2544 / 16);
	CU_ASSERT_EQUAL(sv_num(c.out, "slo_met"), 5);

	/* a window: B and C alone; B finds nothing, C B's id 7 */
	const char *win[] = { "--trace", path, "--trace-start", "1", "--trace-requests", "2",
			      "--time-scale", "1", NULL };
	sv_run(&w, win, false);
	CU_ASSERT_EQUAL(w.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(sv_get(w.out, "trace"), "[1+2]"));
	CU_ASSERT_EQUAL(sv_num(w.out, "prompt_tokens"), 2100);
	CU_ASSERT_EQUAL(sv_num(w.out, "hit_tokens"), 512);

	/* a 1024-token context: A and B are cut to 1016 prompt tokens (+ 8 out),
	 * B then finds A's 63 whole blocks, at most 1015 tokens: 1008 */
	const char *cut[] = { "--trace", path, "--trace-requests", "2", "--max-ctx", "1024",
			      "--time-scale", "1", NULL };
	sv_run(&t, cut, false);
	CU_ASSERT_EQUAL(t.exit_code, 0);
	CU_ASSERT_EQUAL(sv_num(t.out, "trace_truncated"), 2);
	CU_ASSERT_EQUAL(sv_num(t.out, "prompt_tokens"), 2032);
	CU_ASSERT_EQUAL(sv_num(t.out, "hit_tokens"), 1008);

	/* closed loop under kvtier, another persona: the same blocks, verified */
	const char *kv[] = { "--trace", path, "--closed-loop", "--alt", "kvtier", "--persona",
			     "vllm-v1-fa", "--max-batch", "1", "--device-bytes", "768M",
			     "--pool-over-hbm", "2", NULL };   /* small: a zeroed pool faults in whole */
	sv_run(&k, kv, true);
	CU_ASSERT_EQUAL(k.exit_code, 0);
	if (k.exit_code)
		fprintf(stderr, "\n  under kvtier: exit %d: %.600s\n", k.exit_code, k.err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sv_get(k.out, "mode"));
	CU_ASSERT_STRING_EQUAL(sv_get(k.out, "mode"), "closed");
	CU_ASSERT_EQUAL(sv_num(k.out, "hit_tokens"), 2544);
	CU_ASSERT_EQUAL(sv_num(k.out, "corrupt"), 0);
	CU_ASSERT_STRING_EQUAL(sv_get(k.out, "result"), "ok");
	unlink(path);
}

/* Every persona replays the same five rows with the same hand-computed
 * hits (the trace model's defaults: llamacpp lowers its -ub to fit). */
static void test_serve_trace_personas(void)
{
	static const char *const personas[] = { "sglang", "llamacpp", "hybrid", "vllm-v1-triton" };
	char path[256];
	sv_tmp_file(path, sizeof path, ".jsonl", sv_moon);
	for (size_t i = 0; i < sizeof personas / sizeof *personas; i++) {
		static struct kvt_child c;
		const char *run[] = { "--trace", path, "--time-scale", "1", "--persona", personas[i],
				      NULL };
		sv_run(&c, run, false);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		CU_ASSERT_EQUAL(sv_num(c.out, "hit_tokens"), 2544);
		CU_ASSERT_EQUAL(sv_num(c.out, "corrupt"), 0);
		if (c.exit_code || sv_num(c.out, "hit_tokens") != 2544)
			fprintf(stderr, "persona %s: %.300s\n", personas[i], c.err);
	}
	unlink(path);
}

/* Azure rows: no prefixes, so nothing is shared; timestamps across
 * midnight, two rows on one timestamp spread over the mean gap. */
static void test_serve_trace_azure(void)
{
	static struct kvt_child c, s;
	char path[256];
	sv_tmp_file(path, sizeof path, ".csv",
		    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
		    "2023-11-16 23:59:59.5000000,300,10\n"
		    "2023-11-17 00:00:00.5000000,300,10\n"
		    "2023-11-17 00:00:00.5000000,200,5\n");
	const char *stats[] = { "--trace", path, "--trace-stats", NULL };
	sv_run(&s, stats, false);
	CU_ASSERT_EQUAL(s.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(sv_get(s.out, "format"), "azure");
	CU_ASSERT_EQUAL(sv_num(s.out, "requests"), 3);
	CU_ASSERT_DOUBLE_EQUAL(sv_num(s.out, "span_trace_s"), 1.25, 1e-6);
	CU_ASSERT_EQUAL(sv_num(s.out, "hit_ratio_unbounded"), 0);
	const char *run[] = { "--trace", path, "--time-scale", "1", NULL };
	sv_run(&c, run, false);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(sv_num(c.out, "prompt_tokens"), 800);
	CU_ASSERT_EQUAL(sv_num(c.out, "hit_tokens"), 0);
	CU_ASSERT_EQUAL(sv_num(c.out, "output_tokens"), 25);
	CU_ASSERT_EQUAL(sv_num(c.out, "corrupt"), 0);
	unlink(path);
}

/* The public Mooncake trace, read in place from ../shared/traces/ (never
 * copied into the project): its rows, ids and best-case hit ratio as its
 * README gives them (3,993 requests, 0.64 with an unbounded cache).
 * Skipped, with one line, where the folder is absent. */
static void test_serve_trace_public(void)
{
	static struct kvt_child c;
	static const char path[] = "../shared/traces/synthetic_trace.jsonl";
	if (access(path, R_OK)) {
		printf("\n  skipped: no %s (the public traces)\n", path);
		return;
	}
	const char *san = getenv("SAN");
	if (san && strstr(san, "thread")) {         /* one thread of parsing: nothing to check */
		printf("\n  skipped under ThreadSanitizer (single-threaded file reading)\n");
		return;
	}
	const char *stats[] = { "--trace", path, "--trace-stats", NULL };
	sv_run(&c, stats, false);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(sv_num(c.out, "requests"), 3993);
	CU_ASSERT_EQUAL(sv_num(c.out, "truncated"), 10);     /* past 131072 tokens */
	CU_ASSERT_EQUAL(sv_num(c.out, "distinct_block_ids"), 43924);
	double best = sv_num(c.out, "hit_ratio_unbounded");
	CU_ASSERT(best > 0.64 && best < 0.66);
	/* an LRU cache of the pool that fits (about 1 Mi tokens) gets far less */
	CU_ASSERT(sv_num(c.out, "hit_ratio_lru_1024k_tokens") < 0.2);
}

/* A bad trace or a bad mix of options: one line naming it, exit 2, before
 * any GPU work. */
static void test_serve_trace_errors(void)
{
	static struct kvt_child c;
	char path[256];
	sv_tmp_file(path, sizeof path, ".jsonl",
		    "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 8, "
		    "\"hash_ids\": [1, 2]}\n"
		    "{\"timestamp\": 5, \"input_length\": 1024, \"output_length\": 8, "
		    "\"hash_ids\": [1]}\n");
	const char *bad[] = { "--trace", path, NULL };
	sv_run(&c, bad, false);
	CU_ASSERT_EQUAL(c.exit_code, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, ":2: \"hash_ids\": not one id per 512-token block"));
	unlink(path);
	const char *none[] = { "--trace", "/nonexistent/trace.jsonl", NULL };
	sv_run(&c, none, false);
	CU_ASSERT_EQUAL(c.exit_code, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "No such file"));
	const char *mix[] = { "--trace", "/nonexistent/trace.jsonl", "--rate", "5", NULL };
	sv_run(&c, mix, false);
	CU_ASSERT_EQUAL(c.exit_code, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "--rate is the generator's"));
	const char *stats[] = { "--trace-stats", NULL };
	sv_run(&c, stats, false);
	CU_ASSERT_EQUAL(c.exit_code, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "need --trace FILE"));
}

static CU_TestInfo tests_serve[] = {
	{ "stamps verified after reuse, tables in device memory", test_serve_verifies },
	{ "a damaged cached block fails the run", test_serve_corruption_detected },
	{ "hits of one session's turns, exactly", test_serve_hits_one_session },
	{ "hits of a shared system prompt, exactly", test_serve_hits_shared_prompt },
	{ "offload serves host hits and copies them back intact", test_serve_offload_host_hits },
	{ "prefill costs FLOPs / (peak x FAKECUDA_MMA_EFF)", test_serve_prefill_cost },
	{ "native, offload, uvm and oracle print their rows", test_serve_alternatives },
	{ "kvtier: OOM alone, a row under libkvtier", test_serve_kvtier },
	{ "every persona verifies its blocks, natively and under kvtier", test_serve_personas_verify },
	{ "sglang and llamacpp keep the pool that fits under kvtier; --pool-force", test_serve_pool_capped },
	{ "llamacpp --alt offload charges CPU attention", test_serve_llamacpp_cpu_attention },
	{ "hybrid: two KV pools, verified, both placed under kvtier", test_serve_hybrid },
	{ "vllm-v2: its GPU table decoded in shadow, its layout learned", test_serve_v2_decoded },
	{ "persona kernels' names and parameter layouts", test_serve_persona_layouts },
	{ "persona uploads at 131072 tokens of context", test_serve_persona_uploads },
	{ "persona decode graphs, replayed and updated", test_serve_persona_graphs },
	{ "trace replay: Mooncake prefix hits exactly, windows, cuts, kvtier", test_serve_trace_mooncake },
	{ "trace replay: every persona, the same hits", test_serve_trace_personas },
	{ "trace replay: Azure rows share nothing", test_serve_trace_azure },
	{ "trace replay: bad files and options fail in one line", test_serve_trace_errors },
	{ "trace replay: the public Mooncake trace's prefix statistics", test_serve_trace_public },
	CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
	{ "serve", NULL, NULL, NULL, NULL, tests_serve },
	CU_SUITE_INFO_NULL,
};

int main(void)
{
	return kvt_test_main(suites);
}
