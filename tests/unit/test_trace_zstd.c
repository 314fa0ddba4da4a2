// SPDX-License-Identifier: MIT
/* zstd frames in the trace (KVTIER_TRACE_COMPRESS): what the writer
 * compresses reads back exactly, raw records and frames mix in one file, a
 * file cut inside a frame reads to the frame before it and a damaged frame
 * stops the reader, each with one line; a pipe reads as a file; without
 * libzstd the trace is written uncompressed, said once. */
#include <stdint.h>

#include "kvt_test.h"
#include "../base/kvt.h"
#include "../profiler/trace.h"
#include "../profiler/trace_read.h"

static char dir[128];
static char lib[512], fakedir[512], ldpath[600], preload[600];

static int setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/kvt-test-trace-zstd.%d", (int)getpid());
	if (kvt_preload_env(lib, fakedir, ldpath, preload))
		return 1;
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
	static char bufs[4][256];
	static int i;
	char *b = bufs[i++ & 3];
	snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
	return b;
}

/* ---- writing and reading back ---- */

/* Events 0 .. n-1 of the pattern the checks expect. */
static void events(unsigned from, unsigned n)
{
	for (unsigned i = from; i < from + n; i++) {
		struct kvt_rec_event ev = { .op = KVT_OP_ALLOC, .api = 3, .addr = 0x200000ull * i,
					    .size = (uint64_t)i % 977 * 4096, .kind = KVT_KIND_DEVICE };
		kvt_trace_event(&ev);
	}
}

/* A trace of n events written in-process; mid: a raw write (kvt_trace_flush,
 * as at fork or exec) after that many. Returns the file's path (the last
 * four stay valid). The end writes the buffer, then END alone: with
 * zstd, its own frame. */
static const char *write_trace(const char *name, int zstd, unsigned n, unsigned mid)
{
	static char paths[4][300];
	static int k;
	char *path = paths[k++ & 3];
	CU_ASSERT_EQUAL(kvt_trace_compress(zstd, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_open(path_of(name), 4u << 20, 0), 0);
	snprintf(path, sizeof paths[0], "%s", kvt_trace_path());
	CU_ASSERT_EQUAL(kvt_trace_compressed(), zstd);
	events(0, mid);
	if (mid)
		kvt_trace_flush();
	events(mid, n - mid);
	kvt_trace_close();
	return path;
}

struct seen {
	int ret, ended, cut, stop;
	unsigned nr_events, nr_bad, nr_frames;
	uint64_t offset;                 /* where the reader stopped */
	uint64_t frame_at[64];           /* each frame's offset, as the reader met it */
	uint64_t first_raw_event_at;     /* the offset of the first event outside a frame (0: none) */
	char stop_line[256];
};

static void read_back(struct seen *s, const char *path)
{
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	memset(s, 0, sizeof *s);
	s->ret = kvt_trace_reader_open(&r, path);
	if (s->ret)
		fprintf(stderr, "%s: %s\n", path, r.err);
	CU_ASSERT_EQUAL_FATAL(s->ret, 0);
	while ((s->ret = kvt_trace_next(&r, &it)) > 0) {
		if (r.in_frame && s->nr_frames < r.nr_frames && r.nr_frames <= 64)
			s->frame_at[s->nr_frames] = r.offset;
		s->nr_frames = (unsigned)r.nr_frames;
		if (!it.ev)
			continue;
		unsigned i = s->nr_events++;
		if (!r.in_frame && !s->first_raw_event_at)
			s->first_raw_event_at = r.offset - sizeof *it.ev;
		s->nr_bad += it.ev->addr != 0x200000ull * i || it.ev->size != (uint64_t)i % 977 * 4096;
	}
	if (s->ret < 0)
		fprintf(stderr, "%s: %s\n", path, r.err);
	s->ended = r.saw_end;
	s->cut = r.cut;
	s->stop = r.stop;
	s->offset = r.offset;
	kvt_trace_stop_line(&r, s->stop_line, sizeof s->stop_line);
	kvt_trace_reader_close(&r);
}

static size_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) ? 0 : (size_t)st.st_size;
}

