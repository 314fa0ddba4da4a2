/* SPDX-License-Identifier: MIT */
/* fakecuda graphs — what stream capture records and cuGraphLaunch replays
 * on the SIMULATED driver: a graph is its nodes in capture order (kernel,
 * memset, memcpy), an exec an independent copy of them. A kernel node holds
 * the argument VALUES taken at capture (its own copy of a defined kernel's
 * argument bytes); replay reads the memory they point to when it runs, as
 * a kernel does. Editing: a kernel node's params, in a graph or in an exec,
 * and cuGraphExecUpdate from a graph of the same shape. No edges, child
 * graphs or conditional nodes. The lists and every graph and exec change
 * only under the global lock.
 *
 * Handles are validated by identity against the live lists, never by
 * reading through them. A destroyed graph or exec frees its nodes but keeps
 * its small header on a tombstone list for the life of the process, so its
 * address never comes back from malloc: a stale handle stays invalid
 * (CUDA_ERROR_INVALID_VALUE) instead of naming a newer object. */
#include "fc_internal.h"

#include <stdlib.h>

struct fc_kernel_node {
	CUfunction func;
	CUcontext ctx;                        /* current at capture */
	struct fc_dims dims;
	struct fc_kargs args;                 /* argument values at capture (owned) */
	void *params[FC_KERNEL_ARGS];         /* a built-in's kernelParams: &args.v[i] */
};

struct fc_node {
	CUgraphNodeType type;
	int dev;                   /* ordinal of the stream it was captured on */
	/* In an exec: the graph node it was copied from (the handle
	 * cuGraphExecKernelNodeSetParams names); NULL in a graph. Compared,
	 * never read through. */
	const struct fc_node *origin;
	union {
		struct fc_kernel_node k;
		struct { uintptr_t dst, src; size_t bytes; } cp;
		struct { uintptr_t dst; size_t n; unsigned value, elem; } set;
	};
};

/* Nodes one by one: a node handle and its kernelParams stay put while the
 * capture grows the array of pointers. */
struct fc_graph {
	struct fc_graph *next;     /* live list, or tombstones once destroyed */
	struct fc_node **nodes;
	size_t nr, cap;
};

struct fc_exec {
	struct fc_exec *next;      /* live list, or tombstones once destroyed */
	struct fc_node *nodes;     /* copies: the graph may be destroyed first */
	size_t nr;
};

static struct fc_graph *fc_graphs, *fc_graph_tombs;
static struct fc_exec *fc_execs, *fc_exec_tombs;

/* A node's kernelParams point into the node itself (after any copy). */
static void fc_node_bind_params(struct fc_node *n)
{
	if (n->type != CU_GRAPH_NODE_TYPE_KERNEL)
		return;
	for (unsigned i = 0; i < FC_KERNEL_ARGS; i++)
		n->k.params[i] = &n->k.args.v[i];
}

/* What a kernel node hands back as kernelParams: a defined kernel's own
 * pointers into its copy, a built-in's array into args.v. */
static void **fc_node_kernel_params(struct fc_node *n)
{
	return n->k.args.params ? n->k.args.params : n->k.params;
}

static void fc_node_release(struct fc_node *n)
{
	if (n->type == CU_GRAPH_NODE_TYPE_KERNEL)
		fc_kargs_release(&n->k.args);
}

/* *dst = src with arguments of its own. CUDA_ERROR_OUT_OF_MEMORY: dst
 * holds nothing to release. */
