// SPDX-License-Identifier: MIT
/* Launches that do not go through cuLaunchKernel, on the SIMULATED GPU
 * under the preload (tests/progs/graph_hot.c): a kernel that reads four hot
 * chunks of a redirected buffer, launched with cuLaunchKernelEx, or captured
 * into a CUDA graph (instantiated, the graph destroyed, as PyTorch does) and
 * replayed with cuGraphLaunch while the ranges it reads change. In each
 * case the launch source must find the hot chunks and the migrator promote
 * them; with the launch source off, the graph's chunks stay far (the
 * evidence came from the graph's parameters, nothing else). */
#include "kvt_trace_test.h"

static char lib[512], fakedir[512], ldpath[600], preload[600];

static int setup(void)
{
	return kvt_preload_env(lib, fakedir, ldpath, preload);
}

struct result {
	struct kvt_child c;
	char info[8192];
};

/* graph_hot MODE for 1.5 s: 5 ms epochs, 32 MiB of budget, a 10 s decay. */
static void run(struct result *r, const char *mode, const char *sources)
{
	static char tr[128], src[96];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=/tmp/kvt-test-graph.%d.trace", (int)getpid());
	snprintf(src, sizeof src, "KVTIER_SOURCES=%s", sources);
	const char *argv[] = { kvt_path("tests/progs/graph_hot"), mode, "1500", NULL };
	const char *env[] = { ldpath, preload, tr, src,
			      "KVTIER_POLICY=device => managed:cxl; * => native",
			      "KVTIER_HBM_BUDGET=32M", "KVTIER_EPOCH_MS=5", "KVTIER_DECAY_MS=10000",
			      NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&r->c, argv, env, 60), 0);
	if (r->c.exit_code)
		fprintf(stderr, "\ngraph_hot %s: exit %d\n%s%s\n", mode, r->c.exit_code, r->c.out,
			r->c.err);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_infos(tr + 13, r->info, sizeof r->info), 0);
	unlink(tr + 13);
}

static unsigned long long info(const struct result *r, const char *key)
{
	return kvt_info_u64(r->info, key, ~0ull);
}

static unsigned long long out(const struct result *r, const char *key)
{
	return kvt_out_u64(r->c.out, key);
}

static void test_launch_ex(void)
{
	static struct result r;
	run(&r, "ex", "launch,copy,cupti");
	CU_ASSERT_EQUAL_FATAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 4);
	CU_ASSERT_EQUAL(out(&r, "cold_in_hbm"), 0);
	CU_ASSERT_TRUE(info(&r, "prof.source.launch") > 0);
}

static void test_graph_replay(void)
{
	static struct result r;
	run(&r, "graph", "launch,copy,cupti");
	CU_ASSERT_EQUAL_FATAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 4);
	CU_ASSERT_EQUAL(out(&r, "cold_in_hbm"), 0);
	CU_ASSERT_EQUAL(info(&r, "prof.launch.graphs"), 1);
	CU_ASSERT_TRUE(info(&r, "prof.source.launch") > 0);
	/* the same without the launch source: nothing names the chunks */
	run(&r, "graph", "copy,cupti");
	CU_ASSERT_EQUAL_FATAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 0);
	CU_ASSERT_EQUAL(info(&r, "prof.launch.graphs"), 0);
	CU_ASSERT_EQUAL(info(&r, "migrate.promoted"), 0);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "cuLaunchKernelEx: hot chunks promoted", test_launch_ex },
		{ "graph replay: hot chunks promoted; not without the launch source",
		  test_graph_replay },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "launch", setup, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
