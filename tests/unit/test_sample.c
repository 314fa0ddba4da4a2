// SPDX-License-Identifier: MIT
/* The region-sampling evidence source. Part one, the adaptive regions
 * (profiler/regions.c) as pure functions on tables: layout of a new range,
 * merge and split against hand-made tables, every chunk covered exactly once
 * and the count bounded under random churn, hot chunks isolated, the same
 * seed giving the same regions. Part two, on the SIMULATED GPU under the
 * preload (tests/progs/sample_hot.c): a kernel whose reads of a few chunks
 * are computed, not passed; with KVTIER_SOURCES=launch,cupti,sample those
 * chunks are promoted, with launch,cupti they are not, and without CUPTI the
 * sample source says so once, turns itself off, and nothing breaks. Part
 * three, the stand-in's side of the probe, as measured on an H200 (driver
 * 580.159.04; docs/simulated-device.md): UNSET_ACCESSED_BY alone leaves
 * the mapping (no fault); with read-mostly set and unset after it the next
 * read faults, and migrates the block when the preference is HOST_NUMA,
 * maps it when it is HOST. */
#include <dlfcn.h>

#include "kvt_trace_test.h"
#include "fakecuda/fakecuda.h"
#include "kvtier/api.h"
#include "../profiler/regions.h"

static struct kvt_region_set set, other;

/* ---- part one: regions as tables ---- */

struct want { uint16_t range; uint32_t first, nr; uint8_t last; };

static void assert_table(const struct kvt_region_set *s, const struct want *w, uint32_t n)
{
	CU_ASSERT_EQUAL_FATAL(s->nr, n);
	for (uint32_t i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(s->r[i].range, w[i].range);
		CU_ASSERT_EQUAL(s->r[i].first, w[i].first);
		CU_ASSERT_EQUAL(s->r[i].nr, w[i].nr);
		CU_ASSERT_EQUAL(s->r[i].last, w[i].last);
	}
}

/*  range 3, 10 chunks, KVT_REGIONS_INIT = 4 equal pieces:
 *     chunk  0 1 | 2 3 4 | 5 6 | 7 8 9
 *     region  0  |   1   |  2  |   3
 *  range 1, 3 chunks: one region a chunk, sorted before range 3 */
static void test_add_layout(void)
{
	uint32_t chunks[8] = { [1] = 3, [3] = 10 };
	kvt_regions_init(&set, 64, 16, 1);
	CU_ASSERT_EQUAL(kvt_regions_add(&set, 3, 10), 0);
	CU_ASSERT_EQUAL(kvt_regions_add(&set, 1, 3), 0);
	const struct want w[] = {
		{ 1, 0, 1, 0 }, { 1, 1, 1, 0 }, { 1, 2, 1, 0 },
		{ 3, 0, 2, 0 }, { 3, 2, 3, 0 }, { 3, 5, 2, 0 }, { 3, 7, 3, 0 },
	};
	assert_table(&set, w, 7);
	CU_ASSERT_EQUAL(kvt_regions_check(&set, chunks), 0);
	CU_ASSERT_EQUAL(kvt_regions_find(&set, 3, 6), 5);
	CU_ASSERT_EQUAL(kvt_regions_find(&set, 3, 7), 6);
	CU_ASSERT_EQUAL(kvt_regions_find(&set, 3, 10), -1);
	CU_ASSERT_EQUAL(kvt_regions_find(&set, 2, 0), -1);
	CU_ASSERT_EQUAL(kvt_regions_add(&set, 3, 10), -EEXIST);
	CU_ASSERT_EQUAL(kvt_regions_add(&set, 5, 0), -EINVAL);
	CU_ASSERT_EQUAL(kvt_regions_drop(&set, 1), 3);
	CU_ASSERT_FALSE(kvt_regions_has(&set, 1));
	CU_ASSERT_TRUE(kvt_regions_has(&set, 3));
	CU_ASSERT_EQUAL(set.nr, 4);
	chunks[1] = 0;
	CU_ASSERT_EQUAL(kvt_regions_check(&set, chunks), 0);
	/* the checker itself: a gap and an overlap are caught */
	set.r[1].first++;
	CU_ASSERT_EQUAL(kvt_regions_check(&set, chunks), -EINVAL);
	set.r[1].first -= 2;
	CU_ASSERT_EQUAL(kvt_regions_check(&set, chunks), -EINVAL);
}

