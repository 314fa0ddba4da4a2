/* SPDX-License-Identifier: MIT */
/* fakecuda managed memory — cuMemAllocManaged ranges of the SIMULATED GPU.
 * Each range has a stable, 2 MiB aligned address and two backing stores
 * (memfds): the "host copy" and the "device copy". Every 2 MiB block of the
 * address range is mapped MAP_FIXED|MAP_SHARED onto the store that holds it;
 * device-resident blocks are PROT_NONE to the CPU, so a CPU touch faults
 * (SIGSEGV) and migrates the block back, as UVM does. A migration copies the
 * bytes through the driver's private views, remaps, and punches the old copy
 * out, so a wrong migration loses data. Host copies are mbind()-ed to their
 * NUMA node. With several ordinals (FAKECUDA_DEVICES) a device-resident block
 * also records which ordinal holds it; all ordinals share the one device
 * store and the one eviction list (one HBM). Callers hold the global lock. */
#include "fc_internal.h"

#include <cupti_activity.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Device-resident blocks in eviction order, the head goes first. */
static struct fc_block *fc_evq_head, *fc_evq_tail;

/* ---- NUMA helpers (raw syscalls; only this file binds memory) ---- */

static long fc_mbind(void *addr, size_t len, int node, bool move)
{
	unsigned long mask = node >= 0 ? 1ul << node : 0;
	int mode = node >= 0 ? MPOL_BIND : MPOL_DEFAULT;
	return syscall(SYS_mbind, addr, len, mode, node >= 0 ? &mask : NULL,
		       node >= 0 ? sizeof mask * 8 + 1 : 0,
		       node >= 0 && move ? MPOL_MF_MOVE : 0);
}

int fc_bind_node(void *addr, size_t len, int node)
{
	return fc_mbind(addr, len, node, false) ? -errno : 0;
}

