// SPDX-License-Identifier: MIT
/* CUnit suites for policy/: the KVTIER_POLICY parser and canonical form,
 * rule matching, budget arithmetic, the decision engine (provisional
 * placement, CXL limit, determinism), the lint and `kvtier policy check`.
 * Replay sequences are checked in test_policy_replay.c. */
#include <errno.h>
#include <stdint.h>

#include "kvt_test.h"
#include "kvtier/policy.h"

/* The tool commands are not in libkvtier.a: compile them in. */
#include "../../tools/cmd_policy.c"

#define K 1024ull
#define M (1024ull * K)
#define G (1024ull * M)

static struct kvt_policy pol, pol2;
static struct kvt_policy_error perr;
static char text[2 * KVT_POLICY_MAX_TEXT];

/* ---- helpers ---------------------------------------------------------- */

static int parse(const char *t)
{
	return kvt_policy_parse(t, &pol, &perr);
}

/* parse(format(parse(t))) == parse(t), and format is a fixed point. */
static void check_roundtrip(const char *t)
{
	char a[2 * KVT_POLICY_MAX_TEXT], b[2 * KVT_POLICY_MAX_TEXT];
	CU_ASSERT_EQUAL_FATAL(kvt_policy_parse(t, &pol, &perr), 0);
	kvt_policy_format(&pol, a, sizeof a);
	if (kvt_policy_parse(a, &pol2, &perr) != 0) {
		fprintf(stderr, "canonical '%s' of '%s' does not parse: %s\n", a, t, perr.msg);
		CU_FAIL("canonical form does not parse");
		return;
	}
	CU_ASSERT_TRUE(kvt_policy_equal(&pol, &pol2));
	kvt_policy_format(&pol2, b, sizeof b);
	CU_ASSERT_STRING_EQUAL(a, b);
}

/* Fenced blocks of docs/policy.md with the given info string. */
static char *docs;
static int docs_init(void)
{
	docs = kvt_slurp("docs/policy.md", NULL);
	return 0;
}
static int docs_fini(void)
{
	free(docs);
	return 0;
}

/* Calls fn(line, ctx) for each line inside ```<tag> blocks; returns count. */
static int each_doc_line(const char *tag, void (*fn)(const char *, void *), void *ctx)
{
	int n = 0, in = 0;
	char open[32];
	snprintf(open, sizeof open, "```%s", tag);
	for (const char *p = docs; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char line[1024];
		snprintf(line, sizeof line, "%.*s", (int)len, p);
		if (!in && !strcmp(line, open))
			in = 1;
		else if (in && !strncmp(line, "```", 3))
			in = 0;
		else if (in && line[0]) {
			fn(line, ctx);
			n++;
		}
		p = nl ? nl + 1 : p + len;
	}
	return n;
}

/* ---- parser ---------------------------------------------------------- */

static void doc_example(const char *line, void *ctx)
{
	(void)ctx;
	if (parse(line) != 0)
		fprintf(stderr, "docs example '%s': %s\n", line, perr.msg);
	CU_ASSERT_EQUAL(parse(line), 0);
	check_roundtrip(line);
}

static void test_docs_examples_parse(void)
{
	CU_ASSERT_PTR_NOT_NULL_FATAL(docs);
	int n = each_doc_line("policy", doc_example, NULL);
	CU_ASSERT(n >= 10);
	/* the issue's own example, and the built-in default */
	doc_example("kv => managed:cxl; device,size>=8G => managed:cxl; host,size>=1G => pinned:cxl; mmap,size>=2G => bind:cxl; * => native", NULL);
	doc_example(KVT_POLICY_DEFAULT_TEXT, NULL);
}

struct err_pair { const char *policy; int n; };
static void doc_error(const char *line, void *ctx)
{
	struct err_pair *e = ctx;
	static char policy[1024];
	if (e->n++ % 2 == 0) {
		snprintf(policy, sizeof policy, "%s", line);
		return;
	}
	CU_ASSERT_EQUAL(parse(policy), -EINVAL);
	if (strcmp(perr.msg, line))
		fprintf(stderr, "policy '%s'\n  got  '%s'\n  want '%s'\n", policy, perr.msg, line);
	CU_ASSERT_STRING_EQUAL(perr.msg, line);
	unsigned col = 0;
	CU_ASSERT_EQUAL(sscanf(line, "column %u:", &col), 1);
	CU_ASSERT_EQUAL(perr.column, col);
}

static void test_docs_errors(void)
{
	struct err_pair e = { 0 };
	CU_ASSERT_PTR_NOT_NULL_FATAL(docs);
	each_doc_line("policy-error", doc_error, &e);
	CU_ASSERT(e.n >= 20);
	CU_ASSERT_EQUAL(e.n % 2, 0);
}

static const struct { const char *in, *canon; } canon_cases[] = {
	{ "kv=>managed:cxl", "kv => managed:cxl" },
	{ "  *  =>  native  ; ", "* => native" },
	{ "size >= 1.5G , device => managed:node=2", "device,size>=1536M => managed:node=2" },
	{ "site~*kv*,size<4096,kv=>managed:hbm", "kv,size<4K,site~*kv* => managed:hbm" },
	{ "after<=8,nth!=1,size>1M,size<=1T=>trace", "size>1M,size<=1T,nth!=1,after<=8 => trace" },
	{ "host|device=>native", "device|host => native" },
	{ "mmap=>interleave:dram=1,cxl=3", "mmap => interleave:dram=1,cxl=3" },
	{ "mmap=>interleave:dram=2,cxl=1,node=3", "mmap => interleave:dram=2,cxl=1,node=3" },
	{ "register=>bind:node=1", "register => bind:node=1" },
	{ "host=>pinned:node=0;host=>pinned:cxl", "host => pinned:node=0; host => pinned:cxl" },
	{ "!kv,async=>native", "async,!kv => native" },
	{ "size==1000=>native", "size==1000 => native" },
	{ "size==8GiB=>native", "size==8G => native" },
	{ "size>=0=>native", "size>=0 => native" },
	{ "size<16T=>native", "size<16T => native" },
	{ "size<2048T=>native", "size<2048T => native" },
};

static void test_canonical(void)
{
	for (size_t i = 0; i < sizeof canon_cases / sizeof canon_cases[0]; i++) {
		CU_ASSERT_EQUAL_FATAL(parse(canon_cases[i].in), 0);
		kvt_policy_format(&pol, text, sizeof text);
		if (strcmp(text, canon_cases[i].canon))
			fprintf(stderr, "'%s' -> '%s' (want '%s')\n",
				canon_cases[i].in, text, canon_cases[i].canon);
		CU_ASSERT_STRING_EQUAL(text, canon_cases[i].canon);
		check_roundtrip(canon_cases[i].in);
	}
	/* a short buffer truncates but reports the needed length */
	char small[8];
	size_t need = kvt_policy_format(&pol, small, sizeof small);
	CU_ASSERT_EQUAL(need, strlen("size<2048T => native"));
	CU_ASSERT_EQUAL(strlen(small), 7u);
}

