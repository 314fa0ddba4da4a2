/* SPDX-License-Identifier: MIT */
/* serve-like: the server's step loop. Each step admits arrived turns FCFS
 * while the pool, the batch and the prefill budget allow, looks their
 * prompts up in the prefix cache (hits reuse cached blocks; the offload
 * alternative copies host hits back), prefills the rest with the compute
 * kernel and decodes every running request one token with the paged
 * kernel; both read device-resident block tables uploaded from pinned
 * staging each step. Content stamps (fakecuda_poke/peek) stand for what
 * the kernels write and read; every reused block's stamps are checked. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

#define SV_BT WL_BLOCK_TOKENS

/* ---- time: the device's virtual clock plus the idle gaps skipped ---- */

double sv_now_s(struct sv *v)
{
	struct fakecuda_counters c;
	v->get_counters(&c);
	return (double)(c.virtual_ns - v->v0_ns) / 1e9 + v->idle_s + v->host_s;
}

void sv_host_work(struct sv *v, double s)
{
	if (s <= 0)
		return;
	if (v->vhost)                   /* the GPU's next work is submitted after it */
		v->vhost((uint64_t)llround(s * 1e9));
	else                            /* the device's clock is the GPU's work alone */
		v->host_s += s;
}

static void sv_idle_until(struct sv *v, double t)
{
	double gap = t - sv_now_s(v);
	if (gap <= 0)
		return;
	if (v->vhost) {                 /* virtual time: the host thread idles on its clock */
		v->vhost((uint64_t)ceil(gap * 1e9) + 1);   /* past t, never short of it */
		return;
	}
	v->idle_s += gap;
	if (v->pace > 0) {              /* the migrator lives in real time */
		double real = gap * v->pace;
		struct timespec ts = { (time_t)real, (long)((real - floor(real)) * 1e9) };
		nanosleep(&ts, NULL);
	}
}

/* ---- content stamps: 32 bytes at the start of each region of a block ---- */

static void sv_stamp(uint64_t seed, struct sv_key k, int region, unsigned char out[32])
{
	uint64_t tag = ((uint64_t)k.sess << 40) ^ ((uint64_t)k.gen << 28) ^ k.idx;
	memcpy(out, "KVSV", 4);
	memcpy(out + 4, &region, 4);
	memcpy(out + 8, &tag, 8);
	wl_pattern(seed, tag * 131 + (uint64_t)region, 0, out + 16, 16);
}

/* Block id's bytes in region r: of the GPU pool where the persona put the
 * region, of the host pool (offload) packed region after region. */
static char *sv_at(struct sv *v, const char *pool, uint32_t nr, uint32_t id, int region)
{
	if (pool == v->pool)
		return v->region[region] + (uint64_t)id * v->block_region;
	return (char *)pool + ((uint64_t)region * nr + id) * v->block_region;
}

/* The pool's bytes, quietly: the driver's store, or plain host memory
 * (host_kv: a persona's own offload, which no kernel reads) directly. */
static int sv_kv_poke(struct sv *v, char *at, const void *in, size_t len)
{
	if (!v->host_kv)
		return v->poke(at, in, len);
	memcpy(at, in, len);
	return 0;
}

static int sv_kv_peek(struct sv *v, const char *at, void *out, size_t len)
{
	if (!v->host_kv)
		return v->peek(at, out, len);
	memcpy(out, at, len);
	return 0;
}

void sv_stamp_at(struct sv *v, char *at, struct sv_key k, int region)
{
	unsigned char st[32];
	sv_stamp(v->o.seed, k, region, st);
	if (sv_kv_poke(v, at, st, sizeof st))
		wl_die("fakecuda_poke failed at %p", (void *)at);
}

uint64_t sv_check_at(struct sv *v, const char *at, uint32_t id, struct sv_key k, int region)
{
	unsigned char st[32], got[32];
	sv_stamp(v->o.seed, k, region, st);
	v->checked++;
	if (!sv_kv_peek(v, at, got, sizeof got) && !memcmp(st, got, sizeof st))
		return 0;
	if (v->bad < 8)
		fprintf(stderr, "%s: CORRUPTION: block %u region %d (session %d, "
			"conversation %u, block %u of its stream) lost its stamp\n",
			v->prog, id, region, k.sess == SV_NONE ? -1 : (int)k.sess, k.gen, k.idx);
	v->bad++;
	return 1;
}

