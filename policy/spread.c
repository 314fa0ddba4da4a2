// SPDX-License-Identifier: MIT
/* Spreading far placements over several far nodes by weight (from their
 * bandwidth, see topo/topo.c): the next allocation goes to the node
 * whose share after it would be smallest relative to its weight. Pure. */
#include "kvtier/policy.h"

int kvt_policy_spread_pick(const uint64_t *placed, const uint32_t *weight_bp, int n,
			   uint64_t size)
{
	int best = -1;
	/* compare (placed_i + size) / w_i across i without division:
	 * a/wa < b/wb  <=>  a*wb < b*wa (128-bit products) */
	for (int i = 0; i < n; i++) {
		if (!weight_bp[i])
			continue;
		if (best < 0) {
			best = i;
			continue;
		}
		unsigned __int128 lhs = (unsigned __int128)(placed[i] + size) * weight_bp[best];
		unsigned __int128 rhs = (unsigned __int128)(placed[best] + size) * weight_bp[i];
		if (lhs < rhs)
			best = i;
	}
	return best;
}