static const struct { const char *in; unsigned col; const char *what; } err_cases[] = {
	{ "", 1, "policy is empty" },
	{ "   ", 4, "policy is empty" },
	{ "kv", 3, "expected '=>' after selector 'kv'" },
	{ "kv =>", 6, "expected an action" },
	{ "kv => managed", 14, "expected ':' after 'managed'" },
	{ "kv => managed:", 15, "expected hbm, cxl or node=N" },
	{ "kv => managed:node=", 20, "expected a whole number" },
	{ "kv => managed:node=99999", 25, "out of range" },
	{ "host => pinned:hbm", 16, "expected cxl or node=N after 'pinned:'" },
	{ "mmap => interleave:dram=0,cxl=1", 25, "weight must be 1..1000" },
	{ "mmap => interleave:cxl=1", 20, "expected 'dram=W'" },
	{ "size>=99999999999999999999 => native", 7, "too large" },
	{ "size>=20000000T => native", 7, "too large" },
	{ "nth==1.5 => native", 6, "expected a whole number" },
	{ "size~1G => native", 5, "expected a comparison" },
	{ "site => native", 5, "expected '~' after 'site'" },
	{ "site~ => native", 6, "expected a glob" },
	{ "kv,kv => native", 4, "kv given twice" },
	{ "site~a,site~b => native", 8, "only one site~" },
	{ "size>1,size>2,size>3,size>4,size>5 => native", 29, "more than 4 comparisons" },
	{ "device => managed:cxl; host => managed:cxl", 32, "cannot apply to kind host" },
	{ "vmm => managed:hbm", 8, "cannot apply to kind vmm" },
	{ "device|mmap => bind:cxl", 16, "cannot apply to kind device" },
	{ "mmap,kv => native", 1, "'kv' never matches kind mmap" },
	{ "kv => bind:cxl", 7, "cannot apply to kv allocations" },
	{ "* => native; device => hbm", 24, "unknown action 'hbm'" },
	{ "kv => native, trace", 13, "expected ';' or the end" },
	{ "device|gpu => native", 8, "expected a kind" },
	{ "*,kv => native", 2, "expected '=>' after selector '*'" },
};

static void test_errors(void)
{
	for (size_t i = 0; i < sizeof err_cases / sizeof err_cases[0]; i++) {
		int rc = parse(err_cases[i].in);
		CU_ASSERT_EQUAL(rc, -EINVAL);
		if (perr.column != err_cases[i].col || !strstr(perr.msg, err_cases[i].what))
			fprintf(stderr, "'%s': got col %u '%s', want col %u '%s'\n",
				err_cases[i].in, perr.column, perr.msg,
				err_cases[i].col, err_cases[i].what);
		CU_ASSERT_EQUAL(perr.column, err_cases[i].col);
		CU_ASSERT_PTR_NOT_NULL(strstr(perr.msg, err_cases[i].what));
		/* the message starts with its column */
		char want[32];
		snprintf(want, sizeof want, "column %u: ", err_cases[i].col);
		CU_ASSERT_EQUAL(strncmp(perr.msg, want, strlen(want)), 0);
		/* a failed parse leaves no rules behind */
		CU_ASSERT_EQUAL(pol.nr_rules, 0u);
	}
	CU_ASSERT_EQUAL(kvt_policy_parse(NULL, &pol, &perr), -EINVAL);
	CU_ASSERT_EQUAL(kvt_policy_parse("*", &pol, NULL), -EINVAL);  /* NULL err is fine */
}

static void test_limits(void)
{
	/* exactly 64 rules parse; the 65th is an error at its column */
	size_t n = 0;
	text[0] = 0;
	for (int i = 0; i < KVT_POLICY_MAX_RULES; i++)
		n += (size_t)snprintf(text + n, sizeof text - n, "%snth==%d => trace",
				      i ? ";" : "", i + 1);
	CU_ASSERT_EQUAL(parse(text), 0);
	CU_ASSERT_EQUAL(pol.nr_rules, (unsigned)KVT_POLICY_MAX_RULES);
	size_t col65 = n + 2;
	snprintf(text + n, sizeof text - n, ";* => native");
	CU_ASSERT_EQUAL(parse(text), -EINVAL);
	CU_ASSERT_EQUAL(perr.column, (unsigned)col65);
	CU_ASSERT_PTR_NOT_NULL(strstr(perr.msg, "more than 64 rules"));

	/* 4096 characters are fine, 4097 are an error (never truncated) */
	memset(text, ' ', sizeof text);
	memcpy(text, "* => native", 11);
	text[KVT_POLICY_MAX_TEXT] = 0;
	CU_ASSERT_EQUAL(parse(text), 0);
	text[KVT_POLICY_MAX_TEXT] = ' ';
	text[KVT_POLICY_MAX_TEXT + 1] = 0;
	CU_ASSERT_EQUAL(parse(text), -EINVAL);
	CU_ASSERT_EQUAL(perr.column, (unsigned)KVT_POLICY_MAX_TEXT + 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(perr.msg, "longer than 4096"));

	/* the longest glob fits, one more byte does not */
	char glob[KVT_POLICY_MAX_GLOB + 1];
	memset(glob, 'a', sizeof glob);
	glob[KVT_POLICY_MAX_GLOB - 1] = 0;
	snprintf(text, sizeof text, "site~%s => trace", glob);
	CU_ASSERT_EQUAL(parse(text), 0);
	CU_ASSERT_EQUAL(strlen(pol.rule[0].site), (size_t)KVT_POLICY_MAX_GLOB - 1);
	glob[KVT_POLICY_MAX_GLOB - 1] = 'a';
	glob[KVT_POLICY_MAX_GLOB] = 0;
	snprintf(text, sizeof text, "site~%s => trace", glob);
	CU_ASSERT_EQUAL(parse(text), -EINVAL);
}

static void test_default(void)
{
	kvt_policy_default(&pol);
	CU_ASSERT_EQUAL(pol.nr_rules, 2u);
	CU_ASSERT_EQUAL(pol.rule[0].kv, KVT_RULE_KV_YES);
	CU_ASSERT_EQUAL(pol.rule[0].action.type, KVT_ACT_MANAGED);
	CU_ASSERT_EQUAL(pol.rule[0].action.tier, KVT_TIER_CXL);
	CU_ASSERT_TRUE(pol.rule[1].star);
	CU_ASSERT_EQUAL(pol.rule[1].action.type, KVT_ACT_NATIVE);
	CU_ASSERT_FALSE(kvt_policy_needs_site(&pol));
	CU_ASSERT_TRUE(pol.has_kv);
	CU_ASSERT_EQUAL(parse("device,site~x* => trace"), 0);
	CU_ASSERT_TRUE(kvt_policy_needs_site(&pol));
	CU_ASSERT_FALSE(pol.has_kv);
}

/* ---- matching --------------------------------------------------------- */

static struct kvt_policy_query q(uint8_t kind, uint64_t size)
{
	return (struct kvt_policy_query){ .kind = kind, .size = size, .nth = 1 };
}

static void test_first_match_wins(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("kv => managed:cxl; device,size>=8G => managed:node=2; host,size>=1G => pinned:cxl; mmap,size>=2G => bind:cxl; * => native"), 0);
	struct kvt_policy_query a = q(KVT_KIND_DEVICE, 16 * G);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 1);
	CU_ASSERT_EQUAL(pol.rule[1].action.node, 2);
	a.kv = 1;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 0);       /* kv comes first */
	a = q(KVT_KIND_DEVICE, 8 * G - 1);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 4);
	a = q(KVT_KIND_HOST, 1 * G);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 2);
	a = q(KVT_KIND_MMAP, 2 * G);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 3);
	a = q(KVT_KIND_MMAP, 2 * G - 1);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 4);
	a = q(KVT_KIND_VMM, 100 * G);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 4);
	a = q(KVT_KIND_NONE, 1);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), -1);      /* not a kind */
	CU_ASSERT_EQUAL(parse("device => native"), 0);
	a = q(KVT_KIND_HOST, 1);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), -1);      /* nothing matched */
}

/* Each comparison at value-1, value, value+1 (value = 8G):
 *          <   <=  >   >=  ==  !=
 *   v-1    1   1   0   0   0   1
 *   v      0   1   0   1   1   0
 *   v+1    0   0   1   1   0   1                                        */
