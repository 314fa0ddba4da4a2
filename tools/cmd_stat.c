// SPDX-License-Identifier: MIT
/* `kvtier stat [PID] [--watch [SEC] [--count N]] [--prometheus] [-o FILE]`:
 * the live counters a process running under kvtier publishes in
 * /dev/shm/kvtier.<pid> (include/kvtier/stats_format.h). Reads only:
 * refuses a segment that is not a regular file of the caller's with mode
 * 0600 (no group/other bits), never follows a symlink, never writes it.
 * -o FILE is written whole each time: a temporary file in FILE's
 * directory, then rename (node-exporter's textfile collector never reads
 * half a file). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "kvtier/api.h"
#include "kvtier/stats_format.h"
#include "kvtier/trace_format.h"
#include "kvtier/units.h"

#define MAX_PROCS 256

static void stat_usage(FILE *f)
{
	fprintf(f, "usage: kvtier stat [PID] [--watch [SEC]] [--count N] [--prometheus] [-o FILE]\n"
		   "  (no PID)          list this user's processes running under kvtier\n"
		   "  PID               the live counters of that process\n"
		   "  --watch [SEC]     refresh every SEC seconds (default 1) until Ctrl-C;\n"
		   "                    when standard output is not a terminal, 10 times\n"
		   "  --count N         stop after N refreshes\n"
		   "  --prometheus      Prometheus text format (all processes without PID),\n"
		   "                    for node-exporter's textfile collector\n"
		   "  -o FILE           write FILE instead of standard output, atomically\n"
		   "                    (a temporary file in its directory, then rename),\n"
		   "                    again at each refresh: e.g. --prometheus --watch 15\n"
		   "                    -o /var/lib/node_exporter/textfile/kvtier.prom\n");
}

/* ---- reading a segment ---- */

static int seg_path(int pid, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/%s%d", KVT_STATS_DIR, KVT_STATS_PREFIX, pid);
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* A consistent copy of pid's segment into *out; 0, or -1 with a message. */
static int read_segment(int pid, struct kvt_stats_seg *out, char *err, size_t errlen)
{
	char path[128];
	struct stat sb;
	seg_path(pid, path, sizeof path);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			snprintf(err, errlen, "no kvtier process %d (no %s; KVTIER_STATS=0, "
				 "not under kvtier, or exited)", pid, path);
		else
			snprintf(err, errlen, "%s: %s", path, errno == ELOOP ?
				 "is a symbolic link; refused" : strerror(errno));
		return -1;
	}
	int r = -1;
	const char *why = NULL;
	if (fstat(fd, &sb))
		why = strerror(errno);
	else if (!S_ISREG(sb.st_mode))
		why = "not a regular file; refused";
	else if (sb.st_uid != geteuid())
		why = "owned by another user; refused";
	else if (sb.st_mode & 077)
		why = "readable or writable by group or others (expected mode 0600); refused";
	else if ((size_t)sb.st_size < sizeof *out)
		why = "too small to be a kvtier stats segment";
	if (why) {
		snprintf(err, errlen, "%s: %s", path, why);
		close(fd);
		return -1;
	}
	const struct kvt_stats_seg *s = mmap(NULL, sizeof *s, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (s == MAP_FAILED) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (s->magic != KVT_STATS_MAGIC) {
		snprintf(err, errlen, "%s: not a kvtier stats segment", path);
	} else if (s->version != KVT_STATS_VERSION) {
		snprintf(err, errlen, "%s: segment version %u, this kvtier reads version %u",
			 path, s->version, KVT_STATS_VERSION);
	} else {
		for (int tries = 0; tries < 2000; tries++) {
			uint64_t s1 = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
			if (!(s1 & 1)) {
				memcpy(out, s, sizeof *out);
#if !defined(__SANITIZE_THREAD__)    /* TSan does not model fences */
				__atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
				if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == s1) {
					r = 0;
					break;
				}
			}
			if (tries > 100)
				usleep(1000);
		}
		if (r)
			snprintf(err, errlen, "%s: the writer never left the segment consistent", path);
		else if (out->pid != pid || out->size < sizeof *out) {
			snprintf(err, errlen, "%s: inconsistent header (pid %d)", path, out->pid);
			r = -1;
		}
	}
	munmap((void *)s, sizeof *s);
	return r;
}

