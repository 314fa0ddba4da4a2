// SPDX-License-Identifier: MIT
/* zstd frames for the trace writer (contract in trace_zstd.h). libzstd is
 * dlopen'ed once, from kvt_trace_compress at start (never in a hook): a
 * process without it runs as before, with an uncompressed trace. The context is a static
 * one (ZSTD_initStaticCCtx) in memory mapped at the load, so compressing
 * never allocates. Must never: allocate, lock or log after the load, except
 * the one warning when a part cannot be compressed. */
#include <errno.h>
#include <dlfcn.h>
#include <string.h>
#include <sys/mman.h>

#define ZSTD_STATIC_LINKING_ONLY      /* the declarations of ZSTD_initStaticCCtx */
#include <zstd.h>

#include "kvtier/trace_format.h"
#include "../base/kvt.h"
#include "trace_zstd.h"

/* Level 1: the flush thread's CPU stays a small fraction of a core at a
 * server's event rates, and the records (fixed fields, repeated stacks and
 * addresses) compress well already (docs/trace-format.md measures it). */
#define KVT_TRACE_ZSTD_LEVEL 1

#define ZSTD_FNS(X) \
	X(size_t, ZSTD_estimateCCtxSize, (int)) \
	X(ZSTD_CCtx *, ZSTD_initStaticCCtx, (void *, size_t)) \
	X(size_t, ZSTD_CCtx_setParameter, (ZSTD_CCtx *, ZSTD_cParameter, int)) \
	X(size_t, ZSTD_compress2, (ZSTD_CCtx *, void *, size_t, const void *, size_t)) \
	X(size_t, ZSTD_compressBound, (size_t)) \
	X(unsigned, ZSTD_isError, (size_t))

static struct {
	int state;                   /* 0 not tried, 1 ready, < 0 the load's error */
	const char *why;
	void *lib;
	ZSTD_CCtx *cctx;
	void *work;
	size_t work_bytes;
	char *out;
	size_t out_bytes;
#define X(ret, name, args) ret (*name) args;
	ZSTD_FNS(X)
#undef X
} zs;

static int load_fail(int err, const char *why)
{
	if (zs.work)
		kvt_sys_munmap(zs.work, zs.work_bytes);
	if (zs.out)
		kvt_sys_munmap(zs.out, zs.out_bytes);
	if (zs.lib)
		kvt_dl_close(zs.lib);
	memset(&zs, 0, sizeof zs);
	zs.state = err;
	zs.why = why;
	return err;
}

static int setup_cctx(void)
{
	zs.work_bytes = zs.ZSTD_estimateCCtxSize(KVT_TRACE_ZSTD_LEVEL);
	zs.out_bytes = zs.ZSTD_compressBound(KVT_TRACE_ZSTD_FRAME_BYTES);
	if (zs.ZSTD_isError(zs.work_bytes) || zs.ZSTD_isError(zs.out_bytes))
		return load_fail(-ENOSYS, "libzstd gave no context size");
	zs.work = kvt_sys_map_own(zs.work_bytes, 0);
	if (zs.work == MAP_FAILED) {
		zs.work = NULL;
		return load_fail(-ENOMEM, "no memory for the compression context");
	}
	zs.out = kvt_sys_map_own(zs.out_bytes, 0);
	if (zs.out == (char *)MAP_FAILED) {
		zs.out = NULL;
		return load_fail(-ENOMEM, "no memory for the compression buffer");
	}
	zs.cctx = zs.ZSTD_initStaticCCtx(zs.work, zs.work_bytes);
	if (!zs.cctx ||
	    zs.ZSTD_isError(zs.ZSTD_CCtx_setParameter(zs.cctx, ZSTD_c_compressionLevel,
						      KVT_TRACE_ZSTD_LEVEL)) ||
	    zs.ZSTD_isError(zs.ZSTD_CCtx_setParameter(zs.cctx, ZSTD_c_checksumFlag, 1)) ||
	    zs.ZSTD_isError(zs.ZSTD_CCtx_setParameter(zs.cctx, ZSTD_c_contentSizeFlag, 1)))
		return load_fail(-ENOSYS, "libzstd refused the compression context");
	return 0;
}

int kvt_zstd_load(const char *lib, const char **why)
{
	if (zs.state) {
		*why = zs.why;
		return zs.state > 0 ? 0 : zs.state;
	}
	zs.lib = kvt_dl_open(lib && *lib ? lib : "libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!zs.lib) {
		*why = "cannot be loaded";
		return load_fail(-ENOENT, *why);
	}
#define X(ret, name, args) \
	if (!(zs.name = (ret (*) args)kvt_real_dlsym(zs.lib, #name))) { \
		*why = "lacks " #name; \
		return load_fail(-ENOSYS, *why); \
	}
	ZSTD_FNS(X)
#undef X
	int r = setup_cctx();
	*why = zs.why;
	if (!r)
		zs.state = 1;
	return r;
}

int kvt_zstd_ready(void)
{
	return zs.state > 0;
}

/* Whole records from p, at most KVT_TRACE_ZSTD_FRAME_BYTES of them (the
 * first one whatever its size): a frame's content. A head that does not
 * fit (never from the writer's buffers) ends it with the rest. */
static size_t frame_part(const char *p, size_t n)
{
	size_t at = 0;
	while (at + sizeof(struct kvt_rec_head) <= n) {
		struct kvt_rec_head h;
		memcpy(&h, p + at, sizeof h);
		if (h.bytes < sizeof h || h.bytes > n - at)
			return n;
		if (at && at + h.bytes > KVT_TRACE_ZSTD_FRAME_BYTES)
			return at;
		at += h.bytes;
	}
	return at < n ? n : at;
}

ssize_t kvt_zstd_write(int fd, const void *buf, size_t bytes, const int *raw_now)
{
	const char *p = buf;
	for (size_t at = 0; at < bytes;) {
		if (__atomic_load_n(raw_now, __ATOMIC_RELAXED)) {
			ssize_t r = kvt_sys_write_all(fd, p + at, bytes - at);
			return r < 0 ? r : (ssize_t)bytes;
		}
		size_t n = frame_part(p + at, bytes - at);
		size_t c = n <= KVT_TRACE_ZSTD_FRAME_BYTES ?
			   zs.ZSTD_compress2(zs.cctx, zs.out, zs.out_bytes, p + at, n) : 0;
		ssize_t r;
		if (n > KVT_TRACE_ZSTD_FRAME_BYTES || zs.ZSTD_isError(c)) {
			kvt_warn_once("trace: a part of %zu bytes could not be compressed; "
				      "written uncompressed", n);
			r = kvt_sys_write_all(fd, p + at, n);
		} else {
			r = kvt_sys_write_all(fd, zs.out, c);
		}
		if (r < 0)
			return r;
		at += n;
	}
	return (ssize_t)bytes;
}
