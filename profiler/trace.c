// SPDX-License-Identifier: MIT
/* The trace writer (contract in trace.h). Runs inside hooks: memory comes
 * from mmap, output goes through write(2), messages through kvt_log; maps,
 * files and the thread's name go through base/platform.c (kvt_sys_*).
 * One mutex guards the buffers; a second (taken first) guards the stack
 * table's inserts, whose lookups are lock-free. Two buffers: records go to
 * the active one; a flush thread (started with the first event) swaps them
 * under the lock and writes the full one outside it, at least every
 * KVTIER_TRACE_FLUSH_MS, so a hook never waits on the file unless both
 * are full. Only the flush thread and the end at exit compress (zstd
 * frames, profiler/trace_zstd.c); a hook, fork, exec and a signal handler
 * write raw records. */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>


#include "kvtier/api.h"
#include "../base/kvt.h"
#include "pyframes.h"
#include "trace.h"
#include "trace_zstd.h"
#include "unwind.h"

#define STACK_SLOTS (1u << 16)          /* distinct stacks kept */
#define MAX_MODULES 512u

struct trace {
	pthread_mutex_t lock;
	int fd;                          /* -1 = off (unless pending) */
	int pending;                     /* a forked child's: opened at its first record */
	int failed;                      /* a write failed: drop from now on */
	int want_zstd;                   /* KVTIER_TRACE_COMPRESS=zstd, and libzstd loaded */
	int zstd;                        /* this file's flush thread and end write zstd frames */
	int hook_waits;                  /* a hook waits for the flush thread's write (atomic) */
	char pattern[512];
	char path[600];
	char run_id[64];                 /* KVTIER_RUN_ID: an INFO record after each header */
	char *buf;                       /* the active buffer: bufs[0] or bufs[1] */
	char *bufs[2];
	uint64_t cap, pos;
	uint64_t start_mono_ns;
	uint64_t buffered_events;
	/* the other buffer, handed to the flush thread (state under lock) */
	int out_state;                   /* OUT_FREE, OUT_FULL, OUT_WRITING */
	char *out;
	uint64_t out_bytes, out_events;
	int depth;
	int pid;                         /* the process this file belongs to */
	struct kvt_trace_stats st;
};

enum { OUT_FREE, OUT_FULL, OUT_WRITING };

