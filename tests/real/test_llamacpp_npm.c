// SPDX-License-Identifier: MIT
/* llama.cpp as its npm package ships it (node-llama-cpp, prebuilt CPU
 * binaries), natively and under `kvtier run` (issue 47): the suite runs
 * tests/real/llamacpp_check.sh and passes on its exit status; its lines (the
 * tokens, where the KV landed) are printed either way. Built by mk/real.mk
 * into $(BUILD)/tests/unit so that make test runs it; no npm registry, or no
 * node: passes with its one SKIP line. ~10 s on 2 cores once installed. */
#include "../unit/kvt_test.h"

static void test_llamacpp_npm(void)
{
	const char *san = getenv("SAN");
	if (san && *san) {
		/* node would host a sanitizer-built preload: not tried; the
		 * suite's point is llama.cpp's own binaries under kvtier */
		CU_PASS("skipped in sanitizer builds");
		return;
	}
	static struct kvt_child c;
	char out[600];
	snprintf(out, sizeof out, "%s/test-logs/llamacpp-npm", kvt_build_dir());
	const char *argv[] = { "/bin/sh", "-c", "exec tests/real/llamacpp_check.sh \"$0\" \"$1\"",
			       kvt_build_dir(), out, NULL };
	const char *env[] = { "KVTIER_LOG=", "KVTIER_VERBOSE=", "KVTIER_POLICY=", "KVTIER_DISABLE=",
			      "KVTIER_TRACE=", "KVTIER_INHERIT=", "KVTIER_STRICT=", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&c, argv, env, 900), 0);
	fprintf(stderr, "%s%s", c.out, c.err);
	if (c.exit_code == 77) {
		CU_PASS("skipped: no node/npm, or no npm registry");
		return;
	}
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "greedy tokens identical"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "llamacpp-npm: the KV: "));
}

static CU_TestInfo tests[] = {
	{ "llama.cpp npm package: same tokens under kvtier, KV where the trace says", test_llamacpp_npm },
	CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
	{ "llamacpp_npm", NULL, NULL, NULL, NULL, tests },
	CU_SUITE_INFO_NULL,
};

int main(void)
{
	return kvt_test_main(suites);
}
