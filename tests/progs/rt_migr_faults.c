// SPDX-License-Identifier: MIT
/* Test program for tests/unit/test_migrate_faults.c (SIMULATED GPU): device
 * buffers that kvtier redirects to managed memory are written, launched on
 * and checked while its migrator moves them, with one fault on top:
 *
 *   rt_migr_faults free MS         3 threads allocate, fill, check and free
 *                                  buffers for MS milliseconds
 *   rt_migr_faults reuse MS        4 threads allocate, launch on and free one
 *                                  chunk in a tight loop: a freed address
 *                                  comes back at once in another thread;
 *                                  MS milliseconds, then on until 1000
 *                                  allocations in all (40 s at most: a
 *                                  loaded or sanitized run is slow)
 *   rt_migr_faults exit-main       main calls exit(42) mid-migration
 *   rt_migr_faults exit-thread     a worker calls exit(43) mid-migration
 *   rt_migr_faults _exit           main calls _exit(44) mid-migration
 *                                  (each once kvtier's live counters show
 *                                  20 prefetches issued)
 *   rt_migr_faults fork N          N forks (from main, some from a worker);
 *                                  each child maps, fills, checks and unmaps
 *                                  memory from 2 threads (no CUDA; one
 *                                  after the other under TSan), then
 *                                  exit()s or _exit()s with 10 + i % 3
 *   rt_migr_faults signals MS      3 threads, each hit by its own timer
 *                                  (SIGUSR1, every 200 us) and all by
 *                                  SIGALRM (every 500 us); the handler maps,
 *                                  touches and unmaps SIG_MAP_BYTES
 *
 * A set of survivor buffers lives through every mode and is checked at the
 * end. Prints key=value lines; exit 0 when every check passed. Linked to the
 * stand-in runtime (the rt_ prefix). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "kvtier/stats_format.h"

#define CHUNK (2u << 20)
#define NR_SURV 8
#define SURV_CHUNKS 3
#define NR_WORKERS 3
#define MAX_LIVE 6
#define SIG_MAP_BYTES (17u * 4096)      /* the handler's maps: a size nothing else uses */
#define MARKER_BYTES (23u * 4096)       /* fork mode: "the forks are over" in the trace */
#define CHILD_WAIT_MS 10000

struct buf {
	char *d;
	size_t bytes;
	uint64_t seed;
};

static CUfunction touch;
static struct buf surv[NR_SURV];
static uint64_t corrupt, errors, checked, allocs, frees, launches;
static int stop;                        /* atomic */

#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The expected bytes of chunk c of a buffer seeded so. */
static void pattern(uint64_t *p, size_t bytes, uint64_t seed, size_t c)
{
	uint64_t x = (seed ^ (c * 0x9e3779b97f4a7c15ull)) | 1;
	for (size_t i = 0; i < bytes / 8; i++)
		p[i] = xs(&x);
}

static size_t chunk_bytes(const struct buf *b, size_t c)
{
	size_t off = c * CHUNK;
	return b->bytes - off < CHUNK ? b->bytes - off : CHUNK;
}

struct stage {
	uint64_t *want, *got;
	uint64_t rs;
};

static int stage_init(struct stage *s, uint64_t seed)
{
	s->want = malloc(CHUNK);
	s->got = malloc(CHUNK);
	s->rs = seed * 0x2545f4914f6cdd1dull | 1;
	return s->want && s->got ? 0 : -1;
}

static void stage_free(struct stage *s)
{
	free(s->want);
	free(s->got);
}

static int buf_alloc(struct buf *b, size_t bytes, uint64_t seed, struct stage *s)
{
	b->bytes = bytes;
	b->seed = seed;
	if (cudaMalloc((void **)&b->d, bytes) != cudaSuccess) {
		ADD(errors, 1);
		b->d = NULL;
		return -1;
	}
	ADD(allocs, 1);
	for (size_t c = 0; c * CHUNK < bytes; c++) {
		pattern(s->want, chunk_bytes(b, c), seed, c);
		if (cudaMemcpy(b->d + c * CHUNK, s->want, chunk_bytes(b, c), cudaMemcpyHostToDevice))
			ADD(errors, 1);
	}
	return 0;
}

static void buf_check_chunk(const struct buf *b, size_t c, struct stage *s)
{
	size_t n = chunk_bytes(b, c);
	if (cudaMemcpy(s->got, b->d + c * CHUNK, n, cudaMemcpyDeviceToHost)) {
		ADD(errors, 1);
		return;
	}
	pattern(s->want, n, b->seed, c);
	ADD(checked, 1);
	if (memcmp(s->want, s->got, n) && ADD(corrupt, 1) < 8)
		fprintf(stderr, "CORRUPTION: buffer %p chunk %zu\n", (void *)b->d, c);
}

