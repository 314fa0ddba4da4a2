/* SPDX-License-Identifier: MIT */
/* CUnit suite for the SIMULATED CUDA driver's device ordinals
 * (FAKECUDA_DEVICES=N: ordinals 0..N-1, views of one HBM). The variable is
 * read once per process, so, as in test_fakecuda_env.c, this binary re-runs
 * itself as a child (--child MODE) with it set; a child prints "key=value"
 * lines and the parent checks them. Runs with FAKECUDA_DEVICE_BYTES=64M. */
#include "unit/fakecuda_drv.h"

#include <cuda_runtime_api.h>
#include <stdbool.h>

/* Driver entry points this suite needs beyond fakecuda_drv.h's D. */
static struct {
	__typeof__(&cuDeviceGet) DeviceGet;
	__typeof__(&cuDeviceGetName) DeviceGetName;
	__typeof__(&cuDeviceTotalMem) TotalMem;
	__typeof__(&cuDeviceGetUuid) Uuid;
	__typeof__(&cuDevicePrimaryCtxRelease) PrimaryRelease;
	__typeof__(&cuDevicePrimaryCtxGetState) PrimaryState;
	__typeof__(&cuDevicePrimaryCtxSetFlags) PrimarySetFlags;
	__typeof__(&cuDevicePrimaryCtxReset) PrimaryReset;
	__typeof__(&cuCtxGetDevice) CtxGetDevice;
	__typeof__(&cuCtxCreate) CtxCreate;
	__typeof__(&cuCtxDestroy) CtxDestroy;
	__typeof__(&cuStreamCreate) StreamCreate;
	__typeof__(&cuStreamDestroy) StreamDestroy;
	__typeof__(&fakecuda_device_counters) dctr;
} X;

#define NR_PROBES 17   /* entry points probe_ordinal() calls */

static int load_more(void)
{
#define L(f, s, v) X.f = get(s, v, 0)
	L(DeviceGet, "cuDeviceGet", 2000);
	L(DeviceGetName, "cuDeviceGetName", 2000);
	L(TotalMem, "cuDeviceTotalMem", 3020);
	L(Uuid, "cuDeviceGetUuid", 11040);
	L(PrimaryRelease, "cuDevicePrimaryCtxRelease", 11000);
	L(PrimaryState, "cuDevicePrimaryCtxGetState", 7000);
	L(PrimarySetFlags, "cuDevicePrimaryCtxSetFlags", 11000);
	L(PrimaryReset, "cuDevicePrimaryCtxReset", 11000);
	L(CtxGetDevice, "cuCtxGetDevice", 2000);
	L(CtxCreate, "cuCtxCreate", 12050);
	L(CtxDestroy, "cuCtxDestroy", 4000);
	L(StreamCreate, "cuStreamCreate", 2000);
	L(StreamDestroy, "cuStreamDestroy", 4000);
#undef L
	X.dctr = (__typeof__(X.dctr))dlsym(drv, "fakecuda_device_counters");
	return X.DeviceGet && X.DeviceGetName && X.TotalMem && X.Uuid && X.PrimaryRelease &&
	       X.PrimaryState && X.PrimarySetFlags && X.PrimaryReset && X.CtxGetDevice &&
	       X.CtxCreate && X.CtxDestroy && X.StreamCreate && X.StreamDestroy && X.dctr
	       ? 0 : -1;
}

/* ---- child side ---- */

static struct fakecuda_device_counters dc(int ordinal)
{
	struct fakecuda_device_counters c;
	memset(&c, 0xff, sizeof c);   /* a failed call reads as all ones */
	X.dctr(ordinal, &c);
	return c;
}

static CUcontext primary(int ordinal)
{
	CUcontext c = NULL;
	D.PrimaryCtxRetain(&c, ordinal);
	return c;
}

