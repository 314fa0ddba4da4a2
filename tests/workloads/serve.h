/* SPDX-License-Identifier: MIT */
/* serve-like: a multi-turn serving benchmark on the SIMULATED GPU. Sessions
 * return for turns on a seeded Poisson schedule with Zipf popularity; each
 * turn's prompt is the session's history plus a new user prompt, and the
 * server (a vLLM-like step loop) keeps a paged KV pool with an LRU prefix
 * cache over it. The alternatives (--alt) differ only in where that pool
 * lives (docs/workloads.md "Serving: multi-turn prefix reuse").
 * Test infrastructure: stdio and exit() are fine here. */
#ifndef SERVE_H
#define SERVE_H

#include "wl.h"

enum sv_alt { SV_NATIVE, SV_OFFLOAD, SV_KVTIER, SV_UVM, SV_ORACLE };

struct sv;
struct sv_req;
struct sv_running;

/* A server persona (serve_persona.c, persona_*.c): how one real server's
 * default path talks to the GPU each step, over the same scheduler. Only
 * the KV allocations, the per-step uploads and the kernels differ
 * (docs/workloads.md "Server personas"). */
enum sv_kv_allocs {
	SV_KV_ONE,          /* one allocation: every layer's K and V (llama.cpp) */
	SV_KV_PER_LAYER,    /* one per layer, [K | V] (vLLM's KVCacheTensor) */
	SV_KV_K_THEN_V,     /* L K buffers, then L V buffers (SGLang's MHA pool) */
};

struct sv_persona {
	const char *name;
	const char *follows;           /* the server and path it reproduces */
	enum sv_kv_allocs allocs;
	unsigned lead_rows;            /* rows before slot 0 of each K/V tensor */
	bool zero_fill;                /* the server zeroes its KV at birth */
	/* --alt offload is the server's own: the whole N x pool in plain host
	 * memory, attention on the CPU, no host pool of serve-like's
	 * (llama.cpp --no-kv-offload); false: serve-like's OffloadingConnector */
	bool host_kv_offload;
	/* the server takes a KV pool no larger than free memory gives (SGLang
	 * clamps --max-total-tokens to the profiled value, model_runner.py;
	 * llama.cpp's --fit, on by default, sizes an unset -c to the free
	 * memory): unmodified under kvtier, whose cudaMemGetInfo is the
	 * device's, it keeps the pool that fits; --pool-force asks for N x
	 * anyway (llama.cpp: -c given, which --fit leaves alone) */
	bool pool_capped;
	/* what the server says when it keeps the pool that fits: tokens asked
	 * for (or the model's context), tokens kept; NULL for the others */
	void (*capped_says)(uint32_t asked, uint32_t kept);
	void (*setup)(struct sv *v);   /* buffers and kernels, after the pool */
	void (*step)(struct sv *v);    /* one step's uploads and launches */
	/* a persona with a KV pool of its own beside serve-like's (hybrid:
	 * the sliding-window layers'); NULL for the others */
	int (*pools)(struct sv *v, uint64_t kv_bytes);  /* sizes and allocates every
							 * pool, sets nr_blocks, fit_blocks,
							 * kv_budget, kv_regions */
	uint32_t (*hits)(struct sv *v, const struct sv_req *q, uint32_t blocks);
							/* of a cached prefix, what it can use */
	bool (*admit)(struct sv *v, uint32_t qi, uint32_t hit_blocks);  /* false: wait */
	void (*finish)(struct sv *v, const struct sv_running *r);
	void (*sweep)(struct sv *v);                    /* the end: check its cached blocks,
							 * print its own lines */
};

extern const struct sv_persona *const sv_personas[];
const struct sv_persona *sv_persona_find(const char *name);

struct sv_opts {
	enum sv_alt alt;
	const struct sv_persona *persona;
	double pool_over_hbm;      /* N: the pool the server asks for / what fits */
	bool pool_force;           /* a pool_capped persona asks for N x all the same */
	uint64_t device_bytes;
	double weights_frac;
	double act_frac;
	int layers;
	int window;                /* hybrid: sliding-window tokens */
	bool full_first;           /* hybrid: the full-attention pool first */
	unsigned row_bytes;        /* per token per layer, K (and V) */
	double flops_per_token;    /* prefill: 2 x parameters */
	double attn_flops;         /* prefill: per new token per context token */
	int sys_tokens;            /* shared system prompt (a multiple of 16) */
	int turn_min, turn_max;    /* new user prompt per turn */
	int out_min, out_max;      /* tokens generated per turn */
	int max_ctx;               /* a session past this starts a new conversation */
	int sessions;
	double zipf;
	double rate;               /* requests per simulated second */
	double cpu_attn_gbps;      /* host_kv: the CPU's attention read bandwidth, GB/s */
	double think_s;            /* least gap between a session's turns */
	int requests;
	int max_batch;             /* running requests */
	int prefill_budget;        /* prompt tokens computed per step */
	uint64_t seed;
	int quiet;
	int inject_corruption;
	/* --trace: a public request trace is the schedule (serve_trace.c) */
	const char *trace;
	int trace_start, trace_requests;   /* the window: first row, rows (0: to the end) */
	double time_scale;         /* trace seconds per simulated second (open loop) */
	bool closed;               /* every request at time 0, as fast as served */
	bool trace_stats;          /* print the trace's prefix statistics and exit */
	double slo_ttft_ms, slo_tpot_ms;   /* goodput: a request meets both */
};

