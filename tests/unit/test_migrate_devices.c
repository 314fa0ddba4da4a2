// SPDX-License-Identifier: MIT
/* The migration thread in processes that use devices other than 0, on the
 * SIMULATED GPU with two device ordinals (FAKECUDA_DEVICES=2; the stand-in's
 * ordinals share one HBM, and remember which ordinal holds each block:
 * docs/simulated-device.md). Under `kvtier run` (tests/progs/multi_dev.c):
 *  - a process that only ever uses device 1 (a tensor-parallel worker):
 *    its hot chunks are promoted to device 1, nothing is prefetched to
 *    device 0 and no context is ever made there;
 *  - a process with a buffer on each device: each buffer's hot chunks go to
 *    its own device, none to the other; the run summary names both. */
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

/* `kvtier run -- multi_dev MODE` for 1.5 s (the summary on stderr): 5 ms
 * epochs, 32 MiB of budget per device, a 10 s heat decay (a promoted hot
 * chunk stays for the whole run). */
static void run(struct result *r, const char *mode)
{
	static char tr[128];
	snprintf(tr, sizeof tr, "/tmp/kvt-test-mdev.%d.trace", (int)getpid());
	const char *argv[] = { kvt_path("kvtier"), "run", "--trace", tr, "--",
			       kvt_path("tests/progs/multi_dev"), mode, "1500", NULL };
	const char *env[] = { ldpath, "FAKECUDA_DEVICES=2",
			      "KVTIER_POLICY=device => managed:cxl; * => native",
			      "KVTIER_HBM_BUDGET=32M", "KVTIER_EPOCH_MS=5", "KVTIER_DECAY_MS=10000",
			      /* remote admission: the promotions under test are kvtier's
			       * own (under the default, auto, faults bring chunks in) */
			      "KVTIER_ADMIT=remote", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&r->c, argv, env, 60), 0);
	if (r->c.exit_code)
		fprintf(stderr, "\nmulti_dev %s: exit %d\n%s%s\n", mode, r->c.exit_code,
			r->c.out, r->c.err);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_infos(tr, r->info, sizeof r->info), 0);
	unlink(tr);
}

static unsigned long long out(const struct result *r, const char *key)
{
	return kvt_out_u64(r->c.out, key);
}

static void test_device_one_only(void)
{
	static struct result r;
	run(&r, "one");
	CU_ASSERT_EQUAL_FATAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(out(&r, "y_hot_on1"), 4);
	CU_ASSERT_EQUAL(out(&r, "y_hot_on0"), 0);
	CU_ASSERT_TRUE(out(&r, "pf_to1") >= 4);
	CU_ASSERT_EQUAL(out(&r, "pf_to0"), 0);
	CU_ASSERT_EQUAL(out(&r, "ctx_made0"), 0);      /* kvtier made no context on device 0 */
	CU_ASSERT_PTR_NOT_NULL(strstr(r.info, "\nmigrate.devices=1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.c.err, "\n  migration served device 1\n"));
	CU_ASSERT_EQUAL(kvt_info_u64(r.info, "migrate.prefetch_failed", ~0ull), 0);
	CU_ASSERT_EQUAL(kvt_info_u64(r.info, "migrate.bind_failed", ~0ull), 0);
}

static void test_two_devices(void)
{
	static struct result r;
	run(&r, "two");
	CU_ASSERT_EQUAL_FATAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(out(&r, "x_hot_on0"), 4);
	CU_ASSERT_EQUAL(out(&r, "x_hot_on1"), 0);
	CU_ASSERT_EQUAL(out(&r, "y_hot_on1"), 4);
	CU_ASSERT_EQUAL(out(&r, "y_hot_on0"), 0);
	CU_ASSERT_TRUE(out(&r, "pf_to0") >= 4);
	CU_ASSERT_TRUE(out(&r, "pf_to1") >= 4);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.info, "\nmigrate.devices=0,1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.c.err, "\n  migration served devices 0,1\n"));
	CU_ASSERT_EQUAL(kvt_info_u64(r.info, "migrate.prefetch_failed", ~0ull), 0);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "a process on device 1 only: promoted there, no context on 0",
		  test_device_one_only },
		{ "a buffer on each of two devices: each promoted to its own", test_two_devices },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "devices", setup, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
