// SPDX-License-Identifier: MIT
/* libFuzzer target: the trace reader (profiler/trace_read.c) over arbitrary
 * bytes, and what `kvtier replay FILE` builds on it (profiler/trace_replay.c:
 * events into a registry and the policy replay core, every allocation's
 * report line). The input is the whole file, written to a memfd and opened
 * by path as the tools open a trace; then the same file with its body after
 * the 64-byte header made mixed: the first part as it is, the rest one zstd
 * frame with a checksum (the input's last byte says where), and that file
 * cut inside the frame (so mutations reach the records inside frames, and
 * frames cut short). The registry's two system calls are stubbed here
 * (plain mmap/munmap, with the maps counted).
 * Invariants checked beyond "no crash, leak or UB":
 *   - kvt_trace_next returns 1, 0 or a negative errno, and an error always
 *     comes with a message;
 *   - each item has exactly the pointer its type promises, text, frames
 *     and build id bytes lie inside the record (every byte is read), the
 *     position (offset, then the place inside a frame) only grows and the
 *     offset never passes the end of the file; an EPOCH item's record is whole
 *     (every byte of struct kvt_rec_epoch is read);
 *   - every enum name lookup of a field answers (never NULL). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include "kvtier/api.h"
#include "kvtier/policy.h"
#include "../../profiler/trace_read.h"
#include "../../profiler/trace_replay.h"

/* ---- stubs for profiler/registry.c's outside calls ---------------------- */
/* kvt_reg_destroy leaves the registry's node slabs mapped (a tool exits
 * soon after); here every input creates one, so the maps still live after
 * an input are found in this table and unmapped. */

#define MAX_MAPS 4096

static struct { void *addr; size_t len; } maps[MAX_MAPS];

void *kvt_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int kvt_sys_munmap(void *addr, size_t len);
void *kvt_sys_map_own(size_t len, int flags);

void *kvt_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = mmap(addr, len, prot, flags, fd, off);
	for (size_t i = 0; p != MAP_FAILED && i < MAX_MAPS; i++) {
		if (!maps[i].addr) {
			maps[i].addr = p;
			maps[i].len = len;
			return p;
		}
	}
	if (p != MAP_FAILED)
		abort();              /* more maps than one input should ever need */
	return p;
}

int kvt_sys_munmap(void *addr, size_t len)
{
	for (size_t i = 0; i < MAX_MAPS; i++)
		if (maps[i].addr == addr)
			maps[i].addr = NULL;
	return munmap(addr, len) ? -errno : 0;
}

/* base/platform.c hints kvtier's own maps far from the program's; here
 * the kernel's placement is as good, and the map is tracked like any other */
void *kvt_sys_map_own(size_t len, int flags)
{
	return kvt_sys_mmap(NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
}

static void unmap_left(void)
{
	for (size_t i = 0; i < MAX_MAPS; i++)
		if (maps[i].addr)
			kvt_sys_munmap(maps[i].addr, maps[i].len);
}

static int fd = -1;
static char path[64];
static struct kvt_trace_reader rd;
static volatile unsigned sink;

static void touch(const void *p, size_t len)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < len; i++)
		sink += b[i];
}

static void check_names(const struct kvt_rec_event *e)
{
	if (!kvt_api_name(e->api) || !kvt_op_name(e->op) || !kvt_kind_name(e->kind) ||
	    !kvt_placement_name(e->placement))
		abort();
}

