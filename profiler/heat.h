/* SPDX-License-Identifier: MIT */
/* Chunk heat (profiler/heat.c): every redirected managed range is cut into
 * 2 MiB chunks, each with an access estimate count * exp(-dt/tau) kept
 * incrementally (value + time of its last update, decayed lazily when
 * touched or read; no pass over idle chunks). 16 bytes per chunk, in one
 * arena mapped once (bounded: KVT_HEAT_MAX_CHUNKS) and never unmapped, so a
 * racing reader never faults. Lookups are lock-free (seqlock); touches are
 * one CAS. Safe inside hooks: no malloc, no stdio, no locks on the hot path. */
#ifndef KVT_HEAT_H
#define KVT_HEAT_H

#include <stdint.h>

#include "kvtier/planner.h"

#define KVT_CHUNK_SHIFT 21
#define KVT_CHUNK_BYTES (1ull << KVT_CHUNK_SHIFT)
#define KVT_HEAT_MAX_RANGES 1024       /* a 126-layer model with separate K and V: 252 */
#define KVT_HEAT_MAX_CHUNKS (1u << 20)        /* 2 TiB tracked, 16 MiB of tables */
#define KVT_HEAT_ARENA_ALIGN (2u << 20)      /* the arena starts on a huge page (heat.c) */

struct kvt_heat_chunk {
	uint64_t hv;            /* float heat (low 32 bits) | uint32 t_ms (high): one CAS */
	uint32_t moved_ms;      /* last migration (migrator only; 0 = never) */
	uint8_t tier;           /* enum kvt_plan_tier, the migrator's belief */
	uint8_t flags;          /* KVT_HEAT_F_* (atomic) */
	uint16_t in_seq;        /* low 16 bits of kvt_heat_fault_ins() at its last fault-in */
};

/* Times in a row the driver evicted it (HBM full) and it came back by fault
 * less than tau after it had come in (kvt_heat_fault_in; saturating 2-bit
 * count; a slower come-back clears it): thrashing that more HBM time cannot
 * help. */
#define KVT_HEAT_F_REFAULTS 0x3
/* The migrator advised the GPU's accessed-by on this chunk alone
 * (KVTIER_ADMIT=auto: read over the link while far, no more faults). */
#define KVT_HEAT_F_MAPPED 0x4
/* The driver evicted it since it last came in (kvt_heat_evicted). */
#define KVT_HEAT_F_EVICTED 0x8
/* The driver moved pages of it into HBM for a prefetch (CUPTI's
 * host-to-device records of cause PREFETCH), and those covered the whole
 * chunk (kvt_heat_prefetched_in; taken by kvt_heat_take_in). */
#define KVT_HEAT_F_IN_SEEN 0x10
#define KVT_HEAT_F_IN_WHOLE 0x20

/* ---- the math (pure) ---- */

/* h * exp(-dt/tau); tau 0 = no decay. */
float kvt_heat_decay(float h, uint32_t dt_ms, uint32_t tau_ms);
/* Add w at now_ms (decaying what was there first). Lock-free. */
void kvt_heat_touch(struct kvt_heat_chunk *c, float w, uint32_t now_ms, uint32_t tau_ms);
/* The value decayed to now_ms (nothing is written). */
float kvt_heat_read(const struct kvt_heat_chunk *c, uint32_t now_ms, uint32_t tau_ms);
/* How recently it was touched: top decayed over the time since its last
 * touch, whatever the count; 0 if it has no heat. */
float kvt_heat_recency(const struct kvt_heat_chunk *c, float top, uint32_t now_ms,
		       uint32_t tau_ms);

/* ---- ranges ---- */

struct kvt_heat_range {
	uint64_t base, size;
	uint32_t first;         /* its first chunk in the arena */
	uint32_t nr_chunks;     /* chunks of this range */
	uint32_t cap_chunks;    /* chunks the slot owns in the arena (>= nr_chunks) */
	uint32_t cursor;        /* round-robin sampling position */
	uint32_t gen;           /* bumped on every track/untrack of the slot */
	int32_t node;           /* far NUMA node demotions go to (-1: host) */
	int32_t dev;            /* the CUdevice it was placed for: promotions go there */
	int live;
};