void sv_stamp_block(struct sv *v, char *pool, uint32_t nr, uint32_t id, struct sv_key k)
{
	for (int r = 0; r < v->kv_regions; r++)
		sv_stamp_at(v, sv_at(v, pool, nr, id, r), k, r);
}

uint64_t sv_check_block(struct sv *v, const char *pool, uint32_t nr, uint32_t id,
			struct sv_key k)
{
	uint64_t bad = 0;
	for (int r = 0; r < v->kv_regions; r++)
		bad += sv_check_at(v, sv_at(v, pool, nr, id, r), id, k, r);
	return bad;
}

/* ---- the prefix cache ---- */

/* A trace's block inside the prompt's named ids is keyed by its id (equal
 * ids: equal prefixes) and its place in the id's SV_TRACE_BLOCK tokens;
 * any other block (an Azure row's, the output's, a partial one) by its
 * request alone, never shared. */
struct sv_key sv_req_key(const struct sv_opts *o, const struct sv_req *q, uint32_t j)
{
	if (q->hash) {
		const uint32_t per = SV_TRACE_BLOCK / SV_BT;
		if ((j + 1) * SV_BT <= q->prompt && j / per < q->nhash)
			return (struct sv_key){ SV_HASHED, q->hash[j / per], j % per };
		return (struct sv_key){ q->sess, q->gen, j };
	}
	if (j < (uint32_t)o->sys_tokens / SV_BT)
		return (struct sv_key){ SV_NONE, 0, j };
	return (struct sv_key){ q->sess, q->gen, j };
}

static struct sv_key sv_key_of(const struct sv *v, const struct sv_req *q, uint32_t j)
{
	return sv_req_key(&v->o, q, j);
}

/* ---- the side stream's batches (offload): copies in flight, in order ---- */

/* The batch that copies issued now belong to. */
static uint32_t sv_side_batch(struct sv *v)
{
	v->side_open = true;
	return v->side_rec + 1;
}

/* Close the open batch with an event (the oldest is waited for when the
 * ring is full: not seen in these runs). */
static void sv_side_flush(struct sv *v)
{
	if (!v->side_open)
		return;
	while (v->side_rec + 1 - v->side_done > v->ev_cap - 1) {
		if (v->ev_sync(v->ev[(v->side_done + 1) % v->ev_cap]) != CUDA_SUCCESS)
			wl_die("cuEventSynchronize failed");
		v->side_done++;
	}
	v->side_rec++;
	if (v->ev_record(v->ev[v->side_rec % v->ev_cap], (CUstream)v->side) != CUDA_SUCCESS)
		wl_die("cuEventRecord failed");
	v->side_open = false;
}

/* Whether batch seq has finished (0: none); cuEventQuery, no wait. */
static bool sv_side_done(struct sv *v, uint32_t seq)
{
	if (seq <= v->side_done)
		return true;
	sv_side_flush(v);
	while (v->side_done < v->side_rec) {
		CUresult e = v->ev_query(v->ev[(v->side_done + 1) % v->ev_cap]);
		if (e == CUDA_ERROR_NOT_READY)
			break;
		if (e != CUDA_SUCCESS)
			wl_die("cuEventQuery failed: CUresult %d", (int)e);
		v->side_done++;
	}
	return seq <= v->side_done;
}

/* Nothing else can run: wait for every copy on the side stream. */
static void sv_side_wait(struct sv *v)
{
	sv_side_flush(v);
	WL_CK(cudaStreamSynchronize(v->side));
	v->side_done = v->side_rec;
}

/* Copy block src of one pool to block dst of the other, every region, on
 * the side stream (the OffloadingConnector's transfers). */
static void sv_copy_block(struct sv *v, bool out, uint32_t gpu_id, uint32_t host_id)
{
	for (int r = 0; r < v->kv_regions; r++) {
		char *g = sv_at(v, v->pool, v->nr_blocks, gpu_id, r);
		char *h = sv_at(v, v->host, v->nr_host, host_id, r);
		WL_CK(cudaMemcpyAsync(out ? h : g, out ? g : h, v->block_region,
				      out ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
				      v->side));
	}
	if (out)
		v->bytes_offload_out += (uint64_t)v->kv_regions * v->block_region;
	else
		v->bytes_offload_in += (uint64_t)v->kv_regions * v->block_region;
}