/* A node can hold managed pages if the kernel lists it in has_memory. */
bool fc_node_valid(int node)
{
	char buf[256];
	if (node < 0 || node >= 64)
		return false;
	int fd = open("/sys/devices/system/node/has_memory", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return node == 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return node == 0;
	buf[n] = 0;
	for (char *p = buf; *p;) {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;
		if (end == p)
			break;
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (node >= lo && node <= hi)
			return true;
		p = *end ? end + 1 : end;
	}
	return false;
}

int fc_current_node(void)
{
	unsigned cpu = 0, node = 0;
	if (syscall(SYS_getcpu, &cpu, &node, NULL))
		return 0;
	return (int)node;
}

/* ---- eviction order of device-resident blocks ----
 * The UVM driver evicts 2 MiB root chunks from the head of a "used" list, and
 * moves a chunk to its tail only when its VA block becomes resident on the GPU
 * (block_mark_memory_used in uvm_va_block.c; pick_root_chunk_to_evict in
 * uvm_pmm_gpu.c carries a TODO to move chunks "whenever they get mapped"). It
 * never sees the GPU's hits on resident memory, so its order is the order of
 * arrival: FIFO. That is the default here; FAKECUDA_EVICT=lru makes every GPU
 * access and prefetch refresh a block, a kinder model than the driver's. */

static void fc_evq_unlink(struct fc_block *b)
{
	if (b->prev) b->prev->next = b->next; else fc_evq_head = b->next;
	if (b->next) b->next->prev = b->prev; else fc_evq_tail = b->prev;
	b->prev = b->next = NULL;
}

static void fc_evq_append(struct fc_block *b)
{
	b->prev = fc_evq_tail;
	b->next = NULL;
	if (fc_evq_tail) fc_evq_tail->next = b; else fc_evq_head = b;
	fc_evq_tail = b;
}

void fc_block_touch(struct fc_block *b)
{
	if (fc_knobs.evict_lru && b->loc == FC_LOC_DEV && b != fc_evq_tail) {
		fc_evq_unlink(b);
		fc_evq_append(b);
	}
}

/* Where the host copy goes when the block leaves the device. */
int fc_host_target(const struct fc_block *b)
{
	if (b->pref_type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
		return b->pref_id;
	return b->host_node;
}

/* The pages of b's 2 MiB region (all of them at the default page). */
void fc_region_of(const struct fc_block *b, size_t *first, size_t *end)
{
	size_t per = FC_BLOCK / FC_UMP;
	*first = b->idx / per * per;
	*end = *first + per < b->r->nblocks ? *first + per : b->r->nblocks;
}

/* The head of the order goes, with the rest of its 2 MiB region's pages on
 * the device (a root chunk: the driver evicts 2 MiB at a time). */
bool fc_evict_one(void)
{
	struct fc_block *victim = fc_evq_head;
	if (!victim)
		return false;
	size_t i, end;
	fc_region_of(victim, &i, &end);
	struct fc_block *all = victim->r->blocks;
	if (fc_block_to_host(victim, FC_CAUSE_EVICT, fc_host_target(victim)))
		return false;
	fc_stats.c.evictions++;
	for (; i < end; i++)
		if (all[i].loc == FC_LOC_DEV)
			fc_block_to_host(&all[i], FC_CAUSE_EVICT, fc_host_target(&all[i]));
	return true;
}

/* Managed blocks resident on ordinal dev now: the eviction list holds
 * exactly the device-resident blocks (test accessor; a walk is fine). */
uint64_t fc_resident_blocks_on(int dev)
{
	uint64_t n = 0;
	for (const struct fc_block *b = fc_evq_head; b; b = b->next)
		n += b->dev == dev;
	return n;
}

/* Make room for bytes more in HBM by evicting managed blocks, in order. */
static bool fc_make_room(uint64_t bytes)
{
	while (fc_stats.device_alloc_bytes + fc_stats.c.managed_resident_bytes +
	       bytes > fc_knobs.device_bytes)
		if (!fc_evict_one())
			return false;
	return true;
}

CUresult fc_charge_device(uint64_t bytes)
{
	if (!fc_make_room(bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_stats.device_alloc_bytes += bytes;
	return CUDA_SUCCESS;
}

void fc_uncharge_device(uint64_t bytes)
{
	fc_stats.device_alloc_bytes -= bytes;
}

/* ---- migration ---- */

static char *fc_va(const struct fc_block *b)
{
	return (char *)(b->r->base + (uintptr_t)b->idx * FC_UMP);
}

static off_t fc_off(const struct fc_block *b)
{
	return (off_t)b->idx * (off_t)FC_UMP;
}

/* Free the pages of the copy a block left (FAKECUDA_RECLAIM=0 keeps them:
 * host memory of both copies stays allocated, and a migration is a memcpy
 * instead of 512 page faults plus a hole punch, several times cheaper in
 * real time; see fc_knobs.reclaim). */
static void fc_punch(int fd, off_t off)
{
	if (fc_knobs.reclaim)
		fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, FC_UMP);
}

static uint32_t fc_cupti_cause(enum fc_cause c)
{
	switch (c) {
	case FC_CAUSE_PREFETCH: return CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH;
	case FC_CAUSE_EVICT:    return CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION;
	default:                return CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_COHERENCE;
	}
}

static void fc_account_move(struct fc_block *b, bool htod, enum fc_cause cause)
{
	uint64_t t0 = fc_now_ns();
	fc_link_transfer(htod, FC_UMP);
	if (htod)
		fc_stats.c.bytes_htod += FC_UMP;
	else
		fc_stats.c.bytes_dtoh += FC_UMP;
	if (htod && cause == FC_CAUSE_FAULT)
		fc_stats.c.bytes_fault_in += FC_UMP;
	if (!htod && cause == FC_CAUSE_EVICT)
		fc_stats.c.bytes_evicted += FC_UMP;
	uint32_t host = b->host_node < 0 ? 0 : (uint32_t)b->host_node;
	fc_feed_push(htod ? CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD
			  : CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
		     fc_cupti_cause(cause), (uint64_t)(uintptr_t)fc_va(b), FC_UMP,
		     fc_now_ns() - t0, htod ? host : b->dev, htod ? b->dev : host);
}

/* A move of a wholly discarded unit copies nothing: its bytes are
 * indeterminate, so it arrives as poison at to (NULL: the same store), and
 * nothing crosses the link (no link time, no bytes moved, no CUPTI
 * transfer record). legs: the transfers the move would have made. The move
 * ends the discard. True when the move is such a one. */
static bool fc_move_discarded(struct fc_block *b, char *to, unsigned legs)
{
	if (!b->discarded)
		return false;
	b->discarded = 0;
	if (to)
		memset(to, FC_POISON, FC_UMP);
	fc_stats.c.bytes_discard_skipped += (uint64_t)legs * FC_UMP;
	return true;
}

/* Ordinal -> another ordinal. Every ordinal is a view of the same device
 * store (one HBM), so no byte moves and no room is needed; the cost is that
 * of a trip through the host (device-to-host, then host-to-device), and the
 * block arrives anew on the target, at the tail of the eviction list. */
static void fc_block_to_peer(struct fc_block *b, int dev, enum fc_cause cause)
{
	bool free_move = fc_move_discarded(b, NULL, 2);
	if (!free_move)
		fc_account_move(b, false, cause);
	b->dev = (uint8_t)dev;
	if (!free_move)
		fc_account_move(b, true, cause);
	fc_evq_unlink(b);
	fc_evq_append(b);
}

/* Host (or another ordinal) -> ordinal dev. keep_host: READ_MOSTLY
 * duplication (host copy stays valid, read-only to the CPU). Fails only when
 * HBM is full of non-evictable memory. */
CUresult fc_block_to_dev(struct fc_block *b, int dev, enum fc_cause cause, bool keep_host)
{
	struct fc_mrange *r = b->r;
	if (b->loc == FC_LOC_DEV && b->dev != dev)
		fc_block_to_peer(b, dev, cause);
	if (b->loc == FC_LOC_DEV) {
		if (b->dup && !keep_host) {   /* a GPU write collapses the duplicate */
			mmap(fc_va(b), FC_UMP, PROT_NONE, MAP_SHARED | MAP_FIXED,
			     r->dfd, fc_off(b));
			fc_punch(r->hfd, fc_off(b));
			b->dup = 0;
		}
		return CUDA_SUCCESS;
	}
	if (!fc_make_room(FC_UMP))
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* Fence the CPU out first: a concurrent CPU access waits in the fault
	 * handler for our lock, then sees the block on the device. */
	mprotect(fc_va(b), FC_UMP, keep_host ? PROT_READ : PROT_NONE);
	bool free_move = fc_move_discarded(b, r->dview + fc_off(b), 1);
	if (!free_move)
		memcpy(r->dview + fc_off(b), r->hview + fc_off(b), FC_UMP);
	if (!keep_host) {
		mmap(fc_va(b), FC_UMP, PROT_NONE, MAP_SHARED | MAP_FIXED, r->dfd, fc_off(b));
		fc_punch(r->hfd, fc_off(b));
	}
	b->dev = (uint8_t)dev;
	if (!free_move)
		fc_account_move(b, true, cause);
	b->ready_ps = fc_stats.clock_ps;   /* in place once its transfer ends */
	b->loc = FC_LOC_DEV;
	b->dup = keep_host;
	b->dev_mapped = 0;
	fc_stats.c.managed_resident_bytes += FC_UMP;
	fc_evq_append(b);
	return CUDA_SUCCESS;
}

static void fc_block_rebind(struct fc_block *b, int node)
{
	if (node == b->host_node)
		return;
	fc_mbind(fc_va(b), FC_UMP, node, true);
	b->host_node = node;
}

/* Advice: set the host copy's policy for pages yet to be placed; pages
 * already there stay (SET_PREFERRED_LOCATION moves no data). */
void fc_block_set_policy(struct fc_block *b, int node)
{
	if (b->loc == FC_LOC_HOST && node != b->host_node) {
		fc_mbind(fc_va(b), FC_UMP, node, false);
		b->host_node = node;
	}
}

/* Device -> host node (-1: no binding). A duplicated block just drops its
 * device copy. */
CUresult fc_block_to_host(struct fc_block *b, enum fc_cause cause, int node)
{
	struct fc_mrange *r = b->r;
	if (b->loc == FC_LOC_HOST) {
		if (node >= 0)
			fc_block_rebind(b, node);
		return CUDA_SUCCESS;
	}
	if (b->dup) {
		mprotect(fc_va(b), FC_UMP, PROT_READ | PROT_WRITE);
		if (node >= 0)
			fc_block_rebind(b, node);
	} else {
		mmap(fc_va(b), FC_UMP, PROT_NONE, MAP_SHARED | MAP_FIXED, r->hfd, fc_off(b));
		b->host_node = -2;   /* force the policy to be set on the new map */
		fc_block_rebind(b, node);
		bool free_move = fc_move_discarded(b, r->hview + fc_off(b), 1);
		if (!free_move)
			memcpy(r->hview + fc_off(b), r->dview + fc_off(b), FC_UMP);
		mprotect(fc_va(b), FC_UMP, PROT_READ | PROT_WRITE);
		if (!free_move)
			fc_account_move(b, false, cause);
	}
	fc_punch(r->dfd, fc_off(b));
	b->loc = FC_LOC_HOST;
	b->dup = 0;
	b->discarded = 0;   /* a duplicate just dropped its device copy: moved too */
	b->dev_mapped = 0;
	fc_stats.c.managed_resident_bytes -= FC_UMP;
	fc_evq_unlink(b);
	return CUDA_SUCCESS;
}

char *fc_block_store(struct fc_block *b)
{
	char *view = b->loc == FC_LOC_DEV ? b->r->dview : b->r->hview;
	return view + fc_off(b);
}

/* ---- discard (the calls are fc_discard.c) ----
 * A discarded range's bytes are indeterminate: they read as FC_POISON
 * wherever they are, so a caller that discards live data fails its own
 * content checks. A unit wholly discarded moves for free (fc_move_discarded)
 * until a write or a prefetch ends the discard. The CPU's writes are seen
 * by a host-resident discarded unit being read-only to it (fc_segv). */

void fc_block_poison(struct fc_block *b, size_t off, size_t len)
{
	memset(fc_block_store(b) + off, FC_POISON, len);
	if (b->dup)   /* the host duplicate the CPU reads */
		memset(b->r->hview + fc_off(b) + off, FC_POISON, len);
}

void fc_block_discard(struct fc_block *b)
{
	b->discarded = 1;
	if (b->loc == FC_LOC_HOST)
		mprotect(fc_va(b), FC_UMP, PROT_READ);
}

void fc_block_undiscard(struct fc_block *b)
{
	if (!b->discarded)
		return;
	b->discarded = 0;
	if (b->loc == FC_LOC_HOST)
		mprotect(fc_va(b), FC_UMP, PROT_READ | PROT_WRITE);
}

struct fc_block *fc_block_of(uintptr_t addr)
{
	struct fc_alloc *a = fc_reg_find(addr);
	if (!a || a->kind != FC_KIND_MANAGED)
		return NULL;
	struct fc_mrange *r = a->owner;
	return &r->blocks[(addr - r->base) / FC_UMP];
}

/* ---- allocation ---- */

static void *fc_reserve_aligned(size_t bytes)
{
	size_t span = bytes + FC_BLOCK;
	char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uintptr_t base = ((uintptr_t)p + FC_BLOCK - 1) & ~(uintptr_t)(FC_BLOCK - 1);
	if (base > (uintptr_t)p)
		munmap(p, base - (uintptr_t)p);
	munmap((char *)base + bytes, (uintptr_t)p + span - base - bytes);
	return (void *)base;
}

static int fc_store(const char *name, size_t bytes, char **view)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)bytes) == 0) {
		*view = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (*view != MAP_FAILED)
			return fd;
	}
	close(fd);
	return -1;
}

