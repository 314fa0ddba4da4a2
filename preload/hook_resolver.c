// SPDX-License-Identifier: MIT
/* The driver's resolvers, wrapped: cuGetProcAddress (4-argument ABI) and
 * cuGetProcAddress_v2 call the real resolver with the caller's cudaVersion
 * and flags unchanged, then swap the returned pointer for a hook only when it
 * is exactly an ABI kvtier hooks (kvt_substitute). Results pass through.
 * (cuGetProcAddress_v2_ptsz is a static inline in cuda.h over _v2.) */
#include "hook_driver.h"

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int ver, cuuint64_t flags);

KVT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int ver,
				     cuuint64_t flags)
{
	__typeof__(&cuGetProcAddress) real = DRV_REAL(cuGetProcAddress);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r = real(symbol, pfn, ver, flags);
	if (r == CUDA_SUCCESS && pfn && *pfn)
		*pfn = kvt_substitute(symbol, *pfn);
	return r;
}

KVT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int ver,
					cuuint64_t flags,
					CUdriverProcAddressQueryResult *status)
{
	__typeof__(&cuGetProcAddress_v2) real = DRV_REAL(cuGetProcAddress_v2);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r = real(symbol, pfn, ver, flags, status);
	if (r == CUDA_SUCCESS && pfn && *pfn)
		*pfn = kvt_substitute(symbol, *pfn);
	return r;
}
