// SPDX-License-Identifier: MIT
/* `kvtier topo [--json] [--root DIR]`: the memory topology the library sees
 * (nodes, distances, HMAT, ZONE_MOVABLE, CXL memdevs and regions) and the far
 * tier it would choose, as a table or JSON. Exit 0, 1 no node found, 2 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "json.h"
#include "../topo/topo.h"

int kvt_cmd_topo(int argc, char **argv);

static void topo_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier topo [--json] [--root DIR]\n"
		"  NUMA nodes (CPUs, memory, ZONE_MOVABLE, HMAT latency/bandwidth),\n"
		"  distances, CXL memdevs and regions and the node each backs, and the\n"
		"  far tier kvtier chooses (KVTIER_CXL_NODES overrides it).\n"
		"  --json       one JSON object instead of tables\n"
		"  --root DIR   testing aid: read sys/ and proc/ under DIR, and CXL from\n"
		"               DIR/cxl.list instead of libcxl (docs/topology.md)\n");
}

/* "18.96 GiB" */
static const char *human(uint64_t b, char *buf, size_t cap)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, cap, i ? "%.2f %s" : "%.0f %s", v, u[i]);
	return buf;
}

static const char *num_or_dash(uint32_t v, const char *unit, char *buf, size_t cap)
{
	if (!v)
		return "-";
	snprintf(buf, cap, "%u %s", v, unit);
	return buf;
}

static const char *cxl_status_text(const struct kvt_topo *t)
{
	int local = !t->root[0];
	switch (t->cxl_status) {
	case 0:
		return NULL;
	case -ENODEV:
		return local ? "no CXL bus (/sys/bus/cxl is absent): no CXL memory"
			     : "no cxl.list under the root: no CXL memory";
	case -ENOSYS:
		return "libcxl.so.1 could not be loaded: CXL devices not enumerated";
	default:
		return "CXL enumeration failed";
	}
}

/* "mem0,mem1" (or "-") into buf. */
static const char *mask_list(uint32_t m, const struct kvt_topo *t, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; i < t->nr_memdevs && n < cap; i++)
		if (m >> i & 1)
			n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? "," : "",
					      t->memdev[i].name);
	return buf[0] ? buf : "-";
}

/* ---- tables ------------------------------------------------------------------ */

static void print_nodes(FILE *f, const struct kvt_topo *t)
{
	char a[32], b[32], c[32], d[32], e[32], g[32];
	fprintf(f, "NUMA nodes: %d online\n", t->nr_nodes);
	fprintf(f, "  %-4s %-8s %-11s %-11s %-13s %-4s %-9s %-9s %-11s %s\n", "node",
		"cpus", "memory", "free", "movable-only", "cxl", "read-lat", "write-lat",
		"read-bw", "write-bw");
	for (int n = 0; n < KVT_TOPO_MAX_NODES; n++) {
		const struct kvt_topo_node *nd = &t->node[n];
		if (!nd->online)
			continue;
		char cpus[16];
		snprintf(cpus, sizeof cpus, nd->has_cpu ? "yes(%d)" : "no", nd->nr_cpus);
		fprintf(f, "  %-4d %-8s %-11s %-11s %-13s %-4s %-9s %-9s %-11s %s\n", n, cpus,
			human(nd->mem_total_bytes, a, sizeof a),
			human(nd->mem_free_bytes, b, sizeof b),
			nd->movable_only < 0 ? "unknown" : nd->movable_only ? "yes" : "no",
			nd->cxl ? "yes" : "no",
			num_or_dash(nd->read_latency_ns, "ns", c, sizeof c),
			num_or_dash(nd->write_latency_ns, "ns", d, sizeof d),
			num_or_dash(nd->read_bandwidth_mbps, "MB/s", e, sizeof e),
			num_or_dash(nd->write_bandwidth_mbps, "MB/s", g, sizeof g));
	}
	fprintf(f, "\nnode distances:\n  node");
	for (int j = 0; j < KVT_TOPO_MAX_NODES; j++)
		if (t->node[j].online)
			fprintf(f, " %4d", j);
	fputc('\n', f);
	for (int i = 0; i < KVT_TOPO_MAX_NODES; i++) {
		if (!t->node[i].online)
			continue;
		fprintf(f, "  %4d", i);
		for (int j = 0; j < KVT_TOPO_MAX_NODES; j++)
			if (t->node[j].online)
				fprintf(f, " %4u", t->distance[i][j]);
		fputc('\n', f);
	}
}

