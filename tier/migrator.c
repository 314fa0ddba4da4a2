// SPDX-License-Identifier: MIT
/* The migration thread (contract in migrator.h). One thread; for each
 * device that redirected memory was placed for, its primary context, a
 * lowest-priority stream and a planner of its own. Per epoch: poll the
 * evidence sources, then device by device collect the chunks that matter
 * (those in HBM and far ones hot enough to promote: kvt_heat_collect, no
 * pass over idle memory), run the planner, prefetch. Never called on an application thread except track/untrack
 * (a short mutex in the heat table). Every failure: one warning, counted. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kvtier/api.h"
#include "kvtier/planner.h"
#include "migrator.h"
#include "../cuda_shim/shim.h"
#include "../base/kvt.h"
#include "admit.h"
#include "floor.h"
#include "step.h"
#include "discard.h"
#include "../profiler/decode.h"
#include "../profiler/evclass.h"
#include "../profiler/evidence.h"
#include "../profiler/heat.h"
#include "../profiler/tables.h"
#include "../profiler/trace.h"

#define MAX_MOVES 1024
#define MIN_RESIDENCE_EPOCHS 4
/* Devices one process may have redirected memory on that the thread keeps
 * apart (a node's GPUs; a process of vLLM or SGLang uses one, llama.cpp
 * splits a model over several). Ranges placed for more stay where placed. */
#define MAX_DEVICES KVT_MIGR_DEVICES
#define STOP_WAIT_MS 2000
/* CPU time an epoch's collection and plan are charged in a simulator's
 * virtual time (kvt_clock_charge; nothing on a real GPU): a bound above
 * what they were measured to take, as thread CPU time less the driver's
 * own calls, in serve-like at a 4x pool: 507 us on average for 280 chunks
 * (docs/simulated-device.md, "Virtual time"). */
#define EPOCH_CHARGE_NS       100000u
#define EPOCH_CHARGE_CHUNK_NS 1500u

/* An epoch also ends early after this many launches with evidence: on a
 * fast (or simulated) device many decode steps fit in one KVTIER_EPOCH_MS. */
#define KICK_LAUNCHES 256
/* A kicked epoch starts no sooner than this after the last one began: at
 * about 0.5 ms of CPU an epoch, at most a tenth of a core. */
#define KICK_MIN_MS 5
/* A poll alone's CPU time in a simulator's virtual time: a bound (the
 * sources' poll is most of an epoch's collection, 100 us of its bound). */
#define POLL_CHARGE_NS 100000u
/* An epoch that starts over this many periods after the last one is late
 * (migrate.late_epochs, and a line of kvtier run's summary): the thread
 * was starved of CPU or held in a slow call. A loaded host delays a timed
 * wait by a few scheduler slices, well inside one 50 ms period. */
#define LATE_EPOCHS 4u

static struct {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int running, stop, wanted, restart, kicked;
	int thread_failed;           /* pthread_create refused: no migration */
	/* Exit: the thread was left in a call (abandoned) or began tearing
	 * down (tearing_down), decided once under the lock; see stop_wait(). */
	int abandoned, tearing_down;
	int doing;                   /* enum doing: what the thread is in now */
	uint64_t doing_ns;           /* since when (kvt_now_ns) */
	uint64_t epoch_at_ns;        /* the last poll's start (kvt_now_ns), this thread only */
	uint64_t epoch_end_ns;       /* when the coming epoch's timer ends it, 0: not set */
	uint64_t last_epoch_ns;      /* the last epoch's start (kvt_now_ns), 0: none yet */
	int poll_asked;              /* atomic: kvt_migrator_poll_soon */
	char stop_note[160];         /* how the last stop went, for the trace */
	int started;                 /* sources started, exit handler in (start_sources_once) */
	struct mdev {                /* a device, in the order first met */
		CUdevice dev;
		int bound;           /* context + stream made (on the thread) */
		CUcontext ctx;
		CUstream stream;
		struct kvt_planner *planner;   /* mmap'd at first use (512 KiB) */
		uint64_t budget;     /* derived when placement had none */
		uint64_t faults_seen;   /* kvt_cupti_faults(dev) at its last EPOCH record */
		/* for the live counters: its last epoch, the budget in force then
		 * and the chunks believed in HBM after its moves */
		uint64_t live_epoch, live_budget, live_hbm_chunks;
	} d[MAX_DEVICES];
	unsigned nr_dev;
	struct kvt_plan_params params;
	struct kvt_plan_chunk *table;          /* KVT_HEAT_MAX_CHUNKS, mmap'd: only the
						* working set's pages are touched */
	struct kvt_heat_range r[KVT_HEAT_MAX_RANGES];
	struct kvt_plan_move moves[MAX_MOVES];
	uint64_t last_budget;        /* for the trace: the last device's */
} m = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_mutex_t src_lock = PTHREAD_MUTEX_INITIALIZER;   /* start_sources_once */
static struct kvt_tier_host host;    /* what the host handed kvt_migrator_start */

static struct {
	uint64_t epochs, epoch_ns, epoch_ns_max, polls_only, late_epochs;
	uint64_t nr_promoted, bytes_promoted, nr_demoted, bytes_demoted;
	uint64_t prefetch_issued, prefetch_failed, bind_failed;
	uint64_t chunks_hbm, chunks_far, tracked, track_failed;
} ctr;

#define CTR_ADD(f, v) __atomic_fetch_add(&ctr.f, (v), __ATOMIC_RELAXED)
#define CTR_LD(f) __atomic_load_n(&ctr.f, __ATOMIC_RELAXED)

/* ---- what the thread is doing (for a stop that times out) ---- */

