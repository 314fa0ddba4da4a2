// SPDX-License-Identifier: MIT
/* Anonymous mmap/munmap/mremap, for programs that map memory themselves
 * (JVMs, databases, KV offload buffers). glibc's malloc maps large blocks
 * with internal calls no preload sees; those are out of scope. File-backed
 * maps pass through unrecorded. errno is preserved exactly. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../base/kvt.h"
#include "fork.h"
#include "guard.h"
#include "record.h"
#include "../place/place.h"
#include "../profiler/trace.h"

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void *, size_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);

static mmap_fn real_mmap, real_mmap64;
static munmap_fn real_munmap;
static mremap_fn real_mremap;

KVT_NO_SANITIZE static void *next_symbol(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!p) {
		p = kvt_real_dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	}
	return p;
}

/* Anonymous maps are registered only when they are traced or some rule
 * can place them; until one is, munmap/mremap skip the registry too. */
static int mmap_seen;

/* The kernel call and the registry update happen under one lock
 * (kvt_map_lock, preload/fork.c), so a map another thread gets at an
 * address just unmapped is never confused with the old one (the kernel
 * serializes these calls per process anyway). */

static int is_tracked_mmap(const struct kvt_alloc *a)
{
	return a->kind == KVT_KIND_MMAP;
}

static void *do_mmap(mmap_fn real, void *addr, size_t len, int prot, int flags,
		     int fd, off_t off)
{
	if (!real)       /* very early, before the loader can answer */
		return kvt_sys_mmap(addr, len, prot, flags, fd, off);
	if (!(flags & MAP_ANONYMOUS) ||
	    (!kvt_trace_active() && !kvt_place_kind_placeable(KVT_KIND_MMAP)) ||
	    !kvt_hook_enter())
		return real(addr, len, prot, flags, fd, off);
	__atomic_store_n(&mmap_seen, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&kvt_map_lock);
	void *p = real(addr, len, prot, flags, fd, off);
	int saved = errno;
	int ok = p != MAP_FAILED;
	struct kvt_place pl;
	kvt_place_decide(KVT_KIND_MMAP, len, &pl);
	if (ok && pl.placement != KVT_PLACE_NATIVE)
		kvt_place_bind(p, len, &pl, 0);      /* before the first touch */
	else
		pl.placement = KVT_PLACE_NATIVE;
	if (ok && (flags & MAP_FIXED))      /* replaces whatever was there */
		kvt_reg_carve(kvt_mem_reg, (uint64_t)(uintptr_t)p, len, is_tracked_mmap);
	kvt_rec_alloc_placed(kvt_mem_reg, KVT_KIND_MMAP, KVT_API_mmap, ok,
			     ok ? (uint64_t)(uintptr_t)p : 0, len,
			     (uint64_t)(uint32_t)prot | ((uint64_t)(uint32_t)flags << 32),
			     ok ? 0 : -saved, &pl);
	pthread_mutex_unlock(&kvt_map_lock);
	kvt_place_commit(&pl, ok ? (uint64_t)(uintptr_t)p : 0, len);
	kvt_hook_exit();
	errno = saved;
	return p;
}

/* The entry points stay uninstrumented and pass straight through until
 * kvtier's constructor has run: sanitizer runtimes map memory this way
 * during their own start-up, before instrumented code may run. */
KVT_EXPORT KVT_NO_SANITIZE void *mmap(void *addr, size_t len, int prot, int flags, int fd,
				      off_t off)
{
	if (KVT_UNLIKELY(!*(volatile int *)&kvt_started))
		return kvt_sys_mmap(addr, len, prot, flags, fd, off);
	return do_mmap((mmap_fn)next_symbol((void **)&real_mmap, "mmap"),
		       addr, len, prot, flags, fd, off);
}

KVT_EXPORT KVT_NO_SANITIZE void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
					off_t off)
{
	if (KVT_UNLIKELY(!*(volatile int *)&kvt_started))
		return kvt_sys_mmap(addr, len, prot, flags, fd, off);
	return do_mmap((mmap_fn)next_symbol((void **)&real_mmap64, "mmap64"),
		       addr, len, prot, flags, fd, off);
}

