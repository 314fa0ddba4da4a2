/* SPDX-License-Identifier: MIT */
/* The base layer every other folder of the library stands on: the thread
 * state, logging, the platform layer (base/platform.c) and the options table.
 * It includes nothing of kvtier's but include/kvtier/ and calls nothing above
 * it. Everything here is hidden (-fvisibility=hidden); hooks are the only
 * exports. */
#ifndef KVT_H
#define KVT_H

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvtier/trace_format.h"

#define KVT_VERSION "0.1.0"
#define KVT_EXPORT __attribute__((visibility("default")))
#define KVT_TLS __thread __attribute__((tls_model("initial-exec")))
/* For code a sanitizer runtime may reach through dlsym before it has set
 * itself up (its interceptors resolve with dlsym(RTLD_NEXT, ...)). */
#define KVT_NO_SANITIZE __attribute__((no_sanitize_address, no_sanitize_thread))
#define KVT_LIKELY(x) __builtin_expect(!!(x), 1)
#define KVT_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- thread state --------------------------------------------------------- */

/* kvtier's constructor has begun (base/platform.c; preload/init.c sets it). */
extern int kvt_started;

/* Per-thread (defined in base/platform.c): hook nesting depth (kvtier's own
 * calls pass straight through: a thread that raises it is not recorded) and
 * the runtime API in progress (so cudaMalloc -> cuMemAlloc is one event).
 * The hook guard that reads it is preload/guard.h. */
struct kvt_tls {
	int depth;
	uint16_t rt_api;
	uint8_t rt_seen;
};
extern KVT_TLS struct kvt_tls kvt_tls;

/* ---- logging (write(2) on the stack, prefixed "kvtier[PID]: ", rate-limited) ---- */

enum kvt_log_level { KVT_LOG_DEBUG = 0, KVT_LOG_INFO, KVT_LOG_WARN,
		     KVT_LOG_ERROR, KVT_LOG_OFF };

void kvt_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* "kvtier[PID]: " (the calling process's pid, read now) into buf; its length. */
int kvt_log_prefix(char *buf, size_t len);
#define kvt_debug(...) kvt_log(KVT_LOG_DEBUG, __VA_ARGS__)
#define kvt_info(...)  kvt_log(KVT_LOG_INFO, __VA_ARGS__)
#define kvt_warn(...)  kvt_log(KVT_LOG_WARN, __VA_ARGS__)
#define kvt_error(...) kvt_log(KVT_LOG_ERROR, __VA_ARGS__)
/* Warn once per call site. */
#define kvt_warn_once(...) do { static int once_; \
	if (!__atomic_exchange_n(&once_, 1, __ATOMIC_RELAXED)) kvt_warn(__VA_ARGS__); } while (0)

/* ---- platform: the only OS/loader calls (base/platform.c) --------------- */

/* The real dlsym (never the interposed one). NULL only if glibc has none. */
void *kvt_real_dlsym(void *handle, const char *name);
/* Raw system calls that never re-enter hooks. mmap: pointer or MAP_FAILED;
 * the rest 0/count/pointer or -errno (the contract atop platform.c). */
void *kvt_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int kvt_sys_munmap(void *addr, size_t len);
/* The address hint for one of kvtier's own long-lived maps (tables, rings,
 * registries; never the program's memory): a place in an area of kvtier's
 * own, KVT_OWN_GAP below the library, away from where the kernel puts the
 * program's next maps. NULL (no hint) once the area's KVT_OWN_SPAN is used
 * up or where the address space is too small. Only a hint: pass it to
 * kvt_sys_mmap without MAP_FIXED, and the kernel falls back to its usual
 * place where the area is taken. */
#define KVT_OWN_GAP  (64ull << 30)
#define KVT_OWN_SPAN (16ull << 30)
void *kvt_own_hint(size_t len);
/* One of kvtier's own private anonymous read-write maps (extra flags such
 * as MAP_NORESERVE) at kvt_own_hint(len): pointer or MAP_FAILED. */
void *kvt_sys_map_own(size_t len, int flags);
/* Writes all of buf, retrying EINTR and short writes. Bytes or -errno. */
ssize_t kvt_sys_write_all(int fd, const void *buf, size_t len);
pid_t kvt_gettid(void);
void kvt_platform_after_fork(void);
/* CLOCK_MONOTONIC, or the virtual clock a simulated driver handed over */
uint64_t kvt_now_ns(void);
/* kvt_now_ns less the step forward the switch to a virtual clock made (up
 * to VCLOCK_ALIGN_NS): for the gaps between the application's events,
 * which a switch between two of them must not stretch (the classifier's
 * burst gap). The same as kvt_now_ns on a real clock. */