static void test_size_boundaries(void)
{
	static const struct { const char *op; int at[3]; } t[] = {
		{ "<", { 1, 0, 0 } }, { "<=", { 1, 1, 0 } }, { ">", { 0, 0, 1 } },
		{ ">=", { 0, 1, 1 } }, { "==", { 0, 1, 0 } }, { "!=", { 1, 0, 1 } },
	};
	for (size_t i = 0; i < 6; i++) {
		snprintf(text, sizeof text, "size%s8G => trace", t[i].op);
		CU_ASSERT_EQUAL_FATAL(parse(text), 0);
		for (int d = -1; d <= 1; d++) {
			struct kvt_policy_query a = q(KVT_KIND_DEVICE, 8 * G + (uint64_t)(int64_t)d);
			int want = t[i].at[d + 1] ? 0 : -1;
			CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), want);
		}
	}
	/* edge values: 0 and UINT64_MAX */
	CU_ASSERT_EQUAL_FATAL(parse("size==0 => trace; size>=16383T => native"), 0);
	struct kvt_policy_query a = q(KVT_KIND_HOST, 0);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 0);
	a.size = UINT64_MAX;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 1);
}

static void test_kinds_and_implicit_filter(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("size>=2G => managed:cxl; size>=2G => bind:node=1; size>=2G => pinned:cxl; * => trace"), 0);
	static const struct { uint8_t kind; int rule; } t[] = {
		{ KVT_KIND_DEVICE, 0 }, { KVT_KIND_ASYNC, 0 }, { KVT_KIND_MANAGED, 0 },
		{ KVT_KIND_MMAP, 1 }, { KVT_KIND_REGISTER, 1 }, { KVT_KIND_HOST, 2 },
		{ KVT_KIND_VMM, 3 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		struct kvt_policy_query a = q(t[i].kind, 4 * G);
		CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), t[i].rule);
	}
	CU_ASSERT_EQUAL(pol.rule[1].action.tier, KVT_TIER_NODE);
	CU_ASSERT_EQUAL(pol.rule[1].action.node, 1);
	CU_ASSERT_EQUAL(kvt_policy_action_placement(&pol.rule[0].action), KVT_PLACE_MANAGED_FAR);
	CU_ASSERT_EQUAL(kvt_policy_action_placement(&pol.rule[1].action), KVT_PLACE_BIND_FAR);
	CU_ASSERT_EQUAL(kvt_policy_action_placement(&pol.rule[2].action), KVT_PLACE_PINNED_FAR);
	CU_ASSERT_EQUAL(kvt_policy_action_placement(&pol.rule[3].action), KVT_PLACE_NATIVE);
	CU_ASSERT_EQUAL(parse("device|async => managed:hbm"), 0);
	CU_ASSERT_EQUAL(kvt_policy_action_placement(&pol.rule[0].action), KVT_PLACE_MANAGED_HBM);
	CU_ASSERT_FALSE(kvt_policy_action_is_far(&pol.rule[0].action));
	struct kvt_policy_query a = q(KVT_KIND_ASYNC, 1);
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 0);
	a.kind = KVT_KIND_MANAGED;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), -1);
}

static void test_kv_nth_after(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("device,!kv,nth==3 => managed:hbm; kv => managed:node=2; device,after>=1,after<=2 => trace; * => native"), 0);
	struct kvt_policy_query a = q(KVT_KIND_DEVICE, 1 * G);
	a.nth = 3;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 0);
	a.kv = 1;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 1);
	a.kv = 0;
	a.nth = 4;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 3);   /* after 0: no meminfo yet */
	a.after = 1;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 2);
	a.after = 2;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 2);
	a.after = 3;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 3);
	/* after==0 never matches, even written explicitly */
	CU_ASSERT_EQUAL_FATAL(parse("after==0 => trace"), 0);
	a.after = 0;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), -1);
}

struct frames {
	const char *sym[4], *mod[4];
	unsigned nr, calls;
};

static int frames_cb(void *ctx, unsigned i, const char **sym, const char **mod)
{
	struct frames *f = ctx;
	f->calls++;
	if (i >= f->nr)
		return -1;
	*sym = f->sym[i];
	*mod = f->mod[i];
	return 0;
}

static void test_site(void)
{
	struct frames f = {
		.sym = { "ggml_backend_cuda_buffer_type_alloc_buffer",
			 "_ZN14llama_kv_cacheC2ERK11llama_model", NULL },
		.mod = { "/usr/lib/libggml-cuda.so", "/opt/llama/lib/libllama.so",
			 "/usr/lib/x86_64-linux-gnu/libc10_cuda.so" },
		.nr = 3,
	};
	CU_ASSERT_EQUAL_FATAL(parse("host,site~* => trace; device,size>=1G,site~*llama_kv_cache* => managed:cxl; site~libc10_cuda.so => managed:hbm; site~/usr/* => trace; * => native"), 0);
	CU_ASSERT_TRUE(kvt_policy_needs_site(&pol));
	struct kvt_policy_query a = q(KVT_KIND_DEVICE, 4 * G);
	a.site = frames_cb;
	a.site_ctx = &f;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 1);
	/* rule 0 is skipped on its kind before any symbolisation */
	CU_ASSERT_EQUAL(f.calls, 2u);
	/* a small allocation fails size first: rule 1 costs no frames */
	f.calls = 0;
	a.size = 1 * M;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 2);     /* module basename */
	CU_ASSERT_EQUAL(f.calls, 3u);                       /* rule 1 none; rule 2 3 frames */
	f.sym[1] = "llama_model::load_tensors";
	f.mod[2] = "/usr/lib/libcudart.so";
	a.size = 4 * G;
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 4);     /* basename, not path: the /usr glob fails */
	a.site = NULL;                                       /* no call site: site~ never matches */
	f.sym[1] = "_ZN14llama_kv_cacheC2ERK11llama_model";
	CU_ASSERT_EQUAL(kvt_policy_match(&pol, &a), 4);
}

static void test_glob(void)
{
	static const struct { const char *pat, *s; bool m; } t[] = {
		{ "*", "", true }, { "*", "abc", true }, { "", "", true }, { "", "a", false },
		{ "a*c", "abbbc", true }, { "a*c", "abbb", false }, { "?b", "ab", true },
		{ "?b", "b", false }, { "*kv*", "llama_kv_cache", true },
		{ "lib*.so", "libllama.so", true }, { "lib*.so", "libllama.so.1", false },
		{ "lib*.so*", "libllama.so.1", true }, { "[a-c]x", "bx", true },
		{ "[a-c]x", "dx", false }, { "[!a-c]x", "dx", true }, { "[!a-c]x", "ax", false },
		{ "[xyz]", "y", true }, { "[]]", "]", true }, { "[a", "[a", true },
		{ "a*b*c*d", "aXbXcXd", true }, { "a*b*c*d", "aXbXcX", false },
		{ "**a", "bba", true },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		bool m = kvt_policy_glob(t[i].pat, t[i].s);
		if (m != t[i].m)
			fprintf(stderr, "glob '%s' '%s' = %d\n", t[i].pat, t[i].s, m);
		CU_ASSERT_EQUAL(m, t[i].m);
	}
}

/* ---- lint ------------------------------------------------------------ */

/* Each case: rules, then the findings as "kind:rule[:by,by...]" joined by
 * spaces (rules from 0; S shadowed, N never, G glob), "" for none. */
