/* SPDX-License-Identifier: MIT */
/* CUnit suite: the KV classifier on real traces of the workload programs.
 * Each workload ($BUILD/workloads/{vllm,sglang,llamacpp}-like --mode native)
 * runs on the simulated GPU under LD_PRELOAD=$BUILD/libkvtier.so with
 * KVTIER_TRACE; the trace is replayed through the default policy
 * (profiler/trace_replay.h) and checked against what the workload says it
 * allocated as KV (its kv_allocations / kv_allocation_bytes lines): every KV
 * allocation ends labelled KV, nothing else does (docs/policy.md §4). */
#include "unit/kvt_test.h"

#include <limits.h>
#include <stdint.h>

#include "kvtier/policy.h"
#include "../../profiler/registry.h"
#include "../../profiler/trace_read.h"
#include "../../profiler/trace_replay.h"

#define MAX_ALLOCS 4096
#define MAX_QUERIES 64

static struct kvt_policy pol;
static struct kvt_replay rp;
static struct kvt_replay_alloc table[MAX_ALLOCS];
static struct kvt_child child;
/* for each memory query in the trace: how many allocations preceded it */
static size_t query_after[MAX_QUERIES];
static unsigned nr_queries;

/* The value of "key=" at the start of a line of out, or NULL. */
static const char *kv_line(const char *out, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == '=')
			return p + n + 1;
	return NULL;
}

static long long kv_ll(const char *out, const char *key)
{
	const char *v = kv_line(out, key);
	return v ? strtoll(v, NULL, 10) : -1;
}