static void print_cxl(FILE *f, const struct kvt_topo *t)
{
	char a[32], b[32];
	const char *st = cxl_status_text(t);
	fprintf(f, "\nCXL (%s):", t->cxl_source ? t->cxl_source : "not enumerated");
	if (st) {
		fprintf(f, " %s\n", st);
		return;
	}
	fprintf(f, " %d memdev(s), %d region(s)\n", t->nr_memdevs, t->nr_regions);
	if (t->nr_memdevs)
		fprintf(f, "  %-8s %-14s %-11s %-11s %s\n", "memdev", "host", "ram", "pmem",
			"device-node");
	for (int i = 0; i < t->nr_memdevs; i++) {
		const struct kvt_topo_memdev *m = &t->memdev[i];
		char node[16];
		snprintf(node, sizeof node, m->numa_node >= 0 ? "%d" : "-", m->numa_node);
		fprintf(f, "  %-8s %-14s %-11s %-11s %s\n", m->name, m->host[0] ? m->host : "-",
			human(m->ram_bytes, a, sizeof a), human(m->pmem_bytes, b, sizeof b), node);
	}
	if (t->nr_regions)
		fprintf(f, "  %-8s %-5s %-18s %-11s %-5s %-9s %-10s %s\n", "region", "mode",
			"resource", "size", "ways", "committed", "memdevs", "-> node");
	for (int i = 0; i < t->nr_regions; i++) {
		const struct kvt_topo_region *r = &t->region[i];
		char res[24], node[24];
		snprintf(res, sizeof res, r->resource == UINT64_MAX ? "-" : "0x%llx",
			 (unsigned long long)r->resource);
		snprintf(node, sizeof node, r->node >= 0 ? "%d" : "not online", r->node);
		char mds[128];
		fprintf(f, "  %-8s %-5s %-18s %-11s %-5u %-9s %-10s %s\n", r->name,
			r->mode[0] ? r->mode : "-", res, human(r->size_bytes, a, sizeof a),
			r->ways, r->committed < 0 ? "?" : r->committed ? "yes" : "no",
			mask_list(r->memdev_mask, t, mds, sizeof mds), node);
	}
}

static void print_choice(FILE *f, const struct kvt_topo *t, const struct kvt_topo_choice *c)
{
	int cxl = 0, cpuless = 0;
	for (int n = 0; n < KVT_TOPO_MAX_NODES; n++) {
		cxl |= t->node[n].online && t->node[n].cxl;
		cpuless |= t->node[n].online && !t->node[n].has_cpu && t->node[n].mem_total_bytes;
	}
	if (!cxl && !cpuless)
		fprintf(f, "\nThis machine has %d NUMA node%s, no CXL memory and no CPU-less "
			"node.\n", t->nr_nodes, t->nr_nodes == 1 ? "" : "s");
	fprintf(f, "\nfar tier: ");
	if (!c->nr_far)
		fprintf(f, "none (native placement)\n");
	for (int i = 0; i < c->nr_far; i++)
		fprintf(f, "%snode %d (weight %u.%02u%%)", i ? ", " : "", c->far[i],
			c->weight_bp[i] / 100, c->weight_bp[i] % 100);
	if (c->nr_far)
		fprintf(f, "%s\n", c->reason == KVT_TOPO_FAR_DRAM ? " = local DRAM, fallback" : "");
	fprintf(f, "  reason: %s (%s)\n", c->why, kvt_topo_reason_name(c->reason));
	if (c->nr_far > 1)
		fprintf(f, "  weights: %s\n", c->weights_from_bandwidth
			? "from HMAT read bandwidth" : "equal (bandwidth unknown)");
}

/* ---- JSON -------------------------------------------------------------------- */

static void json_nodes(FILE *f, const struct kvt_topo *t)
{
	int first = 1;
	fprintf(f, "\"nodes\":[");
	for (int n = 0; n < KVT_TOPO_MAX_NODES; n++) {
		const struct kvt_topo_node *nd = &t->node[n];
		if (!nd->online)
			continue;
		fprintf(f, "%s{\"node\":%d,\"has_cpu\":%s,\"nr_cpus\":%d,\"mem_total_bytes\":%llu,"
			"\"mem_free_bytes\":%llu,\"movable_only\":%s,\"movable_bytes\":%llu,"
			"\"cxl\":%s,\"hmat\":", first ? "" : ",", n, nd->has_cpu ? "true" : "false",
			nd->nr_cpus, (unsigned long long)nd->mem_total_bytes,
			(unsigned long long)nd->mem_free_bytes,
			nd->movable_only < 0 ? "null" : nd->movable_only ? "true" : "false",
			(unsigned long long)nd->movable_bytes, nd->cxl ? "true" : "false");
		if (nd->hmat) {
			fprintf(f, "{\"read_latency_ns\":%u,\"write_latency_ns\":%u,"
				"\"read_bandwidth_mbps\":%u,\"write_bandwidth_mbps\":%u,"
				"\"initiators\":[", nd->read_latency_ns, nd->write_latency_ns,
				nd->read_bandwidth_mbps, nd->write_bandwidth_mbps);
			for (int i = 0, k = 0; i < KVT_TOPO_MAX_NODES; i++)
				if (nd->initiator_mask >> i & 1)
					fprintf(f, "%s%d", k++ ? "," : "", i);
			fprintf(f, "]}");
		} else {
			fprintf(f, "null");
		}
		fprintf(f, ",\"distance\":[");
		for (int j = 0, k = 0; j < KVT_TOPO_MAX_NODES; j++)
			if (t->node[j].online)
				fprintf(f, "%s%u", k++ ? "," : "", t->distance[n][j]);
		fprintf(f, "]}");
		first = 0;
	}
	fprintf(f, "]");
}

