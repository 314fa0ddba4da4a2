// SPDX-License-Identifier: MIT
/* Server decoders (contract in decode.h): which function is which
 * decoder's kernel, the staged copies decoders read back, the mismatch
 * count that switches a decoder off. */
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "evidence.h"
#include "heat.h"
#include "params.h"
#include "tables.h"
#include "trace.h"
#include "../base/kvt.h"

#define PROBES   8
#define DEC_NONE 0xffu              /* a function named, no decoder's */
#define NAMING   1u                 /* gen 0: a thread is naming it now */

static const struct kvt_decoder *const decoders[] = {
	&kvt_dec_vllm_v2_apply,
	&kvt_dec_vllm_v2_gather,
	&kvt_dec_vllm_v2_prep,
	&kvt_dec_vllm_v2_slots,
	&kvt_dec_vllm_cache_flash,
};
#define NR_DEC (sizeof decoders / sizeof decoders[0])
_Static_assert(NR_DEC <= 32, "a bit per decoder in off");

struct fslot {
	uint64_t func;              /* atomic: key, 0 = free */
	uint32_t val;               /* atomic: gen << 8 | decoder index or DEC_NONE; 0 = being named */
};

static struct fslot funcs[KVT_DECODE_FUNCS];
static int (*name_fn)(uint64_t func, const char **name);
static uint32_t generation = 1;     /* atomic: bumped by reset */
static uint32_t live;               /* atomic: functions matched to a decoder that is on */
static uint32_t off;                /* atomic: bit i, decoder i switched off */
static uint32_t warned;             /* atomic: bit i, its warning printed */
static uint32_t misses[NR_DEC];     /* atomic */
static struct {
	uint64_t functions, matched, launches, fed, mismatches;
} st;                               /* atomic */

struct staged {
	uint64_t dst, src, bytes;
	uint32_t gen;
};
static __thread struct staged ring[KVT_DECODE_STAGED];
static __thread unsigned ring_at;
static __thread struct { uint64_t dst; const int32_t *ids; uint32_t n; } last;

#define LD(x)     __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define ST(x, v)  __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

void kvt_decode_set_name_fn(int (*fn)(uint64_t func, const char **name))
{
	__atomic_store_n(&name_fn, fn, __ATOMIC_RELEASE);
}

const struct kvt_decoder *kvt_decoder_at(unsigned i)
{
	return i < NR_DEC ? decoders[i] : NULL;
}

unsigned kvt_decoders(void)
{
	return NR_DEC;
}

static uint32_t hash(uint64_t f)
{
	f ^= f >> 31;
	f *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(f >> 40);
}

/* Which decoder's kernel func is: its index, or DEC_NONE. Asked once: the
 * name (whole, or for a prefix decoder its start and the decoder's accept),
 * then the layout (as many parameters as the decoder reads, the 4-byte
 * ones where it says, 8 bytes the others); a name without the layout it
 * expects is not the kernel. */
static uint32_t name_it(uint64_t func)
{
	int (*fn)(uint64_t, const char **) = __atomic_load_n(&name_fn, __ATOMIC_ACQUIRE);
	const char *name = NULL;
	ADD(st.functions, 1);
	if (!fn || fn(func, &name) || !name)
		return DEC_NONE;
	for (unsigned d = 0; d < NR_DEC; d++) {
		const struct kvt_decoder *dec = decoders[d];
		if (dec->prefix ? strncmp(name, dec->kernel, strlen(dec->kernel)) ||
				  (dec->accept && !dec->accept(name))
				: strcmp(name, dec->kernel) != 0)
			continue;
		struct kvt_param_layout lay;
		if (!kvt_param_layout(func, &lay) || lay.nr != dec->nparams || lay.four != dec->four)
			return DEC_NONE;
		for (unsigned i = 0; i < lay.nr; i++)
			if (!(lay.four >> i & 1) && lay.words[i] != 1)
				return DEC_NONE;
		ADD(st.matched, 1);
		return d;
	}
	return DEC_NONE;
}

/* func's decoder index, DEC_NONE, or DEC_NONE while another thread names
 * it. One probe sequence; a full table names nothing more. */