static const struct { const char *rules, *want; } lint_cases[] = {
	/* clean: the default, the example, disjoint or wider-later rules */
	{ KVT_POLICY_DEFAULT_TEXT, "" },
	{ "kv => managed:cxl; device,size>=8G => managed:cxl; host,size>=1G => pinned:cxl; "
	  "mmap,size>=2G => bind:cxl; * => native", "" },
	{ "size>=2G => native; size>=1G => trace", "" },
	{ "size!=4K => native; size>=4K => trace", "" },
	{ "* => managed:cxl; host => native", "" },          /* managed never serves host */
	{ "!kv,device => native; device => trace", "" },    /* device can be kv */
	{ "after>=1 => native; * => trace", "" },           /* after is 0 before a meminfo */
	{ "site~foo => native; * => trace", "" },
	{ "site~foo* => native; site~foobar => trace", "" }, /* glob containment: not decided */
	{ "size<1G => native; size>=1G => trace; * => native", "" },  /* a union of sizes: not decided */
	{ "site~[]] => native; site~[!a-c]x => trace; site~lib[0-9]*.so => trace", "" },
	/* shadowed by one earlier rule */
	{ "* => native; kv => managed:cxl", "S:1:0" },
	{ "host => native; host,size>1G => pinned:cxl", "S:1:0" },
	{ "size>=1G => native; size>=2G => trace", "S:1:0" },
	{ "size!=4K => native; size>=8K => trace", "S:1:0" },
	{ "size>=1G,size<=4G => native; size==2G => trace", "S:1:0" },
	{ "* => managed:cxl; device => native", "S:1:0" },
	{ "nth>=1 => native; * => trace", "S:1:0" },        /* nth counts from 1 */
	{ "* => native; after>=5 => trace", "S:1:0" },
	{ "!kv,host => native; host => trace", "S:1:0" },   /* host is never kv */
	{ "site~*llama* => native; device,site~*llama* => trace", "S:1:0" },
	{ "site~** => native; site~foo => trace", "S:1:0" },
	{ "device|host => trace; device,kv => managed:cxl; * => native", "S:1:0" },
	/* shadowed by several: each kind x kv cell has its cover */
	{ "kv => managed:cxl; !kv => native; * => trace", "S:2:0,1" },
	{ "device|async|managed|vmm => native; host|register|mmap => trace; size>=1G => native",
	  "S:2:0,1" },
	/* never: comparisons that admit no value */
	{ "size>2G,size<1G => native; * => trace", "N:0" },
	{ "nth<1 => native", "N:0" },
	{ "after<1 => native", "N:0" },
	{ "size<0 => native", "N:0" },
	{ "size==4K,size!=4K => native", "N:0" },
	/* globs: unterminated '[', only reversed ranges, a path */
	{ "site~foo[ => native", "G:0" },
	{ "site~[z-a]x => native", "G:0" },
	{ "site~/usr/lib/* => native", "G:0" },
	{ "* => native; site~foo[ => trace", "G:1" },       /* a bad glob: no shadow claim */
	{ "site~[z-a],size<0 => native", "G:0 N:0" },
};

static void test_lint(void)
{
	for (size_t c = 0; c < sizeof lint_cases / sizeof lint_cases[0]; c++) {
		CU_ASSERT_EQUAL_FATAL(parse(lint_cases[c].rules), 0);
		struct kvt_policy_lint l[2 * KVT_POLICY_MAX_RULES];
		unsigned n = kvt_policy_lint(&pol, l, 2 * KVT_POLICY_MAX_RULES);
		char got[256] = "";
		size_t w = 0;
		for (unsigned i = 0; i < n; i++) {
			w += (size_t)snprintf(got + w, sizeof got - w, "%s%c:%u", i ? " " : "",
					      " SNG"[l[i].kind], l[i].rule);
			for (unsigned j = 0, k = 0; j < 64; j++)
				if (l[i].by_mask >> j & 1)
					w += (size_t)snprintf(got + w, sizeof got - w, "%c%u",
							      k++ ? ',' : ':', j);
			CU_ASSERT(l[i].msg[0] != 0);
		}
		if (strcmp(got, lint_cases[c].want))
			fprintf(stderr, "\n  lint '%s': got '%s', want '%s'", lint_cases[c].rules,
				got, lint_cases[c].want);
		CU_ASSERT_STRING_EQUAL(got, lint_cases[c].want);
	}
	/* messages say why; max bounds what is stored, not the count */
	CU_ASSERT_EQUAL_FATAL(parse("size>=1G => native; size>=2G => trace; site~a[ => native"), 0);
	struct kvt_policy_lint one[1];
	CU_ASSERT_EQUAL(kvt_policy_lint(&pol, one, 1), 2u);
	CU_ASSERT_EQUAL(one[0].kind, KVT_LINT_SHADOWED);
	CU_ASSERT_STRING_EQUAL(one[0].msg, "earlier rule 1 matches every allocation it does");
	CU_ASSERT_EQUAL(parse("site~a[ => native"), 0);
	CU_ASSERT_EQUAL(kvt_policy_lint(&pol, one, 1), 1u);
	CU_ASSERT_PTR_NOT_NULL(strstr(one[0].msg, "'[' at character 2 is not closed"));
}

/* ---- budgets --------------------------------------------------------- */

static void test_budget_tables(void)
{
	static const struct { uint64_t free, reserve, want; } hbm[] = {
		{ 80 * G, 1 * G, 79 * G }, { 1 * G, 1 * G, 0 }, { 512 * M, 1 * G, 0 },
		{ 0, 0, 0 }, { UINT64_MAX, 0, UINT64_MAX }, { 141 * G, 141 * G - 1, 1 },
	};
	for (size_t i = 0; i < sizeof hbm / sizeof hbm[0]; i++)
		CU_ASSERT_EQUAL(kvt_policy_budget_default_hbm(hbm[i].free, hbm[i].reserve), hbm[i].want);

	/* far share of an interleave: ceil(bytes * cxl / (dram + cxl)) */
	static const struct { uint16_t d, c; uint64_t bytes, want; } il[] = {
		{ 1, 1, 10, 5 }, { 1, 3, 10, 8 }, { 3, 1, 10, 3 }, { 1, 1, 11, 6 },
		{ 1000, 1, 1000, 1 }, { 1, 1000, 1001, 1000 }, { 1, 3, 1ull << 62, 3ull << 60 },
		{ 7, 9, UINT64_MAX, (UINT64_MAX / 16) * 9 + (UINT64_MAX % 16 * 9 + 15) / 16 },
	};
	for (size_t i = 0; i < sizeof il / sizeof il[0]; i++) {
		struct kvt_policy_action a = { .type = KVT_ACT_INTERLEAVE, .tier = KVT_TIER_CXL,
					       .w_dram = il[i].d, .w_cxl = il[i].c, .node = -1 };
		CU_ASSERT_EQUAL(kvt_policy_budget_far_bytes(&a, il[i].bytes), il[i].want);
	}
	struct kvt_policy_action far = { .type = KVT_ACT_MANAGED, .tier = KVT_TIER_CXL, .node = -1 };
	struct kvt_policy_action hbm_a = { .type = KVT_ACT_MANAGED, .tier = KVT_TIER_HBM, .node = -1 };
	struct kvt_policy_action node = { .type = KVT_ACT_BIND, .tier = KVT_TIER_NODE, .node = 3 };
	CU_ASSERT_EQUAL(kvt_policy_budget_far_bytes(&far, 5 * G), 5 * G);
	CU_ASSERT_EQUAL(kvt_policy_budget_far_bytes(&node, 5 * G), 5 * G);
	CU_ASSERT_EQUAL(kvt_policy_budget_far_bytes(&hbm_a, 5 * G), 0u);

	/* CXL limit: charges up to the limit exactly; one byte over is refused
	 *   limit 10G:  [4G][4G][2G] = 10G  ok;  +1 -> -ENOSPC;  release 4G; +3G ok */
	struct kvt_policy_budget b;
	kvt_policy_budget_init(&b, 0, 10 * G, 1 * G);
	CU_ASSERT_EQUAL(kvt_policy_budget_charge(&b, 4 * G), 0);
	CU_ASSERT_EQUAL(kvt_policy_budget_charge(&b, 4 * G), 0);
	CU_ASSERT_EQUAL(kvt_policy_budget_charge(&b, 2 * G), 0);
	CU_ASSERT_EQUAL(b.cxl_used_bytes, 10 * G);
	CU_ASSERT_EQUAL(kvt_policy_budget_charge(&b, 1), -ENOSPC);
	CU_ASSERT_EQUAL(b.cxl_used_bytes, 10 * G);
	kvt_policy_budget_release(&b, 4 * G);
	CU_ASSERT_EQUAL(kvt_policy_budget_charge(&b, 3 * G), 0);
	CU_ASSERT_EQUAL(b.cxl_used_bytes, 9 * G);
	CU_ASSERT_EQUAL(kvt_policy_budget_charge(&b, 11 * G), -ENOSPC);
	CU_ASSERT_EQUAL(kvt_policy_budget_charge(&b, UINT64_MAX), -ENOSPC);
	kvt_policy_budget_release(&b, 100 * G);                /* saturates */
	CU_ASSERT_EQUAL(b.cxl_used_bytes, 0u);
	/* unlimited */
	kvt_policy_budget_init(&b, 0, 0, 0);
	CU_ASSERT_EQUAL(kvt_policy_budget_charge(&b, 1ull << 62), 0);
	CU_ASSERT_EQUAL(kvt_policy_budget_charge(&b, 1ull << 62), 0);

	/* derived HBM budget: once, at the first KV start; explicit wins */
	kvt_policy_budget_init(&b, 0, 0, 2 * G);
	CU_ASSERT_FALSE(b.hbm_derived);
	kvt_policy_budget_kv_start(&b, 100 * G);
	CU_ASSERT_EQUAL(b.hbm_budget_bytes, 98 * G);
	kvt_policy_budget_kv_start(&b, 10 * G);
	CU_ASSERT_EQUAL(b.hbm_budget_bytes, 98 * G);
	CU_ASSERT_EQUAL(b.kv_start_free_bytes, 100 * G);       /* the first one is kept */
	kvt_policy_budget_init(&b, 40 * G, 0, 2 * G);
	kvt_policy_budget_kv_start(&b, 100 * G);
	CU_ASSERT_EQUAL(b.hbm_budget_bytes, 40 * G);
	CU_ASSERT_EQUAL(b.kv_start_free_bytes, 100 * G);       /* recorded when explicit too */
	/* a device smaller than the reserve: budget 0, free at KV start kept
	 * (the migrator's fallback budget starts from it) */
	kvt_policy_budget_init(&b, 0, 0, 1 * G);
	kvt_policy_budget_kv_start(&b, G / 2);
	CU_ASSERT_EQUAL(b.hbm_budget_bytes, 0u);
	CU_ASSERT_EQUAL(b.kv_start_free_bytes, G / 2);

	/* watermarks in basis points */
	uint64_t hi, lo;
	kvt_policy_budget_init(&b, 100 * G, 0, 0);
	kvt_policy_budget_watermarks(&b, 9500, 9000, &hi, &lo);
	CU_ASSERT_EQUAL(hi, 95 * G);
	CU_ASSERT_EQUAL(lo, 90 * G);
	kvt_policy_budget_watermarks(&b, 9000, 9500, &hi, &lo);  /* low capped at high */
	CU_ASSERT_EQUAL(lo, hi);
	kvt_policy_budget_watermarks(&b, 20000, 0, &hi, &lo);    /* capped at 100% */
	CU_ASSERT_EQUAL(hi, 100 * G);
	CU_ASSERT_EQUAL(lo, 0u);
	kvt_policy_budget_init(&b, UINT64_MAX, 0, 0);
	kvt_policy_budget_watermarks(&b, 10000, 5000, &hi, &lo);
	CU_ASSERT_EQUAL(hi, UINT64_MAX);
	CU_ASSERT_EQUAL(lo, UINT64_MAX / 2);
}

