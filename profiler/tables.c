// SPDX-License-Identifier: MIT
/* The block-table source: contract and limits in tables.h. Hook side
 * (on_copy, kvt_tables_on_launch, on_fault): atomics only, no malloc, no
 * locks; the stamp arrays are mapped on first use with the raw mmap. The
 * learner and the credit run in poll, on the migrator thread, over
 * scratch mapped once in start. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "decode.h"
#include "evidence.h"
#include "heat.h"
#include "tables.h"
#include "tables_choose.h"
#include "../base/kvt.h"

#define MAX_CAND       KVT_TCAND_MAX
#define CAND_PER_POLL  16
#define MAX_BASES      64
#define MAX_LIVE       (1u << 16)      /* live ids looked at per table and epoch */
#define MAX_MARKS      (1u << 16)      /* chunks credited per epoch */
#define FAULT_RING     1024
#define PAIR_STALE     40              /* epochs a (base, table) pair stays in use */
#define IDLE_UNWANTED  20              /* epochs before an unpaired slot may be reused */
#define IDLE_WANTED    1000
#define STAMP_MS       4               /* a stamp counts these milliseconds (wraps in 262 s) */
#define STAMP_OLD      4096            /* stamps older than this (16 s) are cleared: no wrap */
#define CREDIT_W       2.0f            /* heat per epoch of a chunk in use (KVTIER_PROMOTE: 4) */
#define RECHECK_FAULTS 64              /* a window of this many faults rechecks a layout */
#define LENS_AFTER     1               /* a step copies the table, then its lengths */
#define LENS_BEFORE    2               /* the lengths, then the table */
#define OFFSETS_COPIES 4               /* copies that judge a table offsets */
#define DUEL_FAULTS    64              /* faults a duel of near strides is judged on */
#define DUEL_POLLS     24              /* polls it waits for them at most */

struct tslot {
	uint64_t dst;                   /* atomic: the table's device address, 0 = free */
	uint32_t wanted;                /* atomic: a launch paired it with a tracked base */
	uint32_t maxid;                 /* atomic: largest id stamped */
	uint32_t last_tick;             /* atomic: tick of its last copy */
	uint32_t gen;                   /* atomic: bumped when the slot changes hands */
	uint64_t scal[KVT_TABLE_SCALARS];  /* atomic: key << 32 | value (0 = it varies) */
	uint16_t *stamp;                /* atomic: KVT_TABLE_IDS stamps, mapped at first want */
	int32_t *raw;                   /* atomic: its last copy's bytes (process_vm_readv) */
	uint32_t raw_bytes, raw_gen;    /* atomic: their size, copies read */
	uint32_t stamped_gen;           /* atomic: the copy a launch stamped trimmed */
	uint32_t trusted;               /* atomic: a layout is accepted (rows are trimmed then) */
	uint64_t trim;                  /* atomic: lengths slot + 1 | row entries << 8 |
					 * tokens per block << 40; 0 = stamp whole rows */
	uint64_t stride_pub;            /* atomic: the accepted stride, for the hook side */
	uint32_t untrimmed;             /* atomic: trusted, and no lengths table beside it */
	uint32_t step_tgen, step_lgen;  /* atomic: the copies (its own, its lengths') last
					 * handed to a step (kvt_tables_step_take) */
	uint64_t copied_at;             /* atomic: copy_clock at its last copy read */
	uint32_t lens_last;             /* atomic: of a trimmed table, which of the pair a step
					 * copies last: LENS_AFTER, LENS_BEFORE, 0 = not seen yet */
	uint32_t lens_of;               /* atomic: another table's lengths (its trim names
					 * this slot): its values are not block ids */
	uint32_t offsets;               /* atomic: every copy read so far was 0, then never
					 * decreasing (cu_seqlens_q, query_start_loc): offsets,
					 * not ids, once OFFSETS_COPIES copies say so */
	/* migrator only */
	uint32_t seen_gen;
	unsigned nc, turn;
	struct kvt_tcand c[MAX_CAND];
	uint64_t stride;                /* accepted, 0 = none */
	double wn, wk;                  /* the recheck window of the accepted stride */
	unsigned against;               /* windows in a row that explained too few */
	uint64_t prev;                  /* the stride dropped last (preferred by a re-learn) */
	int duel[KVT_DUEL_MAX];         /* candidates judged on the same faults (nduel > 1) */
	unsigned nduel, duel_polls;
	double duel_n, duel_k[KVT_DUEL_MAX], duel_z;
};

struct pair {
	uint64_t key;                   /* atomic: base | (table + 1) << 56; 0 = free */
	uint32_t tick, gen;             /* atomic */
};

static struct tslot slots[KVT_TABLE_SLOTS];
static struct pair pairs[KVT_TABLE_ASSOC];
static uint64_t key_lo = UINT64_MAX, key_hi;   /* atomic: bounds of the slots' keys */
static uint32_t tick = 1;                      /* atomic: epochs polled */
static uint64_t copy_clock;                    /* atomic: table copies read */
static uint64_t faults[FAULT_RING], fault_at;  /* atomic */
static uint64_t covered[KVT_HEAT_MAX_RANGES / 64];  /* atomic */
static struct {
	uint64_t copies_read, pairs, accepted, dropped, credited, stride, trimmed;
	uint64_t windows_against, relearned, shared, duels, declared;
} st;                                          /* atomic */

/* scratch (migrator thread) */
static uint64_t *bits;                         /* one bit per arena chunk */
static uint32_t *marks;                        /* arena indices set in bits */
static uint32_t *live;                         /* ids live this epoch */
static uint64_t *mark_addr;                    /* the address of each mark's chunk */
static uint64_t fault_seen;
static __thread uint32_t step_mask;            /* tables this thread's copies made ready */

#define LD(x)     __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define ST(x, v)  __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

static uint32_t now_tick(void)
{
	return __atomic_load_n(&tick, __ATOMIC_RELAXED);
}

/* The stamp of now: the profiler's clock in STAMP_MS units, never 0. */
static uint16_t stamp_now(void)
{
	uint16_t s = (uint16_t)(kvt_heat_now_ms() / STAMP_MS);
	return s ? s : 1;
}

/* ---- the hook side ---- */

static void widen_keys(uint64_t dst)
{
	uint64_t lo = LD(key_lo), hi = LD(key_hi);
	while (dst < lo && !__atomic_compare_exchange_n(&key_lo, &lo, dst, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE))
		;
	while (dst > hi && !__atomic_compare_exchange_n(&key_hi, &hi, dst, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE))
		;
}

