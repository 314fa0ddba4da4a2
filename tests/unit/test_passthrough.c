// SPDX-License-Identifier: MIT
/* With placement switched off (KVTIER_POLICY='* => native') every simulated
 * workload gives exactly the same output under kvtier as without it: the
 * same data checks, tokens/s and device counters (the virtual clock is
 * deterministic; only the wall-clock line is dropped). */
#include "kvt_test.h"

static char lib[512], fakedir[512], ldpath[600], preload[600];

static int setup(void)
{
	return kvt_preload_env(lib, fakedir, ldpath, preload);
}

static void drop_wall_lines(char *s)
{
	char *out = s;
	for (char *line = s; *line;) {
		char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line + 1) : strlen(line);
		if (!memmem(line, n, "wall", 4)) {
			memmove(out, line, n);
			out += n;
		}
		line += n;
	}
	*out = 0;
}

static void same_with_and_without(const char *workload, const char *mode, const char *kv)
{
	static struct kvt_child a, b;
	char path[256];
	snprintf(path, sizeof path, "workloads/%s", workload);
	const char *argv[] = { kvt_path(path), "--mode", mode, "--kv-over-hbm", kv,
			       "--steps", "6", NULL };
	const char *plain[] = { ldpath, NULL };
	const char *kvt[] = { ldpath, preload, "KVTIER_POLICY=* => native", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&a, argv, plain), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run(&b, argv, kvt), 0);
	CU_ASSERT_EQUAL(a.exit_code, 0);
	CU_ASSERT_EQUAL(b.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(a.out, "result=ok"));
	drop_wall_lines(a.out);
	drop_wall_lines(b.out);
	if (strcmp(a.out, b.out))
		fprintf(stderr, "%s --mode %s: outputs differ under kvtier\n", workload, mode);
	CU_ASSERT_STRING_EQUAL(a.out, b.out);
	drop_wall_lines(a.err);
	drop_wall_lines(b.err);
	CU_ASSERT_STRING_EQUAL(a.err, b.err);      /* kvtier adds no noise at the default log level */
}

/* Sanitizer builds (SAN set, 3-10x slower) run one mode per workload: the
 * hooks' paths are the same in every mode; the plain build runs all. */
static int all_modes(void)
{
	const char *san = getenv("SAN");
	return !san || !*san;
}

static void test_vllm(void)
{
	same_with_and_without("vllm-like", "native", "1");
	if (!all_modes())
		return;
	same_with_and_without("vllm-like", "uvm", "2");
	same_with_and_without("vllm-like", "oracle", "2");
}

static void test_sglang(void)
{
	same_with_and_without("sglang-like", "uvm", "2");
	if (all_modes())
		same_with_and_without("sglang-like", "native", "1");
}

static void test_llamacpp(void)
{
	same_with_and_without("llamacpp-like", "oracle", "2");
	if (all_modes())
		same_with_and_without("llamacpp-like", "native", "1");
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "vllm-like: native 1x, uvm 2x, oracle 2x", test_vllm },
		{ "sglang-like: native 1x, uvm 2x", test_sglang },
		{ "llamacpp-like: native 1x, oracle 2x", test_llamacpp },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "passthrough", setup, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
