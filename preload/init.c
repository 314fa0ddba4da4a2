// SPDX-License-Identifier: MIT
/* Process life of the preload library: the constructor reads the options
 * once, opens the trace and creates the registries, and installs the fork
 * handlers (fork.c); the destructor flushes. A hook that runs
 * before the constructor triggers the same init. Anything that fails here
 * leaves kvtier inert and the program running natively. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <stdio.h>
#include <unistd.h>

#include "kvtier/api.h"

#include "../base/kvt.h"
#include "fork.h"
#include "guard.h"
#include "../place/stats.h"
#include "record.h"
#include "../place/place.h"
#include "../profiler/decode.h"
#include "../profiler/evidence.h"
#include "../profiler/params.h"
#include "../cuda_shim/shim.h"
#include "../profiler/pyframes.h"
#include "../profiler/trace.h"
#include "../tier/migrator.h"

extern char **environ;

int kvt_state;

int kvt_inert(void)
{
	int s = __atomic_load_n(&kvt_state, __ATOMIC_ACQUIRE);
	return s == KVT_STATE_INERT || s == KVT_STATE_DOWN;
}

/* KVTIER_INHERIT=0: take libkvtier out of LD_PRELOAD so exec'd children
 * start without it (this process keeps it). */
static void drop_from_ld_preload(void)
{
	Dl_info di;
	const char *pre = getenv("LD_PRELOAD");
	if (!pre || !kvt_dl_addr((void *)&drop_from_ld_preload, &di) || !di.dli_fname)
		return;
	const char *me = strrchr(di.dli_fname, '/');
	me = me ? me + 1 : di.dli_fname;
	char out[4096];
	size_t j = 0;
	const char *p = pre;
	while (*p) {
		size_t n = strcspn(p, ": ");
		const char *base = memrchr(p, '/', n);
		base = base ? base + 1 : p;
		size_t bn = n - (size_t)(base - p);
		int mine = bn == strlen(me) && !strncmp(base, me, bn);
		if (n && !mine && j + n + 2 < sizeof out) {
			if (j)
				out[j++] = ':';
			memcpy(out + j, p, n);
			j += n;
		}
		p += n;
		while (*p == ':' || *p == ' ')
			p++;
	}
	out[j] = 0;
	if (j)
		setenv("LD_PRELOAD", out, 1);
	else
		unsetenv("LD_PRELOAD");
}

/* The run this process's traces belong to: KVTIER_RUN_ID, or one made here
 * and exported, so that the images this process execs name the same run
 * (a forked child keeps it in memory). */
static void set_run_id(void)
{
	if (!kvt_opt.run_id[0]) {
		kvt_trace_run_id(kvt_opt.run_id, sizeof kvt_opt.run_id,
				 kvt_realtime_ns() / 1000000000ull, (int)getpid());
		setenv("KVTIER_RUN_ID", kvt_opt.run_id, 1);
	}
	kvt_trace_set_run(kvt_opt.run_id);
}

static void open_trace(void)
{
	if (!kvt_opt.trace[0])
		return;
	set_run_id();
	kvt_trace_compress(!strcmp(kvt_opt.trace_compress, "zstd"), kvt_opt.trace_zstd_lib);
	int r = kvt_trace_open(kvt_opt.trace, kvt_opt.trace_buffer, kvt_opt.stack_depth);
	if (r) {
		kvt_warn("KVTIER_TRACE='%s': cannot create the trace (%s); tracing is off",
			 kvt_opt.trace, strerror(-r));
		return;
	}
	kvt_trace_info("kvtier.version", KVT_VERSION);
	kvt_trace_info("kvtier.trace_format", kvt_trace_compressed() ? "2" : "1");
	kvt_trace_info("trace.compress", kvt_trace_compressed() ? "zstd" : "none");
	kvt_trace_flush_start((unsigned)kvt_opt.trace_flush_ms);
	kvt_trace_signals_install();
}

/* All the migration loop knows of its host (tier/migrator.h). */
static const struct kvt_tier_host tier_host = {
	.hbm_budget = kvt_place_hbm_budget,
	.kv_start_free = kvt_place_kv_start_free,
	.epoch_done = kvt_stats_publish_epoch,
};

