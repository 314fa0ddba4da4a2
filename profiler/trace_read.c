// SPDX-License-Identifier: MIT
/* Streaming trace reader (contract in trace_read.h). Every record's length
 * is validated against its type before any field is used. Offline only: the
 * Makefile links it into libkvtier.a (the tool, tests), never libkvtier.so. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "trace_read.h"

static int fail(struct kvt_trace_reader *r, int err, const char *what)
{
	snprintf(r->err, sizeof r->err, "offset %llu: %s",
		 (unsigned long long)r->offset, what);
	return err;
}

int kvt_trace_reader_open(struct kvt_trace_reader *r, const char *path)
{
	memset(r, 0, sizeof *r - sizeof r->rec);
	r->f = fopen(path, "rb");
	if (!r->f) {
		int e = errno;
		snprintf(r->err, sizeof r->err, "%s: %s", path, strerror(e));
		return -e;
	}
	struct stat st;
	if (!fstat(fileno(r->f), &st))
		r->file_bytes = (uint64_t)st.st_size;
	if (fread(&r->hdr, sizeof r->hdr, 1, r->f) != 1)
		return fail(r, -EPROTO, "not a kvtier trace (too short for a header)");
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
	if (r->hdr.header_bytes > sizeof r->hdr &&
	    fseek(r->f, (long)r->hdr.header_bytes, SEEK_SET))
		return fail(r, -EPROTO, "corrupt header");
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

/* The file ends inside the record at r->offset: the writer was killed in
 * the middle of a write, or is still writing. The records before it stand. */
static int cut_short(struct kvt_trace_reader *r)
{
	if (ferror(r->f))
		return fail(r, -EIO, strerror(errno));
	r->cut = 1;
	return 0;
}

int kvt_trace_next(struct kvt_trace_reader *r, struct kvt_trace_item *it)
{
	struct kvt_rec_head h;
	size_t n = fread(&h, 1, sizeof h, r->f);
	if (n == 0)
		return ferror(r->f) ? fail(r, -EIO, strerror(errno)) : 0;
	if (n != sizeof h)
		return cut_short(r);
	if (h.bytes < sizeof h)
		return fail(r, -EPROTO, "record shorter than its header");
	memcpy(r->rec, &h, sizeof h);
	if (fread(r->rec + sizeof h, 1, h.bytes - sizeof h, r->f) != h.bytes - sizeof h)
		return cut_short(r);
	int ret = check_shape(r, &h, it);
	r->offset += h.bytes;
	r->nr_events += ret > 0 && it->ev;
	return ret;
}

int kvt_trace_stop_line(const struct kvt_trace_reader *r, char *buf, size_t len)
{
	if (!r->cut)
		return 0;
	snprintf(buf, len, "stopped at byte %llu of %llu, in a record cut short (the process "
		 "was killed while writing, or is still writing); %llu events read before it",
		 (unsigned long long)r->offset, (unsigned long long)r->file_bytes,
		 (unsigned long long)r->nr_events);
	return 1;
}

void kvt_trace_reader_close(struct kvt_trace_reader *r)
{
	if (r->f)
		fclose(r->f);
	r->f = NULL;
}

int kvt_trace_read_run(const char *path, char *id, size_t len, char *err, size_t errlen)
{
	static struct kvt_trace_reader r;     /* 64 KiB record buffer: not on the stack */
	struct kvt_trace_item it;
	int ret = kvt_trace_reader_open(&r, path);
	id[0] = 0;
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
