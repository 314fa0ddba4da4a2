/* SPDX-License-Identifier: MIT */
/* Helpers of the suites that run `kvtier report` (test_report,
 * test_tier_report, test_symbolize): paths in the suite's temporary
 * directory, one report run, and numbers read out of its output.
 * Include after kvt_test.h; the suite defines `static char tmpdir[]`. */
#ifndef KVT_REPORT_TEST_H
#define KVT_REPORT_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dir/name in one of 8 rotating buffers (up to 8 live at once). */
static inline const char *kvt_tmp_path(const char *dir, const char *name)
{
	static char bufs[8][600];
	static int next;
	char *b = bufs[next++ & 7];
	snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
	return b;
}

/* `kvtier report -q --format fmt -o dir/fmt t1 [--mixed-runs t2]` (two
 * traces are of two runs, read together on purpose); its output, malloc'd,
 * or NULL (said on stderr) when it did not run or exited non-zero. */
static inline char *kvt_report_run(struct kvt_child *c, const char *dir, const char *fmt,
				   const char *t1, const char *t2)
{
	const char *out = kvt_tmp_path(dir, fmt);
	const char *argv[] = { kvt_path("kvtier"), "report", "-q", "--format", fmt, "-o", out, t1,
			       t2 ? "--mixed-runs" : NULL, t2, NULL };
	if (kvt_run(c, argv, NULL) || c->exit_code) {
		fprintf(stderr, "report %s: %d %s\n", fmt, c->exit_code, c->err);
		return NULL;
	}
	return kvt_slurp(out, NULL);
}

/* The number after the successive markers (each searched after the last),
 * past spaces, quotes and colons; UINT64_MAX when a marker is missing. */
static inline uint64_t kvt_num_after(const char *s, const char *const *marks)
{
	for (int i = 0; s && marks[i]; i++) {
		s = strstr(s, marks[i]);
		if (s)
			s += strlen(marks[i]);
	}
	if (!s)
		return UINT64_MAX;
	while (*s == ' ' || *s == '"' || *s == ':')
		s++;
	return strtoull(s, NULL, 10);
}

/* The <script elements of an HTML report that are neither a JSON data
 * block (<script type="application/json") nor, where the tool was built
 * with uPlot (KVT_HAVE_UPLOT=1, mk/html.mk), one of its two wrapped
 * scripts (uPlot and the page's own): 0 for a report as it should be. Also
 * counts a built-with-uPlot page that lacks those two. */
static inline int kvt_html_other_scripts(const char *html, int have_uplot)
{
	int other = 0, wrapped = 0;
	for (const char *p = html; (p = strstr(p, "<script")); p++) {
		static const char data[] = "<script type=\"application/json\"";
		static const char wrap[] = "<script>//<![CDATA[\n";
		if (!strncmp(p, data, sizeof data - 1))
			continue;
		if (have_uplot && !strncmp(p, wrap, sizeof wrap - 1))
			wrapped++;
		else
			other++;
	}
	return other + (have_uplot && wrapped != 2);
}

#endif
