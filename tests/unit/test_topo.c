// SPDX-License-Identifier: MIT
/* Topology: node-list parsing, the pure far-tier choice on tables, discovery
 * on fixture trees (tests/fixtures/topo/<machine>) and on this machine, the
 * CXL ops table (fixture file, test ops, NULL members), and `kvtier topo`. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvt_test.h"
#include "../topo/topo.h"

/* The command itself, compiled in: unit tests link only libkvtier.a. */
#include "../../tools/cmd_topo.c"
#include "../../tools/json.c"

#define FIX "tests/fixtures/topo/"

static struct kvt_topo topo;     /* ~30 KiB: not on the stack */

/* ---- node lists ------------------------------------------------------------ */

static void test_nodelist_valid(void)
{
	static const struct { const char *s; uint64_t mask; } cases[] = {
		{ "1", 0x2 },
		{ "1,3", 0xa },
		{ "2-4", 0x1c },
		{ " 0, 2-3 ", 0xd },
		{ "4-4", 0x10 },
		{ "63", 1ull << 63 },
		{ "0-63", ~0ull },
		{ "3,1", 0xa },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t m = 0xdead;
		char err[128];
		CU_ASSERT_EQUAL_FATAL(kvt_topo_parse_nodelist(cases[i].s, NULL, &m, err, sizeof err), 0);
		CU_ASSERT_EQUAL(m, cases[i].mask);
		CU_ASSERT_STRING_EQUAL(err, "");
	}
}

static void test_nodelist_junk(void)
{
	static const char *const junk[] = {
		"", " ", "a", "1-", "-1", "3-1", "1,,2", "1;2", "!1", "+1", "1 2",
		"1,", "0x1", "all,1", "1-2-3",
	};
	for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
		uint64_t m = 0xdead;
		char err[128] = "";
		int rc = kvt_topo_parse_nodelist(junk[i], NULL, &m, err, sizeof err);
		CU_ASSERT_EQUAL(rc, -EINVAL);
		CU_ASSERT_EQUAL(m, 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot parse"));
		if (rc != -EINVAL)
			fprintf(stderr, "junk '%s' gave %d\n", junk[i], rc);
	}
	char err[128];
	uint64_t m;
	CU_ASSERT_EQUAL(kvt_topo_parse_nodelist("1,3;x", NULL, &m, err, sizeof err), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'3;x'"));
	CU_ASSERT_EQUAL(kvt_topo_parse_nodelist("64", NULL, &m, err, sizeof err), -ERANGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "node 64"));
	CU_ASSERT_EQUAL(kvt_topo_parse_nodelist("1-99999999999", NULL, &m, err, sizeof err), -ERANGE);
	/* No error buffer is fine. */
	CU_ASSERT_EQUAL(kvt_topo_parse_nodelist("x", NULL, &m, NULL, 0), -EINVAL);
}

/* ---- the choice, on tables --------------------------------------------------- */

/* Tiny topology builder: nodes given as {has_cpu, mem MiB, cxl, read bw}. */
struct tnode { int cpu; unsigned mem_mib; int cxl; uint32_t bw; };

static const struct kvt_topo *table(const struct tnode *n, int nr)
{
	memset(&topo, 0, sizeof topo);
	for (int i = 0; i < nr; i++) {
		topo.node[i].online = 1;
		topo.node[i].has_cpu = n[i].cpu;
		topo.node[i].nr_cpus = n[i].cpu ? 4 : 0;
		topo.node[i].mem_total_bytes = (uint64_t)n[i].mem_mib << 20;
		topo.node[i].cxl = n[i].cxl;
		topo.node[i].read_bandwidth_mbps = n[i].bw;
		topo.online_mask |= 1ull << i;
	}
	topo.nr_nodes = nr;
	return &topo;
}

