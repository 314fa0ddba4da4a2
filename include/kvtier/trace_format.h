/* SPDX-License-Identifier: MIT */
/* The on-disk trace format, versions 1 and 2 (docs/trace-format.md
 * explains it). Shared by the writer inside the preload library and every
 * reader (the kvtier tool, tests). Fixed-size little-endian records; no
 * pointers. Version 2 is version 1 whose body may also hold zstd frames. */
#ifndef KVTIER_TRACE_FORMAT_H
#define KVTIER_TRACE_FORMAT_H

#include <stdint.h>

#define KVT_TRACE_MAGIC   "KVTTRACE"
#define KVT_TRACE_VERSION 2u        /* the newest a reader reads */
#define KVT_TRACE_VERSION_RAW 1u    /* what a writer that compresses nothing writes */
#define KVT_TRACE_FLAG_ZSTD 1u      /* header flags: the body may hold zstd frames */
#define KVT_TRACE_MAX_FRAMES 128u

struct kvt_trace_header {           /* 64 bytes at offset 0 */
	char     magic[8];          /* "KVTTRACE" */
	uint32_t version;           /* 1: records only; 2: records and zstd frames */
	uint32_t header_bytes;      /* sizeof(struct kvt_trace_header) */
	uint64_t start_unix_ns;     /* CLOCK_REALTIME at open */
	uint64_t start_mono_ns;     /* CLOCK_MONOTONIC at open; event times are relative */
	uint32_t pid, ppid;
	uint32_t flags;             /* KVT_TRACE_FLAG_ZSTD (version 2), else 0 */
	uint32_t reserved;
	char     exe[16];           /* comm of the traced process, NUL-padded */
};

/* The body after the header: segments back to back, each either one record
 * or one zstd frame (version 2). A frame starts with the 4 bytes
 * KVT_TRACE_ZSTD_MAGIC (28 b5 2f fd), which as a record head would be type
 * 0xb528, never a record type. Its content is whole records, at most
 * KVT_TRACE_ZSTD_FRAME_BYTES of them, and it carries its content size and
 * a content checksum (XXH64, low 32 bits). Every frame decodes on its own:
 * a file cut anywhere reads to its last whole segment. */
#define KVT_TRACE_ZSTD_MAGIC       0xfd2fb528u
#define KVT_TRACE_ZSTD_FRAME_BYTES (1u << 20)

/* Every record starts with this. `bytes` is the whole record's size. */
struct kvt_rec_head {
	uint16_t type;              /* enum kvt_rec_type */
	uint16_t bytes;
};

enum kvt_rec_type {
	KVT_REC_EVENT  = 1,         /* struct kvt_rec_event */
	KVT_REC_STACK  = 2,         /* struct kvt_rec_stack + nr_frames u64 IPs */
	KVT_REC_MODULE = 3,         /* struct kvt_rec_module + path bytes */
	KVT_REC_INFO   = 4,         /* head + "key=value" text (not NUL-terminated) */
	KVT_REC_END    = 5,         /* struct kvt_rec_end: the writer closed cleanly */
	KVT_REC_MODULE_BUILDID = 6, /* struct kvt_rec_module_buildid + id bytes */
	KVT_REC_EPOCH  = 7,         /* struct kvt_rec_epoch: one device after one migration epoch */
	KVT_REC_PYSTACK = 8,        /* struct kvt_rec_pystack + frames: the Python frames of a stack id */
	KVT_REC_FAULTS = 9,         /* struct kvt_rec_faults + entries: GPU faults per chunk */
};

/* What happened. */
enum kvt_op {
	KVT_OP_ALLOC = 1, KVT_OP_FREE, KVT_OP_MEMSET, KVT_OP_COPY, KVT_OP_LAUNCH,
	KVT_OP_MEMINFO, KVT_OP_ADVISE, KVT_OP_PREFETCH, KVT_OP_MAP, KVT_OP_UNMAP,
	KVT_OP_REGISTER, KVT_OP_UNREGISTER, KVT_OP_REMAP, KVT_OP__COUNT
};

/* Which kind of memory (matches the policy language's kinds). */
enum kvt_kind {
	KVT_KIND_NONE = 0, KVT_KIND_DEVICE, KVT_KIND_ASYNC, KVT_KIND_VMM,
	KVT_KIND_MANAGED, KVT_KIND_HOST, KVT_KIND_REGISTER, KVT_KIND_MMAP,
	KVT_KIND__COUNT
};

/* Where kvtier put it (0 = left native). */
enum kvt_placement {
	KVT_PLACE_NATIVE = 0, KVT_PLACE_MANAGED_HBM, KVT_PLACE_MANAGED_FAR,
	KVT_PLACE_PINNED_FAR, KVT_PLACE_BIND_FAR, KVT_PLACE_INTERLEAVE,
	KVT_PLACE__COUNT
};

struct kvt_rec_event {              /* 64 bytes */
	struct kvt_rec_head head;
	uint16_t op;                /* enum kvt_op */
	uint16_t api;               /* enum kvt_api (include/kvtier/api.h): the call the application made */
	uint64_t t_ns;              /* since start_mono_ns */
	uint64_t addr;              /* pointer, dst of a copy, or free bytes (meminfo) */
	uint64_t size;              /* bytes; total bytes for meminfo */
	uint64_t aux;               /* flags / src of a copy / memset value / stream / handle */
	uint32_t tid;
	uint32_t stack_id;          /* 0 = none; else a KVT_REC_STACK id written earlier */
	int32_t  result;            /* CUresult, cudaError_t (see api) or -errno for mmap */
	uint8_t  kind;              /* enum kvt_kind */
	uint8_t  placement;         /* enum kvt_placement */
	uint16_t reserved;
	uint64_t aux2;              /* second operand: node, pitch, offset, ... */
};