static CUresult fc_node_copy(struct fc_node *dst, const struct fc_node *src)
{
	*dst = *src;
	if (src->type == CU_GRAPH_NODE_TYPE_KERNEL &&
	    fc_kargs_copy(&dst->k.args, &src->k.args) != CUDA_SUCCESS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_node_bind_params(dst);
	return CUDA_SUCCESS;
}

static void fc_exec_free_nodes(struct fc_exec *e)
{
	for (size_t i = 0; i < e->nr; i++)
		fc_node_release(&e->nodes[i]);
	free(e->nodes);
	e->nodes = NULL;
	e->nr = 0;
}

/* ---- lookups: identity against the live lists ---- */

static struct fc_graph *fc_graph_find(CUgraph h)
{
	for (struct fc_graph *g = fc_graphs; g; g = g->next)
		if ((CUgraph)g == h)
			return g;
	return NULL;
}

static struct fc_exec *fc_exec_find(CUgraphExec h)
{
	for (struct fc_exec *e = fc_execs; e; e = e->next)
		if ((CUgraphExec)e == h)
			return e;
	return NULL;
}

static struct fc_node *fc_node_find(CUgraphNode h)
{
	for (struct fc_graph *g = fc_graphs; g; g = g->next)
		for (size_t i = 0; i < g->nr; i++)
			if ((CUgraphNode)g->nodes[i] == h)
				return g->nodes[i];
	return NULL;
}

/* ---- building (capture) ---- */

struct fc_graph *fc_graph_new(void)
{
	struct fc_graph *g = malloc(sizeof *g);
	if (g)
		*g = (struct fc_graph){ 0 };
	return g;
}

static void fc_graph_free_nodes(struct fc_graph *g)
{
	for (size_t i = 0; i < g->nr; i++) {
		fc_node_release(g->nodes[i]);
		free(g->nodes[i]);
	}
	free(g->nodes);
	g->nodes = NULL;
	g->nr = g->cap = 0;
}

void fc_graph_drop(struct fc_graph *g)
{
	if (!g)
		return;
	fc_graph_free_nodes(g);
	free(g);   /* never handed out: no stale handle can name it */
}

CUgraph fc_graph_publish(struct fc_graph *g)
{
	g->next = fc_graphs;
	fc_graphs = g;
	return (CUgraph)g;
}

static CUresult fc_graph_append(struct fc_graph *g, const struct fc_node *proto)
{
	if (g->nr == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 8;
		struct fc_node **nodes = realloc(g->nodes, cap * sizeof *nodes);
		if (!nodes)
			return CUDA_ERROR_OUT_OF_MEMORY;
		g->nodes = nodes;
		g->cap = cap;
	}
	struct fc_node *n = malloc(sizeof *n);
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*n = *proto;
	fc_node_bind_params(n);
	g->nodes[g->nr++] = n;
	return CUDA_SUCCESS;
}

CUresult fc_graph_add_kernel(struct fc_graph *g, CUfunction f, const struct fc_dims *d,
			     const struct fc_kargs *args, int dev)
{
	struct fc_node n = { .type = CU_GRAPH_NODE_TYPE_KERNEL, .dev = dev };
	n.k = (struct fc_kernel_node){ .func = f, .ctx = fc_current_ctx(), .dims = *d,
				       .args = *args };
	return fc_graph_append(g, &n);
}

CUresult fc_graph_add_copy(struct fc_graph *g, uintptr_t dst, uintptr_t src, size_t n,
			   int dev)
{
	struct fc_node node = { .type = CU_GRAPH_NODE_TYPE_MEMCPY, .dev = dev };
	node.cp.dst = dst;
	node.cp.src = src;
	node.cp.bytes = n;
	return fc_graph_append(g, &node);
}

CUresult fc_graph_add_memset(struct fc_graph *g, uintptr_t dst, unsigned value, size_t n,
			     unsigned elem, int dev)
{
	struct fc_node node = { .type = CU_GRAPH_NODE_TYPE_MEMSET, .dev = dev };
	node.set.dst = dst;
	node.set.n = n;
	node.set.value = value;
	node.set.elem = elem;
	return fc_graph_append(g, &node);
}

/* ---- graphs ---- */

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	FC_GUARD("cuGraphCreate", FC_ALLOC);
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_graph *g = fc_graph_new();
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_lock();
	*phGraph = fc_graph_publish(g);
	fc_unlock();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	FC_GUARD("cuGraphDestroy", 0);
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	for (struct fc_graph **pp = &fc_graphs; *pp; pp = &(*pp)->next) {
		struct fc_graph *g = *pp;
		if ((CUgraph)g != hGraph)
			continue;
		*pp = g->next;
		fc_graph_free_nodes(g);
		g->next = fc_graph_tombs;
		fc_graph_tombs = g;
		r = CUDA_SUCCESS;
		break;
	}
	fc_unlock();
	return r;
}