static void test_choose_tables(void)
{
	struct kvt_topo_choice c;
	static const struct {
		const char *name;
		struct tnode n[4];
		int nr;
		enum kvt_topo_reason reason;
		int nr_far, far0, far1;
		uint32_t w0, w1;
		const char *why;
	} cases[] = {
		{ "one DRAM node", { { 1, 1024, 0, 0 } }, 1,
		  KVT_TOPO_FAR_DRAM, 1, 0, -1, 10000, 0, "no CXL and no CPU-less node" },
		{ "two sockets: lowest CPU node", { { 1, 1024, 0, 0 }, { 1, 1024, 0, 0 } }, 2,
		  KVT_TOPO_FAR_DRAM, 1, 0, -1, 10000, 0, "local DRAM, node 0" },
		{ "CPU-less node", { { 1, 1024, 0, 0 }, { 0, 512, 0, 0 } }, 2,
		  KVT_TOPO_FAR_CPULESS, 1, 1, -1, 10000, 0, "CPU-less node 1" },
		{ "memoryless CPU-less node is no tier", { { 1, 1024, 0, 0 }, { 0, 0, 0, 0 } }, 2,
		  KVT_TOPO_FAR_DRAM, 1, 0, -1, 10000, 0, "node 0" },
		{ "CXL beats CPU-less", { { 1, 1024, 0, 0 }, { 0, 512, 0, 0 }, { 0, 512, 1, 0 } }, 3,
		  KVT_TOPO_FAR_CXL, 1, 2, -1, 10000, 0, "online as node 2" },
		{ "two CXL nodes weighted 3:1", { { 1, 1024, 0, 0 }, { 0, 512, 1, 3000 },
		  { 0, 512, 1, 1000 } }, 3,
		  KVT_TOPO_FAR_CXL, 2, 1, 2, 7500, 2500, "node 1,2" },
		{ "CPU-less, one bandwidth unknown: equal", { { 1, 1024, 0, 0 }, { 0, 512, 0, 3000 },
		  { 0, 512, 0, 0 } }, 3,
		  KVT_TOPO_FAR_CPULESS, 2, 1, 2, 5000, 5000, "node 1,2" },
		{ "no memory anywhere", { { 1, 0, 0, 0 } }, 1,
		  KVT_TOPO_FAR_NONE, 0, -1, -1, 0, 0, "no node with memory" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct kvt_topo *t = table(cases[i].n, cases[i].nr);
		CU_ASSERT_EQUAL(kvt_topo_choose(t, NULL, &c), 0);
		int ok = c.reason == cases[i].reason && c.nr_far == cases[i].nr_far &&
			 (c.nr_far < 1 || (c.far[0] == cases[i].far0 && c.weight_bp[0] == cases[i].w0)) &&
			 (c.nr_far < 2 || (c.far[1] == cases[i].far1 && c.weight_bp[1] == cases[i].w1)) &&
			 strstr(c.why, cases[i].why);
		if (!ok)
			fprintf(stderr, "case '%s': reason %d nr_far %d far0 %d w0 %u why '%s'\n",
				cases[i].name, c.reason, c.nr_far, c.far[0], c.weight_bp[0], c.why);
		CU_ASSERT(ok);
	}
	/* Bandwidth weights flag and rounding: 3 equal-unknown nodes sum to 10000. */
	struct tnode three[] = { { 1, 64, 0, 0 }, { 0, 64, 0, 0 }, { 0, 64, 0, 0 }, { 0, 64, 0, 0 } };
	kvt_topo_choose(table(three, 4), NULL, &c);
	CU_ASSERT_EQUAL(c.nr_far, 3);
	CU_ASSERT_EQUAL(c.weight_bp[0] + c.weight_bp[1] + c.weight_bp[2], 10000);
	CU_ASSERT_EQUAL(c.weight_bp[0], 3334);
	CU_ASSERT_EQUAL(c.weights_from_bandwidth, 0);
	struct tnode bw[] = { { 1, 64, 0, 0 }, { 0, 64, 1, 3000 }, { 0, 64, 1, 1000 } };
	kvt_topo_choose(table(bw, 3), "", &c);      /* "" = unset */
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_CXL);
	CU_ASSERT_EQUAL(c.weights_from_bandwidth, 1);
}