static int alive(int pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

/* Every pid with a segment of this user's in the stats directory. */
static int list_pids(int *pids, int max)
{
	DIR *d = opendir(KVT_STATS_DIR);
	struct dirent *e;
	int n = 0;
	size_t plen = strlen(KVT_STATS_PREFIX);
	while (d && n < max && (e = readdir(d))) {
		char *end;
		if (strncmp(e->d_name, KVT_STATS_PREFIX, plen))
			continue;
		long pid = strtol(e->d_name + plen, &end, 10);
		if (*end || pid <= 0 || pid > INT_MAX || end == e->d_name + plen)
			continue;
		struct stat sb;
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s", KVT_STATS_DIR, e->d_name);
		if (lstat(path, &sb) || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid())
			continue;
		pids[n++] = (int)pid;
	}
	if (d)
		closedir(d);
	for (int i = 1; i < n; i++)          /* small: insertion sort */
		for (int j = i; j > 0 && pids[j - 1] > pids[j]; j--) {
			int t = pids[j];
			pids[j] = pids[j - 1];
			pids[j - 1] = t;
		}
	return n;
}

/* ---- text ---- */

static uint64_t live(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

static const char *sz(uint64_t v, char *buf)
{
	return kvt_format_size(v, buf, 32);
}

static double age_s(const struct kvt_stats_seg *s)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return now > s->update_unix_ns ? (double)(now - s->update_unix_ns) / 1e9 : 0;
}

static void print_kinds(const struct kvt_stats_seg *s, FILE *f)
{
	char a[32], b[32];
	fprintf(f, "  %-12s %10s %12s %10s %12s\n", "kind", "allocs", "bytes", "live", "live bytes");
	for (unsigned k = 1; k < KVT_STATS_KINDS; k++) {
		const struct kvt_stats_kind *c = &s->kind[k];
		if (!c->nr && !c->nr_free)
			continue;
		fprintf(f, "  %-12s %10llu %12s %10llu %12s\n", kvt_kind_name(k),
			(unsigned long long)c->nr, sz(c->bytes, a),
			(unsigned long long)live(c->nr, c->nr_free),
			sz(live(c->bytes, c->bytes_free), b));
	}
}

static void print_places(const struct kvt_stats_seg *s, FILE *f)
{
	char a[32], b[32];
	fprintf(f, "  %-12s %10s %12s %10s %12s\n", "placement", "placed", "bytes", "live",
		"live bytes");
	for (unsigned p = 0; p < KVT_STATS_PLACES; p++) {
		const struct kvt_stats_place *c = &s->place[p];
		if (!c->nr && !c->nr_live && p != KVT_PLACE_NATIVE)
			continue;
		/* live counts can dip below 0 for an instant (free before alloc seen) */
		uint64_t nl = c->nr_live >> 63 ? 0 : c->nr_live;
		uint64_t bl = c->bytes_live >> 63 ? 0 : c->bytes_live;
		fprintf(f, "  %-12s %10llu %12s %10llu %12s\n", kvt_placement_name(p),
			(unsigned long long)c->nr, p == KVT_PLACE_NATIVE ? "-" : sz(c->bytes, a),
			(unsigned long long)nl, sz(bl, b));
	}
}

/* One line per device the migration thread serves. */
static void print_devices(const struct kvt_stats_seg *s, FILE *f)
{
	char a[32], b[32], c[32], d[32], e[32], g[32];
	for (unsigned i = 0; i < s->nr_devices && i < KVT_STATS_DEVICES; i++) {
		const struct kvt_stats_dev *v = &s->dev[i];
		fprintf(f, "  device %d: ", v->device);
		if (v->epoch)
			fprintf(f, "HBM budget %s in force (epoch %llu), %s in HBM", sz(v->budget_bytes, a),
				(unsigned long long)v->epoch, sz(v->hbm_bytes, b));
		else
			fprintf(f, "no epoch yet");
		if (s->flags & KVT_STATS_F_CUPTI)
			fprintf(f, "; GPU faults %llu; link %s to HBM, %s to far; the driver on its "
				"own (any managed memory): %s in on faults, %s evicted\n",
				(unsigned long long)v->faults, sz(v->link_to_hbm_bytes, c),
				sz(v->link_to_far_bytes, d), sz(v->fault_in_bytes, e),
				sz(v->evicted_bytes, g));
		else
			fprintf(f, "; faults and link bytes not measured (cupti source off)\n");
	}
}

static void print_text(const struct kvt_stats_seg *s, FILE *f)
{
	char a[32], b[32];
	fprintf(f, "kvtier stat: pid %d (%.16s)%s, up %.1f s, updated %.1f s ago (%llu updates)\n",
		s->pid, s->comm, alive(s->pid) ? "" : " [exited: stale segment]",
		(double)s->uptime_ns / 1e9, age_s(s), (unsigned long long)s->nr_publish);
	fprintf(f, "  placement %s, migration %s, trace %s, far node %d\n",
		s->flags & KVT_STATS_F_PLACING ? "on" : "off (bad rules)",
		s->flags & KVT_STATS_F_MIGRATE ? "on" : "off",
		s->flags & KVT_STATS_F_TRACE ? "on" : "off", s->far_node);
	print_kinds(s, f);
	print_places(s, f);
	fprintf(f, "  tracked live: %llu ranges, %s\n", (unsigned long long)s->reg_nr_live,
		sz(s->reg_bytes_live, a));
	fprintf(f, "  fallbacks:");
	unsigned nfb = 0;
	for (unsigned i = 0; i < s->nr_fallbacks && i < KVT_STATS_FALLBACKS; i++)
		if (s->fallback[i]) {
			fprintf(f, " %.*s %llu", KVT_STATS_NAME, s->fallback_name[i],
				(unsigned long long)s->fallback[i]);
			nfb++;
		}
	fprintf(f, "%s; re-homed %llu\n", nfb ? "" : " none", (unsigned long long)s->rehomed);
	fprintf(f, "  migration: %llu epochs, promoted %s (%llu chunks), demoted %s (%llu chunks),"
		" prefetch failed %llu\n", (unsigned long long)s->epochs,
		sz(s->bytes_promoted, a), (unsigned long long)s->nr_promoted,
		sz(s->bytes_demoted, b), (unsigned long long)s->nr_demoted,
		(unsigned long long)s->prefetch_failed);
	fprintf(f, "  chunks: %llu in HBM, %llu far; HBM budget %s\n",
		(unsigned long long)s->chunks_hbm, (unsigned long long)s->chunks_far,
		s->hbm_budget_bytes ? sz(s->hbm_budget_bytes, a) :
		s->flags & KVT_STATS_F_MIGRATE ? "not yet derived (no migration epoch yet)" :
		"not derived (migration off)");
	print_devices(s, f);
	fprintf(f, "  evidence:");
	for (unsigned i = 0; i < s->nr_sources && i < KVT_STATS_SOURCES; i++)
		fprintf(f, " %.*s %llu", KVT_STATS_NAME, s->source_name[i],
			(unsigned long long)s->evidence[i]);
	fprintf(f, "\n  KV ranges by evidence class:");
	unsigned nev = 0;
	for (unsigned i = s->nr_evc; i-- > 0;)
		if (i < KVT_STATS_EVC && s->evc_ranges[i]) {
			fprintf(f, " %.*s %llu (%s)", KVT_STATS_NAME, s->evc_name[i],
				(unsigned long long)s->evc_ranges[i], sz(s->evc_bytes[i], a));
			nev++;
		}
	fprintf(f, "%s", nev ? "" : " none tracked");
	fprintf(f, "\n  trace: %llu events written, %llu dropped, %llu write errors\n",
		(unsigned long long)s->trace_events, (unsigned long long)s->trace_dropped,
		(unsigned long long)s->trace_write_errors);
	fprintf(f, "  python frames: %llu call sites", (unsigned long long)s->py_captured);
	if (s->py_version)
		fprintf(f, " (Python %u.%u)", s->py_version >> 8, s->py_version & 0xff);
	fprintf(f, "; fell back:");
	unsigned npy = 0;
	for (unsigned i = 0; i < s->nr_py_fallbacks && i < KVT_STATS_PY_FALLBACKS; i++)
		if (s->py_fallback[i]) {
			fprintf(f, " %.*s %llu", KVT_STATS_NAME, s->py_fallback_name[i],
				(unsigned long long)s->py_fallback[i]);
			npy++;
		}
	fprintf(f, "%s\n", npy ? "" : " none");
}

static int cmd_list(FILE *f)
{
	int pids[MAX_PROCS], n = list_pids(pids, MAX_PROCS);
	if (!n) {
		fprintf(f, "no process of this user runs under kvtier with live counters "
			   "(%s/%s<pid>)\n", KVT_STATS_DIR, KVT_STATS_PREFIX);
		return 0;
	}
	char a[32], b[32];
	fprintf(f, "%8s %-16s %9s %12s %12s %8s\n", "pid", "command", "up", "placed far",
		"live", "epochs");
	for (int i = 0; i < n; i++) {
		struct kvt_stats_seg s;
		char err[300];
		if (read_segment(pids[i], &s, err, sizeof err)) {
			fprintf(f, "%8d (%s)\n", pids[i], err);
			continue;
		}
		uint64_t far = 0;
		for (unsigned p = KVT_PLACE_MANAGED_FAR; p < KVT_STATS_PLACES; p++)
			far += s.place[p].bytes;
		fprintf(f, "%8d %-16.16s %8.1fs %12s %12s %8llu%s\n", s.pid, s.comm,
			(double)s.uptime_ns / 1e9, sz(far, a), sz(s.reg_bytes_live, b),
			(unsigned long long)s.epochs, alive(s.pid) ? "" : "  [exited: stale]");
	}
	return 0;
}

/* ---- Prometheus text exposition ---- */

enum metric_kind { M_COUNTER, M_GAUGE };

static void metric_head(FILE *f, const char *name, enum metric_kind k, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
		k == M_COUNTER ? "counter" : "gauge");
}