/* The usual two calls: nodes NULL asks for the count; otherwise up to
 * *numNodes handles, NULL past the last, and *numNodes = how many. */
CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	FC_GUARD("cuGraphGetNodes", 0);
	if (!numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = CUDA_SUCCESS;
	fc_lock();
	struct fc_graph *g = fc_graph_find(hGraph);
	if (!g) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else if (!nodes) {
		*numNodes = g->nr;
	} else {
		size_t want = *numNodes, got = want < g->nr ? want : g->nr;
		for (size_t i = 0; i < want; i++)
			nodes[i] = i < got ? (CUgraphNode)g->nodes[i] : NULL;
		*numNodes = got;
	}
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	FC_GUARD("cuGraphNodeGetType", 0);
	if (!type)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_node *n = fc_node_find(hNode);
	if (n)
		*type = n->type;
	fc_unlock();
	return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The kernel node's params; kernelParams point at the node's own copies
 * of the arguments, valid until the graph is destroyed. */
static CUresult fc_kernel_params(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_node *n = fc_node_find(hNode);
	bool ok = n && n->type == CU_GRAPH_NODE_TYPE_KERNEL;
	if (ok) {
		const struct fc_kernel_node *k = &n->k;
		*p = (CUDA_KERNEL_NODE_PARAMS_v2){
			.func = k->func,
			.gridDimX = k->dims.grid[0], .gridDimY = k->dims.grid[1],
			.gridDimZ = k->dims.grid[2],
			.blockDimX = k->dims.block[0], .blockDimY = k->dims.block[1],
			.blockDimZ = k->dims.block[2],
			.sharedMemBytes = k->dims.shmem,
			.kernelParams = fc_node_kernel_params(n),
			.extra = NULL, .kern = NULL, .ctx = k->ctx,
		};
	}
	fc_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
					       CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
	FC_GUARD("cuGraphKernelNodeGetParams_v2", 0);
	return fc_kernel_params(hNode, nodeParams);
}

/* The CUDA 10 ABI: the same fields without kern and ctx. */
CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode,
					    CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	FC_GUARD("cuGraphKernelNodeGetParams", 0);
	CUDA_KERNEL_NODE_PARAMS_v2 p;
	CUresult r = nodeParams ? fc_kernel_params(hNode, &p) : CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		*nodeParams = (CUDA_KERNEL_NODE_PARAMS_v1){
			p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
			p.blockDimZ, p.sharedMemBytes, p.kernelParams, p.extra };
	return r;
}

/* ---- instantiation ---- */

#define FC_INSTANTIATE_FLAGS (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |  \
			      CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |               \
			      CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |        \
			      CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

/* Copy the graph's nodes into a new exec. The flags change nothing here. */
static CUresult fc_instantiate(CUgraphExec *phExec, CUgraph hGraph, unsigned long long flags)
{
	if (!phExec || (flags & ~(unsigned long long)FC_INSTANTIATE_FLAGS))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = CUDA_SUCCESS;
	fc_lock();
	struct fc_graph *g = fc_graph_find(hGraph);
	struct fc_exec *e = g ? malloc(sizeof *e) : NULL;
	if (e)
		*e = (struct fc_exec){ 0 };
	if (!g)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (!e || (g->nr && !(e->nodes = malloc(g->nr * sizeof *e->nodes))))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; r == CUDA_SUCCESS && i < g->nr; i++) {
		r = fc_node_copy(&e->nodes[i], g->nodes[i]);
		if (r == CUDA_SUCCESS)
			e->nodes[e->nr++].origin = g->nodes[i];
	}
	if (r == CUDA_SUCCESS) {
		e->next = fc_execs;
		fc_execs = e;
		*phExec = (CUgraphExec)e;
	} else if (e) {
		fc_exec_free_nodes(e);
		free(e);
	}
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					     unsigned long long flags)
{
	FC_GUARD("cuGraphInstantiateWithFlags", FC_CTX | FC_ALLOC);
	return fc_instantiate(phGraphExec, hGraph, flags);
}

