// SPDX-License-Identifier: MIT
/* Placement, deciding (contract in place.h): the policy engine under one
 * lock, the decision for each allocation, provisional ones remembered and
 * the verdicts on them acted on, the migrator told what to track. What is
 * done to memory is place_act.c's; what is counted, place_account.c's.
 * Runs inside hooks: no malloc, no stdio; memory via the platform layer. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier/api.h"
#include "../base/kvt.h"
#include "place.h"
#include "place_int.h"
#include "../topo/topo.h"
#include "../tier/admit.h"
#include "../tier/migrator.h"
#include "../cuda_shim/shim.h"
#include "../profiler/pyframes.h"
#include "../profiler/trace.h"

static pthread_mutex_t eng_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvt_policy pol;
static struct kvt_policy_engine eng;
static int placing;                 /* 0: every allocation stays native */
static uint8_t placeable[KVT_KIND__COUNT];   /* some rule can move this kind */
static uint64_t next_id = 1;
static struct kvt_registry *mem_reg;    /* the hooks' address ranges (kvt_place_init) */

/* Provisional allocations awaiting a verdict: id -> range. */
static struct { uint64_t id, base, size; } pend[2 * KVT_POLICY_MAX_PENDING];

uint64_t kvt_place_hbm_budget(void)
{
	pthread_mutex_lock(&eng_lock);
	uint64_t b = eng.budget.hbm_budget_bytes;
	pthread_mutex_unlock(&eng_lock);
	return b;
}

uint64_t kvt_place_kv_start_free(void)
{
	pthread_mutex_lock(&eng_lock);
	uint64_t f = eng.budget.kv_start_free_bytes;
	pthread_mutex_unlock(&eng_lock);
	return f;
}

static int is_managed(uint8_t placement)
{
	return placement == KVT_PLACE_MANAGED_FAR || placement == KVT_PLACE_MANAGED_HBM;
}

/* ---- init ---- */

static void load_policy(void)
{
	struct kvt_policy_error err;
	if (!kvt_opt.policy[0]) {
		kvt_policy_default(&pol);
		placing = 1;
		return;
	}
	if (kvt_policy_parse(kvt_opt.policy, &pol, &err) == 0) {
		placing = 1;
		return;
	}
	if (kvt_opt.strict) {
		kvt_error("KVTIER_POLICY: %s; KVTIER_STRICT=1, aborting", err.msg);
		abort();
	}
	kvt_warn("KVTIER_POLICY: %s; every allocation stays native", err.msg);
	kvt_policy_default(&pol);
	placing = 0;
}

/* Which kinds some rule can move (actions serve only some kinds; kv rules
 * only the kinds the classifier looks at). Others skip the engine and its
 * lock entirely: most anonymous maps of a server never need a decision. */
static void find_placeable_kinds(void)
{
	static const uint8_t serves[] = {
		[KVT_ACT_MANAGED] = (1u << KVT_KIND_DEVICE) | (1u << KVT_KIND_ASYNC) |
				    (1u << KVT_KIND_MANAGED),
		[KVT_ACT_PINNED] = (1u << KVT_KIND_HOST) | (1u << KVT_KIND_REGISTER),
		[KVT_ACT_BIND] = (1u << KVT_KIND_MMAP) | (1u << KVT_KIND_REGISTER),
		[KVT_ACT_INTERLEAVE] = (1u << KVT_KIND_MMAP) | (1u << KVT_KIND_REGISTER),
	};
	const uint8_t kv_kinds = (1u << KVT_KIND_DEVICE) | (1u << KVT_KIND_ASYNC) |
				 (1u << KVT_KIND_MANAGED);
	for (unsigned i = 0; i < pol.nr_rules; i++) {
		const struct kvt_policy_rule *r = &pol.rule[i];
		uint8_t kinds = r->kinds ? r->kinds : 0xff;
		if (r->action.type < sizeof serves)
			kinds &= serves[r->action.type];
		else
			kinds = 0;                 /* native, trace */
		if (r->kv == KVT_RULE_KV_YES)
			kinds &= kv_kinds;
		for (unsigned k = 0; k < KVT_KIND__COUNT; k++)
			placeable[k] |= (kinds >> k) & 1;
	}
}

/* The counters live in place_account.c; whether rules are in force is
 * decided here, so the snapshot is taken from this side (place_account.c
 * never calls up into place.c). */
