// SPDX-License-Identifier: MIT
/* `kvtier report TRACE...` (the summary) and `kvtier dump TRACE` (every
 * record as one text line; the format tests and humans read). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "summary.h"
#include "../profiler/trace_read.h"

int kvt_cmd_report(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help")) {
		fprintf(argc < 2 ? stderr : stdout, "usage: kvtier report TRACE...\n");
		return argc < 2 ? 2 : 0;
	}
	struct kvt_summary s;
	memset(&s, 0, sizeof s);
	int bad = 0;
	for (int i = 1; i < argc; i++) {
		char err[512];
		if (kvt_summary_add(&s, argv[i], err, sizeof err)) {
			fprintf(stderr, "kvtier report: %s\n", err);
			bad = 1;
		}
	}
	kvt_summary_print(&s, stdout);
	return bad;
}

static void dump_event(const struct kvt_rec_event *e)
{
	printf("event t=%" PRIu64 " tid=%u op=%s api=%s kind=%s place=%s addr=0x%" PRIx64
	       " size=%" PRIu64 " aux=0x%" PRIx64 " aux2=0x%" PRIx64 " result=%d stack=%u\n",
	       e->t_ns, e->tid, kvt_op_name(e->op), kvt_api_name(e->api), kvt_kind_name(e->kind),
	       kvt_placement_name(e->placement), e->addr, e->size, e->aux, e->aux2, e->result,
	       e->stack_id);
}

int kvt_cmd_dump(int argc, char **argv)
{
	if (argc != 2 || !strcmp(argv[1], "--help")) {
		fprintf(argc != 2 ? stderr : stdout, "usage: kvtier dump TRACE\n");
		return argc != 2 ? 2 : 0;
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
			for (uint32_t i = 0; i < it.stack->nr_frames; i++)
				printf(" 0x%" PRIx64, it.ips[i]);
			printf("\n");
		} else if (it.mod) {
			printf("module bias=0x%" PRIx64 " start=0x%" PRIx64 " end=0x%" PRIx64 " %.*s\n",
			       it.mod->bias, it.mod->start, it.mod->end, (int)it.text_len, it.text);
		} else if (it.end) {
			printf("end events=%" PRIu64 " dropped=%" PRIu64 " stacks=%" PRIu64 "\n",
			       it.end->nr_events, it.end->nr_dropped, it.end->nr_stacks);
		} else if (it.type == KVT_REC_INFO) {
			printf("info %.*s\n", (int)it.text_len, it.text);
		}
	}
	if (ret < 0)
		fprintf(stderr, "kvtier dump: %s: %s\n", argv[1], r.err);
	kvt_trace_reader_close(&r);
	return ret < 0;
}
