// SPDX-License-Identifier: MIT
/* The tiers over time (issue 26): the migration thread's EPOCH records and
 * the report's tiering section. vllm-like at KV = 2x the SIMULATED device
 * under `kvtier run`, paced, and the same workload under
 * KVTIER_ADMIT=fault (GPU faults) are traced once; the records must agree
 * with kvtier's own counters, and the text, JSON and HTML with the
 * records. The HTML is rendered in headless Chromium: no console message,
 * the DOM holds the charts, and the screenshot has the residency line's and
 * the fault bars' pixels (and a report without epochs has none). Old traces
 * (no EPOCH records) and hostile ones are read safely.
 * Nothing waits on the clock: the workloads run a fixed number of steps,
 * and a loaded machine only gives the migrator more (or fewer) epochs. */
#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>

#include "unit/kvt_test.h"
#include "unit/kvt_report_test.h"
#include "unit/kvt_trace_test.h"
#include "../profiler/trace_read.h"
#include "kvtier/api.h"

#define CHUNK (2ull << 20)
#define CHROMIUM "/usr/bin/chromium"
#define PNG_PIXELS "tests/report/png_pixels.py"
/* tools/report_tier_out.c's colours of the residency line and fault bars */
#define COLOR_HBM "e6007e"
#define COLOR_FAULTS "3d00b8"

static char tmpdir[] = "/tmp/kvt-tier-XXXXXX";
static char demo_trace[600], fault_trace[600], old_trace[600];
static struct kvt_child rc;

static const char *tmp_path(const char *name)
{
	return kvt_tmp_path(tmpdir, name);
}

/* The first file in tmpdir whose name starts with prefix, into out. */
static int find_file(const char *prefix, char *out, size_t len)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	int found = -1;
	while (d && found && (e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			snprintf(out, len, "%s/%s", tmpdir, e->d_name);
			found = 0;
		}
	if (d)
		closedir(d);
	return found;
}

/* vllm-like at 2x under `kvtier run` (the former make demo), into tmpdir. */
static int run_demo(void)
{
	char lib[700], tr[700];
	snprintf(lib, sizeof lib, "LD_LIBRARY_PATH=%s", kvt_path("fakecuda"));
	snprintf(tr, sizeof tr, "%s", tmp_path("demo.%p.trace"));
	const char *argv[] = { kvt_path("kvtier"), "run", "--trace", tr, "--",
			       kvt_path("workloads/vllm-like"), "--mode", "native", "--kv-over-hbm",
			       "2", "--warmup", "100", "--steps", "50", NULL };
	const char *env[] = { lib, "FAKECUDA_PACE=10", NULL };
	if (kvt_run(&rc, argv, env) || rc.exit_code) {
		fprintf(stderr, "demo run failed (%d): %.2000s\n", rc.exit_code, rc.err);
		return -1;
	}
	return find_file("demo.", demo_trace, sizeof demo_trace);
}

/* vllm-like at 2x under fault admission and a 128 MiB budget: GPU faults. */
static int run_faults(void)
{
	char lib[700], pre[700], tr[700];
	snprintf(fault_trace, sizeof fault_trace, "%s", tmp_path("fault.trace"));
	snprintf(lib, sizeof lib, "LD_LIBRARY_PATH=%s", kvt_path("fakecuda"));
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s", kvt_path("libkvtier.so"));
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", fault_trace);
	const char *argv[] = { kvt_path("workloads/vllm-like"), "--mode", "native", "--kv-over-hbm",
			       "2", "--warmup", "100", "--steps", "50", "--quiet", NULL };
	const char *env[] = { lib, pre, tr, "FAKECUDA_PACE=10", "FAKECUDA_RECLAIM=0",
			      "KVTIER_ADMIT=fault", "KVTIER_HBM_BUDGET=128M", NULL };
	if (kvt_run(&rc, argv, env) || rc.exit_code) {
		fprintf(stderr, "fault run failed (%d): %.2000s\n", rc.exit_code, rc.err);
		return -1;
	}
	return 0;
}

