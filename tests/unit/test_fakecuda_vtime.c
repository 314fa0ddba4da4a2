/* SPDX-License-Identifier: MIT */
/* CUnit suite for the SIMULATED device in virtual time (FAKECUDA_VTIME=1,
 * tests/fakecuda/cuda/fc_vt.c): operations on different engines overlap,
 * on one stream they add up, a faulting kernel stalls, a kernel waits for
 * a block still on its way in, events order streams, a discard takes no
 * engine and no time, charged CPU time is
 * scaled by FAKECUDA_CHARGE_SCALE, and the scheduler gives one result for
 * one program whatever the host's scheduler does (children re-run with
 * random real-time delays). Kernel launches cost 1 ms here
 * (FAKECUDA_LAUNCH_NS), so a kernel's time is known exactly. */
#include "unit/fakecuda_drv.h"

#include <pthread.h>
#include <time.h>

#define LAUNCH_NS 1000000ull
/* 16 blocks over the 55 GB/s link: 16 x 2 MiB x 1000 / 55000 ns */
#define PF16_NS   610080ull
#define PF64_NS   2440322ull                 /* 64 blocks (rounded down) */

/* Equal to the nanosecond: the clock keeps picoseconds, and a transfer's
 * fraction of a nanosecond carries into the next one at its bandwidth. */
#define NEAR(a, b) ((a) + 1 >= (b) && (a) <= (b) + 1)

static __typeof__(&cuStreamCreate) StreamCreate;
static __typeof__(&cuStreamSynchronize) StreamSync;
static __typeof__(&cuCtxSynchronize) CtxSync;
static __typeof__(&cuEventCreate) EventCreate;
static __typeof__(&cuEventRecord) EventRecord;
static __typeof__(&cuStreamWaitEvent) StreamWaitEvent;
static __typeof__(&cuEventElapsedTime) EventElapsed;
static __typeof__(&cuStreamQuery) StreamQuery;
static __typeof__(&cuStreamDestroy_v2) StreamDestroy;
static __typeof__(&cuEventDestroy_v2) EventDestroy;
static int (*vjoin)(void);
static void (*vhost)(uint64_t);
static void (*vcharge)(uint64_t);
static int (*vwait)(const void *, uint64_t);
static void (*vwake)(const void *);
static uint64_t (*vnow)(void);
static void *(*vspawn)(void);
static void (*vadopt)(void *);

static void load_extra(void)
{
	StreamCreate = get("cuStreamCreate", 2000, 0);
	StreamSync = get("cuStreamSynchronize", 2000, 0);
	CtxSync = get("cuCtxSynchronize", 2000, 0);
	EventCreate = get("cuEventCreate", 2000, 0);
	EventRecord = get("cuEventRecord", 2000, 0);
	StreamWaitEvent = get("cuStreamWaitEvent", 3020, 0);
	EventElapsed = get("cuEventElapsedTime", 2000, 0);
	StreamQuery = get("cuStreamQuery", 2000, 0);
	StreamDestroy = get("cuStreamDestroy", 4000, 0);
	EventDestroy = get("cuEventDestroy", 4000, 0);
	vjoin = (int (*)(void))dlsym(drv, "fakecuda_vclock_join");
	vhost = (void (*)(uint64_t))dlsym(drv, "fakecuda_vclock_host");
	vcharge = (void (*)(uint64_t))dlsym(drv, "fakecuda_vclock_charge");
	vwait = (int (*)(const void *, uint64_t))dlsym(drv, "fakecuda_vclock_wait");
	vwake = (void (*)(const void *))dlsym(drv, "fakecuda_vclock_wake");
	vnow = (uint64_t (*)(void))dlsym(drv, "fakecuda_vclock_now");
	vspawn = (void *(*)(void))dlsym(drv, "fakecuda_vclock_spawn");
	vadopt = (void (*)(void *))dlsym(drv, "fakecuda_vclock_adopt");
}

