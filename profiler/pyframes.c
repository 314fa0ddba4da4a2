// SPDX-License-Identifier: MIT
/* Python call sites (contract in pyframes.h): CPython's public C API,
 * looked up with the real dlsym (base/platform.c) and called only on a
 * thread that is the interpreter's current one and holds the GIL. Never
 * links or includes Python: the few prototypes are declared here, opaque.
 * Runs inside hooks: no malloc of its own, no locks, no stdio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/kvt.h"
#include "pyframes.h"
#include "trace.h"

#define RETRY_NS 1000000000ull          /* a missing libpython is looked for again */

/* ---- the API, resolved once ---- */

typedef struct py_object py_object;     /* PyObject, PyFrameObject, PyCodeObject */
typedef struct py_tstate py_tstate;     /* PyThreadState */

static struct {
	int (*is_initialized)(void);                    /* Py_IsInitialized */
	const char *(*get_version)(void);               /* Py_GetVersion */
	int (*gil_check)(void);                         /* PyGILState_Check */
	py_tstate *(*this_thread)(void);                /* PyGILState_GetThisThreadState */
	py_tstate *(*current)(void);                    /* PyThreadState_GetUnchecked */
	py_object *(*tstate_frame)(py_tstate *);        /* PyThreadState_GetFrame */
	py_object *(*frame_code)(py_object *);          /* PyFrame_GetCode */
	int (*frame_line)(py_object *);                 /* PyFrame_GetLineNumber */
	py_object *(*frame_back)(py_object *);          /* PyFrame_GetBack */
	py_object *(*getattr)(py_object *, const char *);   /* PyObject_GetAttrString */
	const char *(*utf8)(py_object *);               /* PyUnicode_AsUTF8 */
	void (*decref)(py_object *);                    /* Py_DecRef */
	py_object *(*err_occurred)(void);               /* PyErr_Occurred */
	void (*err_clear)(void);                        /* PyErr_Clear */
	int (*gc_disable)(void);                        /* PyGC_Disable (3.10+) */
	int (*gc_enable)(void);                         /* PyGC_Enable (3.10+) */
	const char *name_attr;                          /* co_qualname, or co_name */
} api;

enum { API_UNTRIED = 0, API_READY, API_ABSENT, API_REFUSED };
static int api_state;                   /* atomic; api is filled before READY */
static int resolving;                   /* one resolver at a time */
static uint64_t next_try_ns;
static struct kvt_py_counters cnt;      /* atomic adds */

static void *sym(const char *name)
{
	return kvt_real_dlsym(RTLD_DEFAULT, name);
}

/* "3.11.2 (main, ...)" -> 0x030b; 0 when it does not read as a version. */
static int parse_version(const char *v)
{
	char *end;
	long major = strtol(v, &end, 10);
	if (end == v || *end != '.')
		return 0;
	const char *m = end + 1;
	long minor = strtol(m, &end, 10);
	if (end == m || major < 0 || major > 255 || minor < 0 || minor > 255)
		return 0;
	return (int)(major << 8 | minor);
}

#define LOOKUP(field, name) (*(void **)&api.field = sym(name))

static int resolve(void)
{
	if (!LOOKUP(is_initialized, "Py_IsInitialized") || !LOOKUP(get_version, "Py_GetVersion"))
		return API_ABSENT;
	const char *v = api.get_version();
	int ver = v ? parse_version(v) : 0;
	if (ver < 0x0309 || ver > 0x030d || strstr(v, "free-threading")) {
		kvt_info("Python %.24s: not a CPython 3.9-3.13 with a GIL; call sites carry "
			 "no Python frames", v ? v : "(no version)");
		cnt.version = -1;
		return API_REFUSED;
	}
	LOOKUP(gil_check, "PyGILState_Check");
	LOOKUP(this_thread, "PyGILState_GetThisThreadState");
	if (!LOOKUP(current, "PyThreadState_GetUnchecked"))     /* 3.13 */
		LOOKUP(current, "_PyThreadState_UncheckedGet");  /* 3.9-3.12: the same call */
	LOOKUP(tstate_frame, "PyThreadState_GetFrame");
	LOOKUP(frame_code, "PyFrame_GetCode");
	LOOKUP(frame_line, "PyFrame_GetLineNumber");
	LOOKUP(frame_back, "PyFrame_GetBack");
	LOOKUP(getattr, "PyObject_GetAttrString");
	LOOKUP(utf8, "PyUnicode_AsUTF8");
	LOOKUP(decref, "Py_DecRef");
	LOOKUP(err_occurred, "PyErr_Occurred");
	LOOKUP(err_clear, "PyErr_Clear");
	LOOKUP(gc_disable, "PyGC_Disable");
	LOOKUP(gc_enable, "PyGC_Enable");
	api.name_attr = ver >= 0x030b ? "co_qualname" : "co_name";
	/* 3.11+ creates frame objects as they are asked for, and an object
	 * allocation may start a collection (finalizers, arbitrary Python):
	 * the walk runs with the collector off, so PyGC_Disable is required. */
	int gc_needed = ver >= 0x030b;
	if (!api.gil_check || !api.this_thread || !api.current || !api.tstate_frame ||
	    !api.frame_code || !api.frame_line || !api.frame_back || !api.getattr ||
	    !api.utf8 || !api.decref || !api.err_occurred || !api.err_clear ||
	    (gc_needed && (!api.gc_disable || !api.gc_enable))) {
		kvt_warn("Python %.24s: part of the C API kvtier needs is missing; call sites "
			 "carry no Python frames", v);
		cnt.version = -1;
		return API_REFUSED;
	}
	if (!gc_needed)
		api.gc_disable = api.gc_enable = NULL;
	cnt.version = ver;
	return API_READY;
}