static void buf_check(const struct buf *b, struct stage *s)
{
	for (size_t c = 0; c * CHUNK < b->bytes; c++)
		buf_check_chunk(b, c, s);
}

static void buf_free(struct buf *b)
{
	if (cudaFree(b->d) == cudaSuccess)
		ADD(frees, 1);
	else
		ADD(errors, 1);
	b->d = NULL;
}

/* Launch evidence: one read of every chunk of [p, p+bytes). */
static void launch_on(const char *p, size_t bytes)
{
	struct { CUdeviceptr ptr; size_t len; int write; } rg = { (CUdeviceptr)(uintptr_t)p, bytes, 0 };
	void *rgp = &rg;
	unsigned nr = 1;
	void *params[] = { &rgp, &nr };
	dim3 one = { 1, 1, 1 };
	if (cudaLaunchKernel((const void *)touch, one, one, params, 0, 0) == cudaSuccess)
		ADD(launches, 1);
	else
		ADD(errors, 1);
}

/* The survivors' hot window moves: the migrator always has work. */
static void heat_survivors(struct stage *s, unsigned round)
{
	for (unsigned k = 0; k < 2; k++) {
		const struct buf *b = &surv[(round / 8 + k) % NR_SURV];
		launch_on(b->d, b->bytes);
	}
	if (round % 16 == 0)
		buf_check_chunk(&surv[xs(&s->rs) % NR_SURV], xs(&s->rs) % SURV_CHUNKS, s);
}

/* ---- churn: buffers allocated, heated, checked and freed ---- */

struct churn {
	struct buf live[MAX_LIVE];
	unsigned nr;
	struct stage s;
};

static void churn_step(struct churn *w)
{
	uint64_t r = xs(&w->s.rs);
	if (w->nr < 2 || (w->nr < MAX_LIVE && r % 3 == 0)) {
		size_t bytes = (size_t)(1 + (r >> 8) % 4) * CHUNK + ((r >> 16) & 1) * 4096;
		if (!buf_alloc(&w->live[w->nr], bytes, r, &w->s))
			w->nr++;
		return;
	}
	struct buf *b = &w->live[(r >> 8) % w->nr];
	for (int i = 0; i < 3; i++)
		launch_on(b->d, b->bytes);
	buf_check_chunk(b, (r >> 20) % ((b->bytes + CHUNK - 1) / CHUNK), &w->s);
	if (r % 2) {                 /* freed while the migrator may be moving it */
		buf_free(b);
		*b = w->live[--w->nr];
	}
}

static void churn_end(struct churn *w)
{
	while (w->nr) {
		buf_check(&w->live[w->nr - 1], &w->s);
		buf_free(&w->live[--w->nr]);
	}
}

/* ---- workers ---- */

struct worker {
	pthread_t th;
	unsigned id;
	uint64_t until_ms;           /* 0: until stop */
	int (*extra)(struct worker *, unsigned round);   /* per round; nonzero ends */
	uint64_t nr_mallocs;
};

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct churn *w = calloc(1, sizeof *w);
	if (!w || stage_init(&w->s, wk->id + 1))
		abort();
	for (unsigned round = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); round++) {
		if (wk->until_ms && now_ms() >= wk->until_ms)
			break;
		heat_survivors(&w->s, round + wk->id * 3);
		churn_step(w);
		if (wk->extra && wk->extra(wk, round))
			break;
	}
	churn_end(w);
	stage_free(&w->s);
	free(w);
	return NULL;
}

static void start_workers(struct worker *wk, unsigned n, uint64_t until_ms,
			  int (*extra)(struct worker *, unsigned))
{
	for (unsigned i = 0; i < n; i++) {
		wk[i] = (struct worker){ .id = i, .until_ms = until_ms, .extra = extra };
		if (pthread_create(&wk[i].th, NULL, worker_main, &wk[i]))
			abort();
	}
}

static void join_workers(struct worker *wk, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		pthread_join(wk[i].th, NULL);
}

static int survivors_make(void)
{
	struct stage s;
	if (stage_init(&s, 99))
		return -1;
	for (unsigned i = 0; i < NR_SURV; i++)
		if (buf_alloc(&surv[i], SURV_CHUNKS * CHUNK, 1000 + i, &s))
			return -1;
	stage_free(&s);
	return 0;
}

