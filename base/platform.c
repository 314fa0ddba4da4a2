// SPDX-License-Identifier: MIT
/* The platform layer: the only place in the library that talks to the
 * loader or makes raw system calls for kvtier's own needs. It owns:
 *   loader    the real dlsym (dlvsym), dlopen/dlclose/dladdr, the loaded
 *             objects (dl_iterate_phdr), kvtier's own span, the page size;
 *   memory    mmap/munmap/mremap, madvise, mbind, move_pages, reads of this
 *             process's memory (process_vm_readv);
 *   files     open, read, pread, close, fstat, stat, unlink, ftruncate,
 *             fchmod, access, readlink, directory listing, write_all;
 *   process   thread id and name, kill, exit_group, the clocks.
 * Contract, once for all of them (unless a declaration in kvt.h says
 * otherwise): result parameters are non-NULL; returns 0/count/pointer on
 * success or a negative errno; never calls an interposed symbol; never
 * allocates. Safe to call from inside any hook. Nothing here retries on
 * EINTR unless its declaration says so: callers keep their own loops. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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

/* kvtier's own maps used to land where the kernel puts every anonymous
 * map, at the top of the map area, right beside the program's next ones.
 * There, each mmap/munmap the program makes walks kvtier's entries in the
 * kernel's tree of maps: +4-5 % on a 2 MiB mmap+munmap pair in a small
 * process (docs/performance.md, "kvtier's own maps"). The area starts
 * KVT_OWN_GAP below the library (so it moves with ASLR) and is handed out
 * downwards, 2 MiB-aligned for maps of 2 MiB or more (huge pages), 64 KiB
 * for the rest (a page on every page size Linux has). Holes that frees
 * leave are not reused; past KVT_OWN_SPAN the kernel places the maps. */
#define OWN_BIG   (2ull << 20)
#define OWN_SMALL (64ull << 10)
static uintptr_t own_next;

void *kvt_own_hint(size_t len)
{
	uintptr_t self = (uintptr_t)&own_next;
	if (!len || self < KVT_OWN_GAP + KVT_OWN_SPAN + (4ull << 30))
		return NULL;
	uintptr_t top = (self - KVT_OWN_GAP) & ~(uintptr_t)(OWN_BIG - 1);
	uintptr_t floor = top - KVT_OWN_SPAN, align = len >= OWN_BIG ? OWN_BIG : OWN_SMALL;
	uintptr_t old = __atomic_load_n(&own_next, __ATOMIC_RELAXED), hint;
	do {
		uintptr_t cur = old ? old : top;
		if (len > cur - floor)
			return NULL;
		hint = (cur - len) & ~(align - 1);
		if (hint < floor)
			return NULL;
	} while (!__atomic_compare_exchange_n(&own_next, &old, hint, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return (void *)hint;
}

void *kvt_sys_map_own(size_t len, int flags)
{
	return kvt_sys_mmap(kvt_own_hint(len), len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
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

/* ---- the clock: CLOCK_MONOTONIC, or a simulator's virtual clock ----
 * A driver that simulates a GPU in virtual time hands kvtier its clock
 * (kvt_clock_set_virtual; a real libcuda never does). From then on every
 * time kvtier reads and every timed wait it makes are in virtual time,
 * continuous with the real clock it read before (an offset). */
#define VCLOCK_ALIGN_NS 262144000000ull   /* 65 536 x 4 ms */
static struct kvt_vclock vclock;
static int64_t vclock_off;
static int64_t vclock_step;    /* how far forward the switch moved kvt_now_ns */
static int vclock_on;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void kvt_clock_set_virtual(const struct kvt_vclock *vc)
{
	if (__atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE) || !vc || !vc->now || !vc->wait ||
	    !vc->wake || !vc->charge || !vc->leave || !vc->spawn || !vc->adopt || !vc->cancel)
		return;
	vclock = *vc;
	/* continuous with the real clock read before (never back), and a whole
	 * number of VCLOCK_ALIGN_NS: the millisecond, 4 ms and 16-bit stamp
	 * boundaries kvtier buckets time by then fall on the same virtual
	 * times in every run (an offset of any nanosecond count moved them,
	 * and a simulated run's figures with them) */
	uint64_t before = mono_ns(), off = before - vc->now();
	vclock_off = (int64_t)((off / VCLOCK_ALIGN_NS + 1) * VCLOCK_ALIGN_NS);
	vclock_step = (int64_t)vc->now() + vclock_off - (int64_t)before;
	if (vclock_step < 0)
		vclock_step = 0;
	__atomic_store_n(&vclock_on, 1, __ATOMIC_RELEASE);
}

int kvt_clock_virtual(void)
{
	return __atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE);
}

uint64_t kvt_now_ns(void)
{
	if (__atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE))
		return (uint64_t)((int64_t)vclock.now() + vclock_off);
	return mono_ns();
}

uint64_t kvt_gap_ns(void)
{
	if (__atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE))
		return (uint64_t)((int64_t)vclock.now() + vclock_off - vclock_step);
	return mono_ns();
}

