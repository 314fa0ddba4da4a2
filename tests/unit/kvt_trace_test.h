/* SPDX-License-Identifier: MIT */
/* Helpers for tests that run a program under the preload and read what it
 * left: the trace's INFO records, and the program's key=value output. */
#ifndef KVT_TRACE_TEST_H
#define KVT_TRACE_TEST_H

#include "kvt_test.h"
#include "../profiler/trace_read.h"

/* The INFO records of the trace at path into buf as "\nkey=value" lines
 * (a leading newline, one after each: what kvt_info_u64 reads); records
 * that do not fit are left out. 0, or -1 when the trace cannot be read. */
static inline int kvt_trace_infos(const char *path, char *buf, size_t size)
{
	static struct kvt_trace_reader rd;    /* a 64 KiB record buffer: not on the stack */
	struct kvt_trace_item it;
	size_t n = 0;
	if (size < 2)
		return -1;
	memset(buf, 0, size);
	buf[n++] = '\n';
	if (kvt_trace_reader_open(&rd, path))
		return -1;
	while (kvt_trace_next(&rd, &it) > 0)
		if (it.type == KVT_REC_INFO && n + it.text_len + 2 < size) {
			memcpy(buf + n, it.text, it.text_len);
			n += it.text_len;
			buf[n++] = '\n';
		}
	kvt_trace_reader_close(&rd);
	return 0;
}

/* The number after "key=" at the start of a line of out, or ~0. */
static inline unsigned long long kvt_out_u64(const char *out, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == '=')
			return strtoull(p + n + 1, NULL, 10);
	return ~0ull;
}

#endif