void kvt_place_counters(struct kvt_place_counters *out)
{
	kvt_place_account_counters(out);
	out->placing = placing;
}

int kvt_place_kind_placeable(uint8_t kind)
{
	return placing && kind < KVT_KIND__COUNT && placeable[kind];
}

/* fork(): the engine lock is held across it, so a child never inherits it
 * held by a thread that does not exist there (its first decision would
 * wait forever: a child mapping memory under a bind rule). Registered from
 * kvt_place_init, before preload/fork.c's handlers: this prepare runs after
 * theirs (the hook guard is already raised). No other kvtier lock is ever
 * taken while eng_lock is held. */
static void fork_prepare(void) { pthread_mutex_lock(&eng_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&eng_lock); }

/* The child's trace starts empty: so do its counts of what was placed
 * (its INFO records must agree with its own events, not its parent's). */
static void fork_child(void)
{
	pthread_mutex_init(&eng_lock, NULL);
	kvt_place_counters_reset();
}

void kvt_place_init(struct kvt_registry *mem)
{
	mem_reg = mem;
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	load_policy();
	find_placeable_kinds();
	int fault = !strcmp(kvt_opt.admit, "fault"), automatic = !strcmp(kvt_opt.admit, "auto");
	if ((fault || automatic) && !kvt_opt.admit_set &&
	    (!kvt_opt.migrate || !strstr(kvt_opt.sources, "cupti"))) {
		/* the default, where it cannot run: remote, as asked by the other
		 * settings (no migrator, or no CUPTI source); said at info level */
		kvt_info("admission: remote (the default, auto, needs the migrator and the cupti "
			 "source)");
	} else if (fault || automatic) {
		if (!kvt_opt.migrate)
			kvt_warn("KVTIER_ADMIT=%s with KVTIER_MIGRATE=0: nothing would keep the "
				 "budget; far memory is read remotely (KVTIER_ADMIT=remote)", kvt_opt.admit);
		else if (!strstr(kvt_opt.sources, "cupti"))
			kvt_warn("KVTIER_ADMIT=%s needs the cupti source, not in KVTIER_SOURCES='%s': "
				 "far memory is read remotely (KVTIER_ADMIT=remote)", kvt_opt.admit,
				 kvt_opt.sources);
		else
			kvt_admit_set(automatic ? KVT_ADMIT_AUTO : KVT_ADMIT_FAULT);
	} else if (strcmp(kvt_opt.admit, "remote")) {
		kvt_warn("KVTIER_ADMIT='%s': not remote, fault or auto; using remote", kvt_opt.admit);
	}
	kvt_policy_engine_init(&eng, &pol, NULL, kvt_opt.hbm_budget, kvt_opt.cxl_limit,
			       kvt_opt.reserve);
	/* Topology once, at start (static: the structs are large). Several far
	 * nodes: the first takes the placements for now (weights are kept in
	 * the choice for the spreading to come). */
	static struct kvt_topo topo;
	static struct kvt_topo_choice ch;
	kvt_topo_discover(&topo, "/", kvt_topo_cxl_default("/"));
	kvt_topo_choose(&topo, kvt_opt.cxl_nodes, &ch);
	kvt_place_far_init(&ch);
}

/* ---- decisions and verdicts ---- */

/* site~ rules: the call stack, symbolized lazily with dladdr (dynamic
 * symbols and module paths; static functions show as their module only),
 * after the innermost Python frames (function as the symbol, file as the
 * module) when the thread runs Python. Captured only when the rules
 * contain a site~ selector. */
#define SITE_PY_FRAMES 32           /* of KVT_POLICY_MAX_FRAMES: the rest native */

struct site_ctx {
	void *ip[KVT_POLICY_MAX_FRAMES];
	int n;
	struct kvt_py_stack py;
	struct kvt_py_frame_text text;  /* the Python frame last handed out */
};

static int site_frame(void *arg, unsigned i, const char **sym, const char **module)
{
	struct site_ctx *c = arg;
	Dl_info di;
	*sym = NULL;
	*module = NULL;
	if (i < c->py.nr_frames) {
		if (kvt_py_frame(&c->py, i, &c->text))
			return -1;
		*sym = c->text.func;
		*module = c->text.file;
		return 0;
	}
	i -= c->py.nr_frames;
	if ((int)i >= c->n)
		return -1;
	if (kvt_dl_addr((char *)c->ip[i] - 1, &di)) {
		*sym = di.dli_sname;
		*module = di.dli_fname;
	}
	return 0;
}