static void test_choose_override(void)
{
	struct kvt_topo_choice c;
	struct tnode two[] = { { 1, 1024, 0, 0 }, { 0, 512, 0, 0 }, { 0, 0, 0, 0 } };
	const struct kvt_topo *t = table(two, 3);

	kvt_topo_choose(t, "0", &c);
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_OVERRIDE);
	CU_ASSERT_EQUAL(c.nr_far, 1);
	CU_ASSERT_EQUAL(c.far[0], 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.why, "KVTIER_CXL_NODES='0'"));

	kvt_topo_choose(t, "0-1", &c);
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_OVERRIDE);
	CU_ASSERT_EQUAL(c.nr_far, 2);
	CU_ASSERT_EQUAL(c.far[1], 1);

	kvt_topo_choose(t, "all", &c);               /* nodes with memory only */
	CU_ASSERT_EQUAL(c.nr_far, 2);

	kvt_topo_choose(t, "5", &c);                 /* does not exist */
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_NONE);
	CU_ASSERT_EQUAL(c.nr_far, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.why, "node 5 does not exist"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.why, "placing natively"));

	kvt_topo_choose(t, "1,2", &c);               /* node 2 has no memory */
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_NONE);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.why, "node 2 "));

	kvt_topo_choose(t, "one", &c);               /* junk */
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_NONE);
	CU_ASSERT_EQUAL(c.nr_far, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.why, "cannot parse 'one'"));

	kvt_topo_choose(t, "70", &c);
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_NONE);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.why, "beyond"));
	CU_ASSERT_STRING_EQUAL(kvt_topo_reason_name(KVT_TOPO_FAR_NONE), "none");
	CU_ASSERT_STRING_EQUAL(kvt_topo_reason_name(KVT_TOPO_FAR_CPULESS), "cpuless");
}

/* ---- discovery on fixtures ----------------------------------------------------- */

static void test_discover_onenode(void)
{
	struct kvt_topo_choice c;
	CU_ASSERT_EQUAL_FATAL(kvt_topo_discover(&topo, FIX "onenode",
						kvt_topo_cxl_default(FIX "onenode")), 0);
	CU_ASSERT_EQUAL(topo.nr_nodes, 1);
	CU_ASSERT_EQUAL(topo.online_mask, 0x1);
	CU_ASSERT_EQUAL(topo.node[0].nr_cpus, 2);
	CU_ASSERT_EQUAL(topo.node[0].has_cpu, 1);
	CU_ASSERT_EQUAL(topo.node[0].mem_total_bytes, 19883804ull << 10);
	CU_ASSERT_EQUAL(topo.node[0].mem_free_bytes, 18924752ull << 10);
	CU_ASSERT_EQUAL(topo.node[0].movable_only, 0);
	CU_ASSERT_EQUAL(topo.node[0].hmat, 0);
	CU_ASSERT_EQUAL(topo.distance[0][0], 10);
	CU_ASSERT_EQUAL(topo.memory_block_bytes, 128ull << 20);
	CU_ASSERT_EQUAL(topo.cxl_status, -ENODEV);  /* no cxl.list */
	CU_ASSERT_EQUAL(topo.nr_regions, 0);
	CU_ASSERT_EQUAL(topo.node[1].online, 0);
	kvt_topo_choose(&topo, NULL, &c);
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_DRAM);
	CU_ASSERT_EQUAL(c.nr_far, 1);
	CU_ASSERT_EQUAL(c.far[0], 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.why, "no CXL and no CPU-less node"));
}

static void test_discover_hmat2(void)
{
	struct kvt_topo_choice c;
	CU_ASSERT_EQUAL_FATAL(kvt_topo_discover(&topo, FIX "hmat2/", &kvt_topo_cxl_fixture), 0);
	CU_ASSERT_STRING_EQUAL(topo.root, FIX "hmat2");     /* trailing '/' dropped */
	CU_ASSERT_EQUAL(topo.nr_nodes, 2);
	CU_ASSERT_EQUAL(topo.node[1].has_cpu, 0);
	CU_ASSERT_EQUAL(topo.node[1].nr_cpus, 0);
	CU_ASSERT_EQUAL(topo.node[1].mem_total_bytes, 512ull << 20);
	CU_ASSERT_EQUAL(topo.node[1].hmat, 1);
	CU_ASSERT_EQUAL(topo.node[1].read_latency_ns, 25);
	CU_ASSERT_EQUAL(topo.node[1].write_latency_ns, 30);
	CU_ASSERT_EQUAL(topo.node[1].read_bandwidth_mbps, 5120);
	CU_ASSERT_EQUAL(topo.node[1].write_bandwidth_mbps, 4096);
	CU_ASSERT_EQUAL(topo.node[1].initiator_mask, 0x1);
	CU_ASSERT_EQUAL(topo.node[0].read_bandwidth_mbps, 10240);
	CU_ASSERT_EQUAL(topo.distance[0][1], 20);
	CU_ASSERT_EQUAL(topo.distance[1][1], 10);
	CU_ASSERT_EQUAL(topo.node[1].movable_only, 0);
	CU_ASSERT_EQUAL(topo.node[1].cxl, 0);
	kvt_topo_choose(&topo, NULL, &c);
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_CPULESS);
	CU_ASSERT_EQUAL(c.nr_far, 1);
	CU_ASSERT_EQUAL(c.far[0], 1);
	CU_ASSERT_EQUAL(c.weight_bp[0], 10000);
}

