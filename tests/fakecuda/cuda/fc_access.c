/* SPDX-License-Identifier: MIT */
/* fakecuda GPU accesses — the cost model of the SIMULATED device: an access
 * to HBM-resident bytes costs HBM bandwidth, one through a remote mapping
 * (accessed-by, or a HOST-preferred block after its first fault) costs link
 * bandwidth, anything else is a GPU page fault that migrates the 2 MiB block
 * to the device. Every access comes from one ordinal; a block resident on
 * another ordinal faults and moves to it.
 * The bytes of device memory are reached only through its private view
 * (fc_view), never at the address host code holds.
 * Also the touch kernel's body and a defined kernel's reads and writes
 * (fc_kernel.c has the handles and launches). Callers hold the global lock. */
#include "fc_internal.h"

#include <cupti_activity.h>
#include <string.h>
#include <sys/mman.h>

/* Per-call fault bookkeeping: faults are serviced in groups, and all of
 * one call's accesses come from one ordinal. */
struct fc_faults { uint64_t nr, mapped; int dev; };

static void fc_cost_hbm(uint64_t bytes)
{
	fc_stats.c.bytes_hbm += bytes;
	fc_clock_bytes(bytes, fc_knobs.hbm_gbps);
}

static void fc_cost_remote(uint64_t bytes)
{
	fc_stats.c.bytes_remote += bytes;
	fc_link_transfer(true, bytes);
}

/* A GPU fault on a host-resident block maps the host copy instead of
 * migrating it only when the preferred location is plain HOST; with a
 * HOST_NUMA preference the block migrates (as measured on an H200 with
 * driver 580.159.04, which keeps no HOST_NUMA preference;
 * docs/simulated-device.md). FAKECUDA_FAULT_MAPS=1: every such fault maps,
 * as a driver that keeps a host home may. */
static bool fc_fault_maps(const struct fc_block *b)
{
	return b->pref_type == CU_MEM_LOCATION_TYPE_HOST || fc_knobs.fault_maps;
}

static void fc_fault_record(uintptr_t addr, int write, struct fc_faults *f)
{
	f->nr++;
	fc_stats.c.faults++;
	fc_stats.dev[f->dev].faults++;
	fc_feed_push(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
		     write ? CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_WRITE
			   : CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_READ,
		     addr & ~(uintptr_t)4095, 1, 0, 0, 0);
}

/* Below a 2 MiB page: the fault service migrates the rest of the faulting
 * page's 2 MiB region with it (the H200 serviced faults 2 MiB at a time;
 * docs/simulated-device.md), the pages the GPU could fault on: on the
 * host, not mapped for this ordinal. One fault, counted once. */
static void fc_fault_region(struct fc_block *b, int write, const struct fc_faults *f)
{
	size_t i, end;
	if (FC_UMP == FC_BLOCK)
		return;
	fc_region_of(b, &i, &end);
	uint8_t me = (uint8_t)(1u << f->dev);
	for (struct fc_block *all = b->r->blocks; i < end; i++) {
		struct fc_block *s = &all[i];
		if (s == b || s->loc != FC_LOC_HOST || (s->accessed_by_devs & me) ||
		    (s->dev_mapped & me))
			continue;
		if (fc_block_to_dev(s, f->dev, FC_CAUSE_FAULT, s->read_mostly && !write))
			break;
	}
}