/* 60 000 events (3.8 MB of records) written at close: four frames of at
 * most 1 MiB, and END's; every event back, in order, and the file far
 * smaller. */
static void test_roundtrip(void)
{
	static struct seen s;
	const char *raw = write_trace("raw.%p", 0, 60000, 0);
	size_t raw_bytes = file_size(raw);
	const char *z = write_trace("z.%p", 1, 60000, 0);
	size_t z_bytes = file_size(z);
	read_back(&s, z);
	printf("\n    60000 events: %zu bytes raw, %zu with zstd (%.1fx), %u frames\n",
	       raw_bytes, z_bytes, (double)raw_bytes / (double)z_bytes, s.nr_frames);
	CU_ASSERT_EQUAL(s.ret, 0);
	CU_ASSERT_EQUAL(s.nr_events, 60000);
	CU_ASSERT_EQUAL(s.nr_bad, 0);
	CU_ASSERT_TRUE(s.ended);
	CU_ASSERT_FALSE(s.cut);
	CU_ASSERT_EQUAL(s.nr_frames, 5);       /* 3 840 000 bytes in frames of <= 1 MiB, END */
	CU_ASSERT_EQUAL(s.first_raw_event_at, 0);
	CU_ASSERT_TRUE(z_bytes * 4 < raw_bytes);

	static struct kvt_trace_reader r;      /* the header says what the file may hold */
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&r, z), 0);
	CU_ASSERT_EQUAL(r.hdr.version, 2);
	CU_ASSERT_EQUAL(r.hdr.flags, KVT_TRACE_FLAG_ZSTD);
	kvt_trace_reader_close(&r);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&r, raw), 0);
	CU_ASSERT_EQUAL(r.hdr.version, 1);     /* what a reader from before frames reads */
	CU_ASSERT_EQUAL(r.hdr.flags, 0);
	kvt_trace_reader_close(&r);
	read_back(&s, raw);
	CU_ASSERT_EQUAL(s.nr_events, 60000);
	CU_ASSERT_EQUAL(s.nr_frames, 0);
}

/* Raw records (a write at fork or exec) between the header and the frames
 * of the end: one file, read through. */
static void test_mixed(void)
{
	static struct seen s;
	const char *z = write_trace("mix.%p", 1, 30000, 1000);
	read_back(&s, z);
	CU_ASSERT_EQUAL(s.ret, 0);
	CU_ASSERT_EQUAL(s.nr_events, 30000);
	CU_ASSERT_EQUAL(s.nr_bad, 0);
	CU_ASSERT_TRUE(s.ended);
	CU_ASSERT_EQUAL(s.nr_frames, 3);
	CU_ASSERT_TRUE(s.first_raw_event_at > 0);          /* the first 1000 are raw ... */
	CU_ASSERT_TRUE(s.first_raw_event_at < s.frame_at[0]);   /* ... before the frames */
}

/* ---- cut and damaged files ---- */

static void copy_cut(const char *from, const char *to, size_t keep, long flip)
{
	size_t n = 0;
	char *t = kvt_slurp(from, &n);
	CU_ASSERT_FATAL(t != NULL && keep <= n);
	if (flip >= 0)
		t[flip] ^= 0x20;
	FILE *f = fopen(to, "wb");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT_EQUAL(fwrite(t, 1, keep, f), keep);
	fclose(f);
	free(t);
}

