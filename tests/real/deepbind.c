// SPDX-License-Identifier: MIT
/* kvtier real-program check: RTLD_DEEPBIND.
 *   deepbind LIBDEEP LIBCUDA
 * dlopen(LIBDEEP, RTLD_NOW | RTLD_DEEPBIND) and run its mmap/dlsym code
 * (libdeep.c); then dlopen the CUDA driver stand-in with RTLD_DEEPBIND (as
 * some frameworks do) and allocate/free 2 MiB through cuGetProcAddress_v2.
 * The executable maps 4 MiB itself too. Deterministic output; exit 0 when
 * everything worked. */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/mman.h>

#include <cuda.h>

/* Exported from the executable (-rdynamic); the DEEPBIND library's own
 * definition must be the one it calls. */
__attribute__((visibility("default"))) const char *kvt_deep_whoami(void) { return "executable"; }

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	printf("main: whoami from the executable: %s\n", kvt_deep_whoami());
	void *m = mmap(NULL, 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 3;
	((char *)m)[0] = 1;
	munmap(m, 4 << 20);

	void *h = dlopen(argv[1], RTLD_NOW | RTLD_DEEPBIND);
	if (!h) {
		printf("dlopen deep: %s\n", dlerror());
		return 4;
	}
	int (*run)(void) = (int (*)(void))dlsym(h, "kvt_deep_run");
	if (!run)
		return 5;
	int bad = run();
	fflush(stdout);
	dlclose(h);

	void *cu = dlopen(argv[2], RTLD_NOW | RTLD_DEEPBIND);
	if (!cu) {
		printf("dlopen driver: %s\n", dlerror());
		return 6;
	}
	gpa_t gpa = (gpa_t)dlsym(cu, "cuGetProcAddress_v2");
	void *fi = NULL, *fg = NULL, *fr = NULL, *fs = NULL, *fa = NULL, *ff = NULL;
	if (!gpa || gpa("cuInit", &fi, 2000, 0, NULL) || gpa("cuDeviceGet", &fg, 2000, 0, NULL) ||
	    gpa("cuDevicePrimaryCtxRetain", &fr, 7000, 0, NULL) ||
	    gpa("cuCtxSetCurrent", &fs, 4000, 0, NULL) || gpa("cuMemAlloc", &fa, 3020, 0, NULL) ||
	    gpa("cuMemFree", &ff, 3020, 0, NULL))
		return 7;
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr d = 0;
	CUresult r = ((CUresult (*)(unsigned))fi)(0);
	if (!r) r = ((CUresult (*)(CUdevice *, int))fg)(&dev, 0);
	if (!r) r = ((CUresult (*)(CUcontext *, CUdevice))fr)(&ctx, dev);
	if (!r) r = ((CUresult (*)(CUcontext))fs)(ctx);
	if (!r) r = ((CUresult (*)(CUdeviceptr *, size_t))fa)(&d, 2 << 20);
	printf("driver (DEEPBIND): cuMemAlloc 2 MiB rc=%d\n", (int)r);
	if (!r) r = ((CUresult (*)(CUdeviceptr))ff)(d);
	printf("driver (DEEPBIND): cuMemFree rc=%d\n", (int)r);
	bad |= r != CUDA_SUCCESS;
	dlclose(cu);
	printf("deepbind %s\n", bad ? "FAILED" : "ok");
	return bad;
}