/* A full table makes room by merging the closest neighbours; when every
 * range is down to one region there is none. */
static void test_add_full(void)
{
	uint32_t chunks[8] = { [0] = 10, [1] = 10 };
	kvt_regions_init(&set, 4, 16, 1);
	CU_ASSERT_EQUAL(kvt_regions_add(&set, 0, 10), 0);       /* 4 regions: full */
	CU_ASSERT_EQUAL(kvt_regions_add(&set, 1, 10), 0);       /* one merge, one region */
	CU_ASSERT_EQUAL(set.nr, 4);
	CU_ASSERT_EQUAL(kvt_regions_check(&set, chunks), 0);
	CU_ASSERT_EQUAL(set.r[3].range, 1);
	CU_ASSERT_EQUAL(set.r[3].nr, 10);
	kvt_regions_init(&set, 4, 16, 1);
	for (uint16_t r = 0; r < 4; r++)
		CU_ASSERT_EQUAL(kvt_regions_add(&set, r, 1), 0);
	CU_ASSERT_EQUAL(kvt_regions_add(&set, 4, 1), -ENOSPC);
	CU_ASSERT_EQUAL(set.nr, 4);
}

/*  one range of 400 chunks (merges stop at 400 / 16 = 25 chunks), counts of
 *  one aggregation of 4 passes, threshold 4 / 10 = 0 (equal counts merge):
 *     before  |A 4 |B 4 |C 0 |D 4 |E 4 ........... (360)|
 *     after   |A+B 4    |C 0 |D 4 |E 4 ...........      |   D+E: too big
 *  4 regions of max 5: more than half, no split. */
static void test_merge_table(void)
{
	kvt_regions_init(&set, 5, 16, 1);
	const struct kvt_region in[] = {
		{ .first = 0, .nr = 10, .nr_accesses = 4 }, { .first = 10, .nr = 10, .nr_accesses = 4 },
		{ .first = 20, .nr = 10, .nr_accesses = 0 }, { .first = 30, .nr = 10, .nr_accesses = 4 },
		{ .first = 40, .nr = 360, .nr_accesses = 4 },
	};
	memcpy(set.r, in, sizeof in);
	set.nr = 5;
	kvt_regions_aggregate(&set, 4);
	const struct want w[] = { { 0, 0, 20, 4 }, { 0, 20, 10, 0 }, { 0, 30, 10, 4 }, { 0, 40, 360, 4 } };
	assert_table(&set, w, 4);
	CU_ASSERT_EQUAL(set.r[0].nr_accesses, 0);               /* counts restart */
}

/*  20 passes: threshold 20 / 10 = 2, so 20 and 18 merge (size-weighted,
 *  (20*10 + 18*10 + 10) / 20 = 19); C's 20 samples all failed, so its count
 *  is the previous aggregation's 8; D, half unknown: 5 seen + 10 * 10 / 20.
 *     before  |A 20|B 18|C ?  (last 8) .... (180)|D 5 + 10? (last 10) (200)|
 *     after   |A+B 19   |C 8                     |D 10                     | */
static void test_merge_weighted_unknown(void)
{
	kvt_regions_init(&set, 4, 16, 1);
	const struct kvt_region in[] = {
		{ .first = 0, .nr = 10, .nr_accesses = 20 }, { .first = 10, .nr = 10, .nr_accesses = 18 },
		{ .first = 20, .nr = 180, .nr_unknown = 20, .last = 8 },
		{ .first = 200, .nr = 200, .nr_accesses = 5, .nr_unknown = 10, .last = 10 },
	};
	memcpy(set.r, in, sizeof in);
	set.nr = 4;
	kvt_regions_aggregate(&set, 20);
	const struct want w[] = { { 0, 0, 20, 19 }, { 0, 20, 180, 8 }, { 0, 200, 200, 10 } };
	assert_table(&set, w, 3);
}

/*  at most half full: every region of two or more chunks splits in two
 *  inside its own span; a one-chunk region cannot.
 *     before  |0 1 2 3 4|5 6 7 8 9|   range 1: |0|
 *     after   |..|......|...|.....|            |0|  */