static void init_once(void)
{
	if (getauxval(AT_SECURE)) {     /* set-user-ID etc.: read nothing */
		__atomic_store_n(&kvt_state, KVT_STATE_INERT, __ATOMIC_RELEASE);
		return;
	}
	kvt_options_load(&kvt_opt, environ);
	if (kvt_opt.verbose)
		kvt_options_print(&kvt_opt, STDERR_FILENO);
	if (!kvt_opt.inherit)
		drop_from_ld_preload();
	if (kvt_opt.disable) {
		__atomic_store_n(&kvt_state, KVT_STATE_INERT, __ATOMIC_RELEASE);
		return;
	}
	kvt_mem_reg = kvt_reg_create(16);
	kvt_vmm_reg = kvt_reg_create(12);
	kvt_host_reg = kvt_reg_create(10);
	if (!kvt_mem_reg || !kvt_vmm_reg || !kvt_host_reg) {
		kvt_warn("cannot map the registry; kvtier is inert, the program runs natively");
		__atomic_store_n(&kvt_state, KVT_STATE_INERT, __ATOMIC_RELEASE);
		return;
	}
	kvt_trace_stack_cache_setup();     /* before any call site is asked for */
	open_trace();
	kvt_prof_set_device_test(kvt_rec_device_memory);   /* the launch scan skips it */
	kvt_prof_set_param_info(kvt_cuda_param_size);      /* ... and reads arguments by layout */
	kvt_decode_set_name_fn(kvt_cuda_func_name);        /* server decoders know kernels by name */
	kvt_place_init(kvt_mem_reg);
	kvt_py_init();
	kvt_migrator_start(&tier_host);
	kvt_stats_init(kvt_mem_reg, kvt_host_reg);
	kvt_fork_install();
	__atomic_store_n(&kvt_state, KVT_STATE_READY, __ATOMIC_RELEASE);
}

/* First caller initializes; others seeing init in progress pass through
 * (never wait: a hook must not block on kvtier's own startup). */
int kvt_ready(void)
{
	int s = __atomic_load_n(&kvt_state, __ATOMIC_ACQUIRE);
	if (KVT_LIKELY(s == KVT_STATE_READY))
		return 1;
	if (s != KVT_STATE_NEW)
		return 0;
	/* Before kvtier's constructor (a sanitizer runtime's or another
	 * library's start-up): pass through; the constructor initializes. */
	if (!__atomic_load_n(&kvt_started, __ATOMIC_ACQUIRE) || !environ)
		return 0;
	int expect = KVT_STATE_NEW;
	if (!__atomic_compare_exchange_n(&kvt_state, &expect, KVT_STATE_INIT, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 0;
	kvt_tls.depth++;               /* init's own mmaps pass through */
	init_once();
	kvt_tls.depth--;
	return __atomic_load_n(&kvt_state, __ATOMIC_ACQUIRE) == KVT_STATE_READY;
}

/* 102: after base/options.c's constructor (101) has set kvt_opt's defaults. */
__attribute__((constructor(102))) static void kvt_ctor(void)
{
	__atomic_store_n(&kvt_started, 1, __ATOMIC_RELEASE);
	kvt_ready();
}

struct live_count {
	uint64_t nr[KVT_KIND__COUNT], bytes[KVT_KIND__COUNT];
};

static int count_live(const struct kvt_alloc *a, void *arg)
{
	struct live_count *c = arg;
	if (a->kind < KVT_KIND__COUNT) {
		c->nr[a->kind]++;
		c->bytes[a->kind] += a->size;
	}
	return 0;
}

/* What is still registered at exit, per kind: "registry.live.<kind>=N B". */
static void trace_live_records(void)
{
	static struct live_count c;
	memset(&c, 0, sizeof c);
	kvt_reg_for_each(kvt_mem_reg, count_live, &c);
	kvt_reg_for_each(kvt_host_reg, count_live, &c);
	kvt_reg_for_each(kvt_vmm_reg, count_live, &c);
	for (unsigned k = 1; k < KVT_KIND__COUNT; k++) {
		char key[64], val[64];
		snprintf(key, sizeof key, "registry.live.%s", kvt_kind_name(k));
		snprintf(val, sizeof val, "%llu %llu", (unsigned long long)c.nr[k],
			 (unsigned long long)c.bytes[k]);
		kvt_trace_info(key, val);
	}
}

__attribute__((destructor(101))) static void kvt_dtor(void)
{
	if (__atomic_load_n(&kvt_state, __ATOMIC_ACQUIRE) != KVT_STATE_READY)
		return;
	kvt_tls.depth++;
	kvt_migrator_stop();
	kvt_stats_close();
	if (kvt_trace_active()) {
		trace_live_records();
		kvt_place_trace_counters();
		kvt_migrator_trace_counters();
		kvt_py_trace_counters();
	}
	kvt_trace_close();
	kvt_tls.depth--;
}