/* A driver or CUPTI call can take seconds, and at exit the thread cannot be
 * interrupted in one: a stop that gives up says which call it was. */
enum doing {
	DOING_WAIT, DOING_BIND, DOING_SOURCES, DOING_PLAN, DOING_MEMINFO, DOING_ADVISE,
	DOING_PREFETCH, DOING_SYNC, DOING_TEARDOWN,
};

static const char *const doing_name[] = {
	[DOING_WAIT] = "waiting for its next epoch",
	[DOING_BIND] = "binding a device (cuDevicePrimaryCtxRetain, cuStreamCreateWithPriority)",
	[DOING_SOURCES] = "reading its evidence sources (cuptiActivityFlushAll)",
	[DOING_PLAN] = "planning",
	[DOING_MEMINFO] = "cuMemGetInfo",
	[DOING_ADVISE] = "cuMemAdvise (accessed-by)",
	[DOING_PREFETCH] = "cuMemPrefetchAsync",
	[DOING_SYNC] = "cuStreamSynchronize on its prefetch stream",
	[DOING_TEARDOWN] = "stopping its sources and releasing its contexts",
};

static void doing(enum doing what)
{
	__atomic_store_n(&m.doing_ns, kvt_now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&m.doing, (int)what, __ATOMIC_RELAXED);
}

/* Whether a stop was asked for: the thread makes no further driver or
 * CUPTI call in the epoch (a stop that timed out may already have let the
 * process's exit tear CUDA and CUPTI down). */
static int stopping(void)
{
	return __atomic_load_n(&m.stop, __ATOMIC_ACQUIRE);
}

static void advising(void)
{
	doing(DOING_ADVISE);
}

/* ---- start and stop ---- */

/* From a launch hook: end the epoch now. No lock: a lost wake-up only
 * means the epoch ends on its timer. */
static void kick(void)
{
	__atomic_store_n(&m.kicked, 1, __ATOMIC_RELEASE);
	kvt_cond_wake(&m.cond);
}

void kvt_migrator_poll_soon(void)
{
	if (!__atomic_exchange_n(&m.poll_asked, 1, __ATOMIC_ACQ_REL))
		kvt_cond_wake(&m.cond);
}


static void *thread_main(void *arg);
static void start_sources_once(void);

/* For the launch source: is the launch's stream being captured? */
static int capturing(uint64_t stream)
{
	return kvt_cuda_stream_capturing((CUstream)(uintptr_t)stream);
}

static int spawn(void)
{
	pthread_attr_t a;
	sigset_t all, old;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m.cond, &ca);
	pthread_condattr_destroy(&ca);
	m.stop = 0;
	m.abandoned = m.tearing_down = 0;
	doing(DOING_WAIT);
	pthread_attr_init(&a);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
	pthread_attr_setstacksize(&a, 256 << 10);    /* sanitizers need their own sizes */
#endif
	sigfillset(&all);            /* the application's signals never land here */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	kvt_cuda_ready();            /* a simulator's virtual clock, if the driver has one */
	void *place = kvt_clock_spawn();
	int r = pthread_create(&m.th, &a, thread_main, place);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (r)
		kvt_clock_cancel(place);
	if (r) {
		kvt_warn("cannot start the migration thread (%s); no migration", strerror(r));
		m.thread_failed = 1;
		return -r;
	}
	m.running = 1;
	return 0;
}

void kvt_migrator_start(const struct kvt_tier_host *h)
{
	unsigned mask = 0;
	char bad[32] = "";
	if (!kvt_opt.migrate)
		return;
	host = *h;
	if (kvt_prof_sources_parse(kvt_opt.sources, &mask, bad, sizeof bad)) {
		kvt_warn("KVTIER_SOURCES='%s': unknown source '%s'; using the default 'launch,copy,cupti,tables'",
			 kvt_opt.sources, bad);
		kvt_prof_sources_parse("launch,copy,cupti,tables", &mask, NULL, 0);
	}
	if (kvt_heat_init((uint32_t)kvt_opt.decay_ms)) {
		kvt_warn("cannot map the chunk heat table; no migration");
		return;
	}
	void *t = kvt_sys_map_own((size_t)KVT_HEAT_MAX_CHUNKS * sizeof *m.table, MAP_NORESERVE);
	if (t == MAP_FAILED) {
		kvt_warn("cannot map the planner's table; no migration");
		return;
	}
	m.table = t;
	struct kvt_plan_params p = {
		.high_bp = KVT_MIGRATE_HIGH_BP, .low_bp = KVT_MIGRATE_LOW_BP,
		.promote = (float)kvt_opt.promote, .demote = (float)kvt_opt.demote,
		.rate_bytes_per_s = kvt_opt.migrate_rate, .epoch_ms = (uint32_t)kvt_opt.epoch_ms,
		.min_residence_ms = MIN_RESIDENCE_EPOCHS * (uint32_t)kvt_opt.epoch_ms,
		.chunk_bytes = KVT_CHUNK_BYTES, .room_bytes = KVT_PLAN_ROOM_ANY,
	};
	if (kvt_opt.demote > kvt_opt.promote)
		kvt_warn("KVTIER_DEMOTE=%d is above KVTIER_PROMOTE=%d; using %d for both",
			 kvt_opt.demote, kvt_opt.promote, kvt_opt.promote);
	if (p.demote > p.promote)
		p.demote = p.promote;
	m.params = p;
	kvt_heat_set_keep(p.promote);
	kvt_prof_sources_enable(mask);
	kvt_prof_set_kick(kick, KICK_LAUNCHES);
	kvt_prof_set_capturing(capturing);
	m.wanted = 1;
	/* The thread starts with the first redirected allocation: processes
	 * that never place anything (shells, tools) never get one. */
	m.restart = 1;
}