static unsigned count(const char *text, const char *what)
{
	unsigned n = 0;
	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* kvtier dump and report read it, exit 0, and say `line` once on stderr. */
static void tools_say_once(const char *path, const char *line)
{
	static struct kvt_child c;
	const char *dump[] = { kvt_path("kvtier"), "dump", path, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, dump, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(count(c.err, "\n"), 1);
	CU_ASSERT_EQUAL(count(c.err, line), 1);
	const char *rep[] = { kvt_path("kvtier"), "report", path, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, rep, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(count(c.err, line), 1);
	if (count(c.err, line) != 1)
		fprintf(stderr, "report said: %s\n", c.err);
}

/* A file cut inside its third frame (a writer killed mid-write) reads the
 * two frames before it, and one line says where it stopped. */
static void test_cut_inside_a_frame(void)
{
	static struct seen whole, cut;
	const char *z = write_trace("cutz.%p", 1, 60000, 0);
	read_back(&whole, z);
	CU_ASSERT_FATAL(whole.nr_frames == 5);
	const char *c = path_of("cut.trace");
	size_t keep = (size_t)whole.frame_at[2] + 100;
	copy_cut(z, c, keep, -1);
	read_back(&cut, c);
	CU_ASSERT_EQUAL(cut.ret, 0);
	CU_ASSERT_TRUE(cut.cut);
	CU_ASSERT_EQUAL(cut.stop, KVT_STOP_FRAME);
	CU_ASSERT_FALSE(cut.ended);
	CU_ASSERT_EQUAL(cut.nr_frames, 2);
	CU_ASSERT_EQUAL(cut.offset, whole.frame_at[2]);
	CU_ASSERT_TRUE(cut.nr_events > 30000 && cut.nr_events < 60000);
	CU_ASSERT_EQUAL(cut.nr_bad, 0);
	char want[200];
	snprintf(want, sizeof want, "stopped at byte %llu of %zu, in a zstd frame cut short",
		 (unsigned long long)whole.frame_at[2], keep);
	CU_ASSERT_PTR_NOT_NULL(strstr(cut.stop_line, want));
	snprintf(want, sizeof want, "; %u events read before it", cut.nr_events);
	CU_ASSERT_PTR_NOT_NULL(strstr(cut.stop_line, want));
	CU_ASSERT_PTR_NULL(strchr(cut.stop_line, '\n'));
	tools_say_once(c, "in a zstd frame cut short");

	/* cut inside the frame's first 4 bytes, and right after its magic */
	for (unsigned k = 1; k <= 5; k += 4) {
		copy_cut(z, c, (size_t)whole.frame_at[1] + k, -1);
		read_back(&cut, c);
		CU_ASSERT_TRUE(cut.cut && cut.nr_frames == 1 && cut.offset == whole.frame_at[1]);
	}
}

/* A byte flipped in a frame's checksum: the frames before it read, one
 * line names the checksum; a byte flipped inside its data is never read
 * as records either. */
static void test_flipped_byte(void)
{
	static struct seen whole, bad;
	const char *z = write_trace("flip.%p", 1, 60000, 0);
	read_back(&whole, z);
	CU_ASSERT_FATAL(whole.nr_frames == 5);
	const char *c = path_of("flip.trace");
	size_t n = file_size(z);
	copy_cut(z, c, n, (long)whole.frame_at[2] - 1);   /* the last byte of frame 1's checksum */
	read_back(&bad, c);
	CU_ASSERT_EQUAL(bad.ret, 0);
	CU_ASSERT_TRUE(bad.cut);
	CU_ASSERT_EQUAL(bad.stop, KVT_STOP_DAMAGED);
	CU_ASSERT_EQUAL(bad.nr_frames, 1);
	CU_ASSERT_EQUAL(bad.offset, whole.frame_at[1]);
	CU_ASSERT_PTR_NOT_NULL(strstr(bad.stop_line, "fails its content checksum (the file is damaged)"));
	tools_say_once(c, "fails its content checksum");

	/* a flipped byte in the middle of frame 1's data: stopped there, or an
	 * error; never its records */
	copy_cut(z, c, n, (long)(whole.frame_at[1] + whole.frame_at[2]) / 2);
	read_back(&bad, c);
	CU_ASSERT_TRUE(bad.ret < 0 || (bad.cut && bad.stop == KVT_STOP_DAMAGED));
	CU_ASSERT_EQUAL(bad.nr_frames, 1);
	CU_ASSERT_EQUAL(bad.nr_bad, 0);
}

/* A frame the writer never makes: refused with a message, not allocated. */
static void test_hostile_frames(void)
{
	static struct seen s;
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	const char *z = write_trace("host.%p", 1, 100, 0);
	read_back(&s, z);
	CU_ASSERT_FATAL(s.nr_frames == 2);
	size_t n = 0;
	unsigned char *t = (unsigned char *)kvt_slurp(z, &n);
	CU_ASSERT_FATAL(t != NULL);
	const char *c = path_of("host.trace");
	/* no checksum flag */
	t[s.frame_at[0] + 4] &= (unsigned char)~0x04;
	FILE *f = fopen(c, "wb");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT_EQUAL(fwrite(t, 1, n, f), n);
	fclose(f);
	free(t);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&r, c), 0);
	int ret;
	while ((ret = kvt_trace_next(&r, &it)) > 0)
		;
	CU_ASSERT_EQUAL(ret, -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "without a content checksum"));
	kvt_trace_reader_close(&r);
}