/* ---- offload: stores ahead of eviction, blocks freed once stored ---- */

/* A cached GPU block whose prefix the host pool does not have yet. */
static bool sv_unstored(const struct sv *v, uint32_t id)
{
	const struct sv_block *b = &v->gpu.b[id];
	return v->o.alt == SV_OFFLOAD && v->nr_host && b->keyed &&
	       sv_pool_find(&v->hostp, b->key) == SV_NONE;
}

/* Start copying block id's prefix out to the host pool, in the background.
 * The host pool has its key at once: a host hit before the copy lands is
 * loaded after it on the same stream. */
static void sv_store(struct sv *v, uint32_t id)
{
	struct sv_block hold;
	uint32_t h = sv_pool_take(&v->hostp, &hold);
	if (h == SV_NONE)
		return;
	sv_copy_block(v, true, id, h);
	sv_pool_set_key(&v->hostp, h, v->gpu.b[id].key);
	sv_pool_unref(&v->hostp, h);
	v->store_seq[id] = sv_side_batch(v);
}

/* A queued block may take a new use: no copy from or to it in flight, and
 * its prefix (if any) is on the host or cannot go there (vLLM frees an
 * offloaded block only once its store finished). */
static bool sv_takeable(struct sv *v, uint32_t id)
{
	return sv_side_done(v, v->store_seq[id]) && sv_side_done(v, v->load_seq[id]) &&
	       (!sv_unstored(v, id) || !v->hostp.queued);
}

/* Whether the queue holds want takeable blocks besides the turn's own hits
 * (v->mark == v->mark_gen); start is true: the unstored blocks met on the
 * way start their stores, as many as are missing. */
static bool sv_enough(struct sv *v, uint32_t want, bool start)
{
	uint32_t got = 0;
	for (uint32_t id = v->gpu.head; id != SV_NONE && got < want; id = v->gpu.b[id].next) {
		if (v->mark[id] == v->mark_gen)
			continue;
		if (sv_takeable(v, id)) {
			got++;
		} else if (start) {
			if (sv_unstored(v, id) && sv_side_done(v, v->store_seq[id]))
				sv_store(v, id);
			got++;                           /* it will be, soon */
		}
	}
	return got >= want;
}

/* After the step's kernels: the first blocks of the queue, the next to be
 * evicted, start their stores while the kernels run. */
static void sv_store_ahead(struct sv *v)
{
	uint32_t n = 0;
	for (uint32_t id = v->gpu.head; id != SV_NONE && n < v->store_ahead;
	     id = v->gpu.b[id].next, n++)
		if (sv_unstored(v, id) && sv_side_done(v, v->store_seq[id]))
			sv_store(v, id);
	sv_side_flush(v);
}

/* A GPU block for a new use: the first takeable one of the queue (its
 * head, but for offload's blocks still being stored). *from: where the
 * admission's previous take left the walk (SV_NONE: the head); the blocks
 * before it were not takeable then and are not now (one admission neither
 * finishes a copy nor frees a host block), so a long prompt does not walk
 * them again for each of its blocks. */
static uint32_t sv_take_gpu(struct sv *v, uint32_t *from)
{
	struct sv_block old;
	uint32_t id = *from != SV_NONE && v->gpu.b[*from].queued ? *from : v->gpu.head;
	while (id != SV_NONE && !sv_takeable(v, id))
		id = v->gpu.b[id].next;
	*from = id != SV_NONE ? v->gpu.b[id].next : SV_NONE;
	id = sv_pool_take_at(&v->gpu, id, &old);
	if (id == SV_NONE)
		wl_die("block pool exhausted (admission should have waited)");
	v->fresh_blocks++;
	for (int r = 0; r < v->kv_regions; r++) {
		CUmemLocationType type = CU_MEM_LOCATION_TYPE_INVALID;
		int dev = 0;
		if (!v->block_location(sv_at(v, v->pool, v->nr_blocks, id, r), &type, &dev) &&
		    type != CU_MEM_LOCATION_TYPE_DEVICE && type != CU_MEM_LOCATION_TYPE_INVALID)
			v->fresh_far_bytes += v->block_region;
	}
	return id;
}

/* Prompt tokens of turn q found cached, block by block from the start
 * (at least one token is always computed); *gpu_hits: of them in HBM's
 * pool, *queued_hits: of those sitting in the queue. */
