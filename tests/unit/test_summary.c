// SPDX-License-Identifier: MIT
/* kvtier run's exit summary (tools/summary.c) read from a made-up trace
 * with known INFO records: the floor's two notices (tier/floor.h) come
 * back at the end of the run, once each, with how many processes gave
 * them and the first one's values; a trace without them prints neither. */
#include <stdlib.h>
#include <unistd.h>

#include "kvt_test.h"
#include "../../tools/summary.c"   /* the tool's objects are not in libkvtier.a */
#include "../../tools/moves.c"

static char dir[] = "/tmp/kvt-summary-XXXXXX";

static void put(FILE *f, const void *p, size_t n)
{
	CU_ASSERT_FATAL(fwrite(p, 1, n, f) == n);
}

static void put_info(FILE *f, const char *kv)
{
	struct kvt_rec_head h = { KVT_REC_INFO, (uint16_t)(sizeof h + strlen(kv)) };
	put(f, &h, sizeof h);
	put(f, kv, strlen(kv));
}

/* A trace with the INFO records infos[0..n), then its end record. */
static const char *made_up(const char *name, const char *const *infos, unsigned n)
{
	static char path[2][256];
	static int k;
	char *p = path[k++ & 1];
	snprintf(p, sizeof path[0], "%s/%s", dir, name);
	struct kvt_trace_header h = { .magic = "KVTTRACE", .version = KVT_TRACE_VERSION,
				      .header_bytes = sizeof h };
	FILE *f = fopen(p, "wb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	put(f, &h, sizeof h);
	for (unsigned i = 0; i < n; i++)
		put_info(f, infos[i]);
	struct kvt_rec_end end = { { KVT_REC_END, sizeof end }, 0, 0, 0, 0 };
	put(f, &end, sizeof end);
	CU_ASSERT_EQUAL(fclose(f), 0);
	return p;
}

/* The summary of the traces paths[0..n), printed; the caller frees it. */
static char *summary_of(const char *const *paths, unsigned n)
{
	static struct kvt_summary s;
	memset(&s, 0, sizeof s);
	char err[256];
	for (unsigned i = 0; i < n; i++)
		CU_ASSERT_EQUAL(kvt_summary_add(&s, paths[i], err, sizeof err), 0);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	kvt_summary_print(&s, f);
	fclose(f);
	return out;
}

static void test_notices(void)
{
	const char *steps = "evidence.step_over_budget=share_pct=35 steps=883 "
			    "peak_bytes=335544320 budget=368050176";
	const char *floor = "evidence.floor=kv_bytes=474000000 budget=376000000 class=allocation";
	const char *a[] = { "migrate.enabled=1", steps };
	const char *b[] = { "migrate.enabled=1", floor,
			    "evidence.step_over_budget=share_pct=90 steps=50 peak_bytes=1 budget=2" };
	const char *c[] = { "migrate.enabled=1", "migrate.epochs=12" };
	const char *paths[] = { made_up("a.trace", a, 2), made_up("b.trace", b, 3) };
	char *out = summary_of(paths, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	/* the steps notice: two of the two processes, the first one's values */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  notice (2 of 2 processes): steps needed more HBM "
					   "than the budget leaves them"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "cap the server's running requests (share_pct=35 "
					   "steps=883 peak_bytes=335544320 budget=368050176)\n"));
	CU_ASSERT_PTR_NULL(strstr(out, "share_pct=90"));
	/* the floor's: one of the two */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  notice (1 of 2 processes): a KV pool larger than "
					   "the HBM budget"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "size the pool to fit HBM (kv_bytes=474000000 "
					   "budget=376000000 class=allocation)\n"));
	free(out);
	/* none given: no notice line */
	const char *quiet[] = { made_up("c.trace", c, 2) };
	out = summary_of(quiet, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  migration: 12 epochs"));
	CU_ASSERT_PTR_NULL(strstr(out, "notice"));
	free(out);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	CU_TestInfo tests[] = {
		{ "the floor's notices at the end of the run", test_notices },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "summary", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	int rc = kvt_test_main(suites);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd))
		return 1;
	return rc;
}
