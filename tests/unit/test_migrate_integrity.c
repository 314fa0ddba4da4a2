// SPDX-License-Identifier: MIT
/* Data integrity under migration, on the SIMULATED GPU: bench/migrate_integrity
 * writes and checks checksummed 2 MiB blocks of redirected device memory
 * while kvtier's migrator moves them back and forth (budget of 8 chunks for
 * 64, 1 ms epochs, fast decay, no rate cap). Zero corruptions, and the
 * migrations really happened (trace INFO migrate.promoted/demoted).
 *
 * CI size by default; `make soak-migrate` runs it long:
 *   KVT_INTEGRITY_RUNS (1)     runs, each a fresh process with its own seed
 *   KVT_INTEGRITY_ROUNDS (150) rounds per run
 *   KVT_INTEGRITY_SEED (1)     seed of the first run */
#include <time.h>

#include "kvt_test.h"
#include "kvtier/api.h"
#include "../profiler/trace_read.h"

static char lib[512], fakedir[512], ldpath[600], preload[600];

static int setup(void)
{
	return kvt_preload_env(lib, fakedir, ldpath, preload);
}

static unsigned long long env_ull(const char *k, unsigned long long d)
{
	const char *v = getenv(k);
	return v && *v ? strtoull(v, NULL, 0) : d;
}

/* the first number of INFO key=N ... in the trace */
static unsigned long long info(const char *infos, const char *key)
{
	return kvt_info_u64(infos, key, 0);
}

static unsigned long long out_val(const char *out, const char *key)
{
	const char *p = strstr(out, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static void test_integrity(void)
{
	static struct kvt_child c;
	static char infos[8192];
	static char tr[128], seed[32], rounds[32];
	unsigned long long runs = env_ull("KVT_INTEGRITY_RUNS", 1);
	unsigned long long nr_rounds = env_ull("KVT_INTEGRITY_ROUNDS", 150);
	unsigned long long s0 = env_ull("KVT_INTEGRITY_SEED", 1);
	unsigned long long pfail = 0, prom = 0, dem = 0, checked = 0, corrupt = 0, writes = 0, failed = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	snprintf(rounds, sizeof rounds, "%llu", nr_rounds);
	for (unsigned long long i = 0; i < runs; i++) {
		snprintf(tr, sizeof tr, "KVTIER_TRACE=/tmp/kvt-test-integrity.%d.trace", (int)getpid());
		snprintf(seed, sizeof seed, "%llu", s0 + i);
		const char *argv[] = { kvt_path("bench/migrate_integrity"), "16", "4", rounds, seed, NULL };
		const char *env[] = { ldpath, preload, tr,
				      "KVTIER_POLICY=device => managed:cxl; * => native",
				      "KVTIER_HBM_BUDGET=16M", "KVTIER_EPOCH_MS=1", "KVTIER_DECAY_MS=20",
				      "KVTIER_MIGRATE_RATE=0", "KVTIER_PROMOTE=1", "KVTIER_DEMOTE=1",
				      /* remote: kvtier's own promotions and demotions
				       * (auto, the default, promotes none: faults do) */
				      "KVTIER_ADMIT=remote", NULL };
		CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "\ncorrupt=0\n"));
		if (c.exit_code)
			failed++;
		checked += out_val(c.out, "checked=");
		corrupt += out_val(c.out, "corrupt=");
		writes += out_val(c.out, "writes=");
		static struct kvt_trace_reader rd;
		struct kvt_trace_item it;
		size_t n = 0;
		memset(infos, 0, sizeof infos);
		infos[n++] = '\n';
		CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&rd, tr + 13), 0);
		while (kvt_trace_next(&rd, &it) > 0)
			if (it.type == KVT_REC_INFO && n + it.text_len + 2 < sizeof infos) {
				memcpy(infos + n, it.text, it.text_len);
				n += it.text_len;
				infos[n++] = '\n';
			}
		kvt_trace_reader_close(&rd);
		unlink(tr + 13);
		/* a prefetch racing the program's cudaFree at exit fails with
		 * INVALID_VALUE (the range is gone: apply() checks the range's
		 * generation, then prefetches); seen about once in 10 runs */
		pfail += info(infos, "migrate.prefetch_failed");
		prom += info(infos, "migrate.promoted");
		dem += info(infos, "migrate.demoted");
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("\nintegrity: %llu migrations (promoted %llu + demoted %llu chunks) in %llu runs of "
	       "%llu rounds; %llu blocks written, %llu checked, %llu corrupt, %llu failed runs, "
	       "%llu failed prefetches; wall %.1f s\n", prom + dem, prom, dem, runs, nr_rounds,
	       writes, checked, corrupt, failed, pfail, wall);
	CU_ASSERT_EQUAL(corrupt, 0);
	CU_ASSERT_TRUE(pfail <= runs);
	/* the migrator really moved chunks, both ways, many times */
	CU_ASSERT_TRUE(prom > 0 && dem > 0);
	CU_ASSERT_TRUE(prom + dem >= 100 * runs);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "checksummed blocks survive back-and-forth migration", test_integrity },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "migrate_integrity", setup, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