static uint32_t sv_lookup(struct sv *v, const struct sv_req *q, uint32_t prompt,
			  uint32_t *gpu_hits, uint32_t *queued_hits)
{
	uint32_t j = 0;
	*gpu_hits = *queued_hits = 0;
	for (; (j + 1) * SV_BT <= prompt - 1; j++) {
		struct sv_key k = sv_key_of(v, q, j);
		uint32_t id = sv_pool_find(&v->gpu, k);
		if (id != SV_NONE) {
			(*gpu_hits)++;
			*queued_hits += v->gpu.b[id].queued;
			continue;
		}
		if (v->o.alt != SV_OFFLOAD || sv_pool_find(&v->hostp, k) == SV_NONE)
			break;
	}
	uint32_t cached = j;
	if (v->o.persona->hits && (j = v->o.persona->hits(v, q, cached)) != cached) {
		*gpu_hits = *queued_hits = 0;            /* recount what it can use */
		for (uint32_t i = 0; i < j; i++) {
			uint32_t id = sv_pool_find(&v->gpu, sv_key_of(v, q, i));
			*gpu_hits += id != SV_NONE;
			*queued_hits += id != SV_NONE && v->gpu.b[id].queued;
		}
	}
	return j;
}

/* ---- admission ---- */

static uint32_t sv_prompt_tokens(const struct sv *v, const struct sv_req *q)
{
	return (uint32_t)v->o.sys_tokens + q->hist + q->prompt;
}

static bool sv_admit(struct sv *v, int qi)
{
	struct sv_req *q = &v->s.req[qi];
	uint32_t prompt = sv_prompt_tokens(v, q);
	uint32_t kv_tokens = prompt + q->out - 1;
	uint32_t need = (kv_tokens + SV_BT - 1) / SV_BT, gpu_hits, queued_hits;
	uint32_t hit_blocks = sv_lookup(v, q, prompt, &gpu_hits, &queued_hits);
	if (need - gpu_hits > v->gpu.queued - queued_hits)
		return false;
	if (v->o.alt == SV_OFFLOAD) {      /* blocks still to be stored are not free */
		v->mark_gen++;
		for (uint32_t j = 0; j < hit_blocks; j++) {
			uint32_t id = sv_pool_find(&v->gpu, sv_key_of(v, q, j));
			if (id != SV_NONE)
				v->mark[id] = v->mark_gen;
		}
		sv_enough(v, need - gpu_hits, true);
		sv_side_flush(v);
		if (!sv_enough(v, need - gpu_hits, false))
			return false;
		/* the stores took host blocks: a host hit counted above may be gone */
		hit_blocks = sv_lookup(v, q, prompt, &gpu_hits, &queued_hits);
		if (need - gpu_hits > v->gpu.queued - queued_hits)
			return false;
	}
	if (v->o.persona->admit && !v->o.persona->admit(v, (uint32_t)qi, hit_blocks))
		return false;
	struct sv_running *r = &v->run[v->nr_run];
	*r = (struct sv_running){ .q = (uint32_t)qi, .nblocks = need, .prompt = prompt,
				  .start = hit_blocks * SV_BT, .prefill = true,
				  .stamp_next = hit_blocks };
	r->blocks = malloc(sizeof *r->blocks * need);
	if (!r->blocks)
		wl_die("out of host memory");
	/* first hold every hit, so that taking new blocks evicts none of them */
	for (uint32_t j = 0; j < hit_blocks; j++) {
		struct sv_key k = sv_key_of(v, q, j);
		uint32_t id = sv_pool_find(&v->gpu, k);
		r->blocks[j] = id;
		if (id != SV_NONE)
			sv_pool_ref(&v->gpu, id);
		else                                     /* offload: a host hit */
			sv_pool_ref(&v->hostp, sv_pool_find(&v->hostp, k));
	}
	uint32_t from = SV_NONE;
	for (uint32_t j = 0; j < need; j++) {
		struct sv_key k = sv_key_of(v, q, j);
		if (j < hit_blocks && r->blocks[j] != SV_NONE) {   /* in HBM's pool */
			sv_check_block(v, v->pool, v->nr_blocks, r->blocks[j], k);
			if (!sv_side_done(v, v->load_seq[r->blocks[j]]) &&   /* another turn's load */
			    v->load_seq[r->blocks[j]] > r->ready_seq)
				r->ready_seq = v->load_seq[r->blocks[j]];
			continue;
		}
		uint32_t id = sv_take_gpu(v, &from);
		if (j < hit_blocks) {                    /* copied back from the host */
			uint32_t h = sv_pool_find(&v->hostp, k);
			sv_copy_block(v, false, id, h);
			v->load_seq[id] = r->ready_seq = sv_side_batch(v);
			sv_pool_unref(&v->hostp, h);
			sv_pool_set_key(&v->gpu, id, k);
			sv_check_block(v, v->pool, v->nr_blocks, id, k);
			v->host_hit_tokens += SV_BT;
		}                                        /* else computed: stamped once written */
		r->blocks[j] = id;
	}
	sv_side_flush(v);
	/* a turn whose prefix is still loading waits; the others go on */
	r->loading = !sv_side_done(v, r->ready_seq);
	r->prefill = !r->loading;
	v->prompt_tokens += prompt;
	v->hit_tokens += r->start;
	v->computed_tokens += prompt - r->start;
	q->hit_tokens = r->start;
	v->nr_run++;
	return true;
}

