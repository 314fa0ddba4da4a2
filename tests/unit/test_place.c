// SPDX-License-Identifier: MIT
/* Placement under the simulated GPU: the policy's decisions carried out
 * (managed memory homed on the far node, pinned and mapped host memory bound
 * to it), every release path, fallbacks when the driver or the node refuses,
 * and kvtier's main job: a vLLM-like server whose KV cache is twice what
 * fits runs to completion with its data intact. */
#include "kvt_test.h"
#include "kvtier/api.h"
#include "kvtier/policy.h"
#include "../profiler/trace_read.h"

static char lib[512], fakedir[512], ldpath[600], preload[600];

static int setup(void)
{
	return kvt_preload_env(lib, fakedir, ldpath, preload);
}

#define ALL_RULES "KVTIER_POLICY=device,size>=8M => managed:cxl; async => managed:cxl; " \
		  "host => pinned:cxl; mmap,size>=16M => bind:cxl; * => native"

static int run_probe(struct kvt_child *c, const char *const extra[])
{
	const char *argv[] = { kvt_path("tests/progs/place_probe"), NULL };
	const char *env[8] = { ldpath, NULL };
	int n = 1;
	for (int i = 0; extra && extra[i] && n < 7; i++)
		env[n++] = extra[i];
	env[n] = NULL;
	return kvt_run(c, argv, env);
}

static void test_native_baseline(void)
{
	static struct kvt_child c;
	CU_ASSERT_EQUAL_FATAL(run_probe(&c, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "device0 size=16777216 rc=0 data=1 managed=0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "host rc=0 numa=default freehost=0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "mmap numa=default"));
}

static void test_rules_place_each_kind(void)
{
	static struct kvt_child c;
	const char *extra[] = { preload, ALL_RULES, NULL };
	CU_ASSERT_EQUAL_FATAL(run_probe(&c, extra), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	/* 16 MiB device memory: managed, home = host NUMA node 0 (this machine's
	 * far tier is DRAM node 0), data intact, freed once, second free refused
	 * exactly as without kvtier (refree=1: CUDA_ERROR_INVALID_VALUE). */
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out,
		"device0 size=16777216 rc=0 data=1 managed=1 home_type=3 home_id=0 free=0 refree=1"));
	/* 1 MiB: below the rule's size, native. */
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "device1 size=1048576 rc=0 data=1 managed=0"));
	/* stream-ordered: managed, and cuMemFreeAsync of it still succeeds. */
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "async rc=0 managed=1 freeasync=0"));
	/* pinned and mapped host memory carry the far node's policy. */
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "host rc=0 numa=prefer:0 freehost=0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "mmap numa=prefer:0"));
	CU_ASSERT_EQUAL(c.err_len, 0);           /* nothing to warn about */
	if (c.exit_code || c.err_len)
		fprintf(stderr, "probe: exit %d, its stderr:\n%s\n", c.exit_code, c.err);
}

static void test_missing_node(void)
{
	static struct kvt_child c;
	const char *extra[] = { preload, ALL_RULES, "KVTIER_CXL_NODES=7", NULL };
	CU_ASSERT_EQUAL_FATAL(run_probe(&c, extra), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "device0 size=16777216 rc=0 data=1 managed=0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "host rc=0 numa=default"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "]: far tier:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "far placements stay native"));
}

static void test_managed_alloc_fails(void)
{
	static struct kvt_child c;
	const char *extra[] = { preload, ALL_RULES, "FAKECUDA_FAIL=cuMemAllocManaged:1", NULL };
	CU_ASSERT_EQUAL_FATAL(run_probe(&c, extra), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "device0 size=16777216 rc=0 data=1 managed=0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "async rc=0 managed=0 freeasync=0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "placement fallback: managed_alloc_failed"));
}

