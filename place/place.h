/* SPDX-License-Identifier: MIT */
/* Placement: carries out the policy's decisions inside the process. The
 * hooks ask kvt_place_decide() before allocating, allocate (redirected or
 * native), then kvt_place_commit(). Every failure falls back to native,
 * counted once per reason. The policy engine runs under one lock.
 * Three files, read top to bottom: place.c decides (the policy engine,
 * verdicts, what the migrator tracks), place_act.c acts (managed memory
 * homed, pinned memory and maps bound), place_account.c counts (far nodes'
 * bytes, placements, fallbacks). place/ sits below the hooks (preload/):
 * nothing here calls a hook or the live counters, which read
 * kvt_place_counters when they publish (place/stats.c). */
#ifndef KVT_PLACE_H
#define KVT_PLACE_H

#include <stdint.h>

#include <cuda.h>

#include "kvtier/policy.h"
#include "../profiler/registry.h"

struct kvt_place {
	uint8_t placement;            /* enum kvt_placement: what is to be done / was done */
	uint8_t provisional;          /* managed:hbm until the classifier's verdict */
	uint8_t unmapped;             /* far, placed without accessed-by (fault admission) */
	int32_t node;                 /* host NUMA node of a far placement, -1 none */
	uint64_t policy_id;           /* the engine's id for this allocation */
	uint64_t far_bytes;           /* charged to KVTIER_CXL_LIMIT */
	struct kvt_policy_resolutions res;   /* verdicts on earlier allocations */
};

enum kvt_fallback {
	KVT_FB_MANAGED_ALLOC,         /* cuMemAllocManaged failed: native */
	KVT_FB_NUMA_HOME,             /* host-NUMA preferred location refused: plain host home */
	KVT_FB_CAPTURE,               /* stream being captured: native */
	KVT_FB_NO_DRIVER,             /* kvtier could not reach the driver: native */
	KVT_FB_HOST_BIND,             /* far node refused host memory: native */
	KVT_FB_REGISTER,              /* registering kvtier's pinned memory failed: native */
	KVT_FB_NO_FAR_TIER,           /* no far node: native */
	KVT_FB_IPC,                   /* cuIpcGetMemHandle on redirected memory */
	KVT_FB__COUNT
};

/* Once, from the constructor: the rules (KVTIER_POLICY or the default;
 * a bad text warns and places nothing unless KVTIER_STRICT=1), the far node.
 * mem: the registry the hooks record address ranges in (a re-home updates
 * its record; a memset is matched against it). */
void kvt_place_init(struct kvt_registry *mem);
/* The HBM budget for redirected memory: KVTIER_HBM_BUDGET, or what was
 * derived when the KV allocations began (0 = not yet, or nothing left). */
uint64_t kvt_place_hbm_budget(void);
/* Free device memory when the first KV allocation was seen (0: not yet). */
uint64_t kvt_place_kv_start_free(void);

void kvt_place_decide(uint8_t kind, uint64_t size, struct kvt_place *pl);
/* Can some rule move memory of this kind at all? */
int kvt_place_kind_placeable(uint8_t kind);
/* After the allocation: remember provisional ones, act on verdicts. */
void kvt_place_commit(struct kvt_place *pl, uint64_t base, uint64_t size);
/* A tracked allocation is about to be released (the migrator stops moving
 * it) / its release failed (it is tracked again). */
void kvt_place_before_free(const struct kvt_alloc *rec);
void kvt_place_free_failed(const struct kvt_alloc *rec);
void kvt_place_on_free(const struct kvt_alloc *rec);
void kvt_place_on_memset(uint64_t addr, uint64_t bytes, int value);
void kvt_place_on_meminfo(uint64_t free_bytes, uint64_t total_bytes);

/* Device side: managed memory homed per pl (far node, or the GPU for
 * managed:hbm). CUDA_SUCCESS, or an error with pl->placement set native. */
int kvt_place_managed(CUdeviceptr *p, uint64_t size, struct kvt_place *pl);
/* The application's own managed allocation: advise its home per pl. */
void kvt_place_advise(uint64_t p, uint64_t size, struct kvt_place *pl);
/* Host side: pinned memory on the far node (mmap + mbind + touch +
 * register with the flags cuMemHostAlloc flags imply); NULL = fall back. */
void *kvt_place_pinned(uint64_t size, unsigned alloc_flags, struct kvt_place *pl);
void kvt_place_unpin(void *p, uint64_t size);
/* An anonymous map (bind/interleave) or a range about to be registered
 * (pages moved). 0, or -errno with pl->placement set native. */
int kvt_place_bind(void *p, uint64_t len, struct kvt_place *pl, int move);

void kvt_place_fallback(enum kvt_fallback why);
const char *kvt_place_fallback_name(unsigned why);

/* The counters as they are now (atomic loads): place/stats.c pulls them
 * when it publishes; placement never calls into the stats. */
struct kvt_place_counters {
	uint64_t nr_placed[KVT_PLACE__COUNT], bytes_placed[KVT_PLACE__COUNT];
	/* net moves of live allocations into each placement (in less out,
	 * modulo 2^64; a re-home moves one) */
	uint64_t moved_nr[KVT_PLACE__COUNT], moved_bytes[KVT_PLACE__COUNT];
	uint64_t fallback[KVT_FB__COUNT];
	uint64_t rehomed, mismatch;
	int far_node, placing;
};
void kvt_place_counters(struct kvt_place_counters *out);
/* INFO records with the counters, at exit. */
void kvt_place_trace_counters(void);

#endif