/* Make ordinal's primary context current (retained once per call). */
static int bind(int ordinal)
{
	CUcontext c = primary(ordinal);
	return c && D.CtxSetCurrent(c) == CUDA_SUCCESS ? 0 : -1;
}

static CUmemLocation on_dev(int ordinal)
{
	return (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, ordinal };
}

/* Every entry point that names an ordinal, called with d: the results,
 * comma-separated (0 everywhere for a valid ordinal, 101 =
 * CUDA_ERROR_INVALID_DEVICE everywhere for a bad one). */
static void probe_ordinal(int d, CUdeviceptr p, char *buf, size_t len)
{
	CUdevice dev;
	char name[64];
	size_t bytes;
	CUuuid uuid;
	int v, active;
	unsigned flags;
	CUcontext c = NULL, made = NULL;
	struct fakecuda_device_counters k;
	int r[NR_PROBES], i = 0;
	/* one statement each: the order matters (retain before release) */
	r[i++] = X.DeviceGet(&dev, d);
	r[i++] = X.DeviceGetName(name, sizeof name, d);
	r[i++] = X.TotalMem(&bytes, d);
	r[i++] = D.DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
	r[i++] = X.Uuid(&uuid, d);
	r[i++] = D.PrimaryCtxRetain(&c, d);
	r[i++] = X.PrimaryState(d, &flags, &active);
	r[i++] = X.PrimarySetFlags(d, 0);
	r[i++] = X.PrimaryReset(d);
	r[i++] = X.PrimaryRelease(d);
	r[i++] = D.MemAdviseV1(p, BLK, CU_MEM_ADVISE_SET_ACCESSED_BY, d);
	r[i++] = D.MemAdvise(p, BLK, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, on_dev(d));
	r[i++] = D.PrefetchV1(p, BLK, d, NULL);
	r[i++] = D.Prefetch(p, BLK, on_dev(d), 0, NULL);
	r[i++] = X.CtxCreate(&made, NULL, 0, d);
	r[i++] = made ? X.CtxDestroy(made) : CUDA_ERROR_INVALID_DEVICE;
	r[i++] = X.dctr(d, &k);
	size_t n = 0;
	buf[0] = 0;
	for (int j = 0; j < i && n < len; j++)
		n += (size_t)snprintf(buf + n, len - n, "%s%d", j ? "," : "", r[j]);
}

/* Device count, then the last ordinal (accepted) and the one past it
 * (rejected) through every entry point; the UUID of ordinal 0. */
static int child_probe(void)
{
	int count = -1;
	CUdeviceptr p = 0;
	CUuuid uuid;
	char last[256], over[256];
	if (D.DeviceGetCount(&count) || D.MemAllocManaged(&p, BLK, CU_MEM_ATTACH_GLOBAL) ||
	    X.Uuid(&uuid, 0))
		return 1;
	probe_ordinal(count - 1, p, last, sizeof last);
	probe_ordinal(count, p, over, sizeof over);
	printf("count=%d\nlast=%s\nover=%s\nuuid0=%.16s\n", count, last, over, uuid.bytes);
	return 0;
}

/* Primary contexts per ordinal, cuCtxGetDevice, cuCtxCreate, the shared
 * memory pool and the per-ordinal context counters (needs N >= 3). */
