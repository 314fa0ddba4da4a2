// SPDX-License-Identifier: MIT
/* Placement, accounting (contract in place.h): the far nodes and the bytes
 * placed on each (the spread by weight), the counts of what was placed,
 * re-homed and fell back, and their INFO records at exit. Atomics only:
 * called inside hooks, never takes a lock. */
#include <stdio.h>
#include <string.h>

#include "kvtier/api.h"
#include "../base/kvt.h"
#include "place.h"
#include "place_int.h"
#include "../topo/topo.h"
#include "../profiler/trace.h"

static int far_node = -1;           /* the first far node (re-homing, counters) */
static int nr_far;
static int far_nodes[KVT_TOPO_MAX_FAR];
static uint32_t far_weight[KVT_TOPO_MAX_FAR];
static uint64_t far_placed[KVT_TOPO_MAX_FAR];      /* bytes now on each (atomic) */

static uint64_t nr_fallback[KVT_FB__COUNT];
static uint64_t nr_placed[KVT_PLACE__COUNT], bytes_placed[KVT_PLACE__COUNT];
static uint64_t nr_rehomed, nr_mismatch;
/* Net moves of live allocations into each placement (in less out, modulo
 * 2^64): the live stats figures add them to what was allocated and freed. */
static uint64_t moved_nr[KVT_PLACE__COUNT], moved_bytes[KVT_PLACE__COUNT];


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


/* ---- the far nodes ---- */

void kvt_place_far_init(const struct kvt_topo_choice *ch)
{
	if (ch->reason == KVT_TOPO_FAR_NONE || ch->nr_far == 0) {
		far_node = -1;
		kvt_warn("far tier: %s; far placements stay native", ch->why);
	} else {
		far_node = ch->far[0];
		nr_far = ch->nr_far;
		for (int i = 0; i < nr_far; i++) {
			far_nodes[i] = ch->far[i];
			far_weight[i] = ch->weight_bp[i];
		}
		kvt_info("far tier: node %d%s (%s: %s)", far_node, nr_far > 1 ? " and more" : "",
			 kvt_topo_reason_name(ch->reason), ch->why);
	}
}

int kvt_place_far_first(void)
{
	return far_node;
}

/* The far node for the next `size` bytes: spread by weight. */
int kvt_place_pick_far(uint64_t size)
{
	uint64_t placed[KVT_TOPO_MAX_FAR];
	if (nr_far <= 1)
		return far_node;
	for (int i = 0; i < nr_far; i++)
		placed[i] = __atomic_load_n(&far_placed[i], __ATOMIC_RELAXED);
	int i = kvt_policy_spread_pick(placed, far_weight, nr_far, size);
	return i < 0 ? far_node : far_nodes[i];
}

void kvt_place_account_far(int node, int64_t bytes)
{
	for (int i = 0; i < nr_far; i++)
		if (far_nodes[i] == node)
			__atomic_fetch_add(&far_placed[i], (uint64_t)bytes, __ATOMIC_RELAXED);
}


/* ---- counts ---- */

void kvt_place_count_placed(uint8_t placement, uint64_t bytes)
{
	__atomic_fetch_add(&nr_placed[placement], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&bytes_placed[placement], bytes, __ATOMIC_RELAXED);
}

void kvt_place_count_rehomed(void)
{
	__atomic_fetch_add(&nr_rehomed, 1, __ATOMIC_RELAXED);
}

void kvt_place_count_moved(uint8_t from, uint8_t to, uint64_t bytes)
{
	if (from >= KVT_PLACE__COUNT || to >= KVT_PLACE__COUNT || from == to)
		return;
	__atomic_fetch_sub(&moved_nr[from], 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&moved_bytes[from], bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&moved_nr[to], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&moved_bytes[to], bytes, __ATOMIC_RELAXED);
}

void kvt_place_count_mismatch(void)
{
	__atomic_fetch_add(&nr_mismatch, 1, __ATOMIC_RELAXED);
}

/* A fork child's trace starts empty: so do its counts. (The moves stay:
 * like the stats' own allocation counts they feed live figures, and a
 * child publishes none.) */
void kvt_place_counters_reset(void)
{
	memset(nr_fallback, 0, sizeof nr_fallback);
	memset(nr_placed, 0, sizeof nr_placed);
	memset(bytes_placed, 0, sizeof bytes_placed);
	nr_rehomed = nr_mismatch = 0;
}

/* ---- counters ---- */

const char *kvt_place_fallback_name(unsigned why)
{
	return why < KVT_FB__COUNT ? fallback_names[why] : "?";
}

void kvt_place_account_counters(struct kvt_place_counters *out)
{
	for (unsigned i = 0; i < KVT_PLACE__COUNT; i++) {
		out->nr_placed[i] = __atomic_load_n(&nr_placed[i], __ATOMIC_RELAXED);
		out->bytes_placed[i] = __atomic_load_n(&bytes_placed[i], __ATOMIC_RELAXED);
		out->moved_nr[i] = __atomic_load_n(&moved_nr[i], __ATOMIC_RELAXED);
		out->moved_bytes[i] = __atomic_load_n(&moved_bytes[i], __ATOMIC_RELAXED);
	}
	for (unsigned i = 0; i < KVT_FB__COUNT; i++)
		out->fallback[i] = __atomic_load_n(&nr_fallback[i], __ATOMIC_RELAXED);
	out->rehomed = __atomic_load_n(&nr_rehomed, __ATOMIC_RELAXED);
	out->mismatch = __atomic_load_n(&nr_mismatch, __ATOMIC_RELAXED);
	out->far_node = far_node;
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
