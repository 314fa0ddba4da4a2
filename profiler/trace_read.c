// SPDX-License-Identifier: MIT
/* Streaming trace reader (contract in trace_read.h). Every record's length
 * is validated against its type before any field is used; a zstd frame is
 * decoded whole, its checksum checked, before any of its records is
 * returned. Offline only: the Makefile links it into libkvtier.a (the tool,
 * tests), never libkvtier.so, and whatever links it links libzstd. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "trace_read.h"

static int fail(struct kvt_trace_reader *r, int err, const char *what)
{
	if (r->in_frame)
		snprintf(r->err, sizeof r->err, "offset %llu (a zstd frame), byte %llu of its "
			 "%llu: %s", (unsigned long long)r->offset, (unsigned long long)r->frame_pos,
			 (unsigned long long)r->frame_len, what);
	else
		snprintf(r->err, sizeof r->err, "offset %llu: %s",
			 (unsigned long long)r->offset, what);
	return err;
}

/* ---- the file, through r->in ---- */

/* More bytes into r->in after what is unread: > 0, 0 at the end of the
 * file, or -errno. */
static ssize_t fill(struct kvt_trace_reader *r)
{
	if (r->in_pos) {
		memmove(r->in, r->in + r->in_pos, r->in_len - r->in_pos);
		r->in_len -= r->in_pos;
		r->in_pos = 0;
	}
	if (r->in_len == sizeof r->in)
		return (ssize_t)r->in_len;
	ssize_t n;
	do
		n = read(r->fd, r->in + r->in_len, sizeof r->in - r->in_len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	r->in_len += (size_t)n;
	if (!r->regular)
		r->file_bytes += (uint64_t)n;       /* a pipe: what came so far */
	return n;
}

/* n (<= sizeof r->in) unread bytes at r->in + r->in_pos: how many there
 * are (fewer at the end of the file), or -errno. */
static ssize_t want(struct kvt_trace_reader *r, size_t n)
{
	while (r->in_len - r->in_pos < n) {
		ssize_t got = fill(r);
		if (got < 0)
			return got;
		if (!got)
			break;
	}
	size_t have = r->in_len - r->in_pos;
	return (ssize_t)(have < n ? have : n);
}

int kvt_trace_reader_open(struct kvt_trace_reader *r, const char *path)
{
	memset(r, 0, offsetof(struct kvt_trace_reader, ips));
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	r->has_fd = r->fd >= 0;
	if (r->fd < 0) {
		int e = errno;
		snprintf(r->err, sizeof r->err, "%s: %s", path, strerror(e));
		return -e;
	}
	struct stat st;
	if (!fstat(r->fd, &st) && S_ISREG(st.st_mode)) {
		r->regular = 1;
		r->file_bytes = (uint64_t)st.st_size;
	}
	ssize_t n = want(r, sizeof r->hdr);
	if (n < 0)
		return fail(r, (int)n, strerror((int)-n));
	if (n < (ssize_t)sizeof r->hdr)
		return fail(r, -EPROTO, "not a kvtier trace (too short for a header)");
	memcpy(&r->hdr, r->in + r->in_pos, sizeof r->hdr);
	if (memcmp(r->hdr.magic, KVT_TRACE_MAGIC, 8))
		return fail(r, -EPROTO, "not a kvtier trace (bad magic)");
	if (r->hdr.version > KVT_TRACE_VERSION) {
		snprintf(r->err, sizeof r->err,
			 "trace format version %u is newer than this kvtier reads (%u); "
			 "use a newer kvtier", r->hdr.version, KVT_TRACE_VERSION);
		return -EPROTO;
	}
	if (r->hdr.version == 0 || r->hdr.header_bytes < sizeof r->hdr ||
	    r->hdr.header_bytes > 4096)
		return fail(r, -EPROTO, "corrupt header");
	n = want(r, r->hdr.header_bytes);           /* a longer header: its tail skipped */
	if (n >= 0 && n < (ssize_t)r->hdr.header_bytes)
		return fail(r, -EPROTO, "corrupt header");
	if (n < 0)
		return fail(r, (int)n, strerror((int)-n));
	r->in_pos += r->hdr.header_bytes;
	r->offset = r->hdr.header_bytes;
	return 0;
}

/* A PYSTACK's frames must fill the record exactly. */
static int check_pystack(struct kvt_trace_reader *r, const struct kvt_rec_head *h,
			 struct kvt_trace_item *it)
{
	const unsigned char *p = r->rec;
	const struct kvt_rec_pystack *ps = (const void *)p;
	if (h->bytes < sizeof *ps || ps->nr_frames > KVT_TRACE_MAX_PYFRAMES)
		return fail(r, -EPROTO, "python stack record with a bad frame count");
	size_t off = sizeof *ps;
	for (uint32_t i = 0; i < ps->nr_frames; i++) {
		struct kvt_rec_pyframe f;
		if (off + sizeof f > h->bytes)
			return fail(r, -EPROTO, "python stack record shorter than its frames");
		memcpy(&f, p + off, sizeof f);
		off += sizeof f;
		if (off + f.func_bytes + f.file_bytes > h->bytes)
			return fail(r, -EPROTO, "python frame names past the record's end");
		r->py[i] = (struct kvt_trace_pyframe){
			.line = f.line, .func_len = f.func_bytes, .file_len = f.file_bytes,
			.func = (const char *)p + off, .file = (const char *)p + off + f.func_bytes,
		};
		off += f.func_bytes + (size_t)f.file_bytes;
	}
	if (off != h->bytes)
		return fail(r, -EPROTO, "python stack record with bytes after its frames");
	it->pystack = ps;
	it->pyframes = r->py;
	return 1;
}

static int check_shape(struct kvt_trace_reader *r, const struct kvt_rec_head *h,
		       struct kvt_trace_item *it)
{
	const unsigned char *p = r->rec;
	memset(it, 0, sizeof *it);
	it->type = h->type;
	switch (h->type) {
	case KVT_REC_EVENT:
		if (h->bytes != sizeof(struct kvt_rec_event))
			return fail(r, -EPROTO, "event record of the wrong size");
		it->ev = (const void *)p;
		return 1;
	case KVT_REC_STACK: {
		const struct kvt_rec_stack *s = (const void *)p;
		if (h->bytes < sizeof *s || s->nr_frames > KVT_TRACE_MAX_FRAMES ||
		    h->bytes != sizeof *s + 8ull * s->nr_frames)
			return fail(r, -EPROTO, "stack record with a bad frame count");
		it->stack = s;
		memcpy(r->ips, p + sizeof *s, 8ull * s->nr_frames);   /* frames sit at offset 12 */
		it->ips = r->ips;
		return 1;
	}
	case KVT_REC_MODULE: {
		const struct kvt_rec_module *m = (const void *)p;
		if (h->bytes < sizeof *m || h->bytes != sizeof *m + m->path_bytes)
			return fail(r, -EPROTO, "module record with a bad path length");
		it->mod = m;
		it->text = (const char *)p + sizeof *m;
		it->text_len = m->path_bytes;
		return 1;
	}
	case KVT_REC_MODULE_BUILDID: {
		const struct kvt_rec_module_buildid *b = (const void *)p;
		if (h->bytes < sizeof *b || !b->id_bytes || b->id_bytes > KVT_TRACE_MAX_BUILD_ID ||
		    h->bytes != sizeof *b + b->id_bytes)
			return fail(r, -EPROTO, "build id record with a bad length");
		it->build_id = b;
		it->id = p + sizeof *b;
		return 1;
	}
	case KVT_REC_INFO:
		it->text = (const char *)p + sizeof *h;
		it->text_len = h->bytes - sizeof *h;
		return 1;
	case KVT_REC_END:
		if (h->bytes != sizeof(struct kvt_rec_end))
			return fail(r, -EPROTO, "end record of the wrong size");
		it->end = (const void *)p;
		r->saw_end = 1;
		return 1;
	case KVT_REC_EPOCH:
		if (h->bytes < sizeof(struct kvt_rec_epoch))
			return fail(r, -EPROTO, "epoch record too short");
		it->epoch = (const void *)p;
		return 1;
	case KVT_REC_PYSTACK:
		return check_pystack(r, h, it);
	case KVT_REC_FAULTS: {
		const struct kvt_rec_faults *fr = (const void *)p;
		if (h->bytes < sizeof *fr || !fr->nr || fr->nr > KVT_TRACE_MAX_FAULTS ||
		    h->bytes != sizeof *fr + fr->nr * sizeof(struct kvt_rec_fault_entry))
			return fail(r, -EPROTO, "faults record with a bad entry count");
		it->faults = fr;
		it->fault_entries = (const void *)(p + sizeof *fr);
		return 1;
	}
	default:
		return fail(r, -EPROTO, "unknown record type");
	}
}

/* Reading stops at the segment at r->offset: the file ends inside it (the
 * writer killed in the middle of a write, or still writing), or its frame
 * is damaged. What came before it stands. */
static int stop_at(struct kvt_trace_reader *r, int why)
{
	r->cut = 1;
	r->stop = why;
	return 0;
}

/* ---- zstd frames ---- */

static int frame_setup(struct kvt_trace_reader *r)
{
	if (r->dctx) {
		ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);
		return 0;
	}
	r->frame = malloc(KVT_TRACE_ZSTD_FRAME_BYTES + 1);
	r->dctx = ZSTD_createDCtx();
	if (!r->frame || !r->dctx)
		return fail(r, -ENOMEM, "out of memory for a zstd frame");
	/* a frame of at most 1 MiB needs no larger window: a hostile one
	 * asking for more is refused, not allocated */
	if (ZSTD_isError(ZSTD_DCtx_setParameter(r->dctx, ZSTD_d_windowLogMax, 20)))
		return fail(r, -ENOSYS, "libzstd refused the window limit");
	return 0;
}

