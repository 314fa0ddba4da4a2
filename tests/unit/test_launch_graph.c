// SPDX-License-Identifier: MIT
/* Launches that do not go through cuLaunchKernel, on the SIMULATED GPU
 * under the preload (tests/progs/graph_hot.c): a kernel that reads four hot
 * chunks of a redirected buffer, launched with cuLaunchKernelEx, or captured
 * into a CUDA graph (instantiated, the graph destroyed, as PyTorch does) and
 * replayed with cuGraphLaunch while the ranges it reads change. In each
 * case the launch source must find the hot chunks and the migrator promote
 * them; with the launch source off, the graph's chunks stay far (the
 * evidence came from the graph's parameters, nothing else). And the scan
 * never reads device memory: with the kernel's ranges array in a native
 * device allocation (as a real kernel's would be) nothing is credited, even
 * where host code could read it (FAKECUDA_COHERENT=1), while the same array
 * in host memory is followed. */
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

/* graph_hot MODE for 1.5 s: 5 ms epochs, 32 MiB of budget, a 10 s decay.
 * devarg: the ranges array in device memory; only the 128 MiB buffer is
 * redirected, and extra (may be NULL) is one more variable. */
static void run_with(struct result *r, const char *mode, const char *sources, int devarg,
		     const char *extra)
{
	static char tr[128], src[96];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=/tmp/kvt-test-graph.%d.trace", (int)getpid());
	snprintf(src, sizeof src, "KVTIER_SOURCES=%s", sources);
	const char *argv[] = { kvt_path("tests/progs/graph_hot"), mode, "1500",
			       devarg ? "devarg" : NULL, NULL };
	const char *env[] = { ldpath, preload, tr, src,
			      devarg ? "KVTIER_POLICY=device,size>=64M => managed:cxl; * => native"
				     : "KVTIER_POLICY=device => managed:cxl; * => native",
			      "KVTIER_HBM_BUDGET=32M", "KVTIER_EPOCH_MS=5", "KVTIER_DECAY_MS=10000",
			      /* what the launch source's evidence alone promotes: under
			       * the default (auto) the GPU's own faults bring chunks in */
			      "KVTIER_ADMIT=remote", extra, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&r->c, argv, env, 60), 0);
	if (r->c.exit_code)
		fprintf(stderr, "\ngraph_hot %s: exit %d\n%s%s\n", mode, r->c.exit_code, r->c.out,
			r->c.err);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_infos(tr + 13, r->info, sizeof r->info), 0);
	unlink(tr + 13);
}

static void run(struct result *r, const char *mode, const char *sources)
{
	run_with(r, mode, sources, 0, NULL);
}

static unsigned long long info(const struct result *r, const char *key)
{
	return kvt_info_u64(r->info, key, ~0ull);
}

static unsigned long long out(const struct result *r, const char *key)
{
	return kvt_out_u64(r->c.out, key);
}

/* mode with the launch source on: every hot chunk promoted and no cold
 * one, on launch evidence, from graphs kept executable graphs */
static void run_hot(struct result *r, const char *mode, unsigned long long graphs)
{
	run(r, mode, "launch,copy,cupti");
	CU_ASSERT_EQUAL_FATAL(r->c.exit_code, 0);
	CU_ASSERT_EQUAL(out(r, "hot_in_hbm"), 4);
	CU_ASSERT_EQUAL(out(r, "cold_in_hbm"), 0);
	CU_ASSERT_EQUAL(info(r, "prof.launch.graphs"), graphs);
	CU_ASSERT_TRUE(info(r, "prof.source.launch") > 0);
}

static void test_launch_ex(void)
{
	static struct result r;
	run_hot(&r, "ex", 0);
}

static void test_graph_replay(void)
{
	static struct result r;
	run_hot(&r, "graph", 1);
	/* the same without the launch source: nothing names the chunks */
	run(&r, "graph", "copy,cupti");
	CU_ASSERT_EQUAL_FATAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 0);
	CU_ASSERT_EQUAL(info(&r, "prof.launch.graphs"), 0);
	CU_ASSERT_EQUAL(info(&r, "migrate.promoted"), 0);
}

/* The executable graph updated in place (cuGraphExecUpdate) from a capture
 * that reads the hot chunks, after it was instantiated from one that reads
 * nothing: kvtier reads the graph again at the update, and the hot chunks
 * are promoted as in graph mode (without the update hook the graph named
 * nothing and none was). */
static void test_graph_update(void)
{
	static struct result r;
	run_hot(&r, "update", 1);
}

/* The kernel's argument array in device memory names the hot chunks (the
 * kernel reads it: gpu_bytes), and only the launch source is on: no
 * evidence, nothing promoted, no fault in a hook (exit 0). FAKECUDA_COHERENT
 * makes device memory host-readable, so there only kvtier's own device test
 * keeps the scan out; a graph captured with it keeps nothing. The same
 * array in host memory, eager, is followed as before. */
static void test_device_argument(void)
{
	static struct result r;
	const char *modes[][2] = { { "eager", NULL }, { "eager", "FAKECUDA_COHERENT=1" },
				   { "graph", "FAKECUDA_COHERENT=1" } };
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		run_with(&r, modes[i][0], "launch", 1, modes[i][1]);
		CU_ASSERT_EQUAL_FATAL(r.c.exit_code, 0);
		CU_ASSERT(out(&r, "steps") > 0);
		CU_ASSERT(out(&r, "gpu_bytes") >= out(&r, "steps") * 4 * (64u << 10));
		CU_ASSERT_EQUAL(info(&r, "prof.source.launch"), 0);
		CU_ASSERT_EQUAL(info(&r, "prof.launch.graphs"), 0);
		CU_ASSERT_EQUAL(info(&r, "migrate.promoted"), 0);
		CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 0);
	}
	run_with(&r, "eager", "launch", 0, NULL);
	CU_ASSERT_EQUAL_FATAL(r.c.exit_code, 0);
	CU_ASSERT_TRUE(info(&r, "prof.source.launch") > 0);
	CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 4);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "cuLaunchKernelEx: hot chunks promoted", test_launch_ex },
		{ "graph replay: hot chunks promoted; not without the launch source",
		  test_graph_replay },
		{ "a graph updated in place is read again", test_graph_update },
		{ "an argument array in device memory is never read", test_device_argument },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "launch", setup, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
