// SPDX-License-Identifier: MIT
/* The live stats segment (contract in stats.h, layout in
 * include/kvtier/stats_format.h). Owns /dev/shm/kvtier.<pid>: created
 * O_EXCL|O_NOFOLLOW, 0600; never follows or overwrites what is there.
 * Hook entry points: atomics and a clock read; publishing is a seqlocked
 * copy into the mapping under a try-lock. No malloc, no stdio, no waiting. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvtier/planner.h"
#include "kvtier/stats_format.h"

#include "../base/kvt.h"
#include "place.h"
#include "stats.h"
#include "../profiler/evclass.h"
#include "../profiler/evidence.h"
#include "../profiler/heat.h"
#include "../profiler/pyframes.h"
#include "../profiler/trace.h"

_Static_assert(KVT_KIND__COUNT <= KVT_STATS_KINDS, "kinds outgrew the stats segment");
_Static_assert(KVT_PLACE__COUNT <= KVT_STATS_PLACES, "placements outgrew the stats segment");
_Static_assert(KVT_FB__COUNT <= KVT_STATS_FALLBACKS, "fallbacks outgrew the stats segment");
_Static_assert(KVT_SRC__COUNT <= KVT_STATS_SOURCES, "sources outgrew the stats segment");
_Static_assert(KVT_EVC__COUNT <= KVT_STATS_EVC, "evidence classes outgrew the stats segment");
_Static_assert(KVT_MIGR_DEVICES <= KVT_STATS_DEVICES, "devices outgrew the stats segment");

#define PUBLISH_EVERY_NS 100000000ull     /* from the hooks: at most every 100 ms */
#define SEG_BYTES 4096u
_Static_assert(sizeof(struct kvt_stats_seg) <= SEG_BYTES, "the stats segment outgrew a page");

enum seg_state { SEG_OFF = 0, SEG_ON, SEG_EXEC };

static struct {
	struct kvt_stats_seg *seg;
	int state;                   /* enum seg_state (atomic) */
	int busy;                    /* the publish try-lock */
	pid_t pid;
	uint64_t next_ns;            /* the next hook-driven publish (atomic) */
	uint64_t start_mono_ns, start_unix_ns;
	char path[64];
	/* under busy: what the last epoch said */
	struct kvt_stats_migr migr;
	uint64_t chunks_hbm, chunks_far, hbm_budget;
	struct kvt_registry *mem_reg, *host_reg;   /* read for the live totals */
} st;

/* Hook-side counters (atomics), per kind and placement: an allocation or a
 * free adds to two of them, not four (make bench's passthrough row); the
 * segment's per-kind and live per-placement figures are sums made at
 * publish. A re-home moves live figures between placements: placement
 * counts those moves (kvt_place_counters' moved_*), read here. */
static struct kvt_stats_kind kp[KVT_STATS_KINDS][KVT_STATS_PLACES];

#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)
#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static int try_lock(void)
{
	return !__atomic_exchange_n(&st.busy, 1, __ATOMIC_ACQUIRE);
}

static void unlock(void)
{
	__atomic_store_n(&st.busy, 0, __ATOMIC_RELEASE);
}

/* Exit and exec only: wait (bounded) for a publish in flight. */
static int lock_bounded(void)
{
	for (int i = 0; i < 1000; i++) {
		if (try_lock())
			return 1;
		sched_yield();
	}
	return 0;
}

/* ---- publishing ---- */

