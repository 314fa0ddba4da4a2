/* SPDX-License-Identifier: MIT */
/* kvtier policy layer: the KVTIER_POLICY rule language, the budget
 * arithmetic, the online KV-cache classifier and the decision engine that
 * ties them together, plus the replay core used by `kvtier replay`.
 *
 * Everything here is pure C: no CUDA, no syscalls, no malloc, no locks,
 * no clocks. State lives in caller-provided fixed-size structs. The engine
 * is NOT thread-safe: the interposer serialises calls (one lock around
 * kvt_policy_on_*). Decisions depend only on the events fed in and their
 * timestamps, so the same sequence always gives the same decisions.
 * docs/policy.md is the user-facing reference. */
#ifndef KVTIER_POLICY_H
#define KVTIER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvtier/trace_format.h"   /* enum kvt_kind, enum kvt_placement */

/* ---- limits ------------------------------------------------------------- */

#define KVT_POLICY_MAX_RULES   64     /* more is a parse error, never a truncation */
#define KVT_POLICY_MAX_TEXT    4096   /* characters of KVTIER_POLICY text */
#define KVT_POLICY_MAX_CONDS   4      /* size/nth/after comparisons per rule */
#define KVT_POLICY_MAX_GLOB    64     /* bytes of a site~GLOB pattern, NUL included */
#define KVT_POLICY_MAX_FRAMES  64     /* frames the site callback is asked for */
#define KVT_POLICY_MAX_RESOLVE 8      /* resolutions one event can produce */
#define KVT_POLICY_MAX_PENDING 8      /* provisional allocations awaiting a verdict */
#define KVT_POLICY_BURST_SIZES 4      /* distinct sizes one armed burst (a pool set) may hold */

/* The conservative default used when KVTIER_POLICY is unset. */
#define KVT_POLICY_DEFAULT_TEXT "kv => managed:cxl; * => native"

/* Suggested defaults for the options table (the lead owns the table). */
#define KVT_POLICY_DEFAULT_RESERVE_BYTES (1ull << 30)   /* KVTIER_RESERVE */

/* ---- parsed rules --------------------------------------------------------- */

enum kvt_policy_act {
	KVT_ACT_NATIVE = 0,   /* leave the allocation alone */
	KVT_ACT_TRACE,        /* native, but record it in the trace */
	KVT_ACT_MANAGED,      /* cuMemAllocManaged with a preferred location */
	KVT_ACT_PINNED,       /* host pinned memory on a NUMA node */
	KVT_ACT_BIND,         /* mbind the range to a node */
	KVT_ACT_INTERLEAVE,   /* weighted interleave DRAM:far */
};

enum kvt_policy_tier {
	KVT_TIER_NONE = 0,    /* native / trace */
	KVT_TIER_HBM,         /* managed:hbm: home on the GPU */
	KVT_TIER_CXL,         /* the far tier chosen by topology */
	KVT_TIER_NODE,        /* an explicit NUMA node (action.node) */
};

struct kvt_policy_action {
	uint8_t type;         /* enum kvt_policy_act */
	uint8_t tier;         /* enum kvt_policy_tier */
	uint16_t w_dram;      /* interleave weights (1..1000) */
	uint16_t w_cxl;
	int32_t node;         /* KVT_TIER_NODE (and interleave's optional node=): node; else -1 */
};

enum kvt_policy_field { KVT_FIELD_SIZE = 1, KVT_FIELD_NTH, KVT_FIELD_AFTER };
enum kvt_policy_cmp { KVT_CMP_LT = 1, KVT_CMP_LE, KVT_CMP_GT, KVT_CMP_GE,
		      KVT_CMP_EQ, KVT_CMP_NE };

struct kvt_policy_cond {
	uint8_t field;        /* enum kvt_policy_field */
	uint8_t cmp;          /* enum kvt_policy_cmp */
	uint64_t value;
};