/* A trace written before EPOCH records existed (the generator's shape). */
static int make_old(void)
{
	snprintf(old_trace, sizeof old_trace, "%s", tmp_path("old.trace"));
	const char *argv[] = { kvt_path("bench/gen_trace"), old_trace, "20000", NULL };
	return kvt_run(&rc, argv, NULL) || rc.exit_code ? -1 : 0;
}

static int suite_init(void)
{
	if (!mkdtemp(tmpdir))
		return -1;
	return run_demo() || run_faults() || make_old() ? -1 : 0;
}

static int suite_clean(void)
{
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- the records, read here ---- */

struct epochs {
	unsigned n, devices_other;      /* records; records of a device other than 0 */
	uint64_t promoted, demoted, faults, failed, peak, last_hbm, last_budget;
	unsigned __int128 hbm_sum;
	unsigned over_slack;            /* records with residency past the budget's slack */
	char over_what[4][160];         /* the first of them */
	unsigned not_monotonic;         /* an epoch number or a time that went back */
	char info[16384];
};

static void read_epochs(const char *path, struct epochs *e)
{
	static struct kvt_trace_reader rd;
	struct kvt_trace_item it;
	uint64_t last_n = 0, last_t = 0, last_faults = 0;
	memset(e, 0, sizeof *e);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&rd, path), 0);
	while (kvt_trace_next(&rd, &it) > 0) {
		if (!it.epoch)
			continue;
		const struct kvt_rec_epoch *p = it.epoch;
		e->n++;
		e->devices_other += p->device != 0;
		e->promoted += p->nr_promoted;
		e->demoted += p->nr_demoted;
		e->faults += p->nr_faults;
		e->failed += p->nr_failed;
		e->hbm_sum += p->hbm_bytes;
		e->peak = p->hbm_bytes > e->peak ? p->hbm_bytes : e->peak;
		e->last_hbm = p->hbm_bytes;
		e->last_budget = p->budget_bytes;
		/* past the budget only by what faulted in during this epoch or the
		 * last: a fault counted after an epoch collected its chunks is in
		 * the next epoch's residency, not in its count */
		uint64_t slack = CHUNK + ((uint64_t)p->nr_faults + last_faults) * CHUNK;
		int over = p->hbm_bytes > p->budget_bytes + slack;
		/* an epoch that promoted (and lost no move) ends within its budget */
		over |= p->nr_promoted && !p->nr_failed && p->hbm_bytes > p->budget_bytes + CHUNK;
		if (over && e->over_slack < 4)
			snprintf(e->over_what[e->over_slack], sizeof e->over_what[0],
				 "epoch %" PRIu64 ": %" PRIu64 " chunks in HBM, budget %" PRIu64
				 ", promoted %u, demoted %u, faults %u (last %" PRIu64 "), failed %u",
				 (uint64_t)p->epoch, (uint64_t)(p->hbm_bytes / CHUNK),
				 (uint64_t)(p->budget_bytes / CHUNK), p->nr_promoted, p->nr_demoted,
				 p->nr_faults, last_faults, p->nr_failed);
		e->over_slack += over;
		last_faults = p->nr_faults;
		e->not_monotonic += p->epoch <= last_n || p->t_ns < last_t;
		CU_ASSERT_EQUAL(p->hbm_bytes % CHUNK, 0);
		CU_ASSERT_EQUAL(p->reserved, 0);
		last_n = p->epoch;
		last_t = p->t_ns;
	}
	CU_ASSERT_EQUAL(rd.saw_end, 1);
	kvt_trace_reader_close(&rd);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_infos(path, e->info, sizeof e->info), 0);
}

static uint64_t info(const struct epochs *e, const char *key)
{
	return kvt_info_u64(e->info, key, UINT64_MAX);
}

/* ---- the report's three forms ---- */

