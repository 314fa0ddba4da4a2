// SPDX-License-Identifier: MIT
/* Pointer-identity substitution (contract in hook_table.h): the hooks put in
 * front of the application in place of what a resolver returned. The real
 * functions' slots are cuda_shim/real.c's. Runs inside the resolver wrappers
 * and the dlsym hook: no malloc; the loader calls go through the platform
 * layer's real dlsym. cuda.h is deliberately not included: hooks are
 * referenced by their export names through asm labels, whatever ABI each
 * one has. */
#include <dlfcn.h>
#include <string.h>

#include "../base/kvt.h"
#include "guard.h"
#include "hook_table.h"
#include "../cuda_shim/real.h"

#define DECL_DRV(base, exp) extern char kvt_hook_##exp __asm__(#exp);
#define DECL_RT(name) extern char kvt_hook_##name __asm__(#name);
KVT_DRIVER_HOOKS(DECL_DRV)
KVT_RUNTIME_HOOKS(DECL_RT)

#define DRV_HOOK(b, exp) &kvt_hook_##exp,
static void *const drv_hook[KVT_H__COUNT] = { KVT_DRIVER_HOOKS(DRV_HOOK) };
#define RT_HOOK(name) &kvt_hook_##name,
static void *const rt_hook[KVT_R__COUNT] = { KVT_RUNTIME_HOOKS(RT_HOOK) };

/* The export `exp` of the object holding p, looked up in that object. */
static void *export_in_object_of(const char *exp, Dl_info *di)
{
	void *h = kvt_dl_open(di->dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	void *q = kvt_real_dlsym(h, exp);
	kvt_dl_close(h);
	return q;
}

static void *substitute_driver(const char *name, void *p, Dl_info *di)
{
	for (unsigned i = 0; i < KVT_H__COUNT; i++) {
		const char *exp = kvt_real_drv_export(i);
		if (strcmp(kvt_real_drv_base(i), name) && strcmp(exp, name))
			continue;
		if (export_in_object_of(exp, di) != p)
			continue;
		kvt_real_set_drv(i, p);
		kvt_real_set_driver_path(di->dli_fname);
		return drv_hook[i];
	}
	return p;
}

static void *substitute_runtime(const char *name, void *p)
{
	for (unsigned i = 0; i < KVT_R__COUNT; i++) {
		if (strcmp(kvt_real_rt_name(i), name))
			continue;
		void *cur = kvt_rt_real(i);
		if (!cur) {           /* runtime opened RTLD_LOCAL: adopt it */
			kvt_real_set_rt(i, p);
			cur = p;
		}
		return cur == p ? rt_hook[i] : p;
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
	if (!kvt_dl_addr(p, &di) || !di.dli_fname)
		return p;
	return substitute_driver(name, p, &di);
}