static void test_discover_cxl(void)
{
	struct kvt_topo_choice c;
	CU_ASSERT_EQUAL_FATAL(kvt_topo_discover(&topo, FIX "cxl", &kvt_topo_cxl_fixture), 0);
	CU_ASSERT_EQUAL(topo.cxl_status, 0);
	CU_ASSERT_STRING_EQUAL(topo.cxl_source, "fixture");
	CU_ASSERT_EQUAL_FATAL(topo.nr_memdevs, 1);
	CU_ASSERT_STRING_EQUAL(topo.memdev[0].name, "mem0");
	CU_ASSERT_STRING_EQUAL(topo.memdev[0].host, "0000:0d:00.0");
	CU_ASSERT_EQUAL(topo.memdev[0].pmem_bytes, 512ull << 20);
	CU_ASSERT_EQUAL(topo.memdev[0].numa_node, -1);
	CU_ASSERT_EQUAL_FATAL(topo.nr_regions, 1);
	CU_ASSERT_STRING_EQUAL(topo.region[0].name, "region0");
	CU_ASSERT_STRING_EQUAL(topo.region[0].mode, "pmem");
	CU_ASSERT_EQUAL(topo.region[0].resource, 0x4c0000000ull);
	CU_ASSERT_EQUAL(topo.region[0].memdev_mask, 0x1);
	CU_ASSERT_EQUAL(topo.region[0].committed, 1);
	CU_ASSERT_EQUAL(topo.region[0].node, 2);   /* derived from memory153..155 */
	CU_ASSERT_EQUAL(topo.node[2].cxl, 1);
	CU_ASSERT_EQUAL(topo.node[1].cxl, 0);
	CU_ASSERT_EQUAL(topo.node[2].movable_only, 1);
	CU_ASSERT_EQUAL(topo.node[2].movable_bytes, 98304ull * (uint64_t)sysconf(_SC_PAGESIZE));
	CU_ASSERT_EQUAL(topo.node[0].movable_only, 0);
	CU_ASSERT_EQUAL(topo.node[2].hmat, 0);      /* QEMU 7.2 gives the CFMW no HMAT */
	CU_ASSERT_EQUAL(topo.distance[2][0], 20);
	kvt_topo_choose(&topo, NULL, &c);
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_CXL);
	CU_ASSERT_EQUAL(c.nr_far, 1);
	CU_ASSERT_EQUAL(c.far[0], 2);
	/* The override wins over CXL; a missing node means native. */
	kvt_topo_choose(&topo, "1", &c);
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_OVERRIDE);
	CU_ASSERT_EQUAL(c.far[0], 1);
	kvt_topo_choose(&topo, "1,7", &c);
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_NONE);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.why, "node 7"));
	/* Without CXL enumeration the same machine falls back to CPU-less nodes. */
	CU_ASSERT_EQUAL_FATAL(kvt_topo_discover(&topo, FIX "cxl", NULL), 0);
	CU_ASSERT_EQUAL(topo.cxl_status, -ENOSYS);
	kvt_topo_choose(&topo, NULL, &c);
	CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_CPULESS);
	CU_ASSERT_EQUAL(c.nr_far, 2);
	CU_ASSERT_EQUAL(c.weights_from_bandwidth, 0);   /* node 2 has no HMAT */
}

