// SPDX-License-Identifier: MIT
/* CUnit suites for the KV classifier on the shipped allocation sequences
 * (the .txt files in tests/replay, each allocation marked "# expect: kv|other"), the
 * replay text format, and `kvtier replay`. */
#include <errno.h>
#include <glob.h>
#include <stdint.h>

#include "kvt_test.h"
#include "kvtier/policy.h"

/* The tool command is not in libkvtier.a: compile it in. */
#include "../../tools/cmd_replay.c"
#include "../../tools/runs.c"

#define MAX_ALLOCS 4096

static struct kvt_policy pol;
static struct kvt_replay rp;
static struct kvt_replay_alloc table[MAX_ALLOCS];

/* Replays a file into rp; returns the number of events, -1 on error. */
static int replay_path(const char *path, const char *rules)
{
	struct kvt_policy_error err;
	char line[1024];
	int n = 0;
	if (kvt_policy_parse(rules, &pol, &err)) {
		fprintf(stderr, "policy: %s\n", err.msg);
		return -1;
	}
	kvt_replay_init(&rp, &pol, table, MAX_ALLOCS);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	unsigned lineno = 0;
	while (fgets(line, sizeof line, f)) {
		struct kvt_replay_event ev;
		lineno++;
		int rc = kvt_replay_parse_line(line, &ev, &err);
		if (rc < 0) {
			fprintf(stderr, "%s:%u: %s\n", path, lineno, err.msg);
			fclose(f);
			return -1;
		}
		if (rc == 0)
			continue;
		rc = kvt_replay_feed(&rp, &ev);
		if (rc && rc != -ENOENT) {
			fclose(f);
			return -1;
		}
		CU_ASSERT_NOT_EQUAL(rc, -ENOENT);   /* sequences free only live ids */
		n++;
	}
	fclose(f);
	return n;
}

static bool far_now(const struct kvt_replay_alloc *a)
{
	if (a->resolved && a->res.verdict != KVT_VERDICT_LATE)
		return kvt_policy_action_is_far(&a->res.action);
	return kvt_policy_action_is_far(&a->birth.action);
}

/* ---- the shipped sequences -------------------------------------------------- */

static void test_sequences(void)
{
	glob_t g;
	CU_ASSERT_EQUAL_FATAL(glob("tests/replay/*.txt", 0, NULL, &g), 0);
	CU_ASSERT(g.gl_pathc >= 8);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *path = g.gl_pathv[i];
		int n = replay_path(path, KVT_POLICY_DEFAULT_TEXT);
		CU_ASSERT(n > 0);
		if (n <= 0) {
			fprintf(stderr, "%s: replay failed\n", path);
			continue;
		}
		unsigned nr_kv = 0, bad = 0, unmarked = 0;
		for (size_t k = 0; k < rp.nr; k++) {
			const struct kvt_replay_alloc *a = &rp.allocs[k];
			char buf[256];
			if (!a->expect) {
				unmarked++;
				continue;
			}
			bool want_kv = a->expect == KVT_EXPECT_KV;
			bool late = a->resolved && a->res.verdict == KVT_VERDICT_LATE;
			nr_kv += want_kv;
			/* the label: every KV labelled KV, nothing else */
			bool ok = a->kv_final == want_kv;
			/* the placement under the default policy: KV ends on the far
			 * tier (or is reported late), nothing else does */
			if (want_kv)
				ok = ok && (far_now(a) || late);
			else
				ok = ok && !far_now(a);
			if (!ok) {
				kvt_replay_format(&rp, k, buf, sizeof buf);
				fprintf(stderr, "%s: %s (expected %s)\n", path, buf,
					want_kv ? "kv" : "other");
				bad++;
			}
		}
		CU_ASSERT_EQUAL(bad, 0u);
		CU_ASSERT_EQUAL(unmarked, 0u);   /* every allocation carries its truth */
		/* sequences named after a KV-serving server must contain KV */
		bool kv_expected = !strstr(path, "weights-only") && !strstr(path, "training");
		CU_ASSERT_EQUAL(nr_kv > 0, kv_expected);
	}
	globfree(&g);
}