KVT_EXPORT KVT_NO_SANITIZE int munmap(void *addr, size_t len)
{
	if (KVT_UNLIKELY(!*(volatile int *)&kvt_started))
		return kvt_sys_munmap(addr, len) ? -1 : 0;
	munmap_fn real = (munmap_fn)next_symbol((void **)&real_munmap, "munmap");
	if (!real)
		return kvt_sys_munmap(addr, len) ? (errno = EINVAL, -1) : 0;
	if (!__atomic_load_n(&mmap_seen, __ATOMIC_RELAXED) || !kvt_hook_enter())
		return real(addr, len);
	struct kvt_alloc a;
	pthread_mutex_lock(&kvt_map_lock);
	int r = real(addr, len);
	int saved = errno;
	int64_t gone = 0;
	uint8_t placement = KVT_PLACE_NATIVE;
	if (r == 0 && len) {
		if (!kvt_reg_find(kvt_mem_reg, (uint64_t)(uintptr_t)addr, &a) && is_tracked_mmap(&a))
			placement = a.placement;
		gone = kvt_reg_carve(kvt_mem_reg, (uint64_t)(uintptr_t)addr, len, is_tracked_mmap);
	}
	pthread_mutex_unlock(&kvt_map_lock);
	if (gone > 0 && kvt_trace_active()) {
		struct kvt_rec_event ev = {
			.op = KVT_OP_FREE, .api = KVT_API_munmap, .kind = KVT_KIND_MMAP,
			.addr = (uint64_t)(uintptr_t)addr, .size = (uint64_t)gone, .aux = len,
			.placement = placement,
		};
		kvt_trace_event(&ev);
	}
	kvt_hook_exit();
	errno = saved;
	return r;
}

static void *do_mremap(void *old, size_t old_size, size_t new_size, int flags,
		       void *new_addr);

KVT_EXPORT KVT_NO_SANITIZE void *mremap(void *old, size_t old_size, size_t new_size,
					int flags, ...)
{
	void *new_addr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	if (KVT_UNLIKELY(!*(volatile int *)&kvt_started)) {
		long r = kvt_sys_mremap(old, old_size, new_size, flags, new_addr);
		if (r < 0 && r > -4096) {
			errno = (int)-r;
			return MAP_FAILED;
		}
		return (void *)r;
	}
	return do_mremap(old, old_size, new_size, flags, new_addr);
}

static void *do_mremap(void *old, size_t old_size, size_t new_size, int flags,
		       void *new_addr)
{
	mremap_fn real = (mremap_fn)next_symbol((void **)&real_mremap, "mremap");
	if (!real) {
		errno = ENOSYS;
		return MAP_FAILED;
	}
	if (!__atomic_load_n(&mmap_seen, __ATOMIC_RELAXED) || !kvt_hook_enter())
		return real(old, old_size, new_size, flags, new_addr);
	pthread_mutex_lock(&kvt_map_lock);
	void *p = real(old, old_size, new_size, flags, new_addr);
	int saved = errno;
	struct kvt_alloc a;
	uint64_t o = (uint64_t)(uintptr_t)old;
	if (p != MAP_FAILED && !kvt_reg_find(kvt_mem_reg, o, &a) && is_tracked_mmap(&a)) {
		kvt_reg_carve(kvt_mem_reg, o, old_size ? old_size : 1, is_tracked_mmap);
		if (flags & MREMAP_FIXED)
			kvt_reg_carve(kvt_mem_reg, (uint64_t)(uintptr_t)p, new_size,
				      is_tracked_mmap);
		a.base = (uint64_t)(uintptr_t)p;
		a.size = new_size;
		a.api = KVT_API_mremap;
		kvt_reg_insert(kvt_mem_reg, &a);
		kvt_rec_event(KVT_OP_REMAP, KVT_KIND_MMAP, KVT_API_mremap, a.base, new_size,
			      o, old_size, 0);
	}
	pthread_mutex_unlock(&kvt_map_lock);
	kvt_hook_exit();
	errno = saved;
	return p;
}
