// SPDX-License-Identifier: MIT
/* Placement glue (contract in place.h): the policy engine under one lock,
 * managed memory homed on the far node, pinned host memory and anonymous
 * maps bound there, verdicts acted on, fallbacks counted.
 * Runs inside hooks: no malloc, no stdio; memory via the platform layer. */
#include <dlfcn.h>
#include <errno.h>
#include <numaif.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../base/kvt.h"
#include "stats.h"
#include "place.h"
#include "record.h"
#include "topo.h"
#include "../tier/admit.h"
#include "../tier/migrator.h"
#include "../cuda_shim/shim.h"
#include "../profiler/heat.h"
#include "../profiler/trace.h"

static pthread_mutex_t eng_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvt_policy pol;
static struct kvt_policy_engine eng;
static int placing;                 /* 0: every allocation stays native */
static uint8_t placeable[KVT_KIND__COUNT];   /* some rule can move this kind */
static int far_node = -1;           /* the first far node (re-homing, counters) */
static int nr_far;
static int far_nodes[KVT_TOPO_MAX_FAR];
static uint32_t far_weight[KVT_TOPO_MAX_FAR];
static uint64_t far_placed[KVT_TOPO_MAX_FAR];      /* bytes now on each (atomic) */
static uint64_t next_id = 1;

/* Provisional allocations awaiting a verdict: id -> range. */
static struct { uint64_t id, base, size; } pend[2 * KVT_POLICY_MAX_PENDING];

static uint64_t nr_fallback[KVT_FB__COUNT];
static uint64_t nr_placed[KVT_PLACE__COUNT], bytes_placed[KVT_PLACE__COUNT];
static uint64_t nr_rehomed, nr_mismatch;

static const char *const fallback_names[KVT_FB__COUNT] = {
	"managed_alloc_failed", "numa_home_refused", "stream_capture", "no_driver",
	"far_node_refused", "register_failed", "no_far_tier", "ipc_export",
};

void kvt_place_fallback(enum kvt_fallback why)
{
	if (__atomic_fetch_add(&nr_fallback[why], 1, __ATOMIC_RELAXED) == 0)
		kvt_warn("placement fallback: %s (counted; further ones are not logged)",
			 fallback_names[why]);
}

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

int kvt_place_kind_placeable(uint8_t kind)
{
	return placing && kind < KVT_KIND__COUNT && placeable[kind];
}

/* fork(): the engine lock is held across it, so a child never inherits it
 * held by a thread that does not exist there (its first decision would
 * wait forever: a child mapping memory under a bind rule). Registered from kvt_place_init, before init.c's handlers:
 * this prepare runs after theirs (the hook guard is already raised). No
 * other kvtier lock is ever taken while eng_lock is held. */
static void fork_prepare(void) { pthread_mutex_lock(&eng_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&eng_lock); }

/* The child's trace starts empty: so do its counts of what was placed
 * (its INFO records must agree with its own events, not its parent's). */
static void fork_child(void)
{
	pthread_mutex_init(&eng_lock, NULL);
	memset(nr_fallback, 0, sizeof nr_fallback);
	memset(nr_placed, 0, sizeof nr_placed);
	memset(bytes_placed, 0, sizeof bytes_placed);
	nr_rehomed = nr_mismatch = 0;
}

void kvt_place_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	load_policy();
	find_placeable_kinds();
	int fault = !strcmp(kvt_opt.admit, "fault"), automatic = !strcmp(kvt_opt.admit, "auto");
	if (fault || automatic) {
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
	if (ch.reason == KVT_TOPO_FAR_NONE || ch.nr_far == 0) {
		far_node = -1;
		kvt_warn("far tier: %s; far placements stay native", ch.why);
	} else {
		far_node = ch.far[0];
		nr_far = ch.nr_far;
		for (int i = 0; i < nr_far; i++) {
			far_nodes[i] = ch.far[i];
			far_weight[i] = ch.weight_bp[i];
		}
		kvt_info("far tier: node %d%s (%s: %s)", far_node, nr_far > 1 ? " and more" : "",
			 kvt_topo_reason_name(ch.reason), ch.why);
	}
}

