/* SPDX-License-Identifier: MIT */
/* kvtier workloads: the decode loop on the simulated GPU, the future-knowing
 * prefetch oracle, and the KV data stamps that catch a wrong migration.
 * Per step and layer one touch kernel reads the layer's weights and, for
 * every running request, its K and V rows (and the shared prefix), and
 * writes the new token's rows. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

/* ---- the ranges of one step and layer ---- */

unsigned wl_max_ranges(const struct wl *w)
{
	return 4 + 6u * (unsigned)w->batch;
}

static void wl_range(struct fakecuda_range *r, const struct wl_region *g, unsigned row,
		     uint64_t tok, uint64_t n, int write)
{
	r->ptr = (CUdeviceptr)(uintptr_t)(g->base + tok * row);
	r->len = (size_t)(n * row);
	r->write = write;
}

unsigned wl_step_ranges(struct wl *w, int t, int l, struct fakecuda_range *out)
{
	unsigned n = 0, row = w->o.row_bytes;
	for (int i = 0; i < w->nr_weights[l]; i++)
		out[n++] = (struct fakecuda_range){ (CUdeviceptr)(uintptr_t)w->weights[l][i].ptr,
						    w->weights[l][i].len, 0 };
	for (uint32_t q = w->step_off[t]; q < w->step_off[t + 1]; q++) {
		const struct wl_session *s = &w->sess[w->req[q].sess];
		uint64_t len = s->ctx + w->req[q].pos;
		if (s->prefix && w->o.prefix_tokens) {
			wl_range(&out[n++], &w->k[l], row, 0, (uint64_t)w->o.prefix_tokens, 0);
			wl_range(&out[n++], &w->v[l], row, 0, (uint64_t)w->o.prefix_tokens, 0);
		}
		wl_range(&out[n++], &w->k[l], row, s->start, len, 0);
		wl_range(&out[n++], &w->v[l], row, s->start, len, 0);
		wl_range(&out[n++], &w->k[l], row, s->start + len, 1, 1);
		wl_range(&out[n++], &w->v[l], row, s->start + len, 1, 1);
	}
	return n;
}

/* ---- data stamps: 32 bytes every 64 KiB of every K/V region ---- */

void wl_stamp(uint64_t seed, int region, uint64_t off, unsigned char out[32])
{
	uint64_t tag = 0x6b76746965720000ull + (uint64_t)region;   /* "kvtier" */
	memcpy(out, "KVST", 4);
	memcpy(out + 4, &region, 4);
	memcpy(out + 8, &off, 8);
	wl_pattern(seed, tag, off, out + 16, 16);
}

static uint64_t wl_region_bytes(const struct wl *w)
{
	return w->nr_tokens * w->o.row_bytes;
}

/* Managed KV (uvm, oracle) is written and read by the CPU through its own
 * address: that pulls back only what is on the device, where a cudaMemcpy
 * (a GPU access) would fault the whole KV through HBM once more.  It also
 * exercises the CPU-fault path of the migrations under test. */
static bool wl_kv_host_access(const struct wl *w)
{
	return w->o.mode != WL_MODE_NATIVE;
}

void wl_stamp_kv(struct wl *w)
{
	unsigned char st[32];
	for (int r = 0; r < 2 * w->o.layers; r++) {
		char *base = (r & 1) ? w->v[r / 2].base : w->k[r / 2].base;
		for (uint64_t off = 0; off + sizeof st <= wl_region_bytes(w); off += WL_STAMP_EVERY) {
			wl_stamp(w->o.seed, r, off, st);
			if (wl_kv_host_access(w))
				memcpy(base + off, st, sizeof st);
			else
				WL_CK(cudaMemcpy(base + off, st, sizeof st, cudaMemcpyHostToDevice));
		}
	}
}

