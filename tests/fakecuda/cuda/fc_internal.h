/* SPDX-License-Identifier: MIT */
/* fakecuda internals — shared state of the SIMULATED CUDA driver (test double,
 * never shipped). One recursive global mutex guards everything; code under the
 * lock never touches user virtual addresses of managed ranges or of device
 * memory (only the driver's private views: fc_view, fc_block_store), so the
 * SIGSEGV path cannot deadlock on it and host code sees no device bytes. */
#ifndef FC_INTERNAL_H
#define FC_INTERNAL_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Everything cuda.h and fakecuda.h declare is an export; the rest is hidden. */
#pragma GCC visibility push(default)
#include <cuda.h>
#include "../fakecuda.h"
#pragma GCC visibility pop

#define FC_BLOCK          FAKECUDA_BLOCK_BYTES
/* Managed memory's residency unit: FAKECUDA_UM_PAGE (64 KiB..2 MiB, a power
 * of two; default 2 MiB). Below 2 MiB a 2 MiB region still faults in and is
 * evicted as one (the driver's fault service and root chunks), while a
 * prefetch or an advice moves only the pages of its range. */
#define FC_UMP            (fc_knobs.um_page ? fc_knobs.um_page : FC_BLOCK)
#define FC_DRIVER_VERSION 13000
#define FC_MAX_DEVICES    8         /* FAKECUDA_DEVICES accepts 1..this */
#define FC_ARRAY_SIZE(a)  (sizeof(a) / sizeof((a)[0]))
#define FC_EXPORT         __attribute__((visibility("default")))

/* ---- entry guard (fc_config.c) ---- */
enum fc_guard_flags {
	FC_NOINIT = 1u << 0,   /* callable before cuInit */
	FC_CTX    = 1u << 1,   /* needs a current context on this thread */
	FC_ALLOC  = 1u << 2,   /* injected failures report OUT_OF_MEMORY */
};
CUresult fc_enter(const char *export_name, unsigned flags);
#define FC_GUARD(name, flags) do {                          \
		CUresult fc_r_ = fc_enter((name), (flags));  \
		if (fc_r_ != CUDA_SUCCESS)                   \
			return fc_r_;                        \
	} while (0)

/* ---- knobs and cost model (fc_config.c) ---- */
struct fc_knobs {
	double hbm_gbps, link_gbps;
	uint64_t fault_ns, launch_ns;
	uint64_t map_fault_ns;       /* FAKECUDA_MAP_FAULT_NS: a fault that maps */
	uint64_t advise_ns;          /* FAKECUDA_ADVISE_NS: CPU time of one advice */
	uint64_t device_bytes;
	unsigned fault_batch_blocks;
	bool drop_host_numa_home;    /* FAKECUDA_DROP_HOST_NUMA_HOME */
	double pace;                 /* FAKECUDA_PACE: real s per virtual s, 0 off */
	bool reclaim;                /* FAKECUDA_RECLAIM: punch the copy a block left */
	bool fault_maps;             /* FAKECUDA_FAULT_MAPS: every host fault maps */
	bool evict_lru;              /* FAKECUDA_EVICT=lru: hits refresh the order */
	int nr_devices;              /* FAKECUDA_DEVICES: ordinals, views of one HBM */
	bool coherent;               /* FAKECUDA_COHERENT: host code sees device memory */
	uint64_t um_page;            /* FAKECUDA_UM_PAGE: managed residency unit (0: 2 MiB) */
	bool reuse_maps;             /* FAKECUDA_REUSE_MAPS: small device maps kept for reuse */
	bool vtime;                  /* FAKECUDA_VTIME: engines, streams, scheduler (fc_vt.c) */
	double charge_scale;         /* FAKECUDA_CHARGE_SCALE: fakecuda_vclock_charge x this */
};
extern struct fc_knobs fc_knobs;
void fc_config_init(void);                 /* idempotent, thread-safe */
void fc_spend_cpu(uint64_t ns);            /* busy for ns of this thread's CPU time */
int  fc_parse_bytes(const char *s, uint64_t *out);   /* K/M/G/T suffixes */

