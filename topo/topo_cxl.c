// SPDX-License-Identifier: MIT
/* The two CXL backends of the topology ops table: libcxl (ndctl) loaded
 * with dlopen at run time, so the preload has no link dependency on it,
 * and a fixture reader of ROOT/cxl.list for tests. Runs once at init or
 * in the tool; not reentrant (one context at a time); never logs. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/kvt.h"
#include "topo.h"

/* ---- libcxl through dlopen ---------------------------------------------------- */

/* Opaque libcxl types, declared here so the build needs no libcxl headers. */
struct cxl_ctx;
struct cxl_memdev;
struct cxl_bus;
struct cxl_port;
struct cxl_decoder;
struct cxl_region;
struct cxl_memdev_mapping;

#define CXL_FNS(X) \
	X(int, cxl_new, (struct cxl_ctx **)) \
	X(void, cxl_unref, (struct cxl_ctx *)) \
	X(void, cxl_set_log_priority, (struct cxl_ctx *, int)) \
	X(struct cxl_memdev *, cxl_memdev_get_first, (struct cxl_ctx *)) \
	X(struct cxl_memdev *, cxl_memdev_get_next, (struct cxl_memdev *)) \
	X(const char *, cxl_memdev_get_devname, (struct cxl_memdev *)) \
	X(const char *, cxl_memdev_get_host, (struct cxl_memdev *)) \
	X(unsigned long long, cxl_memdev_get_ram_size, (struct cxl_memdev *)) \
	X(unsigned long long, cxl_memdev_get_pmem_size, (struct cxl_memdev *)) \
	X(int, cxl_memdev_get_numa_node, (struct cxl_memdev *)) \
	X(struct cxl_bus *, cxl_bus_get_first, (struct cxl_ctx *)) \
	X(struct cxl_bus *, cxl_bus_get_next, (struct cxl_bus *)) \
	X(struct cxl_port *, cxl_bus_get_port, (struct cxl_bus *)) \
	X(struct cxl_decoder *, cxl_decoder_get_first, (struct cxl_port *)) \
	X(struct cxl_decoder *, cxl_decoder_get_next, (struct cxl_decoder *)) \
	X(int, cxl_decoder_get_mode, (struct cxl_decoder *)) \
	X(struct cxl_memdev *, cxl_decoder_get_memdev, (struct cxl_decoder *)) \
	X(struct cxl_region *, cxl_region_get_first, (struct cxl_decoder *)) \
	X(struct cxl_region *, cxl_region_get_next, (struct cxl_region *)) \
	X(const char *, cxl_region_get_devname, (struct cxl_region *)) \
	X(unsigned long long, cxl_region_get_size, (struct cxl_region *)) \
	X(unsigned long long, cxl_region_get_resource, (struct cxl_region *)) \
	X(unsigned int, cxl_region_get_interleave_ways, (struct cxl_region *)) \
	X(unsigned int, cxl_region_get_interleave_granularity, (struct cxl_region *)) \
	X(int, cxl_region_decode_is_committed, (struct cxl_region *)) \
	X(int, cxl_region_is_enabled, (struct cxl_region *)) \
	X(struct cxl_memdev_mapping *, cxl_mapping_get_first, (struct cxl_region *)) \
	X(struct cxl_memdev_mapping *, cxl_mapping_get_next, (struct cxl_memdev_mapping *)) \
	X(struct cxl_decoder *, cxl_mapping_get_decoder, (struct cxl_memdev_mapping *))

static struct {
	void *lib;
	struct cxl_ctx *ctx;
#define X(ret, name, args) ret (*name) args;
	CXL_FNS(X)
#undef X
} cx;

static void libcxl_close(void *ctx)
{
	(void)ctx;
	if (cx.ctx)
		cx.cxl_unref(cx.ctx);
	if (cx.lib)
		kvt_dl_close(cx.lib);
	memset(&cx, 0, sizeof cx);
}

