// SPDX-License-Identifier: MIT
/* The CUPTI evidence source: unified-memory counter records from
 * libcupti.so.13, loaded with dlopen at run time (never linked). GPU page
 * faults and fault-driven migrations are exact-address evidence; evictions
 * correct the migrator's belief about where a chunk is. CUPTI absent, or
 * held by another subscriber (nsys, ncu): one message, and the other
 * sources carry on. Runs on the migrator thread (and CUPTI's callbacks);
 * buffers are static, never malloc'd. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cupti_activity.h>
#include <cupti_result.h>

#include "evclass.h"
#include "evidence.h"
#include "heat.h"
#include "trace.h"
#include "kvtier/planner.h"
#include "../base/kvt.h"

#define NR_BUFS 4
#define BUF_BYTES (64 << 10)

static struct {
	void *h;
	CUptiResult (*register_cb)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*configure)(CUpti_ActivityUnifiedMemoryCounterConfig *, uint32_t);
	CUptiResult (*enable)(CUpti_ActivityKind);
	CUptiResult (*disable)(CUpti_ActivityKind);
	CUptiResult (*flush)(uint32_t);
	CUptiResult (*next)(uint8_t *, size_t, CUpti_Activity **);
	int on;
} cu;

static _Alignas(8) uint8_t bufs[NR_BUFS][BUF_BYTES];
static int buf_busy[NR_BUFS];
static uint64_t nr_records;
static char why[160];

uint64_t kvt_cupti_records(void)
{
	return __atomic_load_n(&nr_records, __ATOMIC_RELAXED);
}

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = NULL;
	*size = 0;
	*max_records = 0;
	for (int i = 0; i < NR_BUFS; i++) {
		if (!__atomic_exchange_n(&buf_busy[i], 1, __ATOMIC_ACQUIRE)) {
			*buf = bufs[i];
			*size = BUF_BYTES;
			return;
		}
	}
}

/* GPU page-fault records per device of the range they hit (the last slot:
 * all of them), for the migrator's EPOCH records. */
static uint64_t faults[KVT_CUPTI_FAULT_DEVS + 1];

uint64_t kvt_cupti_faults(int32_t dev)
{
	if (dev >= KVT_CUPTI_FAULT_DEVS)
		return 0;
	return __atomic_load_n(&faults[dev < 0 ? KVT_CUPTI_FAULT_DEVS : dev], __ATOMIC_RELAXED);
}

/* Bytes the driver migrated over the link for each device's redirected
 * ranges, whatever the cause (prefetch, fault, eviction): [dev][0] host
 * to device, [dev][1] device to host. */
static uint64_t link_bytes[KVT_CUPTI_FAULT_DEVS][2];

void kvt_cupti_link_bytes(int32_t dev, uint64_t *to_hbm, uint64_t *to_host)
{
	int ok = dev >= 0 && dev < KVT_CUPTI_FAULT_DEVS;
	*to_hbm = ok ? __atomic_load_n(&link_bytes[dev][0], __ATOMIC_RELAXED) : 0;
	*to_host = ok ? __atomic_load_n(&link_bytes[dev][1], __ATOMIC_RELAXED) : 0;
}

static void count_link(uint64_t addr, uint64_t bytes, int to_host)
{
	int32_t dev = kvt_heat_dev_at(addr);
	if (dev >= 0 && dev < KVT_CUPTI_FAULT_DEVS)
		__atomic_fetch_add(&link_bytes[dev][to_host], bytes, __ATOMIC_RELAXED);
}

/* What the driver moved without kvtier asking, in any managed memory of
 * the process, per device the record names (the last slot: every device):
 * [0] brought into HBM (host to device, any cause but a prefetch: faults,
 * access counters), [1] evicted (device to host, cause EVICTION). Exact:
 * CUPTI's bytes, counted whether or not the range is still tracked. */
static uint64_t driver_bytes[KVT_CUPTI_FAULT_DEVS + 1][2];

void kvt_cupti_driver_bytes(int32_t dev, uint64_t *fault_in, uint64_t *evicted)
{
	unsigned i = dev < 0 ? KVT_CUPTI_FAULT_DEVS : (unsigned)dev;
	int ok = dev < KVT_CUPTI_FAULT_DEVS;
	*fault_in = ok ? __atomic_load_n(&driver_bytes[i][0], __ATOMIC_RELAXED) : 0;
	*evicted = ok ? __atomic_load_n(&driver_bytes[i][1], __ATOMIC_RELAXED) : 0;
}