static void json_cxl(FILE *f, const struct kvt_topo *t)
{
	const char *st = cxl_status_text(t);
	fprintf(f, ",\"cxl\":{\"source\":");
	kvt_json_str(f, t->cxl_source ? t->cxl_source : "");
	fprintf(f, ",\"status\":");
	kvt_json_str(f, st ? st : "ok");
	fprintf(f, ",\"memdevs\":[");
	for (int i = 0; i < t->nr_memdevs; i++) {
		const struct kvt_topo_memdev *m = &t->memdev[i];
		fprintf(f, "%s{\"memdev\":", i ? "," : "");
		kvt_json_str(f, m->name);
		fprintf(f, ",\"host\":");
		kvt_json_str(f, m->host);
		fprintf(f, ",\"ram_bytes\":%llu,\"pmem_bytes\":%llu,\"numa_node\":%d}",
			(unsigned long long)m->ram_bytes, (unsigned long long)m->pmem_bytes,
			m->numa_node);
	}
	fprintf(f, "],\"regions\":[");
	for (int i = 0; i < t->nr_regions; i++) {
		const struct kvt_topo_region *r = &t->region[i];
		fprintf(f, "%s{\"region\":", i ? "," : "");
		kvt_json_str(f, r->name);
		fprintf(f, ",\"mode\":");
		kvt_json_str(f, r->mode);
		fprintf(f, ",\"size_bytes\":%llu,\"ways\":%u,\"committed\":%d,\"node\":%d,"
			"\"memdevs\":[", (unsigned long long)r->size_bytes, r->ways,
			r->committed, r->node);
		for (int m = 0, k = 0; m < t->nr_memdevs; m++)
			if (r->memdev_mask >> m & 1) {
				fputs(k++ ? "," : "", f);
				kvt_json_str(f, t->memdev[m].name);
			}
		fprintf(f, "]}");
	}
	fprintf(f, "]}");
}

static void print_json(FILE *f, const struct kvt_topo *t, const struct kvt_topo_choice *c)
{
	fprintf(f, "{\"root\":");
	kvt_json_str(f, t->root[0] ? t->root : "/");
	fprintf(f, ",");
	json_nodes(f, t);
	json_cxl(f, t);
	fprintf(f, ",\"far\":{\"reason\":\"%s\",\"nodes\":[", kvt_topo_reason_name(c->reason));
	for (int i = 0; i < c->nr_far; i++)
		fprintf(f, "%s%d", i ? "," : "", c->far[i]);
	fprintf(f, "],\"weight_bp\":[");
	for (int i = 0; i < c->nr_far; i++)
		fprintf(f, "%s%u", i ? "," : "", c->weight_bp[i]);
	fprintf(f, "],\"weights_from_bandwidth\":%s,\"why\":",
		c->weights_from_bandwidth ? "true" : "false");
	kvt_json_str(f, c->why);
	fprintf(f, "}}\n");
}

/* ---- entry --------------------------------------------------------------------- */

int kvt_cmd_topo(int argc, char **argv)
{
	const char *root = "/", *v;
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if ((v = kvt_opt_value(argc, argv, &i, "--root")) && *v) {
			root = v;
		} else if (!strncmp(argv[i], "--root", 6) && (!argv[i][6] || argv[i][6] == '=')) {
			fprintf(stderr, "kvtier topo: --root needs a directory\n");
			return 2;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			topo_usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "kvtier topo: unexpected argument '%s'\n", argv[i]);
			topo_usage(stderr);
			return 2;
		}
	}
	/* Large (about 30 KiB): keep it off the stack. */
	static struct kvt_topo t;
	struct kvt_topo_choice c;
	int rc = kvt_topo_discover(&t, root, kvt_topo_cxl_default(root));
	if (rc) {
		fprintf(stderr, "kvtier topo: no NUMA node information under %s%s: %s\n",
			strcmp(root, "/") ? root : "", "/sys/devices/system/node", strerror(-rc));
		return 1;
	}
	kvt_topo_choose(&t, getenv("KVTIER_CXL_NODES"), &c);
	if (json) {
		print_json(stdout, &t, &c);
	} else {
		printf("kvtier topo (root %s)\n\n", t.root[0] ? t.root : "/");
		print_nodes(stdout, &t);
		print_cxl(stdout, &t);
		print_choice(stdout, &t, &c);
	}
	fflush(stdout);
	return 0;
}
