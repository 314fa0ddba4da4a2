/* SPDX-License-Identifier: MIT */
/* fakecuda streams and events — handles only. The SIMULATED device executes
 * every stream operation at submission, in submission order, so stream order
 * holds trivially and synchronisation returns at once; events carry the
 * virtual clock so cuEventElapsedTime reports simulated time. A stream
 * remembers the ordinal of the context it was created in: its work runs
 * there. Between BeginCapture and EndCapture a stream owns the graph its
 * kernels, copies and memsets are recorded into (fc_graph.c) instead of
 * running; capture state is read and changed under the global lock. */
#include "fc_internal.h"

#include <stdlib.h>

#define FC_STREAM_MAGIC 0x66637374u   /* "fcst" */
#define FC_EVENT_MAGIC  0x66636576u   /* "fcev" */

struct fc_stream {
	uint32_t magic;
	unsigned flags;
	int priority;
	CUstreamCaptureStatus capture;
	int dev;              /* ordinal of the context current at creation */
	struct fc_graph *graph;   /* being captured into, while capture != NONE */
	uint64_t end_ps;      /* FAKECUDA_VTIME: when its last operation ends */
};

struct fc_event {
	uint32_t magic;
	unsigned flags;
	bool recorded;
	uint64_t t_ns;
	uint64_t t_ps;        /* FAKECUDA_VTIME: when the work before it ends */
};

bool fc_valid_stream(CUstream s)
{
	return !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD ||
	       ((struct fc_stream *)s)->magic == FC_STREAM_MAGIC;
}

static struct fc_stream *fc_real_stream(CUstream s)
{
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return NULL;
	return (struct fc_stream *)s;
}

/* The NULL, legacy and per-thread streams belong to whatever context is
 * current on the submitting thread, as on a real driver. */
int fc_stream_dev(CUstream s)
{
	struct fc_stream *st = fc_real_stream(s);
	return st && st->magic == FC_STREAM_MAGIC ? st->dev : fc_current_dev();
}

/* ---- streams ---- */

/* FAKECUDA_VTIME: the legacy (NULL) stream of each ordinal; the
 * per-thread default stream is modelled as the legacy one. */
static uint64_t fc_legacy_stream_end[FC_MAX_DEVICES];

bool fc_stream_is_legacy(CUstream s)
{
	struct fc_stream *st = fc_real_stream(s);
	return !st || st->magic != FC_STREAM_MAGIC;
}

bool fc_stream_is_blocking(CUstream s)
{
	struct fc_stream *st = fc_real_stream(s);
	return !st || st->magic != FC_STREAM_MAGIC || !(st->flags & CU_STREAM_NON_BLOCKING);
}

uint64_t *fc_stream_end(CUstream s, int dev)
{
	struct fc_stream *st = fc_real_stream(s);
	if (st && st->magic == FC_STREAM_MAGIC)
		return &st->end_ps;
	return &fc_legacy_stream_end[dev >= 0 && dev < FC_MAX_DEVICES ? dev : 0];
}

static CUresult fc_stream_new(CUstream *ph, unsigned int flags, int priority)
{
	if (!ph || flags > CU_STREAM_NON_BLOCKING)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_stream *s = calloc(1, sizeof *s);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (priority > 0)
		priority = 0;
	if (priority < -5)
		priority = -5;
	*s = (struct fc_stream){ FC_STREAM_MAGIC, flags, priority,
				 CU_STREAM_CAPTURE_STATUS_NONE, fc_current_dev(), NULL, 0 };
	*ph = (CUstream)s;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority)
{
	FC_GUARD("cuStreamCreateWithPriority", FC_CTX);
	return fc_stream_new(ph, flags, priority);
}