/* An ordinal the driver exposes: 0 .. FAKECUDA_DEVICES-1. */
static inline bool fc_valid_dev(int dev)
{
	return dev >= 0 && dev < fc_knobs.nr_devices;
}

/* ---- global state ---- */
void fc_lock(void);
void fc_unlock(void);
void fc_lock_yield(void);   /* real time: queued calls go first (a kernel body's accesses) */
bool fc_initialized(void);
CUcontext fc_current_ctx(void);
/* Ordinal of the calling thread's current context; 0 without one. */
int fc_current_dev(void);
bool fc_valid_stream(CUstream s);
/* Ordinal a stream's work runs on: its context's for a created stream, the
 * calling thread's current context's for the NULL/legacy/per-thread ones. */
int fc_stream_dev(CUstream s);

/* Per-ordinal event counters (fakecuda_device_counters); the gauges
 * (primary refs, resident blocks) are read from the state itself. */
struct fc_dev_stats {
	uint64_t contexts_made, prefetch_blocks_to, accessed_by_advice, faults;
};

/* Counters + virtual clock (fc_config.c); caller holds the lock. */
struct fc_stats {
	struct fakecuda_counters c;   /* virtual_ns derived from clock_ps */
	uint64_t clock_ps;
	uint64_t device_alloc_bytes;  /* cuMemAlloc / pools / VMM device handles */
	struct fc_dev_stats dev[FC_MAX_DEVICES];
};
extern struct fc_stats fc_stats;
void fc_clock_bytes(uint64_t bytes, double gbps);
void fc_clock_ns(uint64_t ns);
uint64_t fc_now_ns(void);
/* FAKECUDA_PACE: called at synchronisation points WITHOUT the lock; sleeps
 * until the real clock has caught up with pace x the virtual one. */
void fc_pace_wait(void);

/* ---- virtual time (fc_vt.c; FAKECUDA_VTIME=1, otherwise no-ops) ----
 * An operation runs on one engine of its ordinal, in its stream's order:
 * fc_op_begin moves the cursor (fc_stats.clock_ps) to when it can start,
 * the operation's cost model advances it, fc_op_end records its end on the
 * stream and the engine and puts the cursor back to the caller's time.
 * FC_ENG_NONE: an operation in stream order that needs no engine (a
 * discard). Lock held for all of these. */
enum fc_eng { FC_ENG_NONE = -1, FC_ENG_SM = 0, FC_ENG_H2D, FC_ENG_D2H, FC_ENG_N };
struct fc_op { bool on; int dev; enum fc_eng eng; CUstream s; uint64_t host_ps; };
bool fc_vt_on(void);
void fc_op_begin(struct fc_op *op, CUstream s, int dev, enum fc_eng e);
uint64_t fc_op_end(struct fc_op *op);           /* the operation's end (ps) */
void fc_host_wait_until(uint64_t ps);           /* the caller waits for ps */
void fc_stall_until(uint64_t ps);               /* the operation waits for ps */
void fc_link_transfer(bool htod, uint64_t bytes);   /* link time, shared with a copy engine */
uint64_t fc_dev_idle_ps(int dev);               /* when all of dev's work ends */
uint64_t fc_vt_stall_ns(void);
void fc_vt_lock_enter(void);                    /* fc_lock/fc_unlock, outermost */
void fc_vt_lock_leave(void);
void fc_vt_working(void);                       /* progress inside a long locked operation */
/* A workload thread's synchronisation point: its turn may pass. Call
 * without the lock. */
void fc_vt_sync_point(void);
/* The end time of stream s's work (its own, or ordinal dev's legacy
 * stream's for NULL, legacy and per-thread), fc_stream.c. */
uint64_t *fc_stream_end(CUstream s, int dev);
bool fc_stream_is_legacy(CUstream s);
bool fc_stream_is_blocking(CUstream s);