static int find_slot(uint64_t dst)
{
	if (dst < LD(key_lo) || dst > LD(key_hi))
		return -1;
	for (int i = 0; i < KVT_TABLE_SLOTS; i++)
		if (LD(slots[i].dst) == dst)
			return i;
	return -1;
}

static int take(struct tslot *t, uint64_t old, uint64_t dst)
{
	if (!__atomic_compare_exchange_n(&t->dst, &old, dst, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return 0;
	ST(t->wanted, 0);
	ST(t->maxid, 0);
	ST(t->raw_bytes, 0);
	ST(t->trim, 0);
	ST(t->trusted, 0);
	ST(t->stride_pub, 0);
	ST(t->untrimmed, 0);
	ST(t->copied_at, 0);
	ST(t->lens_last, 0);
	ST(t->lens_of, 0);
	ST(t->offsets, 1);
	for (unsigned k = 0; k < KVT_TABLE_SCALARS; k++)
		ST(t->scal[k], 0);
	ADD(t->gen, 1);
	widen_keys(dst);
	return 1;
}

/* The slot for a copy to dst: its own, a free one, or one idle long
 * enough; -1 when none. */
static int claim_slot(uint64_t dst)
{
	int i = find_slot(dst);
	if (i >= 0)
		return i;
	for (i = 0; i < KVT_TABLE_SLOTS; i++)
		if (!LD(slots[i].dst) && take(&slots[i], 0, dst))
			return i;
	uint32_t now = now_tick();
	for (i = 0; i < KVT_TABLE_SLOTS; i++) {
		struct tslot *t = &slots[i];
		uint64_t old = LD(t->dst);
		uint32_t idle = now - LD(t->last_tick);
		if (old && idle > (LD(t->wanted) ? IDLE_WANTED : IDLE_UNWANTED) && take(t, old, dst))
			return i;
	}
	return -1;
}

/* *where, mapped at first use (len bytes, MAP_NORESERVE); NULL if it cannot be. */
static void *lazy_map(void **where, size_t len)
{
	void *s = __atomic_load_n(where, __ATOMIC_ACQUIRE);
	if (s)
		return s;
	void *p = kvt_sys_map_own(len, MAP_NORESERVE);
	if (p == MAP_FAILED)
		return NULL;
	void *none = NULL;
	if (!__atomic_compare_exchange_n(where, &none, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		kvt_sys_munmap(p, len);
		return none;
	}
	return p;
}

static uint16_t *stamps(struct tslot *t)
{
	return lazy_map((void **)&t->stamp, (size_t)KVT_TABLE_IDS * sizeof(uint16_t));
}

/* Entries of row r that are live by its length: len / bt + 1 >=
 * ceil(len / bt), so the block a step's new token goes to is kept whether
 * the length counts it (vLLM) or not. */
static uint32_t row_keep(const int32_t *lens, uint32_t nlens, uint32_t r, uint32_t bt)
{
	int32_t len = r < nlens ? __atomic_load_n(&lens[r], __ATOMIC_RELAXED) : 0;
	return len >= 0 ? (uint32_t)len / bt + 1 : 0;
}

/* Stamp the ids of e[0..n): all of them, or (row entries R > 0) in row r
 * only the first lens[r] / bt + 1. */
static void stamp_ids(struct tslot *t, uint16_t *s, const int32_t *e, uint32_t n, uint32_t R,
		      const int32_t *lens, uint32_t nlens, uint32_t bt)
{
	uint16_t mark = stamp_now();
	uint32_t max = 0, keep = n;
	int32_t prev = -1;
	for (uint32_t k = 0; k < n; k++) {
		if (R && k % R == 0)               /* a new row: how much of it is live */
			keep = row_keep(lens, nlens, k / R, bt);
		if (R && k % R >= keep)
			continue;
		int32_t v = __atomic_load_n(&e[k], __ATOMIC_RELAXED);
		if (v == prev || v < 0 || (uint32_t)v >= KVT_TABLE_IDS)
			continue;
		prev = v;
		if (__atomic_load_n(&s[v], __ATOMIC_RELAXED) != mark)
			__atomic_store_n(&s[v], mark, __ATOMIC_RELAXED);
		if ((uint32_t)v > max)
			max = (uint32_t)v;
	}
	uint32_t m = LD(t->maxid);
	while (max > m && !__atomic_compare_exchange_n(&t->maxid, &m, max, 0, __ATOMIC_ACQ_REL,
						       __ATOMIC_ACQUIRE))
		;
}

/* Stamp t's last copy (raw, n entries) row by row, by trim's lengths
 * table; 0 when that table has no copy kept. */
static int stamp_by_trim(struct tslot *t, uint16_t *s, const int32_t *raw, uint32_t n,
			 uint64_t trim)
{
	const struct tslot *L = &slots[(trim & 0xff) - 1];
	const int32_t *lens = LD(L->raw);
	if (!lens)
		return 0;
	stamp_ids(t, s, raw, n, (uint32_t)(trim >> 8 & 0xffffffff), lens, LD(L->raw_bytes) / 4,
		  (uint32_t)(trim >> 40));
	return 1;
}

/* Slot i was just copied: every trusted table whose step is now complete
 * (its own copy and its lengths' both newer than the ones last handed to
 * a step) is handed to this thread's next kvt_tables_step_take. A table
 * without a lengths table is complete at its own copy; one with, at the
 * copy of whichever of the two its steps copy last, once a launch has
 * shown which (kvt_tables_on_launch). Newer alone is not enough: a step
 * handed at the table's copy with the lengths of the step before stays in
 * that phase, each table trimmed by the last step's lengths (serve-like's
 * prefill rows: their new blocks past the old length never named, and
 * faulted in). */
static void step_ready(int i)
{
	for (int T = 0; T < KVT_TABLE_SLOTS; T++) {
		struct tslot *t = &slots[T];
		if (!LD(t->stride_pub))
			continue;
		uint64_t trim = LD(t->trim);
		int L = trim ? (int)(trim & 0xff) - 1 : -1;
		if (i != T && i != L)
			continue;
		if (L < 0 && !LD(t->untrimmed))
			continue;                  /* its lengths are not known yet */
		uint32_t order = L >= 0 ? LD(t->lens_last) : 0;
		if ((order == LENS_AFTER && i != L) || (order == LENS_BEFORE && i != T))
			continue;                  /* its step's other copy is still to come */
		uint32_t tg = LD(t->raw_gen), lg = L >= 0 ? LD(slots[L].raw_gen) : 0;
		uint32_t was = LD(t->step_tgen);
		if (tg == was || (L >= 0 && lg == LD(t->step_lgen)))
			continue;
		if (!__atomic_compare_exchange_n(&t->step_tgen, &was, tg, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;                  /* another thread took it */
		ST(t->step_lgen, lg);
		step_mask |= 1u << T;
	}
}

/* Whether n int32 start at 0 and never decrease: the shape of a batch's
 * offsets (cumulative token counts), which a block table's rows keep only
 * by chance, and not for long. */
static int offsets_like(const int32_t *v, uint32_t n)
{
	if (n < 2 || v[0] != 0)
		return 0;
	for (uint32_t i = 1; i < n; i++)
		if (v[i] < v[i - 1])
			return 0;
	return 1;
}

/* A table of bytes copied into application device memory at dst: from
 * host memory at src (read through process_vm_readv), or from kvtier's own
 * ids (own: a server decoder's rebuilt table, copied as is). */
static void take_table(uint64_t dst, uint64_t src, const int32_t *own, uint64_t bytes)
{
	if (bytes < 4 || bytes > KVT_TABLE_MAX_BYTES || (bytes & 3) || kvt_heat_empty())
		return;
	if (kvt_prof_device_memory(dst) != 1)
		return;
	int i = claim_slot(dst);
	if (i < 0)
		return;
	struct tslot *t = &slots[i];
	uint32_t now = now_tick();
	if (LD(t->last_tick) != now)
		ST(t->last_tick, now);
	uint16_t *s;
	int32_t *raw;
	if (!LD(t->wanted) || !(s = stamps(t)) ||
	    !(raw = lazy_map((void **)&t->raw, KVT_TABLE_MAX_BYTES)))
		return;
	/* the bytes are kept: a launch naming the lengths beside it stamps
	 * only the live part of each row (kvt_tables_on_launch) */
	size_t got;
	if (own) {
		memcpy(raw, own, (size_t)bytes);
		got = (size_t)bytes;
	} else if (!(got = kvt_prof_read_self(raw, src, (size_t)bytes) & ~(size_t)3)) {
		return;                            /* unreadable: nothing learned */
	}
	ST(t->raw_bytes, (uint32_t)got);
	if (LD(t->offsets) && !offsets_like(raw, (uint32_t)(got / 4)))
		ST(t->offsets, 0);
	ADD(t->raw_gen, 1);
	ST(t->copied_at, __atomic_add_fetch(&copy_clock, 1, __ATOMIC_ACQ_REL));
	ADD(st.copies_read, 1);
	/* trimmed by the lengths last copied (the step's own may come after;
	 * the launch stamps again with those) */
	uint64_t trim = LD(t->trusted) ? LD(t->trim) : 0;
	if (!trim || !stamp_by_trim(t, s, raw, (uint32_t)(got / 4), trim))
		stamp_ids(t, s, raw, (uint32_t)(got / 4), 0, NULL, 0, 1);
	step_ready(i);
}

/* A host-to-device copy into application device memory from host memory
 * that is not tracked: a candidate table. */
static void tables_on_copy(uint64_t dst, uint64_t src, uint64_t bytes)
{
	if (bytes < 4 || bytes > KVT_TABLE_MAX_BYTES || kvt_heat_empty() ||
	    kvt_prof_device_memory(src) != 0 || (kvt_heat_maybe(src) && kvt_heat_find(src) >= 0))
		return;
	take_table(dst, src, NULL, bytes);
}

void kvt_tables_feed(uint64_t dst, const int32_t *ids, uint32_t bytes)
{
	if (kvt_prof_sources_enabled() & (1u << KVT_SRC_TABLES))
		take_table(dst, 0, ids, bytes);
}

static void note_scalars(struct tslot *t, uint64_t func, const uint64_t *scal, unsigned nscal)
{
	uint32_t fh = (uint32_t)((func * 0x9e3779b97f4a7c15ull) >> 40) & 0xffffffu;
	for (unsigned j = 0; j < nscal; j++) {
		uint64_t key = (uint64_t)(fh << 8 | (uint32_t)(scal[j] >> 32 & 0xff)) << 32;
		uint32_t v = (uint32_t)scal[j];
		for (unsigned k = 0; k < KVT_TABLE_SCALARS; k++) {
			uint64_t e = LD(t->scal[k]);
			if (!e && __atomic_compare_exchange_n(&t->scal[k], &e, key | v, 0,
							       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				break;
			if ((e & ~0xffffffffull) != key)
				continue;
			if ((uint32_t)e && (uint32_t)e != v)    /* it varies between launches */
				__atomic_compare_exchange_n(&t->scal[k], &e, key, 0, __ATOMIC_ACQ_REL,
							    __ATOMIC_ACQUIRE);
			break;
		}
	}
}

static void note_pair(uint64_t base, int table)
{
	uint64_t key = base | (uint64_t)(table + 1) << 56;
	uint32_t now = now_tick(), gen = LD(slots[table].gen);
	uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 40) & (KVT_TABLE_ASSOC - 1);
	for (unsigned p = 0; p < 8; p++) {
		struct pair *e = &pairs[(h + p) & (KVT_TABLE_ASSOC - 1)];
		uint64_t k = LD(e->key);
		if (!k) {
			if (!__atomic_compare_exchange_n(&e->key, &k, key, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE) && k != key)
				continue;
			if (k != key)
				ADD(st.pairs, 1);
			k = key;
		}
		if (k != key)
			continue;
		if (LD(e->tick) != now)
			ST(e->tick, now);
		if (LD(e->gen) != gen)
			ST(e->gen, gen);
		return;
	}
}

/* Table T's rows, trimmed by a lengths table among the launch's others:
 * one copy of n_rows int32 beside T's n_rows x R, R one of the launch's
 * scalars, and bt (tokens per block) its smallest power-of-two scalar that
 * keeps every row's ceil(len / bt) within R. Of several, the one that keeps
 * the most entries live (a starts table passes the same tests as the
 * lengths, with smaller values). 0: none. */
static uint64_t find_trim(int T, const int *tab, unsigned nt, const uint64_t *scal, unsigned nscal)
{
	uint32_t tb = LD(slots[T].raw_bytes), best_keep = 0;
	uint64_t best = 0;
	for (unsigned j = 0; j < nt; j++) {
		struct tslot *L = &slots[tab[j]];
		int32_t *lens = LD(L->raw);
		uint32_t lb = LD(L->raw_bytes);
		if (tab[j] == T || !lens || !lb || tb % lb || tb / lb < 2)
			continue;
		uint32_t R = tb / lb, rows = lb / 4, is_scalar = 0;
		for (unsigned k = 0; k < nscal; k++)
			is_scalar |= (uint32_t)scal[k] == R;
		if (!is_scalar)
			continue;
		int32_t maxlen = 0;
		for (uint32_t r = 0; r < rows; r++) {
			int32_t v = __atomic_load_n(&lens[r], __ATOMIC_RELAXED);
			maxlen = v > maxlen ? v : maxlen;
		}
		uint32_t bt = 0;
		for (unsigned k = 0; k < nscal; k++) {
			uint32_t b = (uint32_t)scal[k];
			if (b && b <= 1024 && !(b & (b - 1)) && (uint64_t)R * b >= (uint64_t)maxlen &&
			    (!bt || b < bt))
				bt = b;
		}
		if (!bt)
			continue;
		uint32_t keep = 0;
		for (uint32_t r = 0; r < rows; r++) {
			int32_t v = __atomic_load_n(&lens[r], __ATOMIC_RELAXED);
			keep += v > 0 ? ((uint32_t)v + bt - 1) / bt : 0;
		}
		if (keep > best_keep)
			best_keep = keep, best = (uint64_t)(tab[j] + 1) | (uint64_t)R << 8 | (uint64_t)bt << 40;
	}
	return best;
}

/* A trimmed table's copy not stamped yet: stamp its live entries. */
static void stamp_trimmed(int T, const int *tab, unsigned nt, const uint64_t *scal, unsigned nscal)
{
	struct tslot *t = &slots[T];
	uint64_t trim = LD(t->trim);
	if (!trim) {
		trim = find_trim(T, tab, nt, scal, nscal);
		if (!trim)
			return;
		ST(t->trim, trim);
	}
	/* the lengths, and per-sequence metadata of the same batch beside them
	 * (n or n + 1 int32: FlashAttention's cu_seqlens_q), are not ids */
	uint32_t lb = LD(slots[(trim & 0xff) - 1].raw_bytes);
	for (unsigned j = 0; j < nt; j++) {
		uint32_t b = LD(slots[tab[j]].raw_bytes);
		if (tab[j] != T && lb && (b == lb || b == lb + 4) && !LD(slots[tab[j]].lens_of))
			ST(slots[tab[j]].lens_of, 1);
	}
	uint32_t gen = LD(t->raw_gen), was = LD(t->stamped_gen);
	if (gen == was || !__atomic_compare_exchange_n(&t->stamped_gen, &was, gen, 0,
						       __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	int32_t *raw = LD(t->raw);
	uint16_t *s = LD(t->stamp);
	if (raw && s && stamp_by_trim(t, s, raw, LD(t->raw_bytes) / 4, trim))
		ADD(st.trimmed, 1);
}

/* A launch that uses table t and its lengths L: which of the two this
 * step copied last (each copy's read is stamped by copy_clock). */
static void note_order(struct tslot *t, const struct tslot *L)
{
	uint64_t ta = LD(t->copied_at), la = LD(L->copied_at);
	uint32_t order = la > ta ? LENS_AFTER : LENS_BEFORE;
	if (ta && la && LD(t->lens_last) != order)
		ST(t->lens_last, order);
}

void kvt_tables_on_launch(uint64_t func, const uint64_t *val, const int *slot, unsigned nr,
			  const uint64_t *scal, unsigned nscal)
{
	int tab[4];
	unsigned nt = 0;
	for (unsigned i = 0; i < nr && nt < 4; i++) {
		int t = slot[i] < 0 ? find_slot(val[i]) : -1;
		if (t >= 0)
			tab[nt++] = t;
	}
	for (unsigned j = 0; j < nt; j++) {
		struct tslot *t = &slots[tab[j]];
		if (!LD(t->wanted))
			ST(t->wanted, 1);
		note_scalars(t, func, scal, nscal);
		for (unsigned i = 0; i < nr; i++)
			if (slot[i] >= 0 && val[i] < (1ull << 56))
				note_pair(val[i], tab[j]);
	}
	for (unsigned j = 0; j < nt; j++) {
		struct tslot *t = &slots[tab[j]];
		if (!LD(t->trusted))
			continue;
		if (nt > 1)
			stamp_trimmed(tab[j], tab, nt, scal, nscal);
		uint64_t trim = LD(t->trim);
		if (!trim && !LD(t->untrimmed))
			ST(t->untrimmed, 1);       /* stepped whole, at its own copy */
		if (trim)
			note_order(t, &slots[(trim & 0xff) - 1]);
	}
}

void kvt_tables_pair(const uint64_t *tab, unsigned ntab, const uint64_t *val,
		     const uint16_t *with, unsigned nr)
{
	for (unsigned j = 0; j < ntab && j < 8 * sizeof *with; j++) {
		int t = find_slot(__atomic_load_n(&tab[j], __ATOMIC_RELAXED));
		if (t < 0)
			continue;                    /* not a table: its tensors are not read */
		if (!LD(slots[t].wanted))
			ST(slots[t].wanted, 1);
		for (unsigned i = 0; i < nr; i++) {
			uint64_t v = __atomic_load_n(&val[i], __ATOMIC_RELAXED);
			if (__atomic_load_n(&with[i], __ATOMIC_RELAXED) >> j & 1 && v < (1ull << 56))
				note_pair(v, t);
		}
	}
}

int kvt_tables_covers(int slot)
{
	if (slot < 0 || slot >= KVT_HEAT_MAX_RANGES)
		return 0;
	return (int)(__atomic_load_n(&covered[slot / 64], __ATOMIC_RELAXED) >> (slot % 64) & 1);
}

static void tables_on_fault(uint64_t addr)
{
	uint64_t at = __atomic_fetch_add(&fault_at, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&faults[at % FAULT_RING], addr, __ATOMIC_RELAXED);
}

/* ---- the migrator side ---- */

struct base { uint64_t p; int hs; struct kvt_heat_range r; };

static int tables_start(void)
{
	size_t len = KVT_HEAT_MAX_CHUNKS / 8 + (size_t)(MAX_MARKS + MAX_LIVE) * 4 +
		     (size_t)MAX_MARKS * 8;
	void *p = kvt_sys_map_own(len, MAP_NORESERVE);
	if (p == MAP_FAILED) {
		kvt_prof_set_state(KVT_SRC_TABLES, "off: no memory for its scratch");
		return -ENOMEM;
	}
	bits = p;
	marks = (uint32_t *)((char *)p + KVT_HEAT_MAX_CHUNKS / 8);
	live = marks + MAX_MARKS;
	mark_addr = (uint64_t *)(live + MAX_LIVE);
	return 0;
}

static int test_set(uint32_t idx)
{
	uint64_t m = 1ull << (idx % 64);
	if (bits[idx / 64] & m)
		return 0;
	bits[idx / 64] |= m;
	return 1;
}

static void clear_marks(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		bits[marks[i] / 64] &= ~(1ull << (marks[i] % 64));
}

/* Mark the chunks stride s predicts from ids live[0..nl) on bases b[0..nb),
 * from marks[*nm]; returns 0, or -1 when the marks ran out. */
static int predict(const struct base *b, unsigned nb, unsigned nl, uint64_t s, unsigned *nm)
{
	for (unsigned j = 0; j < nb; j++) {
		uint64_t off0 = b[j].p - b[j].r.base;
		for (unsigned i = 0; i < nl; i++) {
			uint64_t a = off0 + (uint64_t)live[i] * s;
			if (a >= b[j].r.size)
				break;                     /* ids ascend */
			uint64_t z = a + s - 1 < b[j].r.size ? a + s - 1 : b[j].r.size - 1;
			for (uint64_t c = a >> KVT_CHUNK_SHIFT; c <= z >> KVT_CHUNK_SHIFT; c++) {
				uint32_t idx = b[j].r.first + (uint32_t)c;
				if (!test_set(idx))
					continue;
				if (*nm >= MAX_MARKS) {
					bits[idx / 64] &= ~(1ull << (idx % 64));
					return -1;
				}
				mark_addr[*nm] = b[j].r.base + (c << KVT_CHUNK_SHIFT);
				marks[(*nm)++] = idx;
			}
		}
	}
	return 0;
}

/* The arena index of fault f if it lies in one of the bases' ranges. */
static int fault_index(const struct base *b, unsigned nb, uint64_t f, uint32_t *idx)
{
	for (unsigned j = 0; j < nb; j++)
		if (f - b[j].r.base < b[j].r.size) {
			*idx = b[j].r.first + (uint32_t)((f - b[j].r.base) >> KVT_CHUNK_SHIFT);
			return 1;
		}
	return 0;
}

/* Candidates from the table's scalars, kept while they stay the same. */
static void candidates(struct tslot *t)
{
	uint32_t v[KVT_TABLE_SCALARS];
	unsigned n = 0;
	for (unsigned k = 0; k < KVT_TABLE_SCALARS; k++) {
		uint32_t x = (uint32_t)LD(t->scal[k]);
		if (x >= 2)
			v[n++] = x;
	}
	kvt_tcand_from_scalars(t->c, &t->nc, MAX_CAND, v, n);
}

static void reset_learner(struct tslot *t)
{
	t->nc = t->turn = 0;
	t->stride = 0;
	ST(t->stride_pub, 0);
	ST(t->untrimmed, 0);
	ST(t->trusted, 0);
	ST(t->trim, 0);                    /* a wrong trim would hide live ids: found again */
	ST(t->lens_last, 0);
	t->wn = t->wk = 0;
	t->against = 0;
	t->nduel = 0;
}

/* The live ids of t, ascending (at most MAX_LIVE, evenly thinned); stale
 * stamps are cleared on the way. */
static unsigned live_ids(struct tslot *t)
{
	uint16_t *s = LD(t->stamp);
	uint32_t max = LD(t->maxid);
	if (!s)
		return 0;
	uint16_t cur = stamp_now();
	unsigned n = 0, seen = 0, every = 1;
	for (uint32_t i = 0; i <= max && i < KVT_TABLE_IDS; i++) {
		uint16_t v = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
		if (!v)
			continue;
		uint16_t age = (uint16_t)(cur - v);
		if (age > STAMP_OLD) {
			__atomic_compare_exchange_n(&s[i], &v, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
			continue;
		}
		if (age > KVT_TABLE_LIVE_MS / STAMP_MS || seen++ % every)
			continue;
		if (n == MAX_LIVE) {               /* thin: keep every other one */
			unsigned w = 0;
			for (unsigned k = 0; k < n; k += 2)
				live[w++] = live[k];
			n = w;
			every *= 2;
		}
		live[n++] = i;
	}
	return n;
}

static unsigned bases_of(int table, uint32_t gen, uint32_t now, struct base *b)
{
	unsigned nb = 0;
	for (unsigned i = 0; i < KVT_TABLE_ASSOC && nb < MAX_BASES; i++) {
		uint64_t k = LD(pairs[i].key);
		if (!k || (int)(k >> 56) != table + 1 || LD(pairs[i].gen) != gen ||
		    now - LD(pairs[i].tick) > PAIR_STALE)
			continue;
		b[nb].p = k & ((1ull << 56) - 1);
		b[nb].hs = kvt_heat_find(b[nb].p);
		if (b[nb].hs >= 0 && !kvt_heat_range_peek(b[nb].hs, &b[nb].r))
			nb++;
	}
	return nb;
}

static uint64_t universe(const struct base *b, unsigned nb)
{
	uint64_t u = 0;
	for (unsigned j = 0; j < nb; j++) {
		int dup = 0;
		for (unsigned i = 0; i < j; i++)
			dup |= b[i].hs == b[j].hs;
		if (!dup)
			u += b[j].r.nr_chunks;
	}
	return u;
}

/* The strides of the other tables with an accepted layout on one of the
 * bases b[0..nb) into out (at most KVT_TABLE_SLOTS); how many. A KV pool
 * has one block stride whichever table indexes it (serve-like's prefill
 * and decode tables; a scheduler's table beside an attention kernel's). */
static unsigned sibling_strides(const struct tslot *t, const struct base *b, unsigned nb,
				uint64_t *out)
{
	struct base o[MAX_BASES];
	unsigned n = 0;
	uint32_t now = now_tick();
	for (int i = 0; i < KVT_TABLE_SLOTS; i++) {
		const struct tslot *u = &slots[i];
		if (u == t || !u->stride)
			continue;
		unsigned no = bases_of(i, LD(u->gen), now, o), shares = 0;
		for (unsigned j = 0; j < no && !shares; j++)
			for (unsigned k = 0; k < nb && !shares; k++)
				shares = o[j].p == b[k].p;
		if (shares)
			out[n++] = u->stride;
	}
	return n;
}

/* How many of the faults fidx[0..nfi) fall in the chunks stride s
 * predicts for the live ids; *cov its chunk coverage of universe u, *full
 * when the prediction ran out of marks. */
static unsigned score_one(const struct base *b, unsigned nb, unsigned nl, uint64_t s,
			  const uint32_t *fidx, unsigned nfi, uint64_t u, double *cov, int *full)
{
	unsigned nm = 0, hit = 0;
	*full = predict(b, nb, nl, s, &nm);
	for (unsigned i = 0; i < nfi; i++)
		hit += (bits[fidx[i] / 64] >> (fidx[i] % 64)) & 1;
	clear_marks(nm);
	*cov = (double)nm / (double)u;
	return hit;
}

/* The block stride server decoders know for every base of b[0..nb) used
 * with table t: the cache-write kernel's own, through a slot mapping
 * computed from t (decode.h); 0 unless they all have it. */
static uint64_t declared(const struct tslot *t, const struct base *b, unsigned nb)
{
	uint64_t s = 0, dst = LD(t->dst);
	for (unsigned j = 0; j < nb; j++) {
		uint64_t d = kvt_decode_kv_stride(b[j].p, dst);
		if (!d || (s && d != s))
			return 0;
		s = d;
	}
	return s;
}

/* The layout a decoder declared for a table whose layout was accepted
 * (learned first, so that its rows' trim is found as for any table): it
 * replaces a learned stride that differs, and is never dropped while it
 * stays declared (recheck). */
static void take_declared(struct tslot *t, uint64_t s)
{
	t->stride = s;
	ST(t->stride_pub, s);
	ST(t->trusted, 1);
	t->wn = t->wk = 0;
	t->nduel = 0;
	t->against = 0;
	ADD(st.declared, 1);
	ST(st.stride, s);
	kvt_debug("tables: a layout declared by a server decoder: stride %llu bytes (table of %u "
		  "bytes at %#llx)", (unsigned long long)s, LD(t->raw_bytes),
		  (unsigned long long)LD(t->dst));
}

static void accept(struct tslot *t, const struct kvt_tcand *best, double z)
{
	t->stride = best->s;
	ST(t->stride_pub, best->s);
	ST(t->trusted, 1);
	t->wn = t->wk = 0;
	t->nduel = 0;
	ADD(st.accepted, 1);
	ST(st.stride, best->s);
	kvt_debug("tables: a layout accepted: stride %llu bytes (%.0f of %.0f faults explained, "
		  "z %.1f, kappa %.2f; table of %u bytes at %#llx)", (unsigned long long)best->s,
		  best->k, best->n, z, kvt_tcand_kappa(best), LD(t->raw_bytes),
		  (unsigned long long)LD(t->dst));
}

/* One poll of a duel (tables_choose.h): its candidates scored on the same
 * faults; decided after DUEL_FAULTS of them, or DUEL_POLLS polls. */
static void duel(struct tslot *t, const struct base *b, unsigned nb, unsigned nl,
		 const uint32_t *fidx, unsigned nfi, uint64_t u)
{
	double k[KVT_DUEL_MAX];
	uint64_t sv[KVT_DUEL_MAX];
	int full = 0;
	for (unsigned j = 0; j < t->nduel && nfi && !full; j++) {
		double cov;
		k[j] = score_one(b, nb, nl, t->c[t->duel[j]].s, fidx, nfi, u, &cov, &full);
		full |= cov > 0.9;
	}
	if (nfi && !full) {                      /* a poll without power does not count */
		t->duel_n += nfi;
		for (unsigned j = 0; j < t->nduel; j++)
			t->duel_k[j] += k[j];
	}
	if (t->duel_n < DUEL_FAULTS && ++t->duel_polls < DUEL_POLLS)
		return;
	for (unsigned j = 0; j < t->nduel; j++)
		sv[j] = t->c[t->duel[j]].s;
	unsigned w = kvt_tcand_duel(sv, t->duel_k, t->nduel, t->duel_n);
	kvt_debug("tables: stride %llu explains %.0f of %.0f faults beside %llu's %.0f (%u strides "
		  "within 1/%d of each other, judged on the same faults): taken",
		  (unsigned long long)sv[w], t->duel_k[w], t->duel_n,
		  (unsigned long long)sv[w ? 0 : 1], t->duel_k[w ? 0 : 1], t->nduel, KVT_TWIN_NEAR);
	ADD(st.duels, 1);
	accept(t, &t->c[t->duel[w]], w ? 0 : t->duel_z);
}

/* Score up to CAND_PER_POLL candidates against this epoch's faults
 * f[0..nf), then choose; a choice with twins is dueled first. */
static void learn(struct tslot *t, const struct base *b, unsigned nb, unsigned nl,
		  const uint64_t *f, unsigned nf)
{
	uint32_t fidx[FAULT_RING];
	unsigned nfi = 0;
	for (unsigned i = 0; i < nf; i++)
		nfi += fault_index(b, nb, f[i], &fidx[nfi]);
	uint64_t u = universe(b, nb);
	if (!u || !t->nc)
		return;
	if (t->nduel > 1) {
		duel(t, b, nb, nl, fidx, nfi, u);
		return;
	}
	if (!nfi)
		return;
	for (unsigned q = 0; q < CAND_PER_POLL && q < t->nc; q++) {
		struct kvt_tcand *c = &t->c[t->turn++ % t->nc];
		double cov;
		int full;
		unsigned hit = score_one(b, nb, nl, c->s, fidx, nfi, u, &cov, &full);
		kvt_tcand_score(c, nfi, hit, cov, full);
	}
	double z = 0;
	uint64_t prefer[KVT_TABLE_SLOTS + 1];
	unsigned ns = sibling_strides(t, b, nb, prefer), np = ns;
	if (t->prev)
		prefer[np++] = t->prev;
	int bi = kvt_tcand_choose(t->c, t->nc, prefer, np, &z);
	if (bi < 0)
		return;
	const struct kvt_tcand *best = &t->c[bi];
	int sib = 0, known = 0;
	for (unsigned p = 0; p < np; p++)
		known |= best->s == prefer[p];
	for (unsigned p = 0; p < ns; p++)
		sib |= best->s == prefer[p];
	if (!known && (t->nduel = kvt_tcand_twins(t->c, t->nc, bi, t->duel)) > 1) {
		t->duel_n = 0;
		t->duel_polls = 0;
		t->duel_z = z;
		memset(t->duel_k, 0, sizeof t->duel_k);
		return;                              /* judged from the next poll */
	}
	if (sib)
		ADD(st.shared, 1);
	else if (t->prev && best->s == t->prev)
		ADD(st.relearned, 1);
	accept(t, best, z);
}

/* The accepted layout, its chunks marked in bits, against this epoch's
 * faults in its ranges: a window explaining less than half drops it. */
static void recheck(struct tslot *t, const struct base *b, unsigned nb, const uint64_t *f,
		    unsigned nf)
{
	uint64_t d = declared(t, b, nb);
	if (d && d != t->stride)
		take_declared(t, d);             /* learned otherwise: the kernel's own wins */
	if (d)
		return;                          /* not a guess: nothing to judge */
	for (unsigned i = 0; i < nf; i++) {
		uint32_t idx;
		if (!fault_index(b, nb, f[i], &idx))
			continue;
		t->wn++;
		t->wk += (bits[idx / 64] >> (idx % 64)) & 1;
	}
	if (t->wn < RECHECK_FAULTS)
		return;
	if (t->wk < 0.5 * t->wn) {
		ADD(st.windows_against, 1);
		if (++t->against < 2) {
			kvt_debug("tables: the layout with stride %llu explains %.0f of %.0f faults: "
				  "one window against it", (unsigned long long)t->stride, t->wk, t->wn);
			t->wn = t->wk = 0;
			return;
		}
		kvt_debug("tables: the layout with stride %llu explains %.0f of %.0f faults, the "
			  "second window in a row: dropped", (unsigned long long)t->stride, t->wk, t->wn);
		uint64_t was = t->stride;
		reset_learner(t);
		t->prev = was;
		ADD(st.dropped, 1);
		return;
	}
	t->wn = t->wk = 0;
	t->against = 0;
}

/* A slot that changed hands starts over. */
static void housekeep(struct tslot *t)
{
	uint32_t gen = LD(t->gen);
	if (gen == t->seen_gen)
		return;
	uint16_t *s = LD(t->stamp);
	if (s)
		kvt_sys_madvise(s, (size_t)KVT_TABLE_IDS * sizeof *s, MADV_DONTNEED);
	reset_learner(t);
	t->prev = 0;
	t->seen_gen = gen;
}

/* Slot i's bases, and its live ids into live[] (*nl), when it is in use;
 * 0 when it is not or has no live id. */
static unsigned prepare(int i, uint32_t now, struct base *b, unsigned *nl)
{
	struct tslot *t = &slots[i];
	*nl = 0;
	if (!LD(t->dst) || !LD(t->wanted))
		return 0;
	if (LD(t->offsets) && LD(t->raw_gen) < OFFSETS_COPIES)
		return 0;                  /* offsets so far: not judged yet */
	if (LD(t->lens_of) || LD(t->offsets)) {
		/* lengths or offsets, not ids: no layout, no credit */
		if (t->stride) {
			t->stride = 0;
			ST(t->stride_pub, 0);
			ST(t->trusted, 0);
		}
		return 0;
	}
	unsigned nb = bases_of(i, LD(t->gen), now, b);
	*nl = nb ? live_ids(t) : 0;
	return *nl ? nb : 0;
}

static void tables_poll(void)
{
	uint32_t now = __atomic_add_fetch(&tick, 1, __ATOMIC_RELAXED);
	if (!bits)
		return;
	/* this epoch's faults */
	uint64_t f[FAULT_RING], at = __atomic_load_n(&fault_at, __ATOMIC_ACQUIRE);
	if (at - fault_seen > FAULT_RING)
		fault_seen = at - FAULT_RING;
	unsigned nf = 0;
	for (; fault_seen < at; fault_seen++)
		f[nf++] = __atomic_load_n(&faults[fault_seen % FAULT_RING], __ATOMIC_RELAXED);
	struct base b[MAX_BASES];
	unsigned nl;
	/* learning first: its trial marks come and go on a clean bitmap */
	for (int i = 0; i < KVT_TABLE_SLOTS; i++) {
		struct tslot *t = &slots[i];
		housekeep(t);
		if (t->stride)
			continue;
		unsigned nb = prepare(i, now, b, &nl);
		if (!nb)
			continue;
		if (!t->nc)
			candidates(t);
		learn(t, b, nb, nl, f, nf);
	}
	/* then every accepted layout marks its chunks, credited once each */
	uint64_t cov[KVT_HEAT_MAX_RANGES / 64] = { 0 };
	unsigned nm = 0;
	_Static_assert(KVT_TABLE_SLOTS <= 32, "a bit per slot below");
	uint32_t marked = 0;                       /* slots that marked chunks */
	for (int i = 0; i < KVT_TABLE_SLOTS; i++) {
		struct tslot *t = &slots[i];
		if (!t->stride)
			continue;
		unsigned nb = prepare(i, now, b, &nl);
		if (!nb)
			continue;
		marked |= 1u << i;
		if (predict(b, nb, nl, t->stride, &nm))
			kvt_warn_once("tables: more than %u chunks predicted in one epoch; the rest "
				      "get no credit", MAX_MARKS);
		for (unsigned j = 0; j < nb; j++)
			cov[b[j].hs / 64] |= 1ull << (b[j].hs % 64);
	}
	/* a fault is explained by any accepted table's chunks (a prefill
	 * table and a decode table share the ranges) */
	for (int i = 0; i < KVT_TABLE_SLOTS; i++) {
		struct tslot *t = &slots[i];
		unsigned nb = marked >> i & 1 ? bases_of(i, LD(t->gen), now, b) : 0;
		if (nb)
			recheck(t, b, nb, f, nf);
	}
	/* every chunk in use now is credited once; the heat's decay keeps
	 * the chunks of a request that finished above those long unused, which
	 * is what the next turn of a conversation reuses (cooling them at once
	 * was measured: it halves serve-like's throughput) */
	unsigned credited = 0;
	for (unsigned k = 0; k < nm; k++)
		credited += kvt_heat_add(mark_addr[k], 1, CREDIT_W, 1);
	clear_marks(nm);
	for (unsigned w = 0; w < KVT_HEAT_MAX_RANGES / 64; w++)
		__atomic_store_n(&covered[w], cov[w], __ATOMIC_RELAXED);
	ADD(st.credited, credited);
	kvt_prof_count(KVT_SRC_TABLES, credited);
}

/* ---- the step (hook side, for tier/step.c) ---- */

#define STEP_REL_CHUNKS KVT_TABLES_STEP_CHUNKS
#define PAGE_SHIFT KVT_TABLES_PAGE_SHIFT

uint32_t kvt_tables_step_take(void)
{
	uint32_t m = step_mask;
	step_mask = 0;
	return m;
}

/* The pages of chunk q (counted from 0) that bytes [x, x + s) cover. */
static uint32_t pages_in(uint64_t q, uint64_t x, uint64_t s)
{
	uint64_t lo = q << KVT_CHUNK_SHIFT, hi = lo + KVT_CHUNK_BYTES;
	uint64_t a = x > lo ? x : lo, b = x + s < hi ? x + s : hi;
	return kvt_tables_pages((unsigned)((a - lo) >> PAGE_SHIFT),
				(unsigned)((b - 1 - lo) >> PAGE_SHIFT) + 1);
}

/* Mark in rel[] the chunks, counted from a base's own chunk, that the kept
 * ids of raw[0..n) name when the base lies o bytes into its chunk, and in
 * pm[] their pages; the highest chunk marked + 1 (0: none). Rows are
 * trimmed by row_keep. */
static uint32_t mark_rel(uint64_t *rel, uint32_t *pm, const int32_t *raw, uint32_t n, uint32_t R,
			 const int32_t *lens, uint32_t nlens, uint32_t bt, uint64_t o, uint64_t s)
{
	uint32_t keep = n, top = 0;
	for (uint32_t k = 0; k < n; k++) {
		if (R && k % R == 0)
			keep = row_keep(lens, nlens, k / R, bt);
		if (R && k % R >= keep)
			continue;
		int32_t v = __atomic_load_n(&raw[k], __ATOMIC_RELAXED);
		if (v < 0 || (uint32_t)v >= KVT_TABLE_IDS)
			continue;
		uint64_t x = o + (uint64_t)v * s;
		uint64_t q0 = x >> KVT_CHUNK_SHIFT, q1 = (x + s - 1) >> KVT_CHUNK_SHIFT;
		for (uint64_t q = q0; q <= q1 && q < STEP_REL_CHUNKS; q++) {
			rel[q / 64] |= 1ull << (q % 64);
			pm[q] |= pages_in(q, x, s);
			top = (uint32_t)q + 1 > top ? (uint32_t)q + 1 : top;
		}
	}
	return top;
}

unsigned kvt_tables_step_each(int T, void (*fn)(void *arg, uint64_t chunk, int hs, uint32_t pages),
			      void *arg, uint32_t *pm)
{
	if (T < 0 || T >= KVT_TABLE_SLOTS)
		return 0;
	struct tslot *t = &slots[T];
	uint64_t s = LD(t->stride_pub), trim = LD(t->trim);
	const int32_t *raw = LD(t->raw), *lens = NULL;
	uint32_t n = LD(t->raw_bytes) / 4, nlens = 0, R = 0, bt = 1;
	if (!s || !raw || !n)
		return 0;
	if (trim) {
		const struct tslot *L = &slots[(trim & 0xff) - 1];
		lens = LD(L->raw);
		nlens = LD(L->raw_bytes) / 4;
		R = lens ? (uint32_t)(trim >> 8 & 0xffffffff) : 0;
		bt = (uint32_t)(trim >> 40);
	}
	struct base b[MAX_BASES];
	unsigned nb = bases_of(T, LD(t->gen), now_tick(), b), calls = 0;
	uint64_t rel[STEP_REL_CHUNKS / 64];
	const uint64_t in_chunk = KVT_CHUNK_BYTES - 1;
	for (unsigned j = 0; j < nb; j++) {
		uint64_t o = (b[j].p - b[j].r.base) & in_chunk;
		int done = 0;
		for (unsigned i = 0; i < j; i++)
			done |= ((b[i].p - b[i].r.base) & in_chunk) == o;
		if (done)
			continue;                  /* its offset's group was walked */
		memset(rel, 0, sizeof rel);
		uint32_t top = mark_rel(rel, pm, raw, n, R, lens, nlens, bt ? bt : 1, o, s);
		for (unsigned k = j; k < nb && top; k++) {
			uint64_t off = b[k].p - b[k].r.base;
			if ((off & in_chunk) != o)
				continue;
			uint64_t c0 = off >> KVT_CHUNK_SHIFT;
			for (uint32_t w = 0; w < (top + 63) / 64; w++)
				for (uint64_t x = rel[w]; x; x &= x - 1) {
					uint64_t c = c0 + w * 64u + (unsigned)__builtin_ctzll(x);
					if (c >= b[k].r.nr_chunks)
						break;
					fn(arg, b[k].r.base + (c << KVT_CHUNK_SHIFT), b[k].hs,
					   pm[c - c0]);
					calls++;
				}
		}
		memset(pm, 0, (size_t)top * sizeof *pm);
	}
	return calls;
}

void kvt_tables_info(struct kvt_tables_info *out)
{
	out->copies_read = LD(st.copies_read);
	out->pairs = LD(st.pairs);
	out->accepted = LD(st.accepted);
	out->dropped = LD(st.dropped);
	out->credited = LD(st.credited);
	out->stride = LD(st.stride);
	out->trimmed = LD(st.trimmed);
	out->windows_against = LD(st.windows_against);
	out->relearned = LD(st.relearned);
	out->shared = LD(st.shared);
	out->duels = LD(st.duels);
	out->declared = LD(st.declared);
}

void kvt_tables_reset(void)
{
	for (int i = 0; i < KVT_TABLE_SLOTS; i++) {
		uint16_t *s = slots[i].stamp;
		int32_t *raw = slots[i].raw;
		memset(&slots[i], 0, sizeof slots[i]);
		slots[i].stamp = s;
		slots[i].raw = raw;
		if (s)
			kvt_sys_madvise(s, (size_t)KVT_TABLE_IDS * sizeof *s, MADV_DONTNEED);
	}
	memset(pairs, 0, sizeof pairs);
	memset(covered, 0, sizeof covered);
	memset(&st, 0, sizeof st);
	key_lo = UINT64_MAX;
	key_hi = 0;
	fault_seen = __atomic_load_n(&fault_at, __ATOMIC_RELAXED);
}

const struct kvt_prof_source_ops kvt_src_tables = {
	.name = "tables",
	.start = tables_start,
	.poll = tables_poll,
	.on_copy = tables_on_copy,
	.on_fault = tables_on_fault,
};
