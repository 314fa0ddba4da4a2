// SPDX-License-Identifier: MIT
/* Topology discovery from sysfs/proc under a ROOT prefix, and the pure
 * choice of the far tier. Runs once at init or in `kvtier topo`: reads
 * files with kvt_sys_open/kvt_sys_read into stack buffers (no malloc, no
 * stdio, no logging), fills fixed arrays, and reaches CXL only through the
 * ops table. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/kvt.h"
#include "topo.h"

#define NODE_DIR "/sys/devices/system/node"

/* ---- small readers ------------------------------------------------------- */

/* root + rel into buf; 0 or -ENAMETOOLONG. */
static int topo_path(const struct kvt_topo *t, const char *rel, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s%s", t->root, rel);
	return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}

/* Read at most cap-1 bytes of root+rel, NUL-terminated. Length or -errno. */
static ssize_t topo_read(const struct kvt_topo *t, const char *rel, char *buf, size_t cap)
{
	char path[PATH_MAX];
	int rc = topo_path(t, rel, path, sizeof path);
	if (rc)
		return rc;
	int fd = kvt_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	size_t n = 0;
	while (n < cap - 1) {
		ssize_t r = kvt_sys_read(fd, buf + n, cap - 1 - n);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	kvt_sys_close(fd);
	buf[n] = 0;
	return (ssize_t)n;
}

static int topo_exists(const struct kvt_topo *t, const char *rel)
{
	char path[PATH_MAX];
	return !topo_path(t, rel, path, sizeof path) && kvt_sys_access(path, F_OK) == 0;
}

/* Unsigned number from a one-value file (base 0: "0x" allowed, or 16). */
static int topo_read_u64(const struct kvt_topo *t, const char *rel, int base, uint64_t *v)
{
	char buf[64], *end;
	ssize_t n = topo_read(t, rel, buf, sizeof buf);
	if (n <= 0)
		return n < 0 ? (int)n : -ENODATA;
	errno = 0;
	unsigned long long x = strtoull(buf, &end, base);
	if (errno || end == buf)
		return -EINVAL;
	*v = x;
	return 0;
}

/* Kernel list format ("0-3,8,10-11\n"). Bits below 64 go to *mask, every
 * element is counted in *count. 0 or -EINVAL. */
static int topo_parse_list(const char *s, uint64_t *mask, unsigned *count)
{
	*mask = 0;
	*count = 0;
	while (*s && *s != '\n') {
		char *end;
		unsigned long lo = strtoul(s, &end, 10), hi = lo;
		if (end == s)
			return -EINVAL;
		if (*end == '-') {
			s = end + 1;
			hi = strtoul(s, &end, 10);
			if (end == s || hi < lo)
				return -EINVAL;
		}
		for (unsigned long i = lo; i <= hi; i++)
			if (i < 64)
				*mask |= 1ull << i;
		*count += (unsigned)(hi - lo + 1);
		s = end;
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -EINVAL;
	}
	return 0;
}

/* ---- nodes ---------------------------------------------------------------- */

/* "Node 0 MemTotal:  19883804 kB" lines of nodeN/meminfo. */
static void topo_read_meminfo(struct kvt_topo *t, int n)
{
	char rel[128], buf[8192];
	snprintf(rel, sizeof rel, NODE_DIR "/node%d/meminfo", n);
	if (topo_read(t, rel, buf, sizeof buf) <= 0)
		return;
	for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		char key[32];
		unsigned long long kb;
		int id;
		if (sscanf(line, "Node %d %31[^:]: %llu", &id, key, &kb) != 3)
			continue;
		if (!strcmp(key, "MemTotal"))
			t->node[n].mem_total_bytes = kb << 10;
		else if (!strcmp(key, "MemFree"))
			t->node[n].mem_free_bytes = kb << 10;
	}
}

static void topo_read_distance(struct kvt_topo *t, int n)
{
	char rel[128], buf[1024];
	snprintf(rel, sizeof rel, NODE_DIR "/node%d/distance", n);
	if (topo_read(t, rel, buf, sizeof buf) <= 0)
		return;
	/* One number per online node, in node order. */
	char *s = buf;
	for (int to = 0; to < KVT_TOPO_MAX_NODES; to++) {
		if (!(t->online_mask >> to & 1))
			continue;
		char *end;
		unsigned long d = strtoul(s, &end, 10);
		if (end == s)
			break;
		t->distance[n][to] = d > 255 ? 255 : (uint8_t)d;
		s = end;
	}
}