static void check_item(const struct kvt_trace_item *it)
{
	switch (it->type) {
	case KVT_REC_EVENT:
		if (!it->ev || it->stack || it->mod || it->end || it->epoch || it->build_id || it->pystack)
			abort();
		check_names(it->ev);
		break;
	case KVT_REC_STACK:
		if (!it->stack || !it->ips || it->stack->nr_frames > KVT_TRACE_MAX_FRAMES)
			abort();
		touch(it->ips, 8ull * it->stack->nr_frames);
		break;
	case KVT_REC_MODULE:
		if (!it->mod || it->text_len != it->mod->path_bytes)
			abort();
		touch(it->text, it->text_len);
		break;
	case KVT_REC_INFO:
		if (it->text_len + sizeof(struct kvt_rec_head) > 65535)
			abort();
		touch(it->text, it->text_len);
		break;
	case KVT_REC_END:
		if (!it->end || !rd.saw_end)
			abort();
		break;
	case KVT_REC_MODULE_BUILDID:
		if (!it->build_id || !it->id || it->mod || !it->build_id->id_bytes ||
		    it->build_id->id_bytes > KVT_TRACE_MAX_BUILD_ID)
			abort();
		touch(it->id, it->build_id->id_bytes);
		break;
	case KVT_REC_EPOCH:
		if (!it->epoch || it->ev || it->end || it->epoch->head.bytes < sizeof *it->epoch)
			abort();
		touch(it->epoch, sizeof *it->epoch);
		break;
	case KVT_REC_FAULTS:
		if (!it->faults || !it->fault_entries || !it->faults->nr ||
		    it->faults->nr > KVT_TRACE_MAX_FAULTS ||
		    (const char *)(it->fault_entries + it->faults->nr) !=
		    (const char *)it->faults + it->faults->head.bytes)
			abort();
		touch(it->fault_entries, it->faults->nr * sizeof *it->fault_entries);
		break;
	case KVT_REC_PYSTACK: {
		/* every frame's names lie inside the record the reader returned */
		const char *lo = (const char *)it->pystack, *hi = lo + it->pystack->head.bytes;
		if (!it->pyframes || it->pystack->nr_frames > KVT_TRACE_MAX_PYFRAMES)
			abort();
		for (uint32_t i = 0; i < it->pystack->nr_frames; i++) {
			const struct kvt_trace_pyframe *f = &it->pyframes[i];
			if (f->func < lo || f->func + f->func_len > hi || f->file < lo ||
			    f->file + f->file_len > hi)
				abort();
			touch(f->func, f->func_len);
			touch(f->file, f->file_len);
		}
		break;
	}
	default:
		abort();          /* the reader let an unknown type through */
	}
}

static void read_all(size_t size)
{
	struct kvt_trace_item it;
	int rc = kvt_trace_reader_open(&rd, path);
	if (rc && (rc > 0 || !rd.err[0]))
		abort();
	uint64_t last = rd.offset, last_in = 0;
	while (!rc && (rc = kvt_trace_next(&rd, &it)) == 1) {
		check_item(&it);
		uint64_t in = rd.in_frame ? rd.frame_pos : 0;
		if (rd.offset < last || (rd.offset == last && in <= last_in) || rd.offset > size ||
		    (rd.in_frame && rd.frame_pos > rd.frame_len))
			abort();
		last = rd.offset;
		last_in = in;
		rc = 0;
	}
	if (rc > 1 || (rc < 0 && !rd.err[0]))
		abort();
	/* a file cut inside a record: it stops at that record, inside the file,
	 * and says so in one line */
	char stop[256];
	if (!rc && rd.cut && (rd.offset >= size || !kvt_trace_stop_line(&rd, stop, sizeof stop) ||
			      strchr(stop, '\n')))
		abort();
	kvt_trace_reader_close(&rd);
}

/* `kvtier replay FILE` on the default rules. */
static void replay_all(void)
{
	static struct kvt_policy pol;
	struct kvt_replay r;
	char err[256], line[512];
	kvt_policy_default(&pol);
	kvt_replay_init(&r, &pol, NULL, 0);
	int rc = kvt_trace_replay(path, &r, err, sizeof err);
	if (rc > 0)
		abort();
	for (size_t i = 0; i < r.nr; i++)
		kvt_replay_format(&r, i, line, sizeof line);
	free(r.allocs);
}

static void one_file(const uint8_t *data, size_t size)
{
	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	read_all(size);
	replay_all();
	unmap_left();
}

/* header + body[0, k) + one zstd frame of body[k, n), k from the last
 * byte; then the same cut inside the frame. */
static void mixed_files(const uint8_t *data, size_t size)
{
	static uint8_t out[64 + 2 * 16384 + 1024];
	static ZSTD_CCtx *cctx;
	const size_t hdr = sizeof(struct kvt_trace_header);
	if (size <= hdr + 1 || size - hdr > 2 * 16384)
		return;
	if (!cctx) {
		cctx = ZSTD_createCCtx();
		if (!cctx || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)))
			abort();
	}
	size_t body = size - hdr - 1, k = body * data[size - 1] / 256;
	memcpy(out, data, hdr + k);
	size_t c = ZSTD_compress2(cctx, out + hdr + k, sizeof out - hdr - k,
				  data + hdr + k, body - k);
	if (ZSTD_isError(c))
		abort();
	one_file(out, hdr + k + c);
	one_file(out, hdr + k + c * data[size - 1] / 256);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (fd < 0) {
		fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
		if (fd < 0)
			abort();
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	one_file(data, size);
	mixed_files(data, size);
	return 0;
}
