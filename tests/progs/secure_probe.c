// SPDX-License-Identifier: MIT
/* Test program for tests/unit/test_secure.c: made set-user-ID root by the
 * test and run as an unprivileged user (AT_SECURE=1), or run plainly as the
 * control. glibc ignores LD_PRELOAD paths in secure mode, so it dlopen()s
 * libkvtier itself, then works through kvtier's exported hooks (mmap,
 * munmap, cuGetProcAddress_v2 -> cuMemAlloc/cuMemFree on the driver
 * stand-in) and prints what kvtier did to the process, one "key=value" a
 * line:
 *   secure=       getauxval(AT_SECURE)
 *   cuda=         ok, or the failing step
 *   new_threads=  threads started since before the dlopen (kvtier's migrator)
 *   stats=        1 if /dev/shm/kvtier.<pid> exists (kvtier's live counters)
 *   ld_preload=   kept, or changed (KVTIER_INHERIT=0 rewrites it)
 *   cupti=        loaded if MARKER appeared within WAIT_MS, else none
 * Usage: secure_probe LIBKVTIER LIBCUDA MARKER WAIT_MS. Exit 0 unless a step that
 * must work natively failed. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#define MiB (1ul << 20)

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t,
			  CUdriverProcAddressQueryResult *);

static int nr_threads(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* Up to wait_ms for the file `marker` (the planted libcupti.so.13 leaves
 * it when loaded: kvtier's profiler loads CUPTI one epoch after the first
 * redirected allocation, and closes it again at once when it lacks the API). */
static const char *wait_marker(const char *marker, long wait_ms)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	for (long t = 0; t <= wait_ms; t += 10) {
		if (access(marker, F_OK) == 0)
			return "loaded";
		nanosleep(&tick, NULL);
	}
	return "none";
}

/* cuInit .. cuMemAlloc 1 MiB, wait, cuMemFree through kvtier's resolver. */
static const char *driver_work(void *kvt, const char **cupti, const char *marker,
			       long wait_ms)
{
	gpa_t gpa = (gpa_t)dlsym(kvt, "cuGetProcAddress_v2");
	CUresult (*init)(unsigned) = NULL;
	CUresult (*devget)(CUdevice *, int) = NULL;
	CUresult (*retain)(CUcontext *, CUdevice) = NULL;
	CUresult (*setcur)(CUcontext) = NULL;
	CUresult (*alloc)(CUdeviceptr *, size_t) = NULL;
	CUresult (*dfree)(CUdeviceptr) = NULL;
	if (!gpa || gpa("cuInit", (void **)&init, 2000, 0, NULL) ||
	    gpa("cuDeviceGet", (void **)&devget, 2000, 0, NULL) ||
	    gpa("cuDevicePrimaryCtxRetain", (void **)&retain, 7000, 0, NULL) ||
	    gpa("cuCtxSetCurrent", (void **)&setcur, 4000, 0, NULL) ||
	    gpa("cuMemAlloc", (void **)&alloc, 3020, 0, NULL) ||
	    gpa("cuMemFree", (void **)&dfree, 3020, 0, NULL))
		return "resolve";
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr d = 0;
	if (init(0) || devget(&dev, 0) || retain(&ctx, dev) || setcur(ctx))
		return "init";
	if (alloc(&d, MiB) || !d)
		return "alloc";
	*cupti = wait_marker(marker, wait_ms);
	return dfree(d) ? "free" : "ok";
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	const char *lib = argv[1], *driver = argv[2], *marker = argv[3];
	long wait_ms = atol(argv[4]);
	int threads0 = nr_threads();
	/* what this program hands its children; KVTIER_INHERIT=0 would edit it */
	setenv("LD_PRELOAD", lib, 1);
	/* kvtier first: its references to its own hooks must bind to itself */
	void *kvt = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	void *drv = kvt ? dlopen(driver, RTLD_NOW | RTLD_GLOBAL) : NULL;
	if (!drv || !kvt) {
		fprintf(stderr, "secure_probe: %s\n", dlerror());
		return 3;
	}
	void *(*k_mmap)(void *, size_t, int, int, int, off_t) =
		(void *(*)(void *, size_t, int, int, int, off_t))dlsym(kvt, "mmap");
	int (*k_munmap)(void *, size_t) = (int (*)(void *, size_t))dlsym(kvt, "munmap");
	if (!k_mmap || !k_munmap)
		return 4;
	char *a = k_mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return 5;
	memset(a, 0x5a, 4 * MiB);
	if (a[4 * MiB - 1] != 0x5a || k_munmap(a, 4 * MiB))
		return 6;

	const char *cupti = "none";
	const char *cuda = driver_work(kvt, &cupti, marker, wait_ms);
	char shm[64];
	snprintf(shm, sizeof shm, "/dev/shm/kvtier.%d", (int)getpid());
	const char *pre = getenv("LD_PRELOAD");
	printf("secure=%lu\n", getauxval(AT_SECURE));
	printf("cuda=%s\n", cuda);
	printf("new_threads=%d\n", nr_threads() - threads0);
	printf("stats=%d\n", access(shm, F_OK) == 0);
	printf("ld_preload=%s\n", pre && !strcmp(pre, lib) ? "kept" : "changed");
	printf("cupti=%s\n", cupti);
	return strcmp(cuda, "ok") ? 7 : 0;
}
