// SPDX-License-Identifier: MIT
/* The trace format: what the writer produces reads back exactly; the reader
 * refuses malformed, hostile and newer-version files with a message, never
 * a crash, and reads a file cut inside a record up to the cut; the flush
 * thread; %p expansion; option parsing; the build id records. */
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>

#include "kvt_test.h"
#include "../base/kvt.h"
#include "../profiler/trace.h"
#include "../profiler/trace_read.h"
#include "kvtier/units.h"

static char dir[128];

static int setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/kvt-test-trace.%d", (int)getpid());
	return mkdir(dir, 0700);
}

static int teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) ? 1 : 0;
}

static const char *path_of(const char *name)
{
	static char p[256];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return p;
}

static void test_roundtrip(void)
{
	static struct kvt_trace_reader r;
	CU_ASSERT_EQUAL_FATAL(kvt_trace_open(path_of("rt.%p"), 4096, 16), 0);
	for (int i = 0; i < 1000; i++) {      /* > 4 KiB: several flushes */
		struct kvt_rec_event ev = { .op = KVT_OP_ALLOC, .api = 3, .addr = 0x1000u * (unsigned)i,
					    .size = (uint64_t)i, .kind = KVT_KIND_DEVICE,
					    .stack_id = kvt_trace_callsite() };
		kvt_trace_event(&ev);
	}
	kvt_trace_info("k", "v");
	char expect[256];
	snprintf(expect, sizeof expect, "%s/rt.%d", dir, (int)getpid());
	CU_ASSERT_STRING_EQUAL(kvt_trace_path(), expect);
	kvt_trace_close();
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&r, expect), 0);
	CU_ASSERT_EQUAL(r.hdr.pid, (uint32_t)getpid());
	struct kvt_trace_item it;
	int nev = 0, nstack = 0, ninfo = 0, bad = 0, ret;
	uint32_t max_stack = 0;
	while ((ret = kvt_trace_next(&r, &it)) > 0) {
		if (it.ev) {
			bad += it.ev->addr != 0x1000u * (unsigned)nev || it.ev->size != (uint64_t)nev;
			if (it.ev->stack_id > max_stack)
				max_stack = it.ev->stack_id;
			nev++;
		}
		nstack += it.stack != NULL;
		ninfo += it.type == KVT_REC_INFO;
		if (it.end)
			CU_ASSERT_EQUAL(it.end->nr_events, 1000);
	}
	CU_ASSERT_EQUAL(ret, 0);
	CU_ASSERT_TRUE(r.saw_end);
	CU_ASSERT_EQUAL(nev, 1000);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(ninfo, 1);
	/* One call site in a loop: deduplicated to one stack record. */
	CU_ASSERT_EQUAL(nstack, 1);
	CU_ASSERT_EQUAL(max_stack, 1);
	kvt_trace_reader_close(&r);
	/* The file exists now: a second open does not overwrite it. */
	CU_ASSERT_EQUAL(kvt_trace_open(expect, 4096, 0), 0);
	snprintf(expect + strlen(expect), sizeof expect - strlen(expect), ".%d", (int)getpid());
	CU_ASSERT_STRING_EQUAL(kvt_trace_path(), expect);
	kvt_trace_close();
}

/* A forked child's file opens at its first record (kvt_trace_fork_child).
 * Hooks on other threads ask kvt_trace_active() whether to record at all:
 * it must never answer "off" while that file is being created, or their
 * events are lost (seen in CI: spawner's child traced 399 of 400 maps). */
static int watch_done, watch_started;
static unsigned long watch_off;

static void *watch_active(void *arg)
{
	(void)arg;
	__atomic_store_n(&watch_started, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&watch_done, __ATOMIC_ACQUIRE))
		watch_off += !kvt_trace_active();
	return NULL;
}