static void fill_static(struct kvt_stats_seg *s)
{
	s->magic = KVT_STATS_MAGIC;
	s->version = KVT_STATS_VERSION;
	s->size = sizeof *s;
	s->pid = st.pid;
	s->uid = (uint32_t)geteuid();
	snprintf(s->comm, sizeof s->comm, "%s", program_invocation_short_name);
	s->start_unix_ns = st.start_unix_ns;
	s->nr_fallbacks = KVT_FB__COUNT;
	for (unsigned i = 0; i < KVT_FB__COUNT; i++)
		snprintf(s->fallback_name[i], KVT_STATS_NAME, "%s", kvt_place_fallback_name(i));
	s->nr_evc = KVT_EVC__COUNT;
	for (unsigned i = 0; i < KVT_EVC__COUNT; i++)
		snprintf(s->evc_name[i], KVT_STATS_NAME, "%s", kvt_evc_name((enum kvt_evc)i));
	s->nr_sources = KVT_SRC__COUNT;
	for (unsigned i = 0; i < KVT_SRC__COUNT; i++)
		snprintf(s->source_name[i], KVT_STATS_NAME, "%s", kvt_prof_source_name(i));
	_Static_assert(KVT_PY_FB__COUNT <= KVT_STATS_PY_FALLBACKS, "stats: py fallbacks");
	s->nr_py_fallbacks = KVT_PY_FB__COUNT;
	for (unsigned i = 0; i < KVT_PY_FB__COUNT; i++)
		snprintf(s->py_fallback_name[i], KVT_STATS_NAME, "%s", kvt_py_fallback_name(i));
}

/* The devices: budget and HBM bytes as the last epoch left them (the sum
 * of the budgets in force replaces placement's start-time figure once the
 * migrator has planned), faults and link bytes as CUPTI counted them. */
static void fill_devices(struct kvt_stats_seg *s)
{
	uint64_t budgets = 0;
	s->nr_devices = st.migr.nr_dev < KVT_STATS_DEVICES ? st.migr.nr_dev : KVT_STATS_DEVICES;
	for (unsigned i = 0; i < s->nr_devices; i++) {
		const struct kvt_migr_dev *m = &st.migr.dev[i];
		struct kvt_stats_dev *d = &s->dev[i];
		d->device = m->dev;
		d->epoch = m->epoch;
		d->budget_bytes = m->budget_bytes;
		d->hbm_bytes = m->hbm_bytes;
		d->faults = kvt_cupti_faults(m->dev);
		kvt_cupti_link_bytes(m->dev, &d->link_to_hbm_bytes, &d->link_to_far_bytes);
		kvt_cupti_driver_bytes(m->dev, &d->fault_in_bytes, &d->evicted_bytes);
		budgets += m->epoch ? m->budget_bytes : 0;
	}
	if (budgets)
		s->hbm_budget_bytes = budgets;
}

