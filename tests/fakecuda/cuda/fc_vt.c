/* SPDX-License-Identifier: MIT */
/* fakecuda virtual time (FAKECUDA_VTIME=1) — the SIMULATED device as a
 * discrete-event machine, and a scheduler that runs the simulated threads
 * one at a time, so that one seed gives one result.
 *
 * Device. Every ordinal has three engines: the SMs (kernels, device-side
 * copies and memsets), a host-to-device copy engine and a device-to-host
 * one (async copies, prefetches). Each engine and each stream has a time at
 * which its last operation ends. An operation submitted at the caller's
 * virtual time t starts at max(t, its stream's end, its engine's end), runs
 * its cost model from there (fc_stats.clock_ps is the cursor while it
 * runs), and the caller goes on at t: a launch returns at once, as on a
 * GPU, and only a synchronisation moves the caller to the work's end. Two
 * operations on different engines therefore overlap; on one stream they
 * add up. Effects (which block is where) are applied when the operation is
 * submitted, in submission order; their timing is in virtual time: a block
 * a copy engine moves in carries the time its transfer ends, and a kernel
 * that reaches it earlier stalls until then. A transfer on a link direction
 * that a copy engine is busy on (a fault's migration, an eviction, a remote
 * read) shares it: it takes up to twice its own time while the engine's
 * queue is busy, and pushes that queue back by its own time.
 *
 * Threads. A thread joins the simulation (fakecuda_vclock_join, for a
 * workload's host thread; fakecuda_vclock_wait, for a helper thread such as
 * kvtier's migrator). Joined threads each have a virtual clock; exactly one
 * runs at a time. It gives the turn away only at points where it holds no
 * lock of its own: a workload's synchronisations and declared host work,
 * and a helper's timed wait. The turn then goes to the joined thread
 * furthest behind in virtual time (a waiting one counts at its deadline;
 * ties: the one that joined first). Threads that never join run freely on
 * one shared clock, as every thread does without FAKECUDA_VTIME.
 * A turn that does not come back while no thread makes a driver call (or
 * works inside one: each GPU access of a kernel, each prefetched block) for
 * FAKECUDA_VTIME_STALL_MS of real time (default 20000; a thread that
 * blocked outside the simulation) is taken anyway, with one warning: the run is then no longer reproducible,
 * but it does not hang. Part of the SIMULATED driver, never shipped. */
#include "fc_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct fc_vthread {
	uint64_t now_ps;
	uint64_t wake_ps;          /* FC_VT_WAIT: its deadline */
	const void *key;           /* FC_VT_WAIT: what fakecuda_vclock_wake names */
	unsigned id;               /* join order: the tie-break */
	int state;
	bool woken;                /* the wait ended by a wake, not the deadline */
	bool yields_at_sync;       /* a workload's thread (fakecuda_vclock_join) */
	pthread_cond_t cv;
	struct fc_vthread *next;
};
enum { FC_VT_RUN, FC_VT_READY, FC_VT_WAIT };

static pthread_mutex_t fc_vt_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fc_vthread *fc_vt_list, *fc_vt_holder;
static unsigned fc_vt_ids, fc_vt_nr;
static __thread struct fc_vthread *fc_vt_self;
static __thread int fc_vt_depth;       /* fc_lock nesting on this thread */
static uint64_t fc_vt_free_ps;         /* the clock of threads that never joined */
static uint64_t fc_vt_seen_ps;         /* the latest clock any thread reached */
static pthread_key_t fc_vt_key;
static pthread_once_t fc_vt_once = PTHREAD_ONCE_INIT;
static bool fc_vt_stalled;
static uint64_t fc_vt_progress;        /* atomic: driver calls made by any thread */

/* Engines and the legacy stream's end, per ordinal; the current operation. */
static uint64_t fc_eng_end[FC_MAX_DEVICES][FC_ENG_N];
static uint64_t fc_legacy_end[FC_MAX_DEVICES], fc_blocking_end[FC_MAX_DEVICES];
static int fc_cur_eng = FC_ENG_NONE, fc_cur_dev;
static uint64_t fc_stall_total_ps;

bool fc_vt_on(void)
{
	return fc_knobs.vtime;
}

/* The scheduler runs only in virtual time and unpaced: with FAKECUDA_PACE
 * the threads live in real time (the robustness check). */
static bool fc_vt_sched(void)
{
	return fc_knobs.vtime && !(fc_knobs.pace > 0);
}

static uint64_t *fc_vt_clock(void)
{
	return fc_vt_self ? &fc_vt_self->now_ps : &fc_vt_free_ps;
}