/* kv selector states */
enum { KVT_RULE_KV_ANY = 0, KVT_RULE_KV_YES, KVT_RULE_KV_NO };

struct kvt_policy_rule {
	uint8_t kinds;        /* bit (1 << kvt_kind) per kind named; 0 = any */
	uint8_t kv;           /* KVT_RULE_KV_* */
	uint8_t star;         /* written as '*' */
	uint8_t nr_conds;
	struct kvt_policy_cond cond[KVT_POLICY_MAX_CONDS];
	char site[KVT_POLICY_MAX_GLOB];   /* "" = no site selector */
	struct kvt_policy_action action;
	uint16_t column;      /* 1-based column of the rule in the source text */
};

struct kvt_policy {
	unsigned nr_rules;
	bool needs_site;      /* some rule has site~ */
	bool has_kv;          /* some rule has kv / !kv */
	struct kvt_policy_rule rule[KVT_POLICY_MAX_RULES];
};

struct kvt_policy_error {
	unsigned column;      /* 1-based; 0 when not tied to a column */
	char msg[200];        /* "column 17: expected '=>' after selector 'size>=8G'" */
};

/* Parse KVTIER_POLICY text into *p (fully overwritten; zeroed on error).
 * Returns 0, or -EINVAL with err filled (err may be NULL). Never truncates:
 * text over KVT_POLICY_MAX_TEXT characters or more than KVT_POLICY_MAX_RULES
 * rules is an error. Fail-open is the caller's job. No allocation. */
int kvt_policy_parse(const char *text, struct kvt_policy *p,
		     struct kvt_policy_error *err);

/* The default rule set (KVT_POLICY_DEFAULT_TEXT), already parsed. */
void kvt_policy_default(struct kvt_policy *p);

/* Canonical text of the rules: selectors in a fixed order (kinds, kv,
 * comparisons, site), sizes with the largest exact K/M/G/T suffix,
 * " => " and "; " as separators. Returns the length it needed (snprintf
 * semantics); buf is always NUL-terminated when len > 0.
 * parse(format(p)) equals p (kvt_policy_equal), ignoring columns. */
size_t kvt_policy_format(const struct kvt_policy *p, char *buf, size_t len);
size_t kvt_policy_format_rule(const struct kvt_policy_rule *r, char *buf,
			      size_t len);
size_t kvt_policy_format_action(const struct kvt_policy_action *a, char *buf,
				size_t len);

/* Same rules (columns ignored). */
bool kvt_policy_equal(const struct kvt_policy *a, const struct kvt_policy *b);

/* True when some rule has a site~GLOB selector: only then must the hook
 * symbolise the call site (and pass a site callback). */
static inline bool kvt_policy_needs_site(const struct kvt_policy *p)
{
	return p->needs_site;
}

/* Kinds an action can serve: bit (1 << kvt_kind). native/trace: all;
 * managed: device|async|managed; pinned: host; bind/interleave: mmap|register. */
unsigned kvt_policy_action_kinds(const struct kvt_policy_action *a);

/* The trace's placement enum for an action (TRACE -> NATIVE). */
enum kvt_placement kvt_policy_action_placement(const struct kvt_policy_action *a);

/* True when the action puts bytes on the far tier (cxl or node=N). */
bool kvt_policy_action_is_far(const struct kvt_policy_action *a);

/* ---- lint (policy/lint.c): rules that are valid but cannot do anything ---- */

enum kvt_policy_lint_kind {
	KVT_LINT_SHADOWED = 1,   /* earlier rules (by_mask) match all this rule does */
	KVT_LINT_NEVER,          /* its comparisons (or kinds and kv) admit no allocation */
	KVT_LINT_GLOB,           /* its site~ glob is malformed or can never match */
};

struct kvt_policy_lint {
	uint8_t kind;            /* enum kvt_policy_lint_kind */
	uint8_t rule;            /* 0-based index of the rule warned about */
	uint64_t by_mask;        /* SHADOWED: bit i = rule i covers part of it */
	char msg[200];           /* one line, rules numbered from 1, no newline */
};

