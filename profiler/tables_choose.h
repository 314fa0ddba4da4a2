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

#endif
