// SPDX-License-Identifier: MIT
/* The one table of KVTIER_* options: name, default, unit, help, and where
 * the value lands. Read once at start from the environment vector; bad
 * values warn once (variable, value, what is used instead) and keep the
 * default. Unknown KVTIER_* names are reported. No getenv on hot paths. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kvt.h"
#include "kvtier/units.h"

/* Filled from the table's .def strings before anything reads it (the
 * constructor at the end of this file): each default is written once. */
struct kvt_options kvt_opt;

enum opt_type { OPT_BOOL, OPT_INT, OPT_SIZE, OPT_STR, OPT_LOGLEVEL };

struct opt_desc {
	const char *name;
	enum opt_type type;
	size_t offset;
	const char *def;             /* as the user would write it; the default's only source */
	const char *unit;
	long long min, max;          /* OPT_INT / OPT_SIZE bounds */
	const char *help;
	size_t str_bytes;            /* OPT_STR: room in the field */
	const char *choices;         /* OPT_STR: the values allowed, "a|b" (NULL: any) */
};

#define OFF(f) offsetof(struct kvt_options, f)

static const struct opt_desc table[] = {
	{ .name = "KVTIER_DISABLE", .type = OPT_BOOL, .offset = OFF(disable),
	  .def = "0", .unit = "bool",
	  .help = "make the library inert: every call passes straight through" },
	{ .name = "KVTIER_LOG", .type = OPT_LOGLEVEL, .offset = OFF(log_level),
	  .def = "warn", .unit = "level",
	  .help = "least severe message printed: debug, info, warn, error, off" },
	{ .name = "KVTIER_VERBOSE", .type = OPT_BOOL, .offset = OFF(verbose),
	  .def = "0", .unit = "bool",
	  .help = "print the resolved option table to stderr at start" },
	{ .name = "KVTIER_TRACE", .type = OPT_STR, .offset = OFF(trace),
	  .str_bytes = sizeof kvt_opt.trace, .def = "", .unit = "path",
	  .help = "write every event to this file (%p = pid, %e = program name); never overwrites" },
	{ .name = "KVTIER_RUN_ID", .type = OPT_STR, .offset = OFF(run_id),
	  .str_bytes = sizeof kvt_opt.run_id, .def = "", .unit = "id",
	  .help = "the run every trace names (kvtier run sets it); unset: a traced process "
		  "makes one and exports it to its children" },
	{ .name = "KVTIER_STACK_DEPTH", .type = OPT_INT, .offset = OFF(stack_depth),
	  .def = "32", .unit = "frames", .min = 0, .max = 128,
	  .help = "call-site frames captured per allocation in the trace (0 = none)" },
	{ .name = "KVTIER_PYTHON", .type = OPT_BOOL, .offset = OFF(python),
	  .def = "1", .unit = "bool",
	  .help = "call sites also record the innermost Python frames (CPython 3.9-3.13, GIL held)" },
	{ .name = "KVTIER_TRACE_BUFFER", .type = OPT_SIZE, .offset = OFF(trace_buffer),
	  .def = "1M", .unit = "bytes", .min = 4096, .max = 1ll << 30,
	  .help = "each of the trace's two write buffers; a full one is written at once" },
	{ .name = "KVTIER_TRACE_FLUSH_MS", .type = OPT_INT, .offset = OFF(trace_flush_ms),
	  .def = "1000", .unit = "ms", .min = 0, .max = 60000,
	  .help = "events reach the trace file within this time (0: when a buffer fills)" },
	{ .name = "KVTIER_TRACE_COMPRESS", .type = OPT_STR, .offset = OFF(trace_compress),
	  .str_bytes = sizeof kvt_opt.trace_compress, .def = "none", .unit = "zstd|none",
	  .choices = "zstd|none",
	  .help = "zstd: the flush thread writes zstd frames with checksums (libzstd.so.1 loaded at "
		  "start; without it: none, said once); none: records as they are" },
	{ .name = "KVTIER_TRACE_ZSTD_LIB", .type = OPT_STR, .offset = OFF(trace_zstd_lib),
	  .str_bytes = sizeof kvt_opt.trace_zstd_lib, .def = "libzstd.so.1", .unit = "library",
	  .help = "for tests only: the zstd library KVTIER_TRACE_COMPRESS=zstd loads" },
	{ .name = "KVTIER_INHERIT", .type = OPT_BOOL, .offset = OFF(inherit),
	  .def = "1", .unit = "bool",
	  .help = "exec'd children load kvtier too (vLLM workers are child processes)" },
	{ .name = "KVTIER_POLICY", .type = OPT_STR, .offset = OFF(policy),
	  .str_bytes = sizeof kvt_opt.policy, .def = "", .unit = "rules",
	  .help = "placement rules (docs/policy.md); unset: 'kv => managed:cxl; * => native'" },
	{ .name = "KVTIER_STRICT", .type = OPT_BOOL, .offset = OFF(strict),
	  .def = "0", .unit = "bool",
	  .help = "1: a bad KVTIER_POLICY aborts instead of falling back to native" },
	{ .name = "KVTIER_HBM_BUDGET", .type = OPT_SIZE, .offset = OFF(hbm_budget),
	  .def = "0", .unit = "bytes",
	  .help = "redirected bytes allowed in HBM; 0: free memory when KV began, less the reserve" },
	{ .name = "KVTIER_CXL_LIMIT", .type = OPT_SIZE, .offset = OFF(cxl_limit),
	  .def = "0", .unit = "bytes",
	  .help = "bytes placed on the far node; past it allocations stay native (0: no limit)" },
	{ .name = "KVTIER_RESERVE", .type = OPT_SIZE, .offset = OFF(reserve),
	  .def = "1G", .unit = "bytes",
	  .help = "HBM kept free of redirected memory when the budget is derived" },
	{ .name = "KVTIER_CXL_NODES", .type = OPT_STR, .offset = OFF(cxl_nodes),
	  .str_bytes = sizeof kvt_opt.cxl_nodes, .def = "", .unit = "nodes",
	  .help = "far-tier NUMA nodes (numactl list: 1 or 2,3 or 2-4); unset: from topology" },
	{ .name = "KVTIER_MIGRATE", .type = OPT_BOOL, .offset = OFF(migrate),
	  .def = "1", .unit = "bool",
	  .help = "0: no profiler thread and no migration (redirected memory stays where placed)" },
	{ .name = "KVTIER_SOURCES", .type = OPT_STR, .offset = OFF(sources),
	  .str_bytes = sizeof kvt_opt.sources, .def = "launch,copy,cupti,tables", .unit = "list",
	  .help = "evidence sources of chunk heat: launch, copy, cupti, sample, tables (comma-separated)" },
	{ .name = "KVTIER_ADMIT", .type = OPT_STR, .offset = OFF(admit),
	  .str_bytes = sizeof kvt_opt.admit, .def = "auto", .unit = "mode",
	  .help = "how far KV reaches HBM: remote (the GPU reads it over the link until the "
		  "migrator promotes it), fault (its first GPU touch migrates it; needs cupti) "
		  "or auto (fault, and remote for chunks the driver keeps evicting and faulting back)" },
	{ .name = "KVTIER_EPOCH_MS", .type = OPT_INT, .offset = OFF(epoch_ms),
	  .def = "50", .unit = "ms", .min = 1, .max = 60000,
	  .help = "migration epoch: the planner runs and prefetches are issued this often" },
	{ .name = "KVTIER_PROMOTE", .type = OPT_INT, .offset = OFF(promote),
	  .def = "4", .unit = "heat", .min = 0, .max = 1000000,
	  .help = "heat (decayed evidence count) at which a far chunk may move to HBM" },
	{ .name = "KVTIER_DEMOTE", .type = OPT_INT, .offset = OFF(demote),
	  .def = "1", .unit = "heat", .min = 0, .max = 1000000,
	  .help = "heat below which a chunk in HBM goes back to the far node (<= KVTIER_PROMOTE)" },
	{ .name = "KVTIER_DECAY_MS", .type = OPT_INT, .offset = OFF(decay_ms),
	  .def = "1000", .unit = "ms", .min = 1, .max = 3600000,
	  .help = "heat time constant tau: evidence weighs exp(-age/tau)" },
	{ .name = "KVTIER_MIGRATE_RATE", .type = OPT_SIZE, .offset = OFF(migrate_rate),
	  .def = "8G", .unit = "bytes/s",
	  .help = "cap on bytes promoted plus demoted per second (0: no cap)" },
	{ .name = "KVTIER_STEP_PREFETCH", .type = OPT_BOOL, .offset = OFF(step_prefetch),
	  .def = "1", .unit = "bool",
	  .help = "prefetch the KV chunks each step's block tables name, on the table upload's "
		  "stream, before the step's kernels (needs the tables source)" },
	{ .name = "KVTIER_DISCARD", .type = OPT_BOOL, .offset = OFF(discard),
	  .def = "1", .unit = "bool",
	  .help = "let the driver drop the old contents of KV blocks a step takes fresh instead "
		  "of moving them (CUDA 13 cuMemDiscardBatchAsync; needs a server decoder)" },
	{ .name = "KVTIER_STATS", .type = OPT_BOOL, .offset = OFF(stats),
	  .def = "1", .unit = "bool",
	  .help = "publish live counters in /dev/shm/kvtier.<pid> (0600) for 'kvtier stat'" },
};