/* The far node for the next `size` bytes: spread by weight. */
static int pick_far(uint64_t size)
{
	uint64_t placed[KVT_TOPO_MAX_FAR];
	if (nr_far <= 1)
		return far_node;
	for (int i = 0; i < nr_far; i++)
		placed[i] = __atomic_load_n(&far_placed[i], __ATOMIC_RELAXED);
	int i = kvt_policy_spread_pick(placed, far_weight, nr_far, size);
	return i < 0 ? far_node : far_nodes[i];
}

static void account_far(int node, int64_t bytes)
{
	for (int i = 0; i < nr_far; i++)
		if (far_nodes[i] == node)
			__atomic_fetch_add(&far_placed[i], (uint64_t)bytes, __ATOMIC_RELAXED);
}

/* ---- decisions and verdicts ---- */

/* site~ rules: the call stack, symbolized lazily with dladdr (dynamic
 * symbols and module paths; static functions show as their module only).
 * Captured only when the rules contain a site~ selector. */
struct site_ctx {
	void *ip[KVT_POLICY_MAX_FRAMES];
	int n;
};

static int site_frame(void *arg, unsigned i, const char **sym, const char **module)
{
	struct site_ctx *c = arg;
	Dl_info di;
	if ((int)i >= c->n)
		return -1;
	*sym = NULL;
	*module = NULL;
	if (dladdr((char *)c->ip[i] - 1, &di)) {
		*sym = di.dli_sname;
		*module = di.dli_fname;
	}
	return 0;
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
		sc.n = kvt_backtrace(sc.ip, KVT_POLICY_MAX_FRAMES);
	pthread_mutex_lock(&eng_lock);
	struct kvt_policy_alloc_event ev = { .kind = kind, .size = size,
					     .t_ns = kvt_now_ns(), .id = next_id++,
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
		pl->node = pick_far(size);
	if (kvt_policy_action_is_far(&d.action) && pl->node < 0) {
		kvt_place_fallback(KVT_FB_NO_FAR_TIER);
		pl->placement = KVT_PLACE_NATIVE;
	}
}


/* Whether the driver keeps host-NUMA homes: 1 until one fails to read back.
 * A real H200 (driver 580, device NUMA config NONE) answers CUDA_SUCCESS to
 * SET_PREFERRED_LOCATION HOST_NUMA and keeps no preference at all (the range
 * reads back INVALID): the memory then migrates to the GPU on first touch,
 * the opposite of a far home. */
static int numa_homes_kept = 1;

/* Managed memory homed on a host node, accessed by the current device;
 * a driver without host-NUMA homes (pre-12.2 / pre-R550, or one that drops
 * them) gets a plain host home. The first placement reads the home back
 * (its first chunk: two range-attribute calls); later ones trust it. */
static int home_far(CUdeviceptr d, uint64_t size, int node)
{
	static int checked;
	CUdevice dev = 0;
	kvt_cuda_current_device(&dev);
	int ok = __atomic_load_n(&numa_homes_kept, __ATOMIC_RELAXED) &&
		 kvt_cuda_advise(d, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
				 CU_MEM_LOCATION_TYPE_HOST_NUMA, node) == CUDA_SUCCESS;
	if (ok && !__atomic_exchange_n(&checked, 1, __ATOMIC_RELAXED)) {
		uint64_t probe = size < (2u << 20) ? size : (2u << 20);
		int t = kvt_cuda_preferred_is(d, probe, CU_MEM_LOCATION_TYPE_HOST_NUMA, node);
		if (t == 0) {
			__atomic_store_n(&numa_homes_kept, 0, __ATOMIC_RELAXED);
			kvt_warn("the CUDA driver accepted node %d as the home of managed memory but "
				 "does not keep it (the range reads back without that preferred "
				 "location); far memory gets a plain host home (no node choice)", node);
			ok = 0;
		}
	}
	/* Admission by fault: no plain host home, on which a GPU fault maps
	 * the memory instead of migrating it (measured on the H200); the
	 * memory then has no preferred location, and demotions still name
	 * the node. */
	if (!ok) {
		kvt_place_fallback(KVT_FB_NUMA_HOME);
		if (!kvt_admit_fault())
			kvt_cuda_advise(d, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
					CU_MEM_LOCATION_TYPE_HOST, 0);
	}
	if (kvt_admit_fault())
		return 0;
	kvt_cuda_advise(d, size, CU_MEM_ADVISE_SET_ACCESSED_BY, CU_MEM_LOCATION_TYPE_DEVICE, dev);
	return 1;
}

/* The migrator tracks a managed range with the node it demotes to: its
 * own, or the first far node for a provisional managed:hbm one. */
static void track(uint64_t base, uint64_t size, int32_t node)
{
	kvt_migrator_track(base, size, node >= 0 ? node : far_node);
}

static void rehome(uint64_t base, uint64_t size)
{
	int node = pick_far(size);
	home_far(base, size, node);
	account_far(node, (int64_t)size);
	struct kvt_alloc a;
	if (!kvt_reg_lookup(kvt_mem_reg, base, &a)) {
		kvt_stats_on_rehome(a.placement, KVT_PLACE_MANAGED_FAR, a.size);
		a.placement = KVT_PLACE_MANAGED_FAR;
		a.node = node;
		kvt_reg_insert(kvt_mem_reg, &a);
	}
	__atomic_fetch_add(&nr_rehomed, 1, __ATOMIC_RELAXED);
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
		kvt_policy_on_free(&eng, pl->policy_id, pl->far_bytes, kvt_now_ns(), &res);
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
			account_far(pl->node, (int64_t)size);
		__atomic_fetch_add(&nr_placed[pl->placement], 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&bytes_placed[pl->placement], size, __ATOMIC_RELAXED);
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
		account_far(rec->node, -(int64_t)rec->size);
	struct kvt_policy_resolutions res;
	pthread_mutex_lock(&eng_lock);
	kvt_policy_on_free(&eng, rec->policy_id, rec->far_bytes, kvt_now_ns(), &res);
	for (unsigned k = 0; k < sizeof pend / sizeof pend[0]; k++)
		if (pend[k].id == rec->policy_id)
			pend[k].id = 0;
	pthread_mutex_unlock(&eng_lock);
	act_on(&res);
}

void kvt_place_on_memset(uint64_t addr, uint64_t bytes, int value)
{
	struct kvt_alloc a;
	if (!placing || kvt_reg_find(kvt_mem_reg, addr, &a) || !a.policy_id)
		return;
	struct kvt_policy_resolutions res;
	pthread_mutex_lock(&eng_lock);
	kvt_policy_on_memset(&eng, a.policy_id, addr - a.base, bytes, value, kvt_now_ns(), &res);
	pthread_mutex_unlock(&eng_lock);
	act_on(&res);
}

void kvt_place_on_meminfo(uint64_t free_bytes, uint64_t total_bytes)
{
	if (!placing)
		return;
	struct kvt_policy_resolutions res;
	pthread_mutex_lock(&eng_lock);
	kvt_policy_on_meminfo(&eng, free_bytes, total_bytes, kvt_now_ns(), &res);
	pthread_mutex_unlock(&eng_lock);
	act_on(&res);
}

/* ---- device side ---- */

int kvt_place_managed(CUdeviceptr *p, uint64_t size, struct kvt_place *pl)
{
	if (kvt_cuda_ready()) {
		kvt_place_fallback(KVT_FB_NO_DRIVER);
		pl->placement = KVT_PLACE_NATIVE;
		return CUDA_ERROR_NOT_INITIALIZED;
	}
	CUdeviceptr d = 0;
	CUresult r = kvt_cuda_alloc_managed(&d, size);
	if (r != CUDA_SUCCESS) {
		kvt_place_fallback(KVT_FB_MANAGED_ALLOC);
		pl->placement = KVT_PLACE_NATIVE;
		return r;
	}
	kvt_place_advise(d, size, pl);
	*p = d;
	return CUDA_SUCCESS;
}

void kvt_place_advise(uint64_t d, uint64_t size, struct kvt_place *pl)
{
	if (pl->placement == KVT_PLACE_MANAGED_FAR) {
		pl->unmapped = !home_far(d, size, pl->node);
	} else if (pl->placement == KVT_PLACE_MANAGED_HBM) {
		CUdevice dev = 0;
		kvt_cuda_current_device(&dev);
		kvt_cuda_advise(d, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
				CU_MEM_LOCATION_TYPE_DEVICE, dev);
	}
}

/* ---- host side ---- */

static uint64_t page_round(uint64_t n)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	return (n + pg - 1) & ~(pg - 1);
}