/* Warnings about a parsed rule set, in rule order: at most one SHADOWED or
 * NEVER per rule, plus one GLOB per rule with a bad glob. Fills up to max
 * entries of out and returns how many there are (max 2 * nr_rules). Exact
 * where it says something: a SHADOWED rule can never be the first match of
 * any allocation. Not every shadowed rule is found (docs/policy.md, "Lint"). */
unsigned kvt_policy_lint(const struct kvt_policy *p, struct kvt_policy_lint *out,
			 unsigned max);

/* ---- matching ------------------------------------------------------------- */

/* The call-site callback: fills frame `i` (0 = innermost application frame)
 * with its symbol and module path (either may be NULL when unknown) and
 * returns 0, or returns -1 when there is no frame i. Called only when a rule
 * with site~ is evaluated and its cheaper selectors already matched. */
typedef int (*kvt_policy_site_fn)(void *ctx, unsigned i, const char **sym,
				  const char **module);

enum { KVT_KV_NO = 0, KVT_KV_MAYBE, KVT_KV_YES };

/* What the rules look at for one allocation. */
struct kvt_policy_query {
	uint8_t kind;          /* enum kvt_kind */
	uint8_t kv;            /* 1: the classifier said KV (match with YES) */
	uint64_t size;
	uint64_t nth;          /* 1-based ordinal among allocations of its kind */
	uint64_t after;        /* 1-based ordinal of its kind since the last
				* meminfo query; 0 = no query seen yet */
	kvt_policy_site_fn site;   /* may be NULL: site~ rules then never match */
	void *site_ctx;
};

/* Index of the first rule that matches, or -1. A rule matches when every
 * selector matches and its action can serve the kind (rules without kind
 * selectors skip kinds their action cannot serve). */
int kvt_policy_match(const struct kvt_policy *p, const struct kvt_policy_query *q);

/* Glob of '*', '?' and '[...]' (no escapes) against a NUL-terminated string. */
bool kvt_policy_glob(const char *pat, const char *s);

/* ---- budgets ---------------------------------------------------------------- */

struct kvt_policy_budget {
	uint64_t hbm_budget_bytes;   /* 0 until set or derived */
	uint64_t cxl_limit_bytes;    /* 0 = unlimited */
	uint64_t reserve_bytes;
	uint64_t cxl_used_bytes;     /* charged far-tier bytes */
	bool hbm_explicit;           /* KVTIER_HBM_BUDGET was given */
	bool hbm_derived;            /* derived from free memory at KV start */
	uint64_t kv_start_free_bytes; /* free device memory when KV began (0 unknown) */
};

/* hbm_budget 0 = derive it; cxl_limit 0 = unlimited. */
void kvt_policy_budget_init(struct kvt_policy_budget *b, uint64_t hbm_budget,
			    uint64_t cxl_limit, uint64_t reserve);
/* free - reserve, floored at 0 (the default HBM budget). */
uint64_t kvt_policy_budget_default_hbm(uint64_t free_bytes, uint64_t reserve);
/* The KV allocations began with free_bytes free on the device: derive the
 * HBM budget once (no-op when explicit or already derived). */
void kvt_policy_budget_kv_start(struct kvt_policy_budget *b, uint64_t free_bytes);
/* Far-tier bytes an action puts there for `bytes` (interleave: its share,
 * rounded up). 0 for non-far actions. */
uint64_t kvt_policy_budget_far_bytes(const struct kvt_policy_action *a,
				     uint64_t bytes);
/* Charge far bytes: 0, or -ENOSPC when it would pass the limit (nothing
 * charged then). */
int kvt_policy_budget_charge(struct kvt_policy_budget *b, uint64_t far_bytes);
/* Give charged far bytes back (free of a far placement, failed placement).
 * Saturates at 0. */