uint64_t kvt_gap_ns(void);
/* A simulator's virtual clock (fakecuda's fakecuda_vclock_*: a real libcuda
 * has none). Once set, kvt_now_ns, kvt_coarse_ns and kvt_cond_wait_until
 * run on it, and kvtier charges its own CPU work to it (kvt_clock_charge)
 * so that work is never free in simulated time. Set once; later calls and
 * incomplete tables are ignored. */
struct kvt_vclock {
	uint64_t (*now)(void);                         /* ns */
	int (*wait)(const void *key, uint64_t deadline_ns);   /* 0 woken, 1 timed out, -1 not simulated */
	void (*wake)(const void *key);
	void (*charge)(uint64_t ns);
	void (*leave)(void);
	void *(*spawn)(void);
	void (*adopt)(void *place);
	void (*cancel)(void *place);
};
void kvt_clock_set_virtual(const struct kvt_vclock *vc);
int kvt_clock_virtual(void);
/* ns of kvtier's own CPU work in this thread (a documented bound, so a
 * simulated run is reproducible); nothing on a real clock. */
void kvt_clock_charge(uint64_t ns);
/* This thread is about to block outside the simulation (joining a
 * simulated thread): it leaves it. Nothing on a real clock. */
void kvt_clock_leave(void);
/* Before starting a thread that will wait on the clock: its place in the
 * simulation, at this thread's time (NULL on a real clock); the new thread
 * adopts it first thing, or the starter cancels it if the thread could
 * not be made. A simulated run then does not depend on when the host
 * starts the thread. */
void *kvt_clock_spawn(void);
void kvt_clock_adopt(void *place);
void kvt_clock_cancel(void *place);
/* pthread_cond_timedwait until kvt_now_ns() reaches deadline_ns (cv made
 * with CLOCK_MONOTONIC), mu held on entry and return; in virtual time the
 * wait is the simulator's. 0 (woken, maybe spuriously) or ETIMEDOUT. */
int kvt_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns);
/* pthread_cond_signal(cv), and the simulator's waiters on cv. */
void kvt_cond_wake(pthread_cond_t *cv);
/* CLOCK_MONOTONIC_COARSE: the same clock a tick behind (1-4 ms), a few ns
 * cheaper a call than kvt_now_ns's ~20 ns; for "is it time yet" checks on
 * the hooks' path, never for a timestamp */
uint64_t kvt_coarse_ns(void);
uint64_t kvt_realtime_ns(void);     /* CLOCK_REALTIME */
/* mbind(2) and move_pages(2) on this process, raw. 0 or -errno. */
long kvt_sys_mbind(void *addr, size_t len, int mode, const unsigned long *mask,
		   unsigned long maxnode, unsigned flags);
long kvt_sys_move_pages(unsigned long count, void **pages, const int *nodes,
			int *status, int flags);
/* The loader, for kvtier's own needs (never the interposed dlsym):
 * dlopen (it may allocate: never inside a hook with RTLD_NOW on an object
 * not yet loaded; RTLD_NOLOAD lookups are fine), dlclose, dladdr (1 when
 * found) and dl_iterate_phdr, as glibc's. The page size, read once. */
void *kvt_dl_open(const char *path, int flags);
int kvt_dl_close(void *handle);
int kvt_dl_addr(const void *p, Dl_info *di);
int kvt_dl_each_object(int (*fn)(struct dl_phdr_info *info, size_t size, void *arg),
		       void *arg);
uint64_t kvt_page_bytes(void);
/* The span [*lo, *hi) of a loaded object's PT_LOAD segments (*hi 0: none). */
void kvt_dl_object_span(const struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi);
/* The GNU build id of a loaded object, read from its PT_NOTE segments in
 * memory (only notes inside a file-backed PT_LOAD are read; no file I/O, no
 * allocation): its length in bytes copied to out, or 0 (none, or longer
 * than max). */
unsigned kvt_dl_object_build_id(const struct dl_phdr_info *info, uint8_t *out, unsigned max);
/* Address span of libkvtier.so itself (for "is this pointer ours"). */
int kvt_self_contains(const void *p);
/* mremap(2), raw (the preload exports mremap). Address or -errno. */
long kvt_sys_mremap(void *old, size_t old_size, size_t new_size, int flags, void *new_addr);
int kvt_sys_madvise(void *addr, size_t len, int advice);          /* 0 or -errno */
/* process_vm_readv(2) with flags 0 (a bad remote address is an error, never
 * a fault). Bytes or -errno. */
struct iovec;
ssize_t kvt_sys_process_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
				 const struct iovec *remote, unsigned long nremote);