/* ---- engine ----------------------------------------------------------- */

static struct kvt_policy_engine eng;
static uint64_t now_ns;

static struct kvt_policy_decision alloc(uint8_t kind, uint64_t size, uint64_t id,
					struct kvt_policy_resolutions *res)
{
	struct kvt_policy_decision d;
	struct kvt_policy_alloc_event a = { .kind = kind, .size = size,
					    .t_ns = now_ns += 1000, .id = id };
	memset(res, 0, sizeof *res);
	kvt_policy_on_alloc(&eng, &a, &d, res);
	return d;
}

/* weights, then the arming meminfo */
static void warm_up(uint64_t free_bytes)
{
	struct kvt_policy_resolutions res;
	for (uint64_t i = 0; i < 10; i++)
		alloc(KVT_KIND_DEVICE, (100 + i) * M, 1000 + i, &res);
	kvt_policy_on_meminfo(&eng, free_bytes, 140 * G, now_ns += 1000, &res);
}

/* A maybe-KV allocation that a non-KV rule sends where the KV rule would
 * (here both managed:cxl): placed there at once, no provisional HBM stay
 * (seen on an H200: an 8 GiB llama.cpp-like KV stayed managed:hbm for
 * good, as a small share of a big card is never confirmed as KV). */
static void test_engine_maybe_same_action(void)
{
	struct kvt_policy_resolutions res;
	CU_ASSERT_EQUAL_FATAL(parse("kv => managed:cxl; device,size>=2G => managed:cxl; * => native"), 0);
	kvt_policy_engine_init(&eng, &pol, NULL, 0, 0, 1 * G);
	warm_up(100 * G);
	struct kvt_policy_decision d = alloc(KVT_KIND_DEVICE, 3 * G, 1, &res);
	CU_ASSERT_TRUE(d.flags & KVT_DEC_MAYBE);
	CU_ASSERT_FALSE(d.flags & KVT_DEC_PROVISIONAL);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_RULE);
	CU_ASSERT_EQUAL(d.rule, 1);
	CU_ASSERT_EQUAL(d.action.type, KVT_ACT_MANAGED);
	CU_ASSERT_EQUAL(d.action.tier, KVT_TIER_CXL);
	CU_ASSERT_EQUAL(d.far_bytes, 3 * G);
	/* a different action for the non-KV match: still provisional */
	CU_ASSERT_EQUAL_FATAL(parse("kv => managed:cxl; device,size>=2G => native; * => native"), 0);
	kvt_policy_engine_init(&eng, &pol, NULL, 0, 0, 1 * G);
	warm_up(100 * G);
	d = alloc(KVT_KIND_DEVICE, 3 * G, 1, &res);
	CU_ASSERT_TRUE(d.flags & KVT_DEC_PROVISIONAL);
	CU_ASSERT_EQUAL(d.action.tier, KVT_TIER_HBM);
}

static void test_engine_provisional_confirmed(void)
{
	struct kvt_policy_resolutions res;
	CU_ASSERT_EQUAL_FATAL(parse(KVT_POLICY_DEFAULT_TEXT), 0);
	kvt_policy_engine_init(&eng, &pol, NULL, 0, 0, 1 * G);
	warm_up(100 * G);
	/* first member of an armed burst: provisional managed:hbm */
	struct kvt_policy_decision d = alloc(KVT_KIND_DEVICE, 3 * G, 1, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_PROVISIONAL);
	CU_ASSERT_TRUE(d.flags & KVT_DEC_PROVISIONAL);
	CU_ASSERT_TRUE(d.flags & KVT_DEC_MAYBE);
	CU_ASSERT_EQUAL(d.action.type, KVT_ACT_MANAGED);
	CU_ASSERT_EQUAL(d.action.tier, KVT_TIER_HBM);
	CU_ASSERT_EQUAL(d.far_bytes, 0u);
	CU_ASSERT_EQUAL(res.nr, 0u);
	/* the KV start fixed the HBM budget: free - reserve */
	CU_ASSERT_EQUAL(eng.budget.hbm_budget_bytes, 99 * G);
	/* second member, still unsure (no zero fill) */
	d = alloc(KVT_KIND_DEVICE, 3 * G, 2, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_PROVISIONAL);
	/* third member confirms the burst: KV at birth, earlier two re-homed */
	d = alloc(KVT_KIND_DEVICE, 3 * G, 3, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_RULE);
	CU_ASSERT_TRUE(d.flags & KVT_DEC_KV);
	CU_ASSERT_EQUAL(d.rule, 0);
	CU_ASSERT_EQUAL(d.action.tier, KVT_TIER_CXL);
	CU_ASSERT_EQUAL(d.far_bytes, 3 * G);
	CU_ASSERT_EQUAL_FATAL(res.nr, 2u);
	for (unsigned i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(res.r[i].id, i + 1);
		CU_ASSERT_EQUAL(res.r[i].verdict, KVT_VERDICT_CONFIRMED);
		CU_ASSERT_EQUAL(res.r[i].reason, KVT_REASON_CONFIRMED);
		CU_ASSERT_EQUAL(res.r[i].action.type, KVT_ACT_MANAGED);
		CU_ASSERT_EQUAL(res.r[i].action.tier, KVT_TIER_CXL);
		CU_ASSERT_EQUAL(res.r[i].far_bytes, 3 * G);
	}
	CU_ASSERT_EQUAL(eng.budget.cxl_used_bytes, 9 * G);
	CU_ASSERT_EQUAL(eng.nr_pending, 0u);
	/* a different size ends the burst: not KV, native */
	d = alloc(KVT_KIND_DEVICE, 64 * M, 4, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_RULE);
	CU_ASSERT_EQUAL(d.rule, 1);
	CU_ASSERT_EQUAL(d.action.type, KVT_ACT_NATIVE);
	/* frees give the far bytes back */
	kvt_policy_on_free(&eng, 3, 3 * G, now_ns, &res);
	CU_ASSERT_EQUAL(eng.budget.cxl_used_bytes, 6 * G);
}

