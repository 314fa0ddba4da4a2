/* SPDX-License-Identifier: MIT */
/* Evidence of GPU use, behind one operations table (profiler/evidence.c):
 * each source fills only the entry points it supports (NULL = not
 * supported; the core checks). The hook entry points run inside hooks: no
 * malloc, no locks, bounded work per call (a number of chunks, never the
 * size of memory). start/stop/poll run on the migrator thread, in the
 * table's order (a source may rely on the ones before it: sample on cupti);
 * on_fault runs wherever CUPTI delivers its records (the migrator thread
 * or CUPTI's own): lock-free, O(1). docs/profiler.md describes them. */
#ifndef KVT_EVIDENCE_H
#define KVT_EVIDENCE_H

#include <stddef.h>
#include <stdint.h>

enum kvt_prof_src { KVT_SRC_LAUNCH, KVT_SRC_COPY, KVT_SRC_CUPTI, KVT_SRC_SAMPLE, KVT_SRC_TABLES,
		    KVT_SRC__COUNT };

struct kvt_prof_source_ops {
	const char *name;
	int (*start)(void);                   /* 0, or -errno (source then off) */
	/* at exit; go_on(): whether its next driver or CUPTI call may be made */
	void (*stop)(int (*go_on)(void));
	void (*poll)(void);                   /* once per epoch */
	void (*on_launch)(uint64_t func, void **params, uint64_t stream);
	void (*on_copy)(uint64_t dst, uint64_t src, uint64_t bytes);
	void (*on_memset)(uint64_t dst, uint64_t bytes);
	void (*on_fault)(uint64_t addr);      /* a GPU page fault CUPTI reported */
};

/* Bounds of the launch scan (per cuLaunchKernel). */
#define KVT_LAUNCH_SLOTS        16     /* parameter slots read (without a layout) */
#define KVT_LAUNCH_VALUES       32     /* values looked at per launch */
#define KVT_LAUNCH_FOLLOW       2      /* host pointers followed one level */
#define KVT_LAUNCH_WINDOW       1024   /* bytes read behind a followed pointer */
#define KVT_LAUNCH_SPAN         4096   /* the window rotates over this many bytes */
#define KVT_LAUNCH_MAX_CHUNKS   64     /* chunks credited */
#define KVT_LAUNCH_SPREAD       4      /* chunks sampled for a whole-allocation hit */
#define KVT_LAUNCH_SAMPLE       8      /* one launch in this many scanned (per thread, on average: random gaps) */
#define KVT_COPY_MAX_CHUNKS     64
#define KVT_SCALAR_MAX          (1u << 24)  /* larger non-pointer words are not strides */

/* "launch,copy,cupti" -> bit mask of enum kvt_prof_src; 0 or -EINVAL
 * (the offending name is copied into bad). */
int kvt_prof_sources_parse(const char *list, unsigned *mask, char *bad, unsigned bad_len);
void kvt_prof_sources_enable(unsigned mask);
unsigned kvt_prof_sources_enabled(void);

/* Hooks (inside the recorded path). */
/* func: the CUfunction (its parameter layout, profiler/params.h, lets the
 * scan read the arguments without a system call; 0 = unknown). */
void kvt_prof_on_launch(uint64_t func, void **params, uint64_t stream);
/* fn(stream) = 1 when stream is being captured into a graph: a launch
 * there does not run, and gives no evidence (the graph's launches will). */
void kvt_prof_set_capturing(int (*fn)(uint64_t stream));
/* fn(addr) = 1 when addr lies in device memory the application allocated
 * (host code cannot read it on a discrete GPU): the launch scan then never
 * reads behind it. Called at most KVT_LAUNCH_FOLLOW times per scanned
 * launch (KVT_GRAPH_FOLLOW per scanned graph launch); NULL: no test. */
void kvt_prof_set_device_test(int (*fn)(uint64_t addr));
/* The device test above: 1 (device memory), 0 (not), -1 (no test set). */
int kvt_prof_device_memory(uint64_t addr);
/* Up to len bytes at src, read through process_vm_readv (a bad address is
 * a short read, never a fault); returns the bytes read. */
size_t kvt_prof_read_self(void *dst, uint64_t src, size_t len);
void kvt_prof_on_copy(uint64_t dst, uint64_t src, uint64_t bytes);
void kvt_prof_on_memset(uint64_t dst, uint64_t bytes);
/* From the CUPTI source: a GPU page fault at addr (its record's address). */
void kvt_prof_on_fault(uint64_t addr);

/* CUDA graphs (the launch source): a graph's kernel parameters are read
 * when it is instantiated (whole, by the function's parameter layout where
 * the driver gives it), and credited when it is launched.
 * kvt_prof_graph_scan adds one kernel node's parameters to g (start with
 * g->exec set, g->nr and g->ntab 0); kvt_prof_graph_publish keeps what it
 * found for g->exec (replacing what that handle had);
 * kvt_prof_graph_forget drops it (cuGraphExecDestroy). A launch of a kept
 * graph is sampled like a kernel launch. The other device pointers a node
 * names beside a tracked tensor are kept too (tab): where one is a block
 * table the tables source reads (a copy's or a decoder's destination), a
 * sampled launch pairs it with the node's tensors again, as an eager launch
 * of the node would (profiler/tables.c: a pair unused for a while
 * expires). */