static void test_split(void)
{
	uint32_t chunks[4] = { [0] = 10, [1] = 1 };
	kvt_regions_init(&set, 8, 16, 5);
	const struct kvt_region in[] = {
		{ .first = 0, .nr = 5 }, { .first = 5, .nr = 5 }, { .range = 1, .first = 0, .nr = 1 },
	};
	memcpy(set.r, in, sizeof in);
	set.nr = 3;
	kvt_regions_aggregate(&set, 4);              /* 10 / 16 = 0: nothing merges */
	CU_ASSERT_EQUAL_FATAL(set.nr, 5);
	CU_ASSERT_EQUAL(kvt_regions_check(&set, chunks), 0);
	CU_ASSERT_EQUAL(set.r[0].first, 0);
	CU_ASSERT_TRUE(set.r[1].first >= 1 && set.r[1].first <= 4);
	CU_ASSERT_EQUAL(set.r[2].first, 5);
	CU_ASSERT_TRUE(set.r[3].first >= 6 && set.r[3].first <= 9);
	CU_ASSERT_EQUAL(set.r[4].range, 1);
	CU_ASSERT_EQUAL(set.r[4].nr, 1);
	/* more than half full: no split */
	kvt_regions_init(&set, 5, 16, 5);
	memcpy(set.r, in, sizeof in);
	set.nr = 3;
	kvt_regions_aggregate(&set, 4);
	CU_ASSERT_EQUAL(set.nr, 3);
}