/* How many of up to 64 sampled pages of [p, p+len) are on node (resident
 * pages only); *sampled gets the number checked. */
static unsigned pages_on_node(void *p, uint64_t len, int node, unsigned *sampled)
{
	void *pages[64];
	int status[64];
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t nr = len / pg;
	unsigned n = nr < 64 ? (unsigned)nr : 64, on = 0;
	for (unsigned i = 0; i < n; i++)
		pages[i] = (char *)p + (nr / (n ? n : 1)) * i * pg;
	*sampled = 0;
	if (!n || kvt_sys_move_pages(n, pages, NULL, status, 0))
		return 0;
	for (unsigned i = 0; i < n; i++) {
		if (status[i] < 0)
			continue;
		(*sampled)++;
		on += status[i] == node;
	}
	return on;
}

static void verify(void *p, uint64_t len, int node, const char *what)
{
	unsigned sampled, on = pages_on_node(p, len, node, &sampled);
	if (sampled && on < sampled) {
		__atomic_fetch_add(&nr_mismatch, 1, __ATOMIC_RELAXED);
		kvt_warn("%s at %p: %u of %u sampled pages are on node %d, the rest elsewhere",
			 what, p, on, sampled, node);
	}
}

static long bind_range(void *p, uint64_t len, int mode, int node, unsigned flags)
{
	unsigned long mask[2] = { 0, 0 };
	if (node < 0 || node >= 128)
		return -EINVAL;
	mask[node / 64] = 1ul << (node % 64);
	return kvt_sys_mbind(p, len, mode, mask, 129, flags);
}

