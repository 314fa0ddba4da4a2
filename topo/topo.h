/* SPDX-License-Identifier: MIT */
/* Memory topology: NUMA nodes, distances, HMAT numbers, ZONE_MOVABLE, CXL
 * memdevs and regions, and the choice of the far tier. Runs once (library
 * init, `kvtier topo`), never on a hot path: bounded fixed arrays, reads
 * sysfs/proc under a ROOT prefix so tests run it on fixture trees, and
 * reaches libcxl only through an ops table. No logging: callers report.
 * topo/ stands on base/ alone; placement (place/) and `kvtier topo` use it. */
#ifndef KVT_TOPO_H
#define KVT_TOPO_H

#include <stdint.h>

#define KVT_TOPO_MAX_NODES   64   /* node ids 0..63 (a uint64_t mask) */
#define KVT_TOPO_MAX_CXL     32   /* memdevs, and regions, each */
#define KVT_TOPO_ROOT_BYTES 256

/* ---- what discovery finds ------------------------------------------------ */

struct kvt_topo_node {
	int online;                  /* listed in node/online */
	int has_cpu;                 /* listed in node/has_cpu */
	int nr_cpus;                 /* from nodeN/cpulist */
	uint64_t mem_total_bytes;    /* nodeN/meminfo MemTotal (0: memoryless) */
	uint64_t mem_free_bytes;     /* nodeN/meminfo MemFree */
	uint64_t movable_bytes;      /* managed pages in ZONE_MOVABLE */
	int movable_only;            /* 1 all managed memory is Movable, 0 not, -1 unknown */
	int hmat;                    /* 1: access0/initiators numbers were read */
	uint32_t read_latency_ns, write_latency_ns;       /* 0 = not reported */
	uint32_t read_bandwidth_mbps, write_bandwidth_mbps;
	uint64_t initiator_mask;     /* access0/initiators/nodeX links */
	int cxl;                     /* backed by (part of) a CXL region */
};

struct kvt_topo_memdev {
	char name[32];               /* "mem0" */
	char host[64];               /* PCI address of the device */
	uint64_t ram_bytes, pmem_bytes;
	int numa_node;               /* node of the device itself (-1 unknown) */
};

struct kvt_topo_region {
	char name[32];               /* "region0" */
	char mode[8];                /* "ram", "pmem", "" unknown */
	uint64_t resource;           /* host physical base (UINT64_MAX unknown) */
	uint64_t size_bytes;
	unsigned ways, granularity;
	int committed, enabled;      /* -1 unknown */
	uint32_t memdev_mask;        /* bit i: memdev[i] is a target */
	int node;                    /* NUMA node its memory is onlined as (-1: none) */
};

struct kvt_topo {
	char root[KVT_TOPO_ROOT_BYTES];
	int nr_nodes;                /* online nodes */
	uint64_t online_mask;
	struct kvt_topo_node node[KVT_TOPO_MAX_NODES];
	uint8_t distance[KVT_TOPO_MAX_NODES][KVT_TOPO_MAX_NODES]; /* 0 = unknown */
	uint64_t memory_block_bytes; /* 0 = unknown */
	/* CXL: cxl_status 0 = enumerated (possibly nothing found), else -errno:
	 * -ENODEV no CXL bus in sysfs, -ENOSYS no libcxl / ops not supported. */
	int cxl_status;
	const char *cxl_source;      /* ops name that answered ("libcxl", "fixture") */
	int nr_memdevs, nr_regions;
	struct kvt_topo_memdev memdev[KVT_TOPO_MAX_CXL];
	struct kvt_topo_region region[KVT_TOPO_MAX_CXL];
};

/* ---- libcxl behind an operations table ------------------------------------ */

/* Each member may be NULL ("not supported"); the core checks. All return 0
 * or a count on success, a negative errno on failure. */
