/* SPDX-License-Identifier: MIT */
/* The trace writer: binary records (include/kvtier/trace_format.h) appended
 * to one of two buffers and written with write(2) by a flush thread at
 * least every KVTIER_TRACE_FLUSH_MS, when a buffer fills, on SIGTERM and
 * SIGINT (profiler/trace_signal.c), and at exit. With KVTIER_TRACE_COMPRESS
 * =zstd the flush thread's writes and the last one at exit are zstd frames
 * (profiler/trace_zstd.c); every other write is raw records.
 * Call sites are captured with libunwind and each distinct stack is written
 * once (a STACK record) with the modules needed to symbolize it offline.
 * Safe inside hooks: no malloc, no stdio; a disk error turns tracing off
 * with one warning and counts what was lost. */
#ifndef KVT_TRACE_H
#define KVT_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "kvtier/trace_format.h"

/* Open the trace file named by pattern (%p = pid, %e = the program's name
 * as kvt_trace_file_name makes it, %% = %), created with
 * O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC and mode 0600. An existing path is
 * never overwritten: "<path>.<pid>", then "<path>.<pid>.2" .. ".16" are
 * tried instead (each exec'd image of one pid needs a name). 0 or -errno. */
int kvt_trace_open(const char *pattern, uint64_t buffer_bytes, int stack_depth);
/* KVTIER_TRACE_COMPRESS, before kvt_trace_open. on: load libzstd (lib;
 * NULL: libzstd.so.1) with dlopen, once, so that every file opened after
 * it is version 2 and its flush thread and end write zstd frames
 * (profiler/trace_zstd.h); not loaded: one warning, -errno, and the files
 * are written uncompressed (version 1). off: files opened after it are
 * uncompressed. 0 or -errno. */
int kvt_trace_compress(int on, const char *lib);
/* Whether the open file has zstd frames. */
int kvt_trace_compressed(void);
int kvt_trace_active(void);
/* Path actually written ("" when tracing is off). */
const char *kvt_trace_path(void);

/* Fill in head, t_ns and tid, then append. */
void kvt_trace_event(struct kvt_rec_event *ev);
/* The API to attribute an event to: the runtime call in progress on this
 * thread if any (marking it seen), else the driver/host call itself. */
uint16_t kvt_attribute_api(uint16_t api);
/* One EVENT record that is not an allocation or a free (memset, copy,
 * launch, meminfo, advise, prefetch...), attributed as above; nothing when
 * tracing is off. */
void kvt_rec_event(uint16_t op, uint8_t kind, uint16_t api, uint64_t addr,
		   uint64_t size, uint64_t aux, uint64_t aux2, int32_t result);
/* One EPOCH record (the migration thread, at the end of a device's part of
 * an epoch): head and t_ns are filled in; nothing when tracing is off. One
 * short lock and a copy into the buffer (a write(2) when it fills): never
 * called inside a hook. */
void kvt_trace_epoch(struct kvt_rec_epoch *e);
/* GPU faults on n chunks (2 MiB aligned addresses, a count each) since
 * the last call, as FAULTS records of at most KVT_TRACE_MAX_FAULTS entries:
 * the CUPTI source, once per buffer of records; nothing when tracing is
 * off. Never called inside a hook. */
void kvt_trace_faults(const uint64_t *chunk, const uint32_t *nr, unsigned n);
/* Capture the caller's stack (frames inside libkvtier skipped), dedup it,
 * and return its id (0 = none: depth 0, tracing off, or table full). */
uint32_t kvt_trace_callsite(void);
/* The same with the innermost Python frames of this thread when it runs
 * Python and holds the GIL (profiler/pyframes.h): a new native + Python
 * combination also writes a PYSTACK record with its id. The caller holds
 * the hook guard (the Python calls may allocate). */
uint32_t kvt_trace_callsite_python(void);
/* The caller's stack outside libkvtier, innermost first: up to max return
 * addresses; returns how many. Works with tracing off. */