static int join_within(unsigned ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)ms * 1000000u;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	return pthread_timedjoin_np(m.th, NULL, &ts);
}

/* Wait for the thread, STOP_WAIT_MS at most. One that does not come back
 * is left: it is marked abandoned and, if it ever returns from the call it
 * is in, it leaves without another driver or CUPTI call (the process may
 * have torn them down by then: a real libcupti crashes when called after
 * its own exit handler). One that had begun its teardown is given
 * STOP_WAIT_MS more to finish it. */
static void stop_wait(void)
{
	uint64_t t0 = kvt_now_ns();
	int r = join_within(STOP_WAIT_MS);
	for (int tries = 0; r == ETIMEDOUT; tries++) {
		pthread_mutex_lock(&m.lock);
		int more = m.tearing_down && !tries;    /* once, for a teardown under way */
		if (!more) {
			m.abandoned = 1;                /* no further call, wherever it is */
			kvt_prof_leave();               /* nor in a flush under way */
		}
		pthread_mutex_unlock(&m.lock);
		if (!more)
			break;
		r = join_within(STOP_WAIT_MS);
	}
	uint64_t waited_ms = (kvt_now_ns() - t0) / 1000000u;
	if (!r) {
		snprintf(m.stop_note, sizeof m.stop_note, "stopped in %llu ms",
			 (unsigned long long)waited_ms);
		return;
	}
	int what = __atomic_load_n(&m.doing, __ATOMIC_RELAXED);
	uint64_t in_ms = (kvt_now_ns() - __atomic_load_n(&m.doing_ns, __ATOMIC_RELAXED)) / 1000000u;
	const char *name = what >= 0 && what <= DOING_TEARDOWN ? doing_name[what] : "?";
	if (r == ETIMEDOUT)
		snprintf(m.stop_note, sizeof m.stop_note, "left after %llu ms: in %s for %llu ms",
			 (unsigned long long)waited_ms, name, (unsigned long long)in_ms);
	else
		snprintf(m.stop_note, sizeof m.stop_note, "left: join failed (%s)", strerror(r));
	kvt_warn("the migration thread did not stop within %llu ms: it has been in %s for %llu ms; "
		 "leaving it (it makes no further CUDA or CUPTI call)", (unsigned long long)waited_ms,
		 name, (unsigned long long)in_ms);
	pthread_detach(m.th);
}

void kvt_migrator_stop(void)
{
	pthread_mutex_lock(&m.lock);
	int running = m.running;
	__atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
	if (running)
		kvt_cond_wake(&m.cond);
	pthread_mutex_unlock(&m.lock);
	if (!running)
		return;
	kvt_clock_leave();           /* the join below waits outside any simulation */
	stop_wait();
	m.running = 0;
}

void kvt_migrator_after_fork(void)
{
	pthread_mutex_init(&m.lock, NULL);
	m.restart = m.running || m.restart;
	m.running = 0;
	m.started = 0;
	pthread_mutex_init(&src_lock, NULL);  /* a parent thread may have held it */
	for (unsigned i = 0; i < m.nr_dev; i++)
		m.d[i].bound = 0;    /* the parent's contexts and streams mean nothing here */
	pthread_cond_init(&m.cond, NULL);     /* a parent thread may have been waiting on it */
	memset(&ctr, 0, sizeof ctr);          /* the child's trace counts the child's work */
	if (m.wanted) {
		kvt_heat_reset();
		kvt_tables_reset();
		kvt_decode_reset();
		kvt_evc_reset();
		kvt_floor_reset();
		kvt_step_reset();
		kvt_discard_reset();
	}
}

void kvt_migrator_track(uint64_t base, uint64_t size, int32_t node)
{
	if (!m.wanted)
		return;
	CUdevice dev = 0;            /* the allocating thread's: the one it was placed for */
	kvt_cuda_current_device(&dev);
	int r = kvt_heat_track(base, size, KVT_PLAN_TIER_FAR, node, dev);
	if (r) {
		CTR_ADD(track_failed, 1);
		kvt_warn_once("cannot track %#llx (+%llu bytes) for migration (%s); it stays where placed",
			      (unsigned long long)base, (unsigned long long)size, strerror(-r));
		return;
	}
	CTR_ADD(tracked, 1);
	/* Fault admission: CUPTI must watch before the range can first fault.
	 * A server zero-fills its KV right after allocating it, and faults
	 * nobody saw leave chunks in HBM that kvtier believes far, never
	 * demoted: llama.cpp's one KV buffer, 4x the budget, stayed whole in
	 * HBM (simulated) when CUPTI started at the thread's first epoch. */
	if (kvt_admit_fault()) {
		kvt_tls.depth++;     /* CUPTI's own driver calls are not the app's */
		start_sources_once();
		kvt_tls.depth--;
	}
	if (__atomic_load_n(&m.restart, __ATOMIC_RELAXED)) {   /* first use, or after fork */
		pthread_mutex_lock(&m.lock);
		if (m.restart && !m.running && !m.stop)
			spawn();
		m.restart = 0;
		pthread_mutex_unlock(&m.lock);
	}
}

void kvt_migrator_untrack(uint64_t base)
{
	if (m.wanted)
		kvt_heat_untrack(base);
}

void kvt_migrator_rehomed(uint64_t base)
{
	/* Untouched pages are counted too (resident nowhere yet): an
	 * over-estimate the planner corrects by demoting the cold ones, where
	 * believing them far let HBM hold a whole tensor beyond the budget. */
	if (m.wanted)
		kvt_heat_set_tier(base, KVT_PLAN_TIER_HBM);
}

