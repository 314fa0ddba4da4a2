/* SPDX-License-Identifier: MIT */
/* fakecuda — the test-only API of kvtier's SIMULATED GPU (a test double, never
 * shipped). build/fakecuda/libcuda.so.1 exports these next to the CUDA driver
 * subset; programs find them with dlsym(RTLD_DEFAULT, "fakecuda_...") so the
 * same workload binary also runs on a real GPU, where they are absent.
 * Every figure derived from these counters is "simulated". */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#define FAKECUDA_BLOCK_BYTES (2ull << 20)   /* UVM VA block / residency unit */

/* Counters since start (or the last fakecuda_reset_counters). */
struct fakecuda_counters {
	uint64_t virtual_ns;            /* simulated clock (cost model below) */
	uint64_t bytes_htod;            /* managed bytes migrated host -> device */
	uint64_t bytes_dtoh;            /* managed bytes migrated device -> host */
	uint64_t bytes_hbm;             /* bytes accessed while resident in HBM */
	uint64_t bytes_remote;          /* bytes accessed over the link (accessed-by mapping) */
	uint64_t faults;                /* GPU page faults (one per faulting 2 MiB block) */
	uint64_t fault_groups;          /* fault batches serviced (cost unit) */
	uint64_t cpu_faults;            /* host accesses that pulled a block back */
	uint64_t evictions;             /* 2 MiB blocks evicted device -> host */
	uint64_t prefetch_blocks;       /* blocks moved by cuMemPrefetchAsync */
	uint64_t launches;              /* kernels launched */
	uint64_t device_used_bytes;     /* HBM in use now (cuMemAlloc + resident managed) */
	uint64_t device_capacity_bytes; /* FAKECUDA_DEVICE_BYTES */
	uint64_t managed_resident_bytes;/* managed bytes resident in HBM now */
	uint64_t bytes_evicted;         /* of bytes_dtoh: moved by evictions (CUPTI cause EVICTION) */
	uint64_t bytes_fault_in;        /* of bytes_htod: moved by GPU faults (not prefetches) */
	uint64_t discard_ops;           /* ranges discarded (cuMemDiscard{,AndPrefetch}BatchAsync) */
	uint64_t bytes_discarded;       /* units wholly discarded x the unit (FAKECUDA_UM_PAGE) */
	uint64_t bytes_discard_skipped; /* link bytes not moved: moves of discarded units */
};

/* Cost model (virtual clock), overridable by environment variables:
 *   FAKECUDA_HBM_GBPS   (default 4800)  HBM bandwidth
 *   FAKECUDA_LINK_GBPS  (default 55)    host<->device link, each direction
 *   FAKECUDA_FAULT_NS   (default 590000) service of one fault group that
 *                       migrates (H200: 628 us per faulted 2 MiB, link included)
 *   FAKECUDA_FAULT_BATCH (default 1)    faulting 2 MiB blocks per group
 *   FAKECUDA_MAP_FAULT_NS (default 1470000) one group that maps instead
 *   FAKECUDA_ADVISE_NS  (default 20000) CPU time of one cuMemAdvise (busy)
 *   FAKECUDA_LAUNCH_NS  (default 5000)  kernel launch cost
 *   FAKECUDA_DEVICE_BYTES (default 8 GiB) device capacity
 *   FAKECUDA_FAIL=<call>:<every-nth|probability>[,...] failure injection
 *   FAKECUDA_PACE       (default 0)     synchronisation waits for p x virtual time
 *   FAKECUDA_RECLAIM    (default 1)     0: migrations keep both copies' pages
 *   FAKECUDA_COHERENT   (default 0)     1: host code can read device memory
 *   FAKECUDA_MMA_PEAK   (default 790e12) FLOP/s of fakecuda_compute_kernel
 *   FAKECUDA_MMA_EFF    (default 0.5)   the share of that peak it reaches
 *   FAKECUDA_COUNTERS_AT_EXIT=FILE  the counters since start, "name=N" lines,
 *                       written by the library's destructor (after every
 *                       atexit handler: a preload's exit flush included)
 * (docs/simulated-device.md has them all) */

