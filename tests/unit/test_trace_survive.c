// SPDX-License-Identifier: MIT
/* A trace survives the server: a program that allocates steadily under the
 * preload (tests/progs/trace_steady) is killed, and its trace holds what
 * the flush thread and the signal handler promise (docs/trace-format.md,
 * "When events reach the file"). SIGKILL: every event older than two
 * flush intervals. SIGTERM and SIGINT: every event, END, the program's own
 * end (killed by the signal, or its handler's exit code). With
 * KVTIER_TRACE_COMPRESS=zstd the flush thread writes zstd
 * frames and the signal handler raw records; SIGKILL is checked both ways.
 * A trace cut inside a record reads to that record, with one line saying
 * where. Times are bounds, never exact: the machine may be loaded. */
#include <sys/stat.h>
#include <time.h>

#include "kvt_test.h"
#include "../profiler/trace_read.h"

static char lib[512], fakedir[512], ldpath[600], preload[600], dir[128];

static int setup(void)
{
	if (kvt_preload_env(lib, fakedir, ldpath, preload))
		return 1;
	snprintf(dir, sizeof dir, "/tmp/kvt-test-trace-survive.%d", (int)getpid());
	return mkdir(dir, 0700);
}

static int teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) ? 1 : 0;
}

static const char *in_dir(const char *name)
{
	static char bufs[4][256];
	static int i;
	char *b = bufs[i++ & 3];
	snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
	return b;
}

static unsigned long long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts))
		;
}

/* ---- the program ---- */

struct run {
	pid_t pid;
	char name[32];              /* trace, stdout and stderr files: <name>.* */
	int status;
};

/* trace_steady SECONDS 5 [fork] under the preload, with KVTIER_TRACE at
 * <dir>/<name>.%p and env_extra; stdout and stderr to files. ignore_term:
 * SIGTERM ignored from before the exec, as a parent can leave it. */
static void start(struct run *r, const char *name, const char *mode, const char *const *env_extra,
		  int ignore_term)
{
	memset(r, 0, sizeof *r);
	snprintf(r->name, sizeof r->name, "%s", name);
	char tr[300], out[256], err[256];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s/%s.%%p", dir, name);
	snprintf(out, sizeof out, "%s/%s.out", dir, name);
	snprintf(err, sizeof err, "%s/%s.err", dir, name);
	const char *prog = kvt_path("tests/progs/trace_steady");
	r->pid = fork();
	CU_ASSERT_FATAL(r->pid >= 0);
	if (r->pid)
		return;
	int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
		_exit(126);
	const char *base[] = { ldpath, preload, tr, "KVTIER_TRACE_FLUSH_MS=", NULL };
	for (int pass = 0; pass < 2; pass++)
		for (const char *const *e = pass ? env_extra : base; e && *e; e++) {
			char kv[1400];
			snprintf(kv, sizeof kv, "%s", *e);
			char *eq = strchr(kv, '=');
			*eq = 0;
			if (eq[1])
				setenv(kv, eq + 1, 1);
			else
				unsetenv(kv);
		}
	if (ignore_term)
		signal(SIGTERM, SIG_IGN);
	alarm(60);                  /* a test that goes wrong never leaves it behind */
	execl(prog, prog, "30", "5", mode, (char *)NULL);
	_exit(127);
}

static void finish(struct run *r)
{
	CU_ASSERT_EQUAL(waitpid(r->pid, &r->status, 0), r->pid);
}

/* From the program's "n=N t=NS" lines: the last N, and the last N whose
 * line was written at or before CLOCK_MONOTONIC `by` (0: none). */
static void rounds(const struct run *r, unsigned long long by, unsigned long long *last,
		   unsigned long long *last_by)
{
	char path[256], line[128];
	snprintf(path, sizeof path, "%s/%s.out", dir, r->name);
	*last = *last_by = 0;
	FILE *f = fopen(path, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	unsigned long long n, t;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "n=%llu t=%llu", &n, &t) == 2) {
			*last = n;
			if (t <= by)
				*last_by = n;
		}
	fclose(f);
}