/* Test ops: one region over hmat2's node 1 blocks (4-7), found by address. */
static int t_open(const char *root, void **ctx) { (void)root; *ctx = &topo; return 0; }
static int t_regions(void *ctx, struct kvt_topo_region *out, int max,
		     const struct kvt_topo_memdev *md, int nr_md)
{
	(void)ctx; (void)md; (void)nr_md;
	if (max < 1)
		return 0;
	snprintf(out[0].name, sizeof out[0].name, "region7");
	out[0].resource = 5ull * (128 << 20);
	out[0].size_bytes = 256ull << 20;
	return 1;
}
static int t_fail(const char *root, void **ctx) { (void)root; (void)ctx; return -EIO; }

static void test_cxl_ops_table(void)
{
	static const struct kvt_topo_cxl_ops regions_only = {
		.name = "test", .open = t_open, .list_regions = t_regions,
	};
	static const struct kvt_topo_cxl_ops open_only = { .name = "open-only", .open = t_open };
	static const struct kvt_topo_cxl_ops no_open = { .name = "none" };
	static const struct kvt_topo_cxl_ops failing = { .name = "failing", .open = t_fail };

	CU_ASSERT_EQUAL_FATAL(kvt_topo_discover(&topo, FIX "hmat2", &regions_only), 0);
	CU_ASSERT_EQUAL(topo.cxl_status, 0);
	CU_ASSERT_EQUAL(topo.nr_memdevs, 0);
	CU_ASSERT_EQUAL(topo.nr_regions, 1);
	CU_ASSERT_EQUAL(topo.region[0].node, 1);
	CU_ASSERT_EQUAL(topo.node[1].cxl, 1);
	CU_ASSERT_EQUAL(topo.node[0].cxl, 0);

	CU_ASSERT_EQUAL(kvt_topo_discover(&topo, FIX "hmat2", &open_only), 0);
	CU_ASSERT_EQUAL(topo.cxl_status, 0);
	CU_ASSERT_EQUAL(topo.nr_regions, 0);
	CU_ASSERT_EQUAL(kvt_topo_discover(&topo, FIX "hmat2", &no_open), 0);
	CU_ASSERT_EQUAL(topo.cxl_status, -ENOSYS);
	CU_ASSERT_EQUAL(kvt_topo_discover(&topo, FIX "hmat2", &failing), 0);
	CU_ASSERT_EQUAL(topo.cxl_status, -EIO);
	CU_ASSERT_EQUAL(topo.nr_nodes, 2);           /* the rest still discovered */

	/* libcxl cannot answer for a fixture root. */
	CU_ASSERT_EQUAL(kvt_topo_discover(&topo, FIX "cxl", &kvt_topo_cxl_libcxl), 0);
	CU_ASSERT_EQUAL(topo.cxl_status, -ENOSYS);
	CU_ASSERT_PTR_EQUAL(kvt_topo_cxl_default("/"), &kvt_topo_cxl_libcxl);
	CU_ASSERT_PTR_EQUAL(kvt_topo_cxl_default(NULL), &kvt_topo_cxl_libcxl);
	CU_ASSERT_PTR_EQUAL(kvt_topo_cxl_default(FIX "cxl"), &kvt_topo_cxl_fixture);
}

static void test_discover_errors(void)
{
	CU_ASSERT_EQUAL(kvt_topo_discover(&topo, "/nonexistent-kvtier-root", NULL), -ENOENT);
	CU_ASSERT_EQUAL(topo.nr_nodes, 0);
	char longroot[400];
	memset(longroot, 'x', sizeof longroot - 1);
	longroot[sizeof longroot - 1] = 0;
	CU_ASSERT_EQUAL(kvt_topo_discover(&topo, longroot, NULL), -ENAMETOOLONG);
}

/* ---- this machine --------------------------------------------------------------- */