static void prom_scalar(FILE *f, const struct kvt_stats_seg *segs, int n, const char *name,
			enum metric_kind k, const char *help, size_t off)
{
	metric_head(f, name, k, help);
	for (const struct kvt_stats_seg *s = segs; s < segs + n; s++)
		fprintf(f, "%s{pid=\"%d\"} %llu\n", name, s->pid,
			(unsigned long long)*(const uint64_t *)((const char *)s + off));
}

static void prom_labelled(FILE *f, const struct kvt_stats_seg *segs, int n)
{
	static const struct { const char *name, *help; enum metric_kind k; int which; } m[] = {
		{ "kvtier_allocations_total", "Allocations that succeeded, by kind.", M_COUNTER, 0 },
		{ "kvtier_allocated_bytes_total", "Bytes allocated, by kind.", M_COUNTER, 1 },
		{ "kvtier_live_allocations", "Allocations not yet freed, by kind.", M_GAUGE, 2 },
		{ "kvtier_live_bytes", "Bytes not yet freed, by kind.", M_GAUGE, 3 },
	};
	for (unsigned j = 0; j < sizeof m / sizeof m[0]; j++) {
		metric_head(f, m[j].name, m[j].k, m[j].help);
		for (const struct kvt_stats_seg *s = segs; s < segs + n; s++)
			for (unsigned k = 1; k < KVT_STATS_KINDS && k < KVT_KIND__COUNT; k++) {
				const struct kvt_stats_kind *c = &s->kind[k];
				uint64_t v = m[j].which == 0 ? c->nr : m[j].which == 1 ? c->bytes :
					     m[j].which == 2 ? live(c->nr, c->nr_free) :
					     live(c->bytes, c->bytes_free);
				fprintf(f, "%s{pid=\"%d\",kind=\"%s\"} %llu\n", m[j].name, s->pid,
					kvt_kind_name(k), (unsigned long long)v);
			}
	}
	static const struct { const char *name, *help; enum metric_kind k; int which; } p[] = {
		{ "kvtier_placed_total", "Allocations kvtier placed, by placement.", M_COUNTER, 0 },
		{ "kvtier_placed_bytes_total", "Bytes kvtier placed, by placement.", M_COUNTER, 1 },
		{ "kvtier_placement_live_bytes", "Bytes live, by placement.", M_GAUGE, 2 },
	};
	for (unsigned j = 0; j < sizeof p / sizeof p[0]; j++) {
		metric_head(f, p[j].name, p[j].k, p[j].help);
		for (const struct kvt_stats_seg *s = segs; s < segs + n; s++)
			for (unsigned q = 0; q < KVT_STATS_PLACES && q < KVT_PLACE__COUNT; q++) {
				const struct kvt_stats_place *c = &s->place[q];
				uint64_t v = p[j].which == 0 ? c->nr : p[j].which == 1 ? c->bytes :
					     c->bytes_live >> 63 ? 0 : c->bytes_live;
				fprintf(f, "%s{pid=\"%d\",placement=\"%s\"} %llu\n", p[j].name, s->pid,
					kvt_placement_name(q), (unsigned long long)v);
			}
	}
	metric_head(f, "kvtier_fallbacks_total", M_COUNTER,
		    "Placements that fell back to native, by reason.");
	for (const struct kvt_stats_seg *s = segs; s < segs + n; s++)
		for (unsigned i = 0; i < s->nr_fallbacks && i < KVT_STATS_FALLBACKS; i++)
			fprintf(f, "kvtier_fallbacks_total{pid=\"%d\",reason=\"%.*s\"} %llu\n", s->pid,
				KVT_STATS_NAME, s->fallback_name[i], (unsigned long long)s->fallback[i]);
	metric_head(f, "kvtier_chunks", M_GAUGE, "Tracked 2 MiB chunks, by tier.");
	for (const struct kvt_stats_seg *s = segs; s < segs + n; s++) {
		fprintf(f, "kvtier_chunks{pid=\"%d\",tier=\"hbm\"} %llu\n", s->pid,
			(unsigned long long)s->chunks_hbm);
		fprintf(f, "kvtier_chunks{pid=\"%d\",tier=\"far\"} %llu\n", s->pid,
			(unsigned long long)s->chunks_far);
	}
	metric_head(f, "kvtier_evidence_events_total", M_COUNTER,
		    "Chunks credited by each evidence source.");
	for (const struct kvt_stats_seg *s = segs; s < segs + n; s++)
		for (unsigned i = 0; i < s->nr_sources && i < KVT_STATS_SOURCES; i++)
			fprintf(f, "kvtier_evidence_events_total{pid=\"%d\",source=\"%.*s\"} %llu\n",
				s->pid, KVT_STATS_NAME, s->source_name[i],
				(unsigned long long)s->evidence[i]);
	metric_head(f, "kvtier_kv_ranges", M_GAUGE,
		    "Tracked KV ranges, by the class of evidence settled for each.");
	for (const struct kvt_stats_seg *s = segs; s < segs + n; s++)
		for (unsigned i = 0; i < s->nr_evc && i < KVT_STATS_EVC; i++)
			fprintf(f, "kvtier_kv_ranges{pid=\"%d\",evidence=\"%.*s\"} %llu\n",
				s->pid, KVT_STATS_NAME, s->evc_name[i],
				(unsigned long long)s->evc_ranges[i]);
}