/* ---- the cursor follows the calling thread's clock under the lock ---- */

void fc_vt_lock_enter(void)
{
	if (fc_vt_depth++ == 0 && fc_knobs.vtime)
		fc_stats.clock_ps = *fc_vt_clock();
}

/* The holder is working under the lock (a long kernel body, a prefetch
 * of many blocks): not blocked, so a waiting thread keeps waiting. */
void fc_vt_working(void)
{
	__atomic_add_fetch(&fc_vt_progress, 1, __ATOMIC_RELAXED);
}

void fc_vt_lock_leave(void)
{
	if (--fc_vt_depth == 0 && fc_knobs.vtime) {
		__atomic_add_fetch(&fc_vt_progress, 1, __ATOMIC_RELAXED);
		uint64_t *c = fc_vt_clock();
		if (fc_stats.clock_ps > *c)
			*c = fc_stats.clock_ps;
		if (*c > __atomic_load_n(&fc_vt_seen_ps, __ATOMIC_RELAXED))
			__atomic_store_n(&fc_vt_seen_ps, *c, __ATOMIC_RELAXED);
	}
}

/* ---- operations on engines ---- */

void fc_op_begin(struct fc_op *op, CUstream s, int dev, enum fc_eng e)
{
	op->on = fc_knobs.vtime;
	if (!op->on)
		return;
	if (dev < 0 || dev >= FC_MAX_DEVICES)
		dev = 0;
	op->host_ps = fc_stats.clock_ps;
	op->dev = dev;
	op->eng = e;
	op->s = s;
	uint64_t t = op->host_ps, *se = fc_stream_end(s, dev);
	bool legacy = fc_stream_is_legacy(s), blocking = fc_stream_is_blocking(s);
	if (*se > t)
		t = *se;
	if (legacy && fc_blocking_end[dev] > t)
		t = fc_blocking_end[dev];
	if (blocking && !legacy && fc_legacy_end[dev] > t)
		t = fc_legacy_end[dev];
	if (e != FC_ENG_NONE && fc_eng_end[dev][e] > t)
		t = fc_eng_end[dev][e];
	fc_stats.clock_ps = t;
	fc_cur_eng = e;
	fc_cur_dev = dev;
}

uint64_t fc_op_end(struct fc_op *op)
{
	if (!op->on)
		return fc_stats.clock_ps;
	uint64_t end = fc_stats.clock_ps;
	int dev = op->dev;
	if (op->eng != FC_ENG_NONE && end > fc_eng_end[dev][op->eng])
		fc_eng_end[dev][op->eng] = end;
	uint64_t *se = fc_stream_end(op->s, dev);
	if (end > *se)
		*se = end;
	if (fc_stream_is_blocking(op->s) && !fc_stream_is_legacy(op->s) &&
	    end > fc_blocking_end[dev])
		fc_blocking_end[dev] = end;
	fc_cur_eng = FC_ENG_NONE;
	fc_stats.clock_ps = op->host_ps;   /* the caller goes on at once */
	return end;
}

void fc_host_wait_until(uint64_t ps)
{
	if (fc_knobs.vtime && ps > fc_stats.clock_ps)
		fc_stats.clock_ps = ps;
}

void fc_stall_until(uint64_t ps)
{
	if (fc_knobs.vtime && ps > fc_stats.clock_ps) {
		fc_stall_total_ps += ps - fc_stats.clock_ps;
		fc_stats.clock_ps = ps;
	}
}

/* A link transfer of bytes in one direction, charged to the cursor. Inside
 * an operation of that direction's copy engine it is that engine's own
 * work; anywhere else it shares the link with the engine's queue. */
void fc_link_transfer(bool htod, uint64_t bytes)
{
	uint64_t t0 = fc_stats.clock_ps;
	fc_clock_bytes(bytes, fc_knobs.link_gbps);
	if (!fc_knobs.vtime)
		return;
	enum fc_eng e = htod ? FC_ENG_H2D : FC_ENG_D2H;
	if (fc_cur_eng == (int)e)
		return;
	int dev = fc_cur_eng == FC_ENG_NONE ? 0 : fc_cur_dev;
	uint64_t t = fc_stats.clock_ps - t0, *busy = &fc_eng_end[dev][e];
	if (*busy > t0) {
		uint64_t extra = *busy - t0 < t ? *busy - t0 : t;
		fc_stats.clock_ps += extra;
		*busy += t;
	} else {
		*busy = t0 + t;
	}
}

