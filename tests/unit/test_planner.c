// SPDX-License-Identifier: MIT
/* The migration planner on tables of chunks (policy/planner.c): the budget
 * is never exceeded, hysteresis between the thresholds, the rate cap,
 * adjacent chunks merged (within one range only), a chunk that turns hot is
 * promoted within a bounded number of epochs, and the same input gives the
 * same plan. Chunks are 2 MiB; budgets are given in chunks * 2 MiB. */
#include "kvt_test.h"
#include "kvtier/planner.h"
#include "../profiler/heat.h"

#define MB2 (2ull << 20)

static struct kvt_plan_params params(uint64_t budget_chunks)
{
	return (struct kvt_plan_params){
		.budget_bytes = budget_chunks * MB2, .high_bp = 10000, .low_bp = 8000,
		.promote = 4, .demote = 1, .rate_bytes_per_s = 0, .epoch_ms = 50,
		.min_residence_ms = 200, .chunk_bytes = MB2, .room_bytes = KVT_PLAN_ROOM_ANY,
	};
}

static struct kvt_plan_chunk ch(float heat, uint8_t tier, uint16_t range)
{
	return (struct kvt_plan_chunk){ .heat = heat, .tier = tier, .range = range };
}

/* Apply moves to the table as the migrator would. */
static void apply(struct kvt_plan_chunk *c, const struct kvt_plan_out *o, uint32_t now)
{
	for (uint32_t i = 0; i < o->nr; i++)
		for (uint32_t k = 0; k < o->moves[i].nr; k++) {
			c[o->moves[i].first + k].tier = o->moves[i].dir == KVT_PLAN_PROMOTE ?
							KVT_PLAN_TIER_HBM : KVT_PLAN_TIER_FAR;
			c[o->moves[i].first + k].moved_ms = now;
		}
}

static uint32_t in_hbm(const struct kvt_plan_chunk *c, uint32_t n)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		k += c[i].tier == KVT_PLAN_TIER_HBM;
	return k;
}

/*  budget 4 chunks, 10 hot far chunks:
 *  [H H H H H H H H H H]  ->  4 promoted (the hottest), never 5 */