/* dlopen libcxl.so.1 and resolve every function used. 0 or -ENOSYS. */
static int libcxl_load(void)
{
	memset(&cx, 0, sizeof cx);
	cx.lib = kvt_dl_open("libcxl.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cx.lib)
		return -ENOSYS;
#define X(ret, name, args) \
	if (!(cx.name = (ret (*) args)kvt_real_dlsym(cx.lib, #name))) \
		goto missing;
	CXL_FNS(X)
#undef X
	return 0;
missing:
	libcxl_close(&cx);
	return -ENOSYS;
}

int kvt_topo_cxl_libcxl_available(void)
{
	int rc = libcxl_load();
	if (!rc)
		libcxl_close(&cx);
	return rc;
}

static int libcxl_open(const char *root, void **ctx)
{
	/* libcxl always reads the real /sys: it cannot answer for a fixture root. */
	if (root && strcmp(root, "/"))
		return -ENOSYS;
	if (kvt_sys_access("/sys/bus/cxl/devices", F_OK))
		return -ENODEV;              /* no CXL bus: skip loading the library */
	int rc = libcxl_load();
	if (rc)
		return rc;
	if (cx.cxl_new(&cx.ctx) < 0 || !cx.ctx) {
		cx.ctx = NULL;
		libcxl_close(&cx);
		return -ENOSYS;
	}
	cx.cxl_set_log_priority(cx.ctx, 0);   /* LOG_EMERG: quiet */
	*ctx = &cx;
	return 0;
}

static void copy_name(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

static int libcxl_memdevs(void *ctx, struct kvt_topo_memdev *out, int max)
{
	(void)ctx;
	int n = 0;
	for (struct cxl_memdev *m = cx.cxl_memdev_get_first(cx.ctx); m && n < max;
	     m = cx.cxl_memdev_get_next(m), n++) {
		copy_name(out[n].name, sizeof out[n].name, cx.cxl_memdev_get_devname(m));
		copy_name(out[n].host, sizeof out[n].host, cx.cxl_memdev_get_host(m));
		out[n].ram_bytes = cx.cxl_memdev_get_ram_size(m);
		out[n].pmem_bytes = cx.cxl_memdev_get_pmem_size(m);
		out[n].numa_node = cx.cxl_memdev_get_numa_node(m);
	}
	return n;
}

static void libcxl_region(struct cxl_region *r, struct kvt_topo_region *o,
			  const struct kvt_topo_memdev *md, int nr_md)
{
	static const char *const modes[] = { "none", "mixed", "pmem", "ram" };
	copy_name(o->name, sizeof o->name, cx.cxl_region_get_devname(r));
	o->size_bytes = cx.cxl_region_get_size(r);
	o->resource = cx.cxl_region_get_resource(r);
	o->ways = cx.cxl_region_get_interleave_ways(r);
	o->granularity = cx.cxl_region_get_interleave_granularity(r);
	o->committed = cx.cxl_region_decode_is_committed(r);
	o->enabled = cx.cxl_region_is_enabled(r);
	o->node = -1;
	for (struct cxl_memdev_mapping *m = cx.cxl_mapping_get_first(r); m;
	     m = cx.cxl_mapping_get_next(m)) {
		struct cxl_decoder *d = cx.cxl_mapping_get_decoder(m);
		if (!d)
			continue;
		int mode = cx.cxl_decoder_get_mode(d);
		if (mode >= 0 && mode < 4 && !o->mode[0])
			copy_name(o->mode, sizeof o->mode, modes[mode]);
		struct cxl_memdev *dev = cx.cxl_decoder_get_memdev(d);
		const char *name = dev ? cx.cxl_memdev_get_devname(dev) : NULL;
		for (int i = 0; name && i < nr_md && i < 32; i++)
			if (!strcmp(md[i].name, name))
				o->memdev_mask |= 1u << i;
	}
}

static int libcxl_regions(void *ctx, struct kvt_topo_region *out, int max,
			  const struct kvt_topo_memdev *md, int nr_md)
{
	(void)ctx;
	int n = 0;
	/* Regions hang off the root decoders of each bus's root port. */
	for (struct cxl_bus *b = cx.cxl_bus_get_first(cx.ctx); b; b = cx.cxl_bus_get_next(b)) {
		struct cxl_port *p = cx.cxl_bus_get_port(b);
		for (struct cxl_decoder *d = p ? cx.cxl_decoder_get_first(p) : NULL; d;
		     d = cx.cxl_decoder_get_next(d))
			for (struct cxl_region *r = cx.cxl_region_get_first(d); r && n < max;
			     r = cx.cxl_region_get_next(r))
				libcxl_region(r, &out[n++], md, nr_md);
	}
	return n;
}

const struct kvt_topo_cxl_ops kvt_topo_cxl_libcxl = {
	.name = "libcxl",
	.open = libcxl_open,
	.close = libcxl_close,
	.list_memdevs = libcxl_memdevs,
	.list_regions = libcxl_regions,
};

/* ---- fixture: ROOT/cxl.list ---------------------------------------------------- */

/* Lines, '#' comments:
 *   memdev NAME host=PCI ram=BYTES pmem=BYTES numa_node=N
 *   region NAME mode=pmem|ram resource=HPA size=BYTES ways=N granularity=N
 *          committed=0|1 enabled=0|1 memdevs=mem0,mem1 [node=N]
 * Numbers take C syntax (0x...). node= stands for what libcxl cannot say
 * directly; without it the core finds the node from memory blocks. */
static struct {
	char text[16384];
} fx;

static int fixture_open(const char *root, void **ctx)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/cxl.list", strcmp(root, "/") ? root : "");
	int fd = kvt_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -ENODEV;
	ssize_t n = kvt_sys_read(fd, fx.text, sizeof fx.text - 1);
	kvt_sys_close(fd);
	if (n < 0)
		return -EIO;
	fx.text[n] = 0;
	*ctx = &fx;
	return 0;
}

/* Value of key=... in line (up to the next space) into val. 1 if found. */
static int fixture_kv(const char *line, const char *key, char *val, size_t cap)
{
	size_t klen = strlen(key);
	for (const char *p = line; (p = strstr(p, key)); p += klen) {
		if ((p == line || p[-1] == ' ') && p[klen] == '=') {
			p += klen + 1;
			size_t n = strcspn(p, " \t\n");
			snprintf(val, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
			return 1;
		}
	}
	return 0;
}

static uint64_t fixture_num(const char *line, const char *key, uint64_t def)
{
	char v[32];
	return fixture_kv(line, key, v, sizeof v) ? strtoull(v, NULL, 0) : def;
}

/* Calls fn for each line starting with word; returns how many it took. */
static int fixture_each(const char *word, int max,
			void (*fn)(const char *line, int i, void *arg), void *arg)
{
	int n = 0;
	size_t wl = strlen(word);
	for (const char *l = fx.text; l && *l && n < max; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		char line[512];
		snprintf(line, sizeof line, "%.*s", (int)strcspn(l, "\n"), l);
		if (!strncmp(line, word, wl) && line[wl] == ' ')
			fn(line, n++, arg);
	}
	return n;
}

static void fixture_name(const char *line, char *dst, size_t cap)
{
	const char *p = strchr(line, ' ') + 1;
	snprintf(dst, cap, "%.*s", (int)strcspn(p, " \t"), p);
}

static void fixture_memdev(const char *line, int i, void *arg)
{
	struct kvt_topo_memdev *m = (struct kvt_topo_memdev *)arg + i;
	fixture_name(line, m->name, sizeof m->name);
	if (!fixture_kv(line, "host", m->host, sizeof m->host))
		m->host[0] = 0;
	m->ram_bytes = fixture_num(line, "ram", 0);
	m->pmem_bytes = fixture_num(line, "pmem", 0);
	m->numa_node = (int)(int64_t)fixture_num(line, "numa_node", (uint64_t)-1);
}

static int fixture_memdevs(void *ctx, struct kvt_topo_memdev *out, int max)
{
	(void)ctx;
	return fixture_each("memdev", max, fixture_memdev, out);
}

struct fixture_regions {
	struct kvt_topo_region *out;
	const struct kvt_topo_memdev *md;
	int nr_md;
};

static void fixture_region(const char *line, int i, void *arg)
{
	struct fixture_regions *a = arg;
	struct kvt_topo_region *r = &a->out[i];
	char list[256];
	fixture_name(line, r->name, sizeof r->name);
	if (!fixture_kv(line, "mode", r->mode, sizeof r->mode))
		r->mode[0] = 0;
	r->resource = fixture_num(line, "resource", UINT64_MAX);
	r->size_bytes = fixture_num(line, "size", 0);
	r->ways = (unsigned)fixture_num(line, "ways", 1);
	r->granularity = (unsigned)fixture_num(line, "granularity", 0);
	r->committed = (int)(int64_t)fixture_num(line, "committed", (uint64_t)-1);
	r->enabled = (int)(int64_t)fixture_num(line, "enabled", (uint64_t)-1);
	r->node = (int)(int64_t)fixture_num(line, "node", (uint64_t)-1);
	r->memdev_mask = 0;
	if (!fixture_kv(line, "memdevs", list, sizeof list))
		return;
	char *save = NULL;
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		for (int m = 0; m < a->nr_md && m < 32; m++)
			if (!strcmp(a->md[m].name, tok))
				r->memdev_mask |= 1u << m;
}

static int fixture_regions(void *ctx, struct kvt_topo_region *out, int max,
			   const struct kvt_topo_memdev *md, int nr_md)
{
	(void)ctx;
	struct fixture_regions a = { out, md, nr_md };
	return fixture_each("region", max, fixture_region, &a);
}

const struct kvt_topo_cxl_ops kvt_topo_cxl_fixture = {
	.name = "fixture",
	.open = fixture_open,
	.list_memdevs = fixture_memdevs,
	.list_regions = fixture_regions,
};

const struct kvt_topo_cxl_ops *kvt_topo_cxl_default(const char *root)
{
	return (!root || !*root || !strcmp(root, "/")) ? &kvt_topo_cxl_libcxl
						      : &kvt_topo_cxl_fixture;
}