static void count_driver(uint32_t dev, uint64_t bytes, int evicted)
{
	if (dev < KVT_CUPTI_FAULT_DEVS)
		__atomic_fetch_add(&driver_bytes[dev][evicted], bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&driver_bytes[KVT_CUPTI_FAULT_DEVS][evicted], bytes, __ATOMIC_RELAXED);
}

/* GPU faults per chunk over one buffer of records, for the trace's FAULTS
 * records (the report's fault heat map): a small table on the completing
 * thread's stack (CUPTI may complete two buffers at once), written out
 * when full and at the end of the buffer. */
#define FAULT_LOG KVT_TRACE_MAX_FAULTS

struct fault_log {
	uint64_t chunk[FAULT_LOG];
	uint32_t nr[FAULT_LOG];
	unsigned n;
};

static void fault_log_flush(struct fault_log *fl)
{
	if (fl->n)
		kvt_trace_faults(fl->chunk, fl->nr, fl->n);
	fl->n = 0;
}

static void fault_log_add(struct fault_log *fl, uint64_t addr)
{
	uint64_t c = addr >> KVT_CHUNK_SHIFT << KVT_CHUNK_SHIFT;
	for (unsigned i = 0; i < fl->n; i++)
		if (fl->chunk[i] == c) {
			fl->nr[i]++;
			return;
		}
	if (fl->n == FAULT_LOG)
		fault_log_flush(fl);
	fl->chunk[fl->n] = c;
	fl->nr[fl->n++] = 1;
}

static void count_fault(uint64_t addr)
{
	int32_t dev = kvt_heat_dev_at(addr);
	__atomic_fetch_add(&faults[KVT_CUPTI_FAULT_DEVS], 1, __ATOMIC_RELAXED);
	if (dev >= 0 && dev < KVT_CUPTI_FAULT_DEVS)
		__atomic_fetch_add(&faults[dev], 1, __ATOMIC_RELAXED);
}

static int fault_ins;         /* KVTIER_ADMIT=fault: HtoD records set the tier */
static uint64_t far_faults;   /* GPU faults on chunks believed far and unmapped */

uint64_t kvt_cupti_far_faults(void)
{
	return __atomic_load_n(&far_faults, __ATOMIC_RELAXED);
}

void kvt_cupti_track_fault_ins(int on)
{
	__atomic_store_n(&fault_ins, on, __ATOMIC_RELAXED);
}

