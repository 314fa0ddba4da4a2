// SPDX-License-Identifier: MIT
/* `kvtier report TRACE|DIR|RUN...` (argument handling: a run's directory
 * or id gives its traces, traces of different runs are refused without
 * --mixed-runs; the report itself is in report_*.c) and `kvtier dump
 * TRACE` (every record as one text line; the format tests and humans
 * read). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd.h"
#include "report.h"
#include "runs.h"
#include "../profiler/trace_read.h"

static int report_usage(FILE *f, int status)
{
	fprintf(f, "usage: kvtier report TRACE|DIR|RUN... [--format text|json|html] [-o FILE] [-q]\n"
		"                    [--mixed-runs] [--debuginfo-path PATH] [--value bytes|count]\n"
		"       kvtier report --diff A B [--format text|json] [-o FILE] [-q]\n"
		"  the offline allocation report of one or more traces (one per process):\n"
		"  call sites, sizes, kinds and decisions, timeline, phases and chunk heat.\n"
		"  DIR: every trace in it (the directory kvtier run made); RUN: a run id,\n"
		"  the traces of ./kvtier-RUN.*\n"
		"  --format F   text (default), json (every number), html (one file, SVG),\n"
		"               folded (flame-graph input: one line per call stack,\n"
		"               \"root;...;leaf VALUE\", kvtier's frames left out; VALUE is\n"
		"               the bytes allocated there, or with --value count the\n"
		"               number of allocations)\n"
		"  --diff A B   compare two runs (each a trace, a run's directory or a run id):\n"
		"               per call site bytes and counts in A, in B and the change,\n"
		"               sorted by the absolute change in bytes; text or json\n"
		"  -o FILE      write there instead of stdout; without --format, a FILE\n"
		"               ending in .html or .htm means html, .json means json\n"
		"  -q           no progress line on stderr for big traces\n"
		"  --mixed-runs read traces of different runs together (refused otherwise)\n"
		"  --debuginfo-path PATH  where libdwfl looks for debug files and, by build\n"
		"               id, for modules rebuilt since the trace (default\n"
		"               \":.debug:/usr/lib/debug\")\n");
	return status;
}

/* The format -o FILE implies by its suffix (case-insensitive), or NULL. */
static const char *format_of_path(const char *out)
{
	static const struct { const char *suffix, *fmt; } map[] = {
		{ ".html", "html" }, { ".htm", "html" }, { ".json", "json" },
	};
	size_t n = out ? strlen(out) : 0;
	for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
		size_t k = strlen(map[i].suffix);
		if (n > k && !strcasecmp(out + n - k, map[i].suffix))
			return map[i].fmt;
	}
	return NULL;
}

static int report_write(struct kvt_report *r, const char *fmt, const char *out)
{
	FILE *f = out ? fopen(out, "w") : stdout;
	if (!f) {
		fprintf(stderr, "kvtier report: %s: %s\n", out, strerror(errno));
		return 1;
	}
	int ret = !strcmp(fmt, "json") ? kvt_report_print_json(r, f) :
		  !strcmp(fmt, "html") ? kvt_report_print_html(r, f) :
		  !strcmp(fmt, "folded") ? kvt_report_print_folded(r, f, r->value_count) :
		  kvt_report_print_text(r, f);
	if (fflush(f) || (out && fclose(f)) || ret) {
		fprintf(stderr, "kvtier report: %s: write failed\n", out ? out : "stdout");
		return 1;
	}
	if (out)
		fprintf(stderr, "kvtier report: wrote %s\n", out);
	return 0;
}

/* The traces the arguments name; 0, or 1 said. */
static int collect_paths(char **args, int nr, struct kvt_paths *paths)
{
	char err[600];
	for (int i = 0; i < nr; i++)
		if (kvt_run_arg_traces(args[i], paths, err, sizeof err)) {
			fprintf(stderr, "kvtier report: %s\n", err);
			return 1;
		}
	return 0;
}

/* Traces of more than one run: refused (2), or with mixed, read with a
 * note. 0, or the status. */
