// SPDX-License-Identifier: MIT
/* Placement, acting (contract in place.h): what is done to memory once the
 * decision is made. Device side: managed memory allocated and homed on the
 * far node (or the GPU); host side: pinned memory mapped, bound, populated
 * and registered on the far node, anonymous maps bound there, a sample of
 * pages read back. Every failure falls back to native and is counted.
 * Runs inside hooks: no malloc, no stdio; memory via the platform layer. */
#include <errno.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../base/kvt.h"
#include "place.h"
#include "place_int.h"
#include "../tier/admit.h"
#include "../cuda_shim/shim.h"

/* ---- the far home ---- */

/* Whether the driver keeps host-NUMA homes: 1 until one fails to read back.
 * A real H200 (driver 580, device NUMA config NONE) answers CUDA_SUCCESS to
 * SET_PREFERRED_LOCATION HOST_NUMA and keeps no preference at all (the range
 * reads back INVALID): the memory then migrates to the GPU on first touch,
 * the opposite of a far home. */
static int numa_homes_kept = 1;

/* Managed memory homed on a host node, accessed by the current device;
 * a driver without host-NUMA homes (pre-12.2 / pre-R550, or one that drops
 * them) gets a plain host home. The first placement reads the home back
 * (its first chunk: two range-attribute calls); later ones trust it. */
int kvt_place_home_far(CUdeviceptr d, uint64_t size, int node)
{
	static int checked;
	CUdevice dev = 0;
	kvt_cuda_current_device(&dev);
	int ok = __atomic_load_n(&numa_homes_kept, __ATOMIC_RELAXED) &&
		 kvt_cuda_advise(d, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
				 CU_MEM_LOCATION_TYPE_HOST_NUMA, node) == CUDA_SUCCESS;
	if (ok && !__atomic_exchange_n(&checked, 1, __ATOMIC_RELAXED)) {
		uint64_t probe = size < (2u << 20) ? size : (2u << 20);
		int t = kvt_cuda_preferred_is(d, probe, CU_MEM_LOCATION_TYPE_HOST_NUMA, node);
		if (t == 0) {
			__atomic_store_n(&numa_homes_kept, 0, __ATOMIC_RELAXED);
			kvt_warn("the CUDA driver accepted node %d as the home of managed memory but "
				 "does not keep it (the range reads back without that preferred "
				 "location); far memory gets a plain host home (no node choice)", node);
			ok = 0;
		}
	}
	/* Admission by fault: no plain host home, on which a GPU fault maps
	 * the memory instead of migrating it (measured on the H200); the
	 * memory then has no preferred location, and demotions still name
	 * the node. */
	if (!ok) {
		kvt_place_fallback(KVT_FB_NUMA_HOME);
		if (!kvt_admit_fault())
			kvt_cuda_advise(d, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
					CU_MEM_LOCATION_TYPE_HOST, 0);
	}
	if (kvt_admit_fault())
		return 0;
	kvt_cuda_advise(d, size, CU_MEM_ADVISE_SET_ACCESSED_BY, CU_MEM_LOCATION_TYPE_DEVICE, dev);
	return 1;
}


/* ---- device side ---- */

int kvt_place_managed(CUdeviceptr *p, uint64_t size, struct kvt_place *pl)
{
	if (kvt_cuda_ready()) {
		kvt_place_fallback(KVT_FB_NO_DRIVER);
		pl->placement = KVT_PLACE_NATIVE;
		return CUDA_ERROR_NOT_INITIALIZED;
	}
	CUdeviceptr d = 0;
	CUresult r = kvt_cuda_alloc_managed(&d, size);
	if (r != CUDA_SUCCESS) {
		kvt_place_fallback(KVT_FB_MANAGED_ALLOC);
		pl->placement = KVT_PLACE_NATIVE;
		return r;
	}
	kvt_place_advise(d, size, pl);
	*p = d;
	return CUDA_SUCCESS;
}

void kvt_place_advise(uint64_t d, uint64_t size, struct kvt_place *pl)
{
	if (pl->placement == KVT_PLACE_MANAGED_FAR) {
		pl->unmapped = !kvt_place_home_far(d, size, pl->node);
	} else if (pl->placement == KVT_PLACE_MANAGED_HBM) {
		CUdevice dev = 0;
		kvt_cuda_current_device(&dev);
		kvt_cuda_advise(d, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
				CU_MEM_LOCATION_TYPE_DEVICE, dev);
	}
}