static uint64_t xs(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* A chunk's access probability under the random workload: a few dense
 * stretches of some ranges. */
static int accessed(uint16_t range, uint32_t chunk, uint64_t *x)
{
	int hot = range % 3 == 0 && (chunk / 64) % 7 == 2;
	return hot ? xs(x) % 4 != 0 : xs(x) % 100 == 0;
}

/* One aggregation: nr_passes samples of every region. */
static void one_aggregation(struct kvt_region_set *s, uint32_t nr_passes, uint64_t *x)
{
	for (uint32_t p = 0; p < nr_passes; p++)
		for (uint32_t i = 0; i < s->nr; i++) {
			uint32_t c = kvt_regions_pick(s, i);
			int seen = xs(x) % 50 == 0 ? KVT_REGION_UNKNOWN
				 : accessed(s->r[i].range, c, x) ? KVT_REGION_ACCESSED : KVT_REGION_IDLE;
			kvt_regions_account(s, i, (enum kvt_region_seen)seen);
		}
	kvt_regions_aggregate(s, nr_passes);
}

/* Ranges come and go, counts vary: after every step the table stays within
 * its bound and covers each tracked range exactly once. */
static void test_bounded_under_churn(void)
{
	uint32_t chunks[KVT_REGIONS_MAX] = { 0 };
	uint64_t x = 12345, total_max = 0;
	kvt_regions_init(&set, 64, 8, 77);
	for (uint16_t r = 0; r < 40; r++) {
		chunks[r] = 1 + (uint32_t)(xs(&x) % 5000);
		CU_ASSERT_EQUAL(kvt_regions_add(&set, r, chunks[r]), 0);
		CU_ASSERT_TRUE(set.nr <= 64);
	}
	CU_ASSERT_EQUAL(kvt_regions_check(&set, chunks), 0);
	unsigned bad = 0, over = 0;
	for (unsigned step = 0; step < 300; step++) {
		one_aggregation(&set, 4, &x);
		if (step % 10 == 5) {                  /* one range leaves, another joins */
			uint16_t r = (uint16_t)(xs(&x) % 60);
			if (chunks[r]) {
				CU_ASSERT_TRUE(kvt_regions_drop(&set, r) >= 1);
				chunks[r] = 0;
			} else {
				chunks[r] = 1 + (uint32_t)(xs(&x) % 5000);
				CU_ASSERT_EQUAL(kvt_regions_add(&set, r, chunks[r]), 0);
			}
		}
		over += set.nr > 64;
		bad += kvt_regions_check(&set, chunks) != 0;
		if (set.nr > total_max)
			total_max = set.nr;
	}
	CU_ASSERT_EQUAL(over, 0);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_TRUE(total_max > 32);            /* it did split, up to the bound */
}

/*  64 chunks, 4 of them read in every pass (9, 22, 41, 57): within 16
 *  aggregations each is a region of its own with the full count, every
 *  other region counts 0, and it stays so. Checked for 20 seeds. */
static void test_isolates_hot_chunks(void)
{
	static const uint32_t hot[] = { 9, 22, 41, 57 };
	unsigned late = 0, lost = 0;
	for (uint64_t seed = 1; seed <= 20; seed++) {
		kvt_regions_init(&set, KVT_REGIONS_MAX, 16, seed);
		CU_ASSERT_EQUAL_FATAL(kvt_regions_add(&set, 0, 64), 0);
		int found = 0;
		for (unsigned ag = 0; ag < 24; ag++) {
			for (uint32_t p = 0; p < 4; p++)
				for (uint32_t i = 0; i < set.nr; i++) {
					uint32_t c = kvt_regions_pick(&set, i);
					int h = c == hot[0] || c == hot[1] || c == hot[2] || c == hot[3];
					kvt_regions_account(&set, i, h ? KVT_REGION_ACCESSED : KVT_REGION_IDLE);
				}
			kvt_regions_aggregate(&set, 4);
			unsigned alone = 0, warm = 0;
			for (uint32_t i = 0; i < set.nr; i++) {
				int is_hot = set.r[i].nr == 1 && (set.r[i].first == hot[0] ||
					set.r[i].first == hot[1] || set.r[i].first == hot[2] ||
					set.r[i].first == hot[3]);
				alone += is_hot && set.r[i].last == 4;
				warm += !is_hot && set.r[i].last;
			}
			int ok = alone == 4 && !warm;
			if (ok)
				found = 1;
			else if (found)
				lost++;
			if (ag == 15 && !found)
				late++;
		}
		CU_ASSERT_EQUAL(kvt_regions_check(&set, NULL), 0);
	}
	CU_ASSERT_EQUAL(late, 0);
	CU_ASSERT_EQUAL(lost, 0);
}

static void churn(struct kvt_region_set *s, uint64_t seed)
{
	uint64_t x = 99;
	kvt_regions_init(s, 256, 16, seed);
	for (uint16_t r = 0; r < 6; r++)
		kvt_regions_add(s, r, 300 + 100 * r);
	for (unsigned i = 0; i < 50; i++)
		one_aggregation(s, 4, &x);
}

static void test_deterministic(void)
{
	churn(&set, 7);
	churn(&other, 7);
	CU_ASSERT_EQUAL(set.nr, other.nr);
	CU_ASSERT_EQUAL(memcmp(set.r, other.r, set.nr * sizeof set.r[0]), 0);
	churn(&other, 8);
	CU_ASSERT_TRUE(set.nr != other.nr || memcmp(set.r, other.r, set.nr * sizeof set.r[0]));
}

/* ---- part two: the source on the simulated GPU ---- */

static char lib[512], fakedir[512], ldpath[600], preload[600];

static int setup(void)
{
	return kvt_preload_env(lib, fakedir, ldpath, preload);
}

struct result {
	struct kvt_child c;
	char info[8192];
};

/* sample_hot with 5 ms epochs, 16 chunks of budget and a 10 s heat decay
 * (a chunk found hot stays in HBM for the whole run: once there it cannot
 * fault, so only its decay decides, see docs/profiler.md). Its phases end
 * on progress, not on the clock: "hot" runs until the hot chunks are in
 * HBM and kvtier has promoted as many (its live counters; then 400 steps
 * measured), "epochs" for 300 migration epochs (the
 * second half measured); each phase gives up after 30 s, and says so
 * (limit_hit=1). A loaded machine makes the run longer, never the verdict
 * different. */
static void run(struct result *r, const char *sources, const char *extra, int until_hot)
{
	static char tr[128], src[96];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=/tmp/kvt-test-sample.%d.trace", (int)getpid());
	snprintf(src, sizeof src, "KVTIER_SOURCES=%s", sources);
	const char *argv_hot[] = { kvt_path("tests/progs/sample_hot"), "hot", "30000", NULL };
	const char *argv_ep[] = { kvt_path("tests/progs/sample_hot"), "epochs", "300", "30000", NULL };
	const char **argv = until_hot ? argv_hot : argv_ep;
	const char *env[] = { ldpath, preload, tr, src,
			      "KVTIER_POLICY=device => managed:cxl; * => native",
			      "KVTIER_HBM_BUDGET=32M", "KVTIER_EPOCH_MS=5", "KVTIER_DECAY_MS=10000",
			      /* remote admission: which evidence names the hot chunks
			       * is the question (under auto the GPU's faults do) */
			      "KVTIER_ADMIT=remote", extra, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&r->c, argv, env, 120), 0);
	if (r->c.exit_code || kvt_out_u64(r->c.out, "limit_hit"))
		fprintf(stderr, "\nsample_hot (%s): exit %d%s\n%s%s\n", sources, r->c.exit_code,
			kvt_out_u64(r->c.out, "limit_hit") ? ", a phase hit its 30 s limit" : "",
			r->c.out, r->c.err);
	CU_ASSERT_EQUAL(kvt_out_u64(r->c.out, "limit_hit"), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_infos(tr + 13, r->info, sizeof r->info), 0);
	unlink(tr + 13);
}

