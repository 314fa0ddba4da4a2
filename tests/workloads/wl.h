/* SPDX-License-Identifier: MIT */
/* kvtier workloads: programs that replay the allocation life of LLM servers
 * (vLLM, SGLang, llama.cpp) through the CUDA runtime and then run a
 * decode-like access loop on a SIMULATED GPU (tests/fakecuda).  Test
 * infrastructure, never shipped; every figure they print is "simulated".
 * They use no fake-only symbol except through dlsym, so the same binaries
 * run against the real libcudart: on a real GPU decode runs a real kernel
 * and reports wall-clock figures instead (wl_real.c). */
#ifndef WL_H
#define WL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "fakecuda/fakecuda.h"

#define WL_MIB          (1ull << 20)
#define WL_CHUNK        (2ull << 20)          /* UVM block, PyTorch rounding */
#define WL_BLOCK_TOKENS 16                    /* vLLM block size; span alignment */
#define WL_STAMP_EVERY  (64ull << 10)         /* one data stamp per 64 KiB of KV */
#define WL_MAX_LAYERS   256
#define WL_MAX_GRAPHS 256
#define WL_MAX_ALLOCS   1024

/* Exit codes (documented in docs/workloads.md). */
enum { WL_EXIT_OK = 0, WL_EXIT_FAIL = 1, WL_EXIT_USAGE = 2, WL_EXIT_OOM = 3,
       WL_EXIT_SKIP = 77 };

enum wl_mode { WL_MODE_NATIVE, WL_MODE_UVM, WL_MODE_ORACLE };

struct wl_opts {
	int layers;
	uint64_t kv_bytes;         /* 0: kv_over_hbm x the server's KV budget */
	double kv_over_hbm;
	uint64_t device_bytes;     /* simulated device (FAKECUDA_DEVICE_BYTES) */
	unsigned row_bytes;        /* per token, per layer, for K (and for V) */
	int seqs;                  /* 0: as many as the KV pool holds */
	int ctx_min, ctx_max;      /* cached context per session, tokens */
	int decode_min, decode_max;/* tokens decoded per request */
	double zipf;               /* skew of session popularity */
	int prefix_tokens;         /* shared system prompt, tokens */
	double prefix_share;       /* fraction of sessions that use it */
	int batch;                 /* concurrent requests; 0: active_frac */
	double active_frac;
	int drift_every;           /* steps between popularity shifts (0: never) */
	int steps;                 /* timed decode steps */
	int warmup;                /* untimed decode steps before them */
	int oracle_window;         /* steps of future the oracle plans for */
	int cache_bound;           /* chunks of HBM for the LRU/OPT replay (0: none) */
	double weights_frac;       /* weights as a fraction of the device */
	double act_frac;           /* profiling activations, fraction of device */
	double host_ratio;         /* sglang: host pool / device KV */
	uint64_t seed;
	enum wl_mode mode;
	int quiet;
	int inject_corruption;     /* test of the verifier: damage one stamp */
	int graphs;                /* kernels replayed from CUDA graphs (simulated GPU) */
	int host_tables;           /* --tables host: kernels handed host arrays of row ranges */
};

/* A GPU-visible region: the K (or V) rows of one layer, token-indexed. */
struct wl_region {
	char *base;
	uint64_t nr_tokens;
};

struct wl_alloc {
	char *ptr;
	size_t bytes;
	const char *kind;          /* "weights", "kv", "activations", ... */
	bool managed;
};

struct wl_session {
	uint64_t start;            /* first own token */
	uint32_t ctx;              /* cached tokens */
	uint32_t cap;              /* ctx + decode_max, rounded to a block */
	bool prefix;               /* also reads the shared prefix */
	bool backed_up;            /* sglang: copy present in the host pool */
};

struct wl_req {                    /* one request in one step */
	uint32_t sess;
	uint32_t pos;              /* tokens decoded before this step */
	uint32_t len;              /* tokens it decodes in all: pos+1==len completes */
};

struct wl;
struct wl_ops {
	const char *name;
	const char *summary;       /* one line for --help */
	/* Replays the server's allocation life; fills w->k/v, w->weights and
	 * nr_tokens.  0, or a WL_EXIT_* code. */
	int (*setup)(struct wl *w);
	/* Optional: work around step t (arrivals/completions), e.g. copies. */
	int (*before_step)(struct wl *w, int t);
	int (*after_step)(struct wl *w, int t);
	/* Optional: extra verification at the end; number of bad items. */
	uint64_t (*verify)(struct wl *w, uint64_t *checked);
	/* Optional extra key=value lines. */
	void (*report)(struct wl *w);
};

/* Fake-only entry points, NULL on a real GPU. */
struct wl_fake {
	int (*get_counters)(struct fakecuda_counters *out);
	void (*reset_counters)(void);
	CUfunction (*touch_kernel)(void);
	CUfunction (*paged_kernel)(void);
	int (*block_location)(const void *ptr, CUmemLocationType *type, int *id);
};