/* One GPU access within one managed block; returns where the bytes are. */
static char *fc_managed_move(struct fc_block *b, uintptr_t addr, size_t len,
			     int write, struct fc_faults *f)
{
	size_t off = addr & (FC_UMP - 1);
	uint8_t me = (uint8_t)(1u << f->dev);
	/* another ordinal's block (no peer mappings here: it moves), or a write
	 * that invalidates the host duplicate: one fault either way */
	if (b->loc == FC_LOC_DEV && (b->dev != f->dev || (write && b->dup))) {
		fc_fault_record(addr, write, f);
		fc_block_to_dev(b, f->dev, FC_CAUSE_FAULT, b->dup && !write);
	}
	if (b->loc == FC_LOC_DEV) {
		fc_stall_until(b->ready_ps);   /* still on its way in: wait for it */
		fc_block_touch(b);
		fc_cost_hbm(len);
		return fc_block_store(b) + off;
	}
	if (!(b->accessed_by_devs & me) && !(b->dev_mapped & me)) {
		fc_fault_record(addr, write, f);
		bool moved = !fc_fault_maps(b) &&
			fc_block_to_dev(b, f->dev, FC_CAUSE_FAULT, b->read_mostly && !write) ==
			CUDA_SUCCESS;
		if (moved) {
			fc_fault_region(b, write, f);
			fc_cost_hbm(len);
			return fc_block_store(b) + off;
		}
		b->dev_mapped |= me;   /* map the host copy instead of migrating */
		f->mapped++;
	}
	fc_cost_remote(len);
	return fc_block_store(b) + off;
}

/* A write ends a discard, after the move it may take (which is free). */
static char *fc_managed_piece(struct fc_block *b, uintptr_t addr, size_t len,
			      int write, struct fc_faults *f)
{
	char *at = fc_managed_move(b, addr, len, write, f);
	if (write)
		fc_block_undiscard(b);
	return at;
}

/* A copy or memset into a VMM mapping needs the access cuMemSetAccess gave
 * the GPU (the host protection of a device mapping says nothing of it). */
static bool fc_vmm_denied(const struct fc_alloc *a, int write)
{
	return a->kind == FC_KIND_VMM && !(a->access & (write ? PROT_WRITE : PROT_READ));
}

/* moves: the access moves bytes (a copy or memset), so *out must be where
 * they are; a kernel's access is accounted only. */
static CUresult fc_span(uintptr_t addr, size_t len, int write, bool moves, char **out,
			size_t *contig, struct fc_faults *f)
{
	struct fc_alloc *a = fc_reg_find(addr);
	if (!a) {   /* pageable host memory: reached over the link */
		fc_cost_remote(len);
		*out = (char *)addr;
		*contig = len;
		return CUDA_ERROR_NOT_FOUND;
	}
	size_t room = a->base + a->size - addr;
	if (a->kind == FC_KIND_MANAGED) {
		struct fc_block *b = fc_block_of(addr);
		size_t in_block = FC_UMP - (addr & (FC_UMP - 1));
		*contig = len < in_block ? len : in_block;
		if (*contig > room)
			*contig = room;
		*out = fc_managed_piece(b, addr, *contig, write, f);
		return CUDA_SUCCESS;
	}
	if (moves && fc_vmm_denied(a, write))
		return CUDA_ERROR_INVALID_VALUE;
	*contig = len < room ? len : room;
	*out = a->view + (addr - a->base);
	if (fc_is_device(a))
		fc_cost_hbm(*contig);
	else
		fc_cost_remote(*contig);
	return CUDA_SUCCESS;
}

static void fc_fault_groups(const struct fc_faults *f)
{
	unsigned batch = fc_knobs.fault_batch_blocks ? fc_knobs.fault_batch_blocks : 1;
	uint64_t migrated = f->nr - f->mapped;
	uint64_t groups = (migrated + batch - 1) / batch, mapped = (f->mapped + batch - 1) / batch;
	fc_stats.c.fault_groups += groups + mapped;
	fc_clock_ns(groups * fc_knobs.fault_ns + mapped * fc_knobs.map_fault_ns);
}

CUresult fc_gpu_span(uintptr_t addr, size_t len, int write, int dev, char **out,
		     size_t *contig)
{
	struct fc_faults f = { 0, 0, dev };
	CUresult r = fc_span(addr, len, write, true, out, contig, &f);
	fc_fault_groups(&f);
	return r == CUDA_ERROR_NOT_FOUND ? CUDA_SUCCESS : r;
}