/* Per device, labelled device="N": the budget in force, HBM bytes, faults
 * and link bytes (the last two only where CUPTI measures them). */
static void prom_devices(FILE *f, const struct kvt_stats_seg *segs, int n)
{
	static const struct { const char *name, *help; enum metric_kind k; int which; } m[] = {
		{ "kvtier_device_hbm_budget_bytes",
		  "HBM budget in force for redirected memory (the last migration epoch's).",
		  M_GAUGE, 0 },
		{ "kvtier_device_hbm_bytes",
		  "Redirected bytes believed in HBM after the last migration epoch.", M_GAUGE, 1 },
		{ "kvtier_device_gpu_faults_total",
		  "GPU page faults on redirected memory (CUPTI).", M_COUNTER, 2 },
		{ "kvtier_device_link_bytes_total",
		  "Bytes migrated over the host-device link for redirected memory (CUPTI).",
		  M_COUNTER, 3 },
		{ "kvtier_device_fault_in_bytes_total",
		  "Bytes the driver brought into HBM on GPU faults, not by a prefetch (CUPTI).",
		  M_COUNTER, 4 },
		{ "kvtier_device_evicted_bytes_total",
		  "Bytes the driver evicted from HBM (CUPTI).", M_COUNTER, 5 },
	};
	for (unsigned j = 0; j < sizeof m / sizeof m[0]; j++) {
		metric_head(f, m[j].name, m[j].k, m[j].help);
		for (const struct kvt_stats_seg *s = segs; s < segs + n; s++)
			for (unsigned i = 0; i < s->nr_devices && i < KVT_STATS_DEVICES; i++) {
				const struct kvt_stats_dev *d = &s->dev[i];
				if (m[j].which >= 2 && !(s->flags & KVT_STATS_F_CUPTI))
					continue;
				if (m[j].which == 3) {
					fprintf(f, "%s{pid=\"%d\",device=\"%d\",direction=\"to_hbm\"} "
						"%llu\n", m[j].name, s->pid, d->device,
						(unsigned long long)d->link_to_hbm_bytes);
					fprintf(f, "%s{pid=\"%d\",device=\"%d\",direction=\"to_far\"} "
						"%llu\n", m[j].name, s->pid, d->device,
						(unsigned long long)d->link_to_far_bytes);
					continue;
				}
				uint64_t v = m[j].which == 0 ? d->budget_bytes :
					     m[j].which == 1 ? d->hbm_bytes :
					     m[j].which == 2 ? d->faults :
					     m[j].which == 4 ? d->fault_in_bytes : d->evicted_bytes;
				if (m[j].which < 2 && !d->epoch)
					continue;            /* not planned yet: no sample */
				fprintf(f, "%s{pid=\"%d\",device=\"%d\"} %llu\n", m[j].name, s->pid,
					d->device, (unsigned long long)v);
			}
	}
}