/* The pid a "fork" run's child said it has (0: none yet). */
static pid_t child_of(const struct run *r)
{
	char path[256], line[128];
	unsigned long long pid = 0, t;
	snprintf(path, sizeof path, "%s/%s.out", dir, r->name);
	FILE *f = fopen(path, "r");
	if (f && fgets(line, sizeof line, f) && sscanf(line, "child=%llu t=%llu", &pid, &t) != 2)
		pid = 0;
	if (f)
		fclose(f);
	return (pid_t)pid;
}

/* ---- the trace ---- */

struct seen {
	int ok, ended, cut, signal;       /* signal: the number in "trace.signal=N", or 0 */
	unsigned long long nr_frames;     /* zstd frames read */
	unsigned long long nr_events, end_events;
	unsigned long long last_ns;       /* the last event's CLOCK_MONOTONIC time */
	unsigned long long last_at;       /* the last event's offset in the file */
};

static void read_trace(struct seen *s, const char *path)
{
	static struct kvt_trace_reader rd;
	struct kvt_trace_item it;
	memset(s, 0, sizeof *s);
	int ret = kvt_trace_reader_open(&rd, path);
	if (ret)
		fprintf(stderr, "%s: %s\n", path, rd.err);
	CU_ASSERT_EQUAL_FATAL(ret, 0);
	for (uint64_t at = rd.offset; (ret = kvt_trace_next(&rd, &it)) > 0; at = rd.offset) {
		if (it.ev) {
			s->last_at = at;
			s->nr_events++;
			s->last_ns = rd.hdr.start_mono_ns + it.ev->t_ns;
		} else if (it.end) {
			s->end_events = it.end->nr_events;
		} else if (it.type == KVT_REC_INFO && it.text_len > 13 &&
			   !memcmp(it.text, "trace.signal=", 13)) {
			s->signal = 0;        /* the text is not NUL-terminated */
			for (size_t k = 13; k < it.text_len && it.text[k] >= '0' && it.text[k] <= '9'; k++)
				s->signal = s->signal * 10 + (it.text[k] - '0');
		}
	}
	s->ok = ret == 0;
	s->nr_frames = rd.nr_frames;
	s->ended = rd.saw_end;
	s->cut = rd.cut;
	kvt_trace_reader_close(&rd);
}

static const char *trace_of(const struct run *r, pid_t pid)
{
	static char p[300];
	snprintf(p, sizeof p, "%s/%s.%d", dir, r->name, (int)pid);
	return p;
}

static unsigned count_lines(const char *text, const char *what)
{
	unsigned n = 0;
	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* ---- SIGKILL ---- */

#define FLUSH_MS 1000ull              /* KVTIER_TRACE_FLUSH_MS's default */

/* Killed 3 s in: every round the program finished more than two flush
 * intervals before the kill is in the file (its two events each), in zstd
 * frames when zstd (one a flush at least), else in records alone. */
static void check_killed(const struct run *r, pid_t traced, unsigned long long killed_ns, int zstd)
{
	static struct seen s;
	unsigned long long last, old;
	rounds(r, killed_ns - 2 * FLUSH_MS * 1000000ull, &last, &old);
	read_trace(&s, trace_of(r, traced));
	printf("\n    killed at 3 s (%s): %llu rounds done, %llu of them over 2 s before; "
	       "%llu events in the trace (%llu zstd frames), the last %.2f s before the kill\n",
	       zstd ? "zstd" : "none", last, old, s.nr_events, s.nr_frames,
	       (double)(killed_ns - s.last_ns) / 1e9);
	CU_ASSERT_TRUE(zstd ? s.nr_frames >= 2 : s.nr_frames == 0);
	CU_ASSERT_TRUE(s.ok);
	CU_ASSERT_FALSE(s.ended);
	CU_ASSERT_TRUE(old > 0);             /* the program ran a second before it */
	CU_ASSERT_TRUE(s.nr_events >= 2 * old);
	CU_ASSERT_TRUE(s.nr_events <= 2 * last + 2);
}

static const char *const zstd_on[] = { "KVTIER_TRACE_COMPRESS=zstd", NULL };
static const char *const zstd_off[] = { "KVTIER_TRACE_COMPRESS=none", NULL };

static void test_sigkill(void)
{
	static struct run r;
	start(&r, "kill", NULL, zstd_on, 0);
	sleep_ms(3000);
	unsigned long long killed = mono_ns();
	kill(r.pid, SIGKILL);
	finish(&r);
	CU_ASSERT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
	check_killed(&r, r.pid, killed, 1);

	/* report and dump read it: exit 0, the note that it has no END */
	static struct kvt_child c;
	const char *path = trace_of(&r, r.pid);
	const char *rep[] = { kvt_path("kvtier"), "report", path, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, rep, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "note: 1 trace file without an end record"));
}

