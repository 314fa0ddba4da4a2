/* SPDX-License-Identifier: MIT */
/* Link stand-ins for the preload-only cuda_shim, for unit suites that link
 * the evidence table (profiler/evidence.c): it names the sample source,
 * whose driver calls live in the shim. Such a suite never enables that
 * source, and any call fails it. Define KVT_SHIM_STUB_SUITE (its name, for
 * the message) before including this once. */
#ifndef KVT_SHIM_STUBS_H
#define KVT_SHIM_STUBS_H

#include "kvt_test.h"
#include "../../cuda_shim/shim.h"

CUresult kvt_cuda_advise(CUdeviceptr p, size_t b, CUmem_advise a, CUmemLocationType t, int id)
{
	(void)p, (void)b, (void)a, (void)t, (void)id;
	CU_FAIL("driver call from " KVT_SHIM_STUB_SUITE);
	return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult kvt_cuda_current_device(CUdevice *dev)
{
	(void)dev;
	CU_FAIL("driver call from " KVT_SHIM_STUB_SUITE);
	return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult kvt_cuda_range_attr(void *d, size_t n, CUmem_range_attribute a, CUdeviceptr p, size_t b)
{
	(void)d, (void)n, (void)a, (void)p, (void)b;
	CU_FAIL("driver call from " KVT_SHIM_STUB_SUITE);
	return CUDA_ERROR_NOT_SUPPORTED;
}
int kvt_cuda_accessed_by(CUdeviceptr p, size_t b, CUdevice dev)
{
	(void)p, (void)b, (void)dev;
	CU_FAIL("driver call from " KVT_SHIM_STUB_SUITE);
	return -1;
}

#endif