static uint32_t decoder_of(uint64_t func)
{
	uint32_t gen = LD(generation);
	for (uint32_t p = 0, h = hash(func); p < PROBES; p++) {
		struct fslot *s = &funcs[(h + p) & (KVT_DECODE_FUNCS - 1)];
		uint64_t key = LD(s->func);
		if (!key) {
			uint64_t none = 0;
			if (!__atomic_compare_exchange_n(&s->func, &none, func, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE) && none != func)
				continue;
			key = func;
		}
		if (key != func)
			continue;
		uint32_t v = LD(s->val);
		if (v == NAMING)
			return DEC_NONE;                /* another thread is asking the driver */
		if (v && v >> 8 == (gen & 0xffffffu))
			return v & 0xff;
		/* never named, or named before a reset: one thread asks */
		if (!__atomic_compare_exchange_n(&s->val, &v, NAMING, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			return DEC_NONE;
		uint32_t d = name_it(func);
		if (d != DEC_NONE && !(LD(off) >> d & 1))
			ADD(live, 1);
		ST(s->val, (gen & 0xffffffu) << 8 | d);
		return d;
	}
	return DEC_NONE;
}

void kvt_decode_on_copy(uint64_t dst, uint64_t src, uint64_t bytes)
{
	if (!__atomic_load_n(&live, __ATOMIC_RELAXED) || !bytes || bytes > KVT_DECODE_STAGED_MAX)
		return;
	if (kvt_prof_device_memory(dst) != 1 || kvt_prof_device_memory(src) != 0)
		return;
	struct staged *s = &ring[ring_at++ % KVT_DECODE_STAGED];
	*s = (struct staged){ .dst = dst, .src = src, .bytes = bytes, .gen = LD(generation) };
}

size_t kvt_decode_staged(uint64_t dst, void *out, size_t bytes)
{
	uint32_t gen = LD(generation);
	/* newest first: a destination the allocator handed out again */
	for (unsigned k = 1; k <= KVT_DECODE_STAGED; k++) {
		const struct staged *s = &ring[(ring_at - k) % KVT_DECODE_STAGED];
		if (!s->bytes || s->gen != gen || dst < s->dst || dst - s->dst >= s->bytes)
			continue;
		if (bytes > s->bytes - (dst - s->dst))
			return 0;                      /* past the copy: not what it staged */
		return kvt_prof_read_self(out, s->src + (dst - s->dst), bytes) == bytes ? bytes : 0;
	}
	return 0;
}

void kvt_decode_consume(uint64_t dst)
{
	for (unsigned k = 0; k < KVT_DECODE_STAGED; k++)
		if (ring[k].bytes && dst >= ring[k].dst && dst - ring[k].dst < ring[k].bytes)
			ring[k].bytes = 0;
}

int kvt_decode_on_launch(uint64_t func, void **params, unsigned gx, uint64_t stream)
{
	if (!func || !params || kvt_heat_empty())
		return 0;
	uint32_t d = decoder_of(func);
	if (d == DEC_NONE || (LD(off) >> d & 1))
		return 0;
	const struct kvt_decoder *dec = decoders[d];
	uint64_t p[16];
	_Static_assert(sizeof p / sizeof p[0] >= 15, "room for the decoders' parameters");
	if (dec->nparams > sizeof p / sizeof p[0])
		return 0;
	for (unsigned i = 0; i < dec->nparams; i++) {
		if (!params[i])
			return 0;
		p[i] = 0;                       /* the layout said 4 or 8 bytes */
		memcpy(&p[i], params[i], dec->four >> i & 1 ? 4 : 8);
	}
	ADD(st.launches, 1);
	int r = dec->launch(p, gx, stream);
	if (r > 0) {
		ADD(st.fed, 1);
		return 1;
	}
	if (r < 0) {
		ADD(st.mismatches, 1);
		if (ADD(misses[d], 1) + 1 >= KVT_DECODE_MISMATCHES &&
		    !(__atomic_fetch_or(&off, 1u << d, __ATOMIC_ACQ_REL) >> d & 1)) {
			ADD(live, -1);              /* the staged copies stop once none is live */
			dec->reset();
		}
	}
	return 0;
}

void kvt_decode_feed(uint64_t dst, const int32_t *ids, uint32_t n)
{
	last.dst = dst;
	last.ids = ids;
	last.n = n;
	kvt_tables_feed(dst, ids, n * 4);
}

uint32_t kvt_decode_last_feed(uint64_t *dst, const int32_t **ids)
{
	*dst = last.dst;
	*ids = last.n ? last.ids : NULL;
	return last.n;
}

void kvt_decode_poll(void)
{
	if (kvt_decode_fresh_stopped()) {
		kvt_warn("decoder vllm_v2_prep: %u steps needed more blocks than their rows hold; "
			 "kvtier stops telling the blocks a step takes fresh (their old contents are "
			 "moved as before)", (unsigned)KVT_DECODE_MISMATCHES);
		kvt_trace_info("prof.decode.fresh", "off");
	}
	uint32_t o = LD(off), w = LD(warned);
	for (unsigned d = 0; d < NR_DEC; d++) {
		if (!(o >> d & 1) || (w >> d & 1))
			continue;
		__atomic_fetch_or(&warned, 1u << d, __ATOMIC_ACQ_REL);
		kvt_warn("decoder %s (%s, %s) switched off: %u launches did not match what it "
			 "follows; it credits nothing more", decoders[d]->name, decoders[d]->kernel,
			 decoders[d]->follows, (unsigned)LD(misses[d]));
		char val[96];
		snprintf(val, sizeof val, "off mismatches=%u", (unsigned)LD(misses[d]));
		char key[64];
		snprintf(key, sizeof key, "prof.decode.%s", decoders[d]->name);
		kvt_trace_info(key, val);
	}
}

void kvt_decode_info(struct kvt_decode_info *out)
{
	*out = (struct kvt_decode_info){
		.functions = LD(st.functions), .matched = LD(st.matched),
		.launches = LD(st.launches), .fed = LD(st.fed),
		.mismatches = LD(st.mismatches), .off = LD(off),
	};
	kvt_decode_dead_info(out);
}

void kvt_decode_forget(void)
{
	__atomic_add_fetch(&generation, 1, __ATOMIC_ACQ_REL);
	ST(live, 0);
}

void kvt_decode_reset(void)
{
	__atomic_add_fetch(&generation, 1, __ATOMIC_ACQ_REL);
	ST(live, 0);
	ST(off, 0);
	ST(warned, 0);
	for (unsigned d = 0; d < NR_DEC; d++) {
		ST(misses[d], 0);
		decoders[d]->reset();
	}
	memset(ring, 0, sizeof ring);
	ring_at = 0;
	memset(&last, 0, sizeof last);
	ST(st.functions, 0);
	ST(st.matched, 0);
	ST(st.launches, 0);
	ST(st.fed, 0);
	ST(st.mismatches, 0);
	kvt_decode_dead_reset();
}