/* Exact shapes: counts of KV and of provisional placements per sequence. */
static void test_sequence_shapes(void)
{
	static const struct { const char *file; unsigned kv, provisional_kv, late; } t[] = {
		{ "tests/replay/vllm-v1-llama3-8b.txt", 32, 1, 0 },
		{ "tests/replay/vllm-v1-llama3-70b.txt", 80, 1, 0 },
		{ "tests/replay/sglang-mha-llama3-8b.txt", 64, 1, 0 },
		{ "tests/replay/sglang-mla-deepseek.txt", 27, 1, 0 },
		{ "tests/replay/trtllm-llama3-8b.txt", 1, 0, 0 },
		{ "tests/replay/llamacpp-8b-q4.txt", 1, 0, 1 },
		/* servers with more than one KV pool (docs/policy.md "Pool sets") */
		{ "tests/replay/trtllm-gemma3-27b-windows.txt", 2, 1, 0 },
		{ "tests/replay/vllm-gptoss-120b-swa.txt", 18, 1, 0 },
		{ "tests/replay/vllm-qwen3-next-hybrid.txt", 12, 1, 0 },
		{ "tests/replay/sglang-qwen3-next-mamba.txt", 26, 3, 0 },
		{ "tests/replay/vllm-dsv32-mla-indexer.txt", 122, 2, 0 },
		{ "tests/replay/sglang-dsv32-nsa.txt", 122, 2, 0 },
		{ "tests/replay/sglang-eagle-draft-apart.txt", 66, 2, 0 },
		{ "tests/replay/llamacpp-gemma3-27b-iswa.txt", 2, 0, 2 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		CU_ASSERT_FATAL(replay_path(t[i].file, KVT_POLICY_DEFAULT_TEXT) > 0);
		unsigned kv = 0, prov = 0, late = 0;
		for (size_t k = 0; k < rp.nr; k++) {
			const struct kvt_replay_alloc *a = &rp.allocs[k];
			kv += a->kv_final;
			prov += a->kv_final && (a->birth.flags & KVT_DEC_PROVISIONAL);
			late += a->resolved && a->res.verdict == KVT_VERDICT_LATE;
		}
		if (kv != t[i].kv || prov != t[i].provisional_kv || late != t[i].late)
			fprintf(stderr, "%s: kv %u prov %u late %u\n", t[i].file, kv, prov, late);
		CU_ASSERT_EQUAL(kv, t[i].kv);
		CU_ASSERT_EQUAL(prov, t[i].provisional_kv);
		CU_ASSERT_EQUAL(late, t[i].late);
	}
	/* TensorRT-LLM's estimation pool: provisional, then refuted, freed */
	CU_ASSERT_FATAL(replay_path("tests/replay/trtllm-llama3-8b.txt", KVT_POLICY_DEFAULT_TEXT) > 0);
	const struct kvt_replay_alloc *est = NULL;
	for (size_t k = 0; k < rp.nr; k++)
		if (rp.allocs[k].size == 2048ull << 20)
			est = &rp.allocs[k];
	CU_ASSERT_PTR_NOT_NULL_FATAL(est);
	CU_ASSERT_TRUE(est->birth.flags & KVT_DEC_PROVISIONAL);
	CU_ASSERT_TRUE(est->resolved);
	CU_ASSERT_EQUAL(est->res.verdict, KVT_VERDICT_REFUTED);
	CU_ASSERT_FALSE(est->kv_final);
	CU_ASSERT_FALSE(est->live);
}

/* llama.cpp with a site rule: the KV buffer is placed at birth. */
static void test_llamacpp_site_rule(void)
{
	CU_ASSERT_FATAL(replay_path("tests/replay/llamacpp-8b-q4.txt",
				    "device,site~*llama_kv_cache* => managed:cxl; * => native") > 0);
	unsigned far = 0;
	for (size_t k = 0; k < rp.nr; k++) {
		const struct kvt_replay_alloc *a = &rp.allocs[k];
		if (kvt_policy_action_is_far(&a->birth.action)) {
			far++;
			CU_ASSERT_EQUAL(a->expect, KVT_EXPECT_KV);
			CU_ASSERT_EQUAL(a->birth.rule, 0);
		}
	}
	CU_ASSERT_EQUAL(far, 1u);
}

static void test_replay_deterministic(void)
{
	static char a[200000], b[200000];
	const char *file = "tests/replay/sglang-mha-llama3-8b.txt";
	for (int pass = 0; pass < 2; pass++) {
		char *out = pass ? b : a;
		size_t n = 0;
		CU_ASSERT_FATAL(replay_path(file, KVT_POLICY_DEFAULT_TEXT) > 0);
		for (size_t k = 0; k < rp.nr && n < sizeof a - 256; k++) {
			n += kvt_replay_format(&rp, k, out + n, sizeof a - n);
			out[n++] = '\n';
		}
		out[n] = 0;
	}
	CU_ASSERT(strlen(a) > 1000);
	CU_ASSERT_STRING_EQUAL(a, b);
}

/* ---- the text format ----------------------------------------------------------- */

static void test_parse_line(void)
{
	struct kvt_replay_event ev;
	struct kvt_policy_error err;
	CU_ASSERT_EQUAL(kvt_replay_parse_line("", &ev, &err), 0);
	CU_ASSERT_EQUAL(kvt_replay_parse_line("   # comment\n", &ev, &err), 0);
	CU_ASSERT_EQUAL(kvt_replay_parse_line("100 malloc 3488M 7  # expect: kv  layer 0\n", &ev, &err), 1);
	CU_ASSERT_EQUAL(ev.op, KVT_RP_ALLOC);
	CU_ASSERT_EQUAL(ev.kind, KVT_KIND_DEVICE);
	CU_ASSERT_EQUAL(ev.size, 3488ull << 20);
	CU_ASSERT_EQUAL(ev.id, 7u);
	CU_ASSERT_TRUE(ev.has_id);
	CU_ASSERT_EQUAL(ev.expect, KVT_EXPECT_KV);
	CU_ASSERT_EQUAL(ev.t_us, 100u);
	CU_ASSERT_EQUAL(kvt_replay_parse_line("5 meminfo 100G 140G", &ev, &err), 1);
	CU_ASSERT_EQUAL(ev.op, KVT_RP_MEMINFO);
	CU_ASSERT_EQUAL(ev.size, 100ull << 30);
	CU_ASSERT_EQUAL(ev.id, 140ull << 30);
	CU_ASSERT_EQUAL(kvt_replay_parse_line("5 host_alloc 4096", &ev, &err), 1);
	CU_ASSERT_EQUAL(ev.kind, KVT_KIND_HOST);
	CU_ASSERT_FALSE(ev.has_id);
	CU_ASSERT_EQUAL(kvt_replay_parse_line("5 mmap 2G 0x7f0000000000 site=foo@libx.so|bar", &ev, &err), 1);
	CU_ASSERT_EQUAL(ev.kind, KVT_KIND_MMAP);
	CU_ASSERT_EQUAL(ev.id, 0x7f0000000000ull);
	CU_ASSERT_STRING_EQUAL(ev.site, "foo@libx.so|bar");
	CU_ASSERT_EQUAL(kvt_replay_parse_line("9 munmap 0 0x7f0000000000", &ev, &err), 1);
	CU_ASSERT_EQUAL(ev.op, KVT_RP_FREE);
	CU_ASSERT_EQUAL(kvt_replay_parse_line("9 launch 0", &ev, &err), 1);
	CU_ASSERT_EQUAL(ev.op, KVT_RP_LAUNCH);

	static const struct { const char *line; unsigned col; const char *what; } bad[] = {
		{ "x malloc 1", 1, "time" },
		{ "1 mallok 1", 3, "unknown op 'mallok'" },
		{ "1 malloc", 9, "expected a size" },
		{ "1 malloc 3Q 1", 10, "expected a size" },
		{ "1 free 0", 9, "expected an id" },
		{ "1 memset 4G", 12, "expected an id" },
		{ "1 meminfo 1G", 13, "expected total bytes" },
		{ "1 malloc 1G 2 3", 15, "unexpected '3'" },
		{ "1 free 0 2 site=x", 12, "only for allocations" },
		{ "1 malloc 1G 2 # expect: maybe", 25, "expected 'kv' or 'other'" },
		{ "1 malloc 1G 0xzz", 13, "expected an id" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = kvt_replay_parse_line(bad[i].line, &ev, &err);
		CU_ASSERT_EQUAL(rc, -EINVAL);
		if (rc != -EINVAL || err.column != bad[i].col || !strstr(err.msg, bad[i].what))
			fprintf(stderr, "'%s': rc %d col %u '%s'\n", bad[i].line, rc,
				err.column, err.msg);
		CU_ASSERT_EQUAL(err.column, bad[i].col);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i].what));
	}
}