static int child_contexts(void)
{
	CUcontext c[3] = { primary(0), primary(1), primary(2) };
	CUdevice dev = -1, made_dev = -1;
	if (!c[0] || !c[1] || !c[2] || D.CtxSetCurrent(c[2]) || X.CtxGetDevice(&dev))
		return 1;
	printf("distinct=%d\nctxdev=%d\n", c[0] != c[1] && c[1] != c[2] && c[0] != c[2], dev);
	struct fakecuda_device_counters k2 = dc(2);
	printf("refs2=%llu\nmade2=%llu\n", (unsigned long long)k2.primary_refs,
	       (unsigned long long)k2.contexts_made);
	int active = -1;
	unsigned flags;
	if (X.PrimaryRelease(2) || X.PrimaryState(2, &flags, &active))
		return 1;
	CUcontext again = primary(2);   /* active again: made a second time */
	k2 = dc(2);
	printf("inactive=%d\nsame=%d\nremade2=%llu\n", !active, again == c[2],
	       (unsigned long long)k2.contexts_made);
	CUcontext made = NULL;
	if (X.CtxCreate(&made, NULL, 0, 1) || X.CtxGetDevice(&made_dev) || X.CtxDestroy(made))
		return 1;
	printf("created_dev=%d\nmade1=%llu\n", made_dev, (unsigned long long)dc(1).contexts_made);
	/* one HBM: ordinal 1's allocation is gone from ordinal 2's free memory */
	size_t f1, t1, f2, t2;
	CUdeviceptr x;
	if (D.CtxSetCurrent(c[1]) || D.MemGetInfo(&f1, &t1) || D.MemAlloc(&x, 8 * MiB) ||
	    D.CtxSetCurrent(c[2]) || D.MemGetInfo(&f2, &t2))
		return 1;
	printf("total=%zu,%zu\nused_by_1=%zu\n", t1, t2, f1 - f2);
	D.MemFree(x);
	D.reset();
	k2 = dc(2);
	printf("after_reset=%llu,%llu\n", (unsigned long long)k2.contexts_made,
	       (unsigned long long)k2.primary_refs);
	return 0;
}

static void print_loc(const char *key, CUdeviceptr p)
{
	int id = -9;
	CUmemLocationType t = loc_of(p, &id);
	printf("%s=%s%d\n", key, t == CU_MEM_LOCATION_TYPE_DEVICE ? "dev" : "host", id);
}