/* The zstd frame at r->in_pos (its magic seen), decoded whole into
 * r->frame: 1, 0 when reading stops there, or -errno. */
static int read_frame(struct kvt_trace_reader *r)
{
	ssize_t n = want(r, 5);
	if (n < 0)
		return fail(r, (int)n, strerror((int)-n));
	if (n < 5)
		return stop_at(r, KVT_STOP_FRAME);
	if (!(r->in[r->in_pos + 4] & 0x04))       /* the frame header's Content_Checksum_flag */
		return fail(r, -EPROTO, "zstd frame without a content checksum (kvtier writes one)");
	int ret = frame_setup(r);
	if (ret)
		return ret;
	ZSTD_outBuffer out = { r->frame, KVT_TRACE_ZSTD_FRAME_BYTES + 1, 0 };
	uint64_t used = 0;
	size_t z = 1;
	while (z) {
		if (r->in_pos == r->in_len && (n = fill(r)) <= 0) {
			if (n < 0)
				return fail(r, (int)n, strerror((int)-n));
			return stop_at(r, KVT_STOP_FRAME);
		}
		ZSTD_inBuffer in = { r->in + r->in_pos, r->in_len - r->in_pos, 0 };
		size_t before = out.pos;
		z = ZSTD_decompressStream(r->dctx, &out, &in);
		r->in_pos += in.pos;
		used += in.pos;
		if (ZSTD_isError(z)) {
			if (ZSTD_getErrorCode(z) == ZSTD_error_checksum_wrong)
				snprintf(r->why, sizeof r->why, "fails its content checksum");
			else
				snprintf(r->why, sizeof r->why, "does not decode (%s)",
					 ZSTD_getErrorName(z));
			return stop_at(r, KVT_STOP_DAMAGED);
		}
		if (out.pos > KVT_TRACE_ZSTD_FRAME_BYTES)
			return fail(r, -EPROTO, "zstd frame with more than 1 MiB of records");
		if (z && !in.pos && out.pos == before && r->in_pos < r->in_len)
			return fail(r, -EPROTO, "zstd frame that does not decode");
	}
	r->nr_frames++;
	r->in_frame = 1;
	r->frame_len = out.pos;
	r->frame_pos = 0;
	r->frame_end = r->offset + used;
	return 1;
}

