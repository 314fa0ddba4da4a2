/* SPDX-License-Identifier: MIT */
/* Server decoders (profiler/decode.c, profiler/decode_vllm.c;
 * docs/profiler.md "Server decoders"): a few kernels of a named server,
 * recognised by their name (cuFuncGetName) and parameter layout
 * (cuFuncGetParamInfo), whose arguments say what no general mechanism
 * sees. Each decoder is small, names the server version and source file it
 * follows, and lives behind the ops table below. A decoder is a debt: it
 * exists only where a server keeps the evidence on the GPU.
 *
 * What a decoder may do: read the kernel's parameters, host memory they
 * name (pinned UVA buffers are host memory), and the host source of a
 * recent host-to-device copy into device memory they name (the staged
 * copies below); keep host-side state (a shadow of a device table); and
 * hand the tables source (profiler/tables.h) a table it rebuilt, as if
 * the application had uploaded it (kvt_tables_feed).
 *
 * What it must not do: credit what it cannot check. Every launch is
 * checked against the layout it expects (row indices in range, offsets
 * inside a row, lengths that never decrease); each check that fails is a
 * mismatch, and KVT_DECODE_MISMATCHES of them switch the decoder off for
 * the rest of the process, with one warning (from the migrator's poll,
 * never from a hook) and `prof.decode.NAME=off ...` in the trace.
 *
 * The hook side: no malloc, no locks (a busy flag per shadow table), no
 * stdio; a launch of a function that is not a decoder's costs one hash
 * probe. Functions are named once each (a driver call at the first launch
 * seen while KV is tracked). */
#ifndef KVT_DECODE_H
#define KVT_DECODE_H

#include <stddef.h>
#include <stdint.h>

#define KVT_DECODE_FUNCS       4096   /* functions whose decoder (or none) is kept */
#define KVT_DECODE_MISMATCHES  8      /* mismatches that switch a decoder off */
#define KVT_DECODE_STAGED      16     /* host-to-device copies remembered per thread */
#define KVT_DECODE_STAGED_MAX  (1u << 20)   /* a larger copy is not staged input */

struct kvt_decoder {
	const char *name;           /* short name (trace, log) */
	const char *kernel;         /* the kernel's name, as cuFuncGetName gives it */
	const char *follows;        /* the server, version and source it follows */
	unsigned nparams;           /* parameters, 8 bytes each (pointers, int64) but for four */
	uint32_t four;              /* bit i: parameter i is a 4-byte scalar (int32) */
	int prefix;                 /* kernel is a prefix of the name (a template's instances) */
	/* A launch of the kernel (grid x blocks gx, on stream; name: the
	 * driver's name for it): 1 when it fed a table (the caller runs the
	 * step prefetch), 0 when not, -1 on a mismatch (counted). p[i]: the 8
	 * bytes of parameter i (a 4-byte one zero-extended). */
	int (*launch)(const uint64_t *p, unsigned gx, uint64_t stream);
	void (*reset)(void);        /* forget its state (fork child, tests) */
	/* For a prefix decoder: whether the full name is an instance it reads
	 * (NULL: any); asked once, when the function is named. */
	int (*accept)(const char *name);
};

/* The decoders (profiler/decode_vllm.c, profiler/decode_fresh.c). */
extern const struct kvt_decoder kvt_dec_vllm_v2_apply, kvt_dec_vllm_v2_gather,
	kvt_dec_vllm_v2_prep, kvt_dec_vllm_v2_slots, kvt_dec_vllm_cache_flash;

/* The driver's name for a function: 0 with *name, -1 (preload/init.c sets
 * kvt_cuda_func_name). NULL: no decoder ever matches. */
void kvt_decode_set_name_fn(int (*fn)(uint64_t func, const char **name));

/* From the copy hooks, after a successful copy of bytes from src to dst:
 * kept per thread while a decoder is live (a host-to-device copy of at
 * most KVT_DECODE_STAGED_MAX). */
void kvt_decode_on_copy(uint64_t dst, uint64_t src, uint64_t bytes);

/* From the launch hooks, after a successful launch: the decoder of func,
 * if any, reads it. Returns 1 when it fed a table (the caller then runs the
 * step prefetch on stream), else 0. */
int kvt_decode_on_launch(uint64_t func, void **params, unsigned gx, uint64_t stream);

/* For decoders: the bytes at device address dst as this thread's recent
 * host-to-device copy into it left them, read from the copy's host source
 * (which the application may have rewritten since: decoders check what
 * they read). Returns bytes read, 0 when no remembered copy covers
 * [dst, dst + bytes). */
size_t kvt_decode_staged(uint64_t dst, void *out, size_t bytes);

/* For decoders: the remembered copies covering device address dst are
 * used up (a staged upload feeds one kernel; a later launch naming the
 * same address, handed out again, must not read this step's source). */
void kvt_decode_consume(uint64_t dst);

