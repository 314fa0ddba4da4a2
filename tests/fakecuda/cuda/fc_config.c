/* SPDX-License-Identifier: MIT */
/* fakecuda configuration — the FAKECUDA_* knobs, failure injection
 * (FAKECUDA_FAIL), the entry guard every export runs first, the global lock,
 * and the virtual clock with its counters. Part of the SIMULATED driver. */
#include "fc_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct fc_knobs fc_knobs;
struct fc_stats fc_stats;

/* The global lock: a ticket lock, recursive per thread, handed over in
 * arrival order. A plain mutex let the thread that unlocks take it straight
 * back, so a workload launching kernel after kernel kept another thread's
 * call (kvtier's prefetch) waiting for seconds on a loaded host. */
static pthread_mutex_t fc_gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fc_gate_cv = PTHREAD_COND_INITIALIZER;
static unsigned long fc_ticket_next, fc_ticket_now;   /* written under fc_gate, atomically */
static __thread unsigned fc_lock_depth;
static pthread_once_t fc_once = PTHREAD_ONCE_INIT;
/* The CPU time a driver call spends in the caller's thread (a busy loop on
 * the thread's own CPU clock, so a loaded machine stretches it in real
 * time as it would a real driver's work). Outside the lock. */
void fc_spend_cpu(uint64_t ns)
{
	struct timespec ts;
	if (!ns || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return;
	uint64_t end = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + ns, now;
	do {
		if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
			return;
		now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	} while (now < end);
}

static void fc_pace_anchor(void);

/* Under fc_gate: wait for a new ticket's turn. */
static void fc_gate_wait_turn(void)
{
	unsigned long t = __atomic_fetch_add(&fc_ticket_next, 1, __ATOMIC_RELAXED);
	while (t != fc_ticket_now)
		pthread_cond_wait(&fc_gate_cv, &fc_gate);
}

void fc_lock(void)
{
	if (fc_lock_depth++ == 0) {
		pthread_mutex_lock(&fc_gate);
		fc_gate_wait_turn();
		pthread_mutex_unlock(&fc_gate);
	}
	fc_vt_lock_enter();
}

void fc_unlock(void)
{
	fc_vt_lock_leave();
	if (--fc_lock_depth == 0) {
		pthread_mutex_lock(&fc_gate);
		__atomic_add_fetch(&fc_ticket_now, 1, __ATOMIC_RELAXED);
		pthread_cond_broadcast(&fc_gate_cv);
		pthread_mutex_unlock(&fc_gate);
	}
}

/* The forking thread is the child's only one: the lock is its own if it
 * held it, free otherwise (a plain mutex held by another thread at the
 * fork stayed locked in the child for good). */
static void fc_gate_atfork_child(void)
{
	pthread_mutex_init(&fc_gate, NULL);
	pthread_cond_init(&fc_gate_cv, NULL);
	fc_ticket_next = fc_ticket_now + (fc_lock_depth ? 1 : 0);
}

/* Real time only: the serial device runs a kernel's body inside its launch,
 * under the lock, for as long as its faults take the host to service (over
 * a second of real time for a thrashing step beside two CPU hogs). A GPU
 * runs the kernel while other threads' driver calls go on, so between two
 * of the body's memory accesses the holder lets the calls that queued
 * meanwhile through, then takes its turn back. The bodies hold nothing
 * another call could change there: each access looks its memory up anew.
 * Virtual time keeps the lock (its scheduler decides who runs). */
void fc_lock_yield(void)
{
	if (fc_knobs.vtime || fc_lock_depth == 0 ||   /* nobody queued: not even the gate */
	    __atomic_load_n(&fc_ticket_next, __ATOMIC_RELAXED) -
	    __atomic_load_n(&fc_ticket_now, __ATOMIC_RELAXED) <= 1)
		return;
	pthread_mutex_lock(&fc_gate);
	if (fc_ticket_next - fc_ticket_now > 1) {
		__atomic_add_fetch(&fc_ticket_now, 1, __ATOMIC_RELAXED);
		pthread_cond_broadcast(&fc_gate_cv);
		fc_gate_wait_turn();
	}
	pthread_mutex_unlock(&fc_gate);
}

/* ---- parsing ---- */

static void fc_warn(const char *var, const char *val, const char *used)
{
	char buf[256];
	int n = snprintf(buf, sizeof buf, "fakecuda: bad %s=\"%s\", using %s\n",
			 var, val, used);
	if (n > 0 && write(2, buf, (size_t)n) < 0)
		return;
}

int fc_parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	case 0: break;
	default: return -EINVAL;
	}
	if (*end && end[1] && !(toupper((unsigned char)end[1]) == 'B' && !end[2])
	    && !(end[1] == 'i' && toupper((unsigned char)end[2]) == 'B' && !end[3]))
		return -EINVAL;
	if (shift && v > (~0ull >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

static double fc_env_double(const char *var, double def)
{
	const char *s = getenv(var);
	if (!s || !*s)
		return def;
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v > 0)) {
		char used[64];
		snprintf(used, sizeof used, "%g", def);
		fc_warn(var, s, used);
		return def;
	}
	return v;
}