int  fakecuda_get_counters(struct fakecuda_counters *out);   /* 0 or CUresult */
void fakecuda_reset_counters(void);

/* A GPU access of [ptr, ptr+len): resident -> HBM cost; remote-mapped
 * (accessed-by) -> link cost per byte; otherwise a fault that migrates the
 * block to the device (evicting LRU managed blocks if needed). 0 or CUresult. */
int fakecuda_access(const void *ptr, size_t len, int write);

/* A "kernel" for cuLaunchKernel that performs fakecuda_access on each range:
 * kernelParams[0] = const struct fakecuda_range *ranges,
 * kernelParams[1] = unsigned nr_ranges.  Accesses happen in stream order. */
struct fakecuda_range {
	CUdeviceptr ptr;
	size_t len;
	int write;
};
CUfunction fakecuda_touch_kernel(void);

/* A paged-attention "kernel", launched as servers launch theirs: it is
 * handed the layer's K and V bases and a block table in device memory, and
 * computes every row's address itself, so host code (kvtier's launch scan)
 * sees only the bases. kernelParams:
 *   [0] CUdeviceptr k         the layer's K base
 *   [1] CUdeviceptr v         its V base (0: K only)
 *   [2] CUdeviceptr table     int32 [nr_seqs][stride]: block ids
 *   [3] CUdeviceptr lens      int32 [nr_seqs]: tokens of each sequence
 *   [4] unsigned nr_seqs
 *   [5] unsigned stride       table entries per sequence
 *   [6] unsigned block_tokens tokens per block (vLLM 16; SGLang's
 *                             req_to_token and llama.cpp's cells: 1)
 *   [7] unsigned row_bytes    bytes of one token's row in K (and in V)
 *   [8] CUdeviceptr ranges    struct fakecuda_range [nr_ranges] accessed as
 *                             they are (the layer's weights); 0: none
 *   [9] unsigned nr_ranges
 * Token j of sequence i is row table[i][j / block_tokens] * block_tokens +
 * j % block_tokens of K and of V; every token but the last is read, the last
 * (the one decoded now) written. Table and lengths are read as a kernel
 * reads memory (device memory through the driver's view) and cost HBM
 * bandwidth like any read. */
CUfunction fakecuda_paged_kernel(void);

/* Where the residency unit (FAKECUDA_UM_PAGE) holding ptr is now: CU_MEM_LOCATION_TYPE_DEVICE
 * (id = device) or CU_MEM_LOCATION_TYPE_HOST_NUMA (id = node).  0 or CUresult. */
int fakecuda_block_location(const void *ptr, CUmemLocationType *type, int *id);

/* ---- added by the driver owner (additions only) ---- */

/* Row i of the driver's cuGetProcAddress table: base name, the first
 * cudaVersion the row serves, the export for flags 0/1 and the export for
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (NULL: same as export).
 * 0, or -1 past the last row. */
int fakecuda_proc_entry(size_t i, const char **base, int *min_version,
			const char **export_name, const char **pt_export_name);

/* Per ordinal (FAKECUDA_DEVICES=N, default 1: ordinals 0..N-1, views of one
 * HBM). Cumulative counters restart at fakecuda_reset_counters; primary_refs
 * and resident_blocks describe the present and are kept. */
struct fakecuda_device_counters {
	uint64_t primary_refs;        /* the ordinal's primary context refcount now */
	uint64_t contexts_made;       /* primary context made active (retain from 0) + cuCtxCreate */
	uint64_t prefetch_blocks_to;  /* managed blocks moved to it by cuMemPrefetchAsync */
	uint64_t accessed_by_advice;  /* SET_ACCESSED_BY calls naming it */
	uint64_t faults;              /* GPU faults taken by its accesses */
	uint64_t resident_blocks;     /* managed blocks resident on it now */
};
/* 0, or CUDA_ERROR_INVALID_VALUE (out NULL) / CUDA_ERROR_INVALID_DEVICE. */
int fakecuda_device_counters(int ordinal, struct fakecuda_device_counters *out);