static void test_engine_zero_fill_and_refute(void)
{
	struct kvt_policy_resolutions res;
	CU_ASSERT_EQUAL_FATAL(parse(KVT_POLICY_DEFAULT_TEXT), 0);
	kvt_policy_engine_init(&eng, &pol, NULL, 0, 0, 0);
	warm_up(100 * G);
	/* one zero-filled member of >= 10% of free memory confirms at once */
	struct kvt_policy_decision d = alloc(KVT_KIND_DEVICE, 12 * G, 7, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_PROVISIONAL);
	kvt_policy_on_memset(&eng, 7, 0, 12 * G - 1, 0, now_ns, &res);
	CU_ASSERT_EQUAL(res.nr, 0u);                          /* not the whole range */
	kvt_policy_on_memset(&eng, 7, 0, 12 * G, 1, now_ns, &res);
	CU_ASSERT_EQUAL(res.nr, 0u);                          /* not zero */
	kvt_policy_on_memset(&eng, 7, 0, 12 * G, 0, now_ns, &res);
	CU_ASSERT_EQUAL_FATAL(res.nr, 1u);
	CU_ASSERT_EQUAL(res.r[0].verdict, KVT_VERDICT_CONFIRMED);
	CU_ASSERT_EQUAL(res.r[0].action.tier, KVT_TIER_CXL);

	/* a fresh engine: a different size joins the armed burst (a pool set
	 * of up to KVT_POLICY_BURST_SIZES sizes), no verdict yet */
	kvt_policy_engine_init(&eng, &pol, NULL, 0, 0, 0);
	warm_up(100 * G);
	d = alloc(KVT_KIND_DEVICE, 2 * G, 8, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_PROVISIONAL);
	d = alloc(KVT_KIND_DEVICE, 1 * G, 9, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_PROVISIONAL);
	CU_ASSERT_EQUAL(res.nr, 0u);
	/* refuted by a free (KV is never freed early): that size only */
	kvt_policy_on_free(&eng, 9, 0, now_ns, &res);
	CU_ASSERT_EQUAL_FATAL(res.nr, 1u);
	CU_ASSERT_EQUAL(res.r[0].id, 9u);
	CU_ASSERT_EQUAL(res.r[0].verdict, KVT_VERDICT_REFUTED);
	CU_ASSERT_EQUAL(res.r[0].reason, KVT_REASON_REFUTED);
	CU_ASSERT_EQUAL(res.r[0].action.tier, KVT_TIER_HBM);  /* stays managed:hbm */
	/* three more sizes join; a fifth ends the burst: all of it refuted */
	alloc(KVT_KIND_DEVICE, 5 * G, 10, &res);
	alloc(KVT_KIND_DEVICE, 6 * G, 11, &res);
	d = alloc(KVT_KIND_DEVICE, 7 * G, 17, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_PROVISIONAL);
	CU_ASSERT_EQUAL(res.nr, 0u);
	d = alloc(KVT_KIND_DEVICE, 8 * G, 18, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_PROVISIONAL);    /* still armed: 2nd burst */
	CU_ASSERT_EQUAL_FATAL(res.nr, 4u);
	for (unsigned i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(res.r[i].verdict, KVT_VERDICT_REFUTED);
	CU_ASSERT_EQUAL(res.r[0].id, 8u);
	CU_ASSERT_EQUAL(res.r[3].id, 17u);
	/* third armed burst, then the arming is spent */
	kvt_policy_on_free(&eng, 18, 0, now_ns, &res);
	d = alloc(KVT_KIND_DEVICE, 5 * G, 19, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_PROVISIONAL);
	kvt_policy_on_free(&eng, 19, 0, now_ns, &res);
	d = alloc(KVT_KIND_DEVICE, 6 * G, 20, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_RULE);
	CU_ASSERT_FALSE(d.flags & (KVT_DEC_MAYBE | KVT_DEC_KV));
	/* small allocations while armed neither join nor end a burst */
	kvt_policy_on_meminfo(&eng, 100 * G, 140 * G, now_ns, &res);
	d = alloc(KVT_KIND_DEVICE, 4 * G, 12, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_PROVISIONAL);
	d = alloc(KVT_KIND_DEVICE, 100 * M, 13, &res);        /* < free/512 */
	CU_ASSERT_EQUAL(res.nr, 0u);
	CU_ASSERT_FALSE(d.flags & KVT_DEC_MAYBE);
	d = alloc(KVT_KIND_HOST, 4 * G, 14, &res);            /* other kinds too */
	d = alloc(KVT_KIND_DEVICE, 4 * G, 15, &res);
	d = alloc(KVT_KIND_DEVICE, 4 * G, 16, &res);
	CU_ASSERT_TRUE(d.flags & KVT_DEC_KV);
	CU_ASSERT_EQUAL(res.nr, 2u);
}

/* A confirmed burst whose members are zero-filled synchronously, each fill
 * slower than the burst gap (fault admission pulling a far tensor through
 * HBM, paced): the gap counts from the end of a memset of the whole last
 * member, so every member stays KV. The same gaps with a partial memset of
 * the member, or a memset of another allocation, end the burst.
 * mode 2: whole fills; 1: partial fills; 0: another allocation's memset. */
static void test_engine_slow_fill_keeps_burst(void)
{
	struct kvt_policy_resolutions res;
	const uint64_t gap = 5000000000ull;
	for (int mode = 2; mode >= 0; mode--) {
		CU_ASSERT_EQUAL_FATAL(parse(KVT_POLICY_DEFAULT_TEXT), 0);
		kvt_policy_engine_init(&eng, &pol, NULL, 0, 0, 0);
		warm_up(100 * G);
		for (uint64_t id = 20; id < 26; id++) {
			struct kvt_policy_decision d = alloc(KVT_KIND_DEVICE, 3 * G, id, &res);
			if (id == 20 || mode == 2)
				CU_ASSERT_TRUE(d.flags & (KVT_DEC_KV | KVT_DEC_MAYBE));
			if (id >= 22 && mode == 2)
				CU_ASSERT_TRUE(d.flags & KVT_DEC_KV);
			/* 6 s apart otherwise: each a burst of its own, never
			 * confirmed; the arming (3 bursts) is spent after 22 */
			if (mode < 2)
				CU_ASSERT_FALSE(d.flags & KVT_DEC_KV);
			if (id > 22 && mode < 2)
				CU_ASSERT_FALSE(d.flags & KVT_DEC_MAYBE);
			now_ns += gap - gap / 5;                /* the fill: 4 s */
			if (mode == 2)
				kvt_policy_on_memset(&eng, id, 0, 3 * G, 0, now_ns, &res);
			else if (mode == 1)
				kvt_policy_on_memset(&eng, id, 1 * G, 2 * G, 0, now_ns, &res);
			else
				kvt_policy_on_memset(&eng, 1000, 0, 100 * M, 0, now_ns, &res);
			now_ns += gap / 5 * 2;                  /* then 2 s to the next */
		}
	}
}

static void test_engine_pool_and_limit(void)
{
	struct kvt_policy_resolutions res;
	CU_ASSERT_EQUAL_FATAL(parse("kv => managed:cxl; device,size>=1G => managed:node=1; * => native"), 0);
	kvt_policy_engine_init(&eng, &pol, NULL, 0, 50 * G, 0);
	/* no KV yet: rule 1 places on node 1, charged */
	struct kvt_policy_decision d = alloc(KVT_KIND_DEVICE, 30 * G, 1, &res);
	CU_ASSERT_EQUAL(d.rule, 1);
	CU_ASSERT_EQUAL(d.action.node, 1);
	CU_ASSERT_EQUAL(d.far_bytes, 30 * G);
	kvt_policy_on_meminfo(&eng, 100 * G, 140 * G, now_ns, &res);
	/* one pool of >= 40% of free memory: KV at birth, but past the limit */
	d = alloc(KVT_KIND_DEVICE, 40 * G, 2, &res);
	CU_ASSERT_TRUE(d.flags & KVT_DEC_KV);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_CXL_LIMIT);
	CU_ASSERT_EQUAL(d.action.type, KVT_ACT_NATIVE);
	CU_ASSERT_EQUAL(d.far_bytes, 0u);
	CU_ASSERT_EQUAL(eng.budget.cxl_used_bytes, 30 * G);
	/* exactly up to the limit still fits (6 s later: right after the
	 * pool a 20G allocation would be a late-pool candidate, provisional) */
	now_ns += 6000000000ull;
	d = alloc(KVT_KIND_DEVICE, 20 * G, 3, &res);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_RULE);
	CU_ASSERT_EQUAL(eng.budget.cxl_used_bytes, 50 * G);

	/* a confirmation that would pass the limit stays managed:hbm */
	kvt_policy_default(&pol);
	kvt_policy_engine_init(&eng, &pol, NULL, 0, 5 * G, 0);
	warm_up(100 * G);
	alloc(KVT_KIND_DEVICE, 3 * G, 21, &res);
	alloc(KVT_KIND_DEVICE, 3 * G, 22, &res);
	d = alloc(KVT_KIND_DEVICE, 3 * G, 23, &res);
	CU_ASSERT_EQUAL_FATAL(res.nr, 2u);
	CU_ASSERT_EQUAL(res.r[0].reason, KVT_REASON_CONFIRMED);
	CU_ASSERT_EQUAL(res.r[0].far_bytes, 3 * G);
	CU_ASSERT_EQUAL(res.r[1].reason, KVT_REASON_CXL_LIMIT);
	CU_ASSERT_EQUAL(res.r[1].action.tier, KVT_TIER_HBM);
	CU_ASSERT_EQUAL(res.r[1].far_bytes, 0u);
	CU_ASSERT_EQUAL(d.reason, KVT_REASON_CXL_LIMIT);
}

