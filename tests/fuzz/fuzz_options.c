// SPDX-License-Identifier: MIT
/* libFuzzer target: the KVTIER_* options table reader (kvt_options_load
 * over a fuzzed environment vector, then kvt_options_print) and the value
 * readers under it (kvt_parse_size/bool/int, kvt_format_size). The log and
 * write calls of base/options.c are stubbed here: the stub formats each
 * message as kvt_log would and counts it.
 * The first input byte picks the target; the rest is text. In an
 * environment vector, one entry a line; a line "\x01<b>rest" stands for
 * "<option number b>=rest", so every option is one byte away.
 * Invariants checked beyond "no crash, leak or UB":
 *   - one message per warning, and every message names a KVTIER_ variable;
 *   - every resolved value lies inside its documented range (a bad value
 *     leaves the default, never a half-parsed one); strings stay terminated;
 *   - a size the reader accepts with trailing text ends inside the text. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "kvtier/units.h"
#include "../../base/kvt.h"

#define MAX_ENV 64

/* ---- stubs for base/options.c's three outside calls ----------------- */

static unsigned nr_messages, nr_unnamed;

void kvt_log(int level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	(void)level;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	nr_messages++;
	nr_unnamed += !strstr(buf, "KVTIER_");
}

int kvt_log_prefix(char *buf, size_t len)
{
	int n = snprintf(buf, len, "kvtier[fuzz]: ");
	return n < 0 ? 0 : (size_t)n < len ? n : (int)len - 1;
}

ssize_t kvt_sys_write_all(int fd, const void *buf, size_t len)
{
	(void)fd;
	(void)buf;
	return (ssize_t)len;
}

/* ---- the options table ---------------------------------------------------- */

static char text[8192];
static char entries[MAX_ENV][4400];

static int in(long long v, long long lo, long long hi)
{
	return v >= lo && v <= hi;
}

static int is_bool(int v)
{
	return v == 0 || v == 1;
}

/* Ranges from the table in base/options.c (and the README). */
static void check_resolved(const struct kvt_options *o)
{
	if (!is_bool(o->disable) || !is_bool(o->verbose) || !is_bool(o->inherit) ||
	    !is_bool(o->strict) || !is_bool(o->migrate) || !is_bool(o->stats) ||
	    !in(o->log_level, 0, 4) || !in(o->stack_depth, 0, 128) ||
	    o->trace_buffer < 4096 || o->trace_buffer > (1ull << 30) ||
	    !in(o->epoch_ms, 1, 60000) || !in(o->promote, 0, 1000000) ||
	    !in(o->demote, 0, 1000000) || !in(o->decay_ms, 1, 3600000))
		abort();
	if (strnlen(o->trace, sizeof o->trace) == sizeof o->trace ||
	    strnlen(o->policy, sizeof o->policy) == sizeof o->policy ||
	    strnlen(o->cxl_nodes, sizeof o->cxl_nodes) == sizeof o->cxl_nodes ||
	    strnlen(o->sources, sizeof o->sources) == sizeof o->sources ||
	    strnlen(o->trace_zstd_lib, sizeof o->trace_zstd_lib) == sizeof o->trace_zstd_lib)
		abort();
	/* a word from a list: one of the list, never a half-set value */
	if (strcmp(o->trace_compress, "zstd") && strcmp(o->trace_compress, "none"))
		abort();
}

/* "\x01<b>rest" -> "<name of option b % count>=rest" */
static const char *expand(const char *line, char *out, size_t len)
{
	const char *name, *def, *unit, *help;
	unsigned count = 0;
	if (line[0] != 1 || !line[1])
		return line;
	while (!kvt_option_info(count, &name, &def, &unit, &help))
		count++;
	if (!count || kvt_option_info((unsigned char)line[1] % count, &name, &def, &unit, &help))
		abort();
	snprintf(out, len, "%s=%s", name, line + 2);
	return out;
}

static void fuzz_options(char *t)
{
	char *envp[MAX_ENV + 1];
	size_t n = 0;
	unsigned prefixed = 0;
	for (char *p = t; n < MAX_ENV;) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		envp[n] = (char *)expand(p, entries[n], sizeof entries[n]);
		prefixed += !strncmp(envp[n], "KVTIER_", 7);
		n++;
		if (!nl)
			break;
		p = nl + 1;
	}
	envp[n] = NULL;
	struct kvt_options o = kvt_opt;          /* the defaults */
	nr_messages = nr_unnamed = 0;
	int warnings = kvt_options_load(&o, envp);
	if (warnings < 0 || (unsigned)warnings > prefixed || (unsigned)warnings != nr_messages ||
	    nr_unnamed)
		abort();
	check_resolved(&o);
	kvt_options_print(&o, 2);
}

/* ---- the value readers ---------------------------------------------------- */

static void fuzz_units(const char *t)
{
	uint64_t v;
	const char *end = NULL;
	int b;
	long long ll;
	char human[32];
	if (kvt_parse_size(t, &v, &end, 1) == 0 && (!end || end < t || end > t + strlen(t)))
		abort();
	if (kvt_parse_size(t, &v, NULL, 0) == 0)
		kvt_format_size(v, human, sizeof human);
	if (kvt_parse_bool(t, &b) == 0 && !is_bool(b))
		abort();
	if (kvt_parse_int(t, -1000, 1000, &ll) == 0 && !in(ll, -1000, 1000))
		abort();
	(void)kvt_parse_int(t, INT64_MIN, INT64_MAX, &ll);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t len = size - 1;
	if (len > sizeof text - 1)
		len = sizeof text - 1;
	memcpy(text, data + 1, len);
	text[len] = 0;
	if (data[0] & 1)
		fuzz_units(text);
	else
		fuzz_options(text);
	return 0;
}