int kvt_backtrace(void **ip, int max);
/* The stack cache (x86-64): a stack asked for again from the same frame
 * through the same return addresses is not unwound again. Setup finds
 * libgcc's unwinder, which fills it (from kvtier's start-up; without it
 * every stack is unwound). The counts: this thread's stacks found in the
 * cache, and unwound. The raw stack, kvtier's frames included, for tests
 * and benchmarks. */
void kvt_trace_stack_cache_setup(void);
void kvt_trace_stack_cache_counts(uint64_t *hits, uint64_t *misses);
int kvt_trace_stack_raw(void **ip, int max);

/* A key=value INFO record (e.g. the kvtier version, resolved options). */
void kvt_trace_info(const char *key, const char *value);

/* Events reach the file within every_ms: a flush thread, started by the
 * first event (a process that records none has none), swaps the buffers
 * under the lock and writes the full one outside it. Its signals are
 * blocked; a forked child starts its own with its first event; close stops
 * it. 0, or tracing off: no thread (written when a buffer fills). */
void kvt_trace_flush_start(unsigned every_ms);

/* Flush, write the END record and close (stopping the flush thread first).
 * Idempotent. */
void kvt_trace_close(void);
/* The same from _exit: not in a vfork child sharing the parent's memory;
 * waits up to 200 ms for a busy lock (another thread's write), then gives
 * up (this thread's own write, interrupted by a signal handler). */
void kvt_trace_close_if_owner(void);
void kvt_trace_flush(void);
/* From a handler of signal sig, in the process that owns the trace:
 * everything buffered written, then an INFO record "trace.signal=<sig>",
 * then END and close when last (the signal ends the process), else only
 * written. Async-signal-safe: trylock and nanosleep; a lock or a write
 * still busy after 200 ms (this thread's own, interrupted) is given up. */
void kvt_trace_on_signal(int sig, int last);
/* SIGTERM and SIGINT flush the trace (profiler/trace_signal.c): a handler
 * is installed where the disposition at this call is SIG_DFL or a
 * handler, which it then chains to (SIG_DFL: the signal is raised again
 * with the default action); SIG_IGN is left alone. A handler the
 * application installs later replaces it. */
void kvt_trace_signals_install(void);
/* Whether this thread is inside kvtier's SIGTERM/SIGINT handler, running
 * the handler it chains to (one that may end the process with _exit while
 * the signal interrupted one of kvtier's hooks). Async-signal-safe. */
int kvt_trace_in_signal_chain(void);

/* fork(): hold the trace lock across it; the child writes its own file
 * (pattern with %p expanded to the child's pid, or "<path>.<pid>"),
 * created at its first record: a child that only execs leaves none, and
 * the name is left to the exec'd image. */
void kvt_trace_fork_prepare(void);
void kvt_trace_fork_parent(void);
void kvt_trace_fork_child(void);

struct kvt_trace_stats {
	uint64_t nr_events, nr_dropped, nr_stacks, nr_write_errors, nr_stack_full;
	uint64_t nr_pystacks;          /* PYSTACK records written */
	uint64_t nr_flushes;           /* buffers the flush thread wrote */
};
void kvt_trace_stats(struct kvt_trace_stats *out);

/* Expand %p, %e (name; NULL or "": "prog") and %% of pattern into out;
 * -ENAMETOOLONG when it does not fit. */
int kvt_trace_expand(const char *pattern, int pid, const char *name, char *out, unsigned len);
/* A process name (comm) as it goes into a file name: at most 15 bytes of
 * [A-Za-z0-9._+-], anything else '_', no leading '.'; "" becomes "prog". */
void kvt_trace_file_name(const char *comm, char out[16]);

/* The run a trace belongs to (KVTIER_RUN_ID): before kvt_trace_open. Every
 * file opened after it, a forked child's included, starts with the INFO
 * record kvtier.run=<id> right after its header. "" or NULL: none. */
void kvt_trace_set_run(const char *id);
/* A run id: "<YYYYmmdd>-<HHMMSS>-<pid>" in UTC (kvtier run's, and the one a
 * traced process without KVTIER_RUN_ID takes). */
void kvt_trace_run_id(char *out, size_t len, uint64_t unix_s, int pid);

#endif