/* The CUDA 10 and 11.0 ABIs: no node can fail, so no error node and an
 * empty log. */
static CUresult fc_instantiate_log(CUgraphExec *phExec, CUgraph hGraph, CUgraphNode *errNode,
				   char *log, size_t logBytes)
{
	if (errNode)
		*errNode = NULL;
	if (log && logBytes)
		log[0] = '\0';
	return fc_instantiate(phExec, hGraph, 0);
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
				    CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	FC_GUARD("cuGraphInstantiate", FC_CTX | FC_ALLOC);
	return fc_instantiate_log(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
				       CUgraphNode *phErrorNode, char *logBuffer,
				       size_t bufferSize)
{
	FC_GUARD("cuGraphInstantiate_v2", FC_CTX | FC_ALLOC);
	return fc_instantiate_log(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static CUresult fc_instantiate_params(CUgraphExec *phExec, CUgraph hGraph,
				      CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->hUploadStream && !fc_valid_stream(p->hUploadStream))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = fc_instantiate(phExec, hGraph, p->flags);
	p->hErrNode_out = NULL;
	p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
					  : CUDA_GRAPH_INSTANTIATE_ERROR;
	return r;
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
					      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	FC_GUARD("cuGraphInstantiateWithParams", FC_CTX | FC_ALLOC);
	return fc_instantiate_params(phGraphExec, hGraph, instantiateParams);
}

CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
						   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	FC_GUARD("cuGraphInstantiateWithParams_ptsz", FC_CTX | FC_ALLOC);
	return fc_instantiate_params(phGraphExec, hGraph, instantiateParams);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	FC_GUARD("cuGraphExecDestroy", 0);
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	for (struct fc_exec **pp = &fc_execs; *pp; pp = &(*pp)->next) {
		struct fc_exec *e = *pp;
		if ((CUgraphExec)e != hGraphExec)
			continue;
		*pp = e->next;
		fc_exec_free_nodes(e);
		e->next = fc_exec_tombs;
		fc_exec_tombs = e;
		r = CUDA_SUCCESS;
		break;
	}
	fc_unlock();
	return r;
}

/* ---- editing: kernel node params, exec update ---- */

/* The v1 struct as the v2 one (no kern, no ctx). */
static CUDA_KERNEL_NODE_PARAMS_v2 fc_params_v2(const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	return (CUDA_KERNEL_NODE_PARAMS_v2){
		.func = p->func, .gridDimX = p->gridDimX, .gridDimY = p->gridDimY,
		.gridDimZ = p->gridDimZ, .blockDimX = p->blockDimX, .blockDimY = p->blockDimY,
		.blockDimZ = p->blockDimZ, .sharedMemBytes = p->sharedMemBytes,
		.kernelParams = p->kernelParams, .extra = p->extra,
	};
}

/* New params for a kernel node, the arguments copied now from the
 * caller's kernelParams (before the lock: host code's memory). */
struct fc_kernel_set { CUfunction func; struct fc_dims dims; struct fc_kargs args; CUcontext ctx; };

static CUresult fc_kernel_set_make(const CUDA_KERNEL_NODE_PARAMS_v2 *p, struct fc_kernel_set *k)
{
	if (!p || p->extra)
		return CUDA_ERROR_INVALID_VALUE;
	k->func = p->func ? p->func : (CUfunction)p->kern;
	k->dims = (struct fc_dims){ { p->gridDimX, p->gridDimY, p->gridDimZ },
				    { p->blockDimX, p->blockDimY, p->blockDimZ },
				    p->sharedMemBytes };
	k->ctx = p->ctx;
	return fc_kernel_args(k->func, p->kernelParams, &k->args);
}

/* Node n (a kernel node) takes k; its old arguments are released. */
static void fc_kernel_set_apply(struct fc_node *n, struct fc_kernel_set *k)
{
	fc_kargs_release(&n->k.args);
	n->k.func = k->func;
	n->k.dims = k->dims;
	n->k.args = k->args;
	if (k->ctx)
		n->k.ctx = k->ctx;
	k->args = (struct fc_kargs){ .params = NULL };
	fc_node_bind_params(n);
}

/* Graph node h, or exec he's copy of graph node h (he non-NULL). */
static CUresult fc_kernel_node_set(CUgraphExec he, CUgraphNode h,
				   const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
	struct fc_kernel_set k;
	CUresult r = fc_kernel_set_make(p, &k);
	if (r != CUDA_SUCCESS)
		return r;
	struct fc_node *n = NULL;
	fc_lock();
	if (!he) {
		n = fc_node_find(h);
	} else {
		struct fc_exec *e = fc_exec_find(he);
		for (size_t i = 0; e && h && !n && i < e->nr; i++)
			if (e->nodes[i].origin == (const struct fc_node *)h)
				n = &e->nodes[i];
	}
	if (n && n->type == CU_GRAPH_NODE_TYPE_KERNEL)
		fc_kernel_set_apply(n, &k);
	else
		r = CUDA_ERROR_INVALID_VALUE;
	fc_unlock();
	fc_kargs_release(&k.args);
	return r;
}

CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
					       const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
	FC_GUARD("cuGraphKernelNodeSetParams_v2", 0);
	return fc_kernel_node_set(NULL, hNode, nodeParams);
}

CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode,
					    const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	FC_GUARD("cuGraphKernelNodeSetParams", 0);
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_KERNEL_NODE_PARAMS_v2 p = fc_params_v2(nodeParams);
	return fc_kernel_node_set(NULL, hNode, &p);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
						   const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
	FC_GUARD("cuGraphExecKernelNodeSetParams_v2", 0);
	if (!hGraphExec)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_kernel_node_set(hGraphExec, hNode, nodeParams);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	FC_GUARD("cuGraphExecKernelNodeSetParams", 0);
	if (!hGraphExec || !nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_KERNEL_NODE_PARAMS_v2 p = fc_params_v2(nodeParams);
	return fc_kernel_node_set(hGraphExec, hNode, &p);
}

/* Whether g has e's shape (as many nodes, the same type at each place);
 * if not, why, with the first node of g that differs (NULL: none). */
static CUgraphExecUpdateResult fc_update_check(const struct fc_exec *e,
					       const struct fc_graph *g, CUgraphNode *at)
{
	size_t n = e->nr < g->nr ? e->nr : g->nr;
	*at = NULL;
	for (size_t i = 0; i < n; i++) {
		if (e->nodes[i].type != g->nodes[i]->type) {
			*at = (CUgraphNode)g->nodes[i];
			return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
		}
	}
	if (e->nr == g->nr)
		return CU_GRAPH_EXEC_UPDATE_SUCCESS;
	if (g->nr > n)
		*at = (CUgraphNode)g->nodes[n];
	return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
}

/* Every node of e takes the params of g's node at its place (copies made
 * first: on CUDA_ERROR_OUT_OF_MEMORY e is unchanged). Lock held. */
static CUresult fc_update_apply(struct fc_exec *e, const struct fc_graph *g)
{
	struct fc_node *fresh = e->nr ? malloc(e->nr * sizeof *fresh) : NULL;
	if (e->nr && !fresh)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t made = 0;
	for (; made < e->nr; made++)
		if (fc_node_copy(&fresh[made], g->nodes[made]) != CUDA_SUCCESS)
			break;
	if (made < e->nr) {
		while (made--)
			fc_node_release(&fresh[made]);
		free(fresh);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; i < e->nr; i++) {
		fc_node_release(&e->nodes[i]);
		e->nodes[i] = fresh[i];
		e->nodes[i].origin = g->nodes[i];
		fc_node_bind_params(&e->nodes[i]);
	}
	free(fresh);
	return CUDA_SUCCESS;
}

/* In place, when hGraph has the exec's topology (no edges here: its nodes
 * in order, each of the same type): every node takes the graph's params,
 * function included. Otherwise the exec is unchanged and the result says
 * why, as a driver reports it. */