static void test_engine_no_kv_rules(void)
{
	struct kvt_policy_resolutions res;
	/* rules that do not look at kv never get a provisional decision */
	CU_ASSERT_EQUAL_FATAL(parse("device,size>=2G => trace; * => native"), 0);
	kvt_policy_engine_init(&eng, &pol, NULL, 0, 0, 0);
	warm_up(100 * G);
	struct kvt_policy_decision d = alloc(KVT_KIND_DEVICE, 3 * G, 1, &res);
	CU_ASSERT_TRUE(d.flags & KVT_DEC_MAYBE);
	CU_ASSERT_FALSE(d.flags & KVT_DEC_PROVISIONAL);
	CU_ASSERT_TRUE(d.flags & KVT_DEC_TRACE);
	CU_ASSERT_EQUAL(d.action.type, KVT_ACT_NATIVE);        /* trace is native + flag */
	CU_ASSERT_EQUAL(d.rule, 0);
	/* nth / after ordinals are per kind; after counts from the meminfo */
	CU_ASSERT_EQUAL(eng.nth[KVT_KIND_DEVICE], 11u);
	CU_ASSERT_EQUAL(eng.after[KVT_KIND_DEVICE], 1u);
	CU_ASSERT_EQUAL(eng.nth[KVT_KIND_HOST], 0u);
	alloc(KVT_KIND_HOST, 1, 2, &res);
	CU_ASSERT_EQUAL(eng.nth[KVT_KIND_HOST], 1u);
	CU_ASSERT_EQUAL(eng.after[KVT_KIND_HOST], 1u);
	kvt_policy_on_meminfo(&eng, 1, 2, now_ns, &res);
	CU_ASSERT_EQUAL(eng.after[KVT_KIND_DEVICE], 0u);
}

/* Same events, same decisions: run a mixed sequence twice. */
static void run_mixed(struct kvt_policy_decision *out, size_t n,
		      struct kvt_policy_resolutions *res_out)
{
	CU_ASSERT_EQUAL_FATAL(parse("kv => managed:cxl; host,size>=1G => pinned:cxl; mmap => interleave:dram=1,cxl=2; * => native"), 0);
	kvt_policy_engine_init(&eng, &pol, NULL, 0, 64 * G, 0);
	now_ns = 0;
	uint64_t x = 12345;
	memset(res_out, 0, sizeof *res_out);
	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint8_t kind = (uint8_t)(1 + (x >> 60) % 7);
		uint64_t size = ((x >> 20) % 4096) * M;
		struct kvt_policy_resolutions res;
		if ((x >> 8) % 17 == 0)
			kvt_policy_on_meminfo(&eng, 100 * G, 140 * G, now_ns, &res);
		if ((x >> 12) % 5 == 0 && i)
			kvt_policy_on_free(&eng, i - 1, out[i - 1].far_bytes, now_ns, &res);
		out[i] = alloc(kind, size, i, &res);
		for (unsigned k = 0; k < res.nr && res_out->nr < KVT_POLICY_MAX_RESOLVE; k++)
			res_out->r[res_out->nr++] = res.r[k];
	}
}

static void test_determinism(void)
{
	static struct kvt_policy_decision a[5000], b[5000];
	struct kvt_policy_resolutions ra, rb;
	run_mixed(a, 5000, &ra);
	uint64_t used = eng.budget.cxl_used_bytes;
	run_mixed(b, 5000, &rb);
	CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
	CU_ASSERT_EQUAL(memcmp(&ra, &rb, sizeof ra), 0);
	CU_ASSERT_EQUAL(used, eng.budget.cxl_used_bytes);
	/* the sequence exercises more than one outcome */
	int native = 0, placed = 0;
	for (size_t i = 0; i < 5000; i++)
		if (a[i].action.type == KVT_ACT_NATIVE) native++; else placed++;
	CU_ASSERT(native > 0 && placed > 0);
}

/* ---- `kvtier policy` ----------------------------------------------------- */

