// SPDX-License-Identifier: MIT
/* The block-table learner's statistics: candidate strides from a table's
 * launch scalars, their scores against faults, and the choice of the one
 * that explains them (contract in tables_choose.h; the rule is described
 * in docs/profiler.md, "Block tables", step 3). */
#include <math.h>

#include "tables.h"
#include "tables_choose.h"
#include "../base/kvt.h"

#define TIE_KAPPA 0.05                 /* candidates within this of the best kappa tie */
#define TIE_Z     0.05                 /* of those, within 5 % of the best z per fault tie */

void kvt_tcand_add(struct kvt_tcand *c, unsigned *nc, unsigned max, uint64_t s)
{
	if (s < 256 || s > (64ull << 20) || (s & 15) || *nc >= max)
		return;
	for (unsigned i = 0; i < *nc; i++)
		if (c[i].s == s)
			return;
	c[(*nc)++] = (struct kvt_tcand){ .s = s };
}

void kvt_tcand_from_scalars(struct kvt_tcand *c, unsigned *nc, unsigned max, const uint32_t *v,
			    unsigned n)
{
	for (unsigned el = 1; el <= 4; el *= 2)
		for (unsigned i = 0; i < n; i++) {
			kvt_tcand_add(c, nc, max, (uint64_t)v[i] * el);
			for (unsigned j = i + 1; j < n; j++)
				kvt_tcand_add(c, nc, max, (uint64_t)v[i] * v[j] * el);
		}
}

void kvt_tcand_score(struct kvt_tcand *c, unsigned nf, unsigned hit, double cov, int full)
{
	c->tried++;
	if (full || cov > 0.9)
		return;                        /* no power to tell it from chance */
	c->n += nf;
	c->k += hit;
	c->e += nf * cov;
	c->v += nf * cov * (1 - cov);
}

/* (k - e) / (n - e): 1 for a layout that explains every fault, 0 for one
 * no better than its chunk coverage, whatever that coverage is. */
double kvt_tcand_kappa(const struct kvt_tcand *c)
{
	double rest = c->n - c->e;
	return rest > 1e-9 ? (c->k - c->e) / rest : 0;
}

/* z of a candidate with enough faults mostly explained; -1 otherwise. */
static double z_of(const struct kvt_tcand *c)
{
	if (c->n < KVT_TABLE_MIN_FAULTS || c->k < KVT_TABLE_MIN_HIT * c->n)
		return -1;
	return (c->k - c->e) / sqrt(c->v > 1e-9 ? c->v : 1e-9);
}

/* Of the candidates that beat chance, those that explain the most of what
 * chance does not (kappa, within TIE_KAPPA of the best); z alone favours a
 * narrow candidate (a stride of 4 096 that puts every live id in a few
 * chunks: 24 of 32 faults, z 11.9) over the layout (32 768: 32 of 32, z
 * 9.3, its wider coverage explaining more by chance), whose kappa is 1.0
 * against 0.75. Among those, the narrowest (the best z per fault: 65 536
 * explains the same faults as 32 768 over twice the chunks). Faults are seen by chunk,
 * so near strides (32 832 = 513 x 64 beside 32 768 = 16 x 2 048) can tie
 * on both. Of those within TIE_Z of that z per fault, the one with more trailing zero
 * bits is taken: a KV block's stride is a product of a block size, heads, a
 * head size and an element size, rich in twos; a product with an odd
 * scalar is not. Then the larger z, then the order of the candidates. */
#define PENDING_TRIES 12              /* epochs a pending twin is waited for */

static int best_of(const struct kvt_tcand *c, unsigned nc, const double *zs, const double *ks)
{
	double bk = -1, bz = 0, zn[KVT_TCAND_MAX];
	int best = -1;
	for (unsigned i = 0; i < nc; i++) {
		/* per fault: candidates are scored on different epochs, and z
		 * grows with the faults one happened to be scored on */
		zn[i] = zs[i] >= KVT_TABLE_MIN_Z ? zs[i] / sqrt(c[i].n) : -1;
		if (zs[i] >= KVT_TABLE_MIN_Z && ks[i] > bk)
			bk = ks[i];
	}
	for (unsigned i = 0; i < nc && bk >= 0; i++)
		if (zs[i] >= KVT_TABLE_MIN_Z && ks[i] >= bk - TIE_KAPPA && zn[i] > bz)
			bz = zn[i];
	for (unsigned i = 0; i < nc && bz > 0; i++) {
		if (zs[i] < KVT_TABLE_MIN_Z || ks[i] < bk - TIE_KAPPA || zn[i] < bz * (1 - TIE_Z))
			continue;
		int ti = __builtin_ctzll(c[i].s), tb = best < 0 ? -1 : __builtin_ctzll(c[best].s);
		if (best < 0 || ti > tb || (ti == tb && zn[i] > zn[best]))
			best = (int)i;
	}
	return best;
}