void *kvt_place_pinned(uint64_t size, unsigned alloc_flags, struct kvt_place *pl)
{
	uint64_t len = page_round(size ? size : 1);
	void *p = kvt_sys_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		goto native;
	/* MPOL_PREFERRED: a full far node spills elsewhere (reported by the
	 * verification) instead of failing the process. */
	if (bind_range(p, len, MPOL_PREFERRED, pl->node, 0)) {
		kvt_sys_munmap(p, len);
		kvt_place_fallback(KVT_FB_HOST_BIND);
		goto native;
	}
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	for (uint64_t off = 0; off < len; off += pg)      /* populate on the node */
		((volatile char *)p)[off] = 0;
	unsigned reg = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
	(void)alloc_flags;   /* PORTABLE and DEVICEMAP are implied; WRITECOMBINED has no register form */
	if (kvt_cuda_host_register(p, len, reg) != CUDA_SUCCESS) {
		kvt_sys_munmap(p, len);
		kvt_place_fallback(KVT_FB_REGISTER);
		goto native;
	}
	verify(p, len, pl->node, "pinned:cxl");
	return p;
native:
	pl->placement = KVT_PLACE_NATIVE;
	return NULL;
}

void kvt_place_unpin(void *p, uint64_t size)
{
	kvt_cuda_host_unregister(p);
	kvt_sys_munmap(p, page_round(size ? size : 1));
}

