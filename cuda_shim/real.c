// SPDX-License-Identifier: MIT
/* The real entry points (contract in real.h): the slots and their slow-path
 * resolution. Runs inside hooks and the dlsym hook: no malloc; the loader
 * calls go through the platform layer's real dlsym. cuda.h is deliberately
 * not included: slots are untyped, each hook casts its own (DRV_REAL). */
#include <dlfcn.h>
#include <string.h>

#include "real.h"
#include "../base/kvt.h"

struct real_desc {
	const char *base, *export;
};

#define DRV_DESC(b, exp) { #b, #exp },
static const struct real_desc drv[KVT_H__COUNT] = { KVT_DRIVER_HOOKS(DRV_DESC) };
#define RT_DESC(name) { #name, #name },
static const struct real_desc rt[KVT_R__COUNT] = { KVT_RUNTIME_HOOKS(RT_DESC) };

void *kvt_drv_slot[KVT_H__COUNT];
void *kvt_rt_slot[KVT_R__COUNT];

/* Path of the driver object whose pointers were substituted (for the PLT
 * path of programs linked with -lcuda that never used dlsym). */
static char driver_path[512];

const char *kvt_real_drv_base(unsigned idx) { return drv[idx].base; }
const char *kvt_real_drv_export(unsigned idx) { return drv[idx].export; }
const char *kvt_real_rt_name(unsigned idx) { return rt[idx].export; }

static void set_slot(void **slot, void *p)
{
	__atomic_store_n(slot, p, __ATOMIC_RELEASE);
}

void kvt_real_set_drv(unsigned idx, void *p) { set_slot(&kvt_drv_slot[idx], p); }
void kvt_real_set_rt(unsigned idx, void *p) { set_slot(&kvt_rt_slot[idx], p); }

void kvt_real_set_driver_path(const char *path)
{
	if (!driver_path[0] && strlen(path) < sizeof driver_path)
		strcpy(driver_path, path);
}

static void *driver_handle(void)
{
	void *h = NULL;
	if (driver_path[0])
		h = kvt_dl_open(driver_path, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = kvt_dl_open("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	return h;
}

/* The only exports of libkvtier are its hooks: a pointer inside it is one. */
static int is_ours(const void *p)
{
	return kvt_self_contains(p);
}

void *kvt_drv_extra(const char *name)
{
	void *p = NULL, *h = driver_handle();
	if (h) {
		p = kvt_real_dlsym(h, name);
		kvt_dl_close(h);
	}
	return p && !is_ours(p) ? p : NULL;
}

void *kvt_drv_resolve(unsigned idx)
{
	void *p = NULL;
	void *h = driver_handle();
	if (h) {
		p = kvt_real_dlsym(h, drv[idx].export);
		kvt_dl_close(h);
	}
	if (!p || is_ours(p))
		p = kvt_real_dlsym(RTLD_NEXT, drv[idx].export);
	if (p && !is_ours(p))
		set_slot(&kvt_drv_slot[idx], p);
	else
		p = NULL;
	return p;
}

void *kvt_rt_resolve(unsigned idx)
{
	void *p = kvt_real_dlsym(RTLD_NEXT, rt[idx].export);
	if (p && !is_ours(p))
		set_slot(&kvt_rt_slot[idx], p);
	else
		p = NULL;
	return p;
}
