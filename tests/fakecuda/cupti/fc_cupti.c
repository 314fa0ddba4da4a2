/* SPDX-License-Identifier: MIT */
/* The CUPTI stand-in (libcupti.so.13, test double): the unified-memory
 * counter activity API only. Records come from the SIMULATED driver's feed
 * (fakecuda_um_feed_* in libcuda.so.1, found with dlsym) and are delivered
 * as real CUpti_ActivityUnifiedMemoryCounter3 records on cuptiActivityFlushAll.
 * FAKECUDA_CUPTI_BUSY=1 models another subscriber (nsys) holding CUPTI.
 * Exit, as the real library: an exit handler, registered at the first
 * enable, finalises it; a call that starts after that aborts the process
 * with a message (a real libcupti.so.13 called after its exit handler
 * crashed a process on an H200, driver 580). FAKECUDA_CUPTI_EXIT_MS keeps
 * that handler busy so long after finalising, and FAKECUDA_CUPTI_FLUSH_MS
 * makes each cuptiActivityFlushAll take so long (real time) before it
 * flushes: together, a caller stuck in a flush while the process exits. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#pragma GCC visibility push(default)
#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>
#pragma GCC visibility pop

#include "fc_umfeed.h"

#define FC_NR_UM_KINDS 9   /* counter kinds 1..8 */

static pthread_mutex_t fc_cupti_lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc fc_req;
static CUpti_BuffersCallbackCompleteFunc fc_done;
static bool fc_um_configured[FC_NR_UM_KINDS];
static bool fc_um_enabled;
static fakecuda_um_feed_enable_fn fc_feed_enable;
static fakecuda_um_feed_read_fn fc_feed_read;
static size_t fc_dropped;

/* Find the driver's feed; libcupti loads libcuda.so.1 itself, like the real one. */
static bool fc_driver(void)
{
	if (fc_feed_read)
		return true;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return false;
	fc_feed_enable = (fakecuda_um_feed_enable_fn)dlsym(h, "fakecuda_um_feed_enable");
	fc_feed_read = (fakecuda_um_feed_read_fn)dlsym(h, "fakecuda_um_feed_read");
	return fc_feed_enable && fc_feed_read;
}

/* ---- exit (FAKECUDA_CUPTI_EXIT_MS) and slow flushes (FAKECUDA_CUPTI_FLUSH_MS) ---- */

static int fc_finalized;
static pthread_once_t fc_exit_once = PTHREAD_ONCE_INIT;

/* Milliseconds from a digits-only variable, at most 10 minutes; 0 if unset or bad. */
static unsigned fc_env_ms(const char *var)
{
	const char *v = getenv(var);
	char *end;
	if (!v || *v < '0' || *v > '9')
		return 0;
	unsigned long ms = strtoul(v, &end, 10);
	return *end || ms > 600000 ? 0 : (unsigned)ms;
}

static void fc_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts))
		;
}

static void fc_cupti_atexit(void)
{
	__atomic_store_n(&fc_finalized, 1, __ATOMIC_RELEASE);
	unsigned ms = fc_env_ms("FAKECUDA_CUPTI_EXIT_MS");
	if (ms)
		fc_sleep_ms(ms);
}

static void fc_register_exit(void)
{
	atexit(fc_cupti_atexit);     /* refused: no exit model, as before it */
}

/* Every entry point first: a call after the exit handler is the crash. */
static void fc_alive(const char *fn)
{
	if (!__atomic_load_n(&fc_finalized, __ATOMIC_ACQUIRE))
		return;
	char msg[160];
	int n = snprintf(msg, sizeof msg, "fakecupti: %s called after CUPTI's exit handler "
			 "(a real libcupti crashes here)\n", fn);
	if (n > 0 && write(2, msg, (size_t)n) < 0)
		n = 0;
	abort();
}

