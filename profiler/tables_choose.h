// SPDX-License-Identifier: MIT
/* Private to profiler/tables*.c: the block-table learner's candidate
 * strides, how an epoch's faults score them, and which one is accepted.
 * Pure functions over a caller's array: no state, no locks, no I/O but a
 * debug line. */
#ifndef KVT_TABLES_CHOOSE_H
#define KVT_TABLES_CHOOSE_H

#include <stdint.h>

#define KVT_TCAND_MAX 64                /* candidates a table keeps */

struct kvt_tcand {
	uint64_t s;                     /* the stride, bytes per id */
	double n, k, e, v;              /* faults tested, explained, expected by chance, variance */
	unsigned tried;                 /* epochs it was scored in (with power or not) */
};

/* Append stride s to c[0..*nc) unless it is implausible (< 256 B, > 64 MiB,
 * not a multiple of 16), already there or c is full (max). */
void kvt_tcand_add(struct kvt_tcand *c, unsigned *nc, unsigned max, uint64_t s);

/* Candidates from a table's launch scalars v[0..n): each, each pairwise
 * product, times an element size of 1, 2 or 4. */
void kvt_tcand_from_scalars(struct kvt_tcand *c, unsigned *nc, unsigned max, const uint32_t *v,
			    unsigned n);

/* One epoch: hit of nf faults fell in the chunks c predicts, which cover
 * the share cov of the ranges. An epoch without power (cov > 0.9, or the
 * prediction ran out of marks: full) only counts as tried. */
void kvt_tcand_score(struct kvt_tcand *c, unsigned nf, unsigned hit, double cov, int full);

/* The share of the faults chance does not explain that c explains. */
double kvt_tcand_kappa(const struct kvt_tcand *c);

/* The candidate to accept from c[0..nc), or -1 (none qualifies, or not
 * every candidate has been scored twice and no preferred stride
 * qualifies); *z is its z score. prefer[0..np) are strides known from
 * elsewhere, in order (the ones other tables use on the same bases, the one
 * this table dropped last): the first of them that qualifies is taken,
 * even over a better score. */
int kvt_tcand_choose(const struct kvt_tcand *c, unsigned nc, const uint64_t *prefer, unsigned np,
		     double *z);

/* Near strides (within 1/KVT_TWIN_NEAR of each other) explain the same
 * chunks for low ids and drift apart as ids grow, and candidates are
 * scored in turns, on different epochs' faults: which of two twins scores
 * higher says more about the epochs than the strides. So the chosen one
 * and its twins are judged again, side by side, on the same faults: a
 * duel. */
#define KVT_TWIN_NEAR   8               /* twins: |s - s'| < s / 8 */
#define KVT_DUEL_MAX    4               /* the chosen one and up to 3 twins */
#define KVT_DUEL_TIE    0.03            /* within this share of the faults (or 1) ties */

/* c[best] first, then its twins that have not been shown wrong (not
 * scored yet, or explaining KVT_TABLE_MIN_HIT of what they were scored
 * on), into out (at most KVT_DUEL_MAX); how many. 1 (no duel) also when
 * none of them is richer in twos than c[best]: the duel's tie would keep
 * c[best], and waiting for it delays the layout (a second table on the
 * same pool then chooses without the first's stride to prefer: vllm-v1-
 * triton's prefill table took 65 536 and the run fell to 0.57x native). */
unsigned kvt_tcand_twins(const struct kvt_tcand *c, unsigned nc, int best, int *out);

/* The duel's winner, an index into s[0..n) and k[0..n) (strides, faults
 * each explained of the same nf): the most explained; of those within
 * KVT_DUEL_TIE x nf of it (at least 1), the stride with the most trailing
 * zero bits, then the most explained, then the first. */
unsigned kvt_tcand_duel(const uint64_t *s, const double *k, unsigned n, double nf);

#endif