#define SEGOFF(f) offsetof(struct kvt_stats_seg, f)

static void print_prometheus(const struct kvt_stats_seg *segs, int n, FILE *f)
{
	static const struct { const char *name, *help; enum metric_kind k; size_t off; } sc[] = {
		{ "kvtier_migrate_epochs_total", "Migration epochs run.", M_COUNTER, SEGOFF(epochs) },
		{ "kvtier_promoted_bytes_total", "Bytes promoted to HBM.", M_COUNTER,
		  SEGOFF(bytes_promoted) },
		{ "kvtier_demoted_bytes_total", "Bytes demoted to the far tier.", M_COUNTER,
		  SEGOFF(bytes_demoted) },
		{ "kvtier_promoted_chunks_total", "Chunks promoted to HBM.", M_COUNTER,
		  SEGOFF(nr_promoted) },
		{ "kvtier_demoted_chunks_total", "Chunks demoted to the far tier.", M_COUNTER,
		  SEGOFF(nr_demoted) },
		{ "kvtier_prefetch_failed_total", "Migration prefetches that failed.", M_COUNTER,
		  SEGOFF(prefetch_failed) },
		{ "kvtier_rehomed_total", "Provisional allocations re-homed to the far node.",
		  M_COUNTER, SEGOFF(rehomed) },
		{ "kvtier_hbm_budget_bytes", "HBM budget for redirected memory in force "
		  "(all devices; 0: not derived yet).", M_GAUGE, SEGOFF(hbm_budget_bytes) },
		{ "kvtier_tracked_live_bytes", "Bytes in the address ranges kvtier tracks.", M_GAUGE,
		  SEGOFF(reg_bytes_live) },
		{ "kvtier_trace_events_total", "Trace events written.", M_COUNTER,
		  SEGOFF(trace_events) },
		{ "kvtier_trace_dropped_total", "Trace events lost.", M_COUNTER,
		  SEGOFF(trace_dropped) },
		{ "kvtier_python_callsites_total", "Call sites recorded with Python frames.",
		  M_COUNTER, SEGOFF(py_captured) },
		{ "kvtier_stats_updates_total", "Times the counters were published.", M_COUNTER,
		  SEGOFF(nr_publish) },
	};
	prom_labelled(f, segs, n);
	prom_devices(f, segs, n);
	for (unsigned j = 0; j < sizeof sc / sizeof sc[0]; j++)
		prom_scalar(f, segs, n, sc[j].name, sc[j].k, sc[j].help, sc[j].off);
	metric_head(f, "kvtier_start_time_seconds", M_GAUGE, "When kvtier started in the process.");
	for (const struct kvt_stats_seg *s = segs; s < segs + n; s++)
		fprintf(f, "kvtier_start_time_seconds{pid=\"%d\",comm=\"%.16s\"} %.3f\n", s->pid,
			s->comm, (double)s->start_unix_ns / 1e9);
	metric_head(f, "kvtier_last_update_seconds", M_GAUGE, "When the counters were published.");
	for (const struct kvt_stats_seg *s = segs; s < segs + n; s++)
		fprintf(f, "kvtier_last_update_seconds{pid=\"%d\"} %.3f\n", s->pid,
			(double)s->update_unix_ns / 1e9);
}