static int child_opens_while_watched(void)
{
	kvt_trace_fork_child();
	if (!kvt_trace_active())
		return 2;
	pthread_t t;
	if (pthread_create(&t, NULL, watch_active, NULL))
		return 3;
	while (!__atomic_load_n(&watch_started, __ATOMIC_ACQUIRE))
		sched_yield();
	struct kvt_rec_event ev = { .op = KVT_OP_ALLOC, .kind = KVT_KIND_MMAP, .size = 1 };
	kvt_trace_event(&ev);               /* creates the child's file */
	__atomic_store_n(&watch_done, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	if (!kvt_trace_active() || !kvt_trace_path()[0])
		return 4;
	kvt_trace_close();
	return watch_off ? 1 : 0;
}

static void test_fork_child_never_off(void)
{
	CU_ASSERT_EQUAL_FATAL(kvt_trace_open(path_of("fk.%p"), 4096, 0), 0);
	unsigned off = 0, other = 0;
	for (int i = 0; i < 100; i++) {
		pid_t pid = fork();
		CU_ASSERT_TRUE_FATAL(pid >= 0);
		if (pid == 0)
			_exit(child_opens_while_watched());
		int st = 0;
		CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
		off += code == 1;
		other += code > 1;
	}
	kvt_trace_close();
	if (off)
		fprintf(stderr, "trace: %u of 100 forked children looked untraced while their file opened\n", off);
	CU_ASSERT_EQUAL(off, 0);
	CU_ASSERT_EQUAL(other, 0);
}

/* _exit's close while another thread holds the trace lock (here: across
 * a fork's prepare, 50 ms): it waits for the lock, and the file ends with
 * its END record and every event. */
static _Atomic int holder_in;

static void *hold_lock(void *arg)
{
	(void)arg;
	kvt_trace_fork_prepare();
	holder_in = 1;
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	kvt_trace_fork_parent();
	return NULL;
}

static void test_close_waits_for_a_busy_lock(void)
{
	static struct kvt_trace_reader r;
	CU_ASSERT_EQUAL_FATAL(kvt_trace_open(path_of("bz.%p"), 65536, 0), 0);
	for (int i = 0; i < 10; i++) {
		struct kvt_rec_event ev = { .op = KVT_OP_ALLOC, .addr = 0x1000u * (unsigned)(i + 1),
					    .size = 4096, .kind = KVT_KIND_DEVICE };
		kvt_trace_event(&ev);
	}
	char path[256];
	snprintf(path, sizeof path, "%s", kvt_trace_path());
	pthread_t th;
	holder_in = 0;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, hold_lock, NULL), 0);
	while (!holder_in)
		sched_yield();
	kvt_trace_close_if_owner();          /* the lock is busy for ~50 ms */
	pthread_join(th, NULL);
	/* read before any other close: what _exit would have left */
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&r, path), 0);
	struct kvt_trace_item it;
	int nev = 0;
	while (kvt_trace_next(&r, &it) > 0)
		nev += it.ev != NULL;
	CU_ASSERT_EQUAL(r.saw_end, 1);
	CU_ASSERT_EQUAL(nev, 10);
	kvt_trace_reader_close(&r);
	kvt_trace_close();                   /* idempotent: nothing more */
}

/* The flush thread: records reach the file without a close, within its
 * interval; threads racing through 4 KiB buffers (each fills in 64
 * events, so hooks hand buffers over, and wait or write when both are
 * full) lose none, write none twice, and keep each thread's order. */
#define FL_THREADS 4
#define FL_EVENTS 3000

static void *flush_writer(void *arg)
{
	uint64_t t = (uint64_t)(uintptr_t)arg;
	for (uint64_t i = 1; i <= FL_EVENTS; i++) {
		struct kvt_rec_event ev = { .op = KVT_OP_ALLOC, .kind = KVT_KIND_DEVICE,
					    .addr = t << 32 | i, .size = 1 };
		kvt_trace_event(&ev);
	}
	return NULL;
}

/* Events in the file now; *in_order: each writer's addresses 1, 2, 3... */
static unsigned events_in(const char *path, int *in_order, int *ended)
{
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	uint64_t next[FL_THREADS + 1] = { 0 };
	unsigned n = 0;
	*in_order = 1;
	if (kvt_trace_reader_open(&r, path)) {
		kvt_trace_reader_close(&r);
		return 0;
	}
	while (kvt_trace_next(&r, &it) > 0) {
		if (!it.ev)
			continue;
		uint64_t t = it.ev->addr >> 32, i = it.ev->addr & 0xffffffffu;
		if (t > FL_THREADS || i != ++next[t])
			*in_order = 0;
		n++;
	}
	*ended = r.saw_end;
	kvt_trace_reader_close(&r);
	return n;
}