/* Runs fn(argc, argv) in a child with stdout/stderr captured. */
static int run_in_child(int (*fn)(int, char **), char **argv, char *out, size_t outlen)
{
	int pfd[2];
	int argc = 0;
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
	while (n + 1 < outlen && (r = read(pfd[0], out + n, outlen - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = 0;
	close(pfd[0]);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_cmd_policy(void)
{
	static char out[8192];
	char *ok[] = { "policy", "check", "kv=>managed:cxl;*=>native", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_policy, ok, out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, "kv => managed:cxl; * => native\n");
	char *bad[] = { "policy", "check", "device,size>=8G managed:cxl", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_policy, bad, out, sizeof out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "kvtier: KVTIER_POLICY: column 17: expected '=>' after selector 'device,size>=8G'"));
	char *help[] = { "policy", "--help", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_policy, help, out, sizeof out), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: kvtier policy check"));
	char *none[] = { "policy", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_policy, none, out, sizeof out), 2);
	char *junk[] = { "policy", "frobnicate", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_policy, junk, out, sizeof out), 2);
	char *def[] = { "policy", "default", NULL };
	CU_ASSERT_EQUAL(run_in_child(kvt_cmd_policy, def, out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, KVT_POLICY_DEFAULT_TEXT "\n");

	/* the real binary, once tools/kvtier.c links it */
	const char *tool = kvt_path("kvtier");
	if (access(tool, X_OK) == 0) {
		static struct kvt_child c;
		const char *argv_ok[] = { tool, "policy", "check", "* => native", NULL };
		CU_ASSERT_EQUAL(kvt_run(&c, argv_ok, NULL), 0);
		CU_ASSERT_EQUAL(c.exit_code, 0);
		CU_ASSERT_STRING_EQUAL(c.out, "* => native\n");
		const char *argv_bad[] = { tool, "policy", "check", "* => nativ", NULL };
		CU_ASSERT_EQUAL(kvt_run(&c, argv_bad, NULL), 0);
		CU_ASSERT_EQUAL(c.exit_code, 2);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "column 6"));
		const char *argv_env[] = { tool, "policy", "check", NULL };
		const char *env[] = { "KVTIER_POLICY=host=>pinned:node=1", NULL };
		CU_ASSERT_EQUAL(kvt_run(&c, argv_env, env), 0);
		CU_ASSERT_STRING_EQUAL(c.out, "host => pinned:node=1\n");
	} else {
		fprintf(stderr, "(%s not built: tested kvt_cmd_policy in-process only)\n", tool);
	}
}

/* policy check's warnings: on stderr, one line each with the rule's line,
 * exit status 0; none for clean rules; a rules FILE numbered by its lines. */
static void test_cmd_policy_lint(void)
{
	const char *tool = kvt_path("kvtier");
	if (access(tool, X_OK)) {
		fprintf(stderr, "(%s not built: policy check warnings not tested)\n", tool);
		CU_PASS("kvtier not built");
		return;
	}
	static struct kvt_child c;
	/* clean, as text and from the environment; node=0 when this machine has it */
	const char *clean = access("/sys/devices/system/node/node0", F_OK) ?
		"kv => managed:cxl; host,size>=1G => pinned:cxl; * => native" :
		"kv => managed:cxl; host,size>=1G => pinned:node=0; * => native";
	const char *a_clean[] = { tool, "policy", "check", clean, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, a_clean, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(c.err_len, 0);
	CU_ASSERT(c.out_len > 0);
	const char *a_def[] = { tool, "policy", "check", NULL };
	const char *no_env[] = { "KVTIER_POLICY=", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, a_def, no_env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(c.err_len, 0);

	/* each warning, from text over three lines */
	const char *bad = "host => native;\n host,size>1G => pinned:cxl;\n"
			  " size>2G,size<1G => native; site~lib[cuda => trace;\n"
			  " host => pinned:node=999";
	const char *a_bad[] = { tool, "policy", "check", bad, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, a_bad, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(c.out, "host => native; host,size>1G => pinned:cxl; "
			       "size>2G,size<1G => native; site~lib[cuda => trace; "
			       "host => pinned:node=999\n");
	static const char *const want[] = {
		"kvtier: KVTIER_POLICY:2: warning: rule 2 'host,size>1G => pinned:cxl' can never "
		"apply: earlier rule 1 (line 1) matches every allocation it does\n",
		"kvtier: KVTIER_POLICY:3: warning: rule 3 'size>2G,size<1G => native' can never "
		"apply: its size comparisons admit no value\n",
		"kvtier: KVTIER_POLICY:3: warning: rule 4 'site~lib[cuda => trace': site glob "
		"'lib[cuda': the '[' at character 4 is not closed, so it matches a literal '['\n",
		"kvtier: KVTIER_POLICY:4: warning: rule 5 'host => pinned:node=999' can never apply: "
		"earlier rule 1 (line 1) matches every allocation it does\n",
		"kvtier: KVTIER_POLICY:4: warning: rule 5 'host => pinned:node=999': NUMA node 999 "
		"is not online on this machine (online: ",
	};
	const char *at = c.err;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		size_t n = strlen(want[i]);
		if (strncmp(at, want[i], n)) {
			fprintf(stderr, "\n  want: %s\n  got:  %.300s", want[i], at);
			CU_FAIL("policy check warning");
			break;
		}
		at = strchr(at, '\n');
		at = at ? at + 1 : "";
	}
	CU_ASSERT_STRING_EQUAL(at, "");      /* nothing more, one line each */

	/* a rules file: comments and blank lines count, as in kvtier run --policy */
	char path[] = "/tmp/kvt-policy-lint-XXXXXX";
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	static const char file[] = "# rules\nkv => managed:cxl   # the KV cache\n\n"
				   "* => native;\nmmap => bind:cxl\n";
	CU_ASSERT_EQUAL(write(fd, file, sizeof file - 1), (ssize_t)(sizeof file - 1));
	close(fd);
	const char *a_file[] = { tool, "policy", "check", path, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, a_file, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(c.out, "kv => managed:cxl; * => native; mmap => bind:cxl\n");
	char w[600];
	snprintf(w, sizeof w, "kvtier: %s:5: warning: rule 3 'mmap => bind:cxl' can never apply: "
		 "earlier rule 2 (line 4) matches every allocation it does\n", path);
	CU_ASSERT_STRING_EQUAL(c.err, w);
	/* an invalid file: its line, exit 2 */
	FILE *f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("kv => managed:cxl\n# next\nsize>>4 => native\n", f);
	fclose(f);
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, a_file, NULL), 0);
	CU_ASSERT_EQUAL(c.exit_code, 2);
	snprintf(w, sizeof w, "kvtier: %s:3: column 25: ", path);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, w));
	CU_ASSERT_EQUAL(c.out_len, 0);
	unlink(path);
}

/* ---- registration --------------------------------------------------------- */

static CU_TestInfo parser_tests[] = {
	{ "docs examples parse and round-trip", test_docs_examples_parse },
	{ "docs error examples: message and column", test_docs_errors },
	{ "canonical form", test_canonical },
	{ "errors name their column", test_errors },
	{ "limits: 64 rules, 4096 chars, glob length", test_limits },
	{ "default policy", test_default },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo match_tests[] = {
	{ "first match wins", test_first_match_wins },
	{ "size comparisons at boundaries", test_size_boundaries },
	{ "kinds, node=N and the implicit kind filter", test_kinds_and_implicit_filter },
	{ "kv, !kv, nth, after", test_kv_nth_after },
	{ "site globs through the callback", test_site },
	{ "glob table", test_glob },
	{ "lint: shadowed rules, empty comparisons, bad globs", test_lint },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo budget_tests[] = {
	{ "budget arithmetic tables", test_budget_tables },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo engine_tests[] = {
	{ "a maybe-KV allocation two rules send to the same place", test_engine_maybe_same_action },
	{ "provisional then confirmed", test_engine_provisional_confirmed },
	{ "zero fill confirms, a fifth size and a free refute", test_engine_zero_fill_and_refute },
	{ "slow zero-fills of members keep the burst open", test_engine_slow_fill_keeps_burst },
	{ "pool at birth and the CXL limit", test_engine_pool_and_limit },
	{ "rules without kv; ordinals", test_engine_no_kv_rules },
	{ "determinism", test_determinism },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo cmd_tests[] = {
	{ "kvtier policy check exit status", test_cmd_policy },
	{ "kvtier policy check warnings: line numbers, exit 0, none when clean",
	  test_cmd_policy_lint },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	CU_SuiteInfo suites[] = {
		{ "policy_parser", docs_init, docs_fini, NULL, NULL, parser_tests },
		{ "policy_match", NULL, NULL, NULL, NULL, match_tests },
		{ "policy_budget", NULL, NULL, NULL, NULL, budget_tests },
		{ "policy_engine", NULL, NULL, NULL, NULL, engine_tests },
		{ "policy_cmd", NULL, NULL, NULL, NULL, cmd_tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