static void fc_range_destroy(struct fc_mrange *r)
{
	size_t bytes = r->nblocks * FC_UMP;
	if (r->base)
		munmap((void *)r->base, bytes);
	if (r->hfd >= 0) { munmap(r->hview, bytes); close(r->hfd); }
	if (r->dfd >= 0) { munmap(r->dview, bytes); close(r->dfd); }
	free(r->blocks);
	free(r);
}

static struct fc_mrange *fc_range_create(size_t size)
{
	struct fc_mrange *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->size = size;
	r->nblocks = (size + FC_UMP - 1) / FC_UMP;
	size_t bytes = r->nblocks * FC_UMP;
	r->dfd = -1;
	r->hfd = fc_store("fakecuda-managed-host", bytes, &r->hview);
	if (r->hfd >= 0)
		r->dfd = fc_store("fakecuda-managed-device", bytes, &r->dview);
	r->blocks = calloc(r->nblocks, sizeof *r->blocks);
	void *va = r->dfd >= 0 && r->blocks ? fc_reserve_aligned(bytes) : NULL;
	if (!va || mmap(va, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			r->hfd, 0) == MAP_FAILED) {
		if (va)
			munmap(va, bytes);
		fc_range_destroy(r);
		return NULL;
	}
	r->base = (uintptr_t)va;
	for (size_t i = 0; i < r->nblocks; i++)
		r->blocks[i] = (struct fc_block){ .r = r, .idx = (uint32_t)i,
						  .loc = FC_LOC_HOST, .host_node = -1 };
	return r;
}