static void test_flush_thread(void)
{
	CU_ASSERT_EQUAL_FATAL(kvt_trace_open(path_of("fl.%p"), 4096, 0), 0);
	kvt_trace_flush_start(20);
	char path[256];
	snprintf(path, sizeof path, "%s", kvt_trace_path());
	pthread_t th[FL_THREADS];
	for (uintptr_t t = 0; t < FL_THREADS; t++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[t], NULL, flush_writer, (void *)(t + 1)), 0);
	for (int t = 0; t < FL_THREADS; t++)
		pthread_join(th[t], NULL);
	/* no close: the thread writes the last of them (20 ms; 10 s of slack) */
	unsigned n = 0;
	int in_order = 0, ended = 1;
	for (int i = 0; i < 1000 && n != FL_THREADS * FL_EVENTS; i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		n = events_in(path, &in_order, &ended);
	}
	CU_ASSERT_EQUAL(n, FL_THREADS * FL_EVENTS);
	CU_ASSERT_TRUE(in_order);
	CU_ASSERT_FALSE(ended);
	struct kvt_trace_stats st;
	kvt_trace_stats(&st);
	CU_ASSERT_TRUE(st.nr_flushes > 0);
	CU_ASSERT_EQUAL(st.nr_dropped, 0);
	kvt_trace_close();                   /* stops the thread, then END */
	n = events_in(path, &in_order, &ended);
	CU_ASSERT_EQUAL(n, FL_THREADS * FL_EVENTS);
	CU_ASSERT_TRUE(in_order);
	CU_ASSERT_TRUE(ended);
}

/* The stack cache: two call paths of the same shape (f1 and f2 call g,
 * which calls the leaf; the leaf's frame is at the same address on both)
 * asked for in turn. Every stack must hold the leaf's and g's own return
 * addresses in order, whichever path came before; the cache is used. And
 * from a signal handler, on the same paths. */
#define NOINL __attribute__((noinline))
static _Atomic int sc_sink;
static unsigned sc_wrong, sc_found;

static NOINL void sc_leaf(void *ra_g)
{
	void *ip[48];
	void *ra_leaf = __builtin_return_address(0);
	int n = kvt_trace_stack_raw(ip, 48), j = 0;
	while (j < n && ip[j] != ra_leaf)
		j++;
	int right = j + 1 < n && ip[j + 1] == ra_g;   /* else: missing, or another path's */
	__atomic_fetch_add(right ? &sc_found : &sc_wrong, 1, __ATOMIC_RELAXED);
	sc_sink++;
}

static NOINL void sc_g(void)
{
	sc_leaf(__builtin_return_address(0));
	sc_sink++;
}

static NOINL void sc_f1(void)
{
	sc_g();
	sc_sink += 1;
}

static NOINL void sc_f2(void)
{
	sc_g();
	sc_sink += 2;
}

static void sc_handler(int sig)
{
	(void)sig;
	sc_f1();
	sc_f2();
	sc_f1();
}

static void *sc_thread(void *arg)
{
	uint64_t h, m;
	for (int i = 0; i < 10; i++)
		(i % 2 ? sc_f1 : sc_f2)();
	kvt_trace_stack_cache_counts(&h, &m);
	*(uint64_t *)arg = h;
	return NULL;
}