static void test_budget_never_exceeded(void)
{
	static struct kvt_plan_chunk c[4096];
	static struct kvt_plan_move mv[4096];
	uint32_t seed = 12345;
	for (int round = 0; round < 50; round++) {
		uint32_t n = 64 + (uint32_t)round * 61, budget = (uint32_t)round * 7 % 200;
		struct kvt_planner pl;
		struct kvt_plan_params p = params(budget);
		p.high_bp = 9500;
		kvt_planner_init(&pl, &p);
		for (uint32_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			c[i] = ch((float)(seed >> 20) / 64.0f, (seed >> 8) & 1 && i < budget / 2 ?
				  KVT_PLAN_TIER_HBM : KVT_PLAN_TIER_FAR, (uint16_t)(i / 100));
		}
		for (uint32_t e = 1; e <= 20; e++) {
			struct kvt_plan_out o = { .moves = mv, .cap = 4096 };
			kvt_plan_epoch(&pl, c, n, e * 50, &o);
			/* applying the moves in order never holds more than the budget */
			uint32_t h = in_hbm(c, n);
			for (uint32_t i = 0; i < o.nr; i++) {
				h += o.moves[i].dir == KVT_PLAN_PROMOTE ? o.moves[i].nr : -o.moves[i].nr;
				CU_ASSERT_TRUE(h <= budget || o.moves[i].dir == KVT_PLAN_DEMOTE);
			}
			apply(c, &o, e * 50);
			CU_ASSERT_TRUE(in_hbm(c, n) <= budget);
			CU_ASSERT_EQUAL(in_hbm(c, n), o.hbm_after);
			for (uint32_t i = 0; i < n; i++) {     /* heat shifts */
				seed = seed * 1103515245u + 12345u;
				c[i].heat = (float)(seed >> 20) / 64.0f;
			}
		}
	}
	/* the hottest win */
	struct kvt_plan_chunk t[10];
	for (int i = 0; i < 10; i++)
		t[i] = ch(10.0f + (float)i * 10.0f, KVT_PLAN_TIER_FAR, 0);
	struct kvt_planner pl;
	struct kvt_plan_params p = params(4);
	kvt_planner_init(&pl, &p);
	struct kvt_plan_out o = { .moves = mv, .cap = 64 };
	kvt_plan_epoch(&pl, t, 10, 100, &o);
	CU_ASSERT_EQUAL(o.nr_promote, 4);
	apply(t, &o, 100);
	for (int i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(t[i].tier, i >= 6 ? KVT_PLAN_TIER_HBM : KVT_PLAN_TIER_FAR);
}

/*  promote 4, demote 1:
 *  far heat 3   -> stays far   (below promote)
 *  hbm heat 3   -> stays hbm   (above demote)
 *  hbm heat 0.5 -> demoted
 *  far heat 5   -> promoted */
static void test_hysteresis(void)
{
	struct kvt_plan_chunk c[4] = {
		ch(3, KVT_PLAN_TIER_FAR, 0), ch(3, KVT_PLAN_TIER_HBM, 1),
		ch(0.5f, KVT_PLAN_TIER_HBM, 2), ch(5, KVT_PLAN_TIER_FAR, 3),
	};
	struct kvt_plan_move mv[8];
	struct kvt_planner pl;
	struct kvt_plan_params p = params(100);
	kvt_planner_init(&pl, &p);
	struct kvt_plan_out o = { .moves = mv, .cap = 8 };
	kvt_plan_epoch(&pl, c, 4, 1000, &o);
	apply(c, &o, 1000);
	CU_ASSERT_EQUAL(c[0].tier, KVT_PLAN_TIER_FAR);
	CU_ASSERT_EQUAL(c[1].tier, KVT_PLAN_TIER_HBM);
	CU_ASSERT_EQUAL(c[2].tier, KVT_PLAN_TIER_FAR);
	CU_ASSERT_EQUAL(c[3].tier, KVT_PLAN_TIER_HBM);
	CU_ASSERT_EQUAL(o.nr_promote, 1);
	CU_ASSERT_EQUAL(o.nr_demote, 1);
	/* no ping-pong: the promoted chunk turns cold at once but stays for
	 * the minimum residence (200 ms), then goes */
	c[3].heat = 0;
	kvt_plan_epoch(&pl, c, 4, 1100, &o);
	CU_ASSERT_EQUAL(o.nr_demote, 0);
	kvt_plan_epoch(&pl, c, 4, 1250, &o);
	CU_ASSERT_EQUAL(o.nr_demote, 1);
	/* a full budget: a far chunk only twice as hot as the coldest
	 * resident displaces it (one octave of incumbency) */
	struct kvt_plan_chunk d[2] = { ch(10, KVT_PLAN_TIER_HBM, 0), ch(15, KVT_PLAN_TIER_FAR, 0) };
	p = params(1);
	kvt_planner_init(&pl, &p);
	kvt_plan_epoch(&pl, d, 2, 1000, &o);
	CU_ASSERT_EQUAL(o.nr, 0);
	d[1].heat = 80;
	kvt_plan_epoch(&pl, d, 2, 1000, &o);
	CU_ASSERT_EQUAL(o.nr_demote, 1);
	CU_ASSERT_EQUAL(o.nr_promote, 1);
	CU_ASSERT_EQUAL(o.moves[0].dir, KVT_PLAN_DEMOTE);    /* room first */
}

/*  budget 4, six residents all within their minimum residence (the GPU
 *  faulted them in): heat 9 8 1 7 6 0.5 -> the two coldest (1, 0.5) go,
 *  down to the budget and not past it; within the budget the residence
 *  holds */
static void residents_just_moved(struct kvt_plan_chunk *c, const float *heat, int n)
{
	for (int i = 0; i < n; i++) {
		c[i] = ch(heat[i], KVT_PLAN_TIER_HBM, 0);
		c[i].moved_ms = 990;
	}
}

static void test_budget_outranks_residence(void)
{
	const float heat[6] = { 9, 8, 1, 7, 6, 0.5f };
	struct kvt_plan_chunk c[6];
	residents_just_moved(c, heat, 6);
	struct kvt_plan_move mv[8];
	struct kvt_planner pl;
	struct kvt_plan_params p = params(4);
	kvt_planner_init(&pl, &p);
	struct kvt_plan_out o = { .moves = mv, .cap = 8 };
	kvt_plan_epoch(&pl, c, 6, 1000, &o);
	CU_ASSERT_EQUAL(o.nr_demote, 2);
	CU_ASSERT_EQUAL(o.nr_promote, 0);
	CU_ASSERT_EQUAL(o.hbm_after, 4);
	apply(c, &o, 1000);
	CU_ASSERT_EQUAL(in_hbm(c, 6), 4);
	CU_ASSERT_EQUAL(c[2].tier, KVT_PLAN_TIER_FAR);
	CU_ASSERT_EQUAL(c[5].tier, KVT_PLAN_TIER_FAR);
	/* at the budget (above the 80 % low watermark): nothing within its
	 * residence moves */
	kvt_plan_epoch(&pl, c, 6, 1010, &o);
	CU_ASSERT_EQUAL(o.nr, 0);
	/* the rate cap still holds: one chunk's worth an epoch */
	residents_just_moved(c, heat, 6);
	p.rate_bytes_per_s = 1;             /* burst: one chunk */
	kvt_planner_init(&pl, &p);
	kvt_plan_epoch(&pl, c, 6, 1000, &o);
	CU_ASSERT_EQUAL(o.nr_demote, 1);
	CU_ASSERT_EQUAL(o.nr, 1);
	CU_ASSERT_EQUAL(o.moves[0].first, 5);   /* the coldest */
}

/*  rate 100 MiB/s, epoch 50 ms: the burst is 10 MiB = 5 chunks; then
 *  2.5 chunks per 50 ms */
static void test_rate_cap(void)
{
	static struct kvt_plan_chunk c[100];
	struct kvt_plan_move mv[128];
	for (int i = 0; i < 100; i++)
		c[i] = ch(50, KVT_PLAN_TIER_FAR, 0);
	struct kvt_planner pl;
	struct kvt_plan_params p = params(1000);
	p.rate_bytes_per_s = 100ull << 20;
	kvt_planner_init(&pl, &p);
	struct kvt_plan_out o = { .moves = mv, .cap = 128 };
	kvt_plan_epoch(&pl, c, 100, 1000, &o);
	CU_ASSERT_EQUAL(o.nr_promote, 5);
	apply(c, &o, 1000);
	uint64_t moved = 5;
	for (uint32_t t = 1050; t <= 2000; t += 50) {
		kvt_plan_epoch(&pl, c, 100, t, &o);
		CU_ASSERT_TRUE(o.nr_promote <= 5);
		moved += o.nr_promote;
		apply(c, &o, t);
	}
	/* 1 s at 100 MiB/s = 50 chunks, plus the 5-chunk burst */
	CU_ASSERT_TRUE(moved <= 55);
	CU_ASSERT_TRUE(moved >= 45);
	/* no cap: all at once */
	for (int i = 0; i < 100; i++)
		c[i] = ch(50, KVT_PLAN_TIER_FAR, 0);
	p.rate_bytes_per_s = 0;
	kvt_planner_init(&pl, &p);
	kvt_plan_epoch(&pl, c, 100, 1000, &o);
	CU_ASSERT_EQUAL(o.nr_promote, 100);
}

/*  range 0: [H H H . H]   range 1: [H H]
 *  -> moves {0,3} {4,1} (range 0) and {5,2} (range 1): neighbours in
 *     different ranges never merge */
static void test_merge(void)
{
	struct kvt_plan_chunk c[7] = {
		ch(9, 0, 0), ch(9, 0, 0), ch(9, 0, 0), ch(0, 0, 0), ch(9, 0, 0),
		ch(9, 0, 1), ch(9, 0, 1),
	};
	struct kvt_plan_move mv[8];
	struct kvt_planner pl;
	struct kvt_plan_params p = params(100);
	kvt_planner_init(&pl, &p);
	struct kvt_plan_out o = { .moves = mv, .cap = 8 };
	CU_ASSERT_EQUAL(kvt_plan_epoch(&pl, c, 7, 1000, &o), 3);
	CU_ASSERT_EQUAL(mv[0].first, 0); CU_ASSERT_EQUAL(mv[0].nr, 3);
	CU_ASSERT_EQUAL(mv[1].first, 4); CU_ASSERT_EQUAL(mv[1].nr, 1);
	CU_ASSERT_EQUAL(mv[2].first, 5); CU_ASSERT_EQUAL(mv[2].nr, 2);
	CU_ASSERT_EQUAL(mv[2].range, 1);
	/* a move list too short: what does not fit waits, the budget holds */
	o.cap = 1;
	kvt_planner_init(&pl, &p);
	CU_ASSERT_EQUAL(kvt_plan_epoch(&pl, c, 7, 1000, &o), 1);
	CU_ASSERT_EQUAL(o.nr_promote, 3);
}

/* A chunk that starts receiving 2 pieces of evidence per epoch (tau 1 s,
 * epoch 50 ms) crosses KVTIER_PROMOTE=4 and is promoted within 3 epochs. */
static void test_hot_chunk_promoted_soon(void)
{
	struct kvt_heat_chunk hc = { 0 };
	struct kvt_plan_chunk c[3] = { ch(0, 0, 0), ch(0, 0, 0), ch(0, 0, 0) };
	struct kvt_plan_move mv[8];
	struct kvt_planner pl;
	struct kvt_plan_params p = params(10);
	kvt_planner_init(&pl, &p);
	int promoted_at = -1;
	for (int e = 1; e <= 10 && promoted_at < 0; e++) {
		uint32_t now = 1000 + (uint32_t)e * 50;
		kvt_heat_touch(&hc, 1, now - 20, 1000);
		kvt_heat_touch(&hc, 1, now - 10, 1000);
		c[1].heat = kvt_heat_read(&hc, now, 1000);
		struct kvt_plan_out o = { .moves = mv, .cap = 8 };
		kvt_plan_epoch(&pl, c, 3, now, &o);
		if (o.nr_promote) {
			CU_ASSERT_EQUAL(mv[0].first, 1);
			promoted_at = e;
		}
	}
	CU_ASSERT_TRUE(promoted_at >= 2 && promoted_at <= 3);
}

/* A device with less free HBM than the budget allows: the budget is cut to
 * what the chunks hold plus the room, and the coldest resident chunks make
 * way for the hottest far ones, so the driver has nothing to evict. */
static void test_room_cut(void)
{
	struct kvt_plan_move mv[16];
	struct kvt_planner pl;
	struct kvt_plan_params p = params(10);
	struct kvt_plan_chunk c[7] = {
		ch(40, 1, 0), ch(30, 1, 1), ch(1.5f, 1, 2), ch(2, 1, 3),  /* in HBM */
		ch(20, 0, 4), ch(16, 0, 5), ch(12, 0, 6),                 /* far, hot */
	};
	static const struct {
		uint64_t room;
		uint32_t budget, after;
		int move[7];          /* -1 demoted, 1 promoted */
	} cases[] = {
		{ KVT_PLAN_ROOM_ANY, 10, 7, { 0, 0, 0, 0, 1, 1, 1 } },
		{ 100 * MB2, 10, 7, { 0, 0, 0, 0, 1, 1, 1 } },
		{ 3 * MB2, 7, 7, { 0, 0, 0, 0, 1, 1, 1 } },
		{ MB2 + MB2 / 2, 5, 5, { 0, 0, -1, -1, 1, 1, 1 } },   /* whole chunks only */
		{ 0, 4, 4, { 0, 0, -1, -1, 1, 1, 0 } },               /* a swap */
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		p.room_bytes = cases[k].room;
		kvt_planner_init(&pl, &p);
		struct kvt_plan_out o = { .moves = mv, .cap = 16 };
		kvt_plan_epoch(&pl, c, 7, 1000, &o);
		CU_ASSERT_EQUAL(o.hbm_before, 4);
		CU_ASSERT_EQUAL(o.budget_chunks, cases[k].budget);
		CU_ASSERT_EQUAL(o.hbm_after, cases[k].after);
		int got[7] = { 0 };
		for (uint32_t i = 0; i < o.nr; i++)
			for (uint32_t j = 0; j < mv[i].nr && mv[i].first + j < 7; j++)
				got[mv[i].first + j] = mv[i].dir == KVT_PLAN_DEMOTE ? -1 : 1;
		CU_ASSERT_EQUAL(memcmp(got, cases[k].move, sizeof got), 0);
	}
}

static void test_determinism(void)
{
	static struct kvt_plan_chunk a[2000], b[2000];
	static struct kvt_plan_move ma[512], mb[512];
	uint32_t seed = 7;
	for (int i = 0; i < 2000; i++) {
		seed = seed * 1103515245u + 12345u;
		a[i] = ch((float)(seed >> 22), (seed >> 3) & 1, (uint16_t)(i / 300));
		a[i].moved_ms = (seed >> 5) & 1 ? 900 : 0;
	}
	memcpy(b, a, sizeof a);
	struct kvt_planner p1, p2;
	struct kvt_plan_params p = params(600);
	p.rate_bytes_per_s = 10ull << 30;
	kvt_planner_init(&p1, &p);
	kvt_planner_init(&p2, &p);
	struct kvt_plan_out o1 = { .moves = ma, .cap = 512 }, o2 = { .moves = mb, .cap = 512 };
	kvt_plan_epoch(&p1, a, 2000, 1000, &o1);
	kvt_plan_epoch(&p2, b, 2000, 1000, &o2);
	CU_ASSERT_TRUE(o1.nr > 0);
	CU_ASSERT_EQUAL(o1.nr, o2.nr);
	CU_ASSERT_EQUAL(memcmp(ma, mb, sizeof ma[0] * o1.nr), 0);
	CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);    /* the input is not written */
}