/* Map the arena (MAP_NORESERVE; idempotent). tau_ms: decay constant. 0 or -errno. */
int kvt_heat_init(uint32_t tau_ms);
uint32_t kvt_heat_tau_ms(void);
/* Track [base, base+size), placed for device dev (promotions go there,
 * demotions to node), with every chunk in `tier`; 0, -ENOSPC (too many
 * ranges or chunks), -EEXIST. */
int kvt_heat_track(uint64_t base, uint64_t size, uint8_t tier, int32_t node, int32_t dev);
/* Stop tracking the range starting at base; 0 or -ENOENT. Waits while the
 * migrator has the range pinned (one prefetch call), so that the caller may
 * free the memory as soon as this returns. */
int kvt_heat_untrack(uint64_t base);
/* Every chunk of the range starting at base is now believed on `tier`
 * (placement re-homed it: a provisional managed:hbm range confirmed as KV
 * keeps its touched pages in HBM). 0, or -ENOENT. */
int kvt_heat_set_tier(uint64_t base, uint8_t tier);
/* The driver migrated the chunk holding addr to HBM on a GPU fault
 * (KVTIER_ADMIT=fault or auto): believed in HBM from now, in the working
 * set, and treated as just moved (the planner's minimum residence applies);
 * back less than tau after it came in last, and evicted by the driver in
 * between: one more KVT_HEAT_F_REFAULTS. */
void kvt_heat_fault_in(uint64_t addr);
/* Chunks kvt_heat_fault_in() has moved to HBM since the start, and those of
 * them that had moved (been demoted) less than tau before: thrashing. */
uint64_t kvt_heat_fault_ins(void);
/* A come-back of a chunk the driver evicted is a strike when at least
 * `chunks` far chunks faulted in since this one last did: the HBM's fault
 * traffic, not a few stray faults (a hot chunk the driver's FIFO pushed out
 * under light traffic comes back after a handful). The migrator sets it
 * each epoch to 1/8 of its HBM budget in chunks; 0 (before the first epoch),
 * or a chunk out for over 64 tau, falls back to "within tau of wall time". */
void kvt_heat_set_refault_window(uint32_t chunks);
/* The driver evicted the chunk holding addr from HBM (CUPTI's eviction
 * records): believed far from now. */
void kvt_heat_evicted(uint64_t addr);
/* The driver moved [addr, addr + bytes) out of HBM for a prefetch (CUPTI's
 * device-to-host records of cause PREFETCH): the KVT_HEAT_PAGE-sized pages
 * of each tracked chunk it covers are noted, for kvt_heat_take_out. Atomics
 * only (the CUPTI buffer callback). */
#define KVT_HEAT_PAGE_SHIFT 16
void kvt_heat_prefetched_out(uint64_t addr, uint64_t bytes);
/* The pages of chunk c noted by kvt_heat_prefetched_out since the last
 * call, bit p for page p (cleared); 0 for a chunk outside the arena. */
uint32_t kvt_heat_take_out(const struct kvt_heat_chunk *c);
/* The driver moved [addr, addr + bytes) into HBM for a prefetch: each
 * tracked chunk it touches gets KVT_HEAT_F_IN_SEEN, and KVT_HEAT_F_IN_WHOLE
 * when it covers the whole chunk. Atomics only (the CUPTI callback). */
void kvt_heat_prefetched_in(uint64_t addr, uint64_t bytes);
/* Chunk c's KVT_HEAT_F_IN_* flags, cleared. */
uint8_t kvt_heat_take_in(struct kvt_heat_chunk *c);
uint64_t kvt_heat_refaults(void);
/* Fault-ins of chunks the driver had evicted (CUPTI's eviction records):
 * HBM was full for the driver and it took a chunk still in use. */
uint64_t kvt_heat_evicted_backs(void);
/* Migrator: pin slot's range while it prefetches, if it is still the range
 * of generation gen (0), else -ENOENT (freed meanwhile). One pin at a time. */
int kvt_heat_pin(int slot, uint32_t gen);
void kvt_heat_unpin(void);
/* Forget everything (fork child). */
void kvt_heat_reset(void);

