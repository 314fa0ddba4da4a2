/* SPDX-License-Identifier: MIT */
/* Streaming reader of kvtier trace files (format in trace_format.h and
 * docs/trace-format.md), for the kvtier tool and the tests: records and
 * zstd frames (linked with libzstd), from a file or a pipe. Memory use is
 * one record, one input buffer and, with frames, one frame's content (1 MiB)
 * and a decompression context; every length is checked; a hostile,
 * truncated or damaged file gives a message, never a crash. Not for use
 * inside hooks (allocates). */
#ifndef KVT_TRACE_READ_H
#define KVT_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>
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

/* Why reading stopped before the end of the file (r->cut set). */
enum kvt_trace_stop {
	KVT_STOP_NONE = 0,
	KVT_STOP_RECORD,                        /* the file ends inside a record */
	KVT_STOP_FRAME,                         /* the file ends inside a zstd frame */
	KVT_STOP_DAMAGED,                       /* a zstd frame fails its checksum or does not decode */
};

struct kvt_trace_reader {
	int fd, has_fd;
	int regular;                            /* a regular file (else a pipe: file_bytes grows) */
	struct kvt_trace_header hdr;
	uint64_t offset;                        /* of the next record, or of the zstd frame it is in */
	uint64_t file_bytes;
	uint64_t nr_events;                     /* EVENT records read so far */
	uint64_t nr_frames;                     /* zstd frames read so far */
	int saw_end;
	int cut;                                /* stopped early: the segment at offset is not read */
	int stop;                               /* enum kvt_trace_stop: why */
	char err[256];
	char why[96];                           /* KVT_STOP_DAMAGED: libzstd's reason */
	/* the zstd frame being read: its content, and the next record in it */
	void *dctx;                             /* ZSTD_DCtx, made at the first frame */
	unsigned char *frame;                   /* KVT_TRACE_ZSTD_FRAME_BYTES + 1, malloc'd */
	size_t frame_len, frame_pos;
	int in_frame;
	uint64_t frame_end;                     /* the file offset after it */
	/* the file, through one buffer (a pipe reads as a file) */
	size_t in_pos, in_len;
	uint64_t ips[KVT_TRACE_MAX_FRAMES];     /* frames of the last STACK record */
	struct kvt_trace_pyframe py[KVT_TRACE_MAX_PYFRAMES];   /* of the last PYSTACK */
	_Alignas(8) unsigned char rec[65536 + 8];
	unsigned char in[1u << 17];
};

/* 0, or a negative errno with r->err saying what is wrong (a newer format
 * version is refused and named). */
int kvt_trace_reader_open(struct kvt_trace_reader *r, const char *path);
/* 1 with *it filled (valid until the next call), 0 at the end of the file,
 * or a negative errno with r->err set. A file without an END record ends
 * with 0 and r->saw_end == 0. A file that ends inside a record or a zstd
 * frame (its writer killed mid-write, or still writing), or whose frame
 * fails its checksum, also ends with 0, with r->cut and r->stop set and
 * r->offset at that record or frame: what came before it is read (a
 * frame's records only once the whole frame has decoded and its checksum
 * matched). */
int kvt_trace_next(struct kvt_trace_reader *r, struct kvt_trace_item *it);
/* When reading stopped early (r->cut): 1, with the one line to tell the
 * reader (the byte it stopped at, why, the events read) in buf; else 0. */
int kvt_trace_stop_line(const struct kvt_trace_reader *r, char *buf, size_t len);
void kvt_trace_reader_close(struct kvt_trace_reader *r);
/* The run a trace belongs to (its INFO record kvtier.run=<id>, written
 * right after the header since traces carry one) into id: 1, 0 when the
 * file names none (an older trace) or is not a regular file (a pipe, left
 * unread for the one reader it can have), or a negative errno with
 * "path: why" in err. */
int kvt_trace_read_run(const char *path, char *id, size_t len, char *err, size_t errlen);

#endif
