/* SPDX-License-Identifier: MIT */
/* The registry: a thread-safe map from address ranges to allocation records.
 * Exact-base lookups are O(1) (hash by base); "which record contains this
 * address" is O(levels) with interval hashing (each record is indexed under
 * at most two granules of the one level whose granule size fits it).
 * Locks are striped by bucket: no global lock on the hot path. Node memory
 * comes from mmap'd slabs (never malloc). */
#ifndef KVT_REGISTRY_H
#define KVT_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

struct kvt_alloc {                 /* a record, copied in and out */
	uint64_t base, size;
	uint64_t t_ns;             /* when it was recorded: CLOCK_MONOTONIC_COARSE (a
				    * tick behind; kvtier's hooks pay no precise read) */
	uint64_t aux;              /* host flags, vmm handle, mmap prot|flags<<32 */
	uint32_t tid, stack_id;
	uint16_t api;              /* enum kvt_api the application called */
	uint8_t kind;              /* enum kvt_kind */
	uint8_t placement;         /* enum kvt_placement */
	int32_t node;              /* NUMA node for host placements, -1 = none */
	uint64_t policy_id;        /* the id the policy engine knows it by (0 = none) */
	uint64_t far_bytes;        /* charged to KVTIER_CXL_LIMIT; released on free */
};

struct kvt_registry;

/* A registry with 2^bucket_bits buckets per table. NULL on failure. */
struct kvt_registry *kvt_reg_create(unsigned bucket_bits);
void kvt_reg_destroy(struct kvt_registry *r);

/* Insert; a live record with the same base is replaced (returns 1 then,
 * else 0), -ENOMEM when no node memory can be had. size 0 is stored as 1. */
int kvt_reg_insert(struct kvt_registry *r, const struct kvt_alloc *a);
/* Remove the record whose base is exactly `base`; 0 or -ENOENT. */
int kvt_reg_remove(struct kvt_registry *r, uint64_t base, struct kvt_alloc *out);
/* Copy of the record with this exact base; 0 or -ENOENT. */
int kvt_reg_lookup(struct kvt_registry *r, uint64_t base, struct kvt_alloc *out);
/* Copy of a record whose [base, base+size) contains addr; 0 or -ENOENT. */
int kvt_reg_find(struct kvt_registry *r, uint64_t addr, struct kvt_alloc *out);

/* Remove every record overlapping [addr, addr+len) and re-insert the parts
 * outside it (partial munmap). Returns the bytes removed, or -errno.
 * Only records for which keep(rec) is true are touched (NULL = all). */
int64_t kvt_reg_carve(struct kvt_registry *r, uint64_t addr, uint64_t len,
		      int (*keep)(const struct kvt_alloc *));

struct kvt_reg_stats {
	uint64_t nr_live, bytes_live;
	uint64_t nr_inserts, nr_removes, nr_replaced;
	uint64_t nr_nomem;
};
void kvt_reg_stats(struct kvt_registry *r, struct kvt_reg_stats *out);

/* Visit every live record (snapshot per bucket; concurrent changes may or may
 * not be seen). Stops when fn returns non-zero, which is then returned. */
int kvt_reg_for_each(struct kvt_registry *r,
		     int (*fn)(const struct kvt_alloc *, void *), void *arg);

/* Fork: hold every lock across fork(), release in both processes. */
void kvt_reg_lock_all(struct kvt_registry *r);
void kvt_reg_unlock_all(struct kvt_registry *r);

#endif