/* ---- the command ---- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

struct stat_args {
	int pid, prometheus, watch, count;
	double every_s;
	const char *out;                /* -o FILE, or NULL: stdout */
};

static int parse_args(int argc, char **argv, struct stat_args *a)
{
	for (int i = 1; i < argc; i++) {
		char *end;
		const char *val;
		if (!strcmp(argv[i], "--prometheus")) {
			a->prometheus = 1;
		} else if (!strncmp(argv[i], "--watch=", 8)) {     /* --watch=SEC */
			double s = strtod(argv[i] + 8, &end);
			if (*end || end == argv[i] + 8 || s < 0.05 || s > 3600)
				return -1;
			a->watch = 1;
			a->every_s = s;
		} else if (!strcmp(argv[i], "--watch")) {
			a->watch = 1;
			if (i + 1 < argc && argv[i + 1][0] != '-') {
				double v = strtod(argv[i + 1], &end);
				if (!*end && end != argv[i + 1]) {
					if (v < 0.05 || v > 3600)
						return -1;
					a->every_s = v;
					i++;
				}
			}
		} else if ((val = kvt_opt_value(argc, argv, &i, "-o"))) {
			if (!*val)
				return -1;
			a->out = val;
		} else if ((val = kvt_opt_value(argc, argv, &i, "--count"))) {
			long n = strtol(val, &end, 10);
			if (*end || end == val || n < 1 || n > 1000000)
				return -1;
			a->count = (int)n;
		} else if (argv[i][0] != '-' && !a->pid) {
			long v = strtol(argv[i], &end, 10);
			if (*end || v <= 0 || v > INT_MAX)
				return -1;
			a->pid = (int)v;
		} else {
			return -1;
		}
	}
	return 0;
}