/* ---- pipes ---- */

/* A compressed trace through a pipe: the reader, kvtier dump and kvtier
 * report read it as they read the file. */
static void test_pipe(void)
{
	static struct seen s;
	static struct kvt_child c;
	const char *z = write_trace("pipe.%p", 1, 30000, 1000);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "cat %s | %s dump /dev/stdin | grep -c '^event'", z,
		 kvt_path("kvtier"));
	const char *sh[] = { "/bin/sh", "-c", cmd, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, sh, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(strtoul(c.out, NULL, 10), 30000);
	snprintf(cmd, sizeof cmd, "cat %s | %s report /dev/stdin", z, kvt_path("kvtier"));
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, sh, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "1 trace file, 30000 events"));

	int p[2];
	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (!pid) {
		close(p[0]);
		size_t n = 0;
		char *t = kvt_slurp(z, &n);
		size_t half = n / 2;         /* in two writes, the second a while later */
		if (!t || write(p[1], t, half) != (ssize_t)half)
			_exit(1);
		usleep(50000);
		_exit(write(p[1], t + half, n - half) != (ssize_t)(n - half));
	}
	close(p[1]);
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
	read_back(&s, path);
	close(p[0]);
	int st;
	CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
	CU_ASSERT_EQUAL(s.ret, 0);
	CU_ASSERT_EQUAL(s.nr_events, 30000);
	CU_ASSERT_EQUAL(s.nr_bad, 0);
	CU_ASSERT_TRUE(s.ended);
	CU_ASSERT_EQUAL(s.nr_frames, 3);
}

/* ---- in a process: the option, and no libzstd ---- */

/* tests/progs/trace_steady for 1 s under the preload with env; its trace
 * read back, its stderr in c. */
static void run_steady(const char *name, const char *const *env, struct seen *s,
		       struct kvt_child *c, int *version)
{
	char tr[300];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s/%s.%%p", dir, name);
	const char *e[8] = { ldpath, preload, tr };
	for (int i = 0; env[i] && i < 4; i++)
		e[3 + i] = env[i];
	const char *argv[] = { kvt_path("tests/progs/trace_steady"), "1", "5", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(c, argv, e, 30), 0);
	CU_ASSERT_EQUAL(c->exit_code, 0);
	char cmd[400];
	snprintf(cmd, sizeof cmd, "ls %s/%s.* > %s/%s.list", dir, name, dir, name);
	CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "%s/%s.list", dir, name);
	char *list = kvt_slurp(cmd, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(list);
	list[strcspn(list, "\n")] = 0;
	read_back(s, list);
	static struct kvt_trace_reader r;
	CU_ASSERT_EQUAL(kvt_trace_reader_open(&r, list), 0);
	*version = (int)r.hdr.version;
	kvt_trace_reader_close(&r);
	free(list);
}