/* ---- allocation registry (fc_registry.c) ---- */
enum fc_kind {
	FC_KIND_DEVICE = 1,   /* cuMemAlloc / pitch / async / pool */
	FC_KIND_HOST,         /* cuMemHostAlloc / cuMemAllocHost (pinned, ours) */
	FC_KIND_REGISTERED,   /* cuMemHostRegister (the caller's memory) */
	FC_KIND_MANAGED,      /* cuMemAllocManaged */
	FC_KIND_VMM,          /* a cuMemMap'ed piece of a reservation */
};
struct fc_alloc {
	uintptr_t base;
	size_t size;          /* what the caller asked for */
	size_t map_bytes;     /* what we mapped / charged */
	enum fc_kind kind;
	unsigned flags;
	uint64_t buffer_id;
	CUmemoryPool pool;    /* cuMemAllocAsync / FromPool, else NULL */
	void *owner;          /* fc_mrange for MANAGED, handle for VMM */
	int node;             /* host node for HOST pools, else -1 */
	int dev;              /* ordinal current when it was made (DEVICE_ORDINAL) */
	/* Where the driver reads and writes the bytes at base (every kind but
	 * MANAGED, whose bytes move between stores: fc_block_store). Device
	 * memory (DEVICE, VMM of a device handle) is hidden from host code, as
	 * on a discrete GPU: base is PROT_NONE and the bytes live in this
	 * private mapping (for VMM, of the handle's memfd, host handles too);
	 * for host memory (HOST, REGISTERED) it is base itself. */
	char *view;
	int access;           /* VMM: PROT_* the GPU was granted by cuMemSetAccess */
};
struct fc_alloc *fc_reg_add(uintptr_t base, size_t size, enum fc_kind kind);
struct fc_alloc *fc_reg_find(uintptr_t addr);          /* containing addr */
struct fc_alloc *fc_reg_find_base(uintptr_t base, enum fc_kind kind);
bool fc_reg_overlaps(uintptr_t base, size_t size);
void fc_reg_remove(struct fc_alloc *a);
/* The driver's address of the bytes of [addr, addr+len), which must lie in
 * one allocation other than managed memory: a device allocation's private
 * view, host memory's own address. NULL for unknown or managed memory and
 * for a range that runs past its allocation (into another, or none). */
char *fc_view(uintptr_t addr, size_t len);
/* Device memory, which host code cannot read at its address. */
bool fc_is_device(const struct fc_alloc *a);

/* ---- device memory charge (fc_mem.c) ---- */
CUresult fc_charge_device(uint64_t bytes);   /* evicts managed blocks first */
void fc_uncharge_device(uint64_t bytes);
void *fc_map_anon(size_t bytes, int prot);
CUresult fc_device_free(uintptr_t base, bool async_ok, bool from_async);

/* ---- managed memory (fc_managed.c) ---- */
enum fc_loc { FC_LOC_HOST = 0, FC_LOC_DEV = 1 };
enum fc_cause { FC_CAUSE_FAULT, FC_CAUSE_PREFETCH, FC_CAUSE_EVICT, FC_CAUSE_CPU };
struct fc_mrange;
struct fc_block {
	struct fc_mrange *r;
	uint32_t idx;
	uint8_t loc;             /* enum fc_loc: where the authoritative copy is */
	uint8_t dev;             /* ordinal holding it while loc is FC_LOC_DEV */
	uint8_t dup;             /* READ_MOSTLY duplicate: host copy valid too */
	uint8_t dev_mapped;      /* ordinals (bits) with a remote mapping of the host copy */
	uint8_t read_mostly;
	uint8_t accessed_by_devs;  /* ordinals (bits) advised SET_ACCESSED_BY */
	uint8_t accessed_by_host;
	uint8_t discarded;       /* wholly discarded, unwritten since: its next move is free */
	int8_t pref_type;        /* CUmemLocationType or 0 (none) */
	int8_t last_pf_type;
	int32_t pref_id, last_pf_id;
	int32_t host_node;       /* node the host copy is bound to, -1: none */
	uint64_t ready_ps;       /* FAKECUDA_VTIME: when its last move in ends */
	struct fc_block *prev, *next;   /* eviction order of device-resident blocks */
};
struct fc_mrange {
	uintptr_t base;
	size_t size, nblocks;
	int hfd, dfd;                    /* host store, device store (memfds) */
	char *hview, *dview;             /* the driver's private views */
	struct fc_block *blocks;
};
CUresult fc_managed_alloc(CUdeviceptr *dptr, size_t bytes, unsigned flags);
CUresult fc_managed_free(struct fc_alloc *a);
struct fc_block *fc_block_of(uintptr_t addr);          /* lock held */
CUresult fc_block_to_dev(struct fc_block *b, int dev, enum fc_cause cause, bool keep_host);
CUresult fc_block_to_host(struct fc_block *b, enum fc_cause cause, int node);
void fc_block_touch(struct fc_block *b);
/* Discard (fc_managed.c): the byte discarded memory reads as, wherever it
 * is; poison [off, off+len) of b's authoritative bytes (and of its host
 * duplicate); mark b wholly discarded (a host-resident unit turns read-only
 * to the CPU so that a CPU write is seen); end a discard (a write). */