static struct trace tr = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* The flush thread. `state` moves NONE -> WANTED (kvt_trace_flush_start)
 * -> STARTING (the first event's thread, once) -> RUNNING or FAILED;
 * stop and fork take it back to NONE or WANTED. `running`, `stop` and
 * `kick` are read and written under tr.lock; both conditions use it. */
enum { FL_NONE, FL_WANTED, FL_STARTING, FL_RUNNING, FL_FAILED };
static struct {
	int state;
	int running, stop, kick;
	int started;                     /* the thread reached its loop (atomic) */
	uint64_t cpu_ns;                 /* the CPU time it used, set as it ends (under tr.lock) */
	uint64_t every_ns;
	pthread_t th;
	pthread_cond_t wake;             /* the thread waits here */
	pthread_cond_t done;             /* a write of `out` ended */
} fl = { .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER };

/* Stack table: slot key = hash of the IPs (0 = empty), published with
 * release after the id; readers load the key with acquire. */
static pthread_mutex_t stack_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *stack_keys;
static uint32_t *stack_ids;
static uint32_t next_stack_id = 1;

/* Modules already described in this trace: [start, end) spans. */
static struct { uint64_t start, end; } modules[MAX_MODULES];
static unsigned nr_modules;


/* The decimal digits of v into num (NUL-terminated, at most 15 digits). */
static void decimal(int v, char num[16])
{
	int n = 0;
	char rev[16];
	do { rev[n++] = (char)('0' + v % 10); v /= 10; } while (v && n < 15);
	for (int k = 0; k < n; k++)
		num[k] = rev[n - 1 - k];
	num[n] = 0;
}

int kvt_trace_expand(const char *pattern, int pid, const char *name, char *out, unsigned len)
{
	unsigned j = 0;
	for (const char *p = pattern; *p; p++) {
		char num[16];
		const char *ins = NULL;
		char one[2] = { *p, 0 };
		if (p[0] == '%' && p[1] == 'p') {
			decimal(pid, num);
			ins = num;
			p++;
		} else if (p[0] == '%' && p[1] == 'e') {
			ins = name && *name ? name : "prog";
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			ins = "%";
			p++;
		} else {
			ins = one;
		}
		size_t n = strlen(ins);
		if (j + n + 1 > len)
			return -ENAMETOOLONG;
		memcpy(out + j, ins, n);
		j += (unsigned)n;
	}
	out[j] = 0;
	return 0;
}

void kvt_trace_file_name(const char *comm, char out[16])
{
	size_t j = 0;
	for (size_t i = 0; comm[i] && comm[i] != '\n' && j < 15; i++) {
		char c = comm[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '_' || c == '-' || c == '+' || (c == '.' && j);
		out[j++] = ok ? c : '_';
	}
	out[j] = 0;
	if (!j)
		memcpy(out, "prog", 5);
}

/* This process's name for %e: /proc/self/comm (the main thread's; a
 * process may have renamed itself since exec), else this thread's. */
static void program_name(char out[16])
{
	char comm[32] = "";
	int fd = kvt_sys_open("/proc/self/comm", O_RDONLY | O_CLOEXEC, 0);
	ssize_t n = fd >= 0 ? kvt_sys_read(fd, comm, sizeof comm - 1) : -1;
	if (fd >= 0)
		kvt_sys_close(fd);
	if (n > 0)
		comm[n] = 0;
	else
		kvt_sys_thread_name(comm);
	comm[16] = 0;
	kvt_trace_file_name(comm, out);
}

/* Days since 1970-01-01 to a civil date (Howard Hinnant's days_from_civil,
 * inverted): no libc time zone code inside the process. */
static void civil(int64_t days, int *y, unsigned *m, unsigned *d)
{
	days += 719468;
	int64_t era = (days >= 0 ? days : days - 146096) / 146097;
	unsigned doe = (unsigned)(days - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int)(yoe + era * 400 + (*m <= 2));
}

void kvt_trace_run_id(char *out, size_t len, uint64_t unix_s, int pid)
{
	int y;
	unsigned mo, d, s = (unsigned)(unix_s % 86400);
	civil((int64_t)(unix_s / 86400), &y, &mo, &d);
	snprintf(out, len, "%04d%02u%02u-%02u%02u%02u-%d", y, mo, d, s / 3600, s / 60 % 60, s % 60,
		 pid);
}

void kvt_trace_set_run(const char *id)
{
	pthread_mutex_lock(&tr.lock);
	snprintf(tr.run_id, sizeof tr.run_id, "%s", id ? id : "");
	pthread_mutex_unlock(&tr.lock);
}

static int open_excl(const char *path)
{
	return kvt_sys_open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* The pid in an existing trace file's header (0 when unreadable). */
static int owner_pid(const char *path)
{
	struct kvt_trace_header h;
	int fd = kvt_sys_open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ssize_t n = kvt_sys_read(fd, &h, sizeof h);
	kvt_sys_close(fd);
	return n == (ssize_t)sizeof h && !memcmp(h.magic, KVT_TRACE_MAGIC, 8) ? (int)h.pid : 0;
}

/* Open pattern for this pid. An existing path is never overwritten: then
 * "<path>.<pid>", then "<path>.<pid>.2" .. ".<pid>.<KVT_TRACE_TRIES>". A
 * process keeps its pid across exec, so each of its images needs a name:
 * a server launched through a wrapper (a shell, timeout, a Python
 * launcher) runs as that wrapper's forked child's exec'd image. */
#define KVT_TRACE_TRIES 16
static int open_file(void)
{
	int pid = (int)getpid();
	char name[16];
	program_name(name);
	int r = kvt_trace_expand(tr.pattern, pid, name, tr.path, sizeof tr.path);
	if (r)
		return r;
	int fd = open_excl(tr.path);
	if (fd != -EEXIST)
		return fd;
	char alt[sizeof tr.path];
	size_t n = strlen(tr.path);
	if (n + 24 >= sizeof alt)
		return -ENAMETOOLONG;
	memcpy(alt, tr.path, n);
	alt[n] = '.';
	kvt_trace_expand("%p", pid, NULL, alt + n + 1, (unsigned)(sizeof alt - n - 1));
	size_t m = strlen(alt);
	for (int k = 1; k <= KVT_TRACE_TRIES && fd == -EEXIST; k++) {
		if (k > 1) {
			alt[m] = '.';
			kvt_trace_expand("%p", k, NULL, alt + m + 1, (unsigned)(sizeof alt - m - 1));
		}
		fd = open_excl(alt);
	}
	if (fd < 0)
		return fd;
	/* This pid's own file: an image before an exec wrote it; or the file
	 * of the launcher that forked it. Expected: said at info level. */
	int owner = owner_pid(tr.path);
	if (owner == pid)
		kvt_info("KVTIER_TRACE: %s is this process's trace from before its exec; "
			 "writing %s", tr.path, alt);
	else if (owner && owner == (int)getppid())
		kvt_info("KVTIER_TRACE: %s is the trace of the parent process %d; writing %s",
			 tr.path, owner, alt);
	else
		kvt_warn("KVTIER_TRACE: %s exists and is never overwritten; writing %s",
			 tr.path, alt);
	memcpy(tr.path, alt, sizeof alt);
	return fd;
}

/* ---- buffered output (caller holds tr.lock) ---- */

/* What one write of a buffer did, counted as a hook's write always was: a
 * failed write stops tracing, and what it held, and everything after, is
 * dropped. */
static void account_write_locked(ssize_t r, uint64_t events)
{
	if (r < 0 && !tr.failed) {
		tr.failed = 1;
		tr.st.nr_write_errors++;
		kvt_warn("trace %s: write failed (%s); tracing stops, the program runs on",
			 tr.path, strerror((int)-r));
	}
	if (tr.failed)
		tr.st.nr_dropped += events;
}

/* pack: as zstd frames when this file has them (the flush thread's write
 * and the end at exit); a hook's write, fork's, exec's and a signal
 * handler's are raw records, which the format allows between frames. */
static ssize_t write_buf(int fd, const char *buf, uint64_t bytes, int pack)
{
	if (!pack || !tr.zstd)
		return kvt_sys_write_all(fd, buf, bytes);
	return kvt_zstd_write(fd, buf, bytes, &tr.hook_waits);
}

static void write_locked(const char *buf, uint64_t bytes, uint64_t events, int pack)
{
	if (tr.fd < 0 || !bytes)
		return;
	account_write_locked(tr.failed ? 0 : write_buf(tr.fd, buf, bytes, pack), events);
}

/* The active buffer, written here (no thread, or both buffers full). */
static void flush_locked(int pack)
{
	write_locked(tr.buf, tr.pos, tr.buffered_events, pack);
	tr.pos = 0;
	tr.buffered_events = 0;
}

/* The other buffer, when it waits for the thread: written here, in order. */
static void write_out_locked(int pack)
{
	if (tr.out_state != OUT_FULL)
		return;
	write_locked(tr.out, tr.out_bytes, tr.out_events, pack);
	tr.out_state = OUT_FREE;
}

/* The active buffer becomes the one to write; the other takes records. */
static void swap_locked(void)
{
	tr.out = tr.buf;
	tr.out_bytes = tr.pos;
	tr.out_events = tr.buffered_events;
	tr.out_state = OUT_FULL;
	tr.buf = tr.buf == tr.bufs[0] ? tr.bufs[1] : tr.bufs[0];
	tr.pos = 0;
	tr.buffered_events = 0;
}

/* Until the thread's write in progress ends (never from a signal handler:
 * those use lock_idle_for_signal). */
static void wait_writer_locked(void)
{
	while (tr.out_state == OUT_WRITING)
		pthread_cond_wait(&fl.done, &tr.lock);
}

/* Everything buffered to the file, in order (no write in progress). */
static void drain_locked(int pack)
{
	write_out_locked(pack);
	flush_locked(pack);
}

/* Room for n more bytes. With the thread: hand it the full buffer and go
 * on (it writes outside the lock); with both full, wait for its write,
 * then write here as without it. */
static void make_room_locked(uint64_t n)
{
	while (tr.pos + n > tr.cap && tr.fd >= 0) {
		if (fl.running && tr.out_state == OUT_FREE) {
			swap_locked();
			fl.kick = 1;
			pthread_cond_signal(&fl.wake);
			return;
		}
		if (tr.out_state != OUT_WRITING) {
			drain_locked(0);
			return;
		}
		/* a hook waits for the thread's write: it compresses no more */
		__atomic_store_n(&tr.hook_waits, 1, __ATOMIC_RELAXED);
		wait_writer_locked();
	}
}

static int start_locked(void);
static void flusher_spawn(void);
static void info_locked(const char *key, const char *value);

/* A forked child's first record opens its file (kvt_trace_fork_child).
 * `pending` drops only once tr.fd is set (or the open failed): threads that
 * ask kvt_trace_active() meanwhile must hear "on", or they skip recording. */
static void open_pending_locked(void)
{
	if (tr.fd >= 0 || !tr.pending)
		return;
	if (start_locked())
		kvt_warn("fork: no trace for child %d (cannot create its file)", (int)getpid());
	__atomic_store_n(&tr.pending, 0, __ATOMIC_RELEASE);
}

static void append_locked(const void *rec, size_t n, int is_event)
{
	open_pending_locked();
	if (tr.fd < 0)
		return;
	if (tr.failed) {
		tr.st.nr_dropped += is_event;
		return;
	}
	if (n > tr.cap)
		return;
	make_room_locked(n);
	if (tr.fd < 0)
		return;
	memcpy(tr.buf + tr.pos, rec, n);
	tr.pos += n;
	tr.buffered_events += is_event;
	tr.st.nr_events += is_event;
}

/* One record in two pieces (a head and a body), kept together. */
static void append2_locked(const void *a, size_t na, const void *b, size_t nb)
{
	open_pending_locked();
	if (tr.fd < 0 || tr.failed)
		return;
	if (na + nb > tr.cap)
		return;
	make_room_locked(na + nb);
	if (tr.fd < 0)
		return;
	memcpy(tr.buf + tr.pos, a, na);
	memcpy(tr.buf + tr.pos + na, b, nb);
	tr.pos += na + nb;
}

static void write_header_locked(void)
{
	struct kvt_trace_header h;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, KVT_TRACE_MAGIC, 8);
	h.version = tr.zstd ? KVT_TRACE_VERSION : KVT_TRACE_VERSION_RAW;
	h.flags = tr.zstd ? KVT_TRACE_FLAG_ZSTD : 0;
	h.header_bytes = sizeof h;
	h.start_unix_ns = kvt_realtime_ns();
	h.start_mono_ns = tr.start_mono_ns;
	h.pid = (uint32_t)getpid();
	h.ppid = (uint32_t)getppid();
	kvt_sys_thread_name(h.exe);
	append_locked(&h, sizeof h, 0);
	if (tr.run_id[0])            /* every file of a run says so first, forked children's too */
		info_locked("kvtier.run", tr.run_id);
}

static int start_locked(void)
{
	int fd = open_file();
	if (fd < 0)
		return fd;
	__atomic_store_n(&tr.fd, fd, __ATOMIC_RELAXED);   /* before `pending` drops */
	tr.pid = (int)getpid();
	tr.failed = 0;
	tr.pos = 0;
	tr.buffered_events = 0;
	tr.start_mono_ns = kvt_now_ns();
	tr.zstd = tr.want_zstd && kvt_zstd_ready();
	nr_modules = 0;
	write_header_locked();
	flush_locked(0);         /* a trace file is never empty; its header is raw */
	return 0;
}

int kvt_trace_open(const char *pattern, uint64_t buffer_bytes, int stack_depth)
{
	if (strlen(pattern) >= sizeof tr.pattern)
		return -ENAMETOOLONG;
	if (buffer_bytes < 4096)
		buffer_bytes = 4096;
	char *buf = kvt_sys_map_own(2 * buffer_bytes, 0);    /* the two buffers */
	if (buf == (char *)MAP_FAILED)
		return -ENOMEM;
	if (stack_depth > 0 && !stack_keys) {
		stack_keys = kvt_sys_map_own(STACK_SLOTS * 12ull, 0);
		if (stack_keys == MAP_FAILED) {
			stack_keys = NULL;
			stack_depth = 0;
		} else {
			stack_ids = (uint32_t *)(stack_keys + STACK_SLOTS);
		}
	}
	pthread_mutex_lock(&tr.lock);
	strcpy(tr.pattern, pattern);
	tr.buf = tr.bufs[0] = buf;
	tr.bufs[1] = buf + buffer_bytes;
	tr.out_state = OUT_FREE;
	tr.cap = buffer_bytes;
	tr.depth = stack_depth > (int)KVT_TRACE_MAX_FRAMES ? (int)KVT_TRACE_MAX_FRAMES : stack_depth;
	int r = start_locked();
	pthread_mutex_unlock(&tr.lock);
	if (!r && tr.depth) {
		/* libunwind sets itself up lazily on first use, racily: do it now,
		 * from the constructor, before the application has threads. */
		kvt_unwind_init();
	}
	if (r) {
		kvt_sys_munmap(buf, 2 * buffer_bytes);
		tr.buf = tr.bufs[0] = tr.bufs[1] = NULL;
	}
	return r;
}

int kvt_trace_compress(int on, const char *lib)
{
	const char *why = "";
	int r = on ? kvt_zstd_load(lib, &why) : 0;
	if (r)
		kvt_warn("KVTIER_TRACE_COMPRESS=zstd: %s %s; the trace is written uncompressed",
			 lib && *lib ? lib : "libzstd.so.1", why);
	pthread_mutex_lock(&tr.lock);
	tr.want_zstd = on && !r;
	pthread_mutex_unlock(&tr.lock);
	return r;
}

int kvt_trace_compressed(void)
{
	return tr.zstd;
}

/* `pending` is read first: a child's first record sets tr.fd, then drops
 * `pending` (release); reading them the other way round could see neither. */
int kvt_trace_active(void)
{
	return __atomic_load_n(&tr.pending, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&tr.fd, __ATOMIC_RELAXED) >= 0;
}

const char *kvt_trace_path(void)
{
	return tr.fd >= 0 ? tr.path : "";
}

void kvt_trace_event(struct kvt_rec_event *ev)
{
	ev->head.type = KVT_REC_EVENT;
	ev->head.bytes = sizeof *ev;
	ev->tid = (uint32_t)kvt_gettid();
	pthread_mutex_lock(&tr.lock);
	open_pending_locked();        /* its clock starts with the file */
	ev->t_ns = kvt_now_ns() - tr.start_mono_ns;
	append_locked(ev, sizeof *ev, 1);
	pthread_mutex_unlock(&tr.lock);
	if (__atomic_load_n(&fl.state, __ATOMIC_RELAXED) == FL_WANTED)
		flusher_spawn();
}

uint16_t kvt_attribute_api(uint16_t api)
{
	/* host calls are never the runtime's: a signal handler's mmap that
	 * lands inside cudaMalloc must not take the runtime call's name */
	if (api >= KVT_API_mmap)
		return api;
	if (kvt_tls.rt_api && !kvt_tls.rt_seen) {
		kvt_tls.rt_seen = 1;
		return kvt_tls.rt_api;
	}
	return api;
}

void kvt_rec_event(uint16_t op, uint8_t kind, uint16_t api, uint64_t addr,
		   uint64_t size, uint64_t aux, uint64_t aux2, int32_t result)
{
	if (!kvt_trace_active())
		return;
	struct kvt_rec_event ev = {
		.op = op, .api = kvt_attribute_api(api), .addr = addr, .size = size,
		.aux = aux, .aux2 = aux2, .result = result, .kind = kind,
	};
	kvt_trace_event(&ev);
}

void kvt_trace_epoch(struct kvt_rec_epoch *e)
{
	if (!kvt_trace_active())
		return;
	e->head.type = KVT_REC_EPOCH;
	e->head.bytes = sizeof *e;
	e->reserved = 0;
	pthread_mutex_lock(&tr.lock);
	open_pending_locked();
	e->t_ns = kvt_now_ns() - tr.start_mono_ns;
	append_locked(e, sizeof *e, 0);
	pthread_mutex_unlock(&tr.lock);
}

/* One INFO record "key=value" (the value cut to fit 1 KiB). */
static void info_locked(const char *key, const char *value)
{
	char rec[1024];
	struct kvt_rec_head h = { KVT_REC_INFO, 0 };
	size_t kl = strlen(key), vl = strlen(value);
	if (sizeof h + kl + 1 + vl > sizeof rec)
		vl = sizeof rec - sizeof h - kl - 1;
	memcpy(rec + sizeof h, key, kl);
	rec[sizeof h + kl] = '=';
	memcpy(rec + sizeof h + kl + 1, value, vl);
	h.bytes = (uint16_t)(sizeof h + kl + 1 + vl);
	memcpy(rec, &h, sizeof h);
	append_locked(rec, h.bytes, 0);
}

void kvt_trace_info(const char *key, const char *value)
{
	pthread_mutex_lock(&tr.lock);
	info_locked(key, value);
	pthread_mutex_unlock(&tr.lock);
}

void kvt_trace_faults(const uint64_t *chunk, const uint32_t *nr, unsigned n)
{
	struct {
		struct kvt_rec_faults h;
		struct kvt_rec_fault_entry e[KVT_TRACE_MAX_FAULTS];
	} rec;
	if (!kvt_trace_active())
		return;
	pthread_mutex_lock(&tr.lock);
	open_pending_locked();
	uint64_t t = kvt_now_ns() - tr.start_mono_ns;
	for (unsigned i = 0; i < n;) {
		unsigned k = 0;
		for (; k < KVT_TRACE_MAX_FAULTS && i < n; k++, i++)
			rec.e[k] = (struct kvt_rec_fault_entry){ chunk[i], nr[i], 0 };
		rec.h = (struct kvt_rec_faults){
			.head = { KVT_REC_FAULTS, (uint16_t)(sizeof rec.h + k * sizeof rec.e[0]) },
			.nr = k, .t_ns = t,
		};
		append_locked(&rec, rec.h.head.bytes, 0);
	}
	pthread_mutex_unlock(&tr.lock);
}

/* ---- modules, for offline symbolization ---- */

static int module_known(uint64_t ip)
{
	for (unsigned i = 0; i < nr_modules; i++)
		if (ip >= modules[i].start && ip < modules[i].end)
			return 1;
	return 0;
}

/* The BUILDID record that follows a module's MODULE record (none when the
 * object has no build id note): read from its notes in memory. */
static void emit_build_id(const struct dl_phdr_info *info, uint64_t start)
{
	char rec[sizeof(struct kvt_rec_module_buildid) + KVT_TRACE_MAX_BUILD_ID];
	struct kvt_rec_module_buildid b = { .head = { KVT_REC_MODULE_BUILDID, 0 }, .start = start };
	b.id_bytes = kvt_dl_object_build_id(info, (uint8_t *)rec + sizeof b, KVT_TRACE_MAX_BUILD_ID);
	if (!b.id_bytes)
		return;
	b.head.bytes = (uint16_t)(sizeof b + b.id_bytes);
	memcpy(rec, &b, sizeof b);
	append_locked(rec, b.head.bytes, 0);
}

static int emit_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	uint64_t lo, hi;
	kvt_dl_object_span(info, &lo, &hi);
	if (!hi || module_known(lo) || nr_modules == MAX_MODULES)
		return 0;
	const char *path = info->dlpi_name;
	char exe[512];
	if (!path || !*path) {          /* the main program */
		ssize_t n = kvt_sys_readlink("/proc/self/exe", exe, sizeof exe - 1);
		exe[n > 0 ? n : 0] = 0;
		path = exe;
	}
	char rec[sizeof(struct kvt_rec_module) + 600];
	struct kvt_rec_module m = { .head = { KVT_REC_MODULE, 0 } };
	m.path_bytes = (uint32_t)strnlen(path, 600);
	m.bias = info->dlpi_addr;
	m.start = lo;
	m.end = hi;
	m.head.bytes = (uint16_t)(sizeof m + m.path_bytes);
	memcpy(rec, &m, sizeof m);
	memcpy(rec + sizeof m, path, m.path_bytes);
	modules[nr_modules].start = lo;
	modules[nr_modules].end = hi;
	nr_modules++;
	append_locked(rec, m.head.bytes, 0);
	emit_build_id(info, lo);
	return 0;
}

/* ---- call sites ---- */

static uint64_t hash_ips(void *const *ip, int n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
	for (int i = 0; i < n; i++) {
		h ^= (uint64_t)(uintptr_t)ip[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h ? h : 1;
}

/* The key of a native + Python combination: each gets its own stack id. */
static uint64_t stack_key(void *const *ip, int n, const struct kvt_py_stack *py)
{
	uint64_t h = hash_ips(ip, n);
	if (py) {
		h ^= kvt_py_hash(py) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
		h = h ? h : 1;
	}
	return h;
}

/* The PYSTACK record of stack `id`, right after its STACK (tr.lock held). */
static void add_pystack_locked(uint32_t id, const struct kvt_py_stack *py)
{
	struct kvt_rec_pystack p = { .head = { KVT_REC_PYSTACK, 0 }, .stack_id = id,
				     .nr_frames = py->nr_frames };
	p.head.bytes = (uint16_t)(sizeof p + py->bytes);
	append2_locked(&p, sizeof p, py->body, py->bytes);
	tr.st.nr_pystacks++;
}

/* Insert a new stack (stack_lock held): write its modules and record(s). */
static uint32_t add_stack_locked(uint64_t key, unsigned slot, void *const *ip, int n,
				 const struct kvt_py_stack *py)
{
	uint32_t id = next_stack_id++;
	char rec[sizeof(struct kvt_rec_stack) + 8 * KVT_TRACE_MAX_FRAMES];
	struct kvt_rec_stack s = { .head = { KVT_REC_STACK, 0 }, .id = id,
				   .nr_frames = (uint32_t)n };
	s.head.bytes = (uint16_t)(sizeof s + 8u * (unsigned)n);
	memcpy(rec, &s, sizeof s);
	for (int i = 0; i < n; i++) {
		uint64_t v = (uint64_t)(uintptr_t)ip[i];
		memcpy(rec + sizeof s + 8u * (unsigned)i, &v, 8);
	}
	pthread_mutex_lock(&tr.lock);
	open_pending_locked();     /* the file, and its module list, start here */
	for (int i = 0; i < n; i++) {
		if (!module_known((uint64_t)(uintptr_t)ip[i])) {
			kvt_dl_each_object(emit_module, NULL);
			break;
		}
	}
	append_locked(rec, s.head.bytes, 0);
	tr.st.nr_stacks++;
	if (py)
		add_pystack_locked(id, py);
	pthread_mutex_unlock(&tr.lock);
	stack_ids[slot] = id;
	__atomic_store_n(&stack_keys[slot], key, __ATOMIC_RELEASE);
	return id;
}

static uint32_t stack_id_of(void *const *ip, int n, const struct kvt_py_stack *py)
{
	uint64_t key = stack_key(ip, n, py);
	unsigned slot = (unsigned)(key & (STACK_SLOTS - 1));
	for (unsigned probe = 0; probe < 64; probe++, slot = (slot + 1) & (STACK_SLOTS - 1)) {
		uint64_t k = __atomic_load_n(&stack_keys[slot], __ATOMIC_ACQUIRE);
		if (k == key)
			return stack_ids[slot];
		if (k)
			continue;
		pthread_mutex_lock(&stack_lock);
		k = __atomic_load_n(&stack_keys[slot], __ATOMIC_ACQUIRE);
		uint32_t id = 0;
		if (!k)
			id = add_stack_locked(key, slot, ip, n, py);
		else if (k == key)
			id = stack_ids[slot];
		pthread_mutex_unlock(&stack_lock);
		if (id)
			return id;
	}
	__atomic_fetch_add(&tr.st.nr_stack_full, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Stack ids start over in a fork child (its own file): the ids the stack
 * cache kept are the parent's. */
static uint32_t stack_gen = 1;

/* The id of native frames without Python ones: the one the stack cache
 * kept for them, or found and kept. */
static uint32_t native_id(void *const *ip, int n, void *hit, int depth)
{
	uint32_t id = kvt_unwind_memo(hit, depth, stack_gen);
	if (!id) {
		id = stack_id_of(ip, n, NULL);
		kvt_unwind_memo_keep(hit, depth, stack_gen, id);
	}
	return id;
}

/* The native frames outside libkvtier: ip[*skip, *skip + n); *hit as
 * kvt_unwind's. */
static int native_frames(void **ip, int depth, int *skip, void **hit)
{
	int n = kvt_unwind(ip, depth + 8, hit);
	*skip = 0;
	while (*skip < n && kvt_self_contains(ip[*skip]))
		(*skip)++;
	n -= *skip;
	return n > depth ? depth : n;
}

uint32_t kvt_trace_callsite(void)
{
	void *ip[KVT_TRACE_MAX_FRAMES + 8];
	int depth = tr.depth, skip;
	if (depth <= 0 || !stack_keys || !kvt_trace_active())
		return 0;
	void *hit;
	int n = native_frames(ip, depth, &skip, &hit);
	return n > 0 ? native_id(ip + skip, n, hit, depth) : 0;
}

uint32_t kvt_trace_callsite_python(void)
{
	void *ip[KVT_TRACE_MAX_FRAMES + 8];
	struct kvt_py_stack py;
	int depth = tr.depth, skip;
	if (depth <= 0 || !stack_keys || !kvt_trace_active())
		return 0;
	void *hit;
	int n = native_frames(ip, depth, &skip, &hit);
	if (n <= 0)
		return 0;
	int npy = kvt_py_capture(&py, depth);
	return npy > 0 ? stack_id_of(ip + skip, n, &py) : native_id(ip + skip, n, hit, depth);
}

/* ---- the flush thread ---- */

static void deadline_after(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

/* The handed buffer, written outside the lock (returns with it held).
 * Nothing else writes meanwhile: a hook that needs the buffer, a drain and
 * close wait for OUT_WRITING to end; fork's prepare too. */
static void write_out_unlocked(void)
{
	int fd = tr.fd, failed = tr.failed;
	const char *buf = tr.out;
	uint64_t bytes = tr.out_bytes, events = tr.out_events;
	tr.out_state = OUT_WRITING;
	pthread_mutex_unlock(&tr.lock);
	ssize_t r = failed || fd < 0 ? 0 : write_buf(fd, buf, bytes, 1);
	pthread_mutex_lock(&tr.lock);
	__atomic_store_n(&tr.hook_waits, 0, __ATOMIC_RELAXED);
	account_write_locked(r, events);
	tr.st.nr_flushes++;
	tr.out_state = OUT_FREE;
	pthread_cond_broadcast(&fl.done);
}

/* Every every_ns, and when a hook hands over a full buffer: write what is
 * buffered. Real time, also under a simulator's virtual clock: the file is
 * for the operator, who waits in real time. */
static void *flush_main(void *arg)
{
	(void)arg;
	__atomic_store_n(&fl.started, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&tr.lock);
	while (!fl.stop) {
		struct timespec ts;
		deadline_after(&ts, fl.every_ns);
		while (!fl.stop && !fl.kick)
			if (pthread_cond_timedwait(&fl.wake, &tr.lock, &ts) == ETIMEDOUT)
				break;
		fl.kick = 0;
		if (tr.out_state == OUT_FREE && tr.pos && tr.fd >= 0 && !tr.failed)
			swap_locked();
		if (tr.out_state == OUT_FULL)
			write_out_unlocked();
	}
	struct timespec cpu;
	if (!clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu))
		fl.cpu_ns = (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
	pthread_mutex_unlock(&tr.lock);
	return NULL;
}

/* From the first event's thread, after its record (no lock held): once. */
static void flusher_spawn(void)
{
	int want = FL_WANTED;
	if (!__atomic_compare_exchange_n(&fl.state, &want, FL_STARTING, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fl.wake, &ca);        /* nobody waits on it yet */
	pthread_condattr_destroy(&ca);
	pthread_attr_t a;
	pthread_attr_init(&a);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
	pthread_attr_setstacksize(&a, 64 << 10);
#endif
	sigset_t all, old;
	sigfillset(&all);            /* the application's signals never land here */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t th;
	kvt_tls.depth++;             /* the thread's stack map is kvtier's own */
	int r = pthread_create(&th, &a, flush_main, NULL);
	kvt_tls.depth--;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (r) {
		kvt_warn("cannot start the trace flush thread (%s); events reach %s when "
			 "its buffer fills and at exit", strerror(r), tr.path);
		__atomic_store_n(&fl.state, FL_FAILED, __ATOMIC_RELEASE);
		return;
	}
	pthread_mutex_lock(&tr.lock);
	fl.th = th;
	fl.running = 1;
	pthread_mutex_unlock(&tr.lock);
	__atomic_store_n(&fl.state, FL_RUNNING, __ATOMIC_RELEASE);
}

/* How long close waits for the thread to end: one write of a buffer. One
 * that does not end by then (a stalled disk) is left; it writes nothing
 * after the file is closed. */
#define FLUSH_JOIN_MS 2000

static void flusher_stop(void)
{
	pthread_mutex_lock(&tr.lock);
	int running = fl.running;
	fl.stop = 1;
	pthread_cond_signal(&fl.wake);
	pthread_mutex_unlock(&tr.lock);
	if (running) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + FLUSH_JOIN_MS * 1000000ull;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		if (pthread_timedjoin_np(fl.th, NULL, &ts))
			pthread_detach(fl.th);
	}
	pthread_mutex_lock(&tr.lock);
	fl.running = 0;
	fl.stop = 0;
	pthread_mutex_unlock(&tr.lock);
	__atomic_store_n(&fl.state, FL_NONE, __ATOMIC_RELEASE);
}

void kvt_trace_flush_start(unsigned every_ms)
{
	if (!kvt_trace_active() || !every_ms)
		return;
	fl.every_ns = every_ms * 1000000ull;
	__atomic_store_n(&fl.state, FL_WANTED, __ATOMIC_RELEASE);
}

/* ---- end, fork, signals, stats ---- */

/* END, and the file closed. No write in progress: the caller waited.
 * pack: as write_locked's. */
static void close_locked(int pack)
{
	open_pending_locked();   /* a forked child that lived and ends: its file, with END */
	if (tr.fd < 0)
		return;
	drain_locked(pack);      /* END follows every record, in one empty buffer */
	struct kvt_rec_end e = { .head = { KVT_REC_END, sizeof e } };
	e.nr_events = tr.st.nr_events;
	e.nr_dropped = tr.st.nr_dropped + (tr.failed ? tr.buffered_events : 0);
	e.nr_stacks = tr.st.nr_stacks;
	append_locked(&e, sizeof e, 0);
	flush_locked(pack);
	kvt_sys_close(tr.fd);
	__atomic_store_n(&tr.fd, -1, __ATOMIC_RELAXED);
}

/* How long _exit and a signal wait for a busy trace lock, or for the flush
 * thread's write: another thread's record is a copy, or a write of one
 * buffer; a preempted holder on a loaded machine takes a few scheduler
 * slices. A lock that stays busy that long is this thread's own (a signal
 * handler interrupted a writer): given up, and what that buffer holds is
 * lost; what was written before stays. */
#define CLOSE_WAIT_MS 200

/* tr.lock, with no write in progress: 0; -1 after CLOSE_WAIT_MS. Only
 * async-signal-safe calls: trylock, nanosleep. */
static int lock_idle_for_signal(void)
{
	for (int ms = 0; ms <= CLOSE_WAIT_MS; ms++) {
		if (!pthread_mutex_trylock(&tr.lock)) {
			if (tr.out_state != OUT_WRITING)
				return 0;
			pthread_mutex_unlock(&tr.lock);
		}
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return -1;
}

void kvt_trace_close_if_owner(void)
{
	/* a vfork child shares this memory with its parent: hands off */
	if (!kvt_trace_active() || tr.pid != (int)getpid())
		return;
	if (lock_idle_for_signal())
		return;
	close_locked(1);         /* the end at _exit: frames too (the context never allocates) */
	pthread_mutex_unlock(&tr.lock);
}

void kvt_trace_on_signal(int sig, int last)
{
	if (!kvt_trace_active() || tr.pid != (int)getpid() || lock_idle_for_signal())
		return;
	char rec[sizeof(struct kvt_rec_head) + 32] = "....trace.signal=";
	size_t n = sizeof(struct kvt_rec_head) + strlen("trace.signal=");
	if (sig >= 10)
		rec[n++] = (char)('0' + sig / 10 % 10);
	rec[n++] = (char)('0' + sig % 10);
	struct kvt_rec_head h = { KVT_REC_INFO, (uint16_t)n };
	memcpy(rec, &h, sizeof h);
	drain_locked(0);         /* raw: a handler compresses nothing; the INFO fits the empty buffer */
	append_locked(rec, n, 0);
	if (last)
		close_locked(0);
	else
		drain_locked(0);
	pthread_mutex_unlock(&tr.lock);
}

void kvt_trace_close(void)
{
	flusher_stop();
	pthread_mutex_lock(&tr.lock);
	wait_writer_locked();
	if (fl.cpu_ns && tr.fd >= 0) {   /* what the flush thread cost (compressing included) */
		char us[24];
		snprintf(us, sizeof us, "%llu", (unsigned long long)(fl.cpu_ns / 1000u));
		info_locked("trace.flush_cpu_us", us);
		fl.cpu_ns = 0;
	}
	close_locked(1);
	pthread_mutex_unlock(&tr.lock);
}

void kvt_trace_flush(void)
{
	pthread_mutex_lock(&tr.lock);
	wait_writer_locked();
	drain_locked(0);
	pthread_mutex_unlock(&tr.lock);
}

/* A fork while the flush thread is being made waits until it runs its own
 * code (2 s at most): the thread library and a sanitizer's allocator take
 * locks while a thread starts, and a child that inherits one held hangs at
 * its first thread (seen with ASan: a forked child stuck in calloc under
 * pthread_getattr_np). */
static void wait_flusher_started(void)
{
	for (int i = 0; i < 2000; i++) {
		int s = __atomic_load_n(&fl.state, __ATOMIC_ACQUIRE);
		if ((s != FL_STARTING && s != FL_RUNNING) || __atomic_load_n(&fl.started, __ATOMIC_ACQUIRE))
			return;
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
}

void kvt_trace_fork_prepare(void)
{
	wait_flusher_started();
	kvt_unwind_gate_close();
	pthread_mutex_lock(&stack_lock);
	pthread_mutex_lock(&tr.lock);
	wait_writer_locked();
	drain_locked(0);     /* nothing buffered is written twice */
}

void kvt_trace_fork_parent(void)
{
	pthread_mutex_unlock(&tr.lock);
	pthread_mutex_unlock(&stack_lock);
	kvt_unwind_gate_open();
}

/* The child has no flush thread (fork copies only the calling thread): it
 * starts one with its own first event, as a process does. Not in a
 * ThreadSanitizer build: there a thread made in the child of a process that
 * had threads can take an id TSan still holds for the parent's ("dup thread
 * with used id") and the child does not end cleanly; such a child writes
 * when its buffer fills and at exit, as with KVTIER_TRACE_FLUSH_MS=0. */
static void flusher_fork_child(void)
{
	pthread_cond_init(&fl.done, NULL);
	pthread_cond_init(&fl.wake, NULL);
	fl.running = fl.stop = fl.kick = fl.started = 0;
	int s = fl.state;
	fl.state = s == FL_RUNNING || s == FL_STARTING ? FL_WANTED : s;
#if defined(__SANITIZE_THREAD__)
	fl.state = FL_NONE;
#endif
	tr.out_state = OUT_FREE;             /* prepare drained it */
}

/* The child's file is created at its first record or when it ends (exit,
 * _exit), not here: most forked children exec at once (a launcher starting
 * the server, a shell running a command), and the exec'd image, same pid,
 * opens its own trace. A file made here would take the name that image
 * needs and stay empty. */
void kvt_trace_fork_child(void)
{
	pthread_mutex_init(&tr.lock, NULL);
	pthread_mutex_init(&stack_lock, NULL);
	kvt_unwind_gate_open();
	flusher_fork_child();
	if (tr.fd < 0 && !tr.pending)
		return;
	if (tr.fd >= 0)
		kvt_sys_close(tr.fd);    /* the parent's file stays the parent's */
	tr.fd = -1;
	tr.pid = (int)getpid();
	memset(&tr.st, 0, sizeof tr.st);
	/* Stack ids restart: the child's file must describe its own stacks. */
	if (stack_keys)
		memset(stack_keys, 0, STACK_SLOTS * 12ull);
	next_stack_id = 1;
	stack_gen++;             /* ids the stack cache kept are the parent's */
	nr_modules = 0;          /* the parent's file described them, not the child's */
	kvt_py_counters_reset(); /* its INFO records count its own call sites */
	__atomic_store_n(&tr.pending, 1, __ATOMIC_RELAXED);
}

void kvt_trace_stats(struct kvt_trace_stats *out)
{
	pthread_mutex_lock(&tr.lock);
	*out = tr.st;
	pthread_mutex_unlock(&tr.lock);
}