/* Files: one libc call each, no EINTR retry (callers keep their loops). */
struct stat;
int kvt_sys_open(const char *path, int flags, mode_t mode);       /* fd or -errno */
ssize_t kvt_sys_read(int fd, void *buf, size_t len);              /* bytes or -errno */
ssize_t kvt_sys_pread(int fd, void *buf, size_t len, off_t off);  /* bytes or -errno */
int kvt_sys_close(int fd);                                        /* 0 or -errno */
int kvt_sys_fstat(int fd, struct stat *sb);                       /* 0 or -errno */
int kvt_sys_stat(const char *path, struct stat *sb);              /* 0 or -errno */
int kvt_sys_unlink(const char *path);                             /* 0 or -errno */
int kvt_sys_ftruncate(int fd, off_t len);                         /* 0 or -errno */
int kvt_sys_fchmod(int fd, mode_t mode);                          /* 0 or -errno */
int kvt_sys_access(const char *path, int mode);                   /* 0 or -errno */
/* Bytes placed in buf (not NUL-terminated) or -errno. */
ssize_t kvt_sys_readlink(const char *path, char *buf, size_t cap);
/* fn(name, arg) for each entry of directory path, "." and ".." included, in
 * the kernel's order, at most max of them; stops early when fn returns
 * nonzero. An unreadable rest ends the walk. Entries seen or -errno. */
int kvt_sys_dir_each(const char *path, unsigned max,
		     int (*fn)(const char *name, void *arg), void *arg);
int kvt_sys_kill(pid_t pid, int sig);                             /* 0 or -errno */
/* This thread's name (PR_GET_NAME) into buf, NUL-terminated. 0 or -errno. */
int kvt_sys_thread_name(char buf[16]);
/* exit_group(2): ends the process without running anything. */
__attribute__((noreturn)) void kvt_sys_exit_group(int status);

/* ---- options (base/options.c) ------------------------------------------- */

struct kvt_options {
	int disable;                 /* KVTIER_DISABLE */
	int log_level;               /* KVTIER_LOG */
	int verbose;                 /* KVTIER_VERBOSE */
	char trace[512];             /* KVTIER_TRACE ("" = off) */
	char run_id[64];             /* KVTIER_RUN_ID ("" = the process makes one) */
	int stack_depth;             /* KVTIER_STACK_DEPTH */
	int python;                  /* KVTIER_PYTHON: Python frames in call sites */
	uint64_t trace_buffer;       /* KVTIER_TRACE_BUFFER bytes */
	int trace_flush_ms;          /* KVTIER_TRACE_FLUSH_MS (0 = when full) */
	char trace_compress[8];      /* KVTIER_TRACE_COMPRESS: zstd or none */
	char trace_zstd_lib[256];    /* KVTIER_TRACE_ZSTD_LIB (tests) */
	int inherit;                 /* KVTIER_INHERIT */
	char policy[4096];           /* KVTIER_POLICY ("" = the default rules) */
	int strict;                  /* KVTIER_STRICT */
	uint64_t hbm_budget;         /* KVTIER_HBM_BUDGET (0 = derive) */
	uint64_t cxl_limit;          /* KVTIER_CXL_LIMIT (0 = unlimited) */
	uint64_t reserve;            /* KVTIER_RESERVE */
	char cxl_nodes[256];         /* KVTIER_CXL_NODES ("" = from topology) */
	int migrate;                 /* KVTIER_MIGRATE */
	char sources[64];            /* KVTIER_SOURCES */
	char admit[16];              /* KVTIER_ADMIT: auto, remote or fault */
	int admit_set;               /* KVTIER_ADMIT given (not the default) */
	int epoch_ms;                /* KVTIER_EPOCH_MS */
	int promote;                 /* KVTIER_PROMOTE (heat) */
	int demote;                  /* KVTIER_DEMOTE (heat) */
	int decay_ms;                /* KVTIER_DECAY_MS (tau) */
	uint64_t migrate_rate;       /* KVTIER_MIGRATE_RATE bytes/s (0 = no cap) */
	int stats;                   /* KVTIER_STATS: publish live counters */
	int step_prefetch;           /* KVTIER_STEP_PREFETCH: tier/step.c */
	int discard;                 /* KVTIER_DISCARD: tier/discard.c */
};
/* The process's options: the table's defaults from a constructor of
 * base/options.c (priority 101), then the environment (preload/init.c). */
extern struct kvt_options kvt_opt;

/* Set o to every option's default, parsed from the table's .def strings.
 * Returns the number of rows whose .def does not parse (a table bug: 0). */
int kvt_options_defaults(struct kvt_options *o);

/* Resolve the table from an environment vector (NULL-terminated "K=V").
 * Bad values warn once each (naming variable, value, and what is used
 * instead) and keep the default. Returns the number of warnings. */
int kvt_options_load(struct kvt_options *o, char *const *envp);
/* Print the resolved table (KVTIER_VERBOSE=1) to fd. */
void kvt_options_print(const struct kvt_options *o, int fd);
/* Iterate the table (for docs tests and the kvtier tool):
 * returns 0 and fills the pointers, or -1 past the end. */
int kvt_option_info(unsigned i, const char **name, const char **def,
		    const char **unit, const char **help);

#endif