/* Device memory (cuMemAlloc*, device pools, cuMemMap of a device handle) is
 * hidden from host code, as on a discrete GPU: a dereference at its address
 * faults and process_vm_readv fails. A test that must look at its bytes
 * without a copy (which would run the cost model) asks for the driver's own
 * view of [ptr, ptr+len): a host address valid until the memory is freed or
 * unmapped. Memory host code can read anyway (managed, pinned, registered,
 * host pools): ptr itself. NULL for memory the driver does not know or a
 * range that runs past its allocation. Test-only: no real driver has it. */
void *fakecuda_view(const void *ptr, size_t len);

/* A prefill "kernel" (fc_compute.c): compute-bound work that costs
 * flops / (FAKECUDA_MMA_PEAK x FAKECUDA_MMA_EFF) of device time (defaults
 * 790e12 FLOP/s, the H200's bf16 dense matrix rate as measured, and 0.5),
 * plus the KV rows of a prefill, addressed through a block table in device
 * memory like fakecuda_paged_kernel's. kernelParams:
 *   [0] uint64_t flops        work of this launch
 *   [1] CUdeviceptr k         the layer's K base
 *   [2] CUdeviceptr v         its V base (0: K only)
 *   [3] CUdeviceptr table     int32 [nr_seqs][stride]: block ids
 *   [4] CUdeviceptr lens      int32 [nr_seqs]: tokens after the prefill
 *   [5] CUdeviceptr starts    int32 [nr_seqs]: first token computed now
 *   [6] unsigned nr_seqs
 *   [7] unsigned stride
 *   [8] unsigned block_tokens
 *   [9] unsigned row_bytes
 * Tokens [0, start) of each sequence are read (the cached prefix the new
 * tokens attend to), [start, len) written, at HBM or link cost as any
 * access. FAKECUDA_MMA_EFF is in (0, 1]; a bad value keeps the default. */
CUfunction fakecuda_compute_kernel(void);

/* Test-only: copy len bytes at ptr out of (peek) or into (poke) the
 * driver's store of any allocation it knows, wherever its bytes are now
 * (HBM or host copy of a managed block), with no cost, no counter and no
 * migration: a workload's content stamps and their checks, which stand for
 * what its kernels write and read, must not move memory themselves.
 * 0, or CUDA_ERROR_INVALID_VALUE for memory the driver does not know. */
int fakecuda_peek(const void *ptr, void *out, size_t len);
int fakecuda_poke(void *ptr, const void *in, size_t len);

/* Virtual time (FAKECUDA_VTIME=1; fc_vt.c, docs/simulated-device.md
 * "Virtual time"): streams are queues on engines that overlap, and the
 * threads that join run one at a time, the one furthest behind in virtual
 * time first, so a run gives the same figures every time.
 *   fakecuda_vclock_join   the calling (workload) thread joins; it gives
 *                          its turn away at synchronisations and at
 *                          fakecuda_vclock_host. 0, or -1: virtual time off
 *   fakecuda_vclock_leave  it leaves (before blocking outside the simulation)
 *   fakecuda_vclock_now    ns: the latest virtual time any thread reached
 *   fakecuda_vclock_host   the calling thread spends ns of host time (its
 *                          scheduler's work, or idling until a request)
 *   fakecuda_vclock_charge a library's CPU time in the calling thread,
 *                          scaled by FAKECUDA_CHARGE_SCALE
 *   fakecuda_vclock_wait   a helper thread waits until deadline_ns or a
 *                          wake on key: 0 woken, 1 deadline, -1 not
 *                          simulated (wait in real time)
 *   fakecuda_vclock_wake   wakes the waiters on key at the caller's time
 * kvtier finds these in the loaded driver (a real libcuda has none) and
 * then runs its clock and timed waits on them (base/platform.c). */
int fakecuda_vclock_active(void);     /* 1: the scheduler runs */
int fakecuda_vclock_join(void);
void fakecuda_vclock_leave(void);
uint64_t fakecuda_vclock_now(void);
void fakecuda_vclock_host(uint64_t ns);
void fakecuda_vclock_charge(uint64_t ns);
int fakecuda_vclock_wait(const void *key, uint64_t deadline_ns);
/* A simulated thread about to start a helper reserves the helper's place
 * at its own virtual time; the helper adopts it first thing (or the
 * starter cancels it if the thread could not be made). NULL: nothing to
 * adopt (virtual time off, or the starter is not simulated). */