void kvt_policy_budget_release(struct kvt_policy_budget *b, uint64_t far_bytes);
/* Watermarks for the planner: high = budget * high_bp / 10000, likewise low. */
void kvt_policy_budget_watermarks(const struct kvt_policy_budget *b,
				  unsigned high_bp, unsigned low_bp,
				  uint64_t *high, uint64_t *low);

/* ---- the KV classifier ------------------------------------------------------ */

struct kvt_policy_cls_config {
	uint64_t min_bytes;          /* "large" cap: smaller allocations are never
				      * KV; the whole floor until a device total
				      * is known (32 MiB) */
	unsigned min_total_div;      /* with a device total: large = total/N,
				      * capped at min_bytes; 0 = min_bytes only (256) */
	uint64_t min_floor_bytes;    /* the scaled size never goes below (4 MiB) */
	uint64_t burst_gap_ns;       /* max gap inside a burst (5 s) */
	unsigned burst_confirm;      /* members that confirm an armed burst (3) */
	unsigned arm_bursts;         /* bursts a meminfo arms, until the pools are done (3) */
	unsigned maybe_free_div;     /* while armed, candidates are >= free/N (512) */
	unsigned pool_share_pct;     /* one allocation, or a burst's members together,
				      * >= this % of free confirms (40) */
	unsigned fill_share_pct;     /* zero-filled burst >= this % of free confirms (10) */
	unsigned pools_done_pct;     /* KV since the arming >= this % of free ends the
				      * arming; under it a confirmation keeps it for
				      * further pools (80) */
	unsigned pool_member_div;    /* then a candidate may be as small as a
				      * member of the confirmed pool / N (8;
				      * 0 = the free-memory floor only) */
	unsigned tail_free_div;      /* once the pools are done, one more burst (a late
				      * pool: a second cache, a draft model's, an
				      * indexer's) of members >= free/N, confirmed
				      * only by a zero fill or a per-layer run
				      * (64; 0 = none) */
	unsigned over_free;          /* 1: once the pools are done, an allocation within
				      * the burst gap of the last pool member and larger
				      * than all the free memory the query reported is KV
				      * at birth: it can never fit the device (1; 0 = off) */
	unsigned early_large;        /* late (unarmed) KV only among the first N large allocations (8) */
	unsigned late_total_div;     /* late KV must be >= total/N (64) */
};

struct kvt_policy_cls_member {
	uint64_t id;
	uint64_t size;
	bool zeroed;
};

/* One burst: allocations of one kind back to back, of one size, or while
 * armed and unconfirmed of up to KVT_POLICY_BURST_SIZES sizes (a server's
 * pool set: per-window pools, KV and state pools, interleaved caches). */
struct kvt_policy_cls_burst {
	bool open;
	bool armed;                  /* started as the first large alloc after an arming meminfo */
	bool tail;                   /* armed as the late pool after the pools were done */
	bool confirmed;
	uint8_t kind;
	uint64_t size;               /* the last member's size */
	uint64_t sizes[KVT_POLICY_BURST_SIZES];
	unsigned nr_sizes;           /* distinct sizes so far (1 once open) */
	uint64_t nr;                 /* members so far */
	uint64_t last_t_ns;          /* the last member's birth, or the end of a memset of all of it */
	uint64_t last_id;            /* the last member */
	unsigned nr_pending;         /* unconfirmed members (ids below) */
	struct kvt_policy_cls_member pending[KVT_POLICY_MAX_PENDING];
};

struct kvt_policy_cls {
	struct kvt_policy_cls_config cfg;
	unsigned arm_left;           /* armed bursts left since the last arming meminfo */
	uint64_t free_at_arm;        /* free bytes that meminfo reported */
	uint64_t kv_since_arm;       /* bytes confirmed KV since that meminfo */
	uint64_t pool_floor_bytes;   /* since: the first confirmed member / pool_member_div */
	uint64_t total_bytes;        /* device total from any meminfo (0 unknown) */
	uint64_t large_bytes;        /* current size floor: min_bytes scaled to total_bytes */
	uint64_t nr_large;           /* large device allocations so far */
	struct kvt_policy_cls_burst burst;
	/* unarmed candidate for a late (zero-fill) verdict: the last large alloc */
	bool late_open;
	uint64_t late_id, late_size, late_nth;
	/* the pools since the arming are done: the next burst may be a late
	 * pool (tail_free_div), if it starts within burst_gap_ns of them */
	bool tail_open;
	/* the last large alloc was a pool KV at birth or late: the next one
	 * may be late KV whatever its size (a second single-buffer cache) */
	bool after_pool;
};