/* HMAT: nodeN/access0/initiators/{read,write}_{latency,bandwidth}. */
static void topo_read_hmat(struct kvt_topo *t, int n)
{
	static const struct { const char *file; size_t off; } f[] = {
		{ "read_latency", offsetof(struct kvt_topo_node, read_latency_ns) },
		{ "write_latency", offsetof(struct kvt_topo_node, write_latency_ns) },
		{ "read_bandwidth", offsetof(struct kvt_topo_node, read_bandwidth_mbps) },
		{ "write_bandwidth", offsetof(struct kvt_topo_node, write_bandwidth_mbps) },
	};
	struct kvt_topo_node *nd = &t->node[n];
	char rel[160];
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		uint64_t v;
		snprintf(rel, sizeof rel, NODE_DIR "/node%d/access0/initiators/%s", n, f[i].file);
		if (topo_read_u64(t, rel, 10, &v))
			continue;
		*(uint32_t *)((char *)nd + f[i].off) = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		nd->hmat = 1;
	}
	for (int i = 0; nd->hmat && i < KVT_TOPO_MAX_NODES; i++) {
		snprintf(rel, sizeof rel, NODE_DIR "/node%d/access0/initiators/node%d", n, i);
		if ((t->online_mask >> i & 1) && topo_exists(t, rel))
			nd->initiator_mask |= 1ull << i;
	}
}

static void topo_read_node(struct kvt_topo *t, int n)
{
	char rel[128], buf[4096];
	uint64_t mask;
	unsigned count;
	snprintf(rel, sizeof rel, NODE_DIR "/node%d/cpulist", n);
	if (topo_read(t, rel, buf, sizeof buf) >= 0 && !topo_parse_list(buf, &mask, &count))
		t->node[n].nr_cpus = (int)count;
	topo_read_meminfo(t, n);
	topo_read_distance(t, n);
	topo_read_hmat(t, n);
}

/* ---- ZONE_MOVABLE from /proc/zoneinfo (streamed: it is long) ----------------- */

struct zone_scan {
	int node;                    /* current "Node N, zone X" */
	int movable;                 /* current zone is Movable */
	uint64_t other[KVT_TOPO_MAX_NODES], mov[KVT_TOPO_MAX_NODES]; /* managed pages */
	uint64_t seen;               /* nodes that had a zone header */
};

static void zone_line(struct zone_scan *z, const char *line)
{
	char zone[32];
	unsigned long long v;
	int n;
	if (sscanf(line, "Node %d, zone %31s", &n, zone) == 2) {
		z->node = (n >= 0 && n < KVT_TOPO_MAX_NODES) ? n : -1;
		z->movable = !strcmp(zone, "Movable");
		/* ZONE_DEVICE holds no ordinary pages: it counts as neither. */
		if (!strcmp(zone, "Device"))
			z->node = -1;
		if (z->node >= 0)
			z->seen |= 1ull << n;
		return;
	}
	if (z->node < 0 || sscanf(line, " managed %llu", &v) != 1)
		return;
	if (z->movable)
		z->mov[z->node] += v;
	else
		z->other[z->node] += v;
}

static void topo_read_zoneinfo(struct kvt_topo *t)
{
	char path[PATH_MAX], buf[4096];
	if (topo_path(t, "/proc/zoneinfo", path, sizeof path))
		return;
	int fd = kvt_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	struct zone_scan z = { .node = -1 };
	size_t have = 0;
	for (;;) {
		ssize_t r = kvt_sys_read(fd, buf + have, sizeof buf - 1 - have);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n'))) {
			*nl = 0;
			zone_line(&z, line);
			line = nl + 1;
		}
		have = (size_t)(buf + have - line);
		if (have == sizeof buf - 1)
			have = 0;                /* an absurd line: drop it */
		memmove(buf, line, have);
	}
	kvt_sys_close(fd);
	long page = (long)kvt_page_bytes();
	for (int n = 0; n < KVT_TOPO_MAX_NODES; n++) {
		struct kvt_topo_node *nd = &t->node[n];
		if (!(z.seen >> n & 1))
			continue;
		nd->movable_bytes = z.mov[n] * (uint64_t)(page > 0 ? page : 4096);
		nd->movable_only = z.mov[n] > 0 && z.other[n] == 0;
	}
}