/* When everything submitted to ordinal dev so far ends. */
uint64_t fc_dev_idle_ps(int dev)
{
	if (dev < 0 || dev >= FC_MAX_DEVICES)
		dev = 0;
	uint64_t t = fc_legacy_end[dev] > fc_blocking_end[dev] ? fc_legacy_end[dev]
							       : fc_blocking_end[dev];
	for (int e = 0; e < FC_ENG_N; e++)
		if (fc_eng_end[dev][e] > t)
			t = fc_eng_end[dev][e];
	return t;
}

uint64_t fc_vt_stall_ns(void)
{
	return fc_stall_total_ps / 1000;
}

/* ---- the scheduler ---- */

static uint64_t fc_real_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static unsigned fc_vt_stall_ms(void)
{
	const char *s = getenv("FAKECUDA_VTIME_STALL_MS");
	long v = s && *s ? strtol(s, NULL, 10) : 20000;
	return v > 0 ? (unsigned)v : 20000;
}

static uint64_t fc_vt_due(const struct fc_vthread *t)
{
	return t->state == FC_VT_WAIT ? t->wake_ps : t->now_ps;
}

/* The joined thread furthest behind; NULL when none can run. fc_vt_mu held. */
static struct fc_vthread *fc_vt_pick(void)
{
	struct fc_vthread *best = NULL;
	for (struct fc_vthread *t = fc_vt_list; t; t = t->next) {
		if (t->state == FC_VT_RUN)
			continue;
		if (!best || fc_vt_due(t) < fc_vt_due(best) ||
		    (fc_vt_due(t) == fc_vt_due(best) && t->id < best->id))
			best = t;
	}
	return best;
}

static void fc_vt_hand_to(struct fc_vthread *t)
{
	fc_vt_holder = t;
	if (t) {
		if (t->state == FC_VT_WAIT && t->wake_ps > t->now_ps)
			t->now_ps = t->wake_ps;
		t->state = FC_VT_RUN;
		pthread_cond_signal(&t->cv);
	}
}

/* Wait until the turn is ours. fc_vt_mu held. */
static void fc_vt_await(struct fc_vthread *me)
{
	static unsigned stall_ms;
	if (!stall_ms)
		stall_ms = fc_vt_stall_ms();
	uint64_t since = fc_real_ms(), seen = __atomic_load_n(&fc_vt_progress, __ATOMIC_RELAXED);
	while (fc_vt_holder != me) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&me->cv, &fc_vt_mu, &ts);
		uint64_t p = __atomic_load_n(&fc_vt_progress, __ATOMIC_RELAXED);
		if (p != seen) {            /* the holder is working, not blocked: wait on */
			seen = p;
			since = fc_real_ms();
		}
		if (fc_vt_holder != me && fc_real_ms() - since > stall_ms) {
			if (!fc_vt_stalled) {
				fc_vt_stalled = true;
				fprintf(stderr, "fakecuda: virtual time: no turn for %u ms (a thread "
					"blocked outside the simulation); going on: this run is not "
					"reproducible\n", stall_ms);
			}
			struct fc_vthread *h = fc_vt_holder;
			if (h && h->state == FC_VT_RUN)
				h->state = FC_VT_READY;   /* it takes a turn again when it asks */
			fc_vt_holder = me;
			me->state = FC_VT_RUN;
		}
	}
	if (me->now_ps > __atomic_load_n(&fc_vt_seen_ps, __ATOMIC_RELAXED))
		__atomic_store_n(&fc_vt_seen_ps, me->now_ps, __ATOMIC_RELAXED);
}

/* Give the turn to whoever is furthest behind (maybe ourselves). */
static void fc_vt_switch(struct fc_vthread *me)
{
	struct fc_vthread *next = fc_vt_pick();
	if (next == me || !next) {
		fc_vt_hand_to(me);
		return;
	}
	fc_vt_hand_to(next);
	fc_vt_await(me);
}

static void fc_vt_remove(struct fc_vthread *me)
{
	for (struct fc_vthread **p = &fc_vt_list; *p; p = &(*p)->next)
		if (*p == me) {
			*p = me->next;
			break;
		}
	fc_vt_nr--;
	if (fc_vt_holder == me)
		fc_vt_hand_to(fc_vt_pick());
}

static void fc_vt_leave_locked(void)
{
	struct fc_vthread *me = fc_vt_self;
	if (!me)
		return;
	fc_vt_self = NULL;
	pthread_mutex_lock(&fc_vt_mu);
	if (me->now_ps > fc_vt_free_ps)
		fc_vt_free_ps = me->now_ps;
	fc_vt_remove(me);
	pthread_mutex_unlock(&fc_vt_mu);
	pthread_cond_destroy(&me->cv);
	free(me);
}