static void sv_admit_all(struct sv *v, double now)
{
	while (v->next_arrival < v->s.nr && v->s.req[v->next_arrival].arrive_s <= now)
		v->pending[v->nr_pending++] = v->next_arrival++;
	int budget = v->o.prefill_budget, admitted = 0;
	for (int i = 0; i < v->nr_pending;) {
		struct sv_req *q = &v->s.req[v->pending[i]];
		if (v->sess_busy[q->sess] || v->sess_free_s[q->sess] > now) {
			i++;                             /* the user has not sent it yet */
			continue;
		}
		/* the budget is checked against the whole prompt (the lookup comes
		 * later) and charged with what is computed */
		uint32_t todo = sv_prompt_tokens(v, q);
		if (v->nr_run >= v->o.max_batch || (admitted && (int)todo > budget))
			break;
		if (q->send_s == 0)
			q->send_s = fmax(q->arrive_s, v->sess_free_s[q->sess]);
		if (!sv_admit(v, v->pending[i]))
			break;                           /* FCFS: wait for blocks */
		budget -= (int)(sv_prompt_tokens(v, q) - q->hit_tokens);
		admitted++;
		v->sess_busy[q->sess] = true;
		memmove(&v->pending[i], &v->pending[i + 1],
			sizeof *v->pending * (size_t)(v->nr_pending - i - 1));
		v->nr_pending--;
	}
}

/* The earliest time a pending or future turn can be sent. */
static double sv_next_send(const struct sv *v)
{
	double t = INFINITY;
	for (int i = 0; i < v->nr_pending; i++) {
		const struct sv_req *q = &v->s.req[v->pending[i]];
		if (!v->sess_busy[q->sess])
			t = fmin(t, fmax(q->arrive_s, v->sess_free_s[q->sess]));
	}
	if (v->next_arrival < v->s.nr)
		t = fmin(t, v->s.req[v->next_arrival].arrive_s);
	return t;
}

/* ---- one step's kernels (the persona's), with the alternatives' work ---- */

double sv_prefill_flops(const struct sv *v)
{
	double f = 0;
	for (int i = 0; i < v->nr_run; i++) {
		const struct sv_running *r = &v->run[i];
		if (!r->prefill)
			continue;
		double n = r->prompt - r->start;
		f += n * v->o.flops_per_token + n * (r->start + n / 2) * v->o.attn_flops;
	}
	return f;
}

/* Global chunk ch (counted over the pool's allocations in order): its
 * address and length. */
static char *sv_chunk(const struct sv *v, uint64_t ch, size_t *len)
{
	int i = 0;
	while (i + 1 < v->nr_kv && ch >= v->kv_ch0[i + 1])
		i++;
	uint64_t off = (ch - v->kv_ch0[i]) * WL_CHUNK;
	*len = (size_t)(v->kv[i].len - off < WL_CHUNK ? v->kv[i].len - off : WL_CHUNK);
	return v->kv[i].ptr + off;
}

static void sv_mark_chunk(struct sv *v, const char *p)
{
	int i = 0;
	while (i + 1 < v->nr_kv && !(p >= v->kv[i].ptr && p < v->kv[i].ptr + v->kv[i].len))
		i++;
	v->chunk_mark[v->kv_ch0[i] + (uint64_t)(p - v->kv[i].ptr) / WL_CHUNK] = 1;
}