uint64_t wl_verify_kv(struct wl *w, uint64_t *checked)
{
	unsigned char st[32], got[32];
	uint64_t bad = 0;
	for (int r = 0; r < 2 * w->o.layers; r++) {
		const char *base = (r & 1) ? w->v[r / 2].base : w->k[r / 2].base;
		for (uint64_t off = 0; off + sizeof st <= wl_region_bytes(w); off += WL_STAMP_EVERY) {
			wl_stamp(w->o.seed, r, off, st);
			if (wl_kv_host_access(w))
				memcpy(got, base + off, sizeof got);
			else
				WL_CK(cudaMemcpy(got, base + off, sizeof got, cudaMemcpyDeviceToHost));
			(*checked)++;
			if (memcmp(st, got, sizeof st) && bad++ < 8)
				fprintf(stderr, "%s: CORRUPTION: KV region %d (layer %d %c) "
					"offset %" PRIu64 " (address %p) lost its stamp\n",
					w->ops->name, r, r / 2, (r & 1) ? 'V' : 'K', off,
					(const void *)(base + off));
		}
	}
	return bad;
}

/* ---- the oracle: Belady over the next steps, within the device ----
 * Chunks of the managed KV used in the window are ranked by their next use;
 * free space takes the soonest, and a resident chunk is demoted only for one
 * needed sooner than its own next use.  The rest stays home on the host and
 * is read over the link (SetAccessedBy), so nothing faults. */

struct wl_oracle {
	int nr;                        /* managed KV allocations */
	const struct wl_alloc *a[WL_MAX_ALLOCS];
	uint64_t first[WL_MAX_ALLOCS]; /* chunk id of each one's first chunk */
	uint64_t nr_chunks;
	uint64_t *next;                /* next use (step*layers+layer), UINT64_MAX: none */
	uint32_t *order, *victims;
	uint8_t *resident;
};

static int wl_oracle_alloc_of(const struct wl_oracle *or, uintptr_t p)
{
	for (int i = 0; i < or->nr; i++) {
		uintptr_t b = (uintptr_t)or->a[i]->ptr;
		if (p >= b && p < b + or->a[i]->bytes)
			return i;
	}
	return -1;
}

static void wl_oracle_init(struct wl *w, struct wl_oracle *or)
{
	memset(or, 0, sizeof *or);
	for (int i = 0; i < w->nr_allocs; i++) {
		if (!w->allocs[i].managed)
			continue;
		or->a[or->nr] = &w->allocs[i];
		or->first[or->nr++] = or->nr_chunks;
		or->nr_chunks += (w->allocs[i].bytes + WL_CHUNK - 1) / WL_CHUNK;
	}
	or->next = malloc(sizeof *or->next * or->nr_chunks);
	or->order = malloc(sizeof *or->order * or->nr_chunks);
	or->victims = malloc(sizeof *or->victims * or->nr_chunks);
	or->resident = malloc(or->nr_chunks);
	if (!or->next || !or->order || !or->victims || !or->resident)
		wl_die("out of host memory for the oracle");
}

static char *wl_chunk_addr(const struct wl_oracle *or, uint64_t c, size_t *len)
{
	int i = or->nr - 1;
	while (i > 0 && or->first[i] > c)
		i--;
	uint64_t off = (c - or->first[i]) * WL_CHUNK;
	size_t left = or->a[i]->bytes - off;
	*len = left < WL_CHUNK ? left : WL_CHUNK;
	return or->a[i]->ptr + off;
}