CUresult CUDAAPI cuStreamCreate(CUstream *ph, unsigned int flags)
{
	FC_GUARD("cuStreamCreate", FC_CTX);
	return fc_stream_new(ph, flags, 0);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream h)
{
	FC_GUARD("cuStreamDestroy_v2", 0);
	struct fc_stream *s = fc_real_stream(h);
	if (!s || s->magic != FC_STREAM_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	fc_lock();
	fc_graph_drop(s->graph);   /* a capture never ended: its graph goes too */
	s->magic = 0;
	fc_unlock();
	free(s);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream h) { return cuStreamDestroy_v2(h); }

CUresult CUDAAPI cuStreamGetPriority(CUstream h, int *priority)
{
	FC_GUARD("cuStreamGetPriority", 0);
	if (!priority || !fc_valid_stream(h))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_stream *s = fc_real_stream(h);
	*priority = s ? s->priority : 0;
	return CUDA_SUCCESS;
}

static CUresult fc_stream_sync(const char *name, CUstream h)
{
	FC_GUARD(name, FC_CTX);
	return fc_valid_stream(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The caller waits for the stream's work to end (virtual time), then
 * gives its turn away; paced, for the real clock too. */
static CUresult fc_stream_wait(const char *name, CUstream h)
{
	CUresult r = fc_stream_sync(name, h);
	if (r != CUDA_SUCCESS)
		return r;
	if (fc_vt_on()) {
		fc_lock();
		int dev = fc_stream_dev(h);
		uint64_t end = *fc_stream_end(h, dev);
		if (fc_stream_is_legacy(h))   /* the legacy stream waits for the blocking ones */
			end = fc_dev_idle_ps(dev) > end ? fc_dev_idle_ps(dev) : end;
		fc_host_wait_until(end);
		fc_unlock();
		fc_vt_sync_point();
	}
	fc_pace_wait();
	return r;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream h)
{
	return fc_stream_wait("cuStreamSynchronize", h);
}

CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream h)
{
	return fc_stream_wait("cuStreamSynchronize_ptsz", h);
}

/* NOT_READY while the stream's work ends after the caller's time. */
static CUresult fc_stream_query(const char *name, CUstream h)
{
	CUresult r = fc_stream_sync(name, h);
	if (r != CUDA_SUCCESS || !fc_vt_on())
		return r;
	fc_lock();
	if (*fc_stream_end(h, fc_stream_dev(h)) > fc_stats.clock_ps)
		r = CUDA_ERROR_NOT_READY;
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuStreamQuery(CUstream h)
{
	return fc_stream_query("cuStreamQuery", h);
}

CUresult CUDAAPI cuStreamQuery_ptsz(CUstream h)
{
	return fc_stream_query("cuStreamQuery_ptsz", h);
}

/* ---- capture ----
 * Only created streams capture (the NULL, legacy and per-thread streams
 * answer STREAM_CAPTURE_UNSUPPORTED). The capture mode is accepted and not
 * modelled: nothing checks what other threads do meanwhile. */

static struct fc_stream *fc_created_stream(CUstream h)
{
	struct fc_stream *s = fc_real_stream(h);
	return s && s->magic == FC_STREAM_MAGIC ? s : NULL;
}

struct fc_graph *fc_stream_capture(CUstream h)
{
	struct fc_stream *s = fc_created_stream(h);
	return s && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE ? s->graph : NULL;
}

void fc_stream_capture_invalidate(CUstream h)
{
	struct fc_stream *s = fc_created_stream(h);
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE)
		s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

static CUresult fc_is_capturing(const char *name, CUstream h, CUstreamCaptureStatus *st)
{
	FC_GUARD(name, 0);
	if (!st || !fc_valid_stream(h))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_stream *s = fc_real_stream(h);
	fc_lock();
	*st = s ? s->capture : CU_STREAM_CAPTURE_STATUS_NONE;
	fc_unlock();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st)
{
	return fc_is_capturing("cuStreamIsCapturing", h, st);
}

CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st)
{
	return fc_is_capturing("cuStreamIsCapturing_ptsz", h, st);
}

static CUresult fc_begin_capture(const char *name, CUstream h)
{
	FC_GUARD(name, FC_CTX);
	struct fc_stream *s = fc_created_stream(h);
	if (!s)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	CUresult r = CUDA_SUCCESS;
	fc_lock();
	if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
		r = CUDA_ERROR_ILLEGAL_STATE;
	else if (!(s->graph = fc_graph_new()))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	else
		s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream h)
{
	return fc_begin_capture("cuStreamBeginCapture", h);
}

CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream h)
{
	return fc_begin_capture("cuStreamBeginCapture_ptsz", h);
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode)
{
	(void)mode;
	return fc_begin_capture("cuStreamBeginCapture_v2", h);
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode)
{
	(void)mode;
	return fc_begin_capture("cuStreamBeginCapture_v2_ptsz", h);
}

/* The capture's graph becomes the caller's; an invalidated capture's graph
 * is dropped and NULL returned with STREAM_CAPTURE_INVALIDATED. Either way
 * the stream leaves capture mode. */
static CUresult fc_end_capture(const char *name, CUstream h, CUgraph *graph)
{
	FC_GUARD(name, FC_CTX);
	struct fc_stream *s = fc_created_stream(h);
	if (!graph || !s)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = CUDA_SUCCESS;
	fc_lock();
	if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) {
		r = CUDA_ERROR_ILLEGAL_STATE;
	} else if (s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
		fc_graph_drop(s->graph);
		*graph = NULL;
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	} else {
		*graph = fc_graph_publish(s->graph);
	}
	if (r != CUDA_ERROR_ILLEGAL_STATE) {
		s->graph = NULL;
		s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
	}
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream h, CUgraph *graph)
{
	return fc_end_capture("cuStreamEndCapture", h, graph);
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream h, CUgraph *graph)
{
	return fc_end_capture("cuStreamEndCapture_ptsz", h, graph);
}