/* One turn of one session, fixed by the schedule. */
struct sv_req {
	uint32_t sess;
	uint32_t hist;             /* session tokens before it (after the system prompt) */
	uint32_t prompt;           /* new user tokens */
	uint32_t out;              /* tokens it generates */
	uint32_t gen;              /* conversation number of the session */
	/* --trace (Mooncake): the prompt's SV_TRACE_BLOCK-token blocks, each
	 * named by a dense id standing for its whole prefix; NULL: none shared */
	const uint32_t *hash;
	uint32_t nhash;
	double arrive_s;
	/* filled by the run */
	double send_s, first_s, done_s;
	uint32_t hit_tokens;
};

struct sv_sched {
	struct sv_req *req;
	int nr;
	int nr_sess;
	uint32_t max_stream;       /* longest token stream of one turn */
	/* --trace */
	uint32_t *hash_ids;        /* every request's ids, one array */
	uint32_t nr_ids;           /* distinct ids (dense 0..nr_ids-1) */
	int truncated;             /* rows cut to --max-ctx */
	int first_row;             /* the window's first row of the file */
	const char *format;        /* mooncake or azure */
};

/* ---- serve_sched.c ---- */
void sv_make_schedule(const struct sv_opts *o, struct sv_sched *s);

/* ---- serve_trace.c: --trace ---- */
#define SV_TRACE_BLOCK 512         /* tokens per Mooncake hash id */
#define SV_HASHED (UINT32_MAX - 1) /* sess of a block named by a trace's id */
/* Read the trace's window into s (exits with a message on a bad file). */
void sv_trace_load(const struct sv_opts *o, struct sv_sched *s);
/* --trace-stats: requests, blocks, hit ratios; no GPU needed. */
void sv_trace_stats(const struct sv_opts *o, const struct sv_sched *s);

/* ---- serve_cache.c: the block pool, its LRU queue, the prefix cache ---- */
#define SV_NONE UINT32_MAX

struct sv_key { uint32_t sess, gen, idx; };   /* sess SV_NONE: the system prompt */

struct sv_block {
	uint32_t ref;
	uint32_t prev, next;       /* the free queue (LRU first) while ref == 0 */
	bool keyed, queued;
	struct sv_key key;
};

struct sv_pool {
	uint32_t nr;
	struct sv_block *b;
	uint32_t head, tail, queued;
	/* key -> slot; open addressing */
	uint64_t *hkeys;
	uint32_t *hval;
	uint32_t hcap;
};

void sv_pool_init(struct sv_pool *p, uint32_t nr);
void sv_pool_fini(struct sv_pool *p);
uint32_t sv_pool_find(const struct sv_pool *p, struct sv_key k);
/* Take block id for a request: out of the queue, ref + 1. */
void sv_pool_ref(struct sv_pool *p, uint32_t id);
/* Drop a reference; at zero the block joins the queue's tail (keyed: a
 * cached prefix, LRU) or head (not keyed: free, used first). */
void sv_pool_unref(struct sv_pool *p, uint32_t id);
/* The queue's head for a new use: *evicted gets its old key (keyed false
 * when it had none). SV_NONE when the queue is empty. */
uint32_t sv_pool_take(struct sv_pool *p, struct sv_block *evicted);
/* The same for queued block id (the caller walks the queue from head). */
uint32_t sv_pool_take_at(struct sv_pool *p, uint32_t id, struct sv_block *evicted);
void sv_pool_set_key(struct sv_pool *p, uint32_t id, struct sv_key k);
void sv_pool_drop_key(struct sv_pool *p, uint32_t id);

/* The key of block j (of bt tokens) of turn q's token stream: the system
 * prompt's, the session conversation's, or a trace's (serve_run.c). */
struct sv_key sv_req_key(const struct sv_opts *o, const struct sv_req *q, uint32_t j);

