/* SPDX-License-Identifier: MIT */
/* Streaming reader of kvtier trace files (format in trace_format.h and
 * docs/trace-format.md), for the kvtier tool and the tests. Memory use is
 * one record; every length is checked; a hostile or truncated file gives an
 * error message, never a crash. Not for use inside hooks (uses stdio). */
#ifndef KVT_TRACE_READ_H
#define KVT_TRACE_READ_H

#include <stddef.h>
#include <stdio.h>

#include "kvtier/trace_format.h"

/* One Python frame of a PYSTACK record; names point into the record
 * (not NUL-terminated, bytes as written: printers must sanitize). */
struct kvt_trace_pyframe {
	uint32_t line;
	uint16_t func_len, file_len;
	const char *func, *file;
};

struct kvt_trace_item {
	uint16_t type;                          /* enum kvt_rec_type */
	const struct kvt_rec_event *ev;         /* KVT_REC_EVENT */
	const struct kvt_rec_stack *stack;      /* KVT_REC_STACK ... */
	const uint64_t *ips;                    /* ... its frames (an aligned copy) */
	const struct kvt_rec_module *mod;       /* KVT_REC_MODULE ... */
	const char *text;                       /* ... its path, or INFO text */
	size_t text_len;
	const struct kvt_rec_end *end;          /* KVT_REC_END */
	const struct kvt_rec_epoch *epoch;      /* KVT_REC_EPOCH (a longer record: its tail ignored) */
	const struct kvt_rec_module_buildid *build_id;  /* KVT_REC_MODULE_BUILDID ... */
	const unsigned char *id;                /* ... its id_bytes bytes */
	const struct kvt_rec_pystack *pystack;  /* KVT_REC_PYSTACK ... */
	const struct kvt_trace_pyframe *pyframes;   /* ... its frames, decoded */
	const struct kvt_rec_faults *faults;    /* KVT_REC_FAULTS ... */
	const struct kvt_rec_fault_entry *fault_entries;   /* ... its nr entries */
};

struct kvt_trace_reader {
	FILE *f;
	struct kvt_trace_header hdr;
	uint64_t offset;                        /* of the next record */
	uint64_t file_bytes;
	uint64_t nr_events;                     /* EVENT records read so far */
	int saw_end;
	int cut;                                /* the file ends inside the record at offset */
	char err[256];
	uint64_t ips[KVT_TRACE_MAX_FRAMES];     /* frames of the last STACK record */
	struct kvt_trace_pyframe py[KVT_TRACE_MAX_PYFRAMES];   /* of the last PYSTACK */
	_Alignas(8) unsigned char rec[65536 + 8];
};

/* 0, or a negative errno with r->err saying what is wrong (a newer format
 * version is refused and named). */
int kvt_trace_reader_open(struct kvt_trace_reader *r, const char *path);
/* 1 with *it filled (valid until the next call), 0 at the end of the file,
 * or a negative errno with r->err set. A file without an END record ends
 * with 0 and r->saw_end == 0. A file that ends inside a record (its writer
 * killed mid-write, or still writing) also ends with 0, with r->cut set
 * and r->offset at that record: what came before it is read. */
int kvt_trace_next(struct kvt_trace_reader *r, struct kvt_trace_item *it);
/* When the file ended inside a record: 1, with the one line to tell the
 * reader (the byte it stopped at, the events read) in buf; else 0. */
int kvt_trace_stop_line(const struct kvt_trace_reader *r, char *buf, size_t len);
void kvt_trace_reader_close(struct kvt_trace_reader *r);
/* The run a trace belongs to (its INFO record kvtier.run=<id>, written
 * right after the header since traces carry one) into id: 1, 0 when the
 * file names none (an older trace), or a negative errno with "path: why"
 * in err. */
int kvt_trace_read_run(const char *path, char *id, size_t len, char *err, size_t errlen);

#endif