/* A table that leaves out far chunks colder than `promote` (what the
 * migrator's kvt_heat_collect builds) gives the same plan as the whole
 * table, once positions are mapped back: the same chunks move, in the same
 * merged ranges, epoch after epoch (moves applied to the whole table).
 *  whole:   [F. H. F* F. H. H.]   F. far, cold: left out
 *  subset:  [H. F* | H. H.]       '|' KVT_PLAN_F_GAP: no merge across */
static void test_subset_same_plan(void)
{
	enum { N = 6000, CAP = 1024 };
	static struct kvt_plan_chunk whole[N], sub[N];
	static uint32_t pos[N];
	static struct kvt_plan_move mw[CAP], ms[CAP];
	uint32_t seed = 99, compared = 0, gaps = 0;
	for (int round = 0; round < 8; round++) {
		struct kvt_plan_params p = params(300 + (uint32_t)round * 50);
		p.high_bp = 9500;
		p.rate_bytes_per_s = round & 1 ? 0 : 4ull << 30;
		struct kvt_planner pw, ps;
		kvt_planner_init(&pw, &p);
		kvt_planner_init(&ps, &p);
		for (uint32_t i = 0; i < N; i++) {
			seed = seed * 1103515245u + 12345u;
			/* runs of hot chunks so that merges happen */
			float h = (seed >> 28) < 5 ? (float)((seed >> 8) % 64) : (float)((seed >> 8) % 4);
			whole[i] = ch(h, (seed >> 4) % 5 == 0, (uint16_t)(i / 700));
		}
		for (uint32_t e = 0; e < 12; e++) {
			uint32_t now = 1000 + e * 50, n = 0;
			for (uint32_t i = 0; i < N; i++) {
				seed = seed * 1103515245u + 12345u;
				whole[i].heat = whole[i].heat * 0.9f + ((seed >> 27) == 0 ? 8.0f : 0.0f);
				if (whole[i].tier != KVT_PLAN_TIER_HBM && !(whole[i].heat >= p.promote))
					continue;
				sub[n] = whole[i];
				sub[n].flags = n && pos[n - 1] + 1 == i && sub[n - 1].range == whole[i].range ?
					       0 : KVT_PLAN_F_GAP;
				gaps += n && sub[n].flags && sub[n - 1].range == whole[i].range;
				pos[n++] = i;
			}
			struct kvt_plan_out ow = { .moves = mw, .cap = CAP }, os = { .moves = ms, .cap = CAP };
			kvt_plan_epoch(&pw, whole, N, now, &ow);
			kvt_plan_epoch(&ps, sub, n, now, &os);
			CU_ASSERT_TRUE(n < N);
			CU_ASSERT_EQUAL(ow.nr, os.nr);
			CU_ASSERT_EQUAL(ow.nr_promote, os.nr_promote);
			CU_ASSERT_EQUAL(ow.nr_demote, os.nr_demote);
			CU_ASSERT_EQUAL(ow.hbm_before, os.hbm_before);
			for (uint32_t k = 0; k < ow.nr && k < os.nr; k++) {
				CU_ASSERT_EQUAL(mw[k].first, pos[ms[k].first]);
				CU_ASSERT_EQUAL(mw[k].nr, ms[k].nr);
				CU_ASSERT_EQUAL(mw[k].dir, ms[k].dir);
				CU_ASSERT_EQUAL(mw[k].range, ms[k].range);
				/* a subset move covers consecutive chunks in memory */
				CU_ASSERT_EQUAL(pos[ms[k].first + ms[k].nr - 1], pos[ms[k].first] + ms[k].nr - 1);
				compared++;
			}
			apply(whole, &ow, now);
		}
	}
	CU_ASSERT_TRUE(compared > 200);     /* the rounds did move things */
	CU_ASSERT_TRUE(gaps > 100);         /* and the subsets had holes */
}