void kvt_clock_charge(uint64_t ns)
{
	if (__atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE))
		vclock.charge(ns);
}

void kvt_clock_leave(void)
{
	if (__atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE))
		vclock.leave();
}

void *kvt_clock_spawn(void)
{
	return __atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE) ? vclock.spawn() : NULL;
}

void kvt_clock_adopt(void *place)
{
	if (place && __atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE))
		vclock.adopt(place);
}

void kvt_clock_cancel(void *place)
{
	if (place && __atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE))
		vclock.cancel(place);
}

int kvt_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns)
{
	uint64_t real = deadline_ns;
	if (__atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE)) {
		int64_t v = (int64_t)deadline_ns - vclock_off;
		pthread_mutex_unlock(mu);
		int r = vclock.wait(cv, v > 0 ? (uint64_t)v : 0);
		pthread_mutex_lock(mu);
		if (r >= 0)
			return r ? ETIMEDOUT : 0;
		/* not simulated now (nothing else moves the clock): the same
		 * length of real time */
		uint64_t now = kvt_now_ns();
		real = mono_ns() + (deadline_ns > now ? deadline_ns - now : 0);
	}
	struct timespec ts = { (time_t)(real / 1000000000u), (long)(real % 1000000000u) };
	return pthread_cond_timedwait(cv, mu, &ts) == ETIMEDOUT ? ETIMEDOUT : 0;
}

void kvt_cond_wake(pthread_cond_t *cv)
{
	pthread_cond_signal(cv);
	if (__atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE))
		vclock.wake(cv);
}

uint64_t kvt_coarse_ns(void)
{
	if (__atomic_load_n(&vclock_on, __ATOMIC_ACQUIRE))
		return kvt_now_ns();
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t kvt_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void kvt_dl_object_span(const struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uint64_t s = info->dlpi_addr + ph->p_vaddr;
		if (s < *lo)
			*lo = s;
		if (s + ph->p_memsz > *hi)
			*hi = s + ph->p_memsz;
	}
}

/* The note range [a, a + n) is file-backed memory of one PT_LOAD segment. */
static int note_mapped(const struct dl_phdr_info *info, uint64_t a, uint64_t n)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && a >= ph->p_vaddr && n <= ph->p_filesz &&
		    a - ph->p_vaddr <= ph->p_filesz - n)
			return 1;
	}
	return 0;
}

unsigned kvt_dl_object_build_id(const struct dl_phdr_info *info, uint8_t *out, unsigned max)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE || !note_mapped(info, ph->p_vaddr, ph->p_memsz))
			continue;
		uint64_t al = ph->p_align == 8 ? 8 : 4;     /* name and desc padding */
		const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
		uint64_t left = ph->p_memsz;
		while (left >= sizeof(ElfW(Nhdr))) {
			ElfW(Nhdr) nh;
			memcpy(&nh, p, sizeof nh);
			uint64_t name = (nh.n_namesz + al - 1) & ~(al - 1);
			uint64_t desc = (nh.n_descsz + al - 1) & ~(al - 1);
			if (sizeof nh + name + desc > left)     /* each at most 2^32 + 7 */
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp(p + sizeof nh, "GNU", 4) && nh.n_descsz && nh.n_descsz <= max) {
				memcpy(out, p + sizeof nh + name, nh.n_descsz);
				return nh.n_descsz;
			}
			p += sizeof nh + name + desc;
			left -= sizeof nh + name + desc;
		}
	}
	return 0;
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
			uint64_t a, b;
			kvt_dl_object_span(info, &a, &b);
			self_lo = (uintptr_t)a;
			self_hi = (uintptr_t)b;
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