static void survivors_end(void)
{
	struct stage s;
	if (stage_init(&s, 98))
		abort();
	for (unsigned i = 0; i < NR_SURV; i++) {
		buf_check(&surv[i], &s);
		buf_free(&surv[i]);
	}
	stage_free(&s);
}

static void report(const char *extra)
{
	printf("allocs=%" PRIu64 "\nfrees=%" PRIu64 "\nlaunches=%" PRIu64 "\nchecked=%" PRIu64
	       "\ncorrupt=%" PRIu64 "\nerrors=%" PRIu64 "\n%s", allocs, frees, launches, checked,
	       corrupt, errors, extra);
}

static int verdict(void)
{
	return corrupt || errors || allocs != frees || checked == 0 ? 1 : 0;
}

/* ---- free: the application frees while the migrator moves ---- */

static int mode_free(uint64_t ms)
{
	struct worker wk[NR_WORKERS];
	start_workers(wk, NR_WORKERS, now_ms() + ms, NULL);
	join_workers(wk, NR_WORKERS);
	survivors_end();
	report("");
	return verdict();
}

/* ---- exit, exit from a thread, _exit while migrations run ---- */

/* True once kvtier's live counters (/dev/shm/kvtier.PID) show `min`
 * prefetches issued, or (no counters) 400 ms after the first call. */
static int migrations_running(uint64_t min)
{
	static uint64_t t0;
	char path[64];
	struct kvt_stats_seg seg;
	if (!t0)
		t0 = now_ms();
	snprintf(path, sizeof path, "%s/%s%d", KVT_STATS_DIR, KVT_STATS_PREFIX, (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return now_ms() - t0 >= 400;
	ssize_t n = pread(fd, &seg, sizeof seg, 0);
	close(fd);
	return n == (ssize_t)sizeof seg && seg.prefetch_issued >= min;
}

static int exit_from_worker(struct worker *wk, unsigned round)
{
	(void)round;
	if (wk->id != 0)
		return 0;
	if (migrations_running(20)) {
		printf("exiting from a worker at_ms=%llu\n", (unsigned long long)now_ms());
		fflush(stdout);
		exit(43);
	}
	return 0;
}

static int mode_exit(const char *how)
{
	struct worker wk[NR_WORKERS];
	int from_thread = !strcmp(how, "exit-thread");
	start_workers(wk, NR_WORKERS, 0, from_thread ? exit_from_worker : NULL);
	if (from_thread) {
		join_workers(wk, NR_WORKERS);   /* never returns: worker 0 exits */
		return 1;
	}
	while (!migrations_running(20))
		usleep(10 * 1000);
	printf("exiting from main at_ms=%llu\n", (unsigned long long)now_ms());
	fflush(stdout);
	if (!strcmp(how, "_exit"))
		_exit(44);
	exit(42);
}

/* ---- fork during migration ---- */

#define CHILD_THREADS 2
#define CHILD_MAPS 50

static void *child_thread(void *arg)
{
	uintptr_t fail = 0;
	uint64_t rs = (uintptr_t)arg * 77 + 1;
	for (unsigned i = 0; i < CHILD_MAPS; i++) {
		/* every fifth map is large enough for the bind rule (4M) */
		size_t len = i % 5 == 0 ? (4u << 20) : (1u << 20);
		uint64_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			fail++;
			continue;
		}
		uint64_t seed = xs(&rs);
		for (size_t k = 0; k < len / 8; k += 8192)      /* every 64 KiB */
			p[k] = seed ^ k;
		for (size_t k = 0; k < len / 8; k += 8192)
			fail += p[k] != (seed ^ k);
#if !defined(__SANITIZE_ADDRESS__)      /* see child_main */
		char *m = malloc(1000 + i * 100);
		if (!m)
			fail++;
		free(m);
#endif
		if (munmap(p, len))
			fail++;
	}
	return (void *)fail;
}

static void child_main(unsigned i)
{
	uintptr_t fail = 0;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	/* TSan still counts the parent's threads as alive in the child and
	 * aborts when glibc gives a child thread one of their descriptors
	 * ("dup thread with used id"). ASan (GCC 12's libasan) takes no lock of
	 * its allocator around fork(): a child inherits a size class's region
	 * mutex held by a parent thread that was allocating, and its first
	 * allocation of that class waits forever (seen with gdb: both child
	 * threads in SizeClassAllocator64::GetFromAllocator, called from the
	 * calloc in pthread_getattr_np of ASan's thread start; no kvtier frame;
	 * docs/reliability.md). So under either, the same maps one after the
	 * other on this thread, and under ASan no malloc in the child. */
	for (uintptr_t k = 0; k < CHILD_THREADS; k++)
		fail += (uintptr_t)child_thread((void *)(k + 1 + i * 10));
#else
	pthread_t t[CHILD_THREADS];
	for (uintptr_t k = 0; k < CHILD_THREADS; k++)
		if (pthread_create(&t[k], NULL, child_thread, (void *)(k + 1 + i * 10)))
			_exit(2);
	for (int k = 0; k < CHILD_THREADS; k++) {
		void *r;
		pthread_join(t[k], &r);
		fail += (uintptr_t)r;
	}
#endif
	if (fail)
		_exit(3);
	if (i % 2)
		_exit(10 + (int)(i % 3));
	exit(10 + (int)(i % 3));
}

static uint64_t forks, child_ok, child_hung, child_bad;

/* LeakSanitizer asks this at exit: a fork child inherits the parent's
 * worker threads' buffers but not the threads, so they look leaked there.
 * The parent's own leak check stays on. */
static int in_fork_child;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return in_fork_child;
}