#define NR_OPTS (sizeof table / sizeof table[0])

static const char *const level_names[] = { "debug", "info", "warn", "error", "off" };

static int parse_level(const char *v, int *out)
{
	for (int i = 0; i < 5; i++) {
		if (!strcmp(v, level_names[i])) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

/* Whether v is one of the '|'-separated words of choices. */
static int one_of(const char *choices, const char *v)
{
	size_t n = strlen(v);
	for (const char *p = choices;; p++) {
		size_t w = strcspn(p, "|");
		if (n && w == n && !strncmp(p, v, n))
			return 1;
		p += w;
		if (!*p)
			return 0;
	}
}

/* Parse one value into o; 0 or -errno (the value is left untouched). */
static int set_value(struct kvt_options *o, const struct opt_desc *d, const char *v)
{
	char *field = (char *)o + d->offset;
	long long i;
	uint64_t sz;
	int b, r;

	switch (d->type) {
	case OPT_BOOL:
		if ((r = kvt_parse_bool(v, &b)))
			return r;
		*(int *)field = b;
		return 0;
	case OPT_LOGLEVEL:
		return parse_level(v, (int *)field);
	case OPT_INT:
		if ((r = kvt_parse_int(v, d->min, d->max, &i)))
			return r;
		*(int *)field = (int)i;
		return 0;
	case OPT_SIZE:
		if ((r = kvt_parse_size(v, &sz, NULL, 0)))
			return r;
		if ((long long)sz < d->min || (d->max && sz > (uint64_t)d->max))
			return -ERANGE;
		*(uint64_t *)field = sz;
		return 0;
	case OPT_STR:
		if (strlen(v) >= d->str_bytes)
			return -ENAMETOOLONG;
		if (d->choices && !one_of(d->choices, v))
			return -EINVAL;
		strcpy(field, v);
		return 0;
	}
	return -EINVAL;
}

static const struct opt_desc *find(const char *name, size_t len)
{
	for (size_t i = 0; i < NR_OPTS; i++)
		if (strlen(table[i].name) == len && !strncmp(table[i].name, name, len))
			return &table[i];
	return NULL;
}

/* Show at most 64 bytes of a bad value, with control bytes escaped. */
static void shown_value(const char *v, char *out, size_t len)
{
	size_t j = 0;
	for (size_t i = 0; v[i] && j + 5 < len; i++) {
		unsigned char c = (unsigned char)v[i];
		if (i == 64) {
			j += (size_t)snprintf(out + j, len - j, "...");
			break;
		}
		if (c < 0x20 || c >= 0x7f)
			j += (size_t)snprintf(out + j, len - j, "\\x%02x", c);
		else
			out[j++] = (char)c;
	}
	out[j] = 0;
}

static const char *why(int err)
{
	switch (err) {
	case -ERANGE: return "out of range";
	case -ENAMETOOLONG: return "too long";
	default: return "not understood";
	}
}

int kvt_options_load(struct kvt_options *o, char *const *envp)
{
	int warnings = 0;
	for (size_t k = 0; envp && envp[k]; k++) {
		const char *kv = envp[k];
		if (strncmp(kv, "KVTIER_", 7))
			continue;
		const char *eq = strchr(kv, '=');
		if (!eq)
			continue;
		const struct opt_desc *d = find(kv, (size_t)(eq - kv));
		char shown[300];
		if (!d) {
			shown_value(kv, shown, sizeof shown);
			kvt_warn("unknown variable '%s' ignored (kvtier --help lists the options)",
				 shown);
			warnings++;
			continue;
		}
		int r = set_value(o, d, eq + 1);
		if (!r && d->offset == OFF(admit))
			o->admit_set = 1;
		if (r) {
			shown_value(eq + 1, shown, sizeof shown);
			kvt_warn("%s='%s' is %s (expected %s); using the default '%s'",
				 d->name, shown, why(r), d->unit, d->def);
			warnings++;
		}
	}
	return warnings;
}

static void value_text(const struct kvt_options *o, const struct opt_desc *d,
		       char *out, size_t len)
{
	const char *field = (const char *)o + d->offset;
	switch (d->type) {
	case OPT_BOOL:
	case OPT_INT:
		snprintf(out, len, "%d", *(const int *)field);
		break;
	case OPT_LOGLEVEL:
		snprintf(out, len, "%s", level_names[*(const int *)field % 5]);
		break;
	case OPT_SIZE:
		snprintf(out, len, "%llu", (unsigned long long)*(const uint64_t *)field);
		break;
	case OPT_STR:
		snprintf(out, len, "%s", field[0] ? field : "(unset)");
		break;
	}
}

void kvt_options_print(const struct kvt_options *o, int fd)
{
	char line[4400], val[4200];
	for (size_t i = 0; i < NR_OPTS; i++) {
		value_text(o, &table[i], val, sizeof val);
		int p = kvt_log_prefix(line, sizeof line);
		int n = snprintf(line + p, sizeof line - (size_t)p, "%-22s = %-12s (%s; default %s)\n",
				 table[i].name, val, table[i].unit,
				 table[i].def[0] ? table[i].def : "unset");
		n = n < 0 ? -1 : n + p;
		if (n > 0)
			kvt_sys_write_all(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
	}
}

int kvt_option_info(unsigned i, const char **name, const char **def,
		    const char **unit, const char **help)
{
	if (i >= NR_OPTS)
		return -1;
	*name = table[i].name;
	*def = table[i].def;
	*unit = table[i].unit;
	*help = table[i].help;
	return 0;
}

int kvt_options_defaults(struct kvt_options *o)
{
	int bad = 0;
	memset(o, 0, sizeof *o);
	for (size_t i = 0; i < NR_OPTS; i++)
		if (set_value(o, &table[i], table[i].def))
			bad++;
	return bad;
}

/* Priority 101, before preload/init.c's constructor (102) reads kvt_opt;
 * in the tool and the unit tests, before main. */
__attribute__((constructor(101))) static void options_ctor(void)
{
	kvt_options_defaults(&kvt_opt);
}