static bool fc_busy(void)
{
	const char *b = getenv("FAKECUDA_CUPTI_BUSY");
	return b && *b && strcmp(b, "0");
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
	fc_alive("cuptiGetVersion");
	if (!version)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
						    CUpti_BuffersCallbackCompleteFunc done)
{
	fc_alive("cuptiActivityRegisterCallbacks");
	if (!req || !done)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&fc_cupti_lock);
	fc_req = req;
	fc_done = done;
	pthread_mutex_unlock(&fc_cupti_lock);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityConfigureUnifiedMemoryCounter(
	CUpti_ActivityUnifiedMemoryCounterConfig *config, uint32_t count)
{
	fc_alive("cuptiActivityConfigureUnifiedMemoryCounter");
	if (!config || !count)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (!fc_driver())
		return CUPTI_ERROR_UNKNOWN;   /* what CUPTI returns with no driver */
	for (uint32_t i = 0; i < count; i++) {
		unsigned k = (unsigned)config[i].kind;
		if (!k || k >= FC_NR_UM_KINDS || config[i].deviceId != 0)
			return CUPTI_ERROR_INVALID_PARAMETER;
	}
	pthread_mutex_lock(&fc_cupti_lock);
	for (uint32_t i = 0; i < count; i++)
		fc_um_configured[config[i].kind] = config[i].enable != 0;
	pthread_mutex_unlock(&fc_cupti_lock);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
	fc_alive("cuptiActivityEnable");
	if (fc_busy())
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	if (kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
		return CUPTI_ERROR_NOT_COMPATIBLE;   /* not simulated */
	if (!fc_driver())
		return CUPTI_ERROR_UNKNOWN;
	pthread_mutex_lock(&fc_cupti_lock);
	fc_um_enabled = true;
	fc_feed_enable(1);
	pthread_mutex_unlock(&fc_cupti_lock);
	pthread_once(&fc_exit_once, fc_register_exit);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
	fc_alive("cuptiActivityDisable");
	if (kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
		return CUPTI_ERROR_NOT_COMPATIBLE;
	if (!fc_driver())
		return CUPTI_ERROR_UNKNOWN;
	pthread_mutex_lock(&fc_cupti_lock);
	fc_um_enabled = false;
	fc_feed_enable(0);
	pthread_mutex_unlock(&fc_cupti_lock);
	return CUPTI_SUCCESS;
}

static void fc_to_record(const struct fakecuda_um_record *in,
			 CUpti_ActivityUnifiedMemoryCounter3 *out)
{
	memset(out, 0, sizeof *out);
	out->kind = CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER;
	out->counterKind = (CUpti_ActivityUnifiedMemoryCounterKind)in->counter_kind;
	out->value = in->value;
	out->start = in->start_ns;
	out->end = in->end_ns;
	out->address = in->address;
	out->srcId = in->src_id;
	out->dstId = in->dst_id;
	out->processId = (uint32_t)getpid();
	out->flags = in->flags;
}

/* Fill one client buffer from the feed with at most *left records, taking
 * what it read off *left; false when nothing more is to be read. */
static bool fc_flush_one(size_t *left)
{
	uint8_t *buf = NULL;
	size_t size = 0, max_records = 0, valid = 0;
	struct fakecuda_um_record recs[256];
	fc_req(&buf, &size, &max_records);
	if (!buf)
		return false;
	size_t room = size / sizeof(CUpti_ActivityUnifiedMemoryCounter3);
	if (max_records && max_records < room)
		room = max_records;
	while (room && *left) {
		uint64_t dropped = 0;
		size_t want = room < 256 ? room : 256;
		if (want > *left)
			want = *left;
		size_t n = fc_feed_read(recs, want, &dropped);
		fc_dropped += dropped;
		*left -= n;
		for (size_t i = 0; i < n; i++) {
			if (recs[i].counter_kind >= FC_NR_UM_KINDS ||
			    !fc_um_configured[recs[i].counter_kind])
				continue;
			fc_to_record(&recs[i], (CUpti_ActivityUnifiedMemoryCounter3 *)
				     (buf + valid));
			valid += sizeof(CUpti_ActivityUnifiedMemoryCounter3);
			room--;
		}
		if (n < want)
			break;
	}
	fc_done(NULL, 0, buf, size, valid);
	return valid > 0 && *left;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
	fc_alive("cuptiActivityFlushAll");
	(void)flag;
	unsigned ms = fc_env_ms("FAKECUDA_CUPTI_FLUSH_MS");
	if (ms)
		fc_sleep_ms(ms);
	pthread_mutex_lock(&fc_cupti_lock);
	/* the records buffered when the flush began, as CUPTI flushes the
	 * buffers it holds: a device faulting as fast as the flush drains
	 * must not keep the caller in here (draining to empty held it for
	 * minutes) */
	size_t left = fc_req && fc_done && fc_feed_read ? fc_feed_read(NULL, 0, NULL) : 0;
	while (left && fc_flush_one(&left))
		;
	pthread_mutex_unlock(&fc_cupti_lock);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
						CUpti_Activity **record)
{
	fc_alive("cuptiActivityGetNextRecord");
	const size_t sz = sizeof(CUpti_ActivityUnifiedMemoryCounter3);
	if (!buffer || !record)
		return CUPTI_ERROR_INVALID_PARAMETER;
	uint8_t *next = *record ? (uint8_t *)*record + sz : buffer;
	if (next < buffer || (size_t)(next - buffer) + sz > valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*record = (CUpti_Activity *)next;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream,
						       size_t *dropped)
{
	fc_alive("cuptiActivityGetNumDroppedRecords");
	(void)ctx; (void)stream;
	if (!dropped)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&fc_cupti_lock);
	*dropped = fc_dropped;
	fc_dropped = 0;
	pthread_mutex_unlock(&fc_cupti_lock);
	return CUPTI_SUCCESS;
}

struct fc_cupti_str { CUptiResult r; const char *s; };

static const struct fc_cupti_str fc_strs[] = {
	{ CUPTI_SUCCESS, "CUPTI_SUCCESS" },
	{ CUPTI_ERROR_INVALID_PARAMETER, "CUPTI_ERROR_INVALID_PARAMETER" },
	{ CUPTI_ERROR_MAX_LIMIT_REACHED, "CUPTI_ERROR_MAX_LIMIT_REACHED" },
	{ CUPTI_ERROR_NOT_COMPATIBLE, "CUPTI_ERROR_NOT_COMPATIBLE" },
	{ CUPTI_ERROR_NOT_INITIALIZED, "CUPTI_ERROR_NOT_INITIALIZED" },
	{ CUPTI_ERROR_INVALID_KIND, "CUPTI_ERROR_INVALID_KIND" },
	{ CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED, "CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED" },
	{ CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
	  "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" },
	{ CUPTI_ERROR_UNKNOWN, "CUPTI_ERROR_UNKNOWN" },
};

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
	fc_alive("cuptiGetResultString");
	if (!str)
		return CUPTI_ERROR_INVALID_PARAMETER;
	for (size_t i = 0; i < sizeof fc_strs / sizeof fc_strs[0]; i++)
		if (fc_strs[i].r == result) {
			*str = fc_strs[i].s;
			return CUPTI_SUCCESS;
		}
	*str = NULL;
	return CUPTI_ERROR_INVALID_PARAMETER;
}