/* The API's state, resolving it if it is time to. */
static int api_ready(void)
{
	int st = __atomic_load_n(&api_state, __ATOMIC_ACQUIRE);
	if (KVT_LIKELY(st == API_READY))
		return 1;
	if (st == API_REFUSED)
		return 0;
	uint64_t now = kvt_coarse_ns();     /* each call site of a process without Python */
	if (st == API_ABSENT && now < __atomic_load_n(&next_try_ns, __ATOMIC_RELAXED))
		return 0;
	if (__atomic_exchange_n(&resolving, 1, __ATOMIC_ACQUIRE))
		return 0;                       /* another thread is at it */
	st = resolve();
	__atomic_store_n(&next_try_ns, now + RETRY_NS, __ATOMIC_RELAXED);
	__atomic_store_n(&api_state, st, __ATOMIC_RELEASE);
	__atomic_store_n(&resolving, 0, __ATOMIC_RELEASE);
	return st == API_READY;
}

void kvt_py_init(void)
{
	if (kvt_opt.python)
		api_ready();
}

static void count(unsigned why)
{
	__atomic_fetch_add(&cnt.fallback[why], 1, __ATOMIC_RELAXED);
}

/* ---- the walk ---- */

/* Bytes of s[0, n) that end on a UTF-8 character boundary. */
static size_t utf8_cut(const char *s, size_t n)
{
	while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/* Append one frame; -1 when the body is full. */
static int append(struct kvt_py_stack *s, int line, const char *func, const char *file)
{
	if (!func)
		func = "?";
	if (!file)
		file = "?";
	size_t fl = strnlen(func, KVT_PY_FUNC_MAX + 1), pl = strlen(file);
	if (fl > KVT_PY_FUNC_MAX)
		fl = utf8_cut(func, KVT_PY_FUNC_MAX);
	if (pl > KVT_PY_FILE_MAX) {               /* keep the tail: the file's own name */
		const char *t = file + pl - KVT_PY_FILE_MAX;
		while (((unsigned char)*t & 0xc0) == 0x80)
			t++;
		pl -= (size_t)(t - file);
		file = t;
	}
	struct kvt_rec_pyframe f = { .line = line > 0 ? (uint32_t)line : 0,
				     .func_bytes = (uint16_t)fl, .file_bytes = (uint16_t)pl };
	if (s->bytes + sizeof f + fl + pl > KVT_PY_BODY_MAX)
		return -1;
	unsigned char *p = s->body + s->bytes;
	memcpy(p, &f, sizeof f);
	memcpy(p + sizeof f, func, fl);
	memcpy(p + sizeof f + fl, file, pl);
	s->bytes += (uint32_t)(sizeof f + fl + pl);
	s->nr_frames++;
	return 0;
}

/* A name attribute of a code object as UTF-8 into out (NULL: none). The
 * pointer stays valid while *ref lives; the caller drops *ref. */
static const char *code_str(py_object *code, const char *attr, py_object **ref)
{
	*ref = api.getattr(code, attr);
	const char *s = *ref ? api.utf8(*ref) : NULL;
	if (!s)
		api.err_clear();
	return s;
}

static void walk(struct kvt_py_stack *out, py_tstate *ts, int max)
{
	py_object *frame = api.tstate_frame(ts);      /* every call: a new reference */
	while (frame && (int)out->nr_frames < max) {
		py_object *code = api.frame_code(frame), *name = NULL, *file = NULL;
		int line = api.frame_line(frame);
		const char *fn = code ? code_str(code, api.name_attr, &name) : NULL;
		const char *fl = code ? code_str(code, "co_filename", &file) : NULL;
		int full = append(out, line, fn, fl);
		if (name)
			api.decref(name);
		if (file)
			api.decref(file);
		if (code)
			api.decref(code);
		if (full)
			break;
		py_object *back = api.frame_back(frame);
		api.decref(frame);
		frame = back;
	}
	if (frame)
		api.decref(frame);
}

int kvt_py_capture(struct kvt_py_stack *out, int max)
{
	out->nr_frames = out->bytes = 0;
	if (!kvt_opt.python || max <= 0)
		return 0;
	if (!api_ready()) {
		if (__atomic_load_n(&api_state, __ATOMIC_ACQUIRE) == API_REFUSED)
			count(KVT_PY_FB_VERSION);
		return 0;     /* no Python (not loaded yet): not counted */
	}
	if (!api.is_initialized())
		return 0;     /* not running (starting, or finalized): not counted */
	if (max > (int)KVT_TRACE_MAX_PYFRAMES)
		max = (int)KVT_TRACE_MAX_PYFRAMES;
	/* the interpreter's current thread state is this thread's own: it holds
	 * the GIL (before 3.12 "current" is process-wide, hence the compare) */
	py_tstate *mine = api.this_thread(), *cur = api.current();
	if (!mine || cur != mine || !api.gil_check()) {
		count(mine || cur ? KVT_PY_FB_NO_GIL : KVT_PY_FB_NO_THREAD);
		return 0;
	}
	if (api.err_occurred()) {       /* the caller's exception must survive intact */
		count(KVT_PY_FB_OTHER);
		return 0;
	}
	int gc_was = api.gc_disable ? api.gc_disable() : 0;
	walk(out, cur, max);
	if (gc_was > 0)
		api.gc_enable();
	if (api.err_occurred())
		api.err_clear();        /* ours: none was pending before the walk */
	if (!out->nr_frames)
		return 0;     /* no Python code running on this thread right now */
	__atomic_fetch_add(&cnt.captured, 1, __ATOMIC_RELAXED);
	return (int)out->nr_frames;
}

/* ---- reading a capture ---- */

int kvt_py_frame(const struct kvt_py_stack *s, unsigned i, struct kvt_py_frame_text *t)
{
	uint32_t off = 0;
	for (unsigned k = 0; k < s->nr_frames && off + sizeof(struct kvt_rec_pyframe) <= s->bytes; k++) {
		struct kvt_rec_pyframe f;
		memcpy(&f, s->body + off, sizeof f);
		const unsigned char *p = s->body + off + sizeof f;
		off += (uint32_t)(sizeof f + f.func_bytes + f.file_bytes);
		if (k < i)
			continue;
		t->line = f.line;
		memcpy(t->func, p, f.func_bytes);
		t->func[f.func_bytes] = 0;
		memcpy(t->file, p + f.func_bytes, f.file_bytes);
		t->file[f.file_bytes] = 0;
		return 0;
	}
	return -1;
}

uint64_t kvt_py_hash(const struct kvt_py_stack *s)
{
	if (!s || !s->nr_frames)
		return 0;
	uint64_t h = 0xcbf29ce484222325ull ^ s->nr_frames;
	for (uint32_t i = 0; i < s->bytes; i++) {
		h ^= s->body[i];
		h *= 0x100000001b3ull;
	}
	return h ? h : 1;
}

/* ---- counters ---- */

void kvt_py_counters(struct kvt_py_counters *out)
{
	out->captured = __atomic_load_n(&cnt.captured, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < KVT_PY_FB__COUNT; i++)
		out->fallback[i] = __atomic_load_n(&cnt.fallback[i], __ATOMIC_RELAXED);
	out->version = cnt.version;
}

const char *kvt_py_fallback_name(unsigned why)
{
	static const char *const names[KVT_PY_FB__COUNT] = {
		[KVT_PY_FB_NO_GIL] = "no_gil", [KVT_PY_FB_NO_THREAD] = "no_thread",
		[KVT_PY_FB_VERSION] = "version", [KVT_PY_FB_OTHER] = "other",
	};
	return why < KVT_PY_FB__COUNT ? names[why] : "?";
}

void kvt_py_counters_reset(void)
{
	int v = cnt.version;
	memset(&cnt, 0, sizeof cnt);
	cnt.version = v;
}

void kvt_py_trace_counters(void)
{
	struct kvt_py_counters c;
	char key[48], val[32];
	kvt_py_counters(&c);
	snprintf(val, sizeof val, "%d.%d", c.version > 0 ? c.version >> 8 : 0,
		 c.version > 0 ? c.version & 0xff : 0);
	kvt_trace_info("python.version", c.version > 0 ? val : c.version < 0 ? "refused" : "none");
	snprintf(val, sizeof val, "%llu", (unsigned long long)c.captured);
	kvt_trace_info("python.captured", val);
	for (unsigned i = 0; i < KVT_PY_FB__COUNT; i++) {
		snprintf(key, sizeof key, "python.fallback.%s", kvt_py_fallback_name(i));
		snprintf(val, sizeof val, "%llu", (unsigned long long)c.fallback[i]);
		kvt_trace_info(key, val);
	}
}