/* Python frames only where the hook may call into Python (record.c). */
static void site_capture(struct site_ctx *c, uint8_t kind)
{
	c->py.nr_frames = 0;
	if (kind != KVT_KIND_MMAP)
		kvt_py_capture(&c->py, SITE_PY_FRAMES);
	c->n = kvt_backtrace(c->ip, KVT_POLICY_MAX_FRAMES);
}

void kvt_place_decide(uint8_t kind, uint64_t size, struct kvt_place *pl)
{
	memset(pl, 0, sizeof *pl);
	pl->node = -1;
	if (!placing || kind >= KVT_KIND__COUNT || !placeable[kind])
		return;
	struct kvt_policy_decision d;
	struct site_ctx sc;
	int need_site = kvt_policy_needs_site(&pol);
	if (need_site)
		site_capture(&sc, kind);
	pthread_mutex_lock(&eng_lock);
	struct kvt_policy_alloc_event ev = { .kind = kind, .size = size,
					     .t_ns = kvt_gap_ns(), .id = next_id++,
					     .site = need_site ? site_frame : NULL,
					     .site_ctx = need_site ? &sc : NULL };
	kvt_policy_on_alloc(&eng, &ev, &d, &pl->res);
	pthread_mutex_unlock(&eng_lock);
	pl->policy_id = ev.id;
	pl->far_bytes = d.far_bytes;
	pl->placement = (uint8_t)kvt_policy_action_placement(&d.action);
	pl->provisional = (d.flags & KVT_DEC_PROVISIONAL) != 0;
	if (d.action.tier == KVT_TIER_NODE)
		pl->node = d.action.node;
	else if (kvt_policy_action_is_far(&d.action))
		pl->node = kvt_place_pick_far(size);
	if (kvt_policy_action_is_far(&d.action) && pl->node < 0) {
		kvt_place_fallback(KVT_FB_NO_FAR_TIER);
		pl->placement = KVT_PLACE_NATIVE;
	}
}


/* The migrator tracks a managed range with the node it demotes to: its
 * own, or the first far node for a provisional managed:hbm one. */
static void track(uint64_t base, uint64_t size, int32_t node)
{
	kvt_migrator_track(base, size, node >= 0 ? node : kvt_place_far_first());
}

static void rehome(uint64_t base, uint64_t size)
{
	int node = kvt_place_pick_far(size);
	kvt_place_home_far(base, size, node);
	kvt_place_account_far(node, (int64_t)size);
	struct kvt_alloc a;
	if (!kvt_reg_lookup(mem_reg, base, &a)) {
		kvt_place_count_moved(a.placement, KVT_PLACE_MANAGED_FAR, a.size);
		a.placement = KVT_PLACE_MANAGED_FAR;
		a.node = node;
		kvt_reg_insert(mem_reg, &a);
	}
	kvt_place_count_rehomed();
	kvt_migrator_rehomed(base);
	kvt_rec_event(KVT_OP_ADVISE, KVT_KIND_DEVICE, KVT_API_none, base, size,
		      CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
		      ((uint64_t)CU_MEM_LOCATION_TYPE_HOST_NUMA << 32) | (uint32_t)node, 0);
}

/* Verdicts on provisional allocations: confirmed ones move their home to
 * the far node (no copy: advice only); refuted ones stay where they are. */
static void act_on(const struct kvt_policy_resolutions *res)
{
	struct { uint64_t base, size; } moves[KVT_POLICY_MAX_RESOLVE];
	unsigned n = 0;
	pthread_mutex_lock(&eng_lock);
	for (unsigned i = 0; i < res->nr; i++) {
		const struct kvt_policy_resolution *r = &res->r[i];
		for (unsigned k = 0; k < sizeof pend / sizeof pend[0]; k++) {
			if (pend[k].id != r->id)
				continue;
			pend[k].id = 0;
			if (r->reason == KVT_REASON_CONFIRMED && kvt_policy_action_is_far(&r->action)) {
				moves[n].base = pend[k].base;
				moves[n++].size = pend[k].size;
			}
			break;
		}
	}
	pthread_mutex_unlock(&eng_lock);
	for (unsigned i = 0; i < n; i++)
		rehome(moves[i].base, moves[i].size);
}