/* The same with records alone. */
static void test_sigkill_uncompressed(void)
{
	static struct run r;
	start(&r, "killraw", NULL, zstd_off, 0);
	sleep_ms(3000);
	unsigned long long killed = mono_ns();
	kill(r.pid, SIGKILL);
	finish(&r);
	CU_ASSERT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
	check_killed(&r, r.pid, killed, 0);
}

/* A trace cut inside a record (the writer killed mid-write): report and
 * dump read every record before it, exit 0, and say once where they
 * stopped. Records alone (a cut inside a frame: test_trace_zstd). */
static void test_cut_inside_a_record(void)
{
	static struct run r;
	static struct seen whole, cut;
	static struct kvt_child c;
	start(&r, "cut", NULL, zstd_off, 0);
	sleep_ms(1500);
	kill(r.pid, SIGTERM);             /* a whole trace, with END */
	finish(&r);
	size_t n = 0;
	char *t = kvt_slurp(trace_of(&r, r.pid), &n);
	CU_ASSERT_FATAL(t != NULL && n > 200);
	read_trace(&whole, trace_of(&r, r.pid));
	CU_ASSERT_TRUE(whole.ended);
	const char *path = in_dir("cut.trace");
	FILE *f = fopen(path, "wb");
	CU_ASSERT_FATAL(f != NULL);
	/* the last event cut after 20 of its 64 bytes; what followed it goes */
	size_t keep = whole.last_at + 20;
	CU_ASSERT_FATAL(keep < n);
	CU_ASSERT_EQUAL(fwrite(t, 1, keep, f), keep);
	fclose(f);
	free(t);
	read_trace(&cut, path);
	CU_ASSERT_TRUE(cut.ok);
	CU_ASSERT_TRUE(cut.cut);
	CU_ASSERT_FALSE(cut.ended);
	CU_ASSERT_TRUE(whole.nr_events > 10);
	CU_ASSERT_EQUAL(cut.nr_events, whole.nr_events - 1);

	char where[64];
	snprintf(where, sizeof where, "stopped at byte %llu of %zu", whole.last_at, keep);
	const char *rep[] = { kvt_path("kvtier"), "report", path, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, rep, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(count_lines(c.err, "stopped at byte"), 1);
	CU_ASSERT_EQUAL(count_lines(c.out, "stopped at byte"), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, where));
	char events[64];
	snprintf(events, sizeof events, "; %llu events read before it", cut.nr_events);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, events));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "note: 1 trace file without an end record"));
	const char *dump[] = { kvt_path("kvtier"), "dump", path, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, dump, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(count_lines(c.err, "\n"), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, where));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "\nevent "));   /* (only 64 KiB of it kept) */
}

/* ---- SIGTERM and SIGINT ---- */

/* The flush thread would write only after a minute: what is in the file
 * the signal handler wrote. */
static const char *const no_thread[] = { "KVTIER_TRACE_FLUSH_MS=60000", NULL };

/* Every round the program finished before the signal is in the file. */
static void check_signalled(const struct run *r, int sig)
{
	static struct seen s;
	unsigned long long last, by;
	rounds(r, ~0ull, &last, &by);
	read_trace(&s, trace_of(r, r->pid));
	CU_ASSERT_TRUE(s.ok);
	CU_ASSERT_TRUE(last > 0);
	CU_ASSERT_TRUE(s.nr_events >= 2 * last);
	CU_ASSERT_TRUE(s.nr_events <= 2 * last + 2);
	CU_ASSERT_EQUAL(s.signal, sig);
	CU_ASSERT_TRUE(s.ended);
	CU_ASSERT_EQUAL(s.end_events, s.nr_events);
	if (s.nr_events < 2 * last || s.signal != sig || !s.ended)
		fprintf(stderr, "signal %d: %llu rounds, %llu events, trace.signal=%d, end %d\n",
			sig, last, s.nr_events, s.signal, s.ended);
}