/* ---- CXL regions and the node each backs ----------------------------------- */

/* The region's memory is onlined as node X when a memory block inside its
 * physical range is linked under nodeX. Bounded: at most 1<<16 probes. */
static int topo_region_node(const struct kvt_topo *t, const struct kvt_topo_region *r)
{
	uint64_t bs = t->memory_block_bytes;
	if (!bs || r->resource == UINT64_MAX || !r->size_bytes)
		return -1;
	uint64_t first = r->resource / bs, last = (r->resource + r->size_bytes - 1) / bs;
	unsigned probes = 0;
	for (int n = 0; n < KVT_TOPO_MAX_NODES; n++) {
		if (!(t->online_mask >> n & 1) || !t->node[n].mem_total_bytes)
			continue;
		for (uint64_t b = first; b <= last && probes < (1u << 16); b++, probes++) {
			char rel[160];
			snprintf(rel, sizeof rel, NODE_DIR "/node%d/memory%llu", n,
				 (unsigned long long)b);
			if (topo_exists(t, rel))
				return n;
		}
	}
	return -1;
}

static void topo_read_cxl(struct kvt_topo *t, const struct kvt_topo_cxl_ops *ops)
{
	void *ctx = NULL;
	t->cxl_status = -ENOSYS;
	if (!ops || !ops->open)
		return;
	t->cxl_source = ops->name;
	int rc = ops->open(t->root[0] ? t->root : "/", &ctx);
	if (rc) {
		t->cxl_status = rc;
		return;
	}
	t->cxl_status = 0;
	if (ops->list_memdevs) {
		rc = ops->list_memdevs(ctx, t->memdev, KVT_TOPO_MAX_CXL);
		t->nr_memdevs = rc < 0 ? 0 : rc > KVT_TOPO_MAX_CXL ? KVT_TOPO_MAX_CXL : rc;
		if (rc < 0)
			t->cxl_status = rc;
	}
	if (ops->list_regions) {
		for (int i = 0; i < KVT_TOPO_MAX_CXL; i++)
			t->region[i].node = -1;
		rc = ops->list_regions(ctx, t->region, KVT_TOPO_MAX_CXL, t->memdev, t->nr_memdevs);
		t->nr_regions = rc < 0 ? 0 : rc > KVT_TOPO_MAX_CXL ? KVT_TOPO_MAX_CXL : rc;
		if (rc < 0)
			t->cxl_status = rc;
	}
	if (ops->close)
		ops->close(ctx);
	for (int i = 0; i < t->nr_regions; i++) {
		struct kvt_topo_region *r = &t->region[i];
		if (r->node < 0)
			r->node = topo_region_node(t, r);
		if (r->node >= 0 && r->node < KVT_TOPO_MAX_NODES)
			t->node[r->node].cxl = 1;
	}
}

/* ---- discovery ------------------------------------------------------------ */

int kvt_topo_discover(struct kvt_topo *t, const char *root,
		      const struct kvt_topo_cxl_ops *cxl)
{
	char buf[4096];
	uint64_t mask;
	unsigned count;

	memset(t, 0, sizeof *t);
	for (int i = 0; i < KVT_TOPO_MAX_NODES; i++)
		t->node[i].movable_only = -1;
	if (!root || !*root)
		root = "/";
	size_t len = strlen(root);
	while (len > 1 && root[len - 1] == '/')
		len--;
	if (len >= sizeof t->root)
		return -ENAMETOOLONG;
	/* "/" is stored as "" so paths read "/sys/...", not "//sys/...". */
	if (!(len == 1 && root[0] == '/'))
		memcpy(t->root, root, len);

	if (topo_read(t, NODE_DIR "/online", buf, sizeof buf) <= 0 ||
	    topo_parse_list(buf, &mask, &count))
		return -ENOENT;
	t->online_mask = mask;
	t->nr_nodes = __builtin_popcountll(mask);
	uint64_t cpu_mask = 0;
	int have_cpu_file = topo_read(t, NODE_DIR "/has_cpu", buf, sizeof buf) >= 0 &&
			    !topo_parse_list(buf, &cpu_mask, &count);
	for (int n = 0; n < KVT_TOPO_MAX_NODES; n++) {
		if (!(mask >> n & 1))
			continue;
		t->node[n].online = 1;
		topo_read_node(t, n);
		t->node[n].has_cpu = have_cpu_file ? (int)(cpu_mask >> n & 1)
						   : t->node[n].nr_cpus > 0;
	}
	topo_read_zoneinfo(t);
	uint64_t bs;
	if (!topo_read_u64(t, "/sys/devices/system/memory/block_size_bytes", 16, &bs))
		t->memory_block_bytes = bs;
	topo_read_cxl(t, cxl);
	return 0;
}