static int check_runs(struct kvt_report *r, struct kvt_paths *paths, int mixed)
{
	char err[600];
	int runs = kvt_runs_count(paths->v, paths->n, mixed ? NULL : stderr,
				  "kvtier report: these traces come from different runs; give one "
				  "run's directory (kvtier run prints it), or --mixed-runs to read "
				  "them together:\n", err, sizeof err);
	if (runs < 0) {
		fprintf(stderr, "kvtier report: %s\n", err);
		return 1;
	}
	if (runs > 1 && !mixed)
		return 2;
	if (runs > 1)
		kvt_report_note(r, "traces of %d different runs read together (--mixed-runs)", runs);
	return 0;
}

int kvt_cmd_report(int argc, char **argv)
{
	const char *fmt = NULL, *out = NULL, *debuginfo = NULL;
	char **args = calloc((size_t)argc, sizeof *args);
	struct kvt_paths paths = { 0 };
	int nr = 0, quiet = 0, only_paths = 0, mixed = 0, diff = 0;
	const char *value = "bytes";
	if (!args)
		return 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (only_paths || a[0] != '-' || !a[1]) {
			args[nr++] = argv[i];
		} else if (!strcmp(a, "--")) {
			only_paths = 1;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			free(args);
			return report_usage(stdout, 0);
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			quiet = 1;
		} else if (!strcmp(a, "--mixed-runs")) {
			mixed = 1;
		} else if (!strcmp(a, "--diff")) {
			diff = 1;
		} else if (!strcmp(a, "--value") && i + 1 < argc) {
			value = argv[++i];
		} else if (!strncmp(a, "--value=", 8)) {
			value = a + 8;
		} else if ((!strcmp(a, "--format") || !strcmp(a, "-o")) && i + 1 < argc) {
			*(a[1] == 'o' ? &out : &fmt) = argv[++i];
		} else if (!strncmp(a, "--format=", 9)) {
			fmt = a + 9;
		} else if (!strcmp(a, "--debuginfo-path") && i + 1 < argc) {
			debuginfo = argv[++i];
		} else if (!strncmp(a, "--debuginfo-path=", 17)) {
			debuginfo = a + 17;
		} else {
			fprintf(stderr, "kvtier report: unknown or incomplete option '%s'\n", a);
			free(args);
			return report_usage(stderr, 2);
		}
	}
	if (!fmt)                       /* an explicit --format wins over -o's suffix */
		fmt = format_of_path(out) ? format_of_path(out) : "text";
	if (strcmp(fmt, "text") && strcmp(fmt, "json") && strcmp(fmt, "html") &&
	    strcmp(fmt, "folded")) {
		fprintf(stderr, "kvtier report: --format must be text, json, html or folded, not "
			"'%s'\n", fmt);
		free(args);
		return 2;
	}
	if (strcmp(value, "bytes") && strcmp(value, "count")) {
		fprintf(stderr, "kvtier report: --value must be bytes or count, not '%s'\n", value);
		free(args);
		return 2;
	}
	if (diff) {                     /* report_diff.c */
		char *run_a = nr == 2 ? args[0] : NULL, *run_b = nr == 2 ? args[1] : NULL;
		free(args);
		return run_a ? kvt_report_diff_cmd(run_a, run_b, fmt, out, quiet, debuginfo)
			     : report_usage(stderr, 2);
	}
	if (!nr) {
		free(args);
		return report_usage(stderr, 2);
	}
	struct kvt_report *r = calloc(1, sizeof *r);
	char err[512];
	int status = collect_paths(args, nr, &paths);
	if (status)
		goto out;
	if (!r || kvt_report_init(r, paths.v, paths.n, err, sizeof err)) {
		fprintf(stderr, "kvtier report: %s\n", r ? err : "out of memory");
		status = 1;
		goto out;
	}
	if ((status = check_runs(r, &paths, mixed)))
		goto out;
	r->progress = !quiet;
	r->debuginfo_path = debuginfo;
	r->value_count = !strcmp(value, "count");
	for (int i = 0; i < paths.n && !status; i++)
		if (kvt_report_add(r, paths.v[i], err, sizeof err)) {
			fprintf(stderr, "kvtier report: %s\n", err);
			status = 1;
		}
	if (!status) {
		kvt_report_symbolize(r);        /* notes first: every printer shows them */
		status = report_write(r, fmt, out);
	}
out:
	if (r)
		kvt_report_free(r);
	free(r);
	free(args);
	kvt_paths_free(&paths);
	return status;
}