/* Fork child i and wait for it, bounded (a hung child is killed, counted). */
static void fork_one(unsigned i)
{
	pid_t pid = fork();
	if (pid < 0) {
		ADD(child_bad, 1);
		return;
	}
	if (pid == 0) {
		in_fork_child = 1;
		child_main(i);
	}
	ADD(forks, 1);
	int st = 0;
	uint64_t t0 = now_ms();
	pid_t r;
	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && now_ms() - t0 < CHILD_WAIT_MS)
		usleep(1000);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		ADD(child_hung, 1);
		fprintf(stderr, "child %u (pid %d) hung\n", i, (int)pid);
	} else if (r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 10 + (int)(i % 3)) {
		ADD(child_ok, 1);
	} else {
		ADD(child_bad, 1);
		fprintf(stderr, "child %u (pid %d): status %#x\n", i, (int)pid, st);
	}
}

static unsigned nr_forks;

/* Worker 1 forks too (a fork from a thread that is not main); worker 0
 * makes small allocations in bursts, so that placement decisions (and their
 * lock) are under way whenever a fork happens. */
static int fork_from_worker(struct worker *wk, unsigned round)
{
	if (wk->id == 1 && round % 8 == 7 && round / 8 < nr_forks / 4)
		fork_one(1000 + round / 8);
	if (wk->id == 0)
		for (int i = 0; i < 200; i++) {
			void *p;
			if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
				ADD(errors, 1);
		}
	return 0;
}

static int mode_fork(unsigned n)
{
	struct worker wk[2];
	nr_forks = n;
	start_workers(wk, 2, 0, fork_from_worker);
	for (unsigned i = 0; i < n; i++) {
		fork_one(i);
		usleep(2000);
	}
	/* the marker: in the trace, what follows it came after the forks */
	void *m = mmap(NULL, MARKER_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || munmap(m, MARKER_BYTES))
		ADD(errors, 1);
	usleep(300 * 1000);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	join_workers(wk, 2);
	survivors_end();
	char extra[256];
	snprintf(extra, sizeof extra, "forks=%" PRIu64 "\nchild_ok=%" PRIu64 "\nchild_hung=%" PRIu64
		 "\nchild_bad=%" PRIu64 "\n", forks, child_ok, child_hung, child_bad);
	report(extra);
	return verdict() || child_ok != forks || child_hung || child_bad;
}

/* ---- signals delivered in hooks ---- */

static uint64_t handled, sig_fail;

static void on_signal(int sig)
{
	(void)sig;
	int saved = errno;
	char *p = mmap(NULL, SIG_MAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED) {
		ADD(sig_fail, 1);
	} else {
		p[0] = 1;
		p[SIG_MAP_BYTES - 1] = 2;
		if (munmap(p, SIG_MAP_BYTES))
			ADD(sig_fail, 1);
	}
	ADD(handled, 1);
	errno = saved;
}

static int sig_install(int sig, int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, NULL);
}

static __thread timer_t my_timer;
static __thread int my_timer_on;

/* Each worker arms its own SIGUSR1 timer on its first round, and also maps
 * and unmaps memory itself every round. */