/* A verdict about an earlier allocation. */
enum kvt_policy_verdict {
	KVT_VERDICT_CONFIRMED = 1,   /* provisional allocation is KV: re-home it */
	KVT_VERDICT_REFUTED,         /* provisional allocation is not KV */
	KVT_VERDICT_LATE,            /* placed natively, recognised as KV afterwards (trace only) */
};

struct kvt_policy_cls_verdicts {
	unsigned nr;
	struct { uint64_t id; uint8_t verdict; } v[KVT_POLICY_MAX_RESOLVE];
};

void kvt_policy_cls_config_default(struct kvt_policy_cls_config *c);
void kvt_policy_cls_init(struct kvt_policy_cls *c,
			 const struct kvt_policy_cls_config *cfg /* NULL = defaults */);
/* Classify an allocation before its pointer is returned: KVT_KV_NO, _MAYBE
 * (first members of an armed burst: place provisionally) or _YES. May
 * refute/confirm earlier members (out, may be NULL). */
int kvt_policy_cls_alloc(struct kvt_policy_cls *c, uint8_t kind, uint64_t size,
			 uint64_t t_ns, uint64_t id,
			 struct kvt_policy_cls_verdicts *out);
void kvt_policy_cls_free(struct kvt_policy_cls *c, uint64_t id, uint64_t t_ns,
			 struct kvt_policy_cls_verdicts *out);
/* A memset of [offset, offset+bytes) inside allocation id with byte value. */
void kvt_policy_cls_memset(struct kvt_policy_cls *c, uint64_t id,
			   uint64_t offset, uint64_t bytes, int value,
			   uint64_t t_ns, struct kvt_policy_cls_verdicts *out);
/* The application asked for device memory info (cuMemGetInfo). */
void kvt_policy_cls_meminfo(struct kvt_policy_cls *c, uint64_t free_bytes,
			    uint64_t total_bytes, uint64_t t_ns,
			    struct kvt_policy_cls_verdicts *out);

/* ---- the decision engine ----------------------------------------------------
 * Wiring (one engine per process, under one lock):
 *   init      kvt_policy_parse(KVTIER_POLICY) or kvt_policy_default(), then
 *             kvt_policy_engine_init(pol, NULL, KVTIER_HBM_BUDGET,
 *             KVTIER_CXL_LIMIT, KVTIER_RESERVE) (bytes; 0 = derive/unlimited)
 *   alloc     every device/async/vmm/managed/host/register/mmap allocation:
 *             kvt_policy_on_alloc before the pointer is returned; place per
 *             d.action; keep d.far_bytes with the allocation; act on res
 *   free      kvt_policy_on_free(id, far bytes kept for it)
 *   memset    cuMemsetD8/16/32(Async) and cudaMemset*: the containing
 *             allocation's id, the offset into it, bytes and value
 *   meminfo   every cuMemGetInfo/cudaMemGetInfo the application makes
 *   res       CONFIRMED/REFUTED: a provisional managed:hbm allocation; if
 *             action is managed with another home, re-advise its preferred
 *             location (and accessed-by); LATE_KV: record only. */