static void test_feed_edges(void)
{
	struct kvt_replay_alloc small[2];
	struct kvt_replay_event ev = { .op = KVT_RP_ALLOC, .kind = KVT_KIND_DEVICE, .size = 1 };
	kvt_policy_default(&pol);
	kvt_replay_init(&rp, &pol, small, 2);
	CU_ASSERT_EQUAL(kvt_replay_feed(&rp, &ev), 0);
	CU_ASSERT_EQUAL(kvt_replay_feed(&rp, &ev), 0);
	CU_ASSERT_EQUAL(kvt_replay_feed(&rp, &ev), -ENOSPC);
	CU_ASSERT_NOT_EQUAL(small[0].id, small[1].id);          /* auto ids differ */
	struct kvt_replay_event fr = { .op = KVT_RP_FREE, .id = 12345, .has_id = true };
	CU_ASSERT_EQUAL(kvt_replay_feed(&rp, &fr), -ENOENT);
	fr.id = small[0].id;
	CU_ASSERT_EQUAL(kvt_replay_feed(&rp, &fr), 0);
	CU_ASSERT_FALSE(small[0].live);
	CU_ASSERT_EQUAL(kvt_replay_feed(&rp, &fr), -ENOENT);    /* double free */
}

/* ---- `kvtier replay` ------------------------------------------------------------- */