/* SIG_DFL before kvtier: the trace is flushed and ended, and the program
 * still dies of the signal. */
static void test_sigterm_sigint(void)
{
	static const int sigs[] = { SIGTERM, SIGINT };
	for (unsigned i = 0; i < 2; i++) {
		static struct run r;
		start(&r, sigs[i] == SIGTERM ? "term" : "int", NULL, no_thread, 0);
		sleep_ms(1500);
		kill(r.pid, sigs[i]);
		finish(&r);
		CU_ASSERT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == sigs[i]);
		check_signalled(&r, sigs[i]);
	}
}

/* A handler installed before kvtier started (a preloaded library's
 * constructor): kvtier flushes, then hands the signal to it. */
static void test_sigterm_chained(void)
{
	static struct run r;
	char both[1300], err[300];
	snprintf(both, sizeof both, "LD_PRELOAD=%s %s", lib,
		 kvt_path("tests/progs/libsigterm_first.so"));
	const char *env[] = { both, no_thread[0], NULL };
	start(&r, "chain", NULL, env, 0);
	sleep_ms(1500);
	kill(r.pid, SIGTERM);
	finish(&r);
	CU_ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 42);
	snprintf(err, sizeof err, "%s/chain.err", dir);
	char *text = kvt_slurp(err, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_EQUAL(count_lines(text, "libsigterm_first: handler\n"), 1);
	free(text);
	check_signalled(&r, SIGTERM);     /* its _exit ended the trace */
}

/* SIGTERM ignored from the start stays ignored. */
static void test_sigterm_ignored(void)
{
	static struct run r;
	static struct seen s;
	start(&r, "ign", NULL, no_thread, 1);
	sleep_ms(1000);
	kill(r.pid, SIGTERM);
	sleep_ms(300);
	int st;
	CU_ASSERT_EQUAL(waitpid(r.pid, &st, WNOHANG), 0);   /* still running */
	kill(r.pid, SIGKILL);
	finish(&r);
	CU_ASSERT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
	read_trace(&s, trace_of(&r, r.pid));
	CU_ASSERT_TRUE(s.ok);
	CU_ASSERT_EQUAL(s.signal, 0);
}

/* ---- fork ---- */

/* A forked child (no exec) that allocates is a server too: it starts its
 * own flush thread, and its trace survives SIGKILL like its parent's. */
static void test_forked_child_killed(void)
{
	static struct run r;
	const char *san = getenv("SAN");
	if (san && strstr(san, "thread")) {
		/* a TSan build's forked child starts no flush thread
		 * (profiler/trace.c, flusher_fork_child) */
		CU_PASS("skipped under ThreadSanitizer: a forked child has no flush thread there");
		return;
	}
	start(&r, "fork", "fork", zstd_on, 0);
	pid_t child = 0;
	for (int i = 0; i < 200 && !child; i++) {
		sleep_ms(20);
		child = child_of(&r);
	}
	CU_ASSERT_FATAL(child > 0);
	sleep_ms(3000);
	unsigned long long killed = mono_ns();
	kill(child, SIGKILL);
	finish(&r);                       /* the parent ends when its child does */
	CU_ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 128 + SIGKILL);
	check_killed(&r, child, killed, 1);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "SIGKILL 3 s in: every event older than 2 flush intervals", test_sigkill },
		{ "the same, uncompressed", test_sigkill_uncompressed },
		{ "a trace cut inside a record: read to it, one line says where", test_cut_inside_a_record },
		{ "SIGTERM, SIGINT: every event, END, the program dies of it", test_sigterm_sigint },
		{ "SIGTERM with a handler from before kvtier: flushed, then chained", test_sigterm_chained },
		{ "SIGTERM ignored from the start stays ignored", test_sigterm_ignored },
		{ "a forked child's trace survives SIGKILL too", test_forked_child_killed },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "trace_survive", setup, teardown, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