#define FC_POISON 0xdb
void fc_block_poison(struct fc_block *b, size_t off, size_t len);
void fc_block_discard(struct fc_block *b);
void fc_block_undiscard(struct fc_block *b);
void fc_block_set_policy(struct fc_block *b, int node);
int fc_host_target(const struct fc_block *b);
char *fc_block_store(struct fc_block *b);               /* authoritative bytes */
bool fc_evict_one(void);
void fc_region_of(const struct fc_block *b, size_t *first, size_t *end);
uint64_t fc_resident_blocks_on(int dev);
bool fc_node_valid(int node);
int fc_bind_node(void *addr, size_t len, int node);   /* 0 or -errno */
int fc_current_node(void);
void fc_managed_install_handler(void);

/* ---- advice and prefetch (fc_advise.c), batches and discards (fc_discard.c) ---- */
/* The managed units covering [ptr, ptr+count), all in one allocation
 * (CUDA_ERROR_INVALID_VALUE: count 0, not managed, or past its end). */
struct fc_span_blocks { struct fc_block *first; size_t nr; };
CUresult fc_blocks(CUdeviceptr ptr, size_t count, struct fc_span_blocks *out);
/* Validate a location; HOST_NUMA_CURRENT becomes HOST_NUMA <this node>. */
CUresult fc_norm_loc(CUmemLocation *l);
/* Prefetch [ptr, ptr+count) to the normalised l as one operation on s's
 * copy engine, in stream order. Lock held. */
CUresult fc_prefetch_span(CUdeviceptr ptr, size_t count, CUmemLocation l, CUstream s);

/* ---- GPU-side access (fc_access.c) ---- */
/* Resolve a GPU access of [addr, addr+len) from ordinal dev to driver-visible
 * bytes, faulting managed blocks as the GPU would; *contig bytes are valid
 * at *out. */
CUresult fc_gpu_span(uintptr_t addr, size_t len, int write, int dev, char **out,
		     size_t *contig);
CUresult fc_gpu_access(uintptr_t addr, size_t len, int write, int dev);

/* ---- operations a graph can hold (fc_access.c, fc_copy.c) ----
 * The bodies of a touch-kernel launch, a copy and a memset on ordinal dev,
 * after their arguments are checked; they take the lock themselves, so a
 * graph launch (which holds it) and a stream submission share them. */
CUresult fc_touch_run(const struct fakecuda_range *ranges, unsigned nr, int dev);
/* A kernel's arguments as a driver copies them at launch or capture (fc_kernel.c).
 * A built-in kernel's: the raw value of each (zero-extended), at most
 * FC_KERNEL_ARGS, in v. A defined kernel's (fakecuda_kernel_define): nr
 * pointers, each to its argument's bytes, in one malloc'd block that holds
 * the bytes too (params NULL when nr is 0); whoever holds the struct owns
 * the block: fc_kargs_release frees it, fc_kargs_copy duplicates it. */
#define FC_KERNEL_ARGS 10
struct fc_kargs {
	uint64_t v[FC_KERNEL_ARGS];
	void **params;
	unsigned nr;
	size_t block_bytes;
};
/* The values behind kernelParams for kernel f (CUDA_ERROR_INVALID_HANDLE:
 * not one of ours; CUDA_ERROR_INVALID_VALUE: a NULL parameter slot;
 * CUDA_ERROR_OUT_OF_MEMORY). */
