// SPDX-License-Identifier: MIT
/* Guest-side placement check for `make test-vm` (docs/vm-testbed.md).
 *
 *   vm_check FAR_NODE [LOCAL_NODE [MIB]]
 *
 * Runs under libkvtier.so with the policy the guest script sets
 *   host => pinned:cxl; device,size>=2M => managed:cxl;
 *   mmap,size>=16M => bind:cxl; * => native
 * and the simulated driver (build/fakecuda/libcuda.so.1). It judges only
 * where pages are, never how fast:
 *   host_pinned    cuMemHostAlloc MIB (default 4) MiB, touched: every page
 *                  on FAR_NODE
 *   mmap_bound     a 16 MiB anonymous map (bind:cxl), first MIB MiB
 *                  touched: every touched page on FAR_NODE
 *   mmap_native    a 1 MiB map (native): default policy, pages on LOCAL_NODE
 *   kv_advice      cuMemAlloc of MIB MiB rounded up to whole 2 MiB blocks
 *                  (managed:cxl): IS_MANAGED, preferred location
 *                  HOST_NUMA FAR_NODE
 *   kv_host_copy   after a CPU write, the host copies of its blocks (the
 *                  driver's memfd) on FAR_NODE
 *   kv_roundtrip   the blocks prefetched to the device (none left on
 *                  FAR_NODE) and faulted back by a CPU read: data intact
 *   kv_host_copy_after_fault   the host copies on FAR_NODE again
 * Page placement comes from move_pages(2) (status = node of each present
 * page) and is cross-checked with /proc/self/numa_maps (policy, N<node>=).
 * Written data must read back (QEMU 7.2 silently drops writes to a CXL
 * window it cannot route). Buffers stay at a few MiB: emulated CXL memory is
 * slow (about 0.6 s per MiB touched).
 * One "PASS name: ..." or "FAIL name: ..." line per check; exit 0 iff all
 * passed. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cuda.h>

#define MiB (1UL << 20)

static int far = -1, local = 0, failed, passed;
static long pagesz;

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static gpa_t gpa;

static void *get(const char *sym, int ver)
{
	void *fn = NULL;
	if (gpa(sym, &fn, ver, 0, NULL) != CUDA_SUCCESS || !fn) {
		printf("FAIL resolve: cannot resolve %s\n", sym);
		exit(3);
	}
	return fn;
}

static void report(int ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void report(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;
	printf("%s %s: ", ok ? "PASS" : "FAIL", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	ok ? passed++ : failed++;
}

/* Pages of [p, p+len) per node (move_pages with nodes == NULL). */
struct where {
	long pages, on_target, absent, other;
	int other_node;
};

static struct where locate(void *p, size_t len, int target)
{
	struct where w = { 0, 0, 0, 0, -1 };
	unsigned long n = len / (unsigned long)pagesz;
	void **pages = calloc(n, sizeof *pages);
	int *status = calloc(n, sizeof *status);
	if (!pages || !status) {
		free(pages);
		free(status);
		w.absent = -1;
		return w;
	}
	for (unsigned long i = 0; i < n; i++)
		pages[i] = (char *)p + i * (unsigned long)pagesz;
	if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) != 0) {
		w.absent = -errno;
	} else {
		w.pages = (long)n;
		for (unsigned long i = 0; i < n; i++) {
			if (status[i] == target)
				w.on_target++;
			else if (status[i] < 0)
				w.absent++;
			else {
				w.other++;
				w.other_node = status[i];
			}
		}
	}
	free(pages);
	free(status);
	return w;
}

/* numa_maps over [p, p+len): the policy of the VMA holding p, and the summed
 * N<node>= page counts of every VMA that overlaps the range (a VMA merged
 * with a neighbour may count a few pages more). numa_maps lines are sorted
 * by start address and carry no end: the VMA holding p is the last one
 * starting at or below p. */
struct nmap {
	char policy[64];
	long on_node[64];
	int vmas;
};