/* ---- node lists (KVTIER_CXL_NODES) ------------------------------------------ */

static uint64_t topo_memory_nodes(const struct kvt_topo *t)
{
	uint64_t m = 0;
	for (int n = 0; n < KVT_TOPO_MAX_NODES; n++)
		if (t->node[n].online && t->node[n].mem_total_bytes)
			m |= 1ull << n;
	return m;
}

/* One decimal node number at *s (digits only), advancing *s. */
static int nodelist_number(const char **s, unsigned long *v)
{
	if (**s < '0' || **s > '9')
		return -EINVAL;
	unsigned long x = 0;
	while (**s >= '0' && **s <= '9') {
		x = x * 10 + (unsigned long)(**s - '0');
		if (x > 100000)
			x = 100000;          /* clamp: reported as out of range */
		(*s)++;
	}
	*v = x;
	return 0;
}

static void skip_spaces(const char **s)
{
	while (**s == ' ' || **s == '\t')
		(*s)++;
}

/* One item, "N" or "N-M", with optional spaces; stops at ',' or the end. */
static int nodelist_item(const char **p, unsigned long *lo, unsigned long *hi)
{
	skip_spaces(p);
	if (nodelist_number(p, lo))
		return -EINVAL;
	*hi = *lo;
	skip_spaces(p);
	if (**p == '-') {
		(*p)++;
		skip_spaces(p);
		if (nodelist_number(p, hi) || *hi < *lo)
			return -EINVAL;
		skip_spaces(p);
	}
	return (**p && **p != ',') ? -EINVAL : 0;
}

int kvt_topo_parse_nodelist(const char *s, const struct kvt_topo *t,
			    uint64_t *mask, char *err, unsigned err_bytes)
{
	char dummy[1];
	if (!err || !err_bytes) {
		err = dummy;
		err_bytes = sizeof dummy;
	}
	*mask = 0;
	err[0] = 0;
	const char *p = s ? s : "";
	skip_spaces(&p);
	if (p[0] == 'a' && p[1] == 'l' && p[2] == 'l' && t) {
		const char *q = p + 3;
		skip_spaces(&q);
		if (!*q) {
			*mask = topo_memory_nodes(t);
			return 0;
		}
	}
	uint64_t m = 0;
	for (;;) {
		const char *item = p;
		unsigned long lo, hi;
		if (nodelist_item(&p, &lo, &hi)) {
			skip_spaces(&item);
			snprintf(err, err_bytes, "cannot parse '%.*s' (expected a node list "
				 "like 1 or 1,3 or 2-4)", (int)strcspn(item, ","), item);
			return -EINVAL;
		}
		if (hi >= KVT_TOPO_MAX_NODES) {
			snprintf(err, err_bytes, "node %lu is beyond the %d nodes kvtier handles",
				 hi, KVT_TOPO_MAX_NODES);
			return -ERANGE;
		}
		for (unsigned long n = lo; n <= hi; n++)
			m |= 1ull << n;
		if (*p++ != ',')
			break;
	}
	*mask = m;
	return 0;
}

/* ---- the far tier (pure) ------------------------------------------------------ */

const char *kvt_topo_reason_name(enum kvt_topo_reason r)
{
	switch (r) {
	case KVT_TOPO_FAR_CXL: return "cxl";
	case KVT_TOPO_FAR_CPULESS: return "cpuless";
	case KVT_TOPO_FAR_DRAM: return "dram";
	case KVT_TOPO_FAR_OVERRIDE: return "override";
	case KVT_TOPO_FAR_NONE: return "none";
	}
	return "?";
}

/* c->why, truncated if it must be (vsnprintf: truncation is intended). */
__attribute__((format(printf, 2, 3)))
static void why_set(struct kvt_topo_choice *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof c->why, fmt, ap);
	va_end(ap);
}