/* ---- events ---- */

static struct fc_event *fc_event(CUevent e)
{
	struct fc_event *ev = (struct fc_event *)e;
	return ev && ev->magic == FC_EVENT_MAGIC ? ev : NULL;
}

CUresult CUDAAPI cuEventCreate(CUevent *ph, unsigned int flags)
{
	FC_GUARD("cuEventCreate", FC_CTX);
	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_event *ev = calloc(1, sizeof *ev);
	if (!ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ev = (struct fc_event){ FC_EVENT_MAGIC, flags, false, 0, 0 };
	*ph = (CUevent)ev;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent e)
{
	FC_GUARD("cuEventDestroy_v2", 0);
	struct fc_event *ev = fc_event(e);
	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	ev->magic = 0;
	free(ev);
	return CUDA_SUCCESS;
}

static CUresult fc_event_record(const char *name, CUevent e, CUstream h)
{
	FC_GUARD(name, FC_CTX);
	struct fc_event *ev = fc_event(e);
	if (!ev || !fc_valid_stream(h))
		return CUDA_ERROR_INVALID_HANDLE;
	fc_lock();
	ev->t_ps = fc_stats.clock_ps;
	if (fc_vt_on()) {   /* it completes when the stream's work before it does */
		uint64_t end = *fc_stream_end(h, fc_stream_dev(h));
		if (end > ev->t_ps)
			ev->t_ps = end;
	}
	ev->t_ns = ev->t_ps / 1000;
	ev->recorded = true;
	fc_unlock();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream h)
{
	return fc_event_record("cuEventRecord", e, h);
}

CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream h)
{
	return fc_event_record("cuEventRecord_ptsz", e, h);
}

CUresult CUDAAPI cuEventSynchronize(CUevent e)
{
	FC_GUARD("cuEventSynchronize", 0);
	struct fc_event *ev = fc_event(e);
	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	if (fc_vt_on()) {
		fc_lock();
		if (ev->recorded)
			fc_host_wait_until(ev->t_ps);
		fc_unlock();
		fc_vt_sync_point();
	}
	fc_pace_wait();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent e)
{
	FC_GUARD("cuEventQuery", 0);
	struct fc_event *ev = fc_event(e);
	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	CUresult r = CUDA_SUCCESS;
	if (fc_vt_on()) {
		fc_lock();
		if (ev->recorded && ev->t_ps > fc_stats.clock_ps)
			r = CUDA_ERROR_NOT_READY;
		fc_unlock();
	}
	return r;
}

static CUresult fc_elapsed(float *ms, CUevent start, CUevent end)
{
	struct fc_event *a = fc_event(start), *b = fc_event(end);
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	if (!a || !b)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!a->recorded || !b->recorded)
		return CUDA_ERROR_INVALID_HANDLE;
	*ms = (float)((double)(int64_t)(b->t_ns - a->t_ns) / 1e6);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	FC_GUARD("cuEventElapsedTime", 0);
	return fc_elapsed(ms, start, end);
}

CUresult CUDAAPI cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end)
{
	FC_GUARD("cuEventElapsedTime_v2", 0);
	return fc_elapsed(ms, start, end);
}

static CUresult fc_wait_event(const char *name, CUstream h, CUevent e)
{
	FC_GUARD(name, FC_CTX);
	struct fc_event *ev = fc_event(e);
	if (!ev || !fc_valid_stream(h))
		return CUDA_ERROR_INVALID_HANDLE;
	if (fc_vt_on() && ev->recorded) {   /* the stream's later work starts after it */
		fc_lock();
		uint64_t *end = fc_stream_end(h, fc_stream_dev(h));
		if (ev->t_ps > *end)
			*end = ev->t_ps;
		fc_unlock();
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags)
{
	(void)flags;
	return fc_wait_event("cuStreamWaitEvent", h, e);
}

CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags)
{
	(void)flags;
	return fc_wait_event("cuStreamWaitEvent_ptsz", h, e);
}