static const uint64_t *wl_next_base;
static int wl_by_next(const void *x, const void *y)
{
	uint64_t a = wl_next_base[*(const uint32_t *)x], b = wl_next_base[*(const uint32_t *)y];
	if (a != b)
		return a < b ? -1 : 1;
	return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

static void wl_oracle_mark(struct wl *w, struct wl_oracle *or, int t, struct fakecuda_range *buf)
{
	for (uint64_t c = 0; c < or->nr_chunks; c++)
		or->next[c] = UINT64_MAX;
	int steps = w->o.warmup + w->o.steps;
	int win = w->o.oracle_window ? w->o.oracle_window : steps;        /* 0: all */
	int end = t + win < steps ? t + win : steps;
	for (int s = t; s < end; s++)
		for (int l = 0; l < w->o.layers; l++) {
			unsigned n = wl_step_ranges(w, s, l, buf);
			uint64_t when = (uint64_t)(s - t) * (uint64_t)w->o.layers + (uint64_t)l;
			for (unsigned i = 0; i < n; i++) {
				int a = wl_oracle_alloc_of(or, (uintptr_t)buf[i].ptr);
				if (a < 0 || !buf[i].len)
					continue;
				uintptr_t b = (uintptr_t)or->a[a]->ptr;
				uint64_t c0 = (buf[i].ptr - b) / WL_CHUNK;
				uint64_t c1 = (buf[i].ptr + buf[i].len - 1 - b) / WL_CHUNK;
				for (uint64_t c = c0; c <= c1; c++)
					if (or->next[or->first[a] + c] == UINT64_MAX)
						or->next[or->first[a] + c] = when;
			}
		}
}

/* Prefetch every marked chunk (value want) to loc, merging neighbours. */
static void wl_oracle_move(struct wl *w, struct wl_oracle *or, const uint8_t *mark,
			   struct cudaMemLocation loc)
{
	char *run = NULL;
	size_t run_len = 0;
	for (uint64_t c = 0; c <= or->nr_chunks; c++) {
		size_t len = 0;
		char *p = c < or->nr_chunks && mark[c] ? wl_chunk_addr(or, c, &len) : NULL;
		if (p && run && run + run_len == p) {
			run_len += len;
			continue;
		}
		if (run)
			WL_CK(cudaMemPrefetchAsync(run, run_len, loc, 0, w->stream));
		run = p;
		run_len = len;
	}
}

static void wl_oracle_plan(struct wl *w, struct wl_oracle *or, int t, struct fakecuda_range *buf)
{
	struct fakecuda_counters c;
	w->fake.get_counters(&c);
	uint64_t native = c.device_used_bytes - c.managed_resident_bytes;
	uint64_t room = c.device_capacity_bytes > native + 4 * WL_CHUNK
		      ? c.device_capacity_bytes - native - 4 * WL_CHUNK : 0;
	uint64_t cap = room / WL_CHUNK, nres = 0, ncand = 0, nvict = 0;

	wl_oracle_mark(w, or, t, buf);
	for (uint64_t i = 0; i < or->nr_chunks; i++) {
		CUmemLocationType type = CU_MEM_LOCATION_TYPE_INVALID;
		int id = 0;
		size_t len;
		or->resident[i] = !w->fake.block_location(wl_chunk_addr(or, i, &len), &type, &id) &&
				  type == CU_MEM_LOCATION_TYPE_DEVICE;
		nres += or->resident[i];
		if (or->next[i] != UINT64_MAX)
			or->order[ncand++] = (uint32_t)i;
		if (or->resident[i])
			or->victims[nvict++] = (uint32_t)i;
	}
	wl_next_base = or->next;
	qsort(or->order, ncand, sizeof *or->order, wl_by_next);
	qsort(or->victims, nvict, sizeof *or->victims, wl_by_next);   /* latest last */

	/* mark: 1 = promote, 2 = demote */
	uint8_t *mark = calloc(or->nr_chunks, 1);
	if (!mark)
		wl_die("out of host memory");
	while (nres > cap && nvict) {            /* over budget: drop the latest */
		mark[or->victims[--nvict]] = 2;
		nres--;
	}
	for (uint64_t k = 0; k < ncand; k++) {
		uint32_t ch = or->order[k];
		if (or->resident[ch])
			continue;
		if (nres < cap) {
			mark[ch] = 1;
			nres++;
			continue;
		}
		if (!nvict || or->next[or->victims[nvict - 1]] <= or->next[ch])
			break;
		mark[or->victims[--nvict]] = 2;
		mark[ch] = 1;
	}
	uint8_t *dem = calloc(or->nr_chunks, 1), *pro = calloc(or->nr_chunks, 1);
	if (!dem || !pro)
		wl_die("out of host memory");
	for (uint64_t i = 0; i < or->nr_chunks; i++) {
		dem[i] = mark[i] == 2;
		pro[i] = mark[i] == 1;
	}
	wl_oracle_move(w, or, dem, (struct cudaMemLocation){ cudaMemLocationTypeHost, 0 });
	wl_oracle_move(w, or, pro, (struct cudaMemLocation){ cudaMemLocationTypeDevice, 0 });
	free(mark);
	free(dem);
	free(pro);
}

/* ---- what the window needs that the warm-up never touched ----
 * 2 MiB chunks of the KV allocations, from the schedule alone. A chunk first
 * used in the timed window is a miss for any policy that cannot see the
 * future (a fault, a prefetch after the fact, or a read over the link),
 * unless it happened to be left in HBM; the oracle places it beforehand.
 * --cache-bound C also replays every step's (and layer's) chunk uses, in
 * order, through a demand-filled cache of C chunks that starts empty at the
 * first warm-up step: LRU, FIFO (the driver's eviction order, which
 * fault-driven UVM follows on the simulated device by default) and OPT
 * (Belady: evict the chunk used furthest ahead, the best any replacement
 * can do without prefetching), counting the misses in the timed window. */

struct wl_kv_chunks {
	const struct wl_alloc *kv[WL_MAX_ALLOCS];
	uint64_t first[WL_MAX_ALLOCS], nr;
	int nkv;
};

struct wl_use {
	uint32_t chunk;
	int32_t step;
};

/* Every use of a KV chunk by the schedule, in order, to fn. */
static void wl_kv_uses(struct wl *w, const struct wl_kv_chunks *k, struct fakecuda_range *buf,
		       void (*fn)(void *, uint32_t, int), void *arg)
{
	int steps = w->o.warmup + w->o.steps;
	for (int t = 0; t < steps; t++)
		for (int l = 0; l < w->o.layers; l++) {
			unsigned n = wl_step_ranges(w, t, l, buf);
			for (unsigned i = 0; i < n; i++)
				for (int a = 0; a < k->nkv; a++) {
					uintptr_t b = (uintptr_t)k->kv[a]->ptr;
					if (!buf[i].len || buf[i].ptr < b || buf[i].ptr >= b + k->kv[a]->bytes)
						continue;
					uint64_t c0 = (buf[i].ptr - b) / WL_CHUNK;
					uint64_t c1 = (buf[i].ptr + buf[i].len - 1 - b) / WL_CHUNK;
					for (uint64_t c = c0; c <= c1; c++)
						fn(arg, (uint32_t)(k->first[a] + c), t);
					break;
				}
		}
}

struct wl_seen {
	uint8_t *seen;
	int warmup;
};

static void wl_mark_seen(void *arg, uint32_t c, int t)
{
	struct wl_seen *s = arg;
	s->seen[c] |= t < s->warmup ? 1 : 2;
}

struct wl_uses {
	struct wl_use *u;
	size_t n, cap;
};

static void wl_add_use(void *arg, uint32_t c, int t)
{
	struct wl_uses *v = arg;
	if (v->n == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 1 << 16;
		v->u = realloc(v->u, v->cap * sizeof *v->u);
		if (!v->u)
			wl_die("out of host memory for --cache-bound");
	}
	v->u[v->n++] = (struct wl_use){ c, t };
}

/* Window misses of a demand-filled cache of cap chunks. key[c] of a resident
 * chunk: its last use (LRU), its arrival (FIFO, the UVM driver's order) or
 * its next use (OPT); the victim has the least key, or the greatest (OPT). */
enum wl_cache { WL_LRU, WL_FIFO, WL_OPT };

static uint64_t wl_cache_misses(const struct wl_uses *v, uint64_t nr, uint64_t cap,
				enum wl_cache kind, int warmup)
{
	bool opt = kind == WL_OPT;
	uint64_t *key = calloc(nr ? nr : 1, sizeof *key), *next = NULL, *later = NULL;
	uint8_t *in = calloc(nr ? nr : 1, 1);
	if (!key || !in)
		wl_die("out of host memory for --cache-bound");
	if (opt) {             /* next[k]: the next use of v->u[k]'s chunk */
		next = malloc((v->n ? v->n : 1) * sizeof *next);
		later = malloc((nr ? nr : 1) * sizeof *later);
		if (!next || !later)
			wl_die("out of host memory for --cache-bound");
		for (uint64_t c = 0; c < nr; c++)
			later[c] = UINT64_MAX;
		for (size_t k = v->n; k-- > 0;) {
			next[k] = later[v->u[k].chunk];
			later[v->u[k].chunk] = k;
		}
	}
	uint64_t miss = 0, held = 0;
	for (size_t k = 0; k < v->n; k++) {
		uint32_t c = v->u[k].chunk;
		bool hit = in[c];
		if (!hit) {
			miss += v->u[k].step >= warmup;
			if (held == cap) {
				uint64_t victim = UINT64_MAX;
				for (uint64_t x = 0; x < nr; x++)
					if (in[x] && (victim == UINT64_MAX ||
						      (opt ? key[x] > key[victim] : key[x] < key[victim])))
						victim = x;
				in[victim] = 0;
				held--;
			}
			in[c] = 1;
			held++;
		}
		if (opt)
			key[c] = next[k];
		else if (kind == WL_LRU || !hit)
			key[c] = k;
	}
	free(key);
	free(in);
	free(next);
	free(later);
	return miss;
}

static void wl_window_chunks(struct wl *w, struct fakecuda_range *buf)
{
	struct wl_kv_chunks k = { .nr = 0 };
	for (int i = 0; i < w->nr_allocs; i++)
		if (!strcmp(w->allocs[i].kind, "kv")) {
			k.kv[k.nkv] = &w->allocs[i];
			k.first[k.nkv++] = k.nr;
			k.nr += (w->allocs[i].bytes + WL_CHUNK - 1) / WL_CHUNK;
		}
	struct wl_seen s = { calloc(k.nr ? k.nr : 1, 1), w->o.warmup };
	if (!s.seen)
		wl_die("out of host memory");
	wl_kv_uses(w, &k, buf, wl_mark_seen, &s);
	for (uint64_t c = 0; c < k.nr; c++) {
		w->window_kv_chunks += (s.seen[c] & 2) != 0;
		w->window_new_kv_chunks += s.seen[c] == 2;
	}
	free(s.seen);
	if (w->o.cache_bound > 0) {
		struct wl_uses v = { 0 };
		wl_kv_uses(w, &k, buf, wl_add_use, &v);
		uint64_t cap = (uint64_t)w->o.cache_bound;
		w->window_misses_lru = wl_cache_misses(&v, k.nr, cap, WL_LRU, w->o.warmup);
		w->window_misses_fifo = wl_cache_misses(&v, k.nr, cap, WL_FIFO, w->o.warmup);
		w->window_misses_opt = wl_cache_misses(&v, k.nr, cap, WL_OPT, w->o.warmup);
		free(v.u);
	}
}

/* ---- the decode loop ---- */

int wl_decode(struct wl *w)
{
	int L = w->o.layers, steps = w->o.warmup + w->o.steps;
	unsigned maxr = wl_max_ranges(w);
	struct fakecuda_range *buf = malloc(sizeof *buf * maxr * (size_t)(L + 1));
	if (!buf)
		wl_die("out of host memory");
	wl_window_chunks(w, buf);
	wl_tables_init(w);
	struct wl_oracle or;
	bool oracle = w->o.mode == WL_MODE_ORACLE && w->fake.block_location;
	if (oracle) {
		/* warm start: the oracle places the first steps' chunks before the
		 * run, as UVM's zero fill left the tail of the KV resident for it */
		wl_oracle_init(w, &or);
		wl_oracle_plan(w, &or, 0, buf + (size_t)L * maxr);
		WL_CK(cudaStreamSynchronize(w->stream));
	}
	for (int t = 0; t < steps; t++) {
		if (t == w->o.warmup)              /* the timed phase starts */
			w->fake.get_counters(&w->c0);
		if (w->ops->before_step && w->ops->before_step(w, t))
			return WL_EXIT_FAIL;
		if (oracle && t > 0)
			wl_oracle_plan(w, &or, t, buf + (size_t)L * maxr);
		wl_tables_step(w, t);
		for (int l = 0; l < L; l++) {
			struct fakecuda_range *r = buf + (size_t)l * maxr;
			if (wl_tables_on(w))
				wl_tables_launch(w, l);
			else
				wl_touch(w, r, wl_step_ranges(w, t, l, r));
		}
		if (w->ops->after_step && w->ops->after_step(w, t))
			return WL_EXIT_FAIL;
		WL_CK(cudaStreamSynchronize(w->stream));
		if (t >= w->o.warmup)
			w->tokens += w->step_off[t + 1] - w->step_off[t];
	}
	if (w->o.warmup >= steps)
		w->fake.get_counters(&w->c0);
	wl_tables_fini(w);
	if (oracle) {
		free(or.next);
		free(or.order);
		free(or.victims);
		free(or.resident);
	}
	free(buf);
	return 0;
}