static void test_stack_cache(void)
{
	uint64_t h0, m0, h1, m1;
	kvt_trace_stack_cache_setup();
	kvt_trace_stack_cache_counts(&h0, &m0);
	sc_wrong = sc_found = 0;
	for (int i = 0; i < 400; i++) {
		if ((i / 3) % 2)
			sc_f1();
		else
			sc_f2();
	}
	kvt_trace_stack_cache_counts(&h1, &m1);
	CU_ASSERT_EQUAL(sc_wrong, 0);
	CU_ASSERT_EQUAL(sc_found, 400);
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	CU_ASSERT(h1 - h0 >= 390);          /* 2 paths, 4 entries: a fill each */
	CU_ASSERT_EQUAL(h1 + m1 - h0 - m0, 400);
#endif
	struct sigaction sa = { .sa_handler = sc_handler }, old;
	sigemptyset(&sa.sa_mask);
	CU_ASSERT_EQUAL_FATAL(sigaction(SIGUSR1, &sa, &old), 0);
	for (int i = 0; i < 20; i++)
		raise(SIGUSR1);
	sigaction(SIGUSR1, &old, NULL);
	CU_ASSERT_EQUAL(sc_wrong, 0);
	CU_ASSERT_EQUAL(sc_found, 460);
	/* threads: a cache each, made and let go (its page unmapped at exit) */
	uint64_t th_hits[8];
	pthread_t th[8];
	for (int r = 0; r < 4; r++) {
		for (int i = 0; i < 8; i++)
			CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, sc_thread, &th_hits[i]), 0);
		for (int i = 0; i < 8; i++) {
			pthread_join(th[i], NULL);
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
			CU_ASSERT(th_hits[i] >= 8);
#endif
		}
	}
	CU_ASSERT_EQUAL(sc_wrong, 0);
	CU_ASSERT_EQUAL(sc_found, 460 + 4 * 8 * 10);
	if (sc_wrong)
		fprintf(stderr, "stack cache: %u of %u stacks wrong\n", sc_wrong, sc_wrong + sc_found);
}

static void write_file(const char *name, const void *data, size_t len)
{
	FILE *f = fopen(path_of(name), "wb");
	fwrite(data, 1, len, f);
	fclose(f);
}

static int read_all(const char *name, char *err, size_t errlen)
{
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	int ret = kvt_trace_reader_open(&r, path_of(name));
	if (!ret)
		while ((ret = kvt_trace_next(&r, &it)) > 0)
			;
	snprintf(err, errlen, "%s", r.err);
	if (!ret)
		kvt_trace_stop_line(&r, err, errlen);   /* "" when it ended on a record */
	kvt_trace_reader_close(&r);
	return ret;
}

static void test_hostile(void)
{
	struct kvt_trace_header h = { .magic = "KVTTRACE", .version = 1, .header_bytes = 64 };
	char err[256];
	unsigned char buf[256];

	write_file("empty", "", 0);
	CU_ASSERT_TRUE(read_all("empty", err, sizeof err) < 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "too short"));

	write_file("magic", "NOTATRACE-------------------------------------------------------", 64);
	CU_ASSERT_TRUE(read_all("magic", err, sizeof err) < 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad magic"));

	struct kvt_trace_header h2 = h;
	h2.version = 7;
	write_file("newer", &h2, sizeof h2);
	CU_ASSERT_TRUE(read_all("newer", err, sizeof err) < 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "version 7 is newer"));

	/* record claiming 3 bytes (shorter than its own header) */
	memcpy(buf, &h, 64);
	struct kvt_rec_head rh = { KVT_REC_EVENT, 3 };
	memcpy(buf + 64, &rh, 4);
	write_file("short", buf, 68);
	CU_ASSERT_TRUE(read_all("short", err, sizeof err) < 0);

	/* event record with the wrong size */
	rh.bytes = 40;
	memcpy(buf + 64, &rh, 4);
	memset(buf + 68, 0, 36);
	write_file("evsize", buf, 104);
	CU_ASSERT_TRUE(read_all("evsize", err, sizeof err) < 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "wrong size"));

	/* stack claiming 1000 frames */
	struct kvt_rec_stack st = { { KVT_REC_STACK, sizeof st + 8 }, 1, 1000 };
	memcpy(buf + 64, &st, sizeof st);
	write_file("frames", buf, 64 + sizeof st + 8);
	CU_ASSERT_TRUE(read_all("frames", err, sizeof err) < 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "frame count"));

	/* cut in the middle of a record (a writer killed mid-write, or still
	 * writing): the records before it read, and the stop is said */
	struct kvt_rec_event ev = { .head = { KVT_REC_EVENT, sizeof ev } };
	memcpy(buf + 64, &ev, sizeof ev);
	memcpy(buf + 64 + sizeof ev, &ev, sizeof ev);
	write_file("trunc", buf, 64 + sizeof ev + 20);
	CU_ASSERT_EQUAL(read_all("trunc", err, sizeof err), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "stopped at byte 128 of 148, in a record cut short"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "; 1 events read before it"));
	write_file("trunc-head", buf, 64 + sizeof ev + 2);     /* inside a record's head */
	CU_ASSERT_EQUAL(read_all("trunc-head", err, sizeof err), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "stopped at byte 128 of 130"));
	write_file("whole", buf, 64 + sizeof ev);              /* no END, nothing cut */
	CU_ASSERT_EQUAL(read_all("whole", err, sizeof err), 0);
	CU_ASSERT_STRING_EQUAL(err, "");

	/* unknown record type */
	rh.type = 99;
	rh.bytes = 8;
	memcpy(buf + 64, &rh, 4);
	write_file("type", buf, 72);
	CU_ASSERT_TRUE(read_all("type", err, sizeof err) < 0);

	/* random bytes after a valid header: an error or a clean end, never a crash */
	unsigned seed = 12345;
	for (int round = 0; round < 2000; round++) {
		memcpy(buf, &h, 64);
		for (int i = 64; i < 256; i++) {
			seed = seed * 1103515245u + 12345u;
			buf[i] = (unsigned char)(seed >> 16);
		}
		write_file("rand", buf, 64 + (size_t)(seed % 192));
		read_all("rand", err, sizeof err);
	}
	CU_PASS("2000 random files read without a crash");
}