static void test_discover_real(void)
{
	struct kvt_topo_choice c;
	CU_ASSERT_EQUAL_FATAL(kvt_topo_discover(&topo, "/", kvt_topo_cxl_default("/")), 0);
	CU_ASSERT_STRING_EQUAL(topo.root, "");
	CU_ASSERT(topo.nr_nodes >= 1);
	CU_ASSERT(topo.online_mask & 1);
	CU_ASSERT(topo.node[0].online);
	CU_ASSERT(topo.node[0].mem_total_bytes > (64ull << 20));
	CU_ASSERT_EQUAL(topo.distance[0][0], 10);
	CU_ASSERT(topo.node[0].movable_only == 0 || topo.node[0].movable_only == 1);
	if (topo.nr_nodes == 1)
		CU_ASSERT_EQUAL(topo.node[0].nr_cpus, (int)sysconf(_SC_NPROCESSORS_CONF));
	if (access("/sys/bus/cxl", F_OK) == 0)
		return;
	CU_ASSERT_EQUAL(topo.cxl_status, -ENODEV);
	kvt_topo_choose(&topo, NULL, &c);
	if (topo.nr_nodes == 1) {
		CU_ASSERT_EQUAL(c.reason, KVT_TOPO_FAR_DRAM);
		CU_ASSERT_EQUAL(c.far[0], 0);
	}
}

static void test_libcxl_loads(void)
{
	void *h = dlopen("libcxl.so.1", RTLD_NOW | RTLD_LOCAL);
	int expect = h ? 0 : -ENOSYS;
	if (h)
		dlclose(h);
	CU_ASSERT_EQUAL(kvt_topo_cxl_libcxl_available(), expect);
	/* libcxl1 is a build dependency (.ci/install-deps: libcxl-dev). */
	CU_ASSERT_PTR_NOT_NULL(h);
}

/* ---- kvtier topo ------------------------------------------------------------------ */

/* Run kvt_cmd_topo with stdout captured; returns its exit status. */
static int run_topo(char *out, size_t cap, const char *env, const char *a1,
		    const char *a2, const char *a3)
{
	char *argv[5] = { "topo", (char *)a1, (char *)a2, (char *)a3, NULL };
	int argc = 1;
	while (argc < 4 && argv[argc])
		argc++;
	char tmpl[] = "/tmp/kvt-topo-XXXXXX";
	int fd = mkstemp(tmpl), saved = dup(1), saved_err = dup(2);
	unlink(tmpl);
	if (env)
		setenv("KVTIER_CXL_NODES", env, 1);
	else
		unsetenv("KVTIER_CXL_NODES");
	fflush(stdout);
	dup2(fd, 1);
	dup2(fd, 2);
	int rc = kvt_cmd_topo(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(saved, 1);
	dup2(saved_err, 2);
	close(saved);
	close(saved_err);
	ssize_t n = pread(fd, out, cap - 1, 0);
	out[n > 0 ? n : 0] = 0;
	close(fd);
	unsetenv("KVTIER_CXL_NODES");
	return rc;
}

static char out[65536];

static void test_cmd_topo_text(void)
{
	CU_ASSERT_EQUAL(run_topo(out, sizeof out, NULL, "--root", FIX "cxl", NULL), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "NUMA nodes: 3 online"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "  2    no       384.00 MiB"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "  1    no       512.00 MiB  507.91 MiB  no            no   25 ns"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "yes           yes"));          /* node 2 movable, cxl */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "mem0     0000:0d:00.0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "region0  pmem  0x4c0000000"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "mem0       2\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "far tier: node 2 (weight 100.00%)"));
	CU_ASSERT_PTR_NULL(strstr(out, "This machine has"));

	CU_ASSERT_EQUAL(run_topo(out, sizeof out, NULL, "--root", FIX "onenode", NULL), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "This machine has 1 NUMA node, no CXL memory and no CPU-less node."));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "far tier: node 0 (weight 100.00%) = local DRAM, fallback"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CXL and no CPU-less node"));

	CU_ASSERT_EQUAL(run_topo(out, sizeof out, "9", "--root", FIX "hmat2", NULL), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "far tier: none (native placement)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "node 9 does not exist"));

	CU_ASSERT_EQUAL(run_topo(out, sizeof out, NULL, NULL, NULL, NULL), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "far tier: node "));
	if (!strstr(out, "NUMA nodes: 1 online") || access("/sys/bus/cxl", F_OK) == 0)
		return;
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CXL bus (/sys/bus/cxl is absent)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "far tier: node 0 (weight 100.00%) = local DRAM"));
}