/* 0 (off) or a factor in (0, 1000]; anything else warns and leaves it off */
static double fc_env_pace(const char *var)
{
	const char *s = getenv(var);
	if (!s || !*s)
		return 0;
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v >= 0 && v <= 1000)) {
		fc_warn(var, s, "0 (no pacing)");
		return 0;
	}
	return v;
}

/* 0 or 1; anything else warns and keeps the default */
static bool fc_env_bool(const char *var, bool def)
{
	const char *s = getenv(var);
	if (!s || !*s)
		return def;
	if (!strcmp(s, "0") || !strcmp(s, "1"))
		return *s == '1';
	fc_warn(var, s, def ? "1" : "0");
	return def;
}

/* FAKECUDA_EVICT: fifo (the driver's order of arrival) or lru */
static bool fc_env_evict_lru(const char *var)
{
	const char *s = getenv(var);
	if (!s || !*s || !strcmp(s, "fifo"))
		return false;
	if (!strcmp(s, "lru"))
		return true;
	fc_warn(var, s, "fifo");
	return false;
}

/* FAKECUDA_DEVICES: how many ordinals, 1..FC_MAX_DEVICES (decimal only);
 * anything else warns and keeps one device, as before the knob existed */
static int fc_env_devices(const char *var)
{
	const char *s = getenv(var);
	if (!s || !*s)
		return 1;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);   /* digits only: no sign, no spaces */
	if (!isdigit((unsigned char)*s) || errno || *end || v < 1 || v > FC_MAX_DEVICES) {
		fc_warn(var, s, "1");
		return 1;
	}
	return (int)v;
}

static uint64_t fc_env_bytes(const char *var, uint64_t def)
{
	const char *s = getenv(var);
	uint64_t v;
	if (!s || !*s)
		return def;
	if (fc_parse_bytes(s, &v) || v == 0) {
		char used[64];
		snprintf(used, sizeof used, "%llu", (unsigned long long)def);
		fc_warn(var, s, used);
		return def;
	}
	return v;
}

/* ---- failure injection: FAKECUDA_FAIL=<export>:<nth|probability>[,...] ---- */

struct fc_fail_rule {
	char name[64];
	unsigned nth;        /* fail every nth call (1 = always), 0: use prob */
	double prob;
	uint64_t calls;
};
static struct fc_fail_rule fc_fail_rules[32];
static unsigned fc_nr_fail_rules;
static pthread_mutex_t fc_fail_mutex = PTHREAD_MUTEX_INITIALIZER;
static uint64_t fc_rng_state = 0x9e3779b97f4a7c15ull;