static void fill_counters(struct kvt_stats_seg *s)
{
	struct kvt_place_counters pc;
	kvt_place_counters(&pc);
	s->flags = (kvt_opt.migrate ? KVT_STATS_F_MIGRATE : 0) |
		   (kvt_trace_active() ? KVT_STATS_F_TRACE : 0) |
		   (pc.placing ? KVT_STATS_F_PLACING : 0) |
		   (!strncmp(kvt_prof_source_state(KVT_SRC_CUPTI), "active", 6) ?
		    KVT_STATS_F_CUPTI : 0);
	s->far_node = pc.far_node;
	uint64_t live_nr[KVT_STATS_PLACES], live_bytes[KVT_STATS_PLACES];
	for (unsigned p = 0; p < KVT_STATS_PLACES; p++) {
		live_nr[p] = p < KVT_PLACE__COUNT ? pc.moved_nr[p] : 0;
		live_bytes[p] = p < KVT_PLACE__COUNT ? pc.moved_bytes[p] : 0;
	}
	for (unsigned k = 0; k < KVT_STATS_KINDS; k++) {
		memset(&s->kind[k], 0, sizeof s->kind[k]);
		for (unsigned p = 0; p < KVT_STATS_PLACES; p++) {
			uint64_t n = LD(kp[k][p].nr), b = LD(kp[k][p].bytes);
			uint64_t nf = LD(kp[k][p].nr_free), bf = LD(kp[k][p].bytes_free);
			s->kind[k].nr += n;
			s->kind[k].bytes += b;
			s->kind[k].nr_free += nf;
			s->kind[k].bytes_free += bf;
			live_nr[p] += n - nf;
			live_bytes[p] += b - bf;
		}
	}
	for (unsigned p = 0; p < KVT_PLACE__COUNT; p++) {
		s->place[p].nr = pc.nr_placed[p];
		s->place[p].bytes = pc.bytes_placed[p];
		s->place[p].nr_live = live_nr[p];
		s->place[p].bytes_live = live_bytes[p];
	}
	struct kvt_reg_stats rm = { 0 }, rh = { 0 };
	kvt_reg_stats(st.mem_reg, &rm);
	kvt_reg_stats(st.host_reg, &rh);
	s->reg_nr_live = rm.nr_live + rh.nr_live;
	s->reg_bytes_live = rm.bytes_live + rh.bytes_live;
	for (unsigned i = 0; i < KVT_FB__COUNT; i++)
		s->fallback[i] = pc.fallback[i];
	s->rehomed = pc.rehomed;
	s->node_mismatch = pc.mismatch;
	s->hbm_budget_bytes = st.hbm_budget;
	fill_devices(s);
	s->epochs = st.migr.epochs;
	s->nr_promoted = st.migr.nr_promoted;
	s->bytes_promoted = st.migr.bytes_promoted;
	s->nr_demoted = st.migr.nr_demoted;
	s->bytes_demoted = st.migr.bytes_demoted;
	s->prefetch_issued = st.migr.prefetch_issued;
	s->prefetch_failed = st.migr.prefetch_failed;
	s->ranges_tracked = st.migr.tracked;
	s->track_failed = st.migr.track_failed;
	s->chunks_hbm = st.chunks_hbm;
	s->chunks_far = st.chunks_far;
	for (unsigned i = 0; i < KVT_SRC__COUNT; i++)
		s->evidence[i] = kvt_prof_events(i);
	kvt_evc_totals(s->evc_ranges, s->evc_bytes);
	if (kvt_trace_active()) {     /* the trace's own mutex, taken per event anyway */
		struct kvt_trace_stats ts;
		kvt_trace_stats(&ts);
		s->trace_events = ts.nr_events;
		s->trace_dropped = ts.nr_dropped;
		s->trace_write_errors = ts.nr_write_errors;
	}
	struct kvt_py_counters py;
	kvt_py_counters(&py);
	s->py_captured = py.captured;
	s->py_version = py.version > 0 ? (uint32_t)py.version : 0;
	for (unsigned i = 0; i < KVT_PY_FB__COUNT; i++)
		s->py_fallback[i] = py.fallback[i];
}