#define KVT_GRAPH_VALUES     256   /* tensors and followed pointers kept per graph */
#define KVT_GRAPH_TABLES     16    /* table candidates kept per graph */
#define KVT_GRAPH_FOLLOW     8     /* pointers followed per credited graph launch */
#define KVT_GRAPH_MAX_CHUNKS 256   /* chunks credited by the followed windows */
struct kvt_graph_ev {
	uint64_t exec;
	uint32_t nr, ntab;
	uint64_t val[KVT_GRAPH_VALUES];
	uint16_t with[KVT_GRAPH_VALUES];   /* of a tensor: the tab[] named beside it (bits) */
	uint64_t tab[KVT_GRAPH_TABLES];
};
/* Whether graphs can give evidence now: the launch source on and something
 * tracked (else instantiation skips the walk of the graph's nodes). */
int kvt_prof_graphs_wanted(void);
void kvt_prof_graph_scan(struct kvt_graph_ev *g, uint64_t func, void **params);
void kvt_prof_graph_publish(const struct kvt_graph_ev *g);
void kvt_prof_graph_forget(uint64_t exec);
void kvt_prof_on_graph_launch(uint64_t exec);
/* Instantiated graphs kept with evidence since the start, and those with
 * evidence that found no room. */
uint64_t kvt_prof_graphs_kept(void);
uint64_t kvt_prof_graphs_dropped(void);

/* Early epochs: fn is called (on the launching thread; it must not block)
 * after every `every` launches that produced evidence. */
void kvt_prof_set_kick(void (*fn)(void), unsigned every);

/* At exit, from a stop that gave up waiting for the migrator thread: a call
 * of the sources' still under way on it (a CUPTI flush delivering buffers)
 * makes no further CUPTI call; kvt_prof_left() says whether that happened. */
void kvt_prof_leave(void);
int kvt_prof_left(void);

/* Migrator thread. */
void kvt_prof_sources_start(void);
void kvt_prof_sources_poll(void);
/* Polls of the sources completed so far (the migrator polls once an
 * epoch): what a source's records of an event are in by, counted in
 * polls, whatever the clock (a real one, or a simulator's). */
uint32_t kvt_prof_polls(void);
/* At exit, each source while go_on() says the process still waits for
 * this thread (a stop that timed out lets the exit tear CUPTI down). */
void kvt_prof_sources_stop(int (*go_on)(void));

const char *kvt_prof_source_name(unsigned src);
/* Chunks credited by a source (evidence events), and its state text. */
uint64_t kvt_prof_events(unsigned src);
void kvt_prof_count(unsigned src, uint64_t n);
const char *kvt_prof_source_state(unsigned src);
void kvt_prof_set_state(unsigned src, const char *state);

/* The CUPTI source (profiler/src_cupti.c). */
extern const struct kvt_prof_source_ops kvt_src_cupti;
/* Records CUPTI delivered (all kinds), for the counters. */
uint64_t kvt_cupti_records(void);
/* KVTIER_ADMIT=fault or auto: host-to-device migrations that kvtier did
 * not prefetch (GPU faults) mark their chunks as in HBM, and GPU faults on
 * chunks believed far (and not mapped by kvtier) are counted. */
void kvt_cupti_track_fault_ins(int on);
uint64_t kvt_cupti_far_faults(void);
/* GPU page-fault records CUPTI delivered on redirected ranges placed for
 * device dev (ordinals 0..KVT_CUPTI_FAULT_DEVS-1) since the start; dev < 0:
 * every GPU page-fault record, tracked memory or not. */
#define KVT_CUPTI_FAULT_DEVS 8
uint64_t kvt_cupti_faults(int32_t dev);
/* Bytes the driver migrated for device dev's redirected ranges over the
 * link (CUPTI's HtoD and DtoH transfer records, every cause: prefetches,
 * GPU faults, evictions) since the start; 0 for dev out of range. */
void kvt_cupti_link_bytes(int32_t dev, uint64_t *to_hbm, uint64_t *to_host);
/* Bytes the driver moved on its own for dev's redirected ranges since the
 * start (dev < 0: every device): brought into HBM on GPU faults (host to
 * device, any cause but a prefetch) and evicted from HBM (device to host,
 * cause EVICTION). Exact, from CUPTI's records; 0 for dev out of range. */
void kvt_cupti_driver_bytes(int32_t dev, uint64_t *fault_in, uint64_t *evicted);

/* The region-sampling source (profiler/src_sample.c, docs/profiler.md). */
extern const struct kvt_prof_source_ops kvt_src_sample;

#endif