/* A touch kernel on stream s over [p, p+64). */
static int touch_on(CUstream s, CUdeviceptr p)
{
	struct fakecuda_range rg = { p, 64, 0 };
	const struct fakecuda_range *rp = &rg;
	unsigned nr = 1;
	void *params[] = { &rp, &nr };
	return D.Launch(D.touch(), 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}

/* Prefetch to ordinal 2, a fault from ordinal 1 that moves the block, a
 * kernel on ordinal 2's stream, the legacy prefetch ABI; data stays whole. */
static int child_migrate(void)
{
	const size_t nb = 4;
	CUdeviceptr p = 0;
	if (D.MemAllocManaged(&p, nb * BLK, CU_MEM_ATTACH_GLOBAL))
		return 1;
	uint32_t *w = (uint32_t *)p;
	for (size_t i = 0; i < nb * BLK / 4; i++)
		w[i] = (uint32_t)(i * 2654435761u);
	D.reset();
	if (D.Prefetch(p, BLK, on_dev(2), 0, NULL))
		return 1;
	print_loc("pf_loc", p);
	printf("pf_to=%llu,%llu\nresident2=%llu\n",
	       (unsigned long long)dc(2).prefetch_blocks_to,
	       (unsigned long long)dc(0).prefetch_blocks_to,
	       (unsigned long long)dc(2).resident_blocks);
	if (D.Prefetch(p, BLK, on_dev(2), 0, NULL))   /* already there: no move */
		return 1;
	printf("pf_again=%llu,%llu\n", (unsigned long long)dc(2).prefetch_blocks_to,
	       (unsigned long long)ctr().prefetch_blocks);

	/* ordinal 1 reads the block ordinal 2 holds */
	if (bind(1))
		return 1;
	D.reset();
	if (D.access((void *)p, 4096, 0))
		return 1;
	struct fakecuda_counters c = ctr();
	print_loc("peer_loc", p);
	printf("faults=%llu,%llu,%llu,%llu\nmoved=%llu,%llu\nvirtual_ns=%llu\nresident=%llu,%llu\n",
	       (unsigned long long)c.faults, (unsigned long long)dc(0).faults,
	       (unsigned long long)dc(1).faults, (unsigned long long)dc(2).faults,
	       (unsigned long long)c.bytes_dtoh, (unsigned long long)c.bytes_htod,
	       (unsigned long long)c.virtual_ns,
	       (unsigned long long)dc(1).resident_blocks, (unsigned long long)dc(2).resident_blocks);
	if (D.access((void *)p, 4096, 0))   /* a hit now */
		return 1;
	printf("hit_faults=%llu\n", (unsigned long long)ctr().faults);

	/* a kernel runs on its stream's ordinal, whatever is current */
	CUstream s2 = NULL;
	if (bind(2) || X.StreamCreate(&s2, 0) || bind(0) || touch_on(s2, p))
		return 1;
	print_loc("stream_loc", p);
	if (touch_on(NULL, p))   /* the NULL stream: the current context's */
		return 1;
	print_loc("null_loc", p);
	if (D.PrefetchV1(p + BLK, BLK, 1, NULL))
		return 1;
	print_loc("v1_loc", p + BLK);

	size_t bad = 0;
	for (size_t i = 0; i < nb * BLK / 4; i++)   /* CPU faults bring them back */
		bad += w[i] != (uint32_t)(i * 2654435761u);
	printf("bad=%zu\n", bad);
	X.StreamDestroy(s2);
	return 0;
}

/* SET_ACCESSED_BY names ordinal 1 only: it reads a host block over the
 * link, ordinal 0 faults on it. */
static int child_accessed_by(void)
{
	CUdeviceptr p = 0;
	if (D.MemAllocManaged(&p, 2 * BLK, CU_MEM_ATTACH_GLOBAL))
		return 1;
	memset((void *)p, 5, 2 * BLK);
	if (D.MemAdvise(p, 2 * BLK, CU_MEM_ADVISE_SET_ACCESSED_BY, on_dev(1)))
		return 1;
	int32_t ab[3] = { 9, 9, 9 };
	if (D.RangeAttr(ab, sizeof ab, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, BLK))
		return 1;
	printf("advice=%llu,%llu\nab=%d,%d,%d\n", (unsigned long long)dc(1).accessed_by_advice,
	       (unsigned long long)dc(0).accessed_by_advice, ab[0], ab[1], ab[2]);
	if (bind(1))
		return 1;
	D.reset();
	if (D.access((void *)p, BLK, 0))
		return 1;
	struct fakecuda_counters c = ctr();
	print_loc("r1_loc", p);
	printf("r1=%llu,%llu\n", (unsigned long long)c.faults, (unsigned long long)c.bytes_remote);
	if (bind(0) || D.access((void *)p, 4096, 0))
		return 1;
	print_loc("r0_loc", p);
	printf("r0=%llu,%llu\n", (unsigned long long)ctr().faults,
	       (unsigned long long)dc(0).faults);
	/* unset keeps ordinal 1's mapping (as measured on an H200); ordinal 2
	 * never had one */
	if (D.MemAdvise(p + BLK, BLK, CU_MEM_ADVISE_UNSET_ACCESSED_BY, on_dev(1)) || bind(1))
		return 1;
	D.reset();
	if (D.access((void *)(p + BLK), 4096, 0) || bind(2) ||
	    D.access((void *)(p + BLK), 4096, 0))
		return 1;
	print_loc("unset_loc", p + BLK);
	printf("unset=%llu,%llu\n", (unsigned long long)dc(1).faults,
	       (unsigned long long)dc(2).faults);
	return 0;
}

/* The stand-in runtime on top: device count and cudaSetDevice(1). */
static int child_cudart(void)
{
	void *rt = dlopen(kvt_path("fakecuda/libcudart.so.13"), RTLD_NOW);
	if (!rt)
		return 1;
	__typeof__(&cudaGetDeviceCount) count_fn = dlsym(rt, "cudaGetDeviceCount");
	__typeof__(&cudaSetDevice) set_fn = dlsym(rt, "cudaSetDevice");
	__typeof__(&cudaGetDevice) get_fn = dlsym(rt, "cudaGetDevice");
	if (!count_fn || !set_fn || !get_fn)
		return 1;
	int n = -1, d = -1;
	CUdevice cd = -1;
	cudaError_t rc = count_fn(&n);
	cudaError_t set = set_fn(1);
	get_fn(&d);
	X.CtxGetDevice(&cd);
	printf("count=%d,%d\nset1=%d\nrt_dev=%d\nctxdev=%d\n", (int)rc, n, (int)set, d, cd);
	return 0;
}

/* ---- parent side ---- */

static void run_child(const char *mode, const char *devices, struct kvt_child *c)
{
	const char *argv[] = { self_path, "--child", mode, NULL };
	const char *env[] = { devices, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(c, argv, env, 120), 0);
	CU_ASSERT_EQUAL(c->exit_code, 0);
}

/* The value of "key=" on its own line of the child's stdout ("" if none). */
static const char *val(const struct kvt_child *c, const char *key)
{
	static char v[256];
	char k[64];
	snprintf(k, sizeof k, "\n%s=", key);
	const char *at = NULL, *p;
	if (!strncmp(c->out, k + 1, strlen(k + 1)))   /* the first line */
		at = c->out + strlen(k + 1);
	else if ((p = strstr(c->out, k)))
		at = p + strlen(k);
	v[0] = 0;
	if (at)
		sscanf(at, "%255[^\n]", v);
	return v;
}

static long long num(const struct kvt_child *c, const char *key)
{
	const char *v = val(c, key);
	return *v ? strtoll(v, NULL, 10) : -999;
}

/* "x,x,...,x", NR_PROBES times */
static const char *all(const char *x)
{
	static char buf[2][256];
	static int next;
	char *b = buf[next++ & 1];
	size_t n = 0;
	for (int i = 0; i < NR_PROBES; i++)
		n += (size_t)snprintf(b + n, sizeof buf[0] - n, "%s%s", i ? "," : "", x);
	return b;
}

static void test_default_one(void)
{
	static struct kvt_child c;
	run_child("probe", "FAKECUDA_DEVICES=", &c);
	CU_ASSERT_EQUAL(num(&c, "count"), 1);
	CU_ASSERT_STRING_EQUAL(val(&c, "last"), all("0"));     /* ordinal 0 */
	CU_ASSERT_STRING_EQUAL(val(&c, "over"), all("101"));   /* ordinal 1 */
	CU_ASSERT_STRING_EQUAL(val(&c, "uuid0"), "fakecuda-dev-000");
	CU_ASSERT(strstr(c.err, "FAKECUDA_DEVICES") == NULL);
}

static void test_three(void)
{
	static struct kvt_child c;
	run_child("probe", "FAKECUDA_DEVICES=3", &c);
	CU_ASSERT_EQUAL(num(&c, "count"), 3);
	CU_ASSERT_STRING_EQUAL(val(&c, "last"), all("0"));     /* ordinal 2 */
	CU_ASSERT_STRING_EQUAL(val(&c, "over"), all("101"));   /* ordinal 3 */
	CU_ASSERT_STRING_EQUAL(val(&c, "uuid0"), "fakecuda-dev-000");
	CU_ASSERT(strstr(c.err, "FAKECUDA_DEVICES") == NULL);
}

/* Bad values warn once and give one device; 8 is the largest accepted. */
static void test_bad_values(void)
{
	static const struct { const char *env, *warn; int count; } cases[] = {
		{ "FAKECUDA_DEVICES=0", "fakecuda: bad FAKECUDA_DEVICES=\"0\", using 1\n", 1 },
		{ "FAKECUDA_DEVICES=9", "fakecuda: bad FAKECUDA_DEVICES=\"9\", using 1\n", 1 },
		{ "FAKECUDA_DEVICES=abc", "fakecuda: bad FAKECUDA_DEVICES=\"abc\", using 1\n", 1 },
		{ "FAKECUDA_DEVICES=2x", "fakecuda: bad FAKECUDA_DEVICES=\"2x\", using 1\n", 1 },
		{ "FAKECUDA_DEVICES=-1", "fakecuda: bad FAKECUDA_DEVICES=\"-1\", using 1\n", 1 },
		{ "FAKECUDA_DEVICES=+2", "fakecuda: bad FAKECUDA_DEVICES=\"+2\", using 1\n", 1 },
		{ "FAKECUDA_DEVICES=8", NULL, 8 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		static struct kvt_child c;
		run_child("probe", cases[i].env, &c);
		CU_ASSERT_EQUAL(num(&c, "count"), cases[i].count);
		CU_ASSERT_STRING_EQUAL(val(&c, "over"), all("101"));
		if (cases[i].warn) {   /* exactly one line */
			CU_ASSERT_STRING_EQUAL(c.err, cases[i].warn);
		} else {
			CU_ASSERT_EQUAL(c.err_len, 0);
		}
	}
}

static void test_contexts(void)
{
	static struct kvt_child c;
	run_child("contexts", "FAKECUDA_DEVICES=3", &c);
	CU_ASSERT_EQUAL(num(&c, "distinct"), 1);
	CU_ASSERT_EQUAL(num(&c, "ctxdev"), 2);
	CU_ASSERT_EQUAL(num(&c, "refs2"), 1);
	CU_ASSERT_EQUAL(num(&c, "made2"), 1);
	CU_ASSERT_EQUAL(num(&c, "inactive"), 1);
	CU_ASSERT_EQUAL(num(&c, "same"), 1);
	CU_ASSERT_EQUAL(num(&c, "remade2"), 2);
	CU_ASSERT_EQUAL(num(&c, "created_dev"), 1);
	CU_ASSERT_EQUAL(num(&c, "made1"), 2);   /* primary retain + cuCtxCreate */
	char want[64];
	snprintf(want, sizeof want, "%llu,%llu", 64 * MiB, 64 * MiB);
	CU_ASSERT_STRING_EQUAL(val(&c, "total"), want);
	CU_ASSERT_EQUAL(num(&c, "used_by_1"), (long long)(8 * MiB));
	CU_ASSERT_STRING_EQUAL(val(&c, "after_reset"), "0,1");
}

static void test_prefetch_and_peer_fault(void)
{
	static struct kvt_child c;
	run_child("migrate", "FAKECUDA_DEVICES=3", &c);
	CU_ASSERT_STRING_EQUAL(val(&c, "pf_loc"), "dev2");
	CU_ASSERT_STRING_EQUAL(val(&c, "pf_to"), "1,0");
	CU_ASSERT_EQUAL(num(&c, "resident2"), 1);
	CU_ASSERT_STRING_EQUAL(val(&c, "pf_again"), "1,1");
	CU_ASSERT_STRING_EQUAL(val(&c, "peer_loc"), "dev1");
	CU_ASSERT_STRING_EQUAL(val(&c, "faults"), "1,0,1,0");   /* all, ordinals 0 1 2 */
	char want[64];
	snprintf(want, sizeof want, "%llu,%llu", BLK, BLK);     /* device-to-host + back */
	CU_ASSERT_STRING_EQUAL(val(&c, "moved"), want);
	/* two 2 MiB trips over the 55 GB/s link and one fault group */
	CU_ASSERT(num(&c, "virtual_ns") >= (long long)(2 * BLK / 55 + 25000));
	CU_ASSERT_STRING_EQUAL(val(&c, "resident"), "1,0");
	CU_ASSERT_EQUAL(num(&c, "hit_faults"), 1);
	CU_ASSERT_STRING_EQUAL(val(&c, "stream_loc"), "dev2");
	CU_ASSERT_STRING_EQUAL(val(&c, "null_loc"), "dev0");
	CU_ASSERT_STRING_EQUAL(val(&c, "v1_loc"), "dev1");
	CU_ASSERT_EQUAL(num(&c, "bad"), 0);
}

static void test_accessed_by(void)
{
	static struct kvt_child c;
	run_child("accessed_by", "FAKECUDA_DEVICES=3", &c);
	CU_ASSERT_STRING_EQUAL(val(&c, "advice"), "1,0");
	CU_ASSERT_STRING_EQUAL(val(&c, "ab"), "1,-2,-2");
	CU_ASSERT_EQUAL(strncmp(val(&c, "r1_loc"), "host", 4), 0);
	char want[64];
	snprintf(want, sizeof want, "0,%llu", BLK);   /* no fault, all over the link */
	CU_ASSERT_STRING_EQUAL(val(&c, "r1"), want);
	CU_ASSERT_STRING_EQUAL(val(&c, "r0_loc"), "dev0");
	CU_ASSERT_STRING_EQUAL(val(&c, "r0"), "1,1");
	CU_ASSERT_STRING_EQUAL(val(&c, "unset_loc"), "dev2");
	CU_ASSERT_STRING_EQUAL(val(&c, "unset"), "0,1");
}

static void test_cudart(void)
{
	static struct kvt_child c;
	run_child("cudart", "FAKECUDA_DEVICES=2", &c);
	CU_ASSERT_STRING_EQUAL(val(&c, "count"), "0,2");
	CU_ASSERT_EQUAL(num(&c, "set1"), cudaSuccess);
	CU_ASSERT_EQUAL(num(&c, "rt_dev"), 1);
	CU_ASSERT_EQUAL(num(&c, "ctxdev"), 1);   /* ordinal 1's primary context bound */
	run_child("cudart", "FAKECUDA_DEVICES=1", &c);
	CU_ASSERT_STRING_EQUAL(val(&c, "count"), "0,1");
	CU_ASSERT_EQUAL(num(&c, "set1"), cudaErrorInvalidDevice);
	CU_ASSERT_EQUAL(num(&c, "rt_dev"), 0);
	CU_ASSERT_EQUAL(num(&c, "ctxdev"), 0);
}

static CU_TestInfo tests_devices[] = {
	{ "FAKECUDA_DEVICES unset: one ordinal", test_default_one },
	{ "FAKECUDA_DEVICES=3: ordinals 0..2", test_three },
	{ "FAKECUDA_DEVICES bad values", test_bad_values },
	{ "primary contexts per ordinal", test_contexts },
	{ "prefetch to an ordinal, peer fault", test_prefetch_and_peer_fault },
	{ "accessed-by per ordinal", test_accessed_by },
	{ "stand-in runtime cudaSetDevice", test_cudart },
	CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {
	{ "fakecuda_devices", NULL, NULL, NULL, NULL, tests_devices },
	CU_SUITE_INFO_NULL,
};

int main(int argc, char **argv)
{
	self_path = argv[0];
	setenv("FAKECUDA_DEVICE_BYTES", "64M", 1);
	if (load_driver() || load_more()) {
		fprintf(stderr, "cannot load %s: %s\n", kvt_path("fakecuda/libcuda.so.1"), dlerror());
		return 1;
	}
	if (argc == 3 && !strcmp(argv[1], "--child")) {
		if (!strcmp(argv[2], "probe")) return child_probe();
		if (!strcmp(argv[2], "contexts")) return child_contexts();
		if (!strcmp(argv[2], "migrate")) return child_migrate();
		if (!strcmp(argv[2], "accessed_by")) return child_accessed_by();
		if (!strcmp(argv[2], "cudart")) return child_cudart();
		return 2;
	}
	return kvt_test_main(suites);
}