static void test_expand(void)
{
	char out[64], name[16];
	CU_ASSERT_EQUAL(kvt_trace_expand("/t/%p.x", 42, NULL, out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, "/t/42.x");
	CU_ASSERT_EQUAL(kvt_trace_expand("a%%p%q", 7, NULL, out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, "a%p%q");
	CU_ASSERT_EQUAL(kvt_trace_expand("%p%p%p%p%p%p%p%p%p%p", 1234567, NULL, out, 16),
			-ENAMETOOLONG);
	/* %e: the program's name; none given: "prog" */
	CU_ASSERT_EQUAL(kvt_trace_expand("d/%e.%p.trace", 9, "python3.11", out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, "d/python3.11.9.trace");
	CU_ASSERT_EQUAL(kvt_trace_expand("%e.%p", 9, NULL, out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, "prog.9");
	/* names made safe for a file name: no '/', no leading '.', 15 bytes */
	static const char *const names[][2] = {
		{ "bash", "bash" }, { "a/b c", "a_b_c" }, { ".hidden", "_hidden" },
		{ "", "prog" }, { "VLLM::EngineCore", "VLLM__EngineCor" }, { "x\n", "x" },
		{ "py-3.11+", "py-3.11+" },
	};
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
		kvt_trace_file_name(names[i][0], name);
		CU_ASSERT_STRING_EQUAL(name, names[i][1]);
	}
}

/* Run ids: UTC date and time, then the pid. */
static void test_run_id(void)
{
	char id[64];
	kvt_trace_run_id(id, sizeof id, 0, 1);
	CU_ASSERT_STRING_EQUAL(id, "19700101-000000-1");
	kvt_trace_run_id(id, sizeof id, 951782400ull + 86399, 4242);     /* 2000-02-29 */
	CU_ASSERT_STRING_EQUAL(id, "20000229-235959-4242");
	kvt_trace_run_id(id, sizeof id, 1798761600ull + 3723, 7);          /* 2027-01-01 */
	CU_ASSERT_STRING_EQUAL(id, "20270101-010203-7");
}

static void test_units(void)
{
	static const struct { const char *s; int ret; uint64_t v; } cases[] = {
		{ "4096", 0, 4096 }, { "64K", 0, 65536 }, { "2M", 0, 2u << 20 },
		{ "8G", 0, 8ull << 30 }, { "8GiB", 0, 8ull << 30 }, { "1T", 0, 1ull << 40 },
		{ "1.5G", 0, 3ull << 29 }, { "0", 0, 0 }, { "", -EINVAL, 0 },
		{ "G", -EINVAL, 0 }, { "12Q", -EINVAL, 0 }, { "-1", -EINVAL, 0 },
		{ "99999999999999999999", -ERANGE, 0 }, { "16777216T", -ERANGE, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t v = 0;
		int r = kvt_parse_size(cases[i].s, &v, NULL, 0);
		CU_ASSERT_EQUAL(r, cases[i].ret);
		if (!r)
			CU_ASSERT_EQUAL(v, cases[i].v);
	}
	int b;
	CU_ASSERT_EQUAL(kvt_parse_bool("On", &b), 0);
	CU_ASSERT_EQUAL(b, 1);
	CU_ASSERT_EQUAL(kvt_parse_bool("no", &b), 0);
	CU_ASSERT_EQUAL(b, 0);
	CU_ASSERT_EQUAL(kvt_parse_bool("maybe", &b), -EINVAL);
	static const struct { uint64_t v; const char *s; } exact[] = {
		{ 0, "0" }, { 1023, "1023" }, { 1024, "1K" }, { 4097, "4097" },
		{ 1536ull << 10, "1536K" }, { 84ull << 20, "84M" }, { 8ull << 30, "8G" },
		{ 1ull << 40, "1T" }, { 1ull << 50, "1024T" }, { 3ull << 41, "6T" },
	};
	for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
		char text[32];
		uint64_t back;
		CU_ASSERT_STRING_EQUAL(kvt_format_size_exact(exact[i].v, text, sizeof text),
				       exact[i].s);
		CU_ASSERT_EQUAL(kvt_parse_size(text, &back, NULL, 0), 0);   /* reads back */
		CU_ASSERT_EQUAL(back, exact[i].v);
	}
}

static void test_options(void)
{
	struct kvt_options o = kvt_opt;
	char *env[] = { "KVTIER_STACK_DEPTH=7", "KVTIER_LOG=off", "KVTIER_TRACE_BUFFER=64K",
			"KVTIER_INHERIT=no", "KVTIER_DISABLE=yes", "PATH=/bin", NULL };
	CU_ASSERT_EQUAL(kvt_options_load(&o, env), 0);
	CU_ASSERT_EQUAL(o.stack_depth, 7);
	CU_ASSERT_EQUAL(o.log_level, KVT_LOG_OFF);
	CU_ASSERT_EQUAL(o.trace_buffer, 65536);
	CU_ASSERT_EQUAL(o.inherit, 0);
	CU_ASSERT_EQUAL(o.disable, 1);
	struct kvt_options d = kvt_opt;
	char *bad[] = { "KVTIER_STACK_DEPTH=999", "KVTIER_LOG=loud", "KVTIER_TRACE_BUFFER=1",
			"KVTIER_NOPE=1", "KVTIER_DISABLE=", NULL };
	kvt_opt.log_level = KVT_LOG_OFF;          /* keep the test's stderr quiet */
	CU_ASSERT_EQUAL(kvt_options_load(&d, bad), 5);
	kvt_opt.log_level = KVT_LOG_WARN;
	CU_ASSERT_EQUAL(d.stack_depth, 32);       /* defaults kept */
	CU_ASSERT_EQUAL(d.log_level, KVT_LOG_WARN);
	CU_ASSERT_EQUAL(d.trace_buffer, 1u << 20);
	CU_ASSERT_EQUAL(d.disable, 0);
}

/* Each default is written once, as the row's .def: every .def parses, and
 * for each option, the value an empty environment leaves (kvt_opt, as the
 * constructor set it) is the value its .def parses to. */
static void test_option_defaults_are_the_table(void)
{
	struct kvt_options fresh, empty, given, all;
	CU_ASSERT_EQUAL(kvt_options_defaults(&fresh), 0);
	memcpy(&empty, &kvt_opt, sizeof empty);
	char *none[] = { NULL };
	CU_ASSERT_EQUAL(kvt_options_load(&empty, none), 0);
	CU_ASSERT_EQUAL(memcmp(&empty, &fresh, sizeof empty), 0);
	memset(&all, 0, sizeof all);
	const char *name, *def, *unit, *help;
	unsigned n = 0;
	for (unsigned i = 0; !kvt_option_info(i, &name, &def, &unit, &help); i++, n++) {
		char kv[256];
		snprintf(kv, sizeof kv, "%s=%s", name, def);
		char *env[] = { kv, NULL };
		memcpy(&given, &empty, sizeof given);
		CU_ASSERT_EQUAL(kvt_options_load(&given, env), 0);
		CU_ASSERT_EQUAL(kvt_options_load(&all, env), 0);
		given.admit_set = 0;            /* records that KVTIER_ADMIT was given */
		if (memcmp(&given, &empty, sizeof given))
			fprintf(stderr, "%s: its default is not '%s'\n", name, def);
		CU_ASSERT_EQUAL(memcmp(&given, &empty, sizeof given), 0);
	}
	CU_ASSERT(n >= 20);
	all.admit_set = 0;                      /* each field set by its row */
	CU_ASSERT_EQUAL(memcmp(&all, &empty, sizeof all), 0);
	CU_ASSERT_EQUAL(empty.log_level, KVT_LOG_WARN);   /* a parse, not zeros */
	CU_ASSERT_EQUAL(empty.trace_buffer, 1u << 20);
}

/* Every option in the table is documented in README.md. */
static void test_readme_documents_options(void)
{
	char *readme = kvt_slurp("README.md", NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(readme);
	const char *name, *def, *unit, *help;
	for (unsigned i = 0; !kvt_option_info(i, &name, &def, &unit, &help); i++) {
		char key[80];
		snprintf(key, sizeof key, "`%s`", name);
		if (!strstr(readme, key))
			fprintf(stderr, "README.md does not document %s\n", name);
		CU_ASSERT_PTR_NOT_NULL(strstr(readme, key));
	}
	free(readme);
}

/* ---- build ids ---- */

/* The build id of a file as binutils' readelf prints it (hex), or "". */
static void readelf_build_id(const char *path, char *hex, size_t len)
{
	char cmd[600], line[512];
	hex[0] = 0;
	snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null", path);
	FILE *p = popen(cmd, "r");
	if (!p)
		return;
	while (fgets(line, sizeof line, p)) {
		const char *b = strstr(line, "Build ID: ");
		if (b && sscanf(b + 10, "%127s", hex) == 1 && strlen(hex) < len)
			break;
	}
	pclose(p);
}

static int main_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(struct dl_phdr_info *)arg = *info;
	return 1;                       /* the main program comes first */
}

/* The writer reads each module's id from its notes in memory
 * (kvt_dl_object_build_id): the main program's is the one readelf reads
 * from the file. (Records in a trace: tests/unit/test_symbolize.c, whose
 * program runs under the preload; here every frame is kvtier's own.) */
static void test_build_id_from_memory(void)
{
	char want[130], got[130] = "", exe[512];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);   /* not readelf's own */
	CU_ASSERT_FATAL(el > 0);
	exe[el] = 0;
	readelf_build_id(exe, want, sizeof want);
	if (!want[0]) {
		CU_FAIL("readelf found no build id in this test binary (binutils missing?)");
		return;
	}
	struct dl_phdr_info self;
	uint8_t id[KVT_TRACE_MAX_BUILD_ID];
	dl_iterate_phdr(main_object, &self);
	unsigned n = kvt_dl_object_build_id(&self, id, sizeof id);
	for (unsigned i = 0; i < n && i < 64; i++)
		snprintf(got + 2 * i, 3, "%02x", id[i]);
	CU_ASSERT_STRING_EQUAL(got, want);
	CU_ASSERT_EQUAL(kvt_dl_object_build_id(&self, id, n - 1), 0);   /* too long: none */
	struct dl_phdr_info none = self;
	none.dlpi_phnum = 0;
	CU_ASSERT_EQUAL(kvt_dl_object_build_id(&none, id, sizeof id), 0);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "writer -> reader round trip, stack dedup", test_roundtrip },
		{ "malformed, truncated, newer, random files", test_hostile },
		{ "flush thread: in the file before close, none lost, none twice", test_flush_thread },
		{ "%p expansion", test_expand },
		{ "a forked child is never untraced while its file opens", test_fork_child_never_off },
		{ "_exit's close waits for a lock another thread holds", test_close_waits_for_a_busy_lock },
		{ "stack cache: same-shaped paths in turn, and from a signal handler", test_stack_cache },
		{ "sizes and booleans", test_units },
		{ "options table: values, bad values", test_options },
		{ "each option's default is its table row's", test_option_defaults_are_the_table },
		{ "README documents every option", test_readme_documents_options },
		{ "run ids", test_run_id },
		{ "build id of a loaded object, from its notes in memory", test_build_id_from_memory },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "trace", setup, teardown, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