/* The slot of the range holding addr, or -1 (lock-free; may miss during a
 * concurrent track/untrack). */
int kvt_heat_find(uint64_t addr);
/* The device the range holding addr was placed for, or -1 (lock-free;
 * as kvt_heat_find). */
int32_t kvt_heat_dev_at(uint64_t addr);
/* Quick reject: is addr anywhere in [lowest base, highest end)? */
int kvt_heat_maybe(uint64_t addr);
/* Evidence: [addr, addr+len) was used; weight w per chunk, at most
 * max_chunks chunks (from the first). Returns chunks touched. */
unsigned kvt_heat_add(uint64_t addr, uint64_t len, float w, unsigned max_chunks);
/* Allocation-level evidence: nr chunks of slot's range, round-robin. */
unsigned kvt_heat_spread(int slot, unsigned nr, float w);

/* Migrator side: a copy of slot i (0..KVT_HEAT_MAX_RANGES-1); 0 when live. */
int kvt_heat_range_get(int slot, struct kvt_heat_range *out);
struct kvt_heat_chunk *kvt_heat_chunks(const struct kvt_heat_range *r);
/* The same without the mutex, for hooks: the fields a live slot's track
 * wrote before it went live (the cursor is left 0). 0, or -ENOENT. */
int kvt_heat_range_peek(int slot, struct kvt_heat_range *out);
/* The chunk of slot's range holding addr (NULL if none). */
struct kvt_heat_chunk *kvt_heat_chunk_at(uint64_t addr);

/* Milliseconds on the profiler's clock (CLOCK_MONOTONIC, wraps in 49 days;
 * every difference is taken modulo 2^32). Never 0. */
uint32_t kvt_heat_now_ms(void);

/* No range is tracked (nothing any evidence could credit). */
int kvt_heat_empty(void);

/* The chunk was touched: note it for the migrator's next collect (touches
 * through this API do it themselves; for chunks outside the arena, nothing). */
void kvt_heat_mark(const struct kvt_heat_chunk *c);

/* ---- the migrator's epoch ---- */

/* The heat below which a far chunk cannot matter to a plan (the promote
 * threshold: colder far chunks are never chosen). Touches of far chunks
 * that stay below it do not mark them; kvt_heat_collect leaves them out.
 * Default 0: every touch marks, every chunk is collected. */
void kvt_heat_set_keep(float keep);

/* The chunks one plan needs, without a pass over idle memory: every chunk
 * believed in HBM and every far chunk at least `keep` hot, so that the plan
 * over this subset equals the plan over the whole table. A working-set
 * bitmap holds them across epochs; chunks marked since the last call join
 * it, far ones that cooled below `keep` leave it until a touch brings them
 * back above. Cost: one word per 64 tracked chunks plus the working set.
 * keep <= 0 reads every chunk.
 *
 * Fills t[0..n) in range-slot then address order (KVT_PLAN_F_GAP where an
 * entry does not follow the previous one in memory; `tag`: the chunk's
 * index inside its range), and ranges[KVT_HEAT_MAX_RANGES] with copies of
 * the range slots (live = 0 where none). dev >= 0: only the ranges placed
 * for that device (the others' marks wait for their own device's call);
 * dev < 0: every range. Returns n (<= cap; with cap >=
 * KVT_HEAT_MAX_CHUNKS nothing is ever left out). One caller at a time.
 * A touch racing a demotion may go unmarked (it saw the chunk in HBM); the
 * chunk rejoins at its next touch. */
uint32_t kvt_heat_collect(struct kvt_plan_chunk *t, uint32_t cap, uint32_t now_ms,
			  struct kvt_heat_range *ranges, int32_t dev);

/* The devices the tracked ranges were placed for, each once, ascending:
 * up to cap of them in out[]; returns how many there are (may be > cap). */
unsigned kvt_heat_devices(int32_t *out, unsigned cap);

/* Chunks now in HBM and on the far tier, over every tracked range (a walk
 * of all chunks: for counters, not for every epoch). */
void kvt_heat_count_tiers(uint64_t *hbm, uint64_t *far);

#endif