static char *report(const char *fmt, const char *t1, const char *t2)
{
	return kvt_report_run(&rc, tmpdir, fmt, t1, t2);
}


/* Sum and maximum of the JSON integer array after "name":[ in s. */
static int json_array(const char *s, const char *name, uint64_t *sum, uint64_t *max, unsigned *n)
{
	char k[64];
	snprintf(k, sizeof k, "\"%s\":[", name);
	const char *p = s ? strstr(s, k) : NULL;
	*sum = *max = 0;
	*n = 0;
	if (!p)
		return -1;
	p += strlen(k);
	while (*p && *p != ']') {
		char *end;
		uint64_t v = strtoull(p, &end, 10);
		if (end == p)
			return -1;
		*sum += v;
		*max = v > *max ? v : *max;
		(*n)++;
		p = *end == ',' ? end + 1 : end;
	}
	return 0;
}

/* Chunks and pages the step prefetch brought in (its migrate.step INFO):
 * when the tables source learns the demo's layout (some runs do), the
 * step owns the KV ranges and moves their chunks itself; the migrator's
 * plan, and so its EPOCH records, then promote none. */
static uint64_t step_moved(const struct epochs *e)
{
	const char *l = strstr(e->info, "\nmigrate.step=");
	if (!l)
		return 0;
	const char *end = strchr(l + 1, '\n'), *c = strstr(l, " promoted="), *p = strstr(l, " pages=");
	uint64_t n = 0;
	if (c && (!end || c < end))
		n += strtoull(c + 10, NULL, 10);
	if (p && (!end || p < end))
		n += strtoull(p + 7, NULL, 10);
	return n;
}

/* The demo's run: every epoch of the migrator wrote one record, and the
 * records add up to kvtier's own counters (trace INFO at exit). */
static void test_records_match_counters(void)
{
	static struct epochs e;
	read_epochs(demo_trace, &e);
	uint64_t epochs = info(&e, "migrate.epochs");
	fprintf(stderr, "\n  demo: %u records, %" PRIu64 " epochs, promoted %" PRIu64 ", demoted %"
		PRIu64 ", peak %" PRIu64 " of budget %" PRIu64 "\n", e.n, epochs, e.promoted,
		e.demoted, e.peak, e.last_budget);
	CU_ASSERT(e.n > 0);
	CU_ASSERT_EQUAL(e.devices_other, 0);          /* one simulated device */
	/* a stop asked mid-epoch may leave the last epoch without its record */
	CU_ASSERT(e.n <= epochs && e.n + 1 >= epochs);
	CU_ASSERT_EQUAL(e.not_monotonic, 0);
	CU_ASSERT_EQUAL(e.promoted, info(&e, "migrate.promoted"));
	CU_ASSERT_EQUAL(e.demoted, info(&e, "migrate.demoted"));
	/* KV = 2x: hot chunks come in, by the migrator or by the step */
	CU_ASSERT(e.promoted > 0 || step_moved(&e) > 0);
	CU_ASSERT(e.demoted > 0);                     /* the re-homed tensor's pages go out */
	CU_ASSERT_EQUAL(e.failed, info(&e, "migrate.prefetch_failed"));
	/* the default admission (auto): faults bring chunks in, each one a
	 * CUPTI record */
	CU_ASSERT(e.faults <= info(&e, "prof.cupti.records"));
	/* residency after each epoch's moves stays within its budget (one
	 * chunk of slack for a range's partial last chunk), but for the chunks
	 * that faulted in during the epoch or the one before; an epoch that
	 * promoted is within it */
	for (unsigned i = 0; i < e.over_slack && i < 4; i++)
		fprintf(stderr, "  past the budget: %s\n", e.over_what[i]);
	CU_ASSERT_EQUAL(e.over_slack, 0);
	CU_ASSERT(e.peak > 0);
	CU_ASSERT_EQUAL(e.last_budget, info(&e, "migrate.hbm_budget"));
	/* after the last epoch the migrator moves nothing: what it believed then
	 * is what is in HBM at exit, but for chunks that faulted in (or were
	 * evicted) since, which the default admission (auto) allows */
	uint64_t at_exit = info(&e, "migrate.chunks.hbm") * CHUNK;
	uint64_t diff = at_exit > e.last_hbm ? at_exit - e.last_hbm : e.last_hbm - at_exit;
	if (info(&e, "migrate.fault_ins") == 0)
		CU_ASSERT_EQUAL(diff, 0);
	CU_ASSERT(diff <= info(&e, "migrate.fault_ins") * CHUNK);
}