static bool sv_resident(struct sv *v, uint64_t ch)
{
	CUmemLocationType type = CU_MEM_LOCATION_TYPE_INVALID;
	int id = 0;
	size_t len;
	return !v->block_location(sv_chunk(v, ch, &len), &type, &id) &&
	       type == CU_MEM_LOCATION_TYPE_DEVICE;
}

/* oracle: the chunks this step's kernels use that are not in HBM are
 * prefetched on the side stream, a copy engine beside the SMs, demoting
 * chunks the step does not use when HBM is full (v->chunk_mark: one byte
 * per 2 MiB chunk of the pool); what still does not fit is read over the
 * link (the pool is mapped for the GPU). The kernels need no event: one
 * that reaches a chunk still in flight waits for it (in virtual time; on
 * the serial device it has landed at submission). The previous step's
 * kernels are done (its end synchronised the compute stream), so a demoted
 * chunk is one nothing running reads. */
static void sv_oracle_prefetch(struct sv *v)
{
	struct cudaMemLocation dev = { .type = cudaMemLocationTypeDevice, .id = 0 };
	struct fakecuda_counters c;
	v->get_counters(&c);
	uint64_t native = c.device_used_bytes - c.managed_resident_bytes;
	uint64_t cap = c.device_capacity_bytes > native + 4 * WL_CHUNK
		     ? c.device_capacity_bytes - native - 4 * WL_CHUNK : 0;
	uint64_t room = cap > c.managed_resident_bytes ? (cap - c.managed_resident_bytes) / WL_CHUNK : 0;
	uint64_t nc = v->kv_ch0[v->nr_kv];
	memset(v->chunk_mark, 0, nc);
	for (int i = 0; i < v->nr_run; i++)
		for (uint32_t j = 0; j < v->run[i].nblocks && !v->run[i].loading; j++)
			for (int rg = 0; rg < v->kv_regions; rg++) {
				const char *p = sv_at(v, v->pool, v->nr_blocks, v->run[i].blocks[j], rg);
				sv_mark_chunk(v, p);
				sv_mark_chunk(v, p + v->block_region - 1);
			}
	struct cudaMemLocation host = { .type = cudaMemLocationTypeHost, .id = 0 };
	uint64_t victim = 0;
	for (uint64_t ch = 0; ch < nc; ch++) {
		if (!v->chunk_mark[ch] || sv_resident(v, ch))
			continue;
		while (!room && victim < nc) {     /* demote a chunk this step does not use */
			if (!v->chunk_mark[victim] && sv_resident(v, victim)) {
				size_t len;
				char *p = sv_chunk(v, victim, &len);
				WL_CK(cudaMemPrefetchAsync(p, len, host, 0, v->side));
				room++;
			}
			victim++;
		}
		if (!room)
			break;
		size_t len;
		char *p = sv_chunk(v, ch, &len);
		WL_CK(cudaMemPrefetchAsync(p, len, dev, 0, v->side));
		room--;
	}
}

/* Called by the persona's step after its uploads, before its first
 * launch: the oracle's prefetches go on the copy engine behind them. */
void sv_before_kernels(struct sv *v)
{
	if (v->o.alt == SV_ORACLE)
		sv_oracle_prefetch(v);
}

static void sv_step_kernels(struct sv *v)
{
	v->step_upload = 0;
	v->o.persona->step(v);
	if (v->o.alt == SV_OFFLOAD)       /* while the kernels run */
		sv_store_ahead(v);
	WL_CK(cudaStreamSynchronize(v->stream));
}

/* ---- completion ---- */

static void sv_finish(struct sv *v, int i, double now)
{
	struct sv_running *r = &v->run[i];
	struct sv_req *q = &v->s.req[r->q];
	q->done_s = now;
	uint32_t full = (r->prompt + q->out - 1) / SV_BT;
	for (uint32_t j = 0; j < full; j++)
		sv_pool_set_key(&v->gpu, r->blocks[j], sv_key_of(v, q, j));
	if (v->o.inject_corruption && !v->corrupted && full) {
		unsigned char x = 0xee;            /* one byte of a cached stamp */
		sv_kv_poke(v, v->pool + (uint64_t)r->blocks[0] * v->block_region + 20, &x, 1);
		v->corrupted = true;
	}
	for (uint32_t j = r->nblocks; j-- > 0;)    /* the stream's head evicted last */
		sv_pool_unref(&v->gpu, r->blocks[j]);
	if (v->o.persona->finish)
		v->o.persona->finish(v, r);
	free(r->blocks);
	v->sess_busy[q->sess] = false;
	v->sess_free_s[q->sess] = now + v->o.think_s;
	v->run[i] = v->run[--v->nr_run];
	v->done++;
}

