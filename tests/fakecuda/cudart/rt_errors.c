/* SPDX-License-Identifier: MIT */
/* kvtier test double: names and descriptions of cudaError_t values for the
 * stand-in runtime (cudaGetErrorName / cudaGetErrorString).  Names follow
 * driver_types.h of CUDA 13.0; descriptions are given for the codes the
 * tests and workloads meet, the rest reuse a generic text. */
#include "rt_internal.h"

struct rt_error_info {
	int code;
	const char *name;
};

static const struct rt_error_info rt_errors[] = {
	{ 0, "cudaSuccess" },
	{ 1, "cudaErrorInvalidValue" },
	{ 2, "cudaErrorMemoryAllocation" },
	{ 3, "cudaErrorInitializationError" },
	{ 4, "cudaErrorCudartUnloading" },
	{ 5, "cudaErrorProfilerDisabled" },
	{ 6, "cudaErrorProfilerNotInitialized" },
	{ 7, "cudaErrorProfilerAlreadyStarted" },
	{ 8, "cudaErrorProfilerAlreadyStopped" },
	{ 9, "cudaErrorInvalidConfiguration" },
	{ 12, "cudaErrorInvalidPitchValue" },
	{ 13, "cudaErrorInvalidSymbol" },
	{ 16, "cudaErrorInvalidHostPointer" },
	{ 17, "cudaErrorInvalidDevicePointer" },
	{ 18, "cudaErrorInvalidTexture" },
	{ 19, "cudaErrorInvalidTextureBinding" },
	{ 20, "cudaErrorInvalidChannelDescriptor" },
	{ 21, "cudaErrorInvalidMemcpyDirection" },
	{ 22, "cudaErrorAddressOfConstant" },
	{ 23, "cudaErrorTextureFetchFailed" },
	{ 24, "cudaErrorTextureNotBound" },
	{ 25, "cudaErrorSynchronizationError" },
	{ 26, "cudaErrorInvalidFilterSetting" },
	{ 27, "cudaErrorInvalidNormSetting" },
	{ 28, "cudaErrorMixedDeviceExecution" },
	{ 31, "cudaErrorNotYetImplemented" },
	{ 32, "cudaErrorMemoryValueTooLarge" },
	{ 34, "cudaErrorStubLibrary" },
	{ 35, "cudaErrorInsufficientDriver" },
	{ 36, "cudaErrorCallRequiresNewerDriver" },
	{ 37, "cudaErrorInvalidSurface" },
	{ 43, "cudaErrorDuplicateVariableName" },
	{ 44, "cudaErrorDuplicateTextureName" },
	{ 45, "cudaErrorDuplicateSurfaceName" },
	{ 46, "cudaErrorDevicesUnavailable" },
	{ 49, "cudaErrorIncompatibleDriverContext" },
	{ 52, "cudaErrorMissingConfiguration" },
	{ 53, "cudaErrorPriorLaunchFailure" },
	{ 65, "cudaErrorLaunchMaxDepthExceeded" },
	{ 66, "cudaErrorLaunchFileScopedTex" },
	{ 67, "cudaErrorLaunchFileScopedSurf" },
	{ 68, "cudaErrorSyncDepthExceeded" },
	{ 69, "cudaErrorLaunchPendingCountExceeded" },
	{ 98, "cudaErrorInvalidDeviceFunction" },
	{ 100, "cudaErrorNoDevice" },
	{ 101, "cudaErrorInvalidDevice" },
	{ 102, "cudaErrorDeviceNotLicensed" },
	{ 103, "cudaErrorSoftwareValidityNotEstablished" },
	{ 127, "cudaErrorStartupFailure" },
	{ 200, "cudaErrorInvalidKernelImage" },
	{ 201, "cudaErrorDeviceUninitialized" },
	{ 205, "cudaErrorMapBufferObjectFailed" },
	{ 206, "cudaErrorUnmapBufferObjectFailed" },
	{ 207, "cudaErrorArrayIsMapped" },
	{ 208, "cudaErrorAlreadyMapped" },
	{ 209, "cudaErrorNoKernelImageForDevice" },
	{ 210, "cudaErrorAlreadyAcquired" },
	{ 211, "cudaErrorNotMapped" },
	{ 212, "cudaErrorNotMappedAsArray" },
	{ 213, "cudaErrorNotMappedAsPointer" },
	{ 214, "cudaErrorECCUncorrectable" },
	{ 215, "cudaErrorUnsupportedLimit" },
	{ 216, "cudaErrorDeviceAlreadyInUse" },
	{ 217, "cudaErrorPeerAccessUnsupported" },
	{ 218, "cudaErrorInvalidPtx" },
	{ 219, "cudaErrorInvalidGraphicsContext" },
	{ 220, "cudaErrorNvlinkUncorrectable" },
	{ 221, "cudaErrorJitCompilerNotFound" },
	{ 222, "cudaErrorUnsupportedPtxVersion" },
	{ 223, "cudaErrorJitCompilationDisabled" },
	{ 224, "cudaErrorUnsupportedExecAffinity" },
	{ 225, "cudaErrorUnsupportedDevSideSync" },
	{ 226, "cudaErrorContained" },
	{ 300, "cudaErrorInvalidSource" },
	{ 301, "cudaErrorFileNotFound" },
	{ 302, "cudaErrorSharedObjectSymbolNotFound" },
	{ 303, "cudaErrorSharedObjectInitFailed" },
	{ 304, "cudaErrorOperatingSystem" },
	{ 400, "cudaErrorInvalidResourceHandle" },
	{ 401, "cudaErrorIllegalState" },
	{ 402, "cudaErrorLossyQuery" },
	{ 500, "cudaErrorSymbolNotFound" },
	{ 600, "cudaErrorNotReady" },
	{ 700, "cudaErrorIllegalAddress" },
	{ 701, "cudaErrorLaunchOutOfResources" },
	{ 702, "cudaErrorLaunchTimeout" },
	{ 703, "cudaErrorLaunchIncompatibleTexturing" },
	{ 704, "cudaErrorPeerAccessAlreadyEnabled" },
	{ 705, "cudaErrorPeerAccessNotEnabled" },
	{ 708, "cudaErrorSetOnActiveProcess" },
	{ 709, "cudaErrorContextIsDestroyed" },
	{ 710, "cudaErrorAssert" },
	{ 711, "cudaErrorTooManyPeers" },
	{ 712, "cudaErrorHostMemoryAlreadyRegistered" },
	{ 713, "cudaErrorHostMemoryNotRegistered" },
	{ 714, "cudaErrorHardwareStackError" },
	{ 715, "cudaErrorIllegalInstruction" },
	{ 716, "cudaErrorMisalignedAddress" },
	{ 717, "cudaErrorInvalidAddressSpace" },
	{ 718, "cudaErrorInvalidPc" },
	{ 719, "cudaErrorLaunchFailure" },
	{ 720, "cudaErrorCooperativeLaunchTooLarge" },
	{ 721, "cudaErrorTensorMemoryLeak" },
	{ 800, "cudaErrorNotPermitted" },
	{ 801, "cudaErrorNotSupported" },
	{ 802, "cudaErrorSystemNotReady" },
	{ 803, "cudaErrorSystemDriverMismatch" },
	{ 804, "cudaErrorCompatNotSupportedOnDevice" },
	{ 805, "cudaErrorMpsConnectionFailed" },
	{ 806, "cudaErrorMpsRpcFailure" },
	{ 807, "cudaErrorMpsServerNotReady" },
	{ 808, "cudaErrorMpsMaxClientsReached" },
	{ 809, "cudaErrorMpsMaxConnectionsReached" },
	{ 810, "cudaErrorMpsClientTerminated" },
	{ 811, "cudaErrorCdpNotSupported" },
	{ 812, "cudaErrorCdpVersionMismatch" },
	{ 900, "cudaErrorStreamCaptureUnsupported" },
	{ 901, "cudaErrorStreamCaptureInvalidated" },
	{ 902, "cudaErrorStreamCaptureMerge" },
	{ 903, "cudaErrorStreamCaptureUnmatched" },
	{ 904, "cudaErrorStreamCaptureUnjoined" },
	{ 905, "cudaErrorStreamCaptureIsolation" },
	{ 906, "cudaErrorStreamCaptureImplicit" },
	{ 907, "cudaErrorCapturedEvent" },
	{ 908, "cudaErrorStreamCaptureWrongThread" },
	{ 909, "cudaErrorTimeout" },
	{ 910, "cudaErrorGraphExecUpdateFailure" },
	{ 911, "cudaErrorExternalDevice" },
	{ 912, "cudaErrorInvalidClusterSize" },
	{ 913, "cudaErrorFunctionNotLoaded" },
	{ 914, "cudaErrorInvalidResourceType" },
	{ 915, "cudaErrorInvalidResourceConfiguration" },
	{ 999, "cudaErrorUnknown" },
};