/* "0,2,5" into buf. */
static void mask_str(uint64_t m, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; i < 64 && n < cap; i++)
		if (m >> i & 1)
			n += (size_t)snprintf(buf + n, cap - n, "%s%d", n ? "," : "", i);
	if (!buf[0])
		snprintf(buf, cap, "none");
}

/* Fill far[] from mask and weight by read bandwidth (equal when any is unknown). */
static void choice_set(const struct kvt_topo *t, uint64_t mask, struct kvt_topo_choice *c)
{
	uint64_t sum = 0;
	int known = 1;
	c->nr_far = 0;
	for (int n = 0; n < KVT_TOPO_MAX_NODES; n++) {
		if (!(mask >> n & 1))
			continue;
		c->far[c->nr_far++] = n;
		sum += t->node[n].read_bandwidth_mbps;
		known &= t->node[n].read_bandwidth_mbps > 0;
	}
	if (!c->nr_far)
		return;
	c->weights_from_bandwidth = known && c->nr_far > 1;
	uint32_t given = 0;
	for (int i = 0; i < c->nr_far; i++) {
		uint64_t bw = t->node[c->far[i]].read_bandwidth_mbps;
		c->weight_bp[i] = known ? (uint32_t)(bw * 10000 / sum)
					: (uint32_t)(10000 / c->nr_far);
		given += c->weight_bp[i];
	}
	for (int i = 0; given < 10000; i = (i + 1) % c->nr_far, given++)
		c->weight_bp[i]++;               /* rounding remainder */
}

static int choose_override(const struct kvt_topo *t, const char *s, struct kvt_topo_choice *c)
{
	char err[128], list[192];
	uint64_t mask;
	if (kvt_topo_parse_nodelist(s, t, &mask, err, sizeof err)) {
		why_set(c, "KVTIER_CXL_NODES='%.40s': %s; "
			 "no far tier, placing natively", s, err);
		return KVT_TOPO_FAR_NONE;
	}
	uint64_t bad = mask & ~topo_memory_nodes(t);
	if (bad || !mask) {
		char have[96];
		mask_str(bad, list, sizeof list);
		mask_str(topo_memory_nodes(t), have, sizeof have);
		why_set(c, "KVTIER_CXL_NODES='%.40s': node %s %s "
			 "(nodes with memory: %s); no far tier, placing natively", s, list,
			 mask ? "does not exist or has no memory" : "- the list is empty", have);
		return KVT_TOPO_FAR_NONE;
	}
	choice_set(t, mask, c);
	mask_str(mask, list, sizeof list);
	why_set(c, "KVTIER_CXL_NODES='%.40s' names node %s", s, list);
	return KVT_TOPO_FAR_OVERRIDE;
}

int kvt_topo_choose(const struct kvt_topo *t, const char *cxl_nodes,
		    struct kvt_topo_choice *c)
{
	char list[192];
	uint64_t cxl = 0, cpuless = 0, dram = 0;
	memset(c, 0, sizeof *c);
	if (cxl_nodes && *cxl_nodes) {
		c->reason = choose_override(t, cxl_nodes, c);
		return 0;
	}
	uint64_t mem = topo_memory_nodes(t);
	for (int n = 0; n < KVT_TOPO_MAX_NODES; n++) {
		if (!(mem >> n & 1))
			continue;
		if (t->node[n].cxl)
			cxl |= 1ull << n;
		else if (!t->node[n].has_cpu)
			cpuless |= 1ull << n;
		else if (!dram)
			dram = 1ull << n;        /* lowest node with CPUs and memory */
	}
	if (cxl) {
		c->reason = KVT_TOPO_FAR_CXL;
		mask_str(cxl, list, sizeof list);
		why_set(c, "CXL region memory is online as node %s", list);
		choice_set(t, cxl, c);
	} else if (cpuless) {
		c->reason = KVT_TOPO_FAR_CPULESS;
		mask_str(cpuless, list, sizeof list);
		why_set(c, "no CXL region online as memory; "
			 "CPU-less node %s", list);
		choice_set(t, cpuless, c);
	} else if (dram) {
		c->reason = KVT_TOPO_FAR_DRAM;
		mask_str(dram, list, sizeof list);
		why_set(c, "no CXL and no CPU-less node: "
			 "the far tier is local DRAM, node %s", list);
		choice_set(t, dram, c);
	} else {
		c->reason = KVT_TOPO_FAR_NONE;
		why_set(c, "no node with memory found; "
			 "no far tier, placing natively");
	}
	return 0;
}
