/* SPDX-License-Identifier: MIT */
/* kvtier test double: the stream-capture and graph half of the stand-in
 * runtime. Each export is one driver call through the entry resolved at
 * start-up (rt_internal.h), so an interposer's resolver hooks see it; the
 * runtime's graph handles are the driver's (cudaGraph_t is a CUgraph,
 * cudaGraphNode_t a CUgraphNode, as in the real runtime). Outputs are
 * written only on success. */
#include <stddef.h>

#include "rt_internal.h"

/* ---- capture ---------------------------------------------------------------- */

static cudaError_t rt_begin_capture(PFN_cuStreamBeginCapture_v10010 fn, cudaStream_t stream,
				    enum cudaStreamCaptureMode mode)
{
	if (!fn)
		return rt_ret(cudaErrorNotSupported);
	/* cudaStreamCaptureMode values equal CUstreamCaptureMode values. */
	return rt_ret_cu(fn((CUstream)stream, (CUstreamCaptureMode)mode));
}

RT_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	RT_ENTER();
	return rt_begin_capture(rt_drv.cuStreamBeginCapture, stream, mode);
}

RT_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream,
					       enum cudaStreamCaptureMode mode)
{
	RT_ENTER();
	return rt_begin_capture(rt_drv.cuStreamBeginCapture_ptsz, stream, mode);
}

static cudaError_t rt_end_capture(PFN_cuStreamEndCapture_v10000 fn, cudaStream_t stream,
				  cudaGraph_t *pGraph)
{
	if (!fn)
		return rt_ret(cudaErrorNotSupported);
	if (!pGraph)
		return rt_ret(cudaErrorInvalidValue);
	CUgraph g = NULL;
	CUresult res = fn((CUstream)stream, &g);
	if (res == CUDA_SUCCESS)
		*pGraph = (cudaGraph_t)g;
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	RT_ENTER();
	return rt_end_capture(rt_drv.cuStreamEndCapture, stream, pGraph);
}

RT_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
	RT_ENTER();
	return rt_end_capture(rt_drv.cuStreamEndCapture_ptsz, stream, pGraph);
}

/* ---- graphs ----------------------------------------------------------------- */

/* The CUDA 12 form: flags, no error node or log. */
RT_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
					unsigned long long flags)
{
	RT_ENTER();
	RT_NEED(cuGraphInstantiateWithFlags);
	if (!pGraphExec)
		return rt_ret(cudaErrorInvalidValue);
	CUgraphExec e = NULL;
	CUresult res = rt_drv.cuGraphInstantiateWithFlags(&e, (CUgraph)graph, flags);
	if (res == CUDA_SUCCESS)
		*pGraphExec = (cudaGraphExec_t)e;
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	RT_ENTER();
	RT_NEED(cuGraphLaunch);
	return rt_ret_cu(rt_drv.cuGraphLaunch((CUgraphExec)graphExec, (CUstream)stream));
}

RT_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	RT_ENTER();
	RT_NEED(cuGraphLaunch_ptsz);
	return rt_ret_cu(rt_drv.cuGraphLaunch_ptsz((CUgraphExec)graphExec, (CUstream)stream));
}

RT_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	RT_ENTER();
	RT_NEED(cuGraphExecDestroy);
	return rt_ret_cu(rt_drv.cuGraphExecDestroy((CUgraphExec)graphExec));
}

RT_API cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	RT_ENTER();
	RT_NEED(cuGraphDestroy);
	return rt_ret_cu(rt_drv.cuGraphDestroy((CUgraph)graph));
}

/* ---- nodes and updates ----------------------------------------------------- */

RT_API cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
	RT_ENTER();
	RT_NEED(cuGraphGetNodes);
	return rt_ret_cu(rt_drv.cuGraphGetNodes((CUgraph)graph, (CUgraphNode *)nodes, numNodes));
}