static int run_in_child(int (*fn)(int, char **), char **argv, char *out, size_t outlen)
{
	int pfd[2], argc = 0;
	while (argv[argc])
		argc++;
	if (pipe(pfd))
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(pfd[0]);
		int rc = fn(argc, argv);
		fflush(NULL);
		_exit(rc);
	}
	close(pfd[1]);
	size_t n = 0;
	ssize_t r;
	while ((r = read(pfd[0], out + n, outlen - 1 - n)) > 0 && n + 1 < outlen)
		n += (size_t)r;
	out[n] = 0;
	close(pfd[0]);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_cmd_replay(void)
{
	static char out[1 << 18];
	char *ok[] = { "replay", "--check", "tests/replay/vllm-v1-llama3-8b.txt", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, ok, out, sizeof out), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "# policy: kv => managed:cxl; * => native"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "175 allocations, 32 kv, 175 expect marks, 0 mismatches"));
	/* one line per allocation: ordinal, kind, size, decision, reason */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "   141 device     3488M  managed:cxl          rule 1, kv  [kv]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "-> confirmed: managed:cxl  [kv]"));

	char tmp[] = "/tmp/kvt-replay-XXXXXX";
	int fd = mkstemp(tmp);
	CU_ASSERT_FATAL(fd >= 0);
	const char *seq = "# a lone weight marked kv: a mismatch\n"
			  "1 meminfo 10G 16G\n2 malloc 4G 1 # expect: kv\n";
	CU_ASSERT_EQUAL((size_t)write(fd, seq, strlen(seq)), strlen(seq));
	close(fd);
	char *mismatch[] = { "replay", "--check", tmp, NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, mismatch, out, sizeof out), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "MISMATCH: expected kv"));
	char *nocheck[] = { "replay", tmp, NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, nocheck, out, sizeof out), 0);
	char *badpol[] = { "replay", "--policy", "kv =>", tmp, NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, badpol, out, sizeof out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "column 6"));
	fd = open(tmp, O_WRONLY | O_TRUNC);
	CU_ASSERT_EQUAL((size_t)write(fd, "1 malloc 1G\n2 frob 1\n", 21), 21u);
	close(fd);
	char *badline[] = { "replay", tmp, NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, badline, out, sizeof out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, ":2: column 3: unknown op 'frob'"));
	unlink(tmp);
	char *missing[] = { "replay", "/nonexistent/seq.txt", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, missing, out, sizeof out), 2);
	char *usage[] = { "replay", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, usage, out, sizeof out), 2);
	char *help[] = { "replay", "--help", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, help, out, sizeof out), 0);

	const char *tool = kvt_path("kvtier");
	if (access(tool, X_OK) == 0) {
		static struct kvt_child c;
		const char *argv[] = { tool, "replay", "--check", "--quiet",
				       "tests/replay/sglang-mla-deepseek.txt", NULL };
		CU_ASSERT_EQUAL(kvt_run(&c, argv, NULL), 0);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "27 kv"));
	}
}