static CUresult fc_exec_update(CUgraphExec he, CUgraph hg, CUgraphExecUpdateResultInfo *info)
{
	if (!info)
		return CUDA_ERROR_INVALID_VALUE;
	*info = (CUgraphExecUpdateResultInfo){ CU_GRAPH_EXEC_UPDATE_ERROR, NULL, NULL };
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_exec *e = fc_exec_find(he);
	struct fc_graph *g = fc_graph_find(hg);
	if (e && g) {
		info->result = fc_update_check(e, g, &info->errorNode);
		r = info->result == CU_GRAPH_EXEC_UPDATE_SUCCESS ? fc_update_apply(e, g)
			: CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
		if (r == CUDA_ERROR_OUT_OF_MEMORY)
			info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
	}
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
				      CUgraphExecUpdateResultInfo *resultInfo)
{
	FC_GUARD("cuGraphExecUpdate_v2", 0);
	return fc_exec_update(hGraphExec, hGraph, resultInfo);
}

/* The CUDA 10.2 ABI: the error node and the result apart. */
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
				   CUgraphNode *hErrorNode_out,
				   CUgraphExecUpdateResult *updateResult_out)
{
	FC_GUARD("cuGraphExecUpdate", 0);
	if (!hErrorNode_out || !updateResult_out)
		return CUDA_ERROR_INVALID_VALUE;
	CUgraphExecUpdateResultInfo info;
	CUresult r = fc_exec_update(hGraphExec, hGraph, &info);
	*hErrorNode_out = info.errorNode;
	*updateResult_out = info.result;
	return r;
}

/* ---- launch ---- */

static CUresult fc_node_body(const struct fc_node *n)
{
	switch (n->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		return fc_kernel_run(n->k.func, &n->k.args, n->dev, n->k.dims.grid);
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		return fc_copy_run(n->cp.dst, n->cp.src, n->cp.bytes, n->dev);
	case CU_GRAPH_NODE_TYPE_MEMSET:
		return fc_memset_run(n->set.dst, n->set.value, n->set.n, n->set.elem, n->dev);
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* FAKECUDA_VTIME: each node is an operation on the launch stream, on the
 * engine the same launch, copy or memset would use. Lock held. */
static CUresult fc_node_run(const struct fc_node *n, CUstream s)
{
	struct fc_op op;
	enum fc_eng e = n->type == CU_GRAPH_NODE_TYPE_MEMCPY
		      ? fc_copy_engine(n->cp.dst, n->cp.src) : FC_ENG_SM;
	fc_op_begin(&op, s, n->dev, e);
	CUresult r = fc_node_body(n);
	fc_op_end(&op);
	return r;
}

/* Runs the nodes in capture order at submission, each on the ordinal it
 * was captured on (the stream only orders the launch), charging the clock
 * as the same launches, copies and memsets would; stops at the first
 * failing node. The lock is held throughout, so an ExecDestroy on another
 * thread waits for the launch. A graph launched into a capturing stream
 * would be a child-graph node, which is not modelled. */
static CUresult fc_graph_launch(CUgraphExec hExec, CUstream s)
{
	if (!fc_valid_stream(s))
		return CUDA_ERROR_INVALID_HANDLE;
	CUresult r = CUDA_SUCCESS;
	fc_lock();
	struct fc_exec *e = fc_exec_find(hExec);
	if (!e)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (fc_stream_capture(s))
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	else
		for (size_t i = 0; r == CUDA_SUCCESS && i < e->nr; i++)
			r = fc_node_run(&e->nodes[i], s);
	fc_unlock();
	return r;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	FC_GUARD("cuGraphLaunch", FC_CTX);
	return fc_graph_launch(hGraphExec, hStream);
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	FC_GUARD("cuGraphLaunch_ptsz", FC_CTX);
	return fc_graph_launch(hGraphExec, hStream);
}

/* Nothing to upload: the simulated device reads the exec where it is. */
static CUresult fc_graph_upload(CUgraphExec hExec, CUstream s)
{
	if (!fc_valid_stream(s))
		return CUDA_ERROR_INVALID_HANDLE;
	fc_lock();
	bool ok = fc_exec_find(hExec) != NULL;
	fc_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	FC_GUARD("cuGraphUpload", FC_CTX);
	return fc_graph_upload(hGraphExec, hStream);
}

CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	FC_GUARD("cuGraphUpload_ptsz", FC_CTX);
	return fc_graph_upload(hGraphExec, hStream);
}