/* The planner's scratch list is performance only: with it too small for
 * the chunks that can matter (the later passes walk the whole table), or
 * for the candidates (passes 3a/3b re-decide over the table), the plan is
 * the one made with the full list, epoch after epoch. */
static void test_scratch_overflow_same_plan(void)
{
	enum { N = 6000, CAP = 1024, NP = 4 };
	static struct kvt_plan_chunk t[NP][N];
	static struct kvt_plan_move mv[NP][CAP];
	static struct kvt_planner pl[NP];
	const uint32_t caps[NP] = { KVT_PLAN_LIVE_MAX, 1, 64, 700 };
	uint32_t seed = 5, compared = 0;
	struct kvt_plan_params p = params(500);
	p.high_bp = 9500;
	p.rate_bytes_per_s = 4ull << 30;
	for (int k = 0; k < NP; k++) {
		kvt_planner_init(&pl[k], &p);
		pl[k].live_cap = caps[k];
	}
	CU_ASSERT_EQUAL(pl[0].live_cap, KVT_PLAN_LIVE_MAX);
	for (uint32_t i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		float h = (seed >> 28) < 5 ? (float)((seed >> 8) % 64) : (float)((seed >> 8) % 4);
		t[0][i] = ch(h, (seed >> 4) % 7 == 0, (uint16_t)(i / 700));
	}
	for (uint32_t e = 0; e < 16; e++) {
		uint32_t now = 1000 + e * 50;
		struct kvt_plan_out o[NP];
		for (uint32_t i = 0; i < N; i++) {
			seed = seed * 1103515245u + 12345u;
			t[0][i].heat = t[0][i].heat * 0.9f + ((seed >> 27) == 0 ? 8.0f : 0.0f);
		}
		for (int k = 0; k < NP; k++) {
			if (k)
				memcpy(t[k], t[0], sizeof t[0]);
			o[k] = (struct kvt_plan_out){ .moves = mv[k], .cap = CAP };
			kvt_plan_epoch(&pl[k], t[k], N, now, &o[k]);
		}
		for (int k = 1; k < NP; k++) {
			CU_ASSERT_EQUAL(o[k].nr, o[0].nr);
			CU_ASSERT_EQUAL(o[k].nr_promote, o[0].nr_promote);
			CU_ASSERT_EQUAL(o[k].nr_demote, o[0].nr_demote);
			CU_ASSERT_EQUAL(o[k].hbm_after, o[0].hbm_after);
			if (o[k].nr == o[0].nr)
				CU_ASSERT_EQUAL(memcmp(mv[k], mv[0], sizeof mv[0][0] * o[0].nr), 0);
		}
		compared += o[0].nr_promote + o[0].nr_demote;
		apply(t[0], &o[0], now);
	}
	CU_ASSERT_TRUE(compared > 200);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "budget never exceeded, hottest promoted first", test_budget_never_exceeded },
		{ "hysteresis and minimum residence", test_hysteresis },
		{ "rate cap", test_rate_cap },
		{ "over the budget, residents within their residence leave", test_budget_outranks_residence },
		{ "adjacent chunks merged within a range", test_merge },
		{ "a chunk turning hot is promoted within 3 epochs", test_hot_chunk_promoted_soon },
		{ "a device short of room: budget cut, coldest out first", test_room_cut },
		{ "determinism", test_determinism },
		{ "a subset table (cold far chunks left out) plans the same", test_subset_same_plan },
		{ "a scratch list too small plans the same", test_scratch_overflow_same_plan },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "planner", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