/* ---- one epoch ---- */

/* HBM budget: KVTIER_HBM_BUDGET, or what placement derived at KV start
 * (free memory then, less KVTIER_RESERVE). When that is 0 (a device smaller
 * than the reserve, such as the simulated one), the free memory at KV start
 * (else free memory now) less 1/64 of the device: the reserve's share of a
 * large device (1 GiB of 64 GiB), said once. */
static uint64_t budget_now(struct mdev *d)
{
	uint64_t b = host.hbm_budget();
	if (b)
		return b;
	if (!d->budget) {
		size_t fr = 0, tot = 0;
		uint64_t at_kv = d == &m.d[0] ? host.kv_start_free() : 0;
		if (kvt_cuda_mem_info(&fr, &tot) == CUDA_SUCCESS) {
			uint64_t f = at_kv && at_kv <= tot ? at_kv : fr;
			d->budget = f > tot / 64 ? f - tot / 64 : 0;
		}
		kvt_info("migration: device %d HBM budget %llu bytes (derived budget was 0: free "
			 "HBM %llu %s less 1/64 of %zu; set KVTIER_HBM_BUDGET or KVTIER_RESERVE to "
			 "choose)", (int)d->dev, (unsigned long long)d->budget,
			 (unsigned long long)(at_kv ? at_kv : fr), at_kv ? "at KV start" : "now", tot);
	}
	return d->budget;
}

/* At exit the thread must stop before libcupti's and the CUDA runtime's
 * own exit handlers tear them down: stopping it from kvtier's destructor
 * (which runs after every atexit handler) made CUPTI calls after CUPTI had
 * finalised, and a real libcupti.so.13 crashed the exiting process (H200,
 * driver 580). Handlers run in reverse order of registration, so this one,
 * registered once the sources (CUPTI) have started, runs before theirs. */
static void stop_at_exit(void)
{
	kvt_tls.depth++;
	kvt_migrator_stop();
	kvt_tls.depth--;
}

/* Once per process image: the sources start (CUPTI needs a context: the
 * caller's current one) and the thread's exit handler goes in, after
 * CUPTI's. From the thread's first bind or, under fault admission, from the
 * allocating thread before its first far range is returned to it. */
static void start_sources(void)
{
	kvt_prof_sources_start();
	if (kvt_admit_fault()) {
		/* admissions by fault are only seen through CUPTI's records */
		const char *st = kvt_prof_source_state(KVT_SRC_CUPTI);
		if (strncmp(st, "active", 6)) {
			char why[160];
			snprintf(why, sizeof why, "it needs the cupti source, which is %s", st);
			kvt_admit_remote(why);
		}
		else
			kvt_cupti_track_fault_ins(1);
	}
	static int registered;       /* inherited across fork: one handler serves both */
	if (!registered && !atexit(stop_at_exit))
		registered = 1;
	__atomic_store_n(&m.started, 1, __ATOMIC_RELEASE);
}