/* A whole GPU access; unknown (unregistered) memory is an illegal address. */
CUresult fc_gpu_access(uintptr_t addr, size_t len, int write, int dev)
{
	fc_vt_working();
	fc_lock_yield();
	struct fc_faults f = { 0, 0, dev };
	CUresult r = CUDA_SUCCESS;
	while (len && r == CUDA_SUCCESS) {
		char *p;
		size_t n;
		r = fc_span(addr, len, write, false, &p, &n, &f);
		addr += n;
		len -= n;
	}
	fc_fault_groups(&f);
	return r == CUDA_ERROR_NOT_FOUND ? CUDA_ERROR_INVALID_VALUE : r;
}

/* From the calling thread's current context's ordinal (0 without one). */
FC_EXPORT int fakecuda_access(const void *ptr, size_t len, int write)
{
	fc_config_init();
	fc_lock();
	struct fc_op op;               /* synchronous: on the legacy stream, waited for */
	fc_op_begin(&op, NULL, fc_current_dev(), FC_ENG_SM);
	CUresult r = fc_gpu_access((uintptr_t)ptr, len, write, fc_current_dev());
	fc_host_wait_until(fc_op_end(&op));
	fc_unlock();
	return r;
}

/* ---- kernels' memory ---- */

const char *fc_kernel_mem(uintptr_t p, size_t len)
{
	struct fc_alloc *a = fc_reg_find(p);
	return a && fc_is_device(a) ? fc_view(p, len) : (const char *)p;
}

/* Range i of the kernel's argument array, read as a kernel reads it: in
 * device memory through its view (its address is not host-readable), any
 * other memory where it is. */
static CUresult fc_touch_range(const struct fakecuda_range *ranges, unsigned i,
			       struct fakecuda_range *out)
{
	const char *src = fc_kernel_mem((uintptr_t)&ranges[i], sizeof *out);
	if (!src)
		return CUDA_ERROR_ILLEGAL_ADDRESS;   /* runs past its allocation */
	memcpy(out, src, sizeof *out);
	return CUDA_SUCCESS;
}

/* The touch kernel's body: one launch's cost, then each range in order. */
CUresult fc_touch_run(const struct fakecuda_range *ranges, unsigned nr, int dev)
{
	fc_lock();
	fc_stats.c.launches++;
	fc_clock_ns(fc_knobs.launch_ns);
	CUresult r = CUDA_SUCCESS;
	for (unsigned i = 0; i < nr && r == CUDA_SUCCESS; i++) {
		struct fakecuda_range rg;
		r = fc_touch_range(ranges, i, &rg);
		if (r == CUDA_SUCCESS)
			r = fc_gpu_access(rg.ptr, rg.len, rg.write, dev);
	}
	fc_unlock();
	return r == CUDA_SUCCESS ? r : CUDA_ERROR_ILLEGAL_ADDRESS;
}

/* Every byte of [addr, addr+len) in memory the driver knows (allocations
 * may follow one another). */
static bool fc_kernel_reachable(uintptr_t addr, size_t len)
{
	if (addr + len < addr)
		return false;
	while (len) {
		struct fc_alloc *a = fc_reg_find(addr);
		if (!a)
			return false;
		size_t room = a->base + a->size - addr;
		if (room >= len)
			return true;
		addr += room;
		len -= room;
	}
	return true;
}

CUresult fc_kernel_copy(uintptr_t addr, void *buf, size_t len, int write, int dev)
{
	fc_vt_working();
	fc_lock_yield();
	if (!fc_kernel_reachable(addr, len))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	if (!buf)
		return fc_gpu_access(addr, len, write, dev) == CUDA_SUCCESS
		     ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_ADDRESS;
	struct fc_faults f = { 0, 0, dev };
	CUresult r = CUDA_SUCCESS;
	char *at = buf;
	while (len && r == CUDA_SUCCESS) {
		char *p;
		size_t n;
		r = fc_span(addr, len, write, true, &p, &n, &f);
		if (r != CUDA_SUCCESS)
			break;
		if (write)
			memcpy(p, at, n);
		else
			memcpy(at, p, n);
		at += n;
		addr += n;
		len -= n;
	}
	fc_fault_groups(&f);
	return r == CUDA_SUCCESS ? r : CUDA_ERROR_ILLEGAL_ADDRESS;
}