/* One screen to f: the process, every process (prometheus), or the list. */
static int show_once(const struct stat_args *a, FILE *f)
{
	static struct kvt_stats_seg segs[MAX_PROCS];
	char err[300];
	if (a->pid) {
		if (read_segment(a->pid, &segs[0], err, sizeof err)) {
			fprintf(stderr, "kvtier stat: %s\n", err);
			return 1;
		}
		if (a->prometheus)
			print_prometheus(segs, 1, f);
		else
			print_text(&segs[0], f);
		return 0;
	}
	if (!a->prometheus)
		return cmd_list(f);
	int pids[MAX_PROCS], n = list_pids(pids, MAX_PROCS), got = 0;
	for (int i = 0; i < n; i++)
		if (!read_segment(pids[i], &segs[got], err, sizeof err) && alive(pids[i]))
			got++;
	print_prometheus(segs, got, f);
	return 0;
}

/* One screen into path, atomically: a temporary file next to it (a dot
 * file not ending in .prom, which the textfile collector skips), written,
 * flushed to disk, made 0644 less the umask, then renamed over path. A
 * reader sees the old file or the new one, never part of one. */
static int show_to_file(const struct stat_args *a, const char *path)
{
	char tmp[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int dl = slash ? (int)(slash - path) + 1 : 0;
	if (snprintf(tmp, sizeof tmp, "%.*s.%s.XXXXXX", dl, path, slash ? slash + 1 : path) >=
	    (int)sizeof tmp) {
		fprintf(stderr, "kvtier stat: -o %s: path too long\n", path);
		return 1;
	}
	int fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "kvtier stat: -o %s: cannot create a temporary file there: %s\n",
			path, strerror(errno));
		return 1;
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		fprintf(stderr, "kvtier stat: -o %s: %s\n", path, strerror(errno));
		return 1;
	}
	mode_t um = umask(0);
	umask(um);
	int r = show_once(a, f);
	int bad = fflush(f) || fsync(fileno(f)) || fchmod(fileno(f), 0644 & ~um);
	int e = errno;
	if (fclose(f))
		bad = 1, e = errno;
	if (!r && !bad && rename(tmp, path))
		bad = 1, e = errno;
	if (r || bad) {
		unlink(tmp);
		if (bad)
			fprintf(stderr, "kvtier stat: -o %s: write failed: %s\n", path, strerror(e));
		return 1;
	}
	return 0;
}