/* ---- the server (serve_run.c), set up by serve_like.c ---- */
struct sv_running {
	uint32_t q;                /* its turn in the schedule */
	uint32_t *blocks;          /* block ids of stream positions [0, kv_tokens) */
	uint32_t nblocks;
	uint32_t prompt;           /* stream tokens of the prompt (system + history + new) */
	uint32_t start;            /* prompt tokens found cached */
	uint32_t produced;         /* output tokens so far */
	bool prefill;              /* its prefill runs this step */
	bool loading;              /* offload: waits for its host hits to land
				    * (vLLM's WAITING_FOR_REMOTE_KVS): not computed */
	uint32_t ready_seq;        /* the side batch that must finish first */
	uint32_t stamp_next;       /* its first block computed here and not yet written */
};

struct sv {
	struct sv_opts o;
	struct sv_sched s;
	const char *prog;
	cudaStream_t stream, side;        /* compute; offload copies, oracle prefetches */
	/* offload: the side stream's work in batches, batch s (from 1) ends
	 * at event ev[s % ev_cap]; batches up to side_done have finished */
	CUevent *ev;                      /* driver events: the stand-in runtime has none */
	CUresult (*ev_create)(CUevent *, unsigned);
	CUresult (*ev_record)(CUevent, CUstream);
	CUresult (*ev_query)(CUevent);
	CUresult (*ev_sync)(CUevent);

	uint32_t ev_cap, side_rec, side_done;
	bool side_open;                   /* batch side_rec + 1 has copies, no event yet */
	uint32_t *store_seq, *load_seq;   /* per GPU block: its last store / load batch */
	uint32_t *mark, mark_gen;         /* per GPU block: a hit of the turn being admitted */
	uint32_t store_ahead;             /* queue blocks kept stored ahead of eviction */
	PFN_cuLaunchKernel_v4000 launch;
	CUfunction paged_fn, compute_fn;
	int (*get_counters)(struct fakecuda_counters *out);
	int (*peek)(const void *ptr, void *out, size_t len);
	int (*poke)(void *ptr, const void *in, size_t len);
	int (*block_location)(const void *ptr, CUmemLocationType *type, int *id);
	size_t dev_total;
	uint64_t weights_bytes, kv_budget;
	struct { char *ptr; size_t len; } weights[WL_MAX_LAYERS * 4 + 1];
	int nr_weights;
	/* the GPU-visible pool: region r (2l: K of layer l, 2l+1: V) at
	 * region[r], block id at region[r] + id * block_region; the persona
	 * decides the allocations (kv[]) the regions lie in. pool: kv[0] */
	char *pool;
	char *region[2 * WL_MAX_LAYERS];
	struct { char *ptr; size_t len; } kv[2 * WL_MAX_LAYERS];
	int nr_kv;
	int kv_regions;                   /* regions of serve-like's block pool (2 x layers,
					   * or the persona's) */
	int region_kv[2 * WL_MAX_LAYERS];          /* the allocation region r lies in */
	uint64_t kv_ch0[2 * WL_MAX_LAYERS + 1];    /* first 2 MiB chunk of each, counted
						    * over the allocations in order */
	uint64_t kv_bytes;                /* the pool's allocations, summed */
	/* persona kernels (fakecuda_kernel_define and the calls a body makes) */
	CUfunction (*kdefine)(const char *name, const struct fakecuda_param *params,
			      unsigned nr, fakecuda_body_fn body, void *ctx);
	int (*kread)(const void *ptr, void *out, size_t len);
	int (*kwrite)(void *ptr, const void *in, size_t len);
	int (*kaccess)(const void *ptr, size_t len, int write);
	void (*kflops)(double flops);
	void (*kgrid)(unsigned dim[3]);     /* the running kernel's grid */
	CUfunction gemm_fn;               /* a layer's dense kernels (personas) */
	void *ps;                         /* the persona's own state */
	int32_t *scratch;                 /* kernel bodies' buffer */
	size_t scratch_n;
	uint64_t graph_launches, graph_updates;
	uint64_t max_upload;              /* the largest one step's uploads summed */
	uint64_t step_upload;
	CUfunction kfn[32];               /* the kernels the persona defined */
	int nr_kfn;
	uint32_t nr_blocks;
	bool pool_capped;                 /* the server kept the pool that fits (pool_capped persona) */
	uint64_t block_region;            /* WL_BLOCK_TOKENS * row_bytes */
	bool managed;
	bool host_kv;                     /* the pool is plain host memory (the persona's
					   * own offload): stamps are read and written
					   * directly, no kernel touches it */
	struct sv_pool gpu;
	/* offload: pinned host pool of (N-1)x, same layout per slot */
	char *host;
	uint32_t nr_host;
	struct sv_pool hostp;
	/* the step loop */
	struct sv_running *run;
	int nr_run;
	int *pending;                     /* turns arrived, not admitted, in order */
	int nr_pending, next_arrival;
	double *sess_free_s;              /* a session's next turn may be sent from */
	bool *sess_busy;
	double idle_s;
	double host_s;                    /* host work charged with virtual time off
					   * (sv_host_work), part of sv_now_s */
	uint64_t v0_ns;
	double pace;
	/* FAKECUDA_VTIME: the host thread is in the simulation; idle time is
	 * spent on its virtual clock (fakecuda_vclock_host) */
	void (*vhost)(uint64_t ns);
	/* block tables: pinned staging, device copies */
	unsigned stride;                  /* entries of vllm-v1-triton's rows: the longest stream */
	unsigned max_step_tokens;         /* tokens one step computes, at most */
	unsigned width;                   /* the other personas' rows: cdiv(max_model_len
					   * = --max-ctx, 16), a multiple of 8 (vLLM's
					   * max_num_blocks_per_req) */
	int32_t *stage;
	int32_t *d_dtable, *d_dlens, *d_ptable, *d_plens, *d_pstarts;
	struct fakecuda_range *d_weights;
	uint8_t *chunk_mark;              /* oracle: chunks of this step */
	/* results */
	uint64_t steps, out_tokens, prompt_tokens, hit_tokens, host_hit_tokens, computed_tokens;
	/* the running requests' KV: blocks in use (referenced) after admission,
	 * at most, and the steps it exceeded the pool that fits (x1, x1.5) */
	uint32_t fit_blocks, running_blocks_max;
	uint64_t steps_over_fit, steps_over_fit15;
	uint64_t bytes_tables, bytes_offload_out, bytes_offload_in, prefill_flops;
	/* blocks taken for new KV, and the bytes of their rows that sat off
	 * the device when taken (a managed pool only): old contents a tier
	 * below the server moves in only for the kernel to overwrite them */
	uint64_t fresh_blocks, fresh_far_bytes;
	uint64_t cpu_attn_bytes;          /* host_kv: KV bytes the CPU's attention read
					   * and wrote, and the time charged for them */
	double cpu_attn_s;
	uint64_t checked, bad;
	int done;
	bool corrupted;
	struct fakecuda_counters c0, c1;
};