/* A run's directory: each of its traces replayed on its own, in name
 * order, under a "# trace:" line; the worst exit status of them. */
static void test_cmd_replay_run_dir(void)
{
	static char out[1 << 16];
	char dir[] = "/tmp/kvt-replay-run-XXXXXX", a[80], b[80], other[80];
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	snprintf(a, sizeof a, "%s/kvtier-r1.100.trace", dir);
	snprintf(b, sizeof b, "%s/kvtier-r1.101.trace", dir);
	snprintf(other, sizeof other, "%s/notes.txt", dir);
	const char *seq_a = "1 meminfo 10G 16G\n2 malloc 4G 1 # expect: kv\n";
	const char *seq_b = "1 malloc 1G 1 # expect: other\n2 malloc 2G 2\n";
	FILE *f = fopen(a, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs(seq_a, f);
	fclose(f);
	CU_ASSERT_FATAL((f = fopen(b, "w")) != NULL);
	fputs(seq_b, f);
	fclose(f);
	CU_ASSERT_FATAL((f = fopen(other, "w")) != NULL);     /* not a trace: not read */
	fputs("1 frob\n", f);
	fclose(f);
	char *run[] = { "replay", "--check", dir, NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, run, out, sizeof out), 1);   /* a's mark */
	char *pa = strstr(out, "# trace: "), *pb = pa ? strstr(pa + 1, "# trace: ") : NULL;
	CU_ASSERT_PTR_NOT_NULL_FATAL(pb);
	CU_ASSERT(strstr(pa, "kvtier-r1.100.trace") < pb);       /* name order */
	CU_ASSERT_PTR_NOT_NULL(strstr(pb, "kvtier-r1.101.trace"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "# 1 allocations, 0 kv, 1 expect marks, 1 mismatches"));
	CU_ASSERT_PTR_NOT_NULL(strstr(pb, "# 2 allocations, 0 kv, 1 expect marks, 0 mismatches"));
	CU_ASSERT_PTR_NULL(strstr(out, "frob"));
	unlink(a);
	char *one[] = { "replay", "--check", dir, NULL };      /* one trace left: no header */
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, one, out, sizeof out), 0);
	CU_ASSERT_PTR_NULL(strstr(out, "# trace: "));
	unlink(b);
	char *empty[] = { "replay", dir, NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_replay, empty, out, sizeof out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "no trace files in this directory"));
	unlink(other);
	rmdir(dir);
}

static CU_TestInfo seq_tests[] = {
	{ "every shipped sequence matches its expect marks", test_sequences },
	{ "sequence shapes: kv, provisional, late counts", test_sequence_shapes },
	{ "llama.cpp with a site rule", test_llamacpp_site_rule },
	{ "replay is deterministic", test_replay_deterministic },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo format_tests[] = {
	{ "text lines and their errors", test_parse_line },
	{ "feed: table full, unknown ids", test_feed_edges },
	{ "kvtier replay exit status and lines", test_cmd_replay },
	{ "kvtier replay DIR: each trace of the run on its own", test_cmd_replay_run_dir },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	CU_SuiteInfo suites[] = {
		{ "policy_sequences", NULL, NULL, NULL, NULL, seq_tests },
		{ "policy_replay", NULL, NULL, NULL, NULL, format_tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