static void test_register_fails(void)
{
	static struct kvt_child c;
	const char *extra[] = { preload, ALL_RULES, "FAKECUDA_FAIL=cuMemHostRegister_v2:1", NULL };
	CU_ASSERT_EQUAL_FATAL(run_probe(&c, extra), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "host rc=0 numa=default freehost=0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "placement fallback: register_failed"));
}

static void test_bad_policy(void)
{
	static struct kvt_child c, s;
	const char *extra[] = { preload, "KVTIER_POLICY=device size>=8G => managed:cxl", NULL };
	CU_ASSERT_EQUAL_FATAL(run_probe(&c, extra), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "device0 size=16777216 rc=0 data=1 managed=0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "]: KVTIER_POLICY: column"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "every allocation stays native"));
	const char *strict[] = { preload, "KVTIER_POLICY=device size>=8G => managed:cxl",
				 "KVTIER_STRICT=1", NULL };
	CU_ASSERT_EQUAL_FATAL(run_probe(&s, strict), 0);
	CU_ASSERT_EQUAL(s.exit_code, 128 + 6);         /* SIGABRT */
	CU_ASSERT_PTR_NOT_NULL(strstr(s.err, "KVTIER_STRICT=1, aborting"));
}

/* kvtier's main job: KV = 2x what fits. Native: out of memory. Under the
 * default policy: the KV tensors (and only they) go to managed memory
 * homed on the far node, the run completes and its data verifies. */
static void test_vllm_kv_twice_the_device(void)
{
	static struct kvt_child n, k;
	char tr[128];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=/tmp/kvt-test-place.%d.trace", (int)getpid());
	const char *argv[] = { kvt_path("workloads/vllm-like"), "--mode", "native",
			       "--kv-over-hbm", "2", NULL };
	const char *env_native[] = { ldpath, NULL };
	const char *env_kvt[] = { ldpath, preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&n, argv, env_native), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(n.out, "result=oom"));
	CU_ASSERT_EQUAL_FATAL(kvt_run(&k, argv, env_kvt), 0);
	CU_ASSERT_EQUAL(k.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(k.out, "result=ok"));
	CU_ASSERT_PTR_NOT_NULL(strstr(k.out, "\ncorrupt=0\n"));
	unsigned kv = 0;
	unsigned long long kv_bytes = 0;
	char *p = strstr(k.out, "kv_allocations=");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	sscanf(p, "kv_allocations=%u", &kv);
	p = strstr(k.out, "kv_allocation_bytes=");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	sscanf(p, "kv_allocation_bytes=%llu", &kv_bytes);
	CU_ASSERT_TRUE(kv >= 2);
	/* From the trace: exactly the KV-sized allocations are redirected. */
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	unsigned redirected = 0, redirected_not_kv = 0, rehomed = 0;
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&r, tr + 13), 0);
	while (kvt_trace_next(&r, &it) > 0) {
		if (it.ev && it.ev->op == KVT_OP_ALLOC && it.ev->placement != KVT_PLACE_NATIVE) {
			redirected++;
			redirected_not_kv += it.ev->size != kv_bytes;
		}
		if (it.ev && it.ev->op == KVT_OP_ADVISE && it.ev->api == KVT_API_none)
			rehomed++;
	}
	kvt_trace_reader_close(&r);
	unlink(tr + 13);
	CU_ASSERT_EQUAL(redirected, kv);
	CU_ASSERT_EQUAL(redirected_not_kv, 0);
	/* The burst's first member is provisional (managed:hbm) until confirmed. */
	CU_ASSERT_EQUAL(rehomed, 1);
}

/* ---- site~ rules see the caller's module and dynamic symbols ---- */

static void test_site_rules(void)
{
	static struct kvt_child a, b;
	const char *hit[] = { preload,
		"KVTIER_POLICY=device,size>=8M,site~*place_probe* => managed:cxl; * => native", NULL };
	const char *miss[] = { preload,
		"KVTIER_POLICY=device,size>=8M,site~*vllm* => managed:cxl; * => native", NULL };
	CU_ASSERT_EQUAL_FATAL(run_probe(&a, hit), 0);
	CU_ASSERT_EQUAL_FATAL(run_probe(&b, miss), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(a.out, "device0 size=16777216 rc=0 data=1 managed=1 home_type=3"));
	CU_ASSERT_PTR_NOT_NULL(strstr(b.out, "device0 size=16777216 rc=0 data=1 managed=0"));
}

/* ---- spreading over several far nodes (pure) ---- */