struct wl {
	const struct wl_ops *ops;
	struct wl_opts o;
	struct wl_fake fake;
	PFN_cuLaunchKernel_v4000 launch;
	cudaStream_t stream;
	/* --graphs: one executable graph per (ranges array, count) launched */
	struct wl_graph { const void *r; unsigned n; cudaGraphExec_t exec; } graphs[WL_MAX_GRAPHS];
	int nr_graphs;
	uint64_t graph_launches;
	size_t dev_total;          /* cudaMemGetInfo total */
	uint64_t kv_budget;        /* what the server would size natively */
	unsigned table_bt;         /* tokens per block of its block table (0: WL_BLOCK_TOKENS) */
	CUfunction paged_fn;       /* the paged kernel: the stand-in's, or wl_real's PTX */
	bool paged_real;           /* wl_real's: a grid of (sequences, K/V/weights) blocks */

	struct wl_region k[WL_MAX_LAYERS], v[WL_MAX_LAYERS];
	uint64_t nr_tokens;        /* token capacity of each region */
	struct { char *ptr; size_t len; } weights[WL_MAX_LAYERS][4];
	int nr_weights[WL_MAX_LAYERS];

	struct wl_alloc allocs[WL_MAX_ALLOCS];
	int nr_allocs;
	uint64_t bytes_by_kind[8];

	struct wl_session *sess;
	int nr_sess;
	int batch;
	/* schedule: requests of step t are req[step_off[t] .. step_off[t+1]) */
	struct wl_req *req;
	uint32_t *step_off;
	uint64_t nr_arrivals, nr_completions;

	uint64_t tokens;
	uint64_t bytes_tables;          /* block tables uploaded in the timed steps */
	uint64_t window_kv_chunks;      /* 2 MiB KV chunks the timed steps read or write */
	uint64_t window_new_kv_chunks;  /* ... of which the warm-up never did */
	uint64_t window_misses_lru;     /* --cache-bound: window misses of an LRU cache */
	uint64_t window_misses_fifo;    /* ... of a FIFO cache (the driver's order) */
	uint64_t window_misses_opt;     /* ... and of Belady's (evict the furthest next use) */
	struct fakecuda_counters c0, c1;  /* decode phase: before, after */
	void *priv;                /* the workload's own state */
};

/* ---- wl_common.c ---- */
int wl_main(int argc, char **argv, const struct wl_ops *ops);
/* One kernel launch over the ranges behind key, n of them; with --graphs
 * captured once per (key, n) and replayed from then on. */
typedef void (*wl_launch_fn)(struct wl *w, const void *key, unsigned n);
void wl_launch_maybe_graph(struct wl *w, const void *key, unsigned n, wl_launch_fn launch);
void wl_set_prog(const char *name);        /* prefix of wl_die/wl_log lines */
void wl_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void wl_log(const struct wl *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* CUDA call that must succeed (dies naming the call otherwise). */
#define WL_CK(call) wl_check((call), #call, __FILE__, __LINE__)
void wl_check(cudaError_t err, const char *what, const char *file, int line);
/* Allocations recorded by kind; managed per the mode (native mode: cudaMalloc
 * returns the error, the caller reports OOM). */
cudaError_t wl_malloc(struct wl *w, void **p, size_t bytes, const char *kind);
cudaError_t wl_malloc_kv(struct wl *w, void **p, size_t bytes);
void wl_free(struct wl *w, void *p);
void wl_count_bytes(struct wl *w, const char *kind, uint64_t bytes);
int wl_oom(struct wl *w, const char *what, size_t bytes, cudaError_t err);
uint64_t wl_round_up(uint64_t x, uint64_t to);
uint64_t wl_torch_round(uint64_t bytes);   /* PyTorch segment rounding */
/* Fill a device range with the seed's pattern from a host staging buffer. */
void wl_load_pattern(struct wl *w, char *dev, size_t bytes, uint64_t tag, void *staging,
		     size_t staging_bytes, bool async);
uint64_t wl_verify_pattern(struct wl *w, const char *dev, size_t bytes, uint64_t tag);
void wl_pattern(uint64_t seed, uint64_t tag, uint64_t off, unsigned char *out, size_t n);
/* Launch the touch kernel over ranges (no-op without the fake). */
void wl_touch(struct wl *w, const struct fakecuda_range *r, unsigned n);

/* ---- wl_sched.c ---- */
uint64_t wl_rand(uint64_t *state);
double wl_rand01(uint64_t *state);
/* The rank whose cumulative weight cdf[0..n) first reaches u (binary search). */
uint32_t wl_zipf_rank(const double *cdf, int n, double u);
int wl_make_sessions(struct wl *w);
void wl_make_schedule(struct wl *w);

/* ---- wl_decode.c ---- */
unsigned wl_step_ranges(struct wl *w, int t, int layer, struct fakecuda_range *out);
unsigned wl_max_ranges(const struct wl *w);
int wl_decode(struct wl *w);
void wl_stamp_kv(struct wl *w);
uint64_t wl_verify_kv(struct wl *w, uint64_t *checked);
void wl_stamp(uint64_t seed, int region, uint64_t off, unsigned char out[32]);

/* ---- wl_tables.c: device-resident block tables (the default) ---- */
bool wl_tables_on(const struct wl *w);
void wl_tables_init(struct wl *w);
void wl_tables_step(struct wl *w, int t);     /* fill and upload step t's */
void wl_tables_launch(struct wl *w, int l);   /* layer l's paged kernel */
void wl_tables_fini(struct wl *w);

/* ---- wl_real.c: the decode loop on a real GPU (no fakecuda symbols) ---- */
bool wl_real_init(struct wl *w);
int wl_real_decode(struct wl *w);
void wl_real_report(struct wl *w, uint64_t checked, uint64_t bad, double wall_s);

#endif