int kvt_place_bind(void *p, uint64_t len, struct kvt_place *pl, int move)
{
	long r;
	if (pl->placement == KVT_PLACE_INTERLEAVE) {
		/* DRAM node 0 and the far node; weights need MPOL_WEIGHTED_INTERLEAVE
		 * (Linux 6.9+), plain interleave is used here. */
		unsigned long mask[2] = { 1, 0 };
		if (pl->node > 0 && pl->node < 128)
			mask[pl->node / 64] |= 1ul << (pl->node % 64);
		r = kvt_sys_mbind(p, len, MPOL_INTERLEAVE, mask, 129, move ? MPOL_MF_MOVE : 0);
	} else {
		r = bind_range(p, len, MPOL_PREFERRED, pl->node, move ? MPOL_MF_MOVE : 0);
	}
	if (r) {
		kvt_place_fallback(KVT_FB_HOST_BIND);
		pl->placement = KVT_PLACE_NATIVE;
		return (int)r;
	}
	if (move && pl->placement != KVT_PLACE_INTERLEAVE)
		verify(p, len, pl->node, "registered range");
	return 0;
}

/* ---- counters ---- */

const char *kvt_place_fallback_name(unsigned why)
{
	return why < KVT_FB__COUNT ? fallback_names[why] : "?";
}

void kvt_place_counters(struct kvt_place_counters *out)
{
	for (unsigned i = 0; i < KVT_PLACE__COUNT; i++) {
		out->nr_placed[i] = __atomic_load_n(&nr_placed[i], __ATOMIC_RELAXED);
		out->bytes_placed[i] = __atomic_load_n(&bytes_placed[i], __ATOMIC_RELAXED);
	}
	for (unsigned i = 0; i < KVT_FB__COUNT; i++)
		out->fallback[i] = __atomic_load_n(&nr_fallback[i], __ATOMIC_RELAXED);
	out->rehomed = __atomic_load_n(&nr_rehomed, __ATOMIC_RELAXED);
	out->mismatch = __atomic_load_n(&nr_mismatch, __ATOMIC_RELAXED);
	out->far_node = far_node;
	out->placing = placing;
}

void kvt_place_trace_counters(void)
{
	char key[64], val[64];
	for (unsigned i = 1; i < KVT_PLACE__COUNT; i++) {
		snprintf(key, sizeof key, "place.%s", kvt_placement_name(i));
		snprintf(val, sizeof val, "%llu %llu",
			 (unsigned long long)__atomic_load_n(&nr_placed[i], __ATOMIC_RELAXED),
			 (unsigned long long)__atomic_load_n(&bytes_placed[i], __ATOMIC_RELAXED));
		kvt_trace_info(key, val);
	}
	for (unsigned i = 0; i < KVT_FB__COUNT; i++) {
		snprintf(key, sizeof key, "fallback.%s", fallback_names[i]);
		snprintf(val, sizeof val, "%llu",
			 (unsigned long long)__atomic_load_n(&nr_fallback[i], __ATOMIC_RELAXED));
		kvt_trace_info(key, val);
	}
	snprintf(val, sizeof val, "%llu",
		 (unsigned long long)__atomic_load_n(&nr_rehomed, __ATOMIC_RELAXED));
	kvt_trace_info("place.rehomed", val);
	snprintf(val, sizeof val, "%llu",
		 (unsigned long long)__atomic_load_n(&nr_mismatch, __ATOMIC_RELAXED));
	kvt_trace_info("place.node_mismatch", val);
	snprintf(val, sizeof val, "%d", far_node);
	kvt_trace_info("place.far_node", val);
}