static int show(const struct stat_args *a)
{
	return a->out ? show_to_file(a, a->out) : show_once(a, stdout);
}

int kvt_cmd_stat(int argc, char **argv)
{
	struct stat_args a = { .every_s = 1.0 };
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		stat_usage(stdout);
		return 0;
	}
	if (parse_args(argc, argv, &a)) {
		stat_usage(stderr);
		return 2;
	}
	if (!a.watch)
		return show(&a);
	int tty = isatty(STDOUT_FILENO) && !a.out;
	int count = a.count ? a.count : tty || a.out ? 0 : 10;   /* -o: until stopped */
	signal(SIGINT, on_sigint);
	if (a.out)
		signal(SIGTERM, on_sigint);  /* a service's stop: the last write completes */
	int r = 0;
	for (int i = 0; !interrupted && (!count || i < count); i++) {
		if (i) {
			struct timespec ts = { (time_t)a.every_s,
					       (long)((a.every_s - (double)(time_t)a.every_s) * 1e9) };
			while (nanosleep(&ts, &ts) && !interrupted)
				;
			if (interrupted)
				break;
		}
		if (tty && !a.prometheus)
			fputs("\033[H\033[2J", stdout);
		else if (i && !a.out)
			fputs("\n", stdout);
		r = show(&a);
		fflush(stdout);
		if (r)
			break;
	}
	return r;
}