/* Descriptions (the real runtime's wording) for the common codes. */
static const char *rt_error_text(int code)
{
	switch (code) {
	case 0:   return "no error";
	case 1:   return "invalid argument";
	case 2:   return "out of memory";
	case 3:   return "initialization error";
	case 4:   return "driver shutting down";
	case 21:  return "invalid copy direction for memcpy";
	case 34:  return "CUDA driver is a stub library";
	case 35:  return "CUDA driver version is insufficient for CUDA runtime version";
	case 36:  return "API call is not supported in the installed CUDA driver";
	case 100: return "no CUDA-capable device is detected";
	case 101: return "invalid device ordinal";
	case 201: return "invalid device context";
	case 400: return "invalid resource handle";
	case 500: return "named symbol not found";
	case 600: return "device not ready";
	case 700: return "an illegal memory access was encountered";
	case 712: return "part or all of the requested memory range is already mapped";
	case 713: return "pointer does not correspond to a registered memory region";
	case 719: return "unspecified launch failure";
	case 801: return "operation not supported";
	case 999: return "unknown error";
	default:  return NULL;
	}
}

static const struct rt_error_info *rt_error_find(cudaError_t err)
{
	for (size_t i = 0; i < sizeof rt_errors / sizeof rt_errors[0]; i++)
		if (rt_errors[i].code == (int)err)
			return &rt_errors[i];
	return NULL;
}

const char *rt_error_name(cudaError_t err)
{
	const struct rt_error_info *e = rt_error_find(err);
	return e ? e->name : NULL;
}

const char *rt_error_string(cudaError_t err)
{
	const struct rt_error_info *e = rt_error_find(err);
	if (!e)
		return NULL;
	const char *t = rt_error_text(e->code);
	return t ? t : e->name;
}

RT_API const char *cudaGetErrorName(cudaError_t error)
{
	const char *n = rt_error_name(error);
	return n ? n : "cudaErrorUnknown";
}

RT_API const char *cudaGetErrorString(cudaError_t error)
{
	const char *s = rt_error_string(error);
	return s ? s : "unrecognized error code";
}
