// SPDX-License-Identifier: MIT
/* Launches the cuLaunchKernel hook does not see: cuLaunchKernelEx (the
 * runtime's cudaLaunchKernelExC, launches with attributes such as
 * programmatic dependent launch, cluster dimensions) and CUDA graphs, which
 * servers use for their decode steps (vLLM, SGLang, TensorRT-LLM). A graph's
 * kernel parameters are copied into the graph when it is captured; kvtier
 * reads them once when the graph is instantiated and credits what they name
 * at each cuGraphLaunch (profiler/evidence.c, "CUDA graphs").
 *
 * Launch events: addr = function (cuLaunchKernelEx) or executable graph
 * (cuGraphLaunch), size = threads per block (Ex; 0 for a graph), aux =
 * stream, aux2 = blocks (Ex; 0 for a graph). */
#include "hook_driver.h"
#include "../cuda_shim/shim.h"
#include "../profiler/decode.h"
#include "../profiler/evidence.h"
#include "../tier/step.h"

#define LAUNCH_EX_HOOK(exp)                                                            \
KVT_EXPORT CUresult exp(const CUlaunchConfig *cfg, CUfunction f, void **params,       \
			void **extra)                                                  \
{                                                                                      \
	DRV_PROLOGUE(exp, cfg, f, params, extra);                                      \
	CUresult r = real(cfg, f, params, extra);                                      \
	uint64_t blocks = 0, threads = 0, s = 0;                                       \
	if (cfg) {                                                                     \
		blocks = (uint64_t)cfg->gridDimX * cfg->gridDimY * cfg->gridDimZ;      \
		threads = (uint64_t)cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ;  \
		s = U64(cfg->hStream);                                                 \
	}                                                                              \
	kvt_rec_event(KVT_OP_LAUNCH, KVT_KIND_NONE, KVT_API_cuLaunchKernelEx, U64(f),  \
		      threads, s, blocks, r);                                          \
	if (r == CUDA_SUCCESS) {                                                       \
		kvt_prof_on_launch(U64(f), params, s);                                 \
		if (kvt_decode_on_launch(U64(f), params, cfg ? cfg->gridDimX : 0, s))  \
			kvt_step_after_copy(s);                                        \
	}                                                                              \
	kvt_hook_exit();                                                               \
	return r;                                                                      \
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *, CUfunction, void **, void **);
LAUNCH_EX_HOOK(cuLaunchKernelEx)
LAUNCH_EX_HOOK(cuLaunchKernelEx_ptsz)

/* ---- graphs ---- */

static void scan_node(uint64_t func, void **params, void *arg)
{
	kvt_prof_graph_scan(arg, func, params);
}

/* A graph was instantiated as exec: its kernel nodes' parameters are read
 * now (their values were copied into the graph, and the graph may be
 * destroyed at once: PyTorch does). */
static void instantiated(CUgraphExec exec, CUgraph g)
{
	struct kvt_graph_ev ev = { .exec = U64(exec) };   /* 2.7 KiB: an application stack */
	if (!kvt_prof_graphs_wanted()) {     /* no node walk where nothing could be found */
		kvt_prof_graph_forget(ev.exec);
		return;
	}
	if (kvt_cuda_graph_kernels(g, scan_node, &ev) < 0)
		ev.nr = 0;                                 /* nothing read: keep nothing */
	kvt_prof_graph_publish(&ev);
}

KVT_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g,
						unsigned long long flags)
{
	DRV_PROLOGUE(cuGraphInstantiateWithFlags, exec, g, flags);
	CUresult r = real(exec, g, flags);
	if (r == CUDA_SUCCESS && exec)
		instantiated(*exec, g);
	kvt_hook_exit();
	return r;
}

#define INSTANTIATE_PARAMS_HOOK(exp)                                                   \
KVT_EXPORT CUresult exp(CUgraphExec *exec, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) \
{                                                                                      \
	DRV_PROLOGUE(exp, exec, g, p);                                                 \
	CUresult r = real(exec, g, p);                                                 \
	if (r == CUDA_SUCCESS && exec)                                                 \
		instantiated(*exec, g);                                                \
	kvt_hook_exit();                                                               \
	return r;                                                                      \
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
INSTANTIATE_PARAMS_HOOK(cuGraphInstantiateWithParams)
INSTANTIATE_PARAMS_HOOK(cuGraphInstantiateWithParams_ptsz)

#define GRAPH_LAUNCH_HOOK(exp)                                                         \
KVT_EXPORT CUresult exp(CUgraphExec exec, CUstream s)                                  \
{                                                                                      \
	DRV_PROLOGUE(exp, exec, s);                                                    \
	CUresult r = real(exec, s);                                                    \
	kvt_rec_event(KVT_OP_LAUNCH, KVT_KIND_NONE, KVT_API_cuGraphLaunch, U64(exec),  \
		      0, U64(s), 0, r);                                                \
	if (r == CUDA_SUCCESS)                                                         \
		kvt_prof_on_graph_launch(U64(exec));                                   \
	kvt_hook_exit();                                                               \
	return r;                                                                      \
}
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
GRAPH_LAUNCH_HOOK(cuGraphLaunch)
GRAPH_LAUNCH_HOOK(cuGraphLaunch_ptsz)

/* The executable graph now runs g's nodes, parameters included (a server
 * that updates its graphs in place each step, as llama.cpp does): what it
 * names is read again from g, as at instantiation. (The CUDA 12 ABI; the
 * pre-12 four-argument cuGraphExecUpdate is passed through unseen.) */
KVT_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph g,
					 CUgraphExecUpdateResultInfo *info)
{
	DRV_PROLOGUE(cuGraphExecUpdate_v2, exec, g, info);
	CUresult r = real(exec, g, info);
	if (r == CUDA_SUCCESS && exec && g)
		instantiated(exec, g);
	kvt_hook_exit();
	return r;
}

/* The handle may come back for another graph: its evidence goes first. */
KVT_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec)
{
	DRV_PROLOGUE(cuGraphExecDestroy, exec);
	kvt_prof_graph_forget(U64(exec));
	CUresult r = real(exec);
	kvt_hook_exit();
	return r;
}