static void nmap_add(struct nmap *m, const char *line)
{
	char buf[4096], *end, *save = NULL;
	snprintf(buf, sizeof buf, "%s", line);
	strtoul(buf, &end, 16);
	char pol[64] = "";
	sscanf(end, " %63s", pol);
	if (!m->vmas++)
		snprintf(m->policy, sizeof m->policy, "%s", pol);
	for (char *t = strtok_r(end, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
		int node;
		long cnt;
		if (sscanf(t, "N%d=%ld", &node, &cnt) == 2 && node >= 0 && node < 64)
			m->on_node[node] += cnt;
	}
}

static struct nmap numa_maps(void *p, size_t len)
{
	struct nmap m;
	memset(&m, 0, sizeof m);
	snprintf(m.policy, sizeof m.policy, "none");
	FILE *f = fopen("/proc/self/numa_maps", "r");
	static char line[4096], holder[4096];
	uintptr_t lo = (uintptr_t)p, hi = lo + len;
	holder[0] = 0;
	int held = 0;
	while (f && fgets(line, sizeof line, f)) {
		uintptr_t a = strtoul(line, NULL, 16);
		if (a <= lo) {
			snprintf(holder, sizeof holder, "%s", line);
			continue;
		}
		if (a >= hi)
			break;
		if (!held++ && holder[0])
			nmap_add(&m, holder);
		nmap_add(&m, line);
	}
	if (!held && holder[0])
		nmap_add(&m, holder);
	if (f)
		fclose(f);
	return m;
}

static int policy_names(const char *pol, int node)
{
	/* prefer:N, bind:N, preferred=N ... : the policy's node list is N */
	const char *c = strchr(pol, ':');
	return c && atoi(c + 1) == node && !strchr(c + 1, ',') && !strchr(c + 1, '-');
}

/* Bytes of [p, p+len) that do not read back as val: the memory keeps what
 * was written (QEMU 7.2 drops writes to a CXL window it cannot route). */
static size_t differ(const void *p, size_t len, unsigned char val)
{
	const volatile unsigned char *c = p;
	size_t bad = 0;
	for (size_t i = 0; i < len; i++)
		bad += c[i] != val;
	return bad;
}

/* All npages pages of [p, p+len) on node, by move_pages and numa_maps;
 * bad: bytes that did not keep their value. */
static void check_on(const char *name, void *p, size_t len, long npages, int node,
		     int want_policy, size_t bad)
{
	struct where w = locate(p, len, node);
	struct nmap m = numa_maps(p, len);
	int ok = w.on_target == npages && w.other == 0 && m.on_node[node] >= npages &&
		 (!want_policy || policy_names(m.policy, node)) && bad == 0;
	char other[64] = "";
	if (w.other)
		snprintf(other, sizeof other, ", e.g. node %d", w.other_node);
	report(ok, name,
	       "%ld/%ld touched pages on node %d (move_pages: %ld elsewhere%s, %ld absent); "
	       "numa_maps policy=%s N%d=%ld (%d vma); %zu bytes lost",
	       w.on_target, npages, node, w.other, other, w.absent, m.policy, node,
	       m.on_node[node], m.vmas, bad);
}

#define R(T, var, sym, ver) __typeof__(T) var = (__typeof__(T))get(sym, ver)

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: vm_check FAR_NODE [LOCAL_NODE [MIB]]\n");
		return 2;
	}
	far = atoi(argv[1]);
	local = argc > 2 ? atoi(argv[2]) : 0;
	size_t mib = argc > 3 ? strtoul(argv[3], NULL, 10) : 4;
	if (mib < 1 || mib > 16)
		mib = 4;
	pagesz = sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);

	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		printf("FAIL driver: dlopen libcuda.so.1: %s\n", dlerror());
		return 1;
	}
	gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
	if (!gpa) {
		printf("FAIL driver: no cuGetProcAddress_v2\n");
		return 1;
	}
	gpa = (gpa_t)get("cuGetProcAddress", 12000);
	R(CUresult (*)(unsigned), init, "cuInit", 2000);
	R(CUresult (*)(CUcontext *, CUdevice), retain, "cuDevicePrimaryCtxRetain", 7000);
	R(CUresult (*)(CUcontext), setcur, "cuCtxSetCurrent", 4000);
	CUcontext ctx;
	if (init(0) || retain(&ctx, 0) || setcur(ctx)) {
		printf("FAIL driver: no context\n");
		return 1;
	}
	R(CUresult (*)(CUdeviceptr *, size_t), alloc, "cuMemAlloc", 3020);
	R(CUresult (*)(CUdeviceptr), dfree, "cuMemFree", 3020);
	R(CUresult (*)(void *, CUpointer_attribute, CUdeviceptr), ptrattr, "cuPointerGetAttribute", 4000);
	R(CUresult (*)(void *, size_t, CUmem_range_attribute, CUdeviceptr, size_t), rattr,
	  "cuMemRangeGetAttribute", 8000);
	R(CUresult (*)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream), prefetch,
	  "cuMemPrefetchAsync", 12020);
	R(CUresult (*)(CUstream), ssync, "cuStreamSynchronize", 2000);
	R(CUresult (*)(void **, size_t, unsigned), hostalloc, "cuMemHostAlloc", 2020);
	R(CUresult (*)(void *), freehost, "cuMemFreeHost", 2000);

	/* 1. pinned host memory (host => pinned:cxl) */
	size_t hl = mib * MiB;
	void *hp = NULL;
	CUresult r = hostalloc(&hp, hl, CU_MEMHOSTALLOC_PORTABLE);
	if (r != CUDA_SUCCESS || !hp) {
		report(0, "host_pinned", "cuMemHostAlloc rc=%d", r);
	} else {
		memset(hp, 0x5a, hl);
		check_on("host_pinned", hp, hl, (long)(hl / pagesz), far, 1, differ(hp, hl, 0x5a));
		r = freehost(hp);
		report(r == CUDA_SUCCESS, "host_pinned_free", "cuMemFreeHost rc=%d", r);
	}

	/* 2. a big anonymous map (mmap,size>=16M => bind:cxl); 4 MiB touched */
	size_t ml = 16 * MiB, mt = mib * MiB;
	char *m = mmap(NULL, ml, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		report(0, "mmap_bound", "mmap: %s", strerror(errno));
	} else {
		memset(m, 1, mt);
		check_on("mmap_bound", m, mt, (long)(mt / pagesz), far, 1, differ(m, mt, 1));
		munmap(m, ml);
	}

	/* 3. a small map stays native: default policy, local pages */
	size_t sl = 1 * MiB;
	char *s = mmap(NULL, sl, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED) {
		report(0, "mmap_native", "mmap: %s", strerror(errno));
	} else {
		memset(s, 2, sl);
		struct where w = locate(s, sl, local);
		struct nmap nm = numa_maps(s, sl);
		long np = (long)(sl / pagesz);
		report(w.on_target == np && !strcmp(nm.policy, "default"), "mmap_native",
		       "%ld/%ld pages on local node %d, numa_maps policy=%s", w.on_target, np,
		       local, nm.policy);
		munmap(s, sl);
	}

	/* 4. KV blocks: device memory redirected to managed memory homed on the
	 * far node; the simulated driver binds each block's host copy there. */
	size_t kl = (mib + 1) / 2 * 2 * MiB;
	CUdeviceptr d = 0;
	r = alloc(&d, kl);
	unsigned managed = 0;
	int type = -1, id = -1;
	if (r == CUDA_SUCCESS) {
		ptrattr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d);
		rattr(&type, sizeof type, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, d, kl);
		rattr(&id, sizeof id, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, d, kl);
	}
	report(r == CUDA_SUCCESS && managed && type == CU_MEM_LOCATION_TYPE_HOST_NUMA && id == far,
	       "kv_advice", "cuMemAlloc rc=%d managed=%u preferred location type=%d id=%d "
	       "(want HOST_NUMA=%d, %d)", r, managed, type, id, CU_MEM_LOCATION_TYPE_HOST_NUMA, far);
	if (r == CUDA_SUCCESS && managed) {
		char *kv = (char *)(uintptr_t)d;
		for (size_t i = 0; i < kl; i++)
			kv[i] = (char)(i * 7 + 3);
		size_t lost = 0;
		for (size_t i = 0; i < kl; i++)
			lost += kv[i] != (char)(i * 7 + 3);
		check_on("kv_host_copy", kv, kl, (long)(kl / pagesz), far, 0, lost);

		CUmemLocation dev = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
		CUresult pr = prefetch(d, kl, dev, 0, 0);
		ssync(0);
		struct where gone = locate(kv, kl, far);   /* device-resident: none on far */
		int dtype = -2;
		rattr(&dtype, sizeof dtype, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, d, kl);
		/* CPU read faults every block back to its host copy */
		size_t bad = 0;
		for (size_t i = 0; i < kl; i++)
			bad += kv[i] != (char)(i * 7 + 3);
		report(pr == CUDA_SUCCESS && bad == 0 && gone.on_target == 0, "kv_roundtrip",
		       "prefetch to device rc=%d (then %ld pages on node %d), CPU read back: %zu "
		       "bytes differ", pr, gone.on_target, far, bad);
		check_on("kv_host_copy_after_fault", kv, kl, (long)(kl / pagesz), far, 0, 0);
	}
	if (r == CUDA_SUCCESS)
		dfree(d);

	printf("vm_check: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