struct kvt_rec_stack {
	struct kvt_rec_head head;
	uint32_t id;
	uint32_t nr_frames;
	/* uint64_t ip[nr_frames], innermost first */
};

/* The Python frames of the call site whose STACK record has the same id,
 * written right after it. A stack id stands for one native + Python
 * combination: the writer's dedup key covers both, so every event's
 * stack_id names at most one PYSTACK. nr_frames entries follow, innermost
 * first, each a struct kvt_rec_pyframe then func_bytes + file_bytes of
 * UTF-8 (no NUL, no padding); they fill the record exactly. */
#define KVT_TRACE_MAX_PYFRAMES 64u

struct kvt_rec_pystack {
	struct kvt_rec_head head;
	uint32_t stack_id;          /* a KVT_REC_STACK id written earlier */
	uint32_t nr_frames;         /* at most KVT_TRACE_MAX_PYFRAMES */
	/* nr_frames x (struct kvt_rec_pyframe, func, file) */
};

struct kvt_rec_pyframe {            /* 8 bytes, then the two names */
	uint32_t line;              /* PyFrame_GetLineNumber (0: unknown) */
	uint16_t func_bytes;        /* co_qualname (co_name before 3.11) */
	uint16_t file_bytes;        /* co_filename, its tail when cut */
};

struct kvt_rec_module {             /* a loaded object, for offline symbolization */
	struct kvt_rec_head head;
	uint32_t path_bytes;
	uint64_t bias;              /* load bias: file vaddr = ip - bias */
	uint64_t start, end;        /* the object's mapped text/data span */
	/* char path[path_bytes] */
};

#define KVT_TRACE_MAX_BUILD_ID 64u

/* The GNU build id of the module described by the MODULE record just
 * before it (the writer emits it right after that record; `start` repeats
 * the MODULE's start so that a reader can check the pairing). A module
 * without a build id note has no such record. */
struct kvt_rec_module_buildid {
	struct kvt_rec_head head;
	uint32_t id_bytes;          /* 1 .. KVT_TRACE_MAX_BUILD_ID */
	uint64_t start;             /* == the MODULE record's start */
	/* uint8_t id[id_bytes], as in the NT_GNU_BUILD_ID note */
};

struct kvt_rec_end {
	struct kvt_rec_head head;
	uint32_t reserved;
	uint64_t nr_events;
	uint64_t nr_dropped;        /* events lost (buffer or disk errors) */
	uint64_t nr_stacks;
};

/* Written by the migration thread (tier/migrator.c) for each device at the
 * end of each epoch, only while tracing. Chunks are 2 MiB; residency is the
 * migrator's belief (what it moved, what CUPTI said came in or left), in
 * whole chunks. Readers accept a longer record (later fields) and ignore
 * its tail. Remote bytes (what the GPU read over the link) are not
 * recorded: no evidence source measures them. */
struct kvt_rec_epoch {              /* 64 bytes */
	struct kvt_rec_head head;
	int32_t  device;            /* CUdevice ordinal */
	uint64_t t_ns;              /* since start_mono_ns: the device's part of the epoch ended */
	uint64_t epoch;             /* the migrator's epoch number, from 1 */
	uint64_t hbm_bytes;         /* redirected memory in this device's HBM after the epoch's moves */
	uint64_t budget_bytes;      /* the HBM budget the epoch planned against */
	uint32_t nr_promoted;       /* chunks promoted to HBM in this epoch */
	uint32_t nr_demoted;        /* chunks demoted to the far tier in this epoch */
	uint32_t nr_faults;         /* GPU page-fault records (CUPTI) on this device's redirected
				     * ranges delivered since its previous EPOCH record */
	uint32_t nr_failed;         /* moves not made: the prefetch failed, or the range was freed */
	uint64_t reserved;          /* 0 */
};
_Static_assert(sizeof(struct kvt_rec_epoch) == 64, "EPOCH records are 64 bytes");

/* GPU page faults on redirected memory, per 2 MiB chunk, over one buffer
 * of CUPTI records (profiler/src_cupti.c, only while tracing): nr entries
 * follow and fill the record exactly. A buffer with more chunks than fit
 * gives several records. */
#define KVT_TRACE_MAX_FAULTS 64u

struct kvt_rec_faults {
	struct kvt_rec_head head;
	uint32_t nr;                /* 1 .. KVT_TRACE_MAX_FAULTS */
	uint64_t t_ns;              /* since start_mono_ns: when the buffer was read */
	/* struct kvt_rec_fault_entry entry[nr] */
};

struct kvt_rec_fault_entry {        /* 16 bytes */
	uint64_t chunk;             /* the chunk's address, 2 MiB aligned */
	uint32_t nr;                /* GPU page-fault records on it in the buffer */
	uint32_t reserved;          /* 0 */
};
_Static_assert(sizeof(struct kvt_rec_faults) == 16, "FAULTS records have a 16-byte head");

#endif