/* KVTIER_TRACE_ZSTD_LIB naming a library that is not there (as on a host
 * without libzstd): one line, and the trace, uncompressed, has every event. */
static void test_no_libzstd(void)
{
	static struct seen s;
	static struct kvt_child c;
	int version;
	const char *env[] = { "KVTIER_TRACE_COMPRESS=zstd", "KVTIER_TRACE_ZSTD_LIB=/nonexistent/libzstd.so.1",
			      NULL };
	run_steady("nolib", env, &s, &c, &version);
	CU_ASSERT_EQUAL(count(c.err, "kvtier["), 1);
	CU_ASSERT_EQUAL(count(c.err, "KVTIER_TRACE_COMPRESS=zstd: /nonexistent/libzstd.so.1 "
			      "cannot be loaded; the trace is written uncompressed"), 1);
	CU_ASSERT_EQUAL(version, 1);
	CU_ASSERT_EQUAL(s.nr_frames, 0);
	CU_ASSERT_TRUE(s.ended);
	CU_ASSERT_TRUE(s.nr_events >= 100);       /* 1 s of rounds of 5 ms: two events each */

	/* a library without zstd's functions: the same */
	const char *env2[] = { "KVTIER_TRACE_COMPRESS=zstd", "KVTIER_TRACE_ZSTD_LIB=libm.so.6", NULL };
	run_steady("notzstd", env2, &s, &c, &version);
	CU_ASSERT_EQUAL(count(c.err, "kvtier["), 1);
	CU_ASSERT_EQUAL(count(c.err, "libm.so.6 lacks ZSTD_"), 1);
	CU_ASSERT_EQUAL(version, 1);
	CU_ASSERT_TRUE(s.ended && s.nr_frames == 0);
}

/* The default does not compress (the traced hook pair's CPU target,
 * docs/performance.md); zstd does; a bad value says so once and takes the
 * default. */
static void test_option(void)
{
	static struct seen s;
	static struct kvt_child c;
	int version;
	const char *none[] = { NULL };
	run_steady("dflt", none, &s, &c, &version);
	CU_ASSERT_EQUAL(count(c.err, "kvtier["), 0);
	CU_ASSERT_EQUAL(version, 1);
	CU_ASSERT_TRUE(s.nr_frames == 0 && s.ended && s.nr_events >= 100);
	const char *on[] = { "KVTIER_TRACE_COMPRESS=zstd", NULL };
	run_steady("zstd", on, &s, &c, &version);
	CU_ASSERT_EQUAL(count(c.err, "kvtier["), 0);
	CU_ASSERT_EQUAL(version, 2);
	CU_ASSERT_TRUE(s.nr_frames >= 1 && s.ended && s.nr_events >= 100);
	const char *bad[] = { "KVTIER_TRACE_COMPRESS=lz4", NULL };
	run_steady("bad", bad, &s, &c, &version);
	CU_ASSERT_EQUAL(count(c.err, "kvtier["), 1);
	CU_ASSERT_EQUAL(count(c.err, "KVTIER_TRACE_COMPRESS='lz4' is not understood "
			      "(expected zstd|none); using the default 'none'"), 1);
	CU_ASSERT_EQUAL(version, 1);
	CU_ASSERT_TRUE(s.nr_frames == 0 && s.ended);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "compressed round trip: frames of at most 1 MiB, every event", test_roundtrip },
		{ "raw records and frames in one file", test_mixed },
		{ "a file cut inside a frame reads to the frame before it", test_cut_inside_a_frame },
		{ "a flipped byte fails its frame's checksum, one line", test_flipped_byte },
		{ "a frame without a checksum is refused", test_hostile_frames },
		{ "a compressed trace through a pipe", test_pipe },
		{ "no libzstd: one line, an uncompressed trace", test_no_libzstd },
		{ "KVTIER_TRACE_COMPRESS: the default (none), zstd, a bad value", test_option },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "trace_zstd", setup, teardown, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