/* Run the workload under the interposer; the trace goes to trace_path. */
static int run_traced(const char *prog, const char *const *args,
		      const char *trace_path)
{
	static char pre[1024], ld[1024], tr[1024];
	char lib[PATH_MAX], fake[PATH_MAX];
	const char *argv[16];
	int n = 0;
	if (!realpath(kvt_path("libkvtier.so"), lib) ||
	    !realpath(kvt_path("fakecuda"), fake))
		return -1;
	if (snprintf(pre, sizeof pre, "LD_PRELOAD=%s", lib) >= (int)sizeof pre ||
	    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", fake) >= (int)sizeof ld ||
	    snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", trace_path) >= (int)sizeof tr)
		return -1;
	argv[n++] = kvt_path(prog);
	argv[n++] = "--mode";
	argv[n++] = "native";
	argv[n++] = "--quiet";
	for (int i = 0; args && args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	const char *env[] = { pre, ld, tr,
			      "FAKECUDA_DEVICE_BYTES=",   /* the workload's default */
			      "KVTIER_POLICY=", NULL };
	unlink(trace_path);
	if (kvt_run(&child, argv, env) != 0)
		return -1;
	if (child.exit_code)
		fprintf(stderr, "%s: exit %d\n%s\n", prog, child.exit_code, child.err);
	return child.exit_code;
}

/* The classifier ends a burst after a 5 s gap between allocations, meant
 * for real GPUs, where zero-filling a KV tensor takes well under a
 * millisecond. The simulated GPU fills it on the CPU: about 0.25 s for a
 * 282 MiB tensor in a plain build, 1-3 s under ThreadSanitizer and more on
 * a loaded machine, which once ended a vllm-like burst early (its last KV
 * tensor left unlabelled). Sanitizer builds replay with a 12x longer gap:
 * the test checks the classifier's decisions, not the build's speed. */
static void replay_init(struct kvt_replay *r, struct kvt_replay_alloc *t, size_t cap)
{
	struct kvt_policy_cls_config cfg;
	const char *san = getenv("SAN");
	kvt_replay_init(r, &pol, t, cap);
	kvt_policy_cls_config_default(&cfg);
	if (san && *san)
		cfg.burst_gap_ns *= 12;
	kvt_policy_cls_init(&r->eng.cls, &cfg);
}

/* Replay the trace into rp event by event (noting where the memory
 * queries fall), then once more through kvt_trace_replay(), which must
 * agree. Returns 0 or -1. */
static int replay_trace(const char *path)
{
	static struct kvt_trace_reader rd;
	struct kvt_trace_item it;
	int rc;
	kvt_policy_default(&pol);
	replay_init(&rp, table, MAX_ALLOCS);
	nr_queries = 0;
	struct kvt_registry *live = kvt_reg_create(12);
	CU_ASSERT_PTR_NOT_NULL_FATAL(live);
	rc = kvt_trace_reader_open(&rd, path);
	CU_ASSERT_EQUAL(rc, 0);
	if (rc) {
		fprintf(stderr, "%s: %s\n", path, rd.err);
		kvt_reg_destroy(live);
		return -1;
	}
	while ((rc = kvt_trace_next(&rd, &it)) > 0) {
		struct kvt_replay_event ev;
		if (!it.ev || kvt_trace_replay_event(live, it.ev, &ev) <= 0)
			continue;
		if (ev.op == KVT_RP_MEMINFO && nr_queries < MAX_QUERIES)
			query_after[nr_queries++] = rp.nr;
		rc = kvt_replay_feed(&rp, &ev);
		CU_ASSERT(rc == 0 || rc == -ENOENT);
		if (rc == -ENOSPC)
			break;
	}
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_TRUE(rd.saw_end);
	kvt_trace_reader_close(&rd);
	kvt_reg_destroy(live);

	/* the shared entry point `kvtier replay` uses gives the same labels */
	static struct kvt_replay again;
	char err[256] = "";
	replay_init(&again, NULL, 0);
	rc = kvt_trace_replay(path, &again, err, sizeof err);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(again.nr, rp.nr);
	for (size_t i = 0; i < rp.nr && i < again.nr; i++) {
		CU_ASSERT_EQUAL(again.allocs[i].size, rp.allocs[i].size);
		CU_ASSERT_EQUAL(again.allocs[i].kv_final, rp.allocs[i].kv_final);
	}
	free(again.allocs);
	return 0;
}

static void print_replay(const char *what)
{
	char buf[512];
	fprintf(stderr, "--- %s\n", what);
	for (size_t i = 0; i < rp.nr; i++) {
		kvt_replay_format(&rp, i, buf, sizeof buf);
		fprintf(stderr, "%s\n", buf);
	}
}

static bool is_kv_kind(uint8_t kind)
{
	return kind == KVT_KIND_DEVICE || kind == KVT_KIND_ASYNC ||
	       kind == KVT_KIND_MANAGED;
}

/* A memory query between the first large device allocation (the weights)
 * and allocation index i? */
static bool query_between_weights_and(size_t i)
{
	size_t first = SIZE_MAX;
	for (size_t k = 0; k < i; k++)
		if (is_kv_kind(rp.allocs[k].kind)) {
			first = k;
			break;
		}
	for (unsigned q = 0; q < nr_queries; q++)
		if (query_after[q] > first && query_after[q] <= i)
			return true;
	return false;
}

enum how { HOW_AT_BIRTH_OR_CONFIRMED, HOW_LLAMA };

/* Run, replay, check. kv_how says what docs/policy.md promises. */
static void check_workload(const char *prog, const char *const *args,
			   enum how kv_how, unsigned want_kv_allocs)
{
	char trace[256];
	snprintf(trace, sizeof trace, "%s/kvt-polwl-%d-%s.trace",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 strrchr(prog, '/') + 1);
	CU_ASSERT_EQUAL_FATAL(run_traced(prog, args, trace), 0);
	const char *o = child.out;
	const char *res = kv_line(o, "result");
	CU_ASSERT_TRUE(res && !strncmp(res, "ok\n", 3));
	long long nkv = kv_ll(o, "kv_allocations");
	long long kvb = kv_ll(o, "kv_allocation_bytes");
	CU_ASSERT_EQUAL(kv_ll(o, "simulated"), 1);
	CU_ASSERT_EQUAL(kv_ll(o, "kv_allocations_identical"), 1);
	CU_ASSERT_EQUAL(nkv, (long long)want_kv_allocs);
	CU_ASSERT_FATAL(nkv > 0 && kvb > 0);
	if (replay_trace(trace)) {
		unlink(trace);
		return;
	}
	unlink(trace);

	unsigned kv_seen = 0, bad = 0;
	for (size_t i = 0; i < rp.nr; i++) {
		const struct kvt_replay_alloc *a = &rp.allocs[i];
		bool is_kv = is_kv_kind(a->kind) && a->size == (uint64_t)kvb;
		if (!is_kv) {
			/* weights, activations, compute buffers, host pools */
			if (a->kv_final) {
				fprintf(stderr, "%s: allocation %zu (%llu bytes) labelled KV\n",
					prog, i + 1, (unsigned long long)a->size);
				bad++;
			}
			continue;
		}
		kv_seen++;
		if (!a->kv_final) {
			fprintf(stderr, "%s: KV allocation %zu not labelled KV\n", prog, i + 1);
			bad++;
			continue;
		}
		bool late = a->resolved && a->res.verdict == KVT_VERDICT_LATE;
		bool far = a->resolved && !late ? kvt_policy_action_is_far(&a->res.action)
						: kvt_policy_action_is_far(&a->birth.action);
		if (kv_how == HOW_LLAMA && !query_between_weights_and(i)) {
			/* "Late recognition": no memory query between the weights
			 * and the KV buffer: recognised after its zero fill,
			 * left native. */
			CU_ASSERT_TRUE(late);
			CU_ASSERT_EQUAL(a->res.reason, KVT_REASON_LATE_KV);
			CU_ASSERT_FALSE(far);
			continue;
		}
		/* armed by the memory query after the weights: KV at birth
		 * (free-memory fill) or confirmed (burst shape / zero fill),
		 * and the default rules put it on the far tier */
		CU_ASSERT_FALSE(late);
		CU_ASSERT_TRUE(far);
		if (kv_how == HOW_LLAMA) {
			/* one buffer of >= 40 % of free memory: KV at birth */
			CU_ASSERT_TRUE(a->birth.flags & KVT_DEC_KV);
			CU_ASSERT_EQUAL(a->birth.reason, KVT_REASON_RULE);
		}
	}
	CU_ASSERT_EQUAL(kv_seen, (unsigned)nkv);
	CU_ASSERT_EQUAL(bad, 0u);
	if (bad || kv_seen != (unsigned)nkv)
		print_replay(prog);
}

static void test_vllm(void)
{
	check_workload("workloads/vllm-like", NULL, HOW_AT_BIRTH_OR_CONFIRMED, 4);
}

static void test_sglang(void)
{
	check_workload("workloads/sglang-like", NULL, HOW_AT_BIRTH_OR_CONFIRMED, 8);
}

static void test_llamacpp(void)
{
	check_workload("workloads/llamacpp-like", NULL, HOW_LLAMA, 1);
}

/* The same shapes on a 2 GiB simulated device and with 8 layers. Under
 * ThreadSanitizer the device is 1 GiB (still twice the default): at 2 GiB
 * its shadow memory took one workload to 18.9 GB of resident memory
 * (/usr/bin/time) on a 24 GiB machine, and beside another TSan suite the
 * OOM killer took it (exit 137 in CI). */
static void test_scaled(void)
{
	const char *san = getenv("SAN");
	const char *big[] = { "--device-bytes", san && strstr(san, "thread") ? "1G" : "2G", NULL };
	const char *deep[] = { "--layers", "8", NULL };
	check_workload("workloads/vllm-like", big, HOW_AT_BIRTH_OR_CONFIRMED, 4);
	check_workload("workloads/sglang-like", big, HOW_AT_BIRTH_OR_CONFIRMED, 8);
	check_workload("workloads/llamacpp-like", big, HOW_LLAMA, 1);
	check_workload("workloads/vllm-like", deep, HOW_AT_BIRTH_OR_CONFIRMED, 8);
	check_workload("workloads/sglang-like", deep, HOW_AT_BIRTH_OR_CONFIRMED, 16);
}

/* The size floor follows the device the application reports. */
static void test_size_floor_scales(void)
{
	static struct kvt_policy_cls c;
	const uint64_t M = 1ull << 20, G = 1ull << 30;
	kvt_policy_cls_init(&c, NULL);
	CU_ASSERT_EQUAL(c.large_bytes, 32 * M);            /* no total known yet */
	kvt_policy_cls_meminfo(&c, 500 * M, 512 * M, 0, NULL);
	CU_ASSERT_EQUAL(c.large_bytes, 4 * M);             /* 2 MiB, floored */
	kvt_policy_cls_meminfo(&c, 2 * G, 2 * G, 0, NULL);
	CU_ASSERT_EQUAL(c.large_bytes, 8 * M);             /* total / 256 */
	kvt_policy_cls_meminfo(&c, 0, 0, 0, NULL);         /* no total: kept */
	CU_ASSERT_EQUAL(c.large_bytes, 8 * M);
	kvt_policy_cls_meminfo(&c, 100 * G, 140 * G, 0, NULL);
	CU_ASSERT_EQUAL(c.large_bytes, 32 * M);            /* real servers: capped */
	kvt_policy_cls_meminfo(&c, 20 * G, 24 * G, 0, NULL);
	CU_ASSERT_EQUAL(c.large_bytes, 32 * M);
	/* min_total_div 0: absolute min_bytes, as before */
	struct kvt_policy_cls_config cfg;
	kvt_policy_cls_config_default(&cfg);
	cfg.min_total_div = 0;
	kvt_policy_cls_init(&c, &cfg);
	kvt_policy_cls_meminfo(&c, 500 * M, 512 * M, 0, NULL);
	CU_ASSERT_EQUAL(c.large_bytes, 32 * M);
}

static CU_TestInfo wl_tests[] = {
	{ "size floor scales with the device total", test_size_floor_scales },
	{ "vllm-like trace: every KV tensor, nothing else", test_vllm },
	{ "sglang-like trace: K and V buffers, nothing else", test_sglang },
	{ "llamacpp-like trace: the KV buffer as documented", test_llamacpp },
	{ "2 GiB device (1 GiB under TSan) and 8 layers", test_scaled },
	CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
	{ "policy on workload traces", NULL, NULL, NULL, NULL, wl_tests },
	CU_SUITE_INFO_NULL,
};

int main(void)
{
	return kvt_test_main(suites);
}