/* Caller holds busy and the segment is mapped. Seqlock: odd while inside. */
static void publish_locked(void)
{
	struct kvt_stats_seg *s = st.seg;
	uint64_t seq = LD(s->seq);
	/* odd: a reader retries; the acquire half keeps the stores below after it */
	__atomic_exchange_n(&s->seq, seq + 1, __ATOMIC_ACQ_REL);
	fill_counters(s);
	s->nr_publish++;
	s->update_unix_ns = kvt_realtime_ns();
	s->uptime_ns = kvt_now_ns() - st.start_mono_ns;
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

/* ---- the segment ---- */

/* Whether path is a segment kvtier made for `pid` in this pid namespace: a
 * regular 0600 file of ours of the segment's size, with the magic, that pid
 * and our pid namespace. Anything else (a symlink, another owner, other
 * content) is never removed. */
static int is_segment_of(const char *path, int32_t pid)
{
	struct kvt_stats_seg old;
	struct stat sb, ns;
	int fd = kvt_sys_open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	int ok = !kvt_sys_fstat(fd, &sb) && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
		 (sb.st_mode & 07777) == 0600 && sb.st_size == SEG_BYTES &&
		 kvt_sys_pread(fd, &old, sizeof old, 0) == (ssize_t)sizeof old &&
		 old.magic == KVT_STATS_MAGIC && old.pid == pid &&
		 !kvt_sys_stat("/proc/self/ns/pid", &ns) && old.pidns_ino == (uint64_t)ns.st_ino;
	kvt_sys_close(fd);
	return ok;
}

/* An existing file at our path is replaced only when it is provably a dead
 * segment of this pid (a process killed before its destructor ran, whose
 * pid we now have). */
static int is_our_stale(const char *path)
{
	return is_segment_of(path, st.pid);
}

/* A process killed by a signal (a server stopped with SIGTERM or SIGKILL by
 * its supervisor) leaves its segment behind, and restarts would pile them
 * up in /dev/shm. The first segment a process image creates removes those
 * whose pid no longer exists here and which pass is_segment_of(); at most
 * SWEEP_SCAN directory entries are looked at. A fork child does not sweep
 * (it makes no segment); an exec'd image does once. */
#define SWEEP_SCAN 4096
static int sweep_entry(const char *name, void *arg)
{
	unsigned *removed = arg;
	const size_t plen = strlen(KVT_STATS_PREFIX);
	if (strncmp(name, KVT_STATS_PREFIX, plen))
		return 0;
	char *end;
	long pid = strtol(name + plen, &end, 10);
	if (end == name + plen || *end || pid <= 0 || pid > INT32_MAX ||
	    pid == st.pid || kvt_sys_kill((pid_t)pid, 0) != -ESRCH)
		return 0;
	char path[sizeof KVT_STATS_DIR + 1 + NAME_MAX + 1];
	snprintf(path, sizeof path, "%s/%s", KVT_STATS_DIR, name);
	if (is_segment_of(path, (int32_t)pid) && !kvt_sys_unlink(path))
		(*removed)++;
	return 0;
}

static void sweep_stale(void)
{
	unsigned removed = 0;
	if (kvt_sys_dir_each(KVT_STATS_DIR, SWEEP_SCAN, sweep_entry, &removed) < 0)
		return;
	if (removed)
		kvt_info("stats: removed %u segment(s) of exited processes from %s", removed,
			 KVT_STATS_DIR);
}

static int open_segment(void)
{
	int fd = kvt_sys_open(st.path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int e = fd < 0 ? (fd == -ELOOP ? EEXIST : -fd) : 0;   /* ELOOP: a symlink is there */
	if (fd < 0 && e == EEXIST && is_our_stale(st.path)) {
		kvt_info("stats: removing %s, left by an earlier process with this pid", st.path);
		kvt_sys_unlink(st.path);
		fd = kvt_sys_open(st.path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		e = fd < 0 ? -fd : 0;
	}
	if (fd < 0) {
		if (e == EEXIST)
			kvt_warn("stats: %s already exists and is not this process's; no live "
				 "counters for 'kvtier stat' (KVTIER_STATS=0 silences this)", st.path);
		else
			kvt_warn("stats: cannot create %s (%s); no live counters for 'kvtier stat'",
				 st.path, strerror(e));
		return -e;
	}
	return fd;
}

static int create_segment(void)
{
	struct stat ns;
	st.pid = getpid();
	snprintf(st.path, sizeof st.path, "%s/%s%d", KVT_STATS_DIR, KVT_STATS_PREFIX, (int)st.pid);
	int fd = open_segment();
	if (fd < 0)
		return fd;
	int r = kvt_sys_fchmod(fd, 0600);
	if (!r)
		r = kvt_sys_ftruncate(fd, SEG_BYTES);
	void *p = r ? MAP_FAILED : kvt_sys_mmap(kvt_own_hint(SEG_BYTES), SEG_BYTES,
					       PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	kvt_sys_close(fd);
	if (p == MAP_FAILED) {
		kvt_warn("stats: cannot size or map %s (%s); no live counters",
			 st.path, strerror(r ? -r : ENOMEM));
		kvt_sys_unlink(st.path);
		return r ? r : -ENOMEM;
	}
	st.seg = p;
	fill_static(st.seg);
	st.seg->pidns_ino = kvt_sys_stat("/proc/self/ns/pid", &ns) ? 0 : (uint64_t)ns.st_ino;
	__atomic_store_n(&st.state, SEG_ON, __ATOMIC_RELEASE);
	return 0;
}

static void drop_segment(int remove)
{
	if (remove)
		kvt_sys_unlink(st.path);
	if (st.seg)
		kvt_sys_munmap(st.seg, SEG_BYTES);
	st.seg = NULL;
}

void kvt_stats_init(struct kvt_registry *mem_reg, struct kvt_registry *host_reg)
{
	st.mem_reg = mem_reg;
	st.host_reg = host_reg;
	if (!kvt_opt.stats)
		return;
	st.start_mono_ns = kvt_now_ns();
	st.start_unix_ns = kvt_realtime_ns();
	st.chunks_far = 0;
	if (create_segment())
		return;
	sweep_stale();
	st.busy = 1;
	publish_locked();
	unlock();
}

void kvt_stats_close(void)
{
	if (__atomic_load_n(&st.state, __ATOMIC_ACQUIRE) != SEG_ON || getpid() != st.pid)
		return;
	int locked = lock_bounded();
	__atomic_store_n(&st.state, SEG_OFF, __ATOMIC_RELEASE);
	drop_segment(1);
	if (locked)
		unlock();
}

void kvt_stats_after_fork(void)
{
	/* the mapping is the parent's: never write into it from here */
	if (st.seg)
		kvt_sys_munmap(st.seg, SEG_BYTES);
	st.seg = NULL;
	st.busy = 0;
	__atomic_store_n(&st.state, SEG_OFF, __ATOMIC_RELEASE);
}

void kvt_stats_before_exec(void)
{
	/* a vfork child shares our memory but not our pid: leave it alone */
	if (__atomic_load_n(&st.state, __ATOMIC_ACQUIRE) != SEG_ON || getpid() != st.pid)
		return;
	int locked = lock_bounded();
	__atomic_store_n(&st.state, SEG_EXEC, __ATOMIC_RELEASE);
	drop_segment(1);
	if (locked)
		unlock();
}

void kvt_stats_at_exit(void)
{
	int expect = SEG_ON;
	if (getpid() == st.pid &&
	    __atomic_compare_exchange_n(&st.state, &expect, SEG_OFF, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		kvt_sys_unlink(st.path);
}

void kvt_stats_exec_failed(void)
{
	int expect = SEG_EXEC;
	if (getpid() != st.pid || !__atomic_compare_exchange_n(&st.state, &expect, SEG_OFF, 0,
							       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	if (!try_lock())
		return;
	if (!create_segment())
		publish_locked();
	unlock();
}

/* ---- hooks ---- */

static void tick(void)
{
	uint64_t now = kvt_coarse_ns();     /* on every hook: the cheap clock */
	if (now < LD(st.next_ns) || !try_lock())
		return;
	__atomic_store_n(&st.next_ns, now + PUBLISH_EVERY_NS, __ATOMIC_RELAXED);
	if (st.seg && __atomic_load_n(&st.state, __ATOMIC_ACQUIRE) == SEG_ON)
		publish_locked();
	unlock();
}

void kvt_stats_on_alloc(uint8_t kind, uint8_t placement, uint64_t bytes)
{
	if (__atomic_load_n(&st.state, __ATOMIC_RELAXED) != SEG_ON)
		return;
	if (kind < KVT_STATS_KINDS && placement < KVT_STATS_PLACES) {
		ADD(kp[kind][placement].nr, 1);
		ADD(kp[kind][placement].bytes, bytes);
	}
	tick();
}

void kvt_stats_on_free(uint8_t kind, uint8_t placement, uint64_t bytes)
{
	if (__atomic_load_n(&st.state, __ATOMIC_RELAXED) != SEG_ON)
		return;
	if (kind < KVT_STATS_KINDS && placement < KVT_STATS_PLACES) {
		ADD(kp[kind][placement].nr_free, 1);
		ADD(kp[kind][placement].bytes_free, bytes);
	}
	tick();
}

/* ---- the migration thread ---- */

/* The chunk walk is the costly part of a publish: every 200 ms at most. */
static void count_chunks(void)
{
	static uint64_t next_ns;
	uint64_t now = kvt_now_ns();
	if (now < next_ns)
		return;
	next_ns = now + 200000000ull;
	kvt_heat_count_tiers(&st.chunks_hbm, &st.chunks_far);
}

void kvt_stats_publish_epoch(const struct kvt_stats_migr *m)
{
	if (__atomic_load_n(&st.state, __ATOMIC_ACQUIRE) != SEG_ON || !try_lock())
		return;
	st.migr = *m;
	st.hbm_budget = kvt_place_hbm_budget();
	count_chunks();
	if (st.seg)
		publish_locked();
	__atomic_store_n(&st.next_ns, kvt_coarse_ns() + PUBLISH_EVERY_NS, __ATOMIC_RELAXED);
	unlock();
}
