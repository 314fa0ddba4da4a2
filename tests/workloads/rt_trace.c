/* SPDX-License-Identifier: MIT */
/* librt-trace.so: an LD_PRELOAD tracer for the runtime tests.  Logs to stderr
 * every dlopen, every dlsym on a non-special handle, and every lookup made
 * through cuGetProcAddress_v2 or the pointer it hands out for
 * "cuGetProcAddress", as
 *   TRACE dlopen <name> <flags>
 *   TRACE dlsym <name>
 *   TRACE gpa <via> <symbol> <version> <flags> <status-null>
 * Test-only: wraps exactly what the real interposer wraps. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <cuda.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
			   CUdriverProcAddressQueryResult *);
static gpa_fn real_gpa;

static void *(*real_dlsym_fn(void))(void *, const char *)
{
	static void *(*fn)(void *, const char *);
	if (!fn)
		fn = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!fn)
		fn = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	return fn;
}

static CUresult trace_gpa(const char *via, const char *sym, void **pfn, int ver,
			  cuuint64_t flags, CUdriverProcAddressQueryResult *st);

static CUresult gpa_direct(const char *sym, void **pfn, int ver, cuuint64_t flags,
			   CUdriverProcAddressQueryResult *st)
{
	return trace_gpa("dlsym", sym, pfn, ver, flags, st);
}

static CUresult gpa_returned(const char *sym, void **pfn, int ver, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *st)
{
	return trace_gpa("returned", sym, pfn, ver, flags, st);
}

static CUresult trace_gpa(const char *via, const char *sym, void **pfn, int ver,
			  cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
	fprintf(stderr, "TRACE gpa %s '%s' %d %llu %s\n", via, sym ? sym : "(null)", ver,
		(unsigned long long)flags, st ? "status" : "null");
	CUresult r = real_gpa(sym, pfn, ver, flags, st);
	if (r == CUDA_SUCCESS && sym && !strcmp(sym, "cuGetProcAddress") && ver >= 12000 &&
	    pfn && *pfn == (void *)real_gpa)
		*pfn = (void *)gpa_returned;
	return r;
}

__attribute__((visibility("default"))) void *dlopen(const char *name, int flags)
{
	void *(*real)(const char *, int) =
		(void *(*)(const char *, int))real_dlsym_fn()(RTLD_NEXT, "dlopen");
	if (name && !strstr(name, "librt-trace"))
		fprintf(stderr, "TRACE dlopen %s %d\n", name, flags);
	return real(name, flags);
}

__attribute__((visibility("default"))) void *dlsym(void *h, const char *name)
{
	void *p = real_dlsym_fn()(h, name);
	if (h != RTLD_NEXT && h != RTLD_DEFAULT) {
		fprintf(stderr, "TRACE dlsym %s\n", name);
		if (p && !strcmp(name, "cuGetProcAddress_v2")) {
			real_gpa = (gpa_fn)p;
			return (void *)gpa_direct;
		}
	}
	return p;
}