static unsigned long long info(const struct result *r, const char *key)
{
	return kvt_info_u64(r->info, key, ~0ull);
}

/* "key=N" inside the prof.source.sample line (its counters), or ~0. */
static unsigned long long sample_ctr(const struct result *r, const char *key)
{
	const char *l = strstr(r->info, "\nprof.source.sample=");
	const char *e = l ? strchr(l + 1, '\n') : NULL;
	char k[48];
	snprintf(k, sizeof k, " %s=", key);
	const char *p = l ? strstr(l, k) : NULL;
	return p && p < e ? strtoull(p + strlen(k), NULL, 10) : ~0ull;
}

static int sample_state_is(const struct result *r, const char *state)
{
	const char *l = strstr(r->info, "\nprof.source.sample=");
	const char *sp = l ? strchr(l, ' ') : NULL;
	return sp && !strncmp(sp + 1, state, strlen(state));
}

static unsigned long long out(const struct result *r, const char *key)
{
	return kvt_out_u64(r->c.out, key);
}

static void test_sampling_finds_hot_chunks(void)
{
	static struct result r;
	run(&r, "launch,cupti,sample", NULL, 1);
	const char *line = strstr(r.info, "\nprof.source.sample=");
	fprintf(stderr, "\n  %.*s\n", line ? (int)strcspn(line + 1, "\n") : 4, line ? line + 1 : "none");
	CU_ASSERT_EQUAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 4);
	CU_ASSERT_EQUAL(out(&r, "cold_in_hbm"), 0);
	/* the second half's hot reads came from HBM, not over the link */
	CU_ASSERT_TRUE(out(&r, "hot_hbm_bytes") > 4 * out(&r, "hot_remote_bytes"));
	CU_ASSERT_TRUE(sample_state_is(&r, "active"));
	CU_ASSERT_TRUE(info(&r, "prof.source.sample") >= 4);        /* chunks credited */
	CU_ASSERT_TRUE(sample_ctr(&r, "faulted") >= 4);
	CU_ASSERT_TRUE(sample_ctr(&r, "armed") > sample_ctr(&r, "faulted"));
	CU_ASSERT_EQUAL(sample_ctr(&r, "advise_failed"), 0);
	/* the most at once: at exit the workload has freed its ranges, and
	 * an epoch after the free drops their regions (regions=0 then; seen
	 * in CI's test stage) */
	CU_ASSERT_TRUE(sample_ctr(&r, "regions_max") >= 4 &&
		       sample_ctr(&r, "regions_max") <= KVT_REGIONS_MAX);
	CU_ASSERT_TRUE(sample_ctr(&r, "regions") <= sample_ctr(&r, "regions_max"));
	CU_ASSERT_TRUE(info(&r, "prof.cupti.records") >= 4);        /* the probes' faults */
	CU_ASSERT_TRUE(info(&r, "migrate.promoted") >= 5);          /* chunk 0 + the 4 */
	CU_ASSERT_EQUAL(info(&r, "migrate.prefetch_failed"), 0);
}

static void test_without_sampling_they_stay_far(void)
{
	static struct result r;
	run(&r, "launch,cupti", NULL, 0);
	CU_ASSERT_EQUAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 0);
	CU_ASSERT_EQUAL(out(&r, "hot_hbm_bytes"), 0);
	CU_ASSERT_TRUE(out(&r, "hot_remote_bytes") > 0);
	CU_ASSERT_TRUE(sample_state_is(&r, "off"));
	CU_ASSERT_EQUAL(info(&r, "prof.source.sample"), 0);
	CU_ASSERT_TRUE(info(&r, "prof.source.launch") > 0);         /* it saw the base */
	CU_ASSERT_TRUE(info(&r, "migrate.promoted") < 5);
}