/* ---- records ---- */

/* The next record into r->rec, from the frame being read or the file: its
 * head in *h and 1, 0 at the end or a stop, or -errno. */
static int next_record(struct kvt_trace_reader *r, struct kvt_rec_head *h)
{
	for (;;) {
		if (r->in_frame && r->frame_pos == r->frame_len) {
			r->in_frame = 0;
			r->offset = r->frame_end;
		}
		if (r->in_frame) {
			if (r->frame_len - r->frame_pos < sizeof *h)
				return fail(r, -EPROTO, "zstd frame ends inside a record");
			memcpy(h, r->frame + r->frame_pos, sizeof *h);
			if (h->bytes < sizeof *h)
				return fail(r, -EPROTO, "record shorter than its header");
			if (h->bytes > r->frame_len - r->frame_pos)
				return fail(r, -EPROTO, "zstd frame ends inside a record");
			memcpy(r->rec, r->frame + r->frame_pos, h->bytes);
			return 1;
		}
		ssize_t n = want(r, sizeof *h);
		if (n < 0)
			return fail(r, (int)n, strerror((int)-n));
		if (n == 0)
			return 0;
		if (n < (ssize_t)sizeof *h)
			return stop_at(r, KVT_STOP_RECORD);
		uint32_t magic;
		memcpy(&magic, r->in + r->in_pos, sizeof magic);
		if (magic == KVT_TRACE_ZSTD_MAGIC) {
			int ret = read_frame(r);
			if (ret <= 0)
				return ret;
			continue;
		}
		memcpy(h, r->in + r->in_pos, sizeof *h);
		if (h->bytes < sizeof *h)
			return fail(r, -EPROTO, "record shorter than its header");
		n = want(r, h->bytes);
		if (n < 0)
			return fail(r, (int)n, strerror((int)-n));
		if (n < h->bytes)
			return stop_at(r, KVT_STOP_RECORD);
		memcpy(r->rec, r->in + r->in_pos, h->bytes);
		return 1;
	}
}