/* For decoders: hand the tables source the table rebuilt for device
 * address dst (kvt_tables_feed), ids[0..n). The last one this thread fed
 * is kept for kvt_decode_last_feed. */
void kvt_decode_feed(uint64_t dst, const int32_t *ids, uint32_t n);
/* This thread's last feed: its ids (valid until the thread's next feed)
 * and count; 0 and *ids NULL when none (tests, debugging). */
uint32_t kvt_decode_last_feed(uint64_t *dst, const int32_t **ids);

/* Dead blocks (profiler/decode_fresh.c; docs/profiler.md "Dead blocks").
 * A step that takes a block fresh writes its first token now: whatever the
 * block held before is dead (no kernel reads a position before it is
 * written). kvtier can then let the driver drop those bytes instead of
 * moving them (cuMemDiscardBatchAsync) — but only where it knows, from
 * the server's own kernel parameters, exactly which bytes a block id owns:
 * a wrong stride would drop live KV. So three facts must chain:
 *  - kvt_decode_link_slots: the slot mapping at device address slots is
 *    computed from the table fed for dst, block_size tokens a block (the
 *    slot-mapping kernel names both);
 *  - kvt_decode_kv_write: a cache-write kernel writes KV tensor base
 *    through that slot mapping, its blocks stride bytes apart (its own
 *    block stride and element size);
 *  - kvt_decode_fresh: this step took ids[0..n) of dst's table fresh.
 * The dead ranges are the fresh ids' [base + id * stride, + stride) of each
 * tensor written through a slot mapping of dst with the same block size,
 * runs of ids merged, shrunk inward to KVT_DEAD_ALIGN, inside the tensor's
 * tracked range. They wait, per thread, for kvt_decode_take_dead (the step
 * prefetch, tier/discard.c), which drops them on the step's stream before
 * its kernels write them. */
#define KVT_DEAD_KV        1024        /* KV tensors whose block stride is known */
#define KVT_DEAD_LINKS     16          /* slot mappings linked to a table */
#define KVT_DEAD_RANGES    16384       /* dead ranges kept per thread until taken */
#define KVT_DEAD_ALIGN     (64u << 10) /* a range is shrunk to whole 64 KiB pages */
void kvt_decode_link_slots(uint64_t slots, uint64_t dst, uint32_t block_size);
void kvt_decode_kv_write(uint64_t base, uint64_t stride, uint64_t slots, uint32_t block_size);
void kvt_decode_fresh(uint64_t dst, int32_t *ids, uint32_t n);
/* The block stride in bytes a cache-write kernel gave KV tensor base
 * (kvt_decode_kv_write), when it writes it through a slot mapping computed
 * from table dst; 0 when that chain is not certain. The tables source
 * takes it as that table's layout instead of learning one from faults. */
uint64_t kvt_decode_kv_stride(uint64_t base, uint64_t dst);
/* The table a slot mapping linked to dst, its block size in *bs: 1, or 0
 * when none (or its link is no longer certain). */
int kvt_decode_slots_table(uint64_t dst, uint32_t *bs);
/* decode_vllm.c's: the fresh-block reasoning stopped on mismatches (1
 * once, for the warning). */
int kvt_decode_fresh_stopped(void);
/* This thread's dead ranges since it last took them: addr[i], bytes[i]
 * (valid until the thread's next decoder launch), and how many. */
uint32_t kvt_decode_take_dead(const uint64_t **addr, const uint64_t **bytes);
/* decode.c's: the dead ranges' counters into out; forget them all. */
struct kvt_decode_info;
void kvt_decode_dead_info(struct kvt_decode_info *out);
void kvt_decode_dead_reset(void);

/* The migrator's epoch: the warnings of decoders switched off. */
void kvt_decode_poll(void);

struct kvt_decode_info {
	uint64_t functions;         /* functions named */
	uint64_t matched;           /* of them, a decoder's kernel */
	uint64_t launches;          /* decoder launches read */
	uint64_t fed;               /* tables fed to the tables source */
	uint64_t mismatches;
	uint32_t off;               /* bit i: decoder i is switched off */
	uint64_t fresh;             /* blocks steps took fresh (their first token written then) */
	uint64_t dead;              /* dead ranges handed to the step prefetch */
	uint64_t dead_bytes;        /* their bytes */
	uint64_t kv_known;          /* KV tensors whose block stride a cache write gave */
};
void kvt_decode_info(struct kvt_decode_info *out);
/* The decoders, in their bit order, and how many. */
const struct kvt_decoder *kvt_decoder_at(unsigned i);
unsigned kvt_decoders(void);

/* A module or library was unloaded: its function handles may come back
 * for other kernels, so every function is named again. */
void kvt_decode_forget(void);
/* Forget everything: the functions named, the staged copies of this
 * thread, each decoder's state (fork child, tests, a module unloaded). */
void kvt_decode_reset(void);

#endif