static unsigned count(const char *hay, const char *needle)
{
	unsigned n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_without_cupti_it_turns_off(void)
{
	static struct result r;
	run(&r, "launch,cupti,sample", "FAKECUDA_CUPTI_BUSY=1", 0);
	CU_ASSERT_EQUAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(count(r.c.err, "sample source off"), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.c.err, "cupti source is busy"));
	CU_ASSERT_TRUE(sample_state_is(&r, "off (no cupti source: busy"));
	CU_ASSERT_EQUAL(info(&r, "prof.source.sample"), 0);
	CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 0);
	CU_ASSERT_TRUE(info(&r, "migrate.promoted") >= 1);          /* launch still drives it */
	CU_ASSERT_EQUAL(info(&r, "migrate.prefetch_failed"), 0);
	/* cupti not selected at all */
	run(&r, "launch,sample", NULL, 0);
	CU_ASSERT_EQUAL(r.c.exit_code, 0);
	CU_ASSERT_EQUAL(count(r.c.err, "sample source off"), 1);
	CU_ASSERT_TRUE(sample_state_is(&r, "off (no cupti source: off"));
	CU_ASSERT_EQUAL(out(&r, "hot_in_hbm"), 0);
}

/* ---- part three: the stand-in's probe semantics ---- */

#define BLK (2ull << 20)

static struct {
	void *h;
	CUresult (*init)(unsigned);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t, unsigned);
	CUresult (*free)(CUdeviceptr);
	CUresult (*advise)(CUdeviceptr, size_t, CUmem_advise, CUmemLocation);
	int (*access)(const void *, size_t, int);
	int (*counters)(struct fakecuda_counters *);
	int (*location)(const void *, CUmemLocationType *, int *);
} fc;

static int fc_setup(void)
{
	fc.h = dlopen(kvt_path("fakecuda/libcuda.so.1"), RTLD_NOW | RTLD_LOCAL);
	if (!fc.h)
		return 1;
#define SYM(f, n) (*(void **)&fc.f = dlsym(fc.h, n))
	if (!SYM(init, "cuInit") || !SYM(retain, "cuDevicePrimaryCtxRetain") ||
	    !SYM(set_current, "cuCtxSetCurrent") || !SYM(alloc, "cuMemAllocManaged") ||
	    !SYM(free, "cuMemFree_v2") || !SYM(advise, "cuMemAdvise_v2") ||
	    !SYM(access, "fakecuda_access") || !SYM(counters, "fakecuda_get_counters") ||
	    !SYM(location, "fakecuda_block_location"))
		return 1;
#undef SYM
	CUcontext ctx;
	return fc.init(0) || fc.retain(&ctx, 0) || fc.set_current(ctx);
}

static uint64_t fc_faults(void)
{
	struct fakecuda_counters c;
	fc.counters(&c);
	return c.faults;
}

static int fc_on_device(CUdeviceptr p)
{
	CUmemLocationType t = CU_MEM_LOCATION_TYPE_INVALID;
	int id;
	fc.location((const void *)(uintptr_t)p, &t, &id);
	return t == CU_MEM_LOCATION_TYPE_DEVICE;
}

static CUresult fc_adv(CUdeviceptr p, CUmem_advise a, CUmemLocationType t, int id)
{
	return fc.advise(p, BLK, a, (CUmemLocation){ .type = t, .id = id });
}

/* What src_sample.c does to a chunk: accessed-by off, read-mostly on, off. */
static void fc_probe(CUdeviceptr p)
{
	CU_ASSERT_EQUAL(fc_adv(p, CU_MEM_ADVISE_UNSET_ACCESSED_BY, CU_MEM_LOCATION_TYPE_DEVICE, 0), 0);
	CU_ASSERT_EQUAL(fc_adv(p, CU_MEM_ADVISE_SET_READ_MOSTLY, CU_MEM_LOCATION_TYPE_DEVICE, 0), 0);
	CU_ASSERT_EQUAL(fc_adv(p, CU_MEM_ADVISE_UNSET_READ_MOSTLY, CU_MEM_LOCATION_TYPE_DEVICE, 0), 0);
}

/*  blocks 0-3 preferred HOST_NUMA 0, 4-5 preferred HOST; all accessed-by
 *  the device, all on the host:
 *    1  UNSET_ACCESSED_BY only         read: no fault (the mapping stays)
 *    2  probe                          read: fault, migrates (HOST_NUMA)
 *    4  probe                          read: fault, stays mapped (HOST);
 *                                      again: no fault; restored: none */