static void start_sources_once(void)
{
	if (__atomic_load_n(&m.started, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&src_lock);
	if (!m.started)
		start_sources();
	pthread_mutex_unlock(&src_lock);
}

/* The slot of device dev, taken at first meeting (its planner mapped);
 * NULL past MAX_DEVICES or without memory for the planner. */
static struct mdev *dev_slot(CUdevice dev)
{
	for (unsigned i = 0; i < m.nr_dev; i++)
		if (m.d[i].dev == dev)
			return &m.d[i];
	if (m.nr_dev == MAX_DEVICES) {
		kvt_warn_once("redirected memory on more than %d devices: the migration thread "
			      "serves the first %d met; device %d's ranges stay where placed",
			      MAX_DEVICES, MAX_DEVICES, (int)dev);
		return NULL;
	}
	void *pl = kvt_sys_map_own(sizeof(struct kvt_planner), MAP_NORESERVE);
	if (pl == MAP_FAILED) {
		kvt_warn_once("cannot map a planner for device %d; its ranges stay where placed",
			      (int)dev);
		return NULL;
	}
	struct mdev *d = &m.d[m.nr_dev];
	*d = (struct mdev){ .dev = dev, .planner = pl };
	kvt_planner_init(d->planner, &m.params);
	__atomic_store_n(&m.nr_dev, m.nr_dev + 1, __ATOMIC_RELEASE);
	return d;
}

/* Make d's context current on this thread (retained and given a stream
 * the first time). 0, or -1: not this epoch (said once, counted). */
static int bind_device(struct mdev *d)
{
	if (d->bound)
		return kvt_cuda_set_current(d->ctx) == CUDA_SUCCESS ? 0 : -1;
	CUresult r = kvt_cuda_bind_primary(d->dev, &d->ctx);
	if (r == CUDA_SUCCESS) {
		r = kvt_cuda_stream_lowest(&d->stream);
		if (r != CUDA_SUCCESS)
			kvt_cuda_release_primary(d->dev);
	}
	if (r != CUDA_SUCCESS) {
		CTR_ADD(bind_failed, 1);
		kvt_warn_once("migration thread: no context or stream on device %d (CUresult %d); "
			      "retrying each epoch", (int)d->dev, (int)r);
		return -1;
	}
	d->bound = 1;
	start_sources_once();
	return 0;
}

/* Issue one move; the chunks it moved (0: freed meanwhile, or failed). */
static uint32_t apply(const struct mdev *d, const struct kvt_plan_move *mv, uint32_t now_ms)
{
	const struct kvt_heat_range *r = &m.r[mv->range];
	uint32_t idx = m.table[mv->first].tag;     /* its chunks are consecutive in memory */
	uint64_t off = (uint64_t)idx << KVT_CHUNK_SHIFT, bytes = (uint64_t)mv->nr << KVT_CHUNK_SHIFT;
	if (kvt_heat_pin(mv->range, r->gen))
		return 0;                            /* freed meanwhile */
	if (off + bytes > r->size)
		bytes = r->size - off;
	int promote = mv->dir == KVT_PLAN_PROMOTE;
	int far = r->node;
	CUmemLocationType type = promote ? CU_MEM_LOCATION_TYPE_DEVICE
				 : far >= 0 ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_HOST;
	int id = promote ? d->dev : far >= 0 ? far : 0;
	doing(DOING_PREFETCH);
	CUresult res = kvt_cuda_prefetch(r->base + off, bytes, type, id, d->stream);
	kvt_heat_unpin();                    /* its free may go ahead now */
	CTR_ADD(prefetch_issued, 1);
	kvt_rec_event(KVT_OP_PREFETCH, KVT_KIND_DEVICE, KVT_API_none, r->base + off, bytes,
		      (uint64_t)(uintptr_t)d->stream,
		      ((uint64_t)(uint32_t)type << 32) | (uint32_t)id, res);
	if (res != CUDA_SUCCESS) {
		CTR_ADD(prefetch_failed, 1);
		kvt_warn_once("migration prefetch of %#llx (+%llu) failed with CUresult %d "
			      "(counted; further ones are not logged)",
			      (unsigned long long)(r->base + off), (unsigned long long)bytes, (int)res);
		return 0;
	}
	struct kvt_heat_chunk *c = kvt_heat_chunks(r) + idx;
	kvt_step_moved_whole(r, idx, mv->nr);
	for (uint32_t i = 0; i < mv->nr; i++) {
		__atomic_store_n(&c[i].tier, promote ? KVT_PLAN_TIER_HBM : KVT_PLAN_TIER_FAR, __ATOMIC_RELAXED);
		__atomic_store_n(&c[i].moved_ms, now_ms, __ATOMIC_RELAXED);
	}
	if (promote) {
		CTR_ADD(nr_promoted, mv->nr);
		CTR_ADD(bytes_promoted, bytes);
	} else {
		CTR_ADD(nr_demoted, mv->nr);
		CTR_ADD(bytes_demoted, bytes);
	}
	return mv->nr;
}

/* ---- the epoch record (only while tracing) ---- */

struct epoch_moves { uint32_t promoted, demoted, failed; };

/* One EPOCH record for d: the chunks believed in HBM after this epoch's
 * moves, its budget, what moved, and the GPU faults on its ranges since
 * its last record. The trace's lock for one 64-byte copy: this thread is
 * never inside a hook, and the application never waits for it. */
static void trace_epoch(struct mdev *d, uint32_t hbm_before, uint64_t budget,
			const struct epoch_moves *mv)
{
	if (!kvt_trace_active())
		return;
	uint64_t hbm = (uint64_t)hbm_before + mv->promoted;
	hbm = hbm > mv->demoted ? hbm - mv->demoted : 0;
	uint64_t faults = kvt_cupti_faults(d->dev);
	struct kvt_rec_epoch e = {
		.device = (int32_t)d->dev, .epoch = CTR_LD(epochs) + 1,
		.hbm_bytes = hbm << KVT_CHUNK_SHIFT, .budget_bytes = budget,
		.nr_promoted = mv->promoted, .nr_demoted = mv->demoted,
		.nr_faults = (uint32_t)(faults - d->faults_seen), .nr_failed = mv->failed,
	};
	d->faults_seen = faults;
	kvt_trace_epoch(&e);
}

/* With the step prefetch on, the chunks of ranges steps name are the
 * step's (tier/step.h): they leave the table; returns how many of them are
 * in HBM, which the budget is charged with. Not while HBM holds more than
 * the budget (GPU faults bring chunks in between steps faster than the
 * steps pay the debt back): then the plan keeps them all and demotes the
 * coldest, wherever they are. */
static uint32_t leave_to_step(uint32_t *n, uint64_t budget, uint32_t part_chunks)
{
	if (!kvt_step_enabled())
		return 0;
	uint32_t w = 0, hbm = 0, all = part_chunks;
	for (uint32_t i = 0; i < *n; i++)
		all += m.table[i].tier == KVT_PLAN_TIER_HBM;
	if (all > budget >> KVT_CHUNK_SHIFT)
		return 0;
	for (uint32_t i = 0; i < *n; i++) {
		const struct kvt_plan_chunk *e = &m.table[i];
		if (!kvt_step_owns((int)e->range)) {
			m.table[w++] = *e;
			continue;
		}
		hbm += e->tier == KVT_PLAN_TIER_HBM;
	}
	*n = w;                              /* whole ranges left: no adjacency changed */
	return hbm;
}

/* One device's part of an epoch, its context current: its ranges only,
 * its budget cut to its own free memory, its own stream. */
static void epoch_device(struct mdev *d, uint32_t now_ms)
{
	doing(DOING_PLAN);
	/* the pages steps hold apart, settled before the table is read */
	uint64_t part = kvt_step_enabled() ? kvt_step_partial_pages((int)d->dev) : 0;
	uint32_t part_chunks = (uint32_t)((part + KVT_STEP_PAGES - 1) / KVT_STEP_PAGES);
	uint32_t n = kvt_heat_collect(m.table, KVT_HEAT_MAX_CHUNKS, now_ms, m.r, d->dev);
	if (stopping())
		return;
	if (kvt_admit_fault()) {
		struct kvt_admit_epoch e = {
			.table = m.table, .n = n, .r = m.r, .demote = m.params.demote,
			.now_ms = now_ms, .stopping = stopping, .advising = advising,
		};
		kvt_admit_epoch(&e);
	}
	struct kvt_planner *pl = d->planner;
	doing(DOING_MEMINFO);
	uint64_t budget = budget_now(d);
	uint32_t stepped = leave_to_step(&n, budget, part_chunks);
	uint64_t charged = (uint64_t)(stepped + part_chunks) << KVT_CHUNK_SHIFT;
	pl->p.budget_bytes = budget > charged ? budget - charged : 0;
	/* auto's strikes: a come-back after 1/8 of a budget's worth of fault-ins */
	kvt_heat_set_refault_window((uint32_t)((budget >> KVT_CHUNK_SHIFT) / 8));
	__atomic_store_n(&m.last_budget, budget, __ATOMIC_RELAXED);
	size_t fr = 0, tot = 0;
	pl->p.room_bytes = kvt_cuda_mem_info(&fr, &tot) == CUDA_SUCCESS ? fr : KVT_PLAN_ROOM_ANY;
	doing(DOING_PLAN);
	struct kvt_plan_out out = { .moves = m.moves, .cap = MAX_MOVES };
	kvt_plan_epoch(pl, m.table, n, now_ms, &out);
	/* the planning's CPU time, before its moves (simulated time only) */
	kvt_clock_charge(EPOCH_CHARGE_NS + (uint64_t)n * EPOCH_CHARGE_CHUNK_NS);
	kvt_debug("epoch, device %d: %u chunks, %u in HBM of %u budgeted; promote %u, demote %u "
		  "in %u moves", (int)d->dev, n, out.hbm_before, out.budget_chunks, out.nr_promote,
		  out.nr_demote, out.nr);
	uint32_t done = 0;
	struct epoch_moves mv = { 0 };
	while (done < out.nr && !stopping()) {
		const struct kvt_plan_move *one = &m.moves[done++];
		uint32_t moved = apply(d, one, now_ms);
		if (!moved)
			mv.failed++;
		else if (one->dir == KVT_PLAN_PROMOTE)
			mv.promoted += moved;
		else
			mv.demoted += moved;
	}
	trace_epoch(d, out.hbm_before + stepped + part_chunks, budget, &mv);
	uint64_t in_hbm = (uint64_t)out.hbm_before + stepped + part_chunks + mv.promoted;
	d->live_hbm_chunks = in_hbm > mv.demoted ? in_hbm - mv.demoted : 0;
	d->live_budget = budget;
	d->live_epoch = CTR_LD(epochs) + 1;
	if (kvt_step_enabled()) {            /* the step's room, in pages: to the low watermark */
		int64_t hbm = ((int64_t)out.hbm_before + stepped + mv.promoted - mv.demoted) *
			      KVT_STEP_PAGES + (int64_t)part;
		int64_t low = (int64_t)((budget >> KVT_CHUNK_SHIFT) * KVT_MIGRATE_LOW_BP / 10000);
		kvt_step_set_room(low * KVT_STEP_PAGES - hbm);
		kvt_step_set_cap((uint32_t)low);
	}
	/* this thread only: the next plan sees the result (none after a stop) */
	if (done && !stopping()) {
		doing(DOING_SYNC);
		kvt_cuda_stream_sync(d->stream);
	}
}

/* Each device as its last epoch left it, for the live counters: the
 * budget is published with the epoch that derived it. */
static void live_devices(struct kvt_stats_migr *s)
{
	s->nr_dev = m.nr_dev;
	for (unsigned i = 0; i < m.nr_dev; i++)
		s->dev[i] = (struct kvt_migr_dev){
			.dev = (int32_t)m.d[i].dev, .epoch = m.d[i].live_epoch,
			.budget_bytes = m.d[i].live_budget,
			.hbm_bytes = m.d[i].live_hbm_chunks << KVT_CHUNK_SHIFT,
		};
}

static void epoch(void)
{
	uint64_t t0 = kvt_now_ns();
	/* late: this thread did not get to run for LATE_EPOCHS periods (a
	 * starved CPU, a long driver call) */
	int late = m.last_epoch_ns &&
		   t0 - m.last_epoch_ns > (uint64_t)LATE_EPOCHS * (uint64_t)kvt_opt.epoch_ms * 1000000u;
	m.last_epoch_ns = t0;
	if (late)
		CTR_ADD(late_epochs, 1);
	int32_t devs[MAX_DEVICES];
	unsigned nd = kvt_heat_devices(devs, MAX_DEVICES);
	if (nd > MAX_DEVICES) {
		kvt_warn_once("redirected memory on %u devices: the migration thread serves %d; "
			      "the others' ranges stay where placed", nd, MAX_DEVICES);
		nd = MAX_DEVICES;
	}
	uint32_t now_ms = 0;
	int polled = 0;
	uint64_t budgets = 0;
	for (unsigned i = 0; i < nd && !stopping(); i++) {
		struct mdev *d = dev_slot(devs[i]);
		doing(DOING_BIND);
		if (!d || bind_device(d))
			continue;
		if (!polled) {               /* once a context is current */
			doing(DOING_SOURCES);
			kvt_prof_sources_poll();
			now_ms = kvt_heat_now_ms();
			polled = 1;
		}
		epoch_device(d, now_ms);
		budgets += __atomic_load_n(&m.last_budget, __ATOMIC_RELAXED);
	}
	if (!polled)
		return;
	struct kvt_step_info si;
	kvt_step_info(&si);
	struct kvt_floor_steps fs = { si.steps, si.over_budget, si.peak_pages };
	kvt_floor_epoch(budgets, &fs);
	uint64_t dt = kvt_now_ns() - t0;
	CTR_ADD(epochs, 1);
	CTR_ADD(epoch_ns, dt);
	if (dt > __atomic_load_n(&ctr.epoch_ns_max, __ATOMIC_RELAXED))
		__atomic_store_n(&ctr.epoch_ns_max, dt, __ATOMIC_RELAXED);
	if (host.epoch_done) {
		struct kvt_stats_migr s = *KVT_STATS_MIGR(ctr);
		live_devices(&s);
		host.epoch_done(&s);
	}
}

/* ---- the thread ---- */

/* Until the epoch's timer, a stop, a kick, or a poll asked for (both no
 * sooner than KICK_MIN_MS after the last poll). *poll_only: the step
 * asked for a poll of the sources alone; the epoch's timer keeps running. */
static int wait_epoch(int *poll_only)
{
	doing(DOING_WAIT);
	if (!m.epoch_end_ns)
		m.epoch_end_ns = kvt_now_ns() + (uint64_t)kvt_opt.epoch_ms * 1000000u;
	uint64_t end = m.epoch_end_ns;
	uint64_t earliest = m.epoch_at_ns + (uint64_t)KICK_MIN_MS * 1000000u;
	*poll_only = 0;
	pthread_mutex_lock(&m.lock);
	for (;;) {
		uint64_t now = kvt_now_ns();
		int kicked = __atomic_load_n(&m.kicked, __ATOMIC_ACQUIRE);
		int asked = __atomic_load_n(&m.poll_asked, __ATOMIC_ACQUIRE);
		if (m.stop || now >= end || (kicked && now >= earliest))
			break;
		if (asked && now >= earliest) {
			*poll_only = 1;
			break;
		}
		kvt_cond_wait_until(&m.cond, &m.lock, (kicked || asked) && earliest < end ? earliest : end);
	}
	__atomic_store_n(&m.poll_asked, 0, __ATOMIC_RELEASE);
	if (!*poll_only) {
		__atomic_store_n(&m.kicked, 0, __ATOMIC_RELEASE);
		m.epoch_end_ns = 0;
	}
	m.epoch_at_ns = kvt_now_ns();
	int stop = m.stop;
	pthread_mutex_unlock(&m.lock);
	return stop;
}

/* A poll of the sources alone (kvt_migrator_poll_soon): CUPTI's records
 * reach the heat table and the step's watch, nothing is planned or moved. */
static void poll_only(void)
{
	int32_t devs[MAX_DEVICES];
	unsigned nd = kvt_heat_devices(devs, MAX_DEVICES);
	for (unsigned i = 0; i < nd && i < MAX_DEVICES && !stopping(); i++) {
		struct mdev *d = dev_slot(devs[i]);
		doing(DOING_BIND);
		if (!d || bind_device(d))
			continue;
		doing(DOING_SOURCES);
		kvt_prof_sources_poll();
		kvt_clock_charge(POLL_CHARGE_NS);
		CTR_ADD(polls_only, 1);
		return;
	}
}

/* At exit, before each step of the teardown: whether the stop still waits
 * for this thread (then it is marked tearing down, and a stop that times
 * out gives it STOP_WAIT_MS more). A call made right after the answer can
 * still meet a stop giving up meanwhile: the window is that of one check,
 * where holding the lock across the call could hang the exit. */
static int still_waited_for(void)
{
	pthread_mutex_lock(&m.lock);
	int go = !m.abandoned;
	if (go)
		m.tearing_down = 1;
	pthread_mutex_unlock(&m.lock);
	return go;
}

static void *thread_main(void *arg)
{
	kvt_tls.depth++;             /* kvtier's own driver calls are not recorded as the app's */
	kvt_clock_adopt(arg);        /* its place in a simulation (spawn), before anything else */
	int only;
	while (!wait_epoch(&only)) {
		if (kvt_heat_empty()) {    /* nothing tracked: nothing to plan */
			m.last_epoch_ns = 0;   /* nor an epoch the next one is late after */
			continue;
		}
		if (only)
			poll_only();
		else
			epoch();
	}
	/* Each step of the teardown only while the stop still waits: one
	 * that timed out left this thread, and the process's exit may have
	 * torn CUDA and CUPTI down since (its own handlers run next). */
	if (!still_waited_for())
		return NULL;
	doing(DOING_TEARDOWN);
	if (__atomic_load_n(&m.started, __ATOMIC_ACQUIRE))
		kvt_prof_sources_stop(still_waited_for);
	for (unsigned i = 0; i < m.nr_dev; i++) {
		struct mdev *d = &m.d[i];
		if (!d->bound)
			continue;
		if (!still_waited_for())
			return NULL;
		kvt_cuda_set_current(d->ctx);
		kvt_cuda_stream_destroy(d->stream);
		kvt_cuda_release_primary(d->dev);
		d->bound = 0;
	}
	__atomic_store_n(&m.started, 0, __ATOMIC_RELEASE);
	return NULL;
}

/* ---- counters ---- */

static void count_tiers(void)
{
	kvt_heat_count_tiers(&ctr.chunks_hbm, &ctr.chunks_far);
}

static void info_u64(const char *key, uint64_t v)
{
	char val[32];
	snprintf(val, sizeof val, "%llu", (unsigned long long)v);
	kvt_trace_info(key, val);
}

void kvt_migrator_trace_counters(void)
{
	char key[64], val[320];
	kvt_trace_info("migrate.enabled", m.wanted ? "1" : "0");
	kvt_trace_info("migrate.thread_failed", m.thread_failed ? "1" : "0");
	if (!m.wanted)
		return;
	count_tiers();
	info_u64("migrate.epochs", CTR_LD(epochs));
	info_u64("migrate.polls_only", CTR_LD(polls_only));
	info_u64("migrate.late_epochs", CTR_LD(late_epochs));
	info_u64("migrate.epoch_ns_total", CTR_LD(epoch_ns));
	info_u64("migrate.epoch_ns_max", CTR_LD(epoch_ns_max));
	info_u64("migrate.epoch_ns_avg", CTR_LD(epochs) ? CTR_LD(epoch_ns) / CTR_LD(epochs) : 0);
	snprintf(val, sizeof val, "%llu %llu", (unsigned long long)CTR_LD(nr_promoted),
		 (unsigned long long)CTR_LD(bytes_promoted));
	kvt_trace_info("migrate.promoted", val);
	snprintf(val, sizeof val, "%llu %llu", (unsigned long long)CTR_LD(nr_demoted),
		 (unsigned long long)CTR_LD(bytes_demoted));
	kvt_trace_info("migrate.demoted", val);
	info_u64("migrate.prefetch_issued", CTR_LD(prefetch_issued));
	info_u64("migrate.prefetch_failed", CTR_LD(prefetch_failed));
	info_u64("migrate.bind_failed", CTR_LD(bind_failed));
	info_u64("migrate.ranges_tracked", CTR_LD(tracked));
	info_u64("migrate.track_failed", CTR_LD(track_failed));
	info_u64("migrate.chunks.hbm", CTR_LD(chunks_hbm));
	info_u64("migrate.chunks.far", CTR_LD(chunks_far));
	info_u64("migrate.hbm_budget", __atomic_load_n(&m.last_budget, __ATOMIC_RELAXED));
	if (m.stop_note[0])
		kvt_trace_info("migrate.stop", m.stop_note);
	unsigned nd = __atomic_load_n(&m.nr_dev, __ATOMIC_ACQUIRE);
	size_t o = 0;
	val[0] = 0;
	for (unsigned i = 0; i < nd && o < sizeof val - 12; i++)
		o += (size_t)snprintf(val + o, sizeof val - o, "%s%d", i ? "," : "", (int)m.d[i].dev);
	kvt_trace_info("migrate.devices", val);
	kvt_admit_trace_counters();
	info_u64("migrate.fault_ins", kvt_heat_fault_ins());
	info_u64("migrate.evicted_backs", kvt_heat_evicted_backs());
	if (!strncmp(kvt_prof_source_state(KVT_SRC_CUPTI), "active", 6)) {
		uint64_t in, ev;
		kvt_cupti_driver_bytes(-1, &in, &ev);
		info_u64("migrate.fault_in_bytes", in);
		info_u64("migrate.evicted_bytes", ev);
	}
	info_u64("migrate.refaults", kvt_heat_refaults());
	info_u64("migrate.far_faults", kvt_cupti_far_faults());
	for (unsigned s = 0; s < KVT_SRC__COUNT; s++) {
		snprintf(key, sizeof key, "prof.source.%s", kvt_prof_source_name(s));
		snprintf(val, sizeof val, "%llu %s", (unsigned long long)kvt_prof_events(s),
			 kvt_prof_source_state(s));
		kvt_trace_info(key, val);
	}
	info_u64("prof.cupti.records", kvt_cupti_records());
	snprintf(val, sizeof val, "%llu dropped=%llu", (unsigned long long)kvt_prof_graphs_kept(),
		 (unsigned long long)kvt_prof_graphs_dropped());
	kvt_trace_info("prof.launch.graphs", val);
	struct kvt_tables_info ti;
	kvt_tables_info(&ti);
	snprintf(val, sizeof val, "copies_read=%llu pairs=%llu accepted=%llu dropped=%llu "
		 "stride=%llu credited=%llu trimmed=%llu windows_against=%llu relearned=%llu "
		 "shared=%llu duels=%llu declared=%llu",
		 (unsigned long long)ti.copies_read,
		 (unsigned long long)ti.pairs, (unsigned long long)ti.accepted,
		 (unsigned long long)ti.dropped, (unsigned long long)ti.stride,
		 (unsigned long long)ti.credited, (unsigned long long)ti.trimmed,
		 (unsigned long long)ti.windows_against, (unsigned long long)ti.relearned,
		 (unsigned long long)ti.shared, (unsigned long long)ti.duels,
		 (unsigned long long)ti.declared);
	kvt_trace_info("prof.tables", val);
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	snprintf(val, sizeof val, "functions=%llu matched=%llu launches=%llu fed=%llu "
		 "mismatches=%llu off=%#x fresh=%llu kv_known=%llu dead=%llu dead_bytes=%llu",
		 (unsigned long long)di.functions,
		 (unsigned long long)di.matched, (unsigned long long)di.launches,
		 (unsigned long long)di.fed, (unsigned long long)di.mismatches, (unsigned)di.off,
		 (unsigned long long)di.fresh, (unsigned long long)di.kv_known,
		 (unsigned long long)di.dead, (unsigned long long)di.dead_bytes);
	kvt_trace_info("prof.decode", val);
	uint64_t en[KVT_EVC__COUNT], eb[KVT_EVC__COUNT];
	kvt_evc_totals(en, eb);
	size_t eo = 0;
	val[0] = 0;
	for (int c = KVT_EVC__COUNT - 1; c >= 0 && eo < sizeof val - 48; c--)
		eo += (size_t)snprintf(val + eo, sizeof val - eo, "%s%s=%llu/%lluMiB", eo ? " " : "",
				       kvt_evc_name((enum kvt_evc)c), (unsigned long long)en[c],
				       (unsigned long long)(eb[c] >> 20));
	kvt_trace_info("evidence.classes", val);
	kvt_step_trace_counters();
	kvt_discard_trace_counters();
}