/* ---- host side ---- */

static uint64_t page_round(uint64_t n)
{
	uint64_t pg = kvt_page_bytes();
	return (n + pg - 1) & ~(pg - 1);
}

/* How many of up to 64 sampled pages of [p, p+len) are on node (resident
 * pages only); *sampled gets the number checked. */
static unsigned pages_on_node(void *p, uint64_t len, int node, unsigned *sampled)
{
	void *pages[64];
	int status[64];
	uint64_t pg = kvt_page_bytes();
	uint64_t nr = len / pg;
	unsigned n = nr < 64 ? (unsigned)nr : 64, on = 0;
	for (unsigned i = 0; i < n; i++)
		pages[i] = (char *)p + (nr / (n ? n : 1)) * i * pg;
	*sampled = 0;
	if (!n || kvt_sys_move_pages(n, pages, NULL, status, 0))
		return 0;
	for (unsigned i = 0; i < n; i++) {
		if (status[i] < 0)
			continue;
		(*sampled)++;
		on += status[i] == node;
	}
	return on;
}

static void verify(void *p, uint64_t len, int node, const char *what)
{
	unsigned sampled, on = pages_on_node(p, len, node, &sampled);
	if (sampled && on < sampled) {
		kvt_place_count_mismatch();
		kvt_warn("%s at %p: %u of %u sampled pages are on node %d, the rest elsewhere",
			 what, p, on, sampled, node);
	}
}

static long bind_range(void *p, uint64_t len, int mode, int node, unsigned flags)
{
	unsigned long mask[2] = { 0, 0 };
	if (node < 0 || node >= 128)
		return -EINVAL;
	mask[node / 64] = 1ul << (node % 64);
	return kvt_sys_mbind(p, len, mode, mask, 129, flags);
}

void *kvt_place_pinned(uint64_t size, unsigned alloc_flags, struct kvt_place *pl)
{
	uint64_t len = page_round(size ? size : 1);
	void *p = kvt_sys_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		goto native;
	/* MPOL_PREFERRED: a full far node spills elsewhere (reported by the
	 * verification) instead of failing the process. */
	if (bind_range(p, len, MPOL_PREFERRED, pl->node, 0)) {
		kvt_sys_munmap(p, len);
		kvt_place_fallback(KVT_FB_HOST_BIND);
		goto native;
	}
	uint64_t pg = kvt_page_bytes();
	for (uint64_t off = 0; off < len; off += pg)      /* populate on the node */
		((volatile char *)p)[off] = 0;
	unsigned reg = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
	(void)alloc_flags;   /* PORTABLE and DEVICEMAP are implied; WRITECOMBINED has no register form */
	if (kvt_cuda_host_register(p, len, reg) != CUDA_SUCCESS) {
		kvt_sys_munmap(p, len);
		kvt_place_fallback(KVT_FB_REGISTER);
		goto native;
	}
	verify(p, len, pl->node, "pinned:cxl");
	return p;
native:
	pl->placement = KVT_PLACE_NATIVE;
	return NULL;
}

void kvt_place_unpin(void *p, uint64_t size)
{
	kvt_cuda_host_unregister(p);
	kvt_sys_munmap(p, page_round(size ? size : 1));
}

int kvt_place_bind(void *p, uint64_t len, struct kvt_place *pl, int move)
{
	long r;
	if (pl->placement == KVT_PLACE_INTERLEAVE) {
		/* DRAM node 0 and the far node; weights need MPOL_WEIGHTED_INTERLEAVE
		 * (Linux 6.9+), plain interleave is used here. */
		unsigned long mask[2] = { 1, 0 };
		if (pl->node > 0 && pl->node < 128)
			mask[pl->node / 64] |= 1ul << (pl->node % 64);
		r = kvt_sys_mbind(p, len, MPOL_INTERLEAVE, mask, 129, move ? MPOL_MF_MOVE : 0);
	} else {
		r = bind_range(p, len, MPOL_PREFERRED, pl->node, move ? MPOL_MF_MOVE : 0);
	}
	if (r) {
		kvt_place_fallback(KVT_FB_HOST_BIND);
		pl->placement = KVT_PLACE_NATIVE;
		return (int)r;
	}
	if (move && pl->placement != KVT_PLACE_INTERLEAVE)
		verify(p, len, pl->node, "registered range");
	return 0;
}
