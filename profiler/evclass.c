// SPDX-License-Identifier: MIT
/* Evidence classes per KV range (contract in evclass.h). Hook side: one
 * relaxed OR per mark. Migrator side: a fold per epoch over the live
 * ranges, state kept per slot and reset when the slot changes hands. */
#include <stdio.h>
#include <string.h>

#include "evclass.h"
#include "heat.h"
#include "tables.h"
#include "trace.h"
#include "../base/kvt.h"

#define WORDS (KVT_HEAT_MAX_RANGES / 64)

static uint64_t marks[KVT_EVC__COUNT][WORDS];      /* atomic: marked since the last fold */

struct rstate {                                  /* migrator only */
	uint32_t gen;                                /* the slot's range generation + 1; 0 unused */
	uint64_t seen_at[KVT_EVC__COUNT];            /* epoch + 1 of the class's last mark */
	uint8_t cand, settled;                       /* enum kvt_evc */
	uint8_t said;                                /* a settled class was said */
	uint32_t hold;
};
static struct rstate rs[KVT_HEAT_MAX_RANGES];
static uint8_t settled_pub[KVT_HEAT_MAX_RANGES];   /* atomic: rs[].settled, for readers */
static uint64_t epoch;                             /* migrator only */

static const char *const names[KVT_EVC__COUNT] = {
	[KVT_EVC_NONE] = "none", [KVT_EVC_FAULTS] = "faults",
	[KVT_EVC_ALLOCATION] = "allocation", [KVT_EVC_EXTENT] = "extent",
	[KVT_EVC_BLOCKS] = "blocks",
};

const char *kvt_evc_name(enum kvt_evc c)
{
	return (unsigned)c < KVT_EVC__COUNT ? names[c] : "?";
}

void kvt_evc_mark(int slot, enum kvt_evc c)
{
	if (slot < 0 || slot >= KVT_HEAT_MAX_RANGES || (unsigned)c >= KVT_EVC__COUNT)
		return;
	uint64_t bit = 1ull << (slot % 64), *w = &marks[c][slot / 64];
	if (!(__atomic_load_n(w, __ATOMIC_RELAXED) & bit))
		__atomic_fetch_or(w, bit, __ATOMIC_RELAXED);
}

void kvt_evc_mark_addr(uint64_t addr, enum kvt_evc c)
{
	if (kvt_heat_maybe(addr))
		kvt_evc_mark(kvt_heat_find(addr), c);
}

/* The strongest class seen within the window, for state s. */
static uint8_t strongest(const struct rstate *s)
{
	for (int c = KVT_EVC__COUNT - 1; c > KVT_EVC_NONE; c--)
		if (s->seen_at[c] && epoch + 1 - s->seen_at[c] < KVT_EVC_WINDOW)
			return (uint8_t)c;
	return KVT_EVC_NONE;
}

void kvt_evc_epoch(void)
{
	uint64_t m[KVT_EVC__COUNT][WORDS];
	for (int c = 0; c < KVT_EVC__COUNT; c++)
		for (int w = 0; w < WORDS; w++)
			m[c][w] = __atomic_load_n(&marks[c][w], __ATOMIC_RELAXED) ?
				  __atomic_exchange_n(&marks[c][w], 0, __ATOMIC_RELAXED) : 0;
	epoch++;
	for (int sl = 0; sl < KVT_HEAT_MAX_RANGES; sl++) {
		struct kvt_heat_range r;
		struct rstate *s = &rs[sl];
		if (kvt_heat_range_peek(sl, &r)) {
			if (s->gen) {
				memset(s, 0, sizeof *s);
				__atomic_store_n(&settled_pub[sl], 0, __ATOMIC_RELAXED);
			}
			continue;
		}
		if (s->gen != r.gen + 1) {               /* a new range in the slot */
			memset(s, 0, sizeof *s);
			s->gen = r.gen + 1;
			__atomic_store_n(&settled_pub[sl], 0, __ATOMIC_RELAXED);
		}
		for (int c = 1; c < KVT_EVC__COUNT; c++)
			if (m[c][sl / 64] >> (sl % 64) & 1)
				s->seen_at[c] = epoch + 1;
		if (kvt_tables_covers(sl))
			s->seen_at[KVT_EVC_BLOCKS] = epoch + 1;
		uint8_t now = strongest(s);
		if (now != s->cand) {
			s->cand = now;
			s->hold = 0;
			continue;
		}
		if (++s->hold < KVT_EVC_HOLD || (s->said && now == s->settled))
			continue;
		uint8_t was = s->settled;
		s->settled = now;
		__atomic_store_n(&settled_pub[sl], now, __ATOMIC_RELAXED);
		if (!s->said && now == KVT_EVC_NONE)
			continue;                            /* nothing yet: nothing to say */
		s->said = 1;
		kvt_info("evidence for the KV range at %#llx (%llu MiB): %s%s%s",
			 (unsigned long long)r.base, (unsigned long long)(r.size >> 20),
			 names[now], was != now && was ? ", was " : "", was != now && was ? names[was] : "");
		char val[128];
		snprintf(val, sizeof val, "addr=%#llx bytes=%llu class=%s", (unsigned long long)r.base,
			 (unsigned long long)r.size, names[now]);
		kvt_trace_info("evidence.range", val);
	}
}

enum kvt_evc kvt_evc_settled(int slot)
{
	if (slot < 0 || slot >= KVT_HEAT_MAX_RANGES)
		return KVT_EVC_NONE;
	return (enum kvt_evc)__atomic_load_n(&settled_pub[slot], __ATOMIC_RELAXED);
}

void kvt_evc_totals(uint64_t nr[KVT_EVC__COUNT], uint64_t bytes[KVT_EVC__COUNT])
{
	memset(nr, 0, KVT_EVC__COUNT * sizeof *nr);
	memset(bytes, 0, KVT_EVC__COUNT * sizeof *bytes);
	for (int sl = 0; sl < KVT_HEAT_MAX_RANGES; sl++) {
		struct kvt_heat_range r;
		if (kvt_heat_range_peek(sl, &r))
			continue;
		unsigned c = __atomic_load_n(&settled_pub[sl], __ATOMIC_RELAXED);
		if (c >= KVT_EVC__COUNT)
			continue;
		nr[c]++;
		bytes[c] += r.size;
	}
}

void kvt_evc_reset(void)
{
	for (int c = 0; c < KVT_EVC__COUNT; c++)
		for (int w = 0; w < WORDS; w++)
			__atomic_store_n(&marks[c][w], 0, __ATOMIC_RELAXED);
	memset(rs, 0, sizeof rs);
	for (int sl = 0; sl < KVT_HEAT_MAX_RANGES; sl++)
		__atomic_store_n(&settled_pub[sl], 0, __ATOMIC_RELAXED);
	epoch = 0;
}
