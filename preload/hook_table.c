// SPDX-License-Identifier: MIT
/* The hook tables and pointer-identity substitution (contract in hooks.h).
 * Runs inside the resolver wrappers and the dlsym hook: no malloc; the
 * loader calls go through the platform layer's real dlsym.
 * cuda.h is deliberately not included: hooks are referenced by their
 * export names through asm labels, whatever ABI each one has. */
#include <dlfcn.h>
#include <string.h>

#include "../base/kvt.h"
#include "../cuda_shim/real.h"

#define DECL_DRV(base, exp) extern char kvt_hook_##exp __asm__(#exp);
#define DECL_RT(name) extern char kvt_hook_##name __asm__(#name);
KVT_DRIVER_HOOKS(DECL_DRV)
KVT_RUNTIME_HOOKS(DECL_RT)

struct drv_desc {
	const char *base, *export;
	void *hook;
};

#define DRV_DESC(b, exp) { #b, #exp, &kvt_hook_##exp },
static const struct drv_desc drv[KVT_H__COUNT] = { KVT_DRIVER_HOOKS(DRV_DESC) };

#define RT_DESC(name) { #name, #name, &kvt_hook_##name },
static const struct drv_desc rt[KVT_R__COUNT] = { KVT_RUNTIME_HOOKS(RT_DESC) };

void *kvt_drv_slot[KVT_H__COUNT];
void *kvt_rt_slot[KVT_R__COUNT];

/* Path of the driver object whose pointers we substituted (for the PLT
 * path of programs linked with -lcuda that never used dlsym). */
static char driver_path[512];

static void *driver_handle(void)
{
	void *h = NULL;
	if (driver_path[0])
		h = dlopen(driver_path, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	return h;
}

static void set_slot(void **slot, void *p)
{
	__atomic_store_n(slot, p, __ATOMIC_RELEASE);
}

void *kvt_drv_resolve(unsigned idx)
{
	void *p = NULL;
	void *h = driver_handle();
	if (h) {
		p = kvt_real_dlsym(h, drv[idx].export);
		dlclose(h);
	}
	if (!p || p == drv[idx].hook)
		p = kvt_real_dlsym(RTLD_NEXT, drv[idx].export);
	if (p && p != drv[idx].hook)
		set_slot(&kvt_drv_slot[idx], p);
	else
		p = NULL;
	return p;
}

void *kvt_rt_resolve(unsigned idx)
{
	void *p = kvt_real_dlsym(RTLD_NEXT, rt[idx].export);
	if (p && p != rt[idx].hook)
		set_slot(&kvt_rt_slot[idx], p);
	else
		p = NULL;
	return p;
}

/* The export `exp` of the object holding p, looked up in that object. */
static void *export_in_object_of(void *p, const char *exp, Dl_info *di)
{
	void *h = dlopen(di->dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	void *q = kvt_real_dlsym(h, exp);
	dlclose(h);
	(void)p;
	return q;
}

static void *substitute_driver(const char *name, void *p, Dl_info *di)
{
	for (unsigned i = 0; i < KVT_H__COUNT; i++) {
		if (strcmp(drv[i].base, name) && strcmp(drv[i].export, name))
			continue;
		if (export_in_object_of(p, drv[i].export, di) != p)
			continue;
		set_slot(&kvt_drv_slot[i], p);
		if (!driver_path[0] && strlen(di->dli_fname) < sizeof driver_path)
			strcpy(driver_path, di->dli_fname);
		return drv[i].hook;
	}
	return p;
}

static void *substitute_runtime(const char *name, void *p)
{
	for (unsigned i = 0; i < KVT_R__COUNT; i++) {
		if (strcmp(rt[i].export, name))
			continue;
		void *cur = kvt_rt_real(i);
		if (!cur) {           /* runtime opened RTLD_LOCAL: adopt it */
			set_slot(&kvt_rt_slot[i], p);
			cur = p;
		}
		return cur == p ? rt[i].hook : p;
	}
	return p;
}

void *kvt_substitute(const char *name, void *p)
{
	if (!p || !name || name[0] != 'c' || name[1] != 'u')
		return p;
	kvt_ready();
	if (kvt_inert() || kvt_self_contains(p))
		return p;
	if (!strncmp(name, "cuda", 4))
		return substitute_runtime(name, p);
	Dl_info di;
	if (!dladdr(p, &di) || !di.dli_fname)
		return p;
	return substitute_driver(name, p, &di);
}
