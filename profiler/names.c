// SPDX-License-Identifier: MIT
/* Names of the trace format's enumerations, for the tool and log lines.
 * Constant tables only. */
#include "kvtier/api.h"
#include "kvtier/trace_format.h"

#define KVT_API_NAME(n) #n,
static const char *const api_names[] = { KVT_API_LIST(KVT_API_NAME) };

static const char *const op_names[] = {
	"?", "alloc", "free", "memset", "copy", "launch", "meminfo", "advise",
	"prefetch", "map", "unmap", "register", "unregister", "remap",
};

static const char *const kind_names[] = {
	"none", "device", "async", "vmm", "managed", "host", "register", "mmap",
};

static const char *const placement_names[] = {
	"native", "managed:hbm", "managed:far", "pinned:far", "bind:far",
	"interleave",
};

#define PICK(tab, i) ((i) < sizeof tab / sizeof tab[0] ? tab[i] : "?")

const char *kvt_api_name(unsigned api) { return PICK(api_names, api); }
const char *kvt_op_name(unsigned op) { return PICK(op_names, op); }
const char *kvt_kind_name(unsigned kind) { return PICK(kind_names, kind); }
const char *kvt_placement_name(unsigned p) { return PICK(placement_names, p); }