CUresult fc_kernel_args(CUfunction f, void *const *params, struct fc_kargs *out);
CUresult fc_kargs_copy(struct fc_kargs *dst, const struct fc_kargs *src);
void fc_kargs_release(struct fc_kargs *a);
/* Run kernel f with those arguments on ordinal dev (takes the lock). */
/* grid: the launch's grid, as fakecuda_kgrid reports it to a defined body */
CUresult fc_kernel_run(CUfunction f, const struct fc_kargs *a, int dev, const unsigned grid[3]);
/* Memory as a kernel reads it: device memory through its view, any other
 * memory the driver or host knows where it is; NULL past an allocation. */
const char *fc_kernel_mem(uintptr_t addr, size_t len);
/* A defined kernel's body reading (write 0) or writing [addr, addr+len) on
 * ordinal dev, the bytes copied to or from buf (buf NULL: accounted only,
 * as the touch kernel's ranges are). Every byte must lie in memory the
 * driver knows, or nothing is charged: CUDA_ERROR_ILLEGAL_ADDRESS. */
CUresult fc_kernel_copy(uintptr_t addr, void *buf, size_t len, int write, int dev);
/* SM time of flops at FAKECUDA_MMA_PEAK x FAKECUDA_MMA_EFF (fc_compute.c). */
void fc_compute_flops(double flops);
/* While a defined kernel's body runs on this thread: ordinal dev's primary
 * context is current (pushed unless a context of dev already is; no
 * reference taken). true: pushed, pop it after (fc_device.c). */
bool fc_ctx_push_body(int dev);
void fc_ctx_pop_body(void);
/* The paged-attention kernel's body (fc_paged.c); lock held or not. */
CUresult fc_paged_run(const struct fc_kargs *a, int dev);
/* The prefill (compute) kernel's body (fc_compute.c); takes the lock. */
CUresult fc_compute_run(const struct fc_kargs *a, int dev);
CUresult fc_copy_run(uintptr_t dst, uintptr_t src, size_t n, int dev);
/* The engine a copy between dst and src runs on (FAKECUDA_VTIME). */
enum fc_eng fc_copy_engine(uintptr_t dst, uintptr_t src);
CUresult fc_memset_run(uintptr_t dst, unsigned value, size_t n, unsigned elem, int dev);

/* ---- stream capture and graphs (fc_graph.c, fc_stream.c) ---- */
struct fc_graph;
/* Launch geometry kept by a kernel node (only reported back). */
struct fc_dims {
	unsigned grid[3], block[3], shmem;
};
/* The graph stream s is capturing into, or NULL (also for the NULL, legacy
 * and per-thread streams, which never capture). Lock held. */
struct fc_graph *fc_stream_capture(CUstream s);
/* A failed recording (no memory) invalidates the capture, as a driver does:
 * EndCapture then reports CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. Lock held. */
void fc_stream_capture_invalidate(CUstream s);
/* A graph owned by a capturing stream: not a valid CUgraph until
 * fc_graph_publish (EndCapture) hands it out; fc_graph_drop frees one that
 * never was (a stream destroyed while capturing). Lock held. */
struct fc_graph *fc_graph_new(void);
CUgraph fc_graph_publish(struct fc_graph *g);
void fc_graph_drop(struct fc_graph *g);
/* Append one node to g, the argument values copied now, as a driver does
 * at capture: the node takes args' block on success (the caller still owns
 * it on failure). CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY. Lock held. */
CUresult fc_graph_add_kernel(struct fc_graph *g, CUfunction f, const struct fc_dims *d,
			     const struct fc_kargs *args, int dev);
CUresult fc_graph_add_copy(struct fc_graph *g, uintptr_t dst, uintptr_t src, size_t n,
			   int dev);
CUresult fc_graph_add_memset(struct fc_graph *g, uintptr_t dst, unsigned value, size_t n,
			     unsigned elem, int dev);

/* ---- unified-memory record feed (fc_umfeed.c, shared with libcupti) ---- */
#include "fc_umfeed.h"
void fc_feed_push(uint32_t kind, uint32_t flags, uint64_t addr, uint64_t value,
		  uint64_t dur_ns, uint32_t src, uint32_t dst);

#endif