static void test_spread(void)
{
	uint64_t placed[3] = { 0, 0, 0 };
	const uint32_t equal[2] = { 5000, 5000 }, skew[2] = { 7500, 2500 };
	const uint32_t zero[3] = { 0, 10000, 0 }, none[2] = { 0, 0 };
	unsigned count[2] = { 0, 0 };
	for (int i = 0; i < 100; i++) {          /* equal weights: alternate */
		int k = kvt_policy_spread_pick(placed, equal, 2, 1 << 20);
		CU_ASSERT_TRUE_FATAL(k == 0 || k == 1);
		placed[k] += 1 << 20;
		count[k]++;
	}
	CU_ASSERT_EQUAL(count[0], 50);
	CU_ASSERT_EQUAL(count[1], 50);
	memset(placed, 0, sizeof placed);
	memset(count, 0, sizeof count);
	for (int i = 0; i < 100; i++) {          /* 3:1 bandwidth: 75 / 25 */
		int k = kvt_policy_spread_pick(placed, skew, 2, 1 << 20);
		placed[k] += 1 << 20;
		count[k]++;
	}
	CU_ASSERT_EQUAL(count[0], 75);
	CU_ASSERT_EQUAL(count[1], 25);
	memset(placed, 0, sizeof placed);
	CU_ASSERT_EQUAL(kvt_policy_spread_pick(placed, zero, 3, 4096), 1);
	CU_ASSERT_EQUAL(kvt_policy_spread_pick(placed, none, 2, 4096), -1);
	CU_ASSERT_EQUAL(kvt_policy_spread_pick(placed, equal, 0, 4096), -1);
}

/* ---- each placement call failing in turn: native, counted ---- */

static unsigned long long info_value(const char *path, const char *key)
{
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	unsigned long long v = ~0ull;
	size_t kl = strlen(key);
	if (kvt_trace_reader_open(&r, path))
		return v;
	while (kvt_trace_next(&r, &it) > 0)
		if (it.type == KVT_REC_INFO && it.text_len > kl && it.text_len < 120 &&
		    !strncmp(it.text, key, kl) && it.text[kl] == '=') {
			char val[128];             /* INFO text is not NUL-terminated */
			memcpy(val, it.text + kl + 1, it.text_len - kl - 1);
			val[it.text_len - kl - 1] = 0;
			v = strtoull(val, NULL, 10);
		}
	kvt_trace_reader_close(&r);
	return v;
}

static void test_each_call_failing(void)
{
	static const struct {
		const char *call, *counter, *device0;
		unsigned long long count;
	} cases[] = {
		/* device0 and the async allocation both try managed memory */
		{ "cuMemAllocManaged", "fallback.managed_alloc_failed", "managed=0", 2 },
		/* the host-NUMA home is refused: managed memory homed on plain host */
		{ "cuMemAdvise_v2", "fallback.numa_home_refused", "managed=1", 2 },
		{ "cuMemHostRegister_v2", "fallback.register_failed", "managed=1", 1 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		static struct kvt_child c;
		char fail[96], tr[128], want[160];
		snprintf(fail, sizeof fail, "FAKECUDA_FAIL=%s:1", cases[i].call);
		snprintf(tr, sizeof tr, "KVTIER_TRACE=/tmp/kvt-test-fail.%d.%zu.trace", (int)getpid(), i);
		const char *extra[] = { preload, ALL_RULES, fail, tr, NULL };
		CU_ASSERT_EQUAL_FATAL(run_probe(&c, extra), 0);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		snprintf(want, sizeof want, "device0 size=16777216 rc=0 data=1 %s", cases[i].device0);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.out, want));
		CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "host rc=0"));
		CU_ASSERT_EQUAL(info_value(tr + 13, cases[i].counter), cases[i].count);
		unlink(tr + 13);
	}
}

/* A driver that answers success to a host-NUMA home and keeps none (a real
 * H200, driver 580, device NUMA config NONE; FAKECUDA_DROP_HOST_NUMA_HOME
 * makes the stand-in do the same): the first placement reads it back,
 * warns once, and every far home becomes a plain host home, counted. */