/* ---- memory ---- */

KVT_NO_SANITIZE long kvt_sys_mremap(void *old, size_t old_size, size_t new_size, int flags,
				    void *new_addr)
{
	long r = syscall(SYS_mremap, old, old_size, new_size, flags, new_addr);
	return r == -1 ? -errno : r;
}

int kvt_sys_madvise(void *addr, size_t len, int advice)
{
	return madvise(addr, len, advice) ? -errno : 0;
}

ssize_t kvt_sys_process_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
				 const struct iovec *remote, unsigned long nremote)
{
	long n = syscall(SYS_process_vm_readv, (long)pid, local, nlocal, remote, nremote, 0L);
	return n < 0 ? -errno : (ssize_t)n;
}

/* ---- files ---- */

int kvt_sys_open(const char *path, int flags, mode_t mode)
{
	int fd = open(path, flags, mode);
	return fd < 0 ? -errno : fd;
}

ssize_t kvt_sys_read(int fd, void *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);
	return n < 0 ? -errno : n;
}

ssize_t kvt_sys_pread(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(fd, buf, len, off);
	return n < 0 ? -errno : n;
}

int kvt_sys_close(int fd)
{
	return close(fd) ? -errno : 0;
}

int kvt_sys_fstat(int fd, struct stat *sb)
{
	return fstat(fd, sb) ? -errno : 0;
}

int kvt_sys_stat(const char *path, struct stat *sb)
{
	return stat(path, sb) ? -errno : 0;
}

int kvt_sys_unlink(const char *path)
{
	return unlink(path) ? -errno : 0;
}

int kvt_sys_ftruncate(int fd, off_t len)
{
	return ftruncate(fd, len) ? -errno : 0;
}

int kvt_sys_fchmod(int fd, mode_t mode)
{
	return fchmod(fd, mode) ? -errno : 0;
}

int kvt_sys_access(const char *path, int mode)
{
	return access(path, mode) ? -errno : 0;
}

ssize_t kvt_sys_readlink(const char *path, char *buf, size_t cap)
{
	ssize_t n = readlink(path, buf, cap);
	return n < 0 ? -errno : n;
}

/* struct linux_dirent64, as getdents64(2) fills it. */
struct dirent64_raw {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* getdents64 into a stack buffer (opendir would malloc its DIR). */
int kvt_sys_dir_each(const char *path, unsigned max,
		     int (*fn)(const char *name, void *arg), void *arg)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	_Alignas(8) char buf[4096];
	unsigned seen = 0;
	while (seen < max) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
		if (n <= 0)
			break;               /* end, or an error: as readdir's NULL */
		for (long off = 0; off < n && seen < max;) {
			const struct dirent64_raw *d = (const void *)(buf + off);
			off += d->d_reclen;
			seen++;
			if (fn(d->d_name, arg))
				goto out;
		}
	}
out:
	close(fd);
	return (int)seen;
}

/* ---- process ---- */

int kvt_sys_kill(pid_t pid, int sig)
{
	return kill(pid, sig) ? -errno : 0;
}

int kvt_sys_thread_name(char buf[16])
{
	return prctl(PR_GET_NAME, buf, 0, 0, 0) ? -errno : 0;
}

void kvt_sys_exit_group(int status)
{
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

/* ---- loader ---- */

void *kvt_dl_open(const char *path, int flags)
{
	return dlopen(path, flags);
}

int kvt_dl_close(void *handle)
{
	return dlclose(handle);
}

int kvt_dl_addr(const void *p, Dl_info *di)
{
	return dladdr(p, di);
}

int kvt_dl_each_object(int (*fn)(struct dl_phdr_info *info, size_t size, void *arg), void *arg)
{
	return dl_iterate_phdr(fn, arg);
}

uint64_t kvt_page_bytes(void)
{
	static uint64_t pg;
	uint64_t v = __atomic_load_n(&pg, __ATOMIC_RELAXED);
	if (!v) {
		v = (uint64_t)sysconf(_SC_PAGESIZE);
		__atomic_store_n(&pg, v, __ATOMIC_RELAXED);
	}
	return v;
}
