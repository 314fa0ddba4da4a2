/* SPDX-License-Identifier: MIT */
/* zstd frames for the trace writer (KVTIER_TRACE_COMPRESS=zstd): libzstd
 * loaded with dlopen at kvt_zstd_load (libkvtier never links it), one
 * compression context and one output buffer made there, from mmap. A write
 * compresses whole records into frames of at most KVT_TRACE_ZSTD_FRAME_BYTES
 * with a content checksum. No malloc, no locks after the load; one caller at
 * a time (profiler/trace.c: the flush thread while it owns the handed
 * buffer, else the holder of the trace lock). */
#ifndef KVT_TRACE_ZSTD_H
#define KVT_TRACE_ZSTD_H

#include <stddef.h>
#include <sys/types.h>

/* Load lib (NULL or "": libzstd.so.1) and make the context: 0, or a
 * negative errno with *why saying what failed (a static string). Once:
 * later calls answer the first one's result. Not inside a hook (dlopen). */
int kvt_zstd_load(const char *lib, const char **why);
/* 1 once kvt_zstd_load succeeded. */
int kvt_zstd_ready(void);
/* bytes of whole records (as appended to a trace buffer) to fd as zstd
 * frames; a part that cannot be compressed goes as it is (raw records), so
 * nothing is lost. Once *raw_now reads non-zero (checked before each frame:
 * a hook waits for this write) the rest goes raw. What kvt_sys_write_all
 * returns: bytes, or -errno. */
ssize_t kvt_zstd_write(int fd, const void *buf, size_t bytes, const int *raw_now);

#endif