CUresult fc_managed_alloc(CUdeviceptr *dptr, size_t bytes, unsigned flags)
{
	if (!dptr || !bytes || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	if (bytes > (1ull << 46))
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct fc_mrange *r = fc_range_create(bytes);
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct fc_alloc *a = fc_reg_add(r->base, bytes, FC_KIND_MANAGED);
	if (!a) {
		fc_range_destroy(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->owner = r;
	a->flags = flags;
	a->map_bytes = r->nblocks * FC_UMP;
	*dptr = r->base;
	return CUDA_SUCCESS;
}

CUresult fc_managed_free(struct fc_alloc *a)
{
	struct fc_mrange *r = a->owner;
	for (size_t i = 0; i < r->nblocks; i++) {
		struct fc_block *b = &r->blocks[i];
		if (b->loc != FC_LOC_DEV)
			continue;
		fc_stats.c.managed_resident_bytes -= FC_UMP;
		fc_evq_unlink(b);
	}
	fc_reg_remove(a);
	fc_range_destroy(r);
	return CUDA_SUCCESS;
}

/* ---- CPU faults: SIGSEGV on a device-resident block pulls it back ---- */

static struct sigaction fc_old_segv;
static pthread_once_t fc_segv_once = PTHREAD_ONCE_INIT;

static void fc_chain_segv(int sig, siginfo_t *si, void *uc)
{
	if (fc_old_segv.sa_flags & SA_SIGINFO && fc_old_segv.sa_sigaction) {
		fc_old_segv.sa_sigaction(sig, si, uc);
		return;
	}
	if (fc_old_segv.sa_handler != SIG_DFL && fc_old_segv.sa_handler != SIG_IGN) {
		fc_old_segv.sa_handler(sig);
		return;
	}
	signal(sig, SIG_DFL);   /* the access re-faults and kills, as it should */
}

static void fc_segv(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	uintptr_t addr = (uintptr_t)si->si_addr;
	fc_lock();
	struct fc_block *b = fc_block_of(addr);
	if (b && b->loc == FC_LOC_DEV) {
		uint64_t t0 = fc_now_ns();
		fc_stats.c.cpu_faults++;
		fc_clock_ns(fc_knobs.fault_ns);
		fc_feed_push(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
			     0, addr & ~(uintptr_t)4095, 1, fc_now_ns() - t0, 0, 0);
		fc_block_to_host(b, FC_CAUSE_CPU, fc_host_target(b));
	} else if (b && b->discarded) {
		fc_block_undiscard(b);   /* a CPU write to a discarded host unit */
	}
	fc_unlock();
	errno = saved;
	if (!b)
		fc_chain_segv(sig, si, uc);
}

static void fc_segv_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = fc_segv;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &fc_old_segv);
}

void fc_managed_install_handler(void)
{
	pthread_once(&fc_segv_once, fc_segv_install);
}

/* ---- test API ---- */

FC_EXPORT int fakecuda_block_location(const void *ptr, CUmemLocationType *type, int *id)
{
	if (!type || !id)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	struct fc_block *b = fc_block_of((uintptr_t)ptr);
	if (b) {
		bool dev = b->loc == FC_LOC_DEV;
		*type = dev ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST_NUMA;
		*id = dev ? b->dev : b->host_node >= 0 ? b->host_node : fc_current_node();
	}
	fc_unlock();
	return b ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