enum kvt_policy_reason {
	KVT_REASON_RULE = 1,         /* rule `rule` matched */
	KVT_REASON_NO_RULE,          /* nothing matched: native */
	KVT_REASON_PROVISIONAL,      /* KV suspected: managed:hbm until the verdict */
	KVT_REASON_CXL_LIMIT,        /* far placement past KVTIER_CXL_LIMIT: fallback */
	KVT_REASON_CONFIRMED,        /* verdict: KV */
	KVT_REASON_REFUTED,          /* verdict: not KV */
	KVT_REASON_LATE_KV,          /* verdict: KV, too late to move */
};

enum {
	KVT_DEC_KV          = 1 << 0,  /* classifier: KV at birth */
	KVT_DEC_MAYBE       = 1 << 1,  /* classifier: KV suspected */
	KVT_DEC_PROVISIONAL = 1 << 2,  /* placement may change on a verdict */
	KVT_DEC_TRACE       = 1 << 3,  /* record in the trace */
};

struct kvt_policy_decision {
	struct kvt_policy_action action;  /* what to do now (never TRACE: see flags) */
	int16_t rule;                     /* rule index, -1 = none */
	uint8_t reason;                   /* enum kvt_policy_reason */
	uint8_t flags;                    /* KVT_DEC_* */
	uint64_t far_bytes;               /* charged to the CXL limit: release on free */
};

/* A change the interposer must act on for an earlier allocation. */
struct kvt_policy_resolution {
	uint64_t id;
	uint8_t verdict;                  /* enum kvt_policy_verdict */
	uint8_t reason;                   /* CONFIRMED, REFUTED, LATE_KV or CXL_LIMIT */
	int16_t rule;                     /* the rule that now applies, -1 none */
	struct kvt_policy_action action;  /* managed: re-advise to this home;
					   * native: leave the placement as it is */
	uint64_t far_bytes;               /* newly charged: release on free */
};

struct kvt_policy_resolutions {
	unsigned nr;
	struct kvt_policy_resolution r[KVT_POLICY_MAX_RESOLVE];
};

struct kvt_policy_pending {
	uint64_t id, size;
	uint8_t kind;
	int16_t rule_kv, rule_other;      /* matches when KV / when not */
};

struct kvt_policy_engine {
	const struct kvt_policy *pol;
	struct kvt_policy_cls cls;
	struct kvt_policy_budget budget;
	uint64_t nth[KVT_KIND__COUNT];
	uint64_t after[KVT_KIND__COUNT];
	bool meminfo_seen;
	uint64_t last_free_bytes;         /* from the last meminfo */
	unsigned nr_pending;
	struct kvt_policy_pending pending[KVT_POLICY_MAX_PENDING];
};

struct kvt_policy_alloc_event {
	uint8_t kind;                     /* enum kvt_kind */
	uint64_t size;
	uint64_t t_ns;
	uint64_t id;                      /* opaque, unique while live (e.g. the base) */
	kvt_policy_site_fn site;          /* NULL = no call site */
	void *site_ctx;
};

/* pol must outlive the engine; budget numbers as for kvt_policy_budget_init. */
void kvt_policy_engine_init(struct kvt_policy_engine *e,
			    const struct kvt_policy *pol,
			    const struct kvt_policy_cls_config *cls_cfg,
			    uint64_t hbm_budget, uint64_t cxl_limit,
			    uint64_t reserve);
/* Decide for one allocation (before the pointer is returned). Every
 * kvt_policy_on_* call overwrites res (may be NULL) with the resolutions
 * of earlier provisional allocations that this event settled; the
 * interposer applies them (re-advise the preferred location; record). */
void kvt_policy_on_alloc(struct kvt_policy_engine *e,
			 const struct kvt_policy_alloc_event *a,
			 struct kvt_policy_decision *d,
			 struct kvt_policy_resolutions *res);
/* The allocation id was freed. far_bytes: what its decision/resolution
 * charged (released here). */
void kvt_policy_on_free(struct kvt_policy_engine *e, uint64_t id,
			uint64_t far_bytes, uint64_t t_ns,
			struct kvt_policy_resolutions *res);
