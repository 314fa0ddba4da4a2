// SPDX-License-Identifier: MIT
/* Logging for code that runs inside hooks: formatted on the stack, written
 * with one write(2) to stderr, prefixed "kvtier[PID]: ", rate-limited to a
 * fixed number of lines per process so a broken setup cannot flood a
 * server's log. Never allocates, never takes a lock. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvt.h"

#define KVT_LOG_MAX_LINES 200

static unsigned nr_lines;

/* getpid() at format time, never cached: a forked worker's lines carry its
 * own pid (a server's workers share one stderr). */
int kvt_log_prefix(char *buf, size_t len)
{
	int n = snprintf(buf, len, "kvtier[%d]: ", (int)getpid());
	return n < 0 ? 0 : (size_t)n < len ? n : (int)len - 1;
}

void kvt_log(int level, const char *fmt, ...)
{
	if (level < kvt_opt.log_level)
		return;
	unsigned n = __atomic_fetch_add(&nr_lines, 1, __ATOMIC_RELAXED);
	if (n > KVT_LOG_MAX_LINES)
		return;
	char buf[1024];
	int off;
	if (n == KVT_LOG_MAX_LINES) {
		off = kvt_log_prefix(buf, sizeof buf);
		off += snprintf(buf + off, sizeof buf - (size_t)off,
				"log limit (%d lines) reached; further messages dropped\n",
				KVT_LOG_MAX_LINES);
	} else {
		va_list ap;
		off = kvt_log_prefix(buf, sizeof buf);
		va_start(ap, fmt);
		int m = vsnprintf(buf + off, sizeof buf - (size_t)off - 1, fmt, ap);
		va_end(ap);
		if (m < 0)
			m = 0;
		off += m;
		if ((size_t)off > sizeof buf - 2)
			off = (int)sizeof buf - 2;
		buf[off++] = '\n';
	}
	kvt_sys_write_all(STDERR_FILENO, buf, (size_t)off);
}