static void test_cmd_topo_json(void)
{
	CU_ASSERT_EQUAL(run_topo(out, sizeof out, NULL, "--json", "--root", FIX "cxl"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "{\"root\":\"" FIX "cxl\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"node\":2,\"has_cpu\":false,\"nr_cpus\":0,"
				   "\"mem_total_bytes\":402653184"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"movable_only\":true"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"read_latency_ns\":25,\"write_latency_ns\":30"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"region\":\"region0\",\"mode\":\"pmem\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"node\":2,\"memdevs\":[\"mem0\"]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"far\":{\"reason\":\"cxl\",\"nodes\":[2],"
				   "\"weight_bp\":[10000]"));
	CU_ASSERT_EQUAL(out[strlen(out) - 2], '}');
	CU_ASSERT_EQUAL(strchr(out, '\n'), out + strlen(out) - 1);   /* one line */

	/* a root whose name is UTF-8 with one invalid byte (tools/json.c):
	 * "modèle" as it is, the 0xff as U+FFFD */
	char cwd[400], target[600], link[64];
	CU_ASSERT_FATAL(getcwd(cwd, sizeof cwd) != NULL);
	snprintf(target, sizeof target, "%s/" FIX "cxl", cwd);
	snprintf(link, sizeof link, "/tmp/kvt-topo-mod\xc3\xa8le-\xff.%d", (int)getpid());
	CU_ASSERT_FATAL(symlink(target, link) == 0);
	CU_ASSERT_EQUAL(run_topo(out, sizeof out, NULL, "--json", "--root", link), 0);
	unlink(link);
	char want[100];
	snprintf(want, sizeof want, "{\"root\":\"/tmp/kvt-topo-mod\xc3\xa8le-\\ufffd.%d\"",
		 (int)getpid());
	CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"node\":2,\"memdevs\":[\"mem0\"]"));
}

static void test_cmd_topo_usage(void)
{
	CU_ASSERT_EQUAL(run_topo(out, sizeof out, NULL, "--bogus", NULL, NULL), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unexpected argument '--bogus'"));
	CU_ASSERT_EQUAL(run_topo(out, sizeof out, NULL, "--root", NULL, NULL), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--root needs a directory"));
	CU_ASSERT_EQUAL(run_topo(out, sizeof out, NULL, "--help", NULL, NULL), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: kvtier topo"));
	CU_ASSERT_EQUAL(run_topo(out, sizeof out, NULL, "--root", "/nonexistent-kvtier", NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "no NUMA node information under /nonexistent-kvtier/sys"));
}

int main(void)
{
	CU_TestInfo nodelist_tests[] = {
		{ "valid lists and ranges", test_nodelist_valid },
		{ "junk and out of range", test_nodelist_junk },
		CU_TEST_INFO_NULL,
	};
	CU_TestInfo choose_tests[] = {
		{ "tables: cxl > cpu-less > dram, weights", test_choose_tables },
		{ "KVTIER_CXL_NODES override and native", test_choose_override },
		CU_TEST_INFO_NULL,
	};
	CU_TestInfo discover_tests[] = {
		{ "fixture: one node (this machine's shape)", test_discover_onenode },
		{ "fixture: 2 nodes, node 1 CPU-less with HMAT", test_discover_hmat2 },
		{ "fixture: CXL region backs node 2, movable", test_discover_cxl },
		{ "ops table: test ops, NULL members, failure", test_cxl_ops_table },
		{ "missing root, long root", test_discover_errors },
		{ "this machine (/)", test_discover_real },
		{ "libcxl.so.1 loads with every function", test_libcxl_loads },
		CU_TEST_INFO_NULL,
	};
	CU_TestInfo cmd_tests[] = {
		{ "kvtier topo tables", test_cmd_topo_text },
		{ "kvtier topo --json", test_cmd_topo_json },
		{ "kvtier topo usage and errors", test_cmd_topo_usage },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "topo_nodelist", NULL, NULL, NULL, NULL, nodelist_tests },
		{ "topo_choose", NULL, NULL, NULL, NULL, choose_tests },
		{ "topo_discover", NULL, NULL, NULL, NULL, discover_tests },
		{ "topo_cmd", NULL, NULL, NULL, NULL, cmd_tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