static void fc_vt_thread_exit(void *p)
{
	(void)p;
	fc_vt_leave_locked();
}

static void fc_vt_atfork_child(void)
{
	/* only the forking thread lives on: it runs alone, on its own clock */
	pthread_mutex_init(&fc_vt_mu, NULL);
	uint64_t now = fc_vt_self ? fc_vt_self->now_ps : fc_vt_free_ps;
	fc_vt_list = NULL;
	fc_vt_holder = NULL;
	fc_vt_nr = 0;
	fc_vt_self = NULL;
	fc_vt_free_ps = now;
}

static void fc_vt_init_once(void)
{
	pthread_key_create(&fc_vt_key, fc_vt_thread_exit);
	pthread_atfork(NULL, NULL, fc_vt_atfork_child);
}

/* A new thread in the schedule, ready at now_ps; fc_vt_mu held on return
 * (NULL, and not held, without memory). */
static struct fc_vthread *fc_vt_add(uint64_t now_ps, bool yields_at_sync)
{
	pthread_once(&fc_vt_once, fc_vt_init_once);
	struct fc_vthread *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	pthread_cond_init(&t->cv, NULL);
	t->yields_at_sync = yields_at_sync;
	pthread_mutex_lock(&fc_vt_mu);
	t->id = fc_vt_ids++;
	t->now_ps = now_ps;
	t->state = FC_VT_READY;
	t->next = fc_vt_list;
	fc_vt_list = t;
	fc_vt_nr++;
	return t;
}

/* Join: the calling thread's clock starts at the latest any thread has
 * reached, and it runs when its turn comes. */
static struct fc_vthread *fc_vt_join(bool yields_at_sync)
{
	if (fc_vt_self || !fc_vt_sched())
		return fc_vt_self;
	uint64_t seen = __atomic_load_n(&fc_vt_seen_ps, __ATOMIC_RELAXED);
	struct fc_vthread *me = fc_vt_add(seen > fc_vt_free_ps ? seen : fc_vt_free_ps,
					  yields_at_sync);
	if (!me)
		return NULL;
	fc_vt_self = me;
	pthread_setspecific(fc_vt_key, me);
	if (!fc_vt_holder)
		fc_vt_hand_to(me);
	else
		fc_vt_await(me);
	pthread_mutex_unlock(&fc_vt_mu);
	return me;
}

/* ---- helpers started by a simulated thread ----
 * A thread that starts a helper reserves its place first, at its own
 * virtual time (fakecuda_vclock_spawn), and the helper adopts it as its
 * first act (fakecuda_vclock_adopt). The place is in the schedule from the
 * moment of the reservation, so when the helper runs does not depend on
 * when the host gets round to starting it. */
FC_EXPORT void *fakecuda_vclock_spawn(void)
{
	fc_config_init();
	if (!fc_vt_sched() || !fc_vt_self)
		return NULL;
	struct fc_vthread *t = fc_vt_add(fc_vt_self->now_ps, false);
	if (t)
		pthread_mutex_unlock(&fc_vt_mu);
	return t;
}

/* The helper takes the place reserved for it and waits for its turn. */
FC_EXPORT void fakecuda_vclock_adopt(void *place)
{
	struct fc_vthread *me = place;
	if (!me || fc_vt_self)
		return;
	fc_vt_self = me;
	pthread_setspecific(fc_vt_key, me);
	pthread_mutex_lock(&fc_vt_mu);
	if (!fc_vt_holder)
		fc_vt_hand_to(me);
	else
		fc_vt_await(me);
	pthread_mutex_unlock(&fc_vt_mu);
}

/* A reserved place whose helper never started (pthread_create failed). */
FC_EXPORT void fakecuda_vclock_cancel(void *place)
{
	struct fc_vthread *t = place;
	if (!t)
		return;
	pthread_mutex_lock(&fc_vt_mu);
	fc_vt_remove(t);
	pthread_mutex_unlock(&fc_vt_mu);
	pthread_cond_destroy(&t->cv);
	free(t);
}

/* A workload thread's synchronisation or declared host work: the turn goes
 * to whoever is furthest behind. Called without the driver's lock. */
void fc_vt_sync_point(void)
{
	struct fc_vthread *me = fc_vt_self;
	if (!me || !me->yields_at_sync)
		return;
	pthread_mutex_lock(&fc_vt_mu);
	me->state = FC_VT_READY;
	fc_vt_switch(me);
	pthread_mutex_unlock(&fc_vt_mu);
}

/* ---- exports ---- */