/* Whether a candidate that could still beat c[best] has had too few
 * faults to qualify: fewer than KVT_TABLE_MIN_FAULTS, at least
 * KVT_TABLE_MIN_HIT of them explained, in fewer than PENDING_TRIES epochs,
 * and on those a kappa above the best's by more than the tie (it would
 * win outright), or within the tie and richer in twos (it would take the
 * tie, best_of). Candidates are scored in turns, each on its own epochs'
 * faults: on vllm-v2 the block stride (32 768) had 12 faults, all
 * explained, when a near stride (32 832) passed the bar on 54 and was
 * taken, its chunks drifting from the blocks' as ids grow; and, paced in
 * real time beside two hogs, 30 of 30 when its double (65 536, 27 of 32,
 * kappa 0.82) passed and was taken, half of its chunks wrong until two
 * windows of faults dropped it (5 of 10 runs, all below native). */
static int pending(const struct kvt_tcand *c, unsigned nc, int best)
{
	int tb = __builtin_ctzll(c[best].s);
	double kb = kvt_tcand_kappa(&c[best]);
	for (unsigned i = 0; i < nc; i++) {
		if ((int)i == best || !(c[i].n > 0 && c[i].n < KVT_TABLE_MIN_FAULTS &&
		    c[i].k >= KVT_TABLE_MIN_HIT * c[i].n && c[i].tried < PENDING_TRIES))
			continue;
		double ki = kvt_tcand_kappa(&c[i]);
		if (ki > kb + TIE_KAPPA || (ki >= kb - TIE_KAPPA && __builtin_ctzll(c[i].s) > tb))
			return 1;
	}
	return 0;
}

/* The best of all candidates, once each has been scored twice (near
 * strides explain many of the same faults: the first to pass the bar is
 * not necessarily the best); a preferred stride (one another table uses on
 * the same bases, the one dropped last) is taken as soon as it qualifies. */
int kvt_tcand_choose(const struct kvt_tcand *c, unsigned nc, const uint64_t *prefer, unsigned np,
		     double *z)
{
	double zs[KVT_TCAND_MAX], ks[KVT_TCAND_MAX];
	if (nc > KVT_TCAND_MAX)
		nc = KVT_TCAND_MAX;
	int all_tried = 1, again = -1;
	unsigned rank = np;                        /* of the preferred one found */
	for (unsigned i = 0; i < nc; i++) {
		all_tried &= c[i].tried >= 2;
		zs[i] = z_of(&c[i]);
		ks[i] = zs[i] >= 0 ? kvt_tcand_kappa(&c[i]) : -1;
		for (unsigned p = 0; p < rank && zs[i] >= KVT_TABLE_MIN_Z; p++)
			if (prefer[p] && c[i].s == prefer[p]) {
				again = (int)i;
				rank = p;
			}
	}
	if (!all_tried && again < 0)
		return -1;
	int best = best_of(c, nc, zs, ks);
	if (best >= 0 && again < 0 && pending(c, nc, best))
		return -1;
	if (again >= 0 && again != best) {
		if (best >= 0)
			kvt_debug("tables: stride %llu (z %.1f) scores above %llu (z %.1f), known "
				  "from before or from another table on the same bases, which "
				  "qualifies: that one is taken",
				  (unsigned long long)c[best].s, zs[best],
				  (unsigned long long)c[again].s, zs[again]);
		best = again;
	}
	if (best >= 0)
		*z = zs[best];
	return best;
}

unsigned kvt_tcand_twins(const struct kvt_tcand *c, unsigned nc, int best, int *out)
{
	unsigned n = 0;
	int richer = 0;
	if (best < 0 || (unsigned)best >= nc)
		return 0;
	uint64_t sb = c[best].s;
	out[n++] = best;
	for (unsigned i = 0; i < nc && n < KVT_DUEL_MAX; i++) {
		uint64_t d = c[i].s > sb ? c[i].s - sb : sb - c[i].s;
		if ((int)i == best || !d || d * KVT_TWIN_NEAR >= sb)
			continue;
		if (c[i].n > 0 && c[i].k < KVT_TABLE_MIN_HIT * c[i].n)
			continue;                  /* shown wrong on its own faults */
		richer |= __builtin_ctzll(c[i].s) > __builtin_ctzll(sb);
		out[n++] = (int)i;
	}
	return richer ? n : 1;
}

unsigned kvt_tcand_duel(const uint64_t *s, const double *k, unsigned n, double nf)
{
	double m = 0, tie = KVT_DUEL_TIE * nf > 1 ? KVT_DUEL_TIE * nf : 1;
	for (unsigned i = 0; i < n; i++)
		m = k[i] > m ? k[i] : m;
	int best = -1;
	for (unsigned i = 0; i < n; i++) {
		if (k[i] < m - tie)
			continue;
		int ti = __builtin_ctzll(s[i]), tb = best < 0 ? -1 : __builtin_ctzll(s[best]);
		if (best < 0 || ti > tb || (ti == tb && k[i] > k[best]))
			best = (int)i;
	}
	return best < 0 ? 0 : (unsigned)best;
}
