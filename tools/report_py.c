// SPDX-License-Identifier: MIT
/* Python call sites of `kvtier report` (model in report.h): a PYSTACK
 * record moves its stack id from the native site its STACK record gave it
 * to the site of its innermost Python frame, so that every allocation made
 * from one Python line is one call site whatever native path it took, as
 * memray counts them. Names come from the trace: sanitized, never trusted. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "../profiler/trace_read.h"

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t key_of(const struct kvt_trace_pyframe *f)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, f->func, f->func_len);
	h = fnv(h ^ 0xff, f->file, f->file_len);
	return h ^ ((uint64_t)f->line * 0x9e3779b97f4a7c15ull);
}

/* A NUL-terminated copy with control bytes shown as '?'. */
static char *dup_name(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (!d)
		return NULL;
	for (size_t i = 0; i < n; i++)
		d[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	d[n] = 0;
	return d;
}

/* The raw trace frame and the site's copy name the same place (the copy
 * may differ in control bytes only: compare as sanitized). */
static int same(const struct kvt_rpt_pyframe *a, const struct kvt_trace_pyframe *b)
{
	if (a->line != b->line || strlen(a->func) != b->func_len || strlen(a->file) != b->file_len)
		return 0;
	for (size_t i = 0; i < b->func_len; i++) {
		char c = (unsigned char)b->func[i] < 0x20 || b->func[i] == 0x7f ? '?' : b->func[i];
		if (a->func[i] != c)
			return 0;
	}
	for (size_t i = 0; i < b->file_len; i++) {
		char c = (unsigned char)b->file[i] < 0x20 || b->file[i] == 0x7f ? '?' : b->file[i];
		if (a->file[i] != c)
			return 0;
	}
	return 1;
}

static uint64_t site_key(const struct kvt_rpt_pyframe *p)
{
	struct kvt_trace_pyframe f = { .line = p->line, .func = p->func, .file = p->file,
				       .func_len = (uint16_t)strlen(p->func),
				       .file_len = (uint16_t)strlen(p->file) };
	return key_of(&f);
}

static int rehash(struct kvt_report *r)
{
	uint32_t cap = r->py_hash_cap ? r->py_hash_cap * 2 : 256;
	uint32_t *h = malloc(cap * sizeof *h);
	if (!h)
		return -ENOMEM;
	memset(h, 0xff, cap * sizeof *h);
	for (uint32_t i = 1; i < r->nr_sites; i++) {
		if (!r->sites[i].nr_py)
			continue;
		uint32_t s = (uint32_t)site_key(&r->sites[i].py[0]) & (cap - 1);
		while (h[s] != UINT32_MAX)
			s = (s + 1) & (cap - 1);
		h[s] = i;
	}
	free(r->py_hash);
	r->py_hash = h;
	r->py_hash_cap = cap;
	return 0;
}

/* A new Python site: the native frames of `native`, the Python frames fr. */
static int add_site(struct kvt_report *r, uint32_t native, const struct kvt_trace_pyframe *fr,
		    uint32_t nr, uint32_t *out)
{
	if (kvt_rpt_grow_sites(r))
		return -ENOMEM;
	struct kvt_rpt_site *s = &r->sites[r->nr_sites];
	const struct kvt_rpt_site *n = &r->sites[native];
	memset(s, 0, sizeof *s);
	s->at = n->at;
	s->nr_frames = n->nr_frames;
	memcpy(s->frames, n->frames, sizeof s->frames);
	for (uint32_t i = 0; i < nr && i < KVT_RPT_PY_FRAMES; i++) {
		s->py[i].func = dup_name(fr[i].func, fr[i].func_len);
		s->py[i].file = dup_name(fr[i].file, fr[i].file_len);
		s->py[i].line = fr[i].line;
		if (!s->py[i].func || !s->py[i].file) {
			free(s->py[i].func);
			free(s->py[i].file);
			break;
		}
		s->nr_py++;
	}
	if (!s->nr_py)
		return -ENOMEM;
	*out = r->nr_sites++;
	r->nr_py_sites++;
	return 0;
}

int kvt_rpt_on_pystack(struct kvt_report *r, const struct kvt_rec_pystack *ps,
		       const struct kvt_trace_pyframe *fr)
{
	uint32_t *slot = kvt_rpt_stack_slot(r, ps->stack_id);
	if (!slot || !ps->nr_frames)
		return 0;
	uint32_t native = *slot;
	if ((r->nr_py_sites + 1) * 2 > r->py_hash_cap && rehash(r))
		return -ENOMEM;
	uint32_t s = (uint32_t)key_of(&fr[0]) & (r->py_hash_cap - 1);
	for (; r->py_hash[s] != UINT32_MAX; s = (s + 1) & (r->py_hash_cap - 1)) {
		if (same(&r->sites[r->py_hash[s]].py[0], &fr[0])) {
			*slot = r->py_hash[s];
			return 0;
		}
	}
	uint32_t idx;
	if (add_site(r, native, fr, ps->nr_frames, &idx))
		return -ENOMEM;
	r->py_hash[s] = idx;
	*kvt_rpt_stack_slot(r, ps->stack_id) = idx;     /* the slot itself did not move */
	return 0;
}

void kvt_rpt_py_free(struct kvt_report *r)
{
	for (uint32_t i = 0; i < r->nr_sites; i++)
		for (uint32_t j = 0; j < r->sites[i].nr_py; j++) {
			free(r->sites[i].py[j].func);
			free(r->sites[i].py[j].file);
		}
	free(r->py_hash);
	r->py_hash = NULL;
}