static void test_numa_home_dropped(void)
{
	static struct kvt_child c;
	char tr[128];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=/tmp/kvt-test-numadrop.%d.trace", (int)getpid());
	/* remote: a plain host home is what remote admission falls back to
	 * (auto keeps none there: test_migrate) */
	const char *extra[] = { preload, ALL_RULES, "FAKECUDA_DROP_HOST_NUMA_HOME=1", tr,
				"KVTIER_ADMIT=remote", NULL };
	CU_ASSERT_EQUAL_FATAL(run_probe(&c, extra), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	/* home_type 2 = CU_MEM_LOCATION_TYPE_HOST (not 0: no preference at all) */
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "device0 size=16777216 rc=0 data=1 managed=1 home_type=2 "));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "async rc=0 managed=1 freeasync=0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "does not keep it"));
	CU_ASSERT_PTR_NULL(strstr(strstr(c.err, "does not keep it") ? strstr(c.err, "does not keep it") + 1 : c.err,
				  "does not keep it"));            /* said once */
	/* device0 and the async allocation: both fell back */
	CU_ASSERT_EQUAL(info_value(tr + 13, "fallback.numa_home_refused"), 2);
	unlink(tr + 13);
}

/* ---- the default policy on each workload: exactly the KV moves ---- */

static void check_default_policy(const char *workload)
{
	static struct kvt_child k;
	char path[128], tr[128];
	snprintf(path, sizeof path, "workloads/%s", workload);
	snprintf(tr, sizeof tr, "KVTIER_TRACE=/tmp/kvt-test-def.%d.trace", (int)getpid());
	const char *argv[] = { kvt_path(path), "--mode", "native", "--steps", "4", NULL };
	const char *env[] = { ldpath, preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&k, argv, env), 0);
	CU_ASSERT_EQUAL(k.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(k.out, "result=ok"));
	unsigned kv = 0;
	unsigned long long kv_bytes = 0;
	char *p = strstr(k.out, "kv_allocations=");
	char *q = strstr(k.out, "kv_allocation_bytes=");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	sscanf(p, "kv_allocations=%u", &kv);
	sscanf(q, "kv_allocation_bytes=%llu", &kv_bytes);
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	unsigned redirected = 0, wrong = 0;
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&r, tr + 13), 0);
	while (kvt_trace_next(&r, &it) > 0) {
		if (it.ev && it.ev->op == KVT_OP_ALLOC && it.ev->placement != KVT_PLACE_NATIVE) {
			redirected++;
			wrong += it.ev->size != kv_bytes;
		}
	}
	kvt_trace_reader_close(&r);
	unlink(tr + 13);
	if (redirected != kv || wrong)
		fprintf(stderr, "%s: %u redirected (%u not KV-sized), %u KV allocations\n",
			workload, redirected, wrong, kv);
	CU_ASSERT_EQUAL(redirected, kv);
	CU_ASSERT_EQUAL(wrong, 0);
}

static void test_default_policy_workloads(void)
{
	check_default_policy("vllm-like");
	check_default_policy("sglang-like");
	check_default_policy("llamacpp-like");
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "without kvtier: nothing managed, default NUMA policy", test_native_baseline },
		{ "rules place device, async, host and mmap memory", test_rules_place_each_kind },
		{ "KVTIER_CXL_NODES names a missing node: native, one message", test_missing_node },
		{ "cuMemAllocManaged failing: native fallback", test_managed_alloc_fails },
		{ "cuMemHostRegister failing: native pinned memory", test_register_fails },
		{ "bad KVTIER_POLICY: native (or abort with KVTIER_STRICT)", test_bad_policy },
		{ "vLLM-like, KV = 2x the device: runs, data intact", test_vllm_kv_twice_the_device },
		{ "default policy: exactly the KV allocations move (3 workloads)", test_default_policy_workloads },
		{ "a host-NUMA home the driver drops: plain host home, said once", test_numa_home_dropped },
		{ "each placement call failing in turn: native, counted", test_each_call_failing },
		{ "spreading over several far nodes by weight", test_spread },
		{ "site~ rules match the caller's module", test_site_rules },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "place", setup, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