/* Fault admission: faults arrive through CUPTI and are counted per device. */
static void test_fault_records(void)
{
	static struct epochs e;
	read_epochs(fault_trace, &e);
	fprintf(stderr, "\n  fault: %u records, faults %" PRIu64 ", cupti records %" PRIu64 "\n",
		e.n, e.faults, info(&e, "prof.cupti.records"));
	CU_ASSERT(e.n > 0);
	CU_ASSERT(e.faults > 0);
	CU_ASSERT(e.faults <= info(&e, "prof.cupti.records"));
	CU_ASSERT_EQUAL(e.promoted, 0);               /* fault admission promotes nothing */
	CU_ASSERT_EQUAL(e.demoted, info(&e, "migrate.demoted"));
	CU_ASSERT_EQUAL(e.last_budget, 128ull << 20);
}

static void check_text(const char *txt, const struct epochs *e, const char *who)
{
	char k[64];
	snprintf(k, sizeof k, "\n  %s: ", who);
	const char *sec = strstr(txt, "\ntiering (");
	CU_ASSERT_PTR_NOT_NULL_FATAL(sec);
	CU_ASSERT_PTR_NULL(strstr(sec, "no tiering epochs recorded"));
	CU_ASSERT_EQUAL(kvt_num_after(sec, (const char *const[]){ k, NULL }), e->n);
	CU_ASSERT_EQUAL(kvt_num_after(sec, (const char *const[]){ k, "HBM residency: peak", NULL }), e->peak);
	CU_ASSERT_EQUAL(kvt_num_after(sec, (const char *const[]){ k, "mean", NULL }),
			(uint64_t)(e->hbm_sum / e->n));
	CU_ASSERT_EQUAL(kvt_num_after(sec, (const char *const[]){ k, "budget", NULL }), e->last_budget);
	CU_ASSERT_EQUAL(kvt_num_after(sec, (const char *const[]){ k, "promoted", NULL }), e->promoted);
	CU_ASSERT_EQUAL(kvt_num_after(sec, (const char *const[]){ k, "demoted", NULL }), e->demoted);
	CU_ASSERT_EQUAL(kvt_num_after(sec, (const char *const[]){ k, "GPU faults", NULL }), e->faults);
}