struct kvt_topo_cxl_ops {
	const char *name;
	/* Open a context for ROOT; -ENODEV: no CXL here, -ENOSYS: no library. */
	int (*open)(const char *root, void **ctx);
	void (*close)(void *ctx);
	/* Fill up to max memdevs; returns how many. */
	int (*list_memdevs)(void *ctx, struct kvt_topo_memdev *out, int max);
	/* Fill up to max regions; memdev_mask indexes md[0..nr_md). region.node
	 * may be left -1: the core derives it from memory blocks. */
	int (*list_regions)(void *ctx, struct kvt_topo_region *out, int max,
			    const struct kvt_topo_memdev *md, int nr_md);
};

/* libcxl.so.1 loaded with dlopen at run time (no link dependency). */
extern const struct kvt_topo_cxl_ops kvt_topo_cxl_libcxl;
/* Reads ROOT/cxl.list, a text stand-in for what libcxl reports (tests and
 * `kvtier topo --root`); format in docs/topology.md. */
extern const struct kvt_topo_cxl_ops kvt_topo_cxl_fixture;

/* 0 when libcxl.so.1 loads and has every function kvtier uses (it is
 * unloaded again), -ENOSYS otherwise. */
int kvt_topo_cxl_libcxl_available(void);

/* The ops that fit ROOT: libcxl for "/", the fixture reader otherwise. */
const struct kvt_topo_cxl_ops *kvt_topo_cxl_default(const char *root);

/* ---- discovery ------------------------------------------------------------ */

/* Discover the topology under root ("/" or NULL for the real machine) into
 * *t, using cxl (NULL: no CXL enumeration) for memdevs and regions.
 * Returns 0, or -ENOENT when no node directory can be read at all
 * (*t then holds what little was found), -ENAMETOOLONG for a long root. */
int kvt_topo_discover(struct kvt_topo *t, const char *root,
		      const struct kvt_topo_cxl_ops *cxl);

/* ---- the far tier (pure: depends only on its arguments) -------------------- */

enum kvt_topo_reason {
	KVT_TOPO_FAR_CXL = 0,        /* CXL-backed node(s) */
	KVT_TOPO_FAR_CPULESS,        /* no CXL region online; CPU-less node(s) */
	KVT_TOPO_FAR_DRAM,           /* neither: local DRAM (a node with CPUs) */
	KVT_TOPO_FAR_OVERRIDE,       /* KVTIER_CXL_NODES */
	KVT_TOPO_FAR_NONE,           /* override unusable: native placement */
};

#define KVT_TOPO_MAX_FAR KVT_TOPO_MAX_NODES

struct kvt_topo_choice {
	enum kvt_topo_reason reason;
	int nr_far;                  /* 0 only with KVT_TOPO_FAR_NONE */
	int far[KVT_TOPO_MAX_FAR];   /* node ids, ascending */
	uint32_t weight_bp[KVT_TOPO_MAX_FAR]; /* share of each, sums to 10000 */
	int weights_from_bandwidth;  /* 0: equal weights (some bandwidth unknown) */
	char why[192];               /* one line for humans */
};

/* Parse a numactl node list: "1", "1,3", "2-4", "0,2-3", "all" (every
 * online node with memory). Spaces around items are allowed; "!x", "+x"
 * and empty items are not. *mask gets bit n for node n (n < 64).
 * Returns 0, -EINVAL for bad syntax or -ERANGE for a node >= 64, with
 * one line in err naming the offending item. */
int kvt_topo_parse_nodelist(const char *s, const struct kvt_topo *t,
			    uint64_t *mask, char *err, unsigned err_bytes);

/* Choose the far tier from t. cxl_nodes is KVTIER_CXL_NODES (NULL or ""
 * = choose from the topology). A list that does not parse, or that names
 * a node that is offline or has no memory, gives KVT_TOPO_FAR_NONE with
 * the reason in why. Always returns 0 (the choice says what happened). */
int kvt_topo_choose(const struct kvt_topo *t, const char *cxl_nodes,
		    struct kvt_topo_choice *c);

/* Short names for reasons ("cxl", "cpuless", "dram", "override", "none"). */
const char *kvt_topo_reason_name(enum kvt_topo_reason r);

#endif