/* cudaGraphNodeType values equal CUgraphNodeType values. */
RT_API cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType)
{
	RT_ENTER();
	RT_NEED(cuGraphNodeGetType);
	if (!pType)
		return rt_ret(cudaErrorInvalidValue);
	CUgraphNodeType t;
	CUresult res = rt_drv.cuGraphNodeGetType((CUgraphNode)node, &t);
	if (res == CUDA_SUCCESS)
		*pType = (enum cudaGraphNodeType)t;
	return rt_ret_cu(res);
}

/* The runtime's struct is the driver's v1 fields; func is the driver handle
 * (the stand-in has no fat binaries, as for cudaLaunchKernel). */
static CUDA_KERNEL_NODE_PARAMS rt_kernel_params(const struct cudaKernelNodeParams *p)
{
	return (CUDA_KERNEL_NODE_PARAMS){
		.func = (CUfunction)p->func,
		.gridDimX = p->gridDim.x, .gridDimY = p->gridDim.y, .gridDimZ = p->gridDim.z,
		.blockDimX = p->blockDim.x, .blockDimY = p->blockDim.y,
		.blockDimZ = p->blockDim.z, .sharedMemBytes = p->sharedMemBytes,
		.kernelParams = p->kernelParams, .extra = p->extra,
	};
}

RT_API cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node,
						struct cudaKernelNodeParams *pNodeParams)
{
	RT_ENTER();
	RT_NEED(cuGraphKernelNodeGetParams);
	if (!pNodeParams)
		return rt_ret(cudaErrorInvalidValue);
	CUDA_KERNEL_NODE_PARAMS p;
	CUresult res = rt_drv.cuGraphKernelNodeGetParams((CUgraphNode)node, &p);
	if (res == CUDA_SUCCESS)
		*pNodeParams = (struct cudaKernelNodeParams){
			.func = (void *)p.func,
			.gridDim = { p.gridDimX, p.gridDimY, p.gridDimZ },
			.blockDim = { p.blockDimX, p.blockDimY, p.blockDimZ },
			.sharedMemBytes = p.sharedMemBytes,
			.kernelParams = p.kernelParams, .extra = p.extra,
		};
	return rt_ret_cu(res);
}

RT_API cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
						const struct cudaKernelNodeParams *pNodeParams)
{
	RT_ENTER();
	RT_NEED(cuGraphKernelNodeSetParams);
	if (!pNodeParams)
		return rt_ret(cudaErrorInvalidValue);
	CUDA_KERNEL_NODE_PARAMS p = rt_kernel_params(pNodeParams);
	return rt_ret_cu(rt_drv.cuGraphKernelNodeSetParams((CUgraphNode)node, &p));
}

RT_API cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec,
						    cudaGraphNode_t node,
						    const struct cudaKernelNodeParams *pNodeParams)
{
	RT_ENTER();
	RT_NEED(cuGraphExecKernelNodeSetParams);
	if (!pNodeParams)
		return rt_ret(cudaErrorInvalidValue);
	CUDA_KERNEL_NODE_PARAMS p = rt_kernel_params(pNodeParams);
	return rt_ret_cu(rt_drv.cuGraphExecKernelNodeSetParams((CUgraphExec)hGraphExec,
							       (CUgraphNode)node, &p));
}

/* The CUDA 12 form; the result info is filled on failure too (its enum
 * and the driver's share their values). */
RT_API cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
				       cudaGraphExecUpdateResultInfo *resultInfo)
{
	RT_ENTER();
	RT_NEED(cuGraphExecUpdate);
	if (!resultInfo)
		return rt_ret(cudaErrorInvalidValue);
	CUgraphExecUpdateResultInfo info = { CU_GRAPH_EXEC_UPDATE_ERROR, NULL, NULL };
	CUresult res = rt_drv.cuGraphExecUpdate((CUgraphExec)hGraphExec, (CUgraph)hGraph, &info);
	*resultInfo = (cudaGraphExecUpdateResultInfo){
		.result = (enum cudaGraphExecUpdateResult)info.result,
		.errorNode = (cudaGraphNode_t)info.errorNode,
		.errorFromNode = (cudaGraphNode_t)info.errorFromNode,
	};
	return rt_ret_cu(res);
}