static int fc_fail_add(const char *item)
{
	const char *colon = strrchr(item, ':');
	if (!colon || colon == item || (size_t)(colon - item) >= 64 ||
	    fc_nr_fail_rules == FC_ARRAY_SIZE(fc_fail_rules))
		return -EINVAL;
	struct fc_fail_rule *r = &fc_fail_rules[fc_nr_fail_rules];
	memset(r, 0, sizeof *r);
	memcpy(r->name, item, (size_t)(colon - item));
	char *end;
	const char *v = colon + 1;
	if (strchr(v, '.')) {
		r->prob = strtod(v, &end);
		if (end == v || *end || r->prob < 0 || r->prob > 1)
			return -EINVAL;
	} else {
		unsigned long n = strtoul(v, &end, 10);
		if (end == v || *end || n == 0 || n > 1000000000ul)
			return -EINVAL;
		r->nth = (unsigned)n;
	}
	fc_nr_fail_rules++;
	return 0;
}

static void fc_fail_parse(const char *spec)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", spec);
	for (char *save = NULL, *it = strtok_r(buf, ",", &save); it;
	     it = strtok_r(NULL, ",", &save))
		if (fc_fail_add(it))
			fc_warn("FAKECUDA_FAIL item", it, "nothing for it");
	const char *seed = getenv("FAKECUDA_SEED");
	if (seed && *seed)
		fc_rng_state = strtoull(seed, NULL, 0) | 1;
}

static double fc_rand01(void)
{
	uint64_t x = fc_rng_state;
	x ^= x << 13; x ^= x >> 7; x ^= x << 17;
	fc_rng_state = x;
	return (double)(x >> 11) / (double)(1ull << 53);
}

/* True when the rule for this export says this call must fail. */
static bool fc_should_fail(const char *name)
{
	bool fail = false;
	if (!fc_nr_fail_rules)
		return false;
	pthread_mutex_lock(&fc_fail_mutex);
	for (unsigned i = 0; i < fc_nr_fail_rules; i++) {
		struct fc_fail_rule *r = &fc_fail_rules[i];
		if (strcmp(r->name, name))
			continue;
		r->calls++;
		fail = r->nth ? (r->calls % r->nth) == 0 : fc_rand01() < r->prob;
		break;
	}
	pthread_mutex_unlock(&fc_fail_mutex);
	return fail;
}

/* ---- init ---- */

static void fc_config_once(void)
{
	pthread_atfork(NULL, NULL, fc_gate_atfork_child);
	fc_knobs.hbm_gbps = fc_env_double("FAKECUDA_HBM_GBPS", 4800);
	fc_knobs.link_gbps = fc_env_double("FAKECUDA_LINK_GBPS", 55);
	/* Calibrated to an H200 (docs/simulated-device.md, "Calibration"): a
	 * kernel's read of 2 MiB that faulted and migrated took 628 us, i.e.
	 * 590 us of fault service beside 2 MiB over the 55 GB/s link; one that
	 * faulted and mapped (preferred HOST) took 1632 us against 161 us for
	 * the same read over an existing mapping; one cuMemAdvise, 16-28 us of
	 * CPU. Faults were serviced one 2 MiB block at a time. */
	fc_knobs.fault_ns = (uint64_t)fc_env_double("FAKECUDA_FAULT_NS", 590000);
	fc_knobs.map_fault_ns = (uint64_t)fc_env_double("FAKECUDA_MAP_FAULT_NS", 1470000);
	fc_knobs.advise_ns = (uint64_t)fc_env_double("FAKECUDA_ADVISE_NS", 20000);
	fc_knobs.launch_ns = (uint64_t)fc_env_double("FAKECUDA_LAUNCH_NS", 5000);
	fc_knobs.drop_host_numa_home = fc_env_bool("FAKECUDA_DROP_HOST_NUMA_HOME", false);
	fc_knobs.pace = fc_env_pace("FAKECUDA_PACE");
	fc_knobs.reclaim = fc_env_bool("FAKECUDA_RECLAIM", true);
	fc_knobs.fault_maps = fc_env_bool("FAKECUDA_FAULT_MAPS", false);
	fc_knobs.coherent = fc_env_bool("FAKECUDA_COHERENT", false);
	fc_knobs.reuse_maps = fc_env_bool("FAKECUDA_REUSE_MAPS", false);
	fc_knobs.evict_lru = fc_env_evict_lru("FAKECUDA_EVICT");
	fc_knobs.vtime = fc_env_bool("FAKECUDA_VTIME", false);
	fc_knobs.charge_scale = fc_env_double("FAKECUDA_CHARGE_SCALE", 1);
	if (fc_knobs.charge_scale < 0) {
		fc_warn("FAKECUDA_CHARGE_SCALE", getenv("FAKECUDA_CHARGE_SCALE"), "1");
		fc_knobs.charge_scale = 1;
	}
	fc_knobs.nr_devices = fc_env_devices("FAKECUDA_DEVICES");
	fc_pace_anchor();
	fc_knobs.fault_batch_blocks =
		(unsigned)fc_env_double("FAKECUDA_FAULT_BATCH", 1);
	uint64_t cap = fc_env_bytes("FAKECUDA_DEVICE_BYTES", 8ull << 30);
	if (cap < FC_BLOCK) {
		fc_warn("FAKECUDA_DEVICE_BYTES", getenv("FAKECUDA_DEVICE_BYTES"), "2M");
		cap = FC_BLOCK;
	}
	fc_knobs.device_bytes = cap;
	uint64_t page = fc_env_bytes("FAKECUDA_UM_PAGE", FC_BLOCK);
	if (page < (64u << 10) || page > FC_BLOCK || (page & (page - 1))) {
		fc_warn("FAKECUDA_UM_PAGE", getenv("FAKECUDA_UM_PAGE"), "2M");
		page = FC_BLOCK;
	}
	fc_knobs.um_page = page;
	fc_stats.c.device_capacity_bytes = cap;
	const char *fail = getenv("FAKECUDA_FAIL");
	if (fail && *fail)
		fc_fail_parse(fail);
}