static void test_standin_probe(void)
{
	CUdeviceptr p;
	CU_ASSERT_EQUAL_FATAL(fc.alloc(&p, 6 * BLK, CU_MEM_ATTACH_GLOBAL), 0);
	CU_ASSERT_EQUAL(fc.advise(p, 4 * BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
				  (CUmemLocation){ CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 }), 0);
	CU_ASSERT_EQUAL(fc.advise(p + 4 * BLK, 2 * BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
				  (CUmemLocation){ CU_MEM_LOCATION_TYPE_HOST, 0 }), 0);
	CU_ASSERT_EQUAL(fc.advise(p, 6 * BLK, CU_MEM_ADVISE_SET_ACCESSED_BY,
				  (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, 0 }), 0);
	uint64_t f0 = fc_faults();
	for (int b = 0; b < 6; b++)
		CU_ASSERT_EQUAL(fc.access((const void *)(uintptr_t)(p + b * BLK), 4096, 0), 0);
	CU_ASSERT_EQUAL(fc_faults(), f0);                        /* accessed-by: remote reads */
	CU_ASSERT_EQUAL(fc_adv(p + BLK, CU_MEM_ADVISE_UNSET_ACCESSED_BY, CU_MEM_LOCATION_TYPE_DEVICE, 0), 0);
	CU_ASSERT_EQUAL(fc.access((const void *)(uintptr_t)(p + BLK), 4096, 0), 0);
	CU_ASSERT_EQUAL(fc_faults(), f0);                        /* the mapping stayed */
	fc_probe(p + 2 * BLK);
	CU_ASSERT_EQUAL(fc.access((const void *)(uintptr_t)(p + 2 * BLK), 4096, 0), 0);
	CU_ASSERT_EQUAL(fc_faults(), f0 + 1);
	CU_ASSERT_TRUE(fc_on_device(p + 2 * BLK));              /* HOST_NUMA: migrated */
	fc_probe(p + 4 * BLK);
	CU_ASSERT_EQUAL(fc.access((const void *)(uintptr_t)(p + 4 * BLK), 4096, 0), 0);
	CU_ASSERT_EQUAL(fc_faults(), f0 + 2);
	CU_ASSERT_FALSE(fc_on_device(p + 4 * BLK));             /* HOST: mapped */
	CU_ASSERT_EQUAL(fc.access((const void *)(uintptr_t)(p + 4 * BLK), 4096, 0), 0);
	CU_ASSERT_EQUAL(fc_faults(), f0 + 2);
	CU_ASSERT_EQUAL(fc_adv(p + 4 * BLK, CU_MEM_ADVISE_SET_ACCESSED_BY, CU_MEM_LOCATION_TYPE_DEVICE, 0), 0);
	CU_ASSERT_EQUAL(fc.access((const void *)(uintptr_t)(p + 4 * BLK), 4096, 0), 0);
	CU_ASSERT_EQUAL(fc_faults(), f0 + 2);
	CU_ASSERT_EQUAL(fc.free(p), 0);
}

int main(void)
{
	CU_TestInfo pure[] = {
		{ "a new range: equal regions, sorted, found", test_add_layout },
		{ "a full table merges to make room, or says no", test_add_full },
		{ "merge: equal neighbours, bounded size", test_merge_table },
		{ "merge: weighted counts, unknown samples estimated", test_merge_weighted_unknown },
		{ "split: in two, inside the region, while half full", test_split },
		{ "random churn: bounded, every chunk covered once", test_bounded_under_churn },
		{ "hot chunks end in regions of their own", test_isolates_hot_chunks },
		{ "same seed, same regions", test_deterministic },
		CU_TEST_INFO_NULL,
	};
	CU_TestInfo device[] = {
		{ "sampling: computed-address hot chunks promoted", test_sampling_finds_hot_chunks },
		{ "launch+cupti alone: they stay far", test_without_sampling_they_stay_far },
		{ "no CUPTI: sample off, said once, nothing breaks", test_without_cupti_it_turns_off },
		CU_TEST_INFO_NULL,
	};
	CU_TestInfo standin[] = {
		{ "probe on the stand-in: as measured on an H200", test_standin_probe },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "regions", NULL, NULL, NULL, NULL, pure },
		{ "sample", setup, NULL, NULL, NULL, device },
		{ "stand-in", fc_setup, NULL, NULL, NULL, standin },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