int kvt_trace_next(struct kvt_trace_reader *r, struct kvt_trace_item *it)
{
	struct kvt_rec_head h;
	if (r->cut)
		return 0;
	int ret = next_record(r, &h);
	if (ret <= 0)
		return ret;
	ret = check_shape(r, &h, it);
	if (r->in_frame) {
		r->frame_pos += h.bytes;
	} else {
		r->in_pos += h.bytes;
		r->offset += h.bytes;
	}
	r->nr_events += ret > 0 && it->ev;
	return ret;
}

int kvt_trace_stop_line(const struct kvt_trace_reader *r, char *buf, size_t len)
{
	static const char *const why[] = {
		[KVT_STOP_RECORD] = "in a record cut short (the process was killed while writing, "
				    "or is still writing)",
		[KVT_STOP_FRAME] = "in a zstd frame cut short (the process was killed while writing, "
				   "or is still writing)",
	};
	if (!r->cut || r->stop <= KVT_STOP_NONE || r->stop > KVT_STOP_DAMAGED)
		return 0;
	if (r->stop == KVT_STOP_DAMAGED)
		snprintf(buf, len, "stopped at byte %llu of %llu, at a zstd frame that %s (the "
			 "file is damaged); %llu events read before it",
			 (unsigned long long)r->offset, (unsigned long long)r->file_bytes, r->why,
			 (unsigned long long)r->nr_events);
	else
		snprintf(buf, len, "stopped at byte %llu of %llu, %s; %llu events read before it",
			 (unsigned long long)r->offset, (unsigned long long)r->file_bytes,
			 why[r->stop], (unsigned long long)r->nr_events);
	return 1;
}

void kvt_trace_reader_close(struct kvt_trace_reader *r)
{
	if (r->has_fd)
		close(r->fd);
	r->has_fd = 0;
	ZSTD_freeDCtx(r->dctx);
	free(r->frame);
	r->dctx = NULL;
	r->frame = NULL;
}

int kvt_trace_read_run(const char *path, char *id, size_t len, char *err, size_t errlen)
{
	static struct kvt_trace_reader r;     /* 64 KiB record buffer: not on the stack */
	struct kvt_trace_item it;
	struct stat st;
	id[0] = 0;
	if (!stat(path, &st) && !S_ISREG(st.st_mode))
		return 0;             /* a pipe can be read once: by what reads its records */
	int ret = kvt_trace_reader_open(&r, path);
	for (int i = 0; !ret && i < 4; i++) {   /* the writer puts it first */
		int n = kvt_trace_next(&r, &it);
		if (n <= 0) {
			ret = n;
			break;
		}
		if (it.type == KVT_REC_INFO && it.text_len > 11 && it.text_len - 11 < len &&
		    !memcmp(it.text, "kvtier.run=", 11)) {
			memcpy(id, it.text + 11, it.text_len - 11);
			id[it.text_len - 11] = 0;
			ret = 1;
		}
	}
	if (ret < 0)
		snprintf(err, errlen, "%s: %s", path, r.err);
	kvt_trace_reader_close(&r);
	return ret < 0 ? ret : id[0] != 0;
}