int sv_serve(struct sv *v);
double sv_prefill_flops(const struct sv *v);
void sv_before_kernels(struct sv *v);

/* ---- serve_persona.c: what the personas share ---- */
void sv_launch(struct sv *v, CUfunction f, void **args);
void sv_uploaded(struct sv *v, uint64_t bytes);   /* host-to-device bytes of this step */
void sv_persona_facts(struct sv *v);
int sv_request_row(const struct sv *v, int *row_of, int *row_q, uint32_t q, bool *fresh);              /* kernel names and layouts, as the driver reports them */
CUfunction sv_define(struct sv *v, const char *name, const struct fakecuda_param *p,
		     unsigned nr, fakecuda_body_fn body);
int sv_kv_rows(struct sv *v, uintptr_t base, const int32_t *ids, unsigned bt, uint64_t row,
	       uint32_t start, uint32_t len);
void sv_launch_grid(struct sv *v, CUfunction f, unsigned grid, void **args);
void *sv_scratch(struct sv *v, size_t words);     /* int32 words, grown as needed */
void sv_gemm(struct sv *v, int layer, uint64_t flops);
void sv_personas_fini(struct sv *v);

/* ---- serve_fa.c: FlashAttention (by-value params) and the KV write ---- */
struct sv_fa_args {
	CUdeviceptr q, k, v, table, seqused_k, cu_seqlens_q;
	uint64_t page_el, row_el;      /* elements (bf16) per block, per token */
	uint64_t table_stride;         /* table entries per sequence */
	unsigned page, b;              /* tokens per block; sequences */
};
void sv_fa_launch(struct sv *v, int fa3, const struct sv_fa_args *a);
void sv_cache_write(struct sv *v, const char *name, CUdeviceptr k, CUdeviceptr vv,
		    CUdeviceptr slots, unsigned ntok, unsigned page);
void sv_v1_tables_setup(struct sv *v);
unsigned sv_v1_tables(struct sv *v, bool prefill, int32_t *stage, int32_t *d_table,
		      int32_t *d_lens, int32_t *d_starts);
double sv_now_s(struct sv *v);
/* Host work of s seconds the GPU waits for (the persona's CPU ops): on the
 * host thread's virtual clock, or added to sv_now_s without virtual time. */
void sv_host_work(struct sv *v, double s);
void sv_stamp_block(struct sv *v, char *pool, uint32_t nr, uint32_t id, struct sv_key k);
/* One region's stamp of a block at `at` (a persona's own pool). */
void sv_stamp_at(struct sv *v, char *at, struct sv_key k, int region);
uint64_t sv_check_at(struct sv *v, const char *at, uint32_t id, struct sv_key k, int region);
uint64_t sv_check_block(struct sv *v, const char *pool, uint32_t nr, uint32_t id,
			struct sv_key k);

#endif