void fc_config_init(void)
{
	pthread_once(&fc_once, fc_config_once);
}

CUresult fc_enter(const char *name, unsigned flags)
{
	fc_config_init();
	if (!(flags & FC_NOINIT) && !fc_initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((flags & FC_CTX) && !fc_current_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	if (fc_should_fail(name))
		return (flags & FC_ALLOC) ? CUDA_ERROR_OUT_OF_MEMORY
					  : CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* ---- virtual clock and counters ---- */

/* What each bandwidth has charged short of a whole picosecond. Carried
 * over, so that a transfer costs the same cut in pieces as whole: accesses
 * are charged per 2 MiB block, and where a buffer's blocks begin depends on
 * the process's memory layout (rounding each piece made the clock differ
 * by a nanosecond between two runs of the same work: test_passthrough). */
static struct fc_rate { uint64_t mbps, rem; } fc_rates[4];

void fc_clock_bytes(uint64_t bytes, double gbps)
{
	/* 1 GB/s moves one byte per ns: bytes * 1e6 / (MB/s) picoseconds */
	uint64_t mbps = (uint64_t)(gbps * 1000.0 + 0.5);
	struct fc_rate *r = NULL;
	for (unsigned i = 0; i < sizeof fc_rates / sizeof fc_rates[0] && !r; i++)
		if (fc_rates[i].mbps == mbps || !fc_rates[i].mbps)
			r = &fc_rates[i];
	if (!mbps || !r || bytes > UINT64_MAX / 2000000) {      /* beyond the table: rounded */
		fc_stats.clock_ps += (uint64_t)((double)bytes * 1000.0 / gbps + 0.5);
		return;
	}
	r->mbps = mbps;
	uint64_t num = bytes * 1000000 + r->rem;
	fc_stats.clock_ps += num / mbps;
	r->rem = num % mbps;
}

void fc_clock_ns(uint64_t ns)
{
	fc_stats.clock_ps += ns * 1000;
}

uint64_t fc_now_ns(void)
{
	return fc_stats.clock_ps / 1000;
}

/* ---- pacing (FAKECUDA_PACE) ----
 * Off by default: the simulation then runs as fast as the host computes it,
 * ~100x faster than its virtual clock, and something that works in real
 * time beside it (kvtier's migrator, 50 ms epochs) sees the simulated
 * workload change that much too fast.  With a pace p every synchronisation
 * point waits until p x the virtual time since the anchor has passed in
 * real time, so the device is never faster than its cost model says (it is
 * slower wherever the host cannot keep up).  Slack is not banked: a wait
 * that finds the real clock already past its due time moves the anchor to
 * now, so a slow stretch (a workload's setup) does not let the next one run
 * unpaced.  The anchor starts at initialisation and at every counter reset
 * (which zeroes the virtual clock).  Caller of fc_pace_anchor holds the lock. */
static uint64_t fc_pace_real0, fc_pace_virt0;

static uint64_t fc_real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fc_pace_anchor(void)
{
	fc_pace_real0 = fc_real_ns();
	fc_pace_virt0 = fc_now_ns();
}

void fc_pace_wait(void)
{
	if (!(fc_knobs.pace > 0))
		return;
	fc_lock();
	uint64_t virt = fc_now_ns(), now = fc_real_ns();
	uint64_t due = virt >= fc_pace_virt0
		     ? fc_pace_real0 + (uint64_t)((double)(virt - fc_pace_virt0) * fc_knobs.pace)
		     : 0;
	if (due <= now) {
		fc_pace_real0 = now;
		fc_pace_virt0 = virt;
	}
	fc_unlock();
	if (due <= now)
		return;
	struct timespec ts = { (time_t)(due / 1000000000ull), (long)(due % 1000000000ull) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

FC_EXPORT int fakecuda_get_counters(struct fakecuda_counters *out)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	fc_config_init();
	fc_lock();
	*out = fc_stats.c;
	out->virtual_ns = fc_now_ns();
	out->device_capacity_bytes = fc_knobs.device_bytes;
	out->device_used_bytes = fc_stats.device_alloc_bytes +
				 fc_stats.c.managed_resident_bytes;
	fc_unlock();
	return CUDA_SUCCESS;
}

/* FAKECUDA_COUNTERS_AT_EXIT=FILE: the whole run's move counters, for tests
 * that check a preload's own accounting against the device's. */
__attribute__((destructor)) static void fc_counters_at_exit(void)
{
	const char *path = getenv("FAKECUDA_COUNTERS_AT_EXIT");
	struct fakecuda_counters c;
	if (!path || !*path || fakecuda_get_counters(&c))
		return;
	FILE *f = fopen(path, "w");
	if (!f)
		return;
	fprintf(f, "bytes_htod=%llu\nbytes_dtoh=%llu\nbytes_evicted=%llu\nbytes_fault_in=%llu\n"
		"faults=%llu\nevictions=%llu\n", (unsigned long long)c.bytes_htod,
		(unsigned long long)c.bytes_dtoh, (unsigned long long)c.bytes_evicted,
		(unsigned long long)c.bytes_fault_in, (unsigned long long)c.faults,
		(unsigned long long)c.evictions);
	fprintf(f, "discard_ops=%llu\nbytes_discarded=%llu\nbytes_discard_skipped=%llu\n",
		(unsigned long long)c.discard_ops, (unsigned long long)c.bytes_discarded,
		(unsigned long long)c.bytes_discard_skipped);
	fclose(f);
}

/* Zero the event counters (the per-ordinal ones too) and the clock; state
 * gauges (used, resident, capacity, primary refs) describe the present and
 * are kept. */
FC_EXPORT void fakecuda_reset_counters(void)
{
	fc_config_init();
	fc_lock();
	uint64_t resident = fc_stats.c.managed_resident_bytes;
	memset(&fc_stats.c, 0, sizeof fc_stats.c);
	memset(fc_stats.dev, 0, sizeof fc_stats.dev);
	if (!fc_knobs.vtime) {      /* in virtual time clocks never go back */
		fc_stats.clock_ps = 0;
		memset(fc_rates, 0, sizeof fc_rates);
	}
	fc_pace_anchor();
	fc_stats.c.managed_resident_bytes = resident;
	fc_stats.c.device_capacity_bytes = fc_knobs.device_bytes;
	fc_unlock();
}