/* One device's JSON object (from its "trace":N) against the records. */
static void check_json(const char *js, const struct epochs *e, unsigned trace)
{
	char k[64];
	snprintf(k, sizeof k, "{\"trace\":%u,\"device\":0,", trace);
	const char *d = strstr(js, k);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL(kvt_num_after(d, (const char *const[]){ "\"epochs\":", NULL }), e->n);
	CU_ASSERT_EQUAL(kvt_num_after(d, (const char *const[]){ "\"hbm_peak_bytes\":", NULL }), e->peak);
	CU_ASSERT_EQUAL(kvt_num_after(d, (const char *const[]){ "\"promoted\":", NULL }), e->promoted);
	CU_ASSERT_EQUAL(kvt_num_after(d, (const char *const[]){ "\"demoted\":", NULL }), e->demoted);
	CU_ASSERT_EQUAL(kvt_num_after(d, (const char *const[]){ "\"faults\":", NULL }), e->faults);
	const char *s = strstr(d, "\"series\":{");
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	uint64_t sum, max;
	unsigned n;
	/* the series are the same records rebinned: nothing lost, nothing made up */
	CU_ASSERT_EQUAL(json_array(s, "epochs", &sum, &max, &n), 0);
	CU_ASSERT_EQUAL(n, 100);
	CU_ASSERT_EQUAL(sum, e->n);
	CU_ASSERT_EQUAL(json_array(s, "promoted", &sum, &max, &n), 0);
	CU_ASSERT_EQUAL(sum, e->promoted);
	CU_ASSERT_EQUAL(json_array(s, "demoted", &sum, &max, &n), 0);
	CU_ASSERT_EQUAL(sum, e->demoted);
	CU_ASSERT_EQUAL(json_array(s, "faults", &sum, &max, &n), 0);
	CU_ASSERT_EQUAL(sum, e->faults);
	CU_ASSERT_EQUAL(json_array(s, "hbm_bytes", &sum, &max, &n), 0);
	CU_ASSERT_EQUAL(max, e->peak);
	CU_ASSERT(sum > 0);
	CU_ASSERT_EQUAL(json_array(s, "budget_bytes", &sum, &max, &n), 0);
	CU_ASSERT(max >= e->last_budget && max > 0);
}

static void test_text_and_json(void)
{
	static struct epochs d, f;
	read_epochs(demo_trace, &d);
	read_epochs(fault_trace, &f);
	char *txt = report("text", demo_trace, NULL), *txt2 = report("text", demo_trace, fault_trace);
	char *js = report("json", demo_trace, fault_trace);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	check_text(txt, &d, "device 0");
	check_text(txt2, &d, "trace 0, device 0");
	check_text(txt2, &f, "trace 1, device 0");
	check_json(js, &d, 0);
	check_json(js, &f, 1);
	CU_ASSERT_EQUAL(kvt_num_after(js, (const char *const[]){ "\"tiering\":{\"records\":", NULL }),
			d.n + f.n);
	/* the tiering series share the timeline's buckets */
	CU_ASSERT_EQUAL(kvt_num_after(js, (const char *const[]){ "\"tiering\":{", "\"bucket_ns\":", NULL }),
			kvt_num_after(js, (const char *const[]){ "\"timeline\":{\"bucket_ns\":", NULL }));
	free(txt);
	free(txt2);
	free(js);
}

/* kvtier dump: one line per record, the same numbers. The whole dump is
 * far more than the 64 KiB of stdout kept (the step prefetch's PREFETCH
 * events come before the first EPOCH record), so its EPOCH lines are
 * picked out by grep and checked all. */
static void test_dump(void)
{
	static struct epochs e;
	read_epochs(demo_trace, &e);
	const char *argv[] = { "/bin/sh", "-c", "\"$0\" dump \"$1\" | grep '^epoch t='",
			       kvt_path("kvtier"), demo_trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_FATAL(rc.out_len < sizeof rc.out - 1);
	unsigned lines = 0;
	uint64_t promoted = 0;
	for (const char *p = rc.out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, "epoch t=", 8))
			continue;
		lines++;
		promoted += kvt_num_after(p, (const char *const[]){ " promoted=", NULL });
	}
	CU_ASSERT(lines > 0);
	CU_ASSERT_EQUAL(lines, e.n);
	CU_ASSERT_EQUAL(promoted, e.promoted);
}

/* ---- old and hostile traces ---- */

static void test_old_trace(void)
{
	char *txt = report("text", old_trace, NULL), *js = report("json", old_trace, NULL);
	char *html = report("html", old_trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "\ntiering (the migration thread's epoch records"));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "  no tiering epochs recorded\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"tiering\":{\"records\":0,"));
	CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"devices\":[]}"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<p id=\"tiering-none\">"));
	CU_ASSERT_PTR_NULL(strstr(html, "<h3>HBM residency</h3>"));
	/* the generated trace has prefetches but no epochs: said so */
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "prefetch events; no tiering epochs recorded"));
	free(txt);
	free(js);
	free(html);
}