void kvt_place_commit(struct kvt_place *pl, uint64_t base, uint64_t size)
{
	if (!pl->policy_id)
		return;
	if (!base) {                 /* the allocation failed: the engine forgets it */
		struct kvt_policy_resolutions res;
		pthread_mutex_lock(&eng_lock);
		kvt_policy_on_free(&eng, pl->policy_id, pl->far_bytes, kvt_gap_ns(), &res);
		pthread_mutex_unlock(&eng_lock);
	} else if (pl->provisional && pl->placement == KVT_PLACE_MANAGED_HBM) {
		pthread_mutex_lock(&eng_lock);
		for (unsigned k = 0; k < sizeof pend / sizeof pend[0]; k++) {
			if (!pend[k].id) {
				pend[k].id = pl->policy_id;
				pend[k].base = base;
				pend[k].size = size;
				break;
			}
		}
		pthread_mutex_unlock(&eng_lock);
	}
	if (base && pl->placement != KVT_PLACE_NATIVE) {
		if (is_managed(pl->placement))      /* the migrator's chunks */
			track(base, size, pl->node);
		/* placed for fault admission, which gave way to remote before the
		 * range was tracked (kvt_admit_remote saw only tracked ones).
		 * A read-modify-write, ordered with that exchange: either it sees
		 * 0 here, or the exchange comes after and sees the range tracked. */
		if (pl->unmapped && !kvt_admit_fault_sc()) {
			CUdevice dev = 0;
			kvt_cuda_current_device(&dev);
			kvt_cuda_advise(base, size, CU_MEM_ADVISE_SET_ACCESSED_BY,
					CU_MEM_LOCATION_TYPE_DEVICE, dev);
		}
		if (pl->node >= 0 && pl->placement != KVT_PLACE_MANAGED_HBM)
			kvt_place_account_far(pl->node, (int64_t)size);
		kvt_place_count_placed(pl->placement, size);
	}
	act_on(&pl->res);
}

/* The migrator lets go of a range before the driver frees it: after the
 * free the address may come back at once, to another thread's allocation,
 * whose tracking must not collide with the old range's. */
void kvt_place_before_free(const struct kvt_alloc *rec)
{
	if (is_managed(rec->placement))
		kvt_migrator_untrack(rec->base);
}

void kvt_place_free_failed(const struct kvt_alloc *rec)
{
	if (is_managed(rec->placement))
		track(rec->base, rec->size, rec->node);
}

void kvt_place_on_free(const struct kvt_alloc *rec)
{
	if (!placing || !rec->policy_id)
		return;
	if (rec->node >= 0 && rec->placement != KVT_PLACE_NATIVE &&
	    rec->placement != KVT_PLACE_MANAGED_HBM)
		kvt_place_account_far(rec->node, -(int64_t)rec->size);
	struct kvt_policy_resolutions res;
	pthread_mutex_lock(&eng_lock);
	kvt_policy_on_free(&eng, rec->policy_id, rec->far_bytes, kvt_gap_ns(), &res);
	for (unsigned k = 0; k < sizeof pend / sizeof pend[0]; k++)
		if (pend[k].id == rec->policy_id)
			pend[k].id = 0;
	pthread_mutex_unlock(&eng_lock);
	act_on(&res);
}

void kvt_place_on_memset(uint64_t addr, uint64_t bytes, int value)
{
	struct kvt_alloc a;
	if (!placing || kvt_reg_find(mem_reg, addr, &a) || !a.policy_id)
		return;
	struct kvt_policy_resolutions res;
	pthread_mutex_lock(&eng_lock);
	kvt_policy_on_memset(&eng, a.policy_id, addr - a.base, bytes, value, kvt_gap_ns(), &res);
	pthread_mutex_unlock(&eng_lock);
	act_on(&res);
}

void kvt_place_on_meminfo(uint64_t free_bytes, uint64_t total_bytes)
{
	if (!placing)
		return;
	struct kvt_policy_resolutions res;
	pthread_mutex_lock(&eng_lock);
	kvt_policy_on_meminfo(&eng, free_bytes, total_bytes, kvt_gap_ns(), &res);
	pthread_mutex_unlock(&eng_lock);
	act_on(&res);
}