void *fakecuda_vclock_spawn(void);
void fakecuda_vclock_adopt(void *place);
void fakecuda_vclock_cancel(void *place);
void fakecuda_vclock_wake(const void *key);


/* ---- kernels a workload defines (fc_kernel.c) ----
 * A kernel whose body is host code, with a declared parameter layout and
 * a name: the simulated servers' attention, GEMM and cache kernels.
 * params[i] declares argument i: its size (1..4096 bytes: a by-value
 * struct too) and alignment (1, 2, 4, 8 or 16); at most 1024 of them.
 * cuFuncGetParamInfo answers offset = the previous argument's end rounded
 * up to this one's alignment (as a compiler packs a kernel's parameter
 * buffer); cuFuncGetName answers name (copied). NULL on bad input or when
 * 64 kernels are already defined; handles live until exit. Thread-safe.
 *
 * cuLaunchKernel / cuLaunchKernelEx copy size bytes from kernelParams[i]
 * at the call (the caller may reuse its buffers at once); stream capture
 * records the node with its copy, and cuGraphKernelNodeGetParams hands
 * back kernelParams pointing at the node's copies. When the kernel runs
 * (at submission, or at graph replay: same stream order, engine, launches
 * counter and FAKECUDA_LAUNCH_NS as the built-in kernels), body gets
 * args[i] pointing at a private copy of argument i (16-byte aligned block,
 * laid out as declared; NULL when there are none) and ctx. It runs on the
 * launching thread under the driver's (recursive) lock, with the launch's
 * ordinal current, so it must not synchronise, wait or block, and reaches
 * device, managed and pinned memory only through the calls below. A nonzero
 * return makes the launch (or the graph launch) fail with
 * CUDA_ERROR_ILLEGAL_ADDRESS, as a built-in kernel's bad access does. */
struct fakecuda_param { uint32_t size, align; };
typedef int (*fakecuda_body_fn)(void *const *args, void *ctx);
CUfunction fakecuda_kernel_define(const char *name, const struct fakecuda_param *params,
				  unsigned nr, fakecuda_body_fn body, void *ctx);

/* Inside a body only (elsewhere: CUDA_ERROR_NOT_PERMITTED, and
 * fakecuda_kflops does nothing). 0 or a CUresult.
 *   fakecuda_kread    copies [ptr, ptr+len) out as the kernel reads it:
 *                     device memory through the driver's view (host code
 *                     cannot read it) at HBM cost; managed memory faults,
 *                     migrates or is read remotely exactly as the touch
 *                     kernel's accesses; pinned or registered host memory
 *                     (and its cuMemHostGetDevicePointer address) is read
 *                     in place over the link: bytes_remote and link time
 *                     (zero-copy).
 *   fakecuda_kwrite   the same, writing in's bytes.
 *   fakecuda_kaccess  the cost and residency effects of such an access,
 *                     no data (as a touch kernel range).
 *   fakecuda_kflops   SM time of flops, as fakecuda_compute_kernel charges
 *                     (FAKECUDA_MMA_PEAK x FAKECUDA_MMA_EFF).
 * Every byte must lie in memory the driver knows (an allocation, pinned or
 * registered memory), or nothing is charged and the call returns
 * CUDA_ERROR_ILLEGAL_ADDRESS (also for a VMM mapping without the access);
 * len 0 does nothing; a NULL out/in with len > 0: CUDA_ERROR_INVALID_VALUE. */
int  fakecuda_kread(const void *ptr, void *out, size_t len);
int  fakecuda_kwrite(void *ptr, const void *in, size_t len);
int  fakecuda_kaccess(const void *ptr, size_t len, int write);
void fakecuda_kflops(double flops);
/* The running body's launch grid (gridDimX/Y/Z; 1 1 1 outside a body):
 * kernels that size their work by the grid (one block per token, per
 * request) read their count here. */
void fakecuda_kgrid(unsigned grid[3]);

#endif