struct writer { FILE *f; };

static void put(struct writer *w, const void *p, size_t n)
{
	CU_ASSERT_FATAL(fwrite(p, 1, n, w->f) == n);
}

static void put_epoch(struct writer *w, int32_t dev, uint64_t t, uint64_t hbm, uint64_t budget,
		      uint32_t pro, uint32_t dem, uint32_t faults, uint16_t bytes)
{
	unsigned char rec[128] = { 0 };
	struct kvt_rec_epoch e = {
		.head = { KVT_REC_EPOCH, bytes }, .device = dev, .t_ns = t, .epoch = t,
		.hbm_bytes = hbm, .budget_bytes = budget, .nr_promoted = pro, .nr_demoted = dem,
		.nr_faults = faults,
	};
	memcpy(rec, &e, sizeof e < bytes ? sizeof e : bytes);
	put(w, rec, bytes);
}

static void open_trace(struct writer *w, const char *path)
{
	struct kvt_trace_header h = { .magic = "KVTTRACE", .version = KVT_TRACE_VERSION,
				      .header_bytes = sizeof h };
	w->f = fopen(path, "wb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(w->f);
	put(w, &h, sizeof h);
}

static void test_hostile_records(void)
{
	struct writer w;
	open_trace(&w, tmp_path("hostile.trace"));
	put_epoch(&w, 0, 1000, 10 * CHUNK, 8 * CHUNK, 3, 1, 5, 64);        /* over budget */
	put_epoch(&w, 0, 2000, UINT64_MAX, UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, 64);
	put_epoch(&w, 0, 3000, UINT64_MAX, 1, UINT32_MAX, 0, 0, 80);       /* a longer record */
	put_epoch(&w, -7, 3500, 0, 0, 0, 0, 0, 64);                        /* odd device */
	put_epoch(&w, 0, UINT64_MAX, 0, 0, 0, 0, 0, 64);                   /* odd time: left out */
	for (int d = 1; d <= 40; d++)                                      /* past the 32 kept */
		put_epoch(&w, d, 4000 + (uint64_t)d, CHUNK, CHUNK, 1, 0, 0, 64);
	struct kvt_rec_end end = { .head = { KVT_REC_END, sizeof end } };
	put(&w, &end, sizeof end);
	fclose(w.f);
	const char *fmts[] = { "text", "json", "html" };
	for (int i = 0; i < 3; i++) {
		char *out = report(fmts[i], tmp_path("hostile.trace"), NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(out);
		if (i == 0) {
			CU_ASSERT_PTR_NOT_NULL(strstr(out, "  device 0: 3 epochs"));
			CU_ASSERT_PTR_NOT_NULL(strstr(out, "  device -7: 1 epochs"));
			/* the epoch stamped UINT64_MAX ns is past 30 days: left out, said once */
			CU_ASSERT_PTR_NOT_NULL(strstr(out, "1 record (events, epochs) stamped more than 30 days"));
			CU_ASSERT_PTR_NOT_NULL(strstr(out, "residency above the budget at the end of 2 epochs"));
			/* totals do not wrap at 32 bits */
			CU_ASSERT_PTR_NOT_NULL(strstr(out, "GPU faults 4294967300,"));
			/* 2 of device 0's + device -7 + 30 more: 32 pairs; 10 records not counted */
			CU_ASSERT_PTR_NOT_NULL(strstr(out, "note: 10 epoch records of devices past the first 32"));
		}
		free(out);
	}
	/* the JSON parses (python3's json) */
	if (!access("/usr/bin/python3", X_OK)) {
		const char *argv[] = { "/usr/bin/python3", "-c",
				       "import json,sys; d=json.load(open(sys.argv[1]));"
				       "print(len(d['tiering']['devices']))", tmp_path("json"), NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		CU_ASSERT_EQUAL(atoi(rc.out), 32);
	}
	/* a record shorter than struct kvt_rec_epoch: one message, exit 1 */
	open_trace(&w, tmp_path("short.trace"));
	put_epoch(&w, 0, 1000, CHUNK, CHUNK, 0, 0, 0, 40);
	fclose(w.f);
	const char *argv[] = { kvt_path("kvtier"), "report", tmp_path("short.trace"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "epoch record too short"));
	CU_ASSERT_EQUAL(rc.out_len, 0);
}

/* ---- the HTML in headless Chromium ---- */

/* Chromium on html with mode (--dump-dom, --screenshot=PNG); its stdout
 * goes to the file out (a DOM is larger than what kvt_run keeps). */
static void chromium(const char *html, const char *mode, const char *out)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "exec " CHROMIUM " --headless --no-sandbox --disable-gpu "
		 "--disable-quic --no-first-run --disable-background-networking "
		 "--disable-component-update --disable-sync --hide-scrollbars "
		 "--force-device-scale-factor=1 --enable-logging=stderr --v=0 "
		 "--window-size=1000,4200 '--user-data-dir=%s' '%s' 'file://%s' > '%s'",
		 tmp_path("chromium-profile"), mode, html, out);
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	CU_ASSERT_FATAL(kvt_run_bounded(&rc, argv, NULL, 300) == 0);
	if (rc.exit_code)
		fprintf(stderr, "\n  chromium exit %d: %.600s", rc.exit_code, rc.err);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	/* the page's console: Chromium logs every message as ":CONSOLE" */
	const char *con = strstr(rc.err, ":CONSOLE");
	if (con)
		fprintf(stderr, "\n  console: %.300s", con);
	CU_ASSERT_PTR_NULL(con);
}

/* Pixels of each colour in the PNG (tests/report/png_pixels.py); -1 when
 * it cannot be read. */
static int pixels(const char *png, long out[2])
{
	const char *argv[] = { "/usr/bin/python3", PNG_PIXELS, png, COLOR_HBM, COLOR_FAULTS, NULL };
	if (kvt_run(&rc, argv, NULL) || rc.exit_code) {
		fprintf(stderr, "\n  png_pixels: %d %.300s", rc.exit_code, rc.err);
		return -1;
	}
	long w = 0, h = 0;
	if (sscanf(rc.out, "%ld %ld %ld %ld", &w, &h, &out[0], &out[1]) != 4)
		return -1;
	fprintf(stderr, "\n  %s: %ldx%ld, %ld residency-line pixels, %ld fault-bar pixels", png, w,
		h, out[0], out[1]);
	return 0;
}

static void screenshot(const char *html, const char *png, long px[2])
{
	char shot[700];
	snprintf(shot, sizeof shot, "--screenshot=%s", png);
	chromium(html, shot, "/dev/null");
	CU_ASSERT_FATAL(access(png, R_OK) == 0);
	CU_ASSERT_EQUAL_FATAL(pixels(png, px), 0);
}

static void test_html_in_chromium(void)
{
	char *html = report("html", demo_trace, fault_trace);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	CU_ASSERT_EQUAL(kvt_html_other_scripts(html, KVT_HAVE_UPLOT), 0);
	CU_ASSERT_PTR_NULL(strstr(html, "see the timeline"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "chart (Tiering, above)"));
	free(html);
	char page[700];
	snprintf(page, sizeof page, "%s", tmp_path("tier.html"));
	CU_ASSERT_FATAL(rename(tmp_path("html"), page) == 0);
	/* the DOM Chromium built: both devices' charts, with their series */
	chromium(page, "--dump-dom", tmp_path("dom.html"));
	char *dom = kvt_slurp(tmp_path("dom.html"), NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dom);
	unsigned titles = 0, lines = 0, faults = 0, moves = 0;
	for (const char *p = dom; (p = strstr(p, "<h3>HBM residency</h3>")); p++)
		titles++;
	for (const char *p = dom; (p = strstr(p, "<polyline class=\"hbm-line\"")); p++)
		lines++;
	for (const char *p = dom; (p = strstr(p, "<rect class=\"faults\"")); p++)
		faults++;
	for (const char *p = dom; (p = strstr(p, "<rect class=\"promoted\"")); p++)
		moves++;
	CU_ASSERT_EQUAL(titles, 2);
	CU_ASSERT_EQUAL(lines, 2);
	CU_ASSERT(faults > 0);
	static struct epochs de;
	read_epochs(demo_trace, &de);
	if (de.promoted)                     /* the chart draws the migrator's moves only */
		CU_ASSERT(moves > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(dom, "<h3>GPU faults over time</h3>"));
	/* built with uPlot: the three timeline charts and both devices' two
	 * drawn by it, each SVG hidden; without it, every SVG shown */
	unsigned drawn = 0;
	for (const char *p = dom; (p = strstr(p, "<div class=\"kvt-static\" style=\"display: none;\">")); p++)
		drawn++;
	CU_ASSERT_EQUAL(drawn, KVT_HAVE_UPLOT ? 7 : 0);
	free(dom);
	/* drawn: the residency line (3 px wide over most of the plot, twice)
	 * and the fault bars show in the pixels; the legend's swatches alone
	 * are 36 pixels each */
	long px[2];
	screenshot(page, tmp_path("tier.png"), px);
	CU_ASSERT(px[0] >= 600);
	CU_ASSERT(px[1] >= 200);
	/* the check can fail: a report without epochs has neither */
	char *old = report("html", old_trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(old);
	free(old);
	snprintf(page, sizeof page, "%s", tmp_path("old.html"));
	CU_ASSERT_FATAL(rename(tmp_path("html"), page) == 0);
	screenshot(page, tmp_path("old.png"), px);
	CU_ASSERT_EQUAL(px[0], 0);
	CU_ASSERT_EQUAL(px[1], 0);
	fprintf(stderr, "\n");
	if (getenv("KVT_KEEP_SCREENSHOT")) {      /* to look at it: copy it out */
		char cmd[1400];
		snprintf(cmd, sizeof cmd, "cp '%s' '%s'", tmp_path("tier.png"),
			 getenv("KVT_KEEP_SCREENSHOT"));
		CU_ASSERT_EQUAL(system(cmd), 0);
	}
}

#define HTML_TEST "HTML in headless Chromium: no console message, charts in the DOM and the pixels"

int main(void)
{
	CU_TestInfo tests[] = {
		{ "demo run: one EPOCH record per epoch, sums = kvtier's counters", test_records_match_counters },
		{ "fault admission: GPU faults counted per device", test_fault_records },
		{ "text and JSON tiering agree with the records", test_text_and_json },
		{ "kvtier dump prints the records", test_dump },
		{ "old trace: no tiering epochs recorded", test_old_trace },
		{ "hostile EPOCH records: saturate, bounded, short one refused", test_hostile_records },
		{ HTML_TEST, test_html_in_chromium },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "tier-report", suite_init, suite_clean, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	if (CU_register_suites(suites) != CUE_SUCCESS) {
		fprintf(stderr, "CU_register_suites: %s\n", CU_get_error_msg());
		return 1;
	}
	/* without Chromium (or python3) the HTML test is inactive: a skip,
	 * counted as one by tests/run_tests.sh, never a pass */
	const char *missing = access(CHROMIUM, X_OK) ? CHROMIUM " (apt-get install chromium)" :
			      access("/usr/bin/python3", X_OK) ? "/usr/bin/python3" : NULL;
	if (missing) {
		fprintf(stderr, "SKIP: %s: %s is not installed\n", HTML_TEST, missing);
		CU_set_test_active(CU_get_test(CU_get_suite("tier-report"), HTML_TEST), CU_FALSE);
	}
	CU_set_fail_on_inactive(CU_FALSE);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned fails = CU_get_number_of_tests_failed(), afails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return fails || afails ? 1 : 0;
}