/* After the step: prefills made their first token and their full prompt
 * blocks are cached; every decode made one more. */
/* The blocks r's step just wrote its first token into get their stamps,
 * as the step's cache-write kernel would have written them: after the
 * step's kernels were launched, never before (a block taken for it held
 * dead contents until then, which a KV tier may drop). */
static void sv_stamp_written(struct sv *v, struct sv_running *r, const struct sv_req *q)
{
	uint32_t written = r->prefill ? r->prompt : r->prompt + r->produced;
	uint32_t upto = (written + SV_BT - 1) / SV_BT;
	for (upto = upto < r->nblocks ? upto : r->nblocks; r->stamp_next < upto; r->stamp_next++)
		sv_stamp_block(v, v->pool, v->nr_blocks, r->blocks[r->stamp_next],
			       sv_key_of(v, q, r->stamp_next));
}

static void sv_after_step(struct sv *v, double now)
{
	for (int i = 0; i < v->nr_run;) {
		struct sv_running *r = &v->run[i];
		struct sv_req *q = &v->s.req[r->q];
		if (r->loading) {
			i++;
			continue;
		}
		sv_stamp_written(v, r, q);
		if (r->prefill) {
			r->prefill = false;
			q->first_s = now;
			for (uint32_t j = r->start / SV_BT; j < r->prompt / SV_BT; j++)
				sv_pool_set_key(&v->gpu, r->blocks[j], sv_key_of(v, q, j));
		}
		r->produced++;
		v->out_tokens++;
		if (r->produced == q->out)
			sv_finish(v, i, now);
		else
			i++;
	}
}

/* offload: turns whose host hits have landed are computed this step;
 * when every running turn waits for its load, nothing else can run and
 * the host waits for the side stream. Returns whether any turn runs. */
static bool sv_loads_landed(struct sv *v)
{
	bool any = false, loading = false;
	for (int i = 0; i < v->nr_run; i++) {
		struct sv_running *r = &v->run[i];
		if (r->loading && sv_side_done(v, r->ready_seq))
			r->loading = false, r->prefill = true;
		any |= !r->loading;
		loading |= r->loading;
	}
	if (any || !loading)
		return any;
	sv_side_wait(v);
	return sv_loads_landed(v);
}

int sv_serve(struct sv *v)
{
	v->get_counters(&v->c0);
	v->v0_ns = v->c0.virtual_ns;
	while (v->done < v->s.nr) {
		double now = sv_now_s(v);
		sv_admit_all(v, now);
		if (!v->nr_run && v->side_done < v->side_rec + v->side_open &&
		    sv_next_send(v) <= now) {
			sv_side_wait(v);         /* a turn waits for stores, nothing runs */
			continue;
		}
		if (!v->nr_run) {
			double t = sv_next_send(v);
			if (!isfinite(t))
				wl_die("stalled: %d pending, none admissible", v->nr_pending);
			if (t <= now) {
				struct sv_req *q = &v->s.req[v->pending[0]];
				wl_die("turn of %u prompt tokens does not fit the pool (%u blocks)",
				       sv_prompt_tokens(v, q), v->nr_blocks);
			}
			sv_idle_until(v, t);
			continue;
		}
		uint32_t used = v->gpu.nr - v->gpu.queued;   /* referenced: running */
		if (used > v->running_blocks_max)
			v->running_blocks_max = used;
		v->steps_over_fit += used > v->fit_blocks;
		v->steps_over_fit15 += (uint64_t)used * 2 > (uint64_t)v->fit_blocks * 3;
		if (!sv_loads_landed(v))
			continue;
		sv_step_kernels(v);
		v->steps++;
		sv_after_step(v, sv_now_s(v));
	}
	sv_side_wait(v);
	v->get_counters(&v->c1);
	return 0;
}
