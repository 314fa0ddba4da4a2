// SPDX-License-Identifier: MIT
/* The platform layer: the only place that talks to the loader (dlsym/dlvsym,
 * dl_iterate_phdr) and makes raw system calls for kvtier's own needs.
 * Contract: never calls an interposed symbol, never allocates, returns
 * 0/pointer or a negative errno. Safe to call from inside any hook. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kvt.h"

typedef void *(*dlsym_fn)(void *, const char *);

/* Read by the dlsym entry trampoline (preload/hook_dlsym_entry.S). */
__attribute__((visibility("hidden"))) dlsym_fn kvt_real_dlsym_fn;

/* Resolve glibc's dlsym through dlvsym (never interposed). Several version
 * nodes: x86_64 has GLIBC_2.2.5 and 2.34, aarch64 GLIBC_2.17 and 2.34. */
KVT_NO_SANITIZE __attribute__((visibility("hidden"))) dlsym_fn kvt_resolve_real_dlsym(void)
{
	static const char *const versions[] = {
		"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0", "GLIBC_2.1",
	};
	dlsym_fn f = __atomic_load_n(&kvt_real_dlsym_fn, __ATOMIC_ACQUIRE);
	if (f)
		return f;
	for (size_t i = 0; i < sizeof versions / sizeof versions[0] && !f; i++)
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	if (f)
		__atomic_store_n(&kvt_real_dlsym_fn, f, __ATOMIC_RELEASE);
	return f;
}

KVT_NO_SANITIZE void *kvt_real_dlsym(void *handle, const char *name)
{
	dlsym_fn f = kvt_resolve_real_dlsym();
	return f ? f(handle, name) : NULL;
}

int kvt_started;
KVT_TLS struct kvt_tls kvt_tls;

KVT_NO_SANITIZE void *kvt_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
#if defined(__SANITIZE_THREAD__)
	/* ThreadSanitizer must see kvtier's own maps, or memory it saw unmapped
	 * elsewhere and kvtier maps again looks like a race to it. */
	static void *(*next)(void *, size_t, int, int, int, off_t);
	if (*(volatile int *)&kvt_started) {
		if (!next)
			next = (void *(*)(void *, size_t, int, int, int, off_t))
				kvt_real_dlsym(RTLD_NEXT, "mmap");
		if (next)
			return next(addr, len, prot, flags, fd, off);
	}
#endif
	long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	return (r < 0 && r > -4096) ? MAP_FAILED : (void *)r;
}

KVT_NO_SANITIZE int kvt_sys_munmap(void *addr, size_t len)
{
	return syscall(SYS_munmap, addr, len) ? -errno : 0;
}

ssize_t kvt_sys_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static KVT_TLS pid_t cached_tid;

pid_t kvt_gettid(void)
{
	if (!cached_tid)
		cached_tid = (pid_t)syscall(SYS_gettid);
	return cached_tid;
}

/* The forking thread is a new task in the child: forget its cached id. */
void kvt_platform_after_fork(void)
{
	cached_tid = 0;
}

uint64_t kvt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t kvt_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uintptr_t self_lo, self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	uintptr_t me = (uintptr_t)data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		uintptr_t hi = lo + ph->p_memsz;
		if (me >= lo && me < hi) {
			/* Found our object: record the span of all its segments. */
			uintptr_t a = UINTPTR_MAX, b = 0;
			for (int j = 0; j < info->dlpi_phnum; j++) {
				const ElfW(Phdr) *q = &info->dlpi_phdr[j];
				if (q->p_type != PT_LOAD)
					continue;
				uintptr_t s = info->dlpi_addr + q->p_vaddr;
				if (s < a)
					a = s;
				if (s + q->p_memsz > b)
					b = s + q->p_memsz;
			}
			self_lo = a;
			self_hi = b;
			return 1;
		}
	}
	return 0;
}

int kvt_self_contains(const void *p)
{
	if (!self_hi)
		dl_iterate_phdr(find_self, (void *)(uintptr_t)&kvt_self_contains);
	return (uintptr_t)p >= self_lo && (uintptr_t)p < self_hi;
}

long kvt_sys_mbind(void *addr, size_t len, int mode, const unsigned long *mask,
		   unsigned long maxnode, unsigned flags)
{
	return syscall(SYS_mbind, addr, len, mode, mask, maxnode, flags) ? -errno : 0;
}

long kvt_sys_move_pages(unsigned long count, void **pages, const int *nodes,
			int *status, int flags)
{
	return syscall(SYS_move_pages, 0, count, pages, nodes, status, flags) ? -errno : 0;
}