static void one_record(const CUpti_ActivityUnifiedMemoryCounter3 *r, struct fault_log *fl)
{
	unsigned credited = 0;
	switch (r->counterKind) {
	case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
		credited = kvt_heat_add(r->address, 1, 1.0f, 1);
		count_fault(r->address);
		if (credited && kvt_trace_active())
			fault_log_add(fl, r->address);
		kvt_evc_mark_addr(r->address, KVT_EVC_FAULTS);
		kvt_prof_on_fault(r->address);     /* the sample source's probes */
		if (__atomic_load_n(&fault_ins, __ATOMIC_RELAXED)) {
			const struct kvt_heat_chunk *c = kvt_heat_chunk_at(r->address);
			if (c && __atomic_load_n(&c->tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_FAR &&
			    !(__atomic_load_n(&c->flags, __ATOMIC_RELAXED) & KVT_HEAT_F_MAPPED))
				__atomic_fetch_add(&far_faults, 1, __ATOMIC_RELAXED);
		}
		break;
	case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
		count_link(r->address, r->value, 0);
		if (r->flags != CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH)
			count_driver(r->dstId, r->value, 0);
		if (r->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_COHERENCE)
			credited = kvt_heat_add(r->address, 1, 1.0f, 1);
		/* a migration kvtier did not ask for brought the chunk in */
		if (__atomic_load_n(&fault_ins, __ATOMIC_RELAXED) &&
		    r->flags != CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH)
			kvt_heat_fault_in(r->address);
		if (r->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH)
			kvt_heat_prefetched_in(r->address, r->value);   /* for the step */
		break;
	case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
		count_link(r->address, r->value, 1);
		if (r->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION) {
			count_driver(r->srcId, r->value, 1);
			kvt_heat_evicted(r->address);
		}
		else if (r->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH)
			kvt_heat_prefetched_out(r->address, r->value);   /* what moved, for the step */
		break;
	default:
		break;
	}
	kvt_prof_count(KVT_SRC_CUPTI, credited);
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf,
				  size_t size, size_t valid)
{
	(void)ctx; (void)stream; (void)size;
	CUpti_Activity *rec = NULL;
	struct fault_log fl;
	fl.n = 0;
	/* a flush that outlasted the exit's wait: CUPTI may be finalised */
	while (valid && !kvt_prof_left() && cu.next(buf, valid, &rec) == CUPTI_SUCCESS) {
		__atomic_fetch_add(&nr_records, 1, __ATOMIC_RELAXED);
		if (rec->kind == CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
			one_record((const CUpti_ActivityUnifiedMemoryCounter3 *)rec, &fl);
	}
	fault_log_flush(&fl);
	for (int i = 0; i < NR_BUFS; i++)
		if (buf == bufs[i])
			__atomic_store_n(&buf_busy[i], 0, __ATOMIC_RELEASE);
}

/* CUPTI cannot be used. Once one of its functions has run (ran), the
 * library stays loaded: it may have left thread-specific-data destructors
 * on this thread, threads or exit handlers, and unloading it would leave
 * those pointing into unmapped code (a crash when this thread exits, seen
 * with a real libcupti over the driver stand-in: CUPTI error 999). */
static int unavailable(const char *what, int r, int ran)
{
	snprintf(why, sizeof why, "unavailable (%s%s%d)", what, r ? ": CUPTI error " : "", r);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
		snprintf(why, sizeof why, "busy (another CUPTI subscriber such as nsys or ncu)");
	kvt_prof_set_state(KVT_SRC_CUPTI, why);
	kvt_warn("CUPTI %s: profiling carries on with the other evidence sources", why);
	if (cu.h && !ran)
		kvt_dl_close(cu.h);
	cu.h = NULL;
	return -1;
}

#define SYM(f, name) (*(void **)&cu.f = kvt_real_dlsym(cu.h, name))

static int cupti_start(void)
{
	cu.h = kvt_dl_open("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!cu.h)
		return unavailable("libcupti.so.13 not found", 0, 0);
	if (!SYM(register_cb, "cuptiActivityRegisterCallbacks") ||
	    !SYM(configure, "cuptiActivityConfigureUnifiedMemoryCounter") ||
	    !SYM(enable, "cuptiActivityEnable") || !SYM(disable, "cuptiActivityDisable") ||
	    !SYM(flush, "cuptiActivityFlushAll") || !SYM(next, "cuptiActivityGetNextRecord"))
		return unavailable("libcupti.so.13 lacks the activity API", 0, 0);
	CUptiResult r = cu.register_cb(buf_request, buf_complete);
	if (r != CUPTI_SUCCESS)
		return unavailable("cuptiActivityRegisterCallbacks", r, 1);
	CUpti_ActivityUnifiedMemoryCounterConfig cfg[3] = {
		{ .scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
		  .kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT, .enable = 1 },
		{ .scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
		  .kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD, .enable = 1 },
		{ .scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
		  .kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH, .enable = 1 },
	};
	if ((r = cu.configure(cfg, 3)) != CUPTI_SUCCESS)
		return unavailable("cuptiActivityConfigureUnifiedMemoryCounter", r, 1);
	if ((r = cu.enable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)) != CUPTI_SUCCESS)
		return unavailable("cuptiActivityEnable", r, 1);
	cu.on = 1;
	kvt_prof_set_state(KVT_SRC_CUPTI, "active");
	return 0;
}

static void cupti_poll(void)
{
	if (cu.on)
		cu.flush(0);
}

static void cupti_stop(int (*go_on)(void))
{
	if (!cu.on)
		return;
	cu.flush(0);
	if (go_on())          /* the flush may have outlasted the exit's wait */
		cu.disable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	cu.on = 0;
}

const struct kvt_prof_source_ops kvt_src_cupti = {
	.name = "cupti",
	.start = cupti_start,
	.stop = cupti_stop,
	.poll = cupti_poll,
};
