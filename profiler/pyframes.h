/* SPDX-License-Identifier: MIT */
/* Python call sites: the innermost frames of the CPython interpreter
 * running on this thread, read through CPython's public C API resolved at
 * run time (libpython is never linked). Called from hooks: no malloc of
 * kvtier's own, no locks; the Python calls it makes may allocate, so the
 * caller must hold the hook guard (kvt_hook_enter), which makes kvtier's
 * hooks pass those allocations straight through. */
#ifndef KVT_PYFRAMES_H
#define KVT_PYFRAMES_H

#include <stdint.h>

#include "kvtier/trace_format.h"

#define KVT_PY_FUNC_MAX 96u          /* bytes of a function name kept (its head) */
#define KVT_PY_FILE_MAX 160u         /* bytes of a file name kept (its tail) */
#define KVT_PY_BODY_MAX 4064u        /* a PYSTACK record fits the smallest trace buffer */

/* The frames, innermost first, already in the PYSTACK record's layout
 * (trace_format.h): nr_frames entries in body[0, bytes). */
struct kvt_py_stack {
	uint32_t nr_frames;
	uint32_t bytes;
	_Alignas(8) unsigned char body[KVT_PY_BODY_MAX];
};

/* One frame of a captured stack, NUL-terminated copies. */
struct kvt_py_frame_text {
	uint32_t line;
	char func[KVT_PY_FUNC_MAX + 1];
	char file[KVT_PY_FILE_MAX + 1];
};

enum kvt_py_fallback {
	KVT_PY_FB_NO_GIL,        /* a thread Python knows, not holding the GIL now */
	KVT_PY_FB_NO_THREAD,     /* a thread Python does not know (a native thread) */
	KVT_PY_FB_VERSION,       /* a Python other than 3.9-3.13, or its API incomplete */
	KVT_PY_FB_OTHER,         /* an exception pending, finalizing, or an API call failed */
	KVT_PY_FB__COUNT
};

struct kvt_py_counters {
	uint64_t captured;                 /* call sites that got Python frames */
	uint64_t fallback[KVT_PY_FB__COUNT];
	int version;                       /* 0x030b for 3.11; 0 none seen, -1 refused */
};

/* Once, from the constructor (before the application's threads): look the
 * API up if libpython is already loaded (a python3 binary links it in).
 * Later lookups, for a libpython dlopen'd afterwards, happen from hooks at
 * most once a second. */
void kvt_py_init(void);
/* Capture up to max frames (max <= KVT_TRACE_MAX_PYFRAMES) into out.
 * Returns nr_frames; 0 when Python is not loaded or not running, or a
 * fallback applies (then counted). Call only inside the hook guard. */
int kvt_py_capture(struct kvt_py_stack *out, int max);
/* Frame i of a captured stack (0 = innermost) into t. 0, or -1 past the end. */
int kvt_py_frame(const struct kvt_py_stack *s, unsigned i, struct kvt_py_frame_text *t);
/* 64-bit hash of the frames (0 when there are none). */
uint64_t kvt_py_hash(const struct kvt_py_stack *s);
void kvt_py_counters(struct kvt_py_counters *out);
const char *kvt_py_fallback_name(unsigned why);
/* INFO records python.version, python.captured, python.fallback.<why>,
 * at exit (tracing on). */
void kvt_py_trace_counters(void);
/* fork child: its trace and counters start afresh. */
void kvt_py_counters_reset(void);

#endif