void kvt_policy_on_memset(struct kvt_policy_engine *e, uint64_t id,
			  uint64_t offset, uint64_t bytes, int value,
			  uint64_t t_ns, struct kvt_policy_resolutions *res);
void kvt_policy_on_meminfo(struct kvt_policy_engine *e, uint64_t free_bytes,
			   uint64_t total_bytes, uint64_t t_ns,
			   struct kvt_policy_resolutions *res);

/* Several far nodes: the index (0..n-1) of the node the next far allocation
 * of `size` bytes goes to, given the bytes already placed on each and their
 * weights (basis points; 0 = never). -1 when no node has a weight. */
int kvt_policy_spread_pick(const uint64_t *placed, const uint32_t *weight_bp, int n,
			   uint64_t size);

const char *kvt_policy_reason_name(unsigned reason);
const char *kvt_policy_kind_name(unsigned kind);     /* "device", ... "?" */
int kvt_policy_kind_from_name(const char *s, size_t len);  /* kind or -1 */

/* ---- replay ----------------------------------------------------------------- */

enum kvt_replay_op {
	KVT_RP_ALLOC = 1,  /* malloc, host_alloc, mmap, async, vmm, managed, register */
	KVT_RP_FREE,       /* free, host_free, munmap */
	KVT_RP_MEMSET,
	KVT_RP_MEMINFO,
	KVT_RP_LAUNCH,
};

enum { KVT_EXPECT_NONE = 0, KVT_EXPECT_KV, KVT_EXPECT_OTHER };

/* One event, from the text format or (later) the binary trace. */
struct kvt_replay_event {
	uint8_t op;              /* enum kvt_replay_op */
	uint8_t kind;            /* alloc/free: enum kvt_kind */
	uint8_t expect;          /* KVT_EXPECT_*: the sequence's truth mark */
	bool has_id;
	uint64_t t_us;
	uint64_t size;           /* alloc: bytes; memset: bytes; meminfo: free bytes */
	uint64_t id;             /* alloc/free/memset/launch: id; meminfo: total bytes */
	uint64_t offset;         /* memset: start inside the allocation (text: 0) */
	int value;               /* memset: byte value (text: 0) */
	char site[256];          /* alloc: "sym@module" frames joined by '|', or "" */
};

/* Parse one text line. Returns 1 with *ev filled, 0 for a blank/comment
 * line, or -EINVAL with err (column and message) filled. */
int kvt_replay_parse_line(const char *line, struct kvt_replay_event *ev,
			  struct kvt_policy_error *err);

/* What replay knows about one allocation (the caller provides the table). */
struct kvt_replay_alloc {
	uint64_t ordinal;        /* 1-based among allocations */
	uint64_t id, size, t_us;
	uint8_t kind;
	uint8_t expect;
	bool live;
	bool kv_final;           /* the classifier's last word: KV and not freed */
	struct kvt_policy_decision birth;
	bool resolved;
	struct kvt_policy_resolution res;   /* the last resolution, if any */
};

struct kvt_replay {
	struct kvt_policy_engine eng;
	struct kvt_replay_alloc *allocs; /* caller's table */
	size_t cap, nr;
	uint64_t next_auto_id;
	unsigned line;                   /* for errors */
};

void kvt_replay_init(struct kvt_replay *r, const struct kvt_policy *pol,
		     struct kvt_replay_alloc *table, size_t cap);
/* Feed one event (from the text format, or a trace reader: ids are then
 * allocation base addresses, a memset names its allocation's base, offset
 * and value). 0, or -ENOSPC when the allocation table is full (grow
 * r->allocs/r->cap and feed the event again), or -ENOENT for a free or
 * memset of an id that is not live (the event is ignored). */
int kvt_replay_feed(struct kvt_replay *r, const struct kvt_replay_event *ev);
/* One report line for allocation i (no newline): ordinal, kind, size,
 * decision, reason, verdict. Returns snprintf's length. */
size_t kvt_replay_format(const struct kvt_replay *r, size_t i, char *buf,
			 size_t len);

#endif