static void dump_event(const struct kvt_rec_event *e)
{
	printf("event t=%" PRIu64 " tid=%u op=%s api=%s kind=%s place=%s addr=0x%" PRIx64
	       " size=%" PRIu64 " aux=0x%" PRIx64 " aux2=0x%" PRIx64 " result=%d stack=%u\n",
	       e->t_ns, e->tid, kvt_op_name(e->op), kvt_api_name(e->api), kvt_kind_name(e->kind),
	       kvt_placement_name(e->placement), e->addr, e->size, e->aux, e->aux2, e->result,
	       e->stack_id);
}

static void dump_epoch(const struct kvt_rec_epoch *e)
{
	printf("epoch t=%" PRIu64 " n=%" PRIu64 " device=%d hbm=%" PRIu64 " budget=%" PRIu64
	       " promoted=%u demoted=%u faults=%u failed=%u\n", e->t_ns, e->epoch, e->device,
	       e->hbm_bytes, e->budget_bytes, e->nr_promoted, e->nr_demoted, e->nr_faults,
	       e->nr_failed);
}

/* Bytes of a trace string, control bytes shown as '?'. */
static void put_name(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		putchar((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i]);
}

static void dump_pystack(const struct kvt_trace_item *it)
{
	printf("pystack id=%u frames=%u", it->pystack->stack_id, it->pystack->nr_frames);
	for (uint32_t i = 0; i < it->pystack->nr_frames; i++) {
		const struct kvt_trace_pyframe *f = &it->pyframes[i];
		putchar(' ');
		put_name(f->func, f->func_len);
		putchar('@');
		put_name(f->file, f->file_len);
		printf(":%u", f->line);
	}
	printf("\n");
}

int kvt_cmd_dump(int argc, char **argv)
{
	int help = argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
	if (argc != 2 || help) {
		fprintf(help ? stdout : stderr, "usage: kvtier dump TRACE\n"
			"  every record of a trace as one text line\n");
		return help ? 0 : 2;
	}
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	int ret = kvt_trace_reader_open(&r, argv[1]);
	if (ret) {
		fprintf(stderr, "kvtier dump: %s\n", r.err);
		kvt_trace_reader_close(&r);
		return 1;
	}
	printf("header version=%u pid=%u ppid=%u exe=%.16s\n", r.hdr.version, r.hdr.pid,
	       r.hdr.ppid, r.hdr.exe);
	while ((ret = kvt_trace_next(&r, &it)) > 0) {
		if (it.ev) {
			dump_event(it.ev);
		} else if (it.stack) {
			printf("stack id=%u frames=%u", it.stack->id, it.stack->nr_frames);
			for (uint32_t i = 0; i < it.stack->nr_frames; i++) {
				uint64_t ip;
				memcpy(&ip, &it.ips[i], sizeof ip);
				printf(" 0x%" PRIx64, ip);
			}
			printf("\n");
		} else if (it.pystack) {
			dump_pystack(&it);
		} else if (it.mod) {
			printf("module bias=0x%" PRIx64 " start=0x%" PRIx64 " end=0x%" PRIx64 " %.*s\n",
			       it.mod->bias, it.mod->start, it.mod->end, (int)it.text_len, it.text);
		} else if (it.build_id) {
			printf("build_id start=0x%" PRIx64 " ", it.build_id->start);
			for (uint32_t i = 0; i < it.build_id->id_bytes; i++)
				printf("%02x", it.id[i]);
			printf("\n");
		} else if (it.end) {
			printf("end events=%" PRIu64 " dropped=%" PRIu64 " stacks=%" PRIu64 "\n",
			       it.end->nr_events, it.end->nr_dropped, it.end->nr_stacks);
		} else if (it.epoch) {
			dump_epoch(it.epoch);
		} else if (it.type == KVT_REC_INFO) {
			printf("info %.*s\n", (int)it.text_len, it.text);
		}
	}
	char stop[256];
	if (ret < 0)
		fprintf(stderr, "kvtier dump: %s: %s\n", argv[1], r.err);
	else if (kvt_trace_stop_line(&r, stop, sizeof stop))
		fprintf(stderr, "kvtier dump: %s: %s\n", argv[1], stop);
	kvt_trace_reader_close(&r);
	return ret < 0;
}