static uint64_t now_ns(void)
{
	return ctr().virtual_ns;
}

/* An empty touch-kernel launch: LAUNCH_NS of SM time. */
static CUresult kernel(CUstream s, const struct fakecuda_range *rg, unsigned nr)
{
	void *params[2] = { &rg, &nr };
	return D.Launch(D.touch(), 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}

/* n host-resident managed blocks, none in HBM. */
static CUdeviceptr host_blocks(size_t n)
{
	CUdeviceptr p = 0;
	CU_ASSERT_EQUAL_FATAL(D.MemAllocManaged(&p, n * BLK, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
	memset((void *)p, 1, n * BLK);
	return p;
}

/* Streams of the current test, destroyed at its end (done()). */
static CUstream made[4];
static unsigned nr_made;

static CUstream stream(unsigned flags)
{
	CUstream s = NULL;
	CU_ASSERT_EQUAL_FATAL(StreamCreate(&s, flags), CUDA_SUCCESS);
	if (nr_made < 4)
		made[nr_made++] = s;
	return s;
}

static void done(void)
{
	while (nr_made)
		StreamDestroy(made[--nr_made]);
}

/* A kernel and an independent prefetch on two streams: max, not the sum;
 * the launch and the prefetch return at once. */
static void test_overlap_two_streams(void)
{
	CUstream a = stream(0), b = stream(CU_STREAM_NON_BLOCKING);
	CUdeviceptr p = host_blocks(16);
	uint64_t t0 = now_ns();
	CU_ASSERT_EQUAL(kernel(a, NULL, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.Prefetch(p, 16 * BLK, DEV, 0, b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(now_ns(), t0);                   /* nothing waited yet */
	CU_ASSERT_EQUAL(StreamQuery(a), CUDA_ERROR_NOT_READY);
	CU_ASSERT_EQUAL(StreamSync(b), CUDA_SUCCESS);
	CU_ASSERT(NEAR(now_ns() - t0, PF16_NS));
	CU_ASSERT_EQUAL(CtxSync(), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(now_ns() - t0, LAUNCH_NS);       /* max(1 ms, 0.61 ms) */
	CU_ASSERT_EQUAL(StreamQuery(a), CUDA_SUCCESS);
	D.MemFree(p);
	done();
}

/* The same pair on one stream: the sum. */
static void test_one_stream_adds(void)
{
	CUstream a = stream(0);
	CUdeviceptr p = host_blocks(16);
	uint64_t t0 = now_ns();
	CU_ASSERT_EQUAL(kernel(a, NULL, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.Prefetch(p, 16 * BLK, DEV, 0, a), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamSync(a), CUDA_SUCCESS);
	CU_ASSERT(NEAR(now_ns() - t0, LAUNCH_NS + PF16_NS));
	D.MemFree(p);
	done();
}

/* Two kernels on two streams share the SMs: they add up too. */
static void test_kernels_share_sms(void)
{
	CUstream a = stream(0), b = stream(CU_STREAM_NON_BLOCKING);
	uint64_t t0 = now_ns();
	CU_ASSERT_EQUAL(kernel(a, NULL, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(kernel(b, NULL, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(CtxSync(), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(now_ns() - t0, 2 * LAUNCH_NS);
	done();
}

/* A defined kernel: 1 ms of FLOPs at the default 395e12 FLOP/s. */
static int body_calls;

static int flops_body(void *const *args, void *ctx)
{
	(void)args;
	(void)ctx;
	body_calls++;
	((void (*)(double))dlsym(drv, "fakecuda_kflops"))(3.95e11);
	return 0;
}

/* Its body runs at submission (its effects are immediate), and what it
 * charges is SM time on its stream, after the launch cost: the host does
 * not wait, its stream ends 2 ms later, and it shares the SMs with a
 * built-in kernel on another stream. */
static void test_defined_kernel_time(void)
{
	__typeof__(&fakecuda_kernel_define) define =
		(__typeof__(define))dlsym(drv, "fakecuda_kernel_define");
	CU_ASSERT_PTR_NOT_NULL_FATAL(define);
	CUfunction f = define("flops_1ms", NULL, 0, flops_body, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CUstream a = stream(0), b = stream(CU_STREAM_NON_BLOCKING);
	body_calls = 0;
	uint64_t t0 = now_ns();
	CU_ASSERT_EQUAL(D.Launch(f, 1, 1, 1, 1, 1, 1, 0, a, NULL, NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(kernel(b, NULL, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(body_calls, 1);
	CU_ASSERT_EQUAL(now_ns(), t0);
	CU_ASSERT_EQUAL(StreamSync(a), CUDA_SUCCESS);
	CU_ASSERT(NEAR(now_ns() - t0, 2 * LAUNCH_NS));
	CU_ASSERT_EQUAL(CtxSync(), CUDA_SUCCESS);
	CU_ASSERT(NEAR(now_ns() - t0, 3 * LAUNCH_NS));
	done();
}

/* A kernel that faults stalls for the fault service and the migration. */
static void test_fault_stalls(void)
{
	CUstream a = stream(0);
	CUdeviceptr p = host_blocks(1);
	static struct fakecuda_range dr[1];   /* host memory: read for free */
	dr[0] = (struct fakecuda_range){ p, 4096, 0 };
	uint64_t f0 = ctr().faults, t0 = now_ns();
	CU_ASSERT_EQUAL(kernel(a, dr, 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamSync(a), CUDA_SUCCESS);
	uint64_t dt = now_ns() - t0;
	CU_ASSERT_EQUAL(ctr().faults - f0, 1);
	/* launch + 590 us of fault service + 2 MiB over the link + the read */
	CU_ASSERT(dt >= LAUNCH_NS + 590000 + 38130);
	CU_ASSERT(dt < LAUNCH_NS + 590000 + 38130 + 1000);
	t0 = now_ns();            /* resident now: no fault, no stall */
	CU_ASSERT_EQUAL(kernel(a, dr, 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamSync(a), CUDA_SUCCESS);
	CU_ASSERT(now_ns() - t0 < LAUNCH_NS + 1000);
	D.MemFree(p);
	done();
}

/* A kernel that reaches a block a copy engine is still moving in waits for
 * it to land, and takes no fault. */
static void test_waits_for_block_in_flight(void)
{
	CUstream a = stream(0), b = stream(CU_STREAM_NON_BLOCKING);
	CUdeviceptr p = host_blocks(64);
	static struct fakecuda_range dr[1];
	dr[0] = (struct fakecuda_range){ p + 63 * BLK, 4096, 0 };
	uint64_t f0 = ctr().faults, t0 = now_ns();
	CU_ASSERT_EQUAL(D.Prefetch(p, 64 * BLK, DEV, 0, b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(kernel(a, dr, 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamSync(a), CUDA_SUCCESS);
	uint64_t dt = now_ns() - t0;
	CU_ASSERT_EQUAL(ctr().faults, f0);
	/* its read waited for the last block (2.44 ms), past its 1 ms launch */
	CU_ASSERT(dt >= PF64_NS && dt < PF64_NS + 1000);
	D.MemFree(p);
	done();
}

/* An event recorded after a prefetch, waited for by another stream: that
 * stream's kernel starts after the prefetch ends. */
static void test_event_orders_streams(void)
{
	CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
	CUevent e0, e1;
	CU_ASSERT_EQUAL_FATAL(EventCreate(&e0, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(EventCreate(&e1, 0), CUDA_SUCCESS);
	CUdeviceptr p = host_blocks(16);
	uint64_t t0 = now_ns();
	CU_ASSERT_EQUAL(EventRecord(e0, b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(D.Prefetch(p, 16 * BLK, DEV, 0, b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(EventRecord(e1, b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamWaitEvent(a, e1, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(kernel(a, NULL, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamSync(a), CUDA_SUCCESS);
	uint64_t dt = now_ns() - t0;
	CU_ASSERT(NEAR(dt, PF16_NS + LAUNCH_NS));
	if (!NEAR(dt, PF16_NS + LAUNCH_NS))
		fprintf(stderr, "events: %llu ns\n", (unsigned long long)dt);
	float ms = 0;
	CU_ASSERT_EQUAL(EventElapsed(&ms, e0, e1), CUDA_SUCCESS);
	CU_ASSERT_DOUBLE_EQUAL(ms, PF16_NS / 1e6, 1e-3);
	EventDestroy(e0);
	EventDestroy(e1);
	D.MemFree(p);
	done();
}

/* A fault while a copy engine is busy on the same direction shares the
 * link: it takes longer than on an idle link. */
static void test_fault_shares_link(void)
{
	CUstream a = stream(0), b = stream(CU_STREAM_NON_BLOCKING);
	CUdeviceptr p = host_blocks(64), q = host_blocks(1);
	static struct fakecuda_range dr[1];
	dr[0] = (struct fakecuda_range){ q, 4096, 0 };
	uint64_t t0 = now_ns();
	CU_ASSERT_EQUAL(D.Prefetch(p, 64 * BLK, DEV, 0, b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(kernel(a, dr, 1), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamSync(a), CUDA_SUCCESS);
	uint64_t dt = now_ns() - t0;
	/* its 2 MiB at half the link while the prefetch runs */
	CU_ASSERT(dt >= LAUNCH_NS + 590000 + 2 * 38130);
	CU_ASSERT(dt < LAUNCH_NS + 590000 + 2 * 38130 + 1000);
	CU_ASSERT_EQUAL(CtxSync(), CUDA_SUCCESS);
	/* and the prefetch's queue was pushed back by the fault's 2 MiB */
	CU_ASSERT(now_ns() - t0 >= PF64_NS + 38130);
	D.MemFree(p);
	D.MemFree(q);
	done();
}

/* ---- children: the scheduler, and the charge knob ---- */

static uint64_t rnd_seed;
static __thread uint64_t rnd_state;   /* each thread its own: the helper jitters outside the simulation */
static void jitter(void)        /* a real-time delay the result must not see */
{
	if (!rnd_state)
		rnd_state = rnd_seed ^ (uint64_t)(uintptr_t)&rnd_state;
	rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
	struct timespec ts = { 0, (long)((rnd_state >> 33) % 3000000) };
	nanosleep(&ts, NULL);
}

static CUdeviceptr sched_p;
static int helper_key;
static char helper_log[4096];

/* A helper in the simulation: wakes every 3 ms of virtual time (or when
 * kicked), moves one block in, and notes the virtual time it ran at. */
static void *helper(void *arg)
{
	jitter();                /* however late the host starts it */
	vadopt(arg);
	CUcontext ctx;
	D.PrimaryCtxRetain(&ctx, 0);
	D.CtxSetCurrent(ctx);
	CUstream s = NULL;
	StreamCreate(&s, CU_STREAM_NON_BLOCKING);
	size_t len = 0;
	uint64_t next = vnow() + 3000000;
	for (int i = 0; i < 12; i++) {
		int r = vwait(&helper_key, next);
		jitter();
		uint64_t t = vnow();
		len += (size_t)snprintf(helper_log + len, sizeof helper_log - len, "%d@%llu,", r,
					(unsigned long long)t);
		D.Prefetch(sched_p + (size_t)(i % 8) * BLK, BLK, i & 1 ? HOST : DEV, 0, s);
		StreamSync(s);
		vcharge(50000);
		next = vnow() + 3000000;
	}
	vjoin();   /* already in: a no-op that must not hang */
	StreamDestroy(s);
	return NULL;
}

/* The main thread: steps of kernels over the blocks with host work between
 * them, real-time jitter everywhere; prints the virtual times. */
static int child_sched(void)
{
	load_extra();
	const char *seed = getenv("VT_SEED");
	rnd_seed = seed ? strtoull(seed, NULL, 10) : 1;
	if (vjoin() != 0)
		return 3;
	CUstream a = NULL;
	if (StreamCreate(&a, 0) || D.MemAllocManaged(&sched_p, 8 * BLK, CU_MEM_ATTACH_GLOBAL))
		return 4;
	static struct fakecuda_range dr[10];
	for (int i = 0; i < 10; i++)
		dr[i] = (struct fakecuda_range){ sched_p + (size_t)(i % 8) * BLK, BLK, 0 };
	pthread_t th;
	pthread_create(&th, NULL, helper, vspawn());
	for (int step = 0; step < 30; step++) {
		jitter();
		kernel(a, dr + step % 8, 1 + step % 3);
		StreamSync(a);
		if (step % 7 == 6)
			vwake(&helper_key);
		vhost(200000);
	}
	struct fakecuda_counters c = ctr();
	void (*leave)(void) = (void (*)(void))dlsym(drv, "fakecuda_vclock_leave");
	leave();
	pthread_join(th, NULL);
	StreamDestroy(a);
	D.MemFree(sched_p);
	printf("main_end=%llu faults=%llu htod=%llu helper=%s\n",
	       (unsigned long long)c.virtual_ns, (unsigned long long)c.faults,
	       (unsigned long long)c.bytes_htod, helper_log);
	return 0;
}

static void run_child(const char *mode, const char *const env[], struct kvt_child *c)
{
	const char *argv[] = { self_path, "--child", mode, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(c, argv, env, 120), 0);
	CU_ASSERT_EQUAL(c->exit_code, 0);
}

static int child_charge(void)
{
	load_extra();
	uint64_t t0 = now_ns();
	vcharge(1000);
	printf("charged=%llu\n", (unsigned long long)(now_ns() - t0));
	return 0;
}

/* A discard (cuMemDiscardBatchAsync) is in its stream's order on no
 * engine and takes no time: on a stream of its own it ends at once beside a
 * busy copy engine; after a kernel on its stream it ends with the kernel.
 * The discarded block's prefetch then moves it with no link time. */
static void test_discard_no_time(void)
{
	__typeof__(&cuMemDiscardBatchAsync) discard = get("cuMemDiscardBatchAsync", 13000, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(discard);
	CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING),
		 c = stream(CU_STREAM_NON_BLOCKING);
	CUdeviceptr p = host_blocks(17);
	CUdeviceptr d[1] = { p + 16 * BLK };
	size_t s[1] = { BLK };
	uint64_t t0 = now_ns();
	CU_ASSERT_EQUAL(D.Prefetch(p, 16 * BLK, DEV, 0, a), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(discard(d, s, 1, 0, b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamSync(b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(now_ns(), t0);                   /* not behind the copy engine */
	CU_ASSERT_EQUAL(kernel(c, NULL, 0), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(discard(d, s, 1, 0, c), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamSync(c), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(now_ns() - t0, LAUNCH_NS);       /* after the kernel, nothing added */
	uint64_t htod = ctr().bytes_htod;
	CU_ASSERT_EQUAL(D.Prefetch(d[0], BLK, DEV, 0, b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(StreamSync(b), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(now_ns() - t0, LAUNCH_NS);       /* the engine was idle: no time */
	CU_ASSERT_EQUAL(ctr().bytes_htod, htod);
	CU_ASSERT_EQUAL(loc_of(d[0], NULL), CU_MEM_LOCATION_TYPE_DEVICE);
	D.MemFree(p);
	done();
}

static void test_scheduler_reproducible(void)
{
	static struct kvt_child c1, c2, c3;
	const char *e1[] = { "VT_SEED=1", NULL }, *e2[] = { "VT_SEED=77", NULL },
		   *e3[] = { "VT_SEED=12345", NULL };
	run_child("sched", e1, &c1);
	run_child("sched", e2, &c2);
	run_child("sched", e3, &c3);
	CU_ASSERT_PTR_NOT_NULL_FATAL(strstr(c1.out, "main_end="));
	CU_ASSERT_PTR_NOT_NULL(strstr(c1.out, "helper=1@"));     /* it ran, on deadlines */
	CU_ASSERT_PTR_NOT_NULL(strstr(c1.out, ",0@"));           /* and woken by the main thread */
	CU_ASSERT_STRING_EQUAL(c1.out, c2.out);
	CU_ASSERT_STRING_EQUAL(c1.out, c3.out);
	CU_ASSERT(strstr(c1.err, "not reproducible") == NULL);
	if (strcmp(c1.out, c2.out) || strcmp(c1.out, c3.out))
		fprintf(stderr, "run 1: %s\nrun 2: %s\nrun 3: %s\n", c1.out, c2.out, c3.out);
}

static void test_charge_scale(void)
{
	static struct kvt_child c;
	unsigned long long v = 0;
	const char *e1[] = { "FAKECUDA_CHARGE_SCALE=", NULL };
	run_child("charge", e1, &c);
	CU_ASSERT_EQUAL(sscanf(c.out, "charged=%llu", &v), 1);
	CU_ASSERT_EQUAL(v, 1000);
	const char *e3[] = { "FAKECUDA_CHARGE_SCALE=3", NULL };
	run_child("charge", e3, &c);
	CU_ASSERT_EQUAL(sscanf(c.out, "charged=%llu", &v), 1);
	CU_ASSERT_EQUAL(v, 3000);
	const char *eb[] = { "FAKECUDA_CHARGE_SCALE=-1", NULL };
	run_child("charge", eb, &c);
	CU_ASSERT(strstr(c.err, "bad FAKECUDA_CHARGE_SCALE") != NULL);
	CU_ASSERT_EQUAL(sscanf(c.out, "charged=%llu", &v), 1);
	CU_ASSERT_EQUAL(v, 1000);
}

static CU_TestInfo tests_vt[] = {
	{ "kernel and prefetch on two streams overlap", test_overlap_two_streams },
	{ "kernel and prefetch on one stream add up", test_one_stream_adds },
	{ "two kernels share the SMs", test_kernels_share_sms },
	{ "a defined kernel's body charges its stream", test_defined_kernel_time },
	{ "a faulting kernel stalls", test_fault_stalls },
	{ "a kernel waits for a block in flight", test_waits_for_block_in_flight },
	{ "events order streams", test_event_orders_streams },
	{ "a fault shares a busy link", test_fault_shares_link },
	{ "a discard takes no engine and no time", test_discard_no_time },
	{ "one result whatever the host scheduler does", test_scheduler_reproducible },
	{ "FAKECUDA_CHARGE_SCALE", test_charge_scale },
	CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {
	{ "fakecuda_vtime", NULL, NULL, NULL, NULL, tests_vt },
	CU_SUITE_INFO_NULL,
};

int main(int argc, char **argv)
{
	self_path = argv[0];
	setenv("FAKECUDA_DEVICE_BYTES", "256M", 1);
	setenv("FAKECUDA_VTIME", "1", 1);
	setenv("FAKECUDA_LAUNCH_NS", "1000000", 1);
	unsetenv("FAKECUDA_PACE");
	if (load_driver()) {
		fprintf(stderr, "cannot load %s: %s\n", kvt_path("fakecuda/libcuda.so.1"), dlerror());
		return 1;
	}
	load_extra();
	if (argc == 3 && !strcmp(argv[1], "--child")) {
		if (!strcmp(argv[2], "sched")) return child_sched();
		if (!strcmp(argv[2], "charge")) return child_charge();
		return 2;
	}
	return kvt_test_main(suites);
}