/* 0: the calling thread is in the simulation (its host thread's clock is
 * virtual, it gives its turn away at synchronisations and at
 * fakecuda_vclock_host); -1: virtual time is off (FAKECUDA_VTIME unset,
 * or FAKECUDA_PACE set). */
FC_EXPORT int fakecuda_vclock_join(void)
{
	fc_config_init();
	return fc_vt_join(true) ? 0 : -1;
}

/* 1 while the scheduler runs (FAKECUDA_VTIME=1, unpaced): a library may
 * then move its clock and timed waits onto fakecuda_vclock_*. */
FC_EXPORT int fakecuda_vclock_active(void)
{
	fc_config_init();
	return fc_vt_sched();
}

/* The calling thread leaves the simulation (before it blocks on something
 * outside it, such as joining a simulated thread). */
FC_EXPORT void fakecuda_vclock_leave(void)
{
	fc_vt_leave_locked();
}

/* The virtual clock in ns: the latest time any simulated thread has
 * reached (monotonic across threads). 0 when virtual time is off. */
FC_EXPORT uint64_t fakecuda_vclock_now(void)
{
	fc_config_init();
	if (!fc_knobs.vtime)
		return 0;
	pthread_mutex_lock(&fc_vt_mu);
	uint64_t *c = fc_vt_clock(), seen = __atomic_load_n(&fc_vt_seen_ps, __ATOMIC_RELAXED);
	uint64_t t = *c > seen ? *c : seen;
	pthread_mutex_unlock(&fc_vt_mu);
	return t / 1000;
}

/* Host work of ns (a workload's scheduler, or sleeping until its next
 * request): the calling thread's clock moves on, then its turn may pass. */
FC_EXPORT void fakecuda_vclock_host(uint64_t ns)
{
	fc_config_init();
	if (!fc_knobs.vtime)
		return;
	fc_lock();
	fc_stats.clock_ps += ns * 1000;
	fc_unlock();
	fc_vt_sync_point();
}

/* CPU time a library spent in the calling thread (kvtier charges its own
 * work this way), scaled by FAKECUDA_CHARGE_SCALE (a test knob, default 1). */
FC_EXPORT void fakecuda_vclock_charge(uint64_t ns)
{
	fc_config_init();
	if (!fc_knobs.vtime)
		return;
	fc_lock();
	fc_stats.clock_ps += (uint64_t)((double)ns * fc_knobs.charge_scale * 1000.0);
	fc_unlock();
}

/* Wait, in virtual time, until deadline_ns (fakecuda_vclock_now's clock)
 * or until fakecuda_vclock_wake(key). The calling thread joins the
 * simulation if it had not (as a helper: it gives its turn away only
 * here). 0: woken; 1: the deadline passed; -1: not simulated (virtual time
 * off, or no other thread is in the simulation to move the clock): wait
 * in real time instead. */
FC_EXPORT int fakecuda_vclock_wait(const void *key, uint64_t deadline_ns)
{
	fc_config_init();
	if (!fc_vt_sched())
		return -1;
	struct fc_vthread *me = fc_vt_join(false);
	if (!me)
		return -1;
	pthread_mutex_lock(&fc_vt_mu);
	bool alone = true;
	for (struct fc_vthread *t = fc_vt_list; t; t = t->next)
		if (t != me && t->yields_at_sync)
			alone = false;
	if (alone) {
		pthread_mutex_unlock(&fc_vt_mu);
		return -1;
	}
	me->key = key;
	me->woken = false;
	me->wake_ps = deadline_ns * 1000 > me->now_ps ? deadline_ns * 1000 : me->now_ps;
	me->state = FC_VT_WAIT;
	fc_vt_switch(me);
	me->key = NULL;
	bool woken = me->woken;
	pthread_mutex_unlock(&fc_vt_mu);
	return woken ? 0 : 1;
}

/* Wake the threads waiting on key, at the caller's virtual time. */
FC_EXPORT void fakecuda_vclock_wake(const void *key)
{
	if (!fc_knobs.vtime)
		return;
	pthread_mutex_lock(&fc_vt_mu);
	uint64_t at = *fc_vt_clock();
	for (struct fc_vthread *t = fc_vt_list; t; t = t->next) {
		if (t->state != FC_VT_WAIT || t->key != key)
			continue;
		t->woken = true;
		uint64_t w = at > t->now_ps ? at : t->now_ps;
		if (w < t->wake_ps)
			t->wake_ps = w;
		if (!fc_vt_holder)
			fc_vt_hand_to(t);
	}
	pthread_mutex_unlock(&fc_vt_mu);
}