static int sig_worker_round(struct worker *wk, unsigned round)
{
	(void)wk;
	if (!my_timer_on) {
		struct sigevent sev;
		memset(&sev, 0, sizeof sev);
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGUSR1;
		sev._sigev_un._tid = gettid();
		struct itimerspec its = { { 0, 200000 }, { 0, 200000 } };
		if (timer_create(CLOCK_MONOTONIC, &sev, &my_timer) || timer_settime(my_timer, 0, &its, NULL))
			ADD(errors, 1);
		my_timer_on = 1;
	}
	size_t len = (1u << 20) + (round % 4) * 4096;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		ADD(errors, 1);
		return 0;
	}
	memset(p, (int)round, len);
	if (p[len - 1] != (char)round)
		ADD(errors, 1);
	if (munmap(p, len))
		ADD(errors, 1);
	return 0;
}

static void *sig_worker(void *arg)
{
	void *r = worker_main(arg);
	if (my_timer_on)
		timer_delete(my_timer);
	return r;
}

static int mode_signals(uint64_t ms)
{
	struct worker wk[NR_WORKERS];
	if (sig_install(SIGUSR1, 0) || sig_install(SIGALRM, SA_RESTART))
		return 1;
	struct itimerval it = { { 0, 500 }, { 0, 500 } };
	setitimer(ITIMER_REAL, &it, NULL);
	uint64_t until = now_ms() + ms;
	for (unsigned i = 0; i < NR_WORKERS; i++) {
		wk[i] = (struct worker){ .id = i, .until_ms = until, .extra = sig_worker_round };
		if (pthread_create(&wk[i].th, NULL, sig_worker, &wk[i]))
			return 1;
	}
	join_workers(wk, NR_WORKERS);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	survivors_end();
	char extra[160];
	snprintf(extra, sizeof extra, "handled=%" PRIu64 "\nsig_fail=%" PRIu64 "\n",
		 __atomic_load_n(&handled, __ATOMIC_RELAXED), __atomic_load_n(&sig_fail, __ATOMIC_RELAXED));
	report(extra);
	return verdict() || sig_fail;
}

/* ---- reuse: the same sizes freed and allocated at once by 4 threads ---- */

#define REUSE_MIN_ALLOCS 1000
#define REUSE_MAX_MS 40000

static void *reuse_thread(void *arg)
{
	const uint64_t *when = arg;           /* [0] at least until, [1] at most until */
	for (;;) {
		uint64_t now = now_ms();
		if (now >= when[1] || (now >= when[0] &&
		    __atomic_load_n(&allocs, __ATOMIC_RELAXED) >= REUSE_MIN_ALLOCS))
			break;
		char *p;
		if (cudaMalloc((void **)&p, CHUNK) != cudaSuccess) {
			ADD(errors, 1);
			continue;
		}
		ADD(allocs, 1);
		launch_on(p, CHUNK);
		if (cudaFree(p) == cudaSuccess)
			ADD(frees, 1);
		else
			ADD(errors, 1);
	}
	return NULL;
}

static int mode_reuse(uint64_t ms)
{
	pthread_t t[4];
	uint64_t when[2] = { now_ms() + ms, now_ms() + (ms > REUSE_MAX_MS ? ms : REUSE_MAX_MS) };
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, reuse_thread, when))
			return 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	survivors_end();
	report("");
	return verdict();
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s free MS | reuse MS | exit-main | exit-thread | _exit | "
			"fork N | signals MS\n", argv[0]);
		return 2;
	}
	uint64_t arg = argc > 2 ? strtoull(argv[2], NULL, 0) : 1000;
	if (cudaFree(NULL) != cudaSuccess)
		return 2;
	void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	CUfunction (*get_touch)(void) = drv ? (CUfunction (*)(void))dlsym(drv, "fakecuda_touch_kernel") : NULL;
	if (!get_touch)
		return 77;                    /* not the simulated device */
	touch = get_touch();
	if (survivors_make())
		return 1;
	const char *mode = argv[1];
	if (!strcmp(mode, "free"))
		return mode_free(arg);
	if (!strcmp(mode, "exit-main") || !strcmp(mode, "exit-thread") || !strcmp(mode, "_exit"))
		return mode_exit(mode);
	if (!strcmp(mode, "fork"))
		return mode_fork((unsigned)arg);
	if (!strcmp(mode, "signals"))
		return mode_signals(arg);
	if (!strcmp(mode, "reuse"))
		return mode_reuse(arg);
	fprintf(stderr, "%s: unknown mode '%s'\n", argv[0], mode);
	return 2;
}
