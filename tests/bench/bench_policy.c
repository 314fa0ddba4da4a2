// SPDX-License-Identifier: MIT
/* `make bench-policy`: nanoseconds per decision of the policy engine
 * (kvt_policy_on_alloc: ordinals + KV classifier + rule match + budget),
 * and of the rule matcher alone, for the default rules and a 16-rule set.
 * A rough figure for a regression eye, not a timed test. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kvtier/policy.h"

#define M (1ull << 20)
#define G (1ull << 30)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *const sets[] = {
	KVT_POLICY_DEFAULT_TEXT,
	"kv => managed:cxl; device,size>=64G => managed:cxl; device,nth==1 => trace; "
	"async,size>=32G => managed:cxl; managed => managed:hbm; host,size>=16G => pinned:cxl; "
	"host,size>=8G => pinned:node=1; register,size>=4G => bind:cxl; mmap,size>=64G => bind:cxl; "
	"mmap,size>=32G => interleave:dram=1,cxl=3; mmap,size>=16G => interleave:dram=1,cxl=1; "
	"device,after<=2,size>=100G => managed:cxl; device,size==123456789 => trace; "
	"vmm,size>=1T => trace; device|async,!kv,size>=200G => trace; * => native",
};

static volatile uint64_t sink;

int main(void)
{
	static struct kvt_policy pol;
	static struct kvt_policy_engine eng;
	const unsigned rounds = 2000000;
	for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
		struct kvt_policy_error err;
		if (kvt_policy_parse(sets[s], &pol, &err)) {
			fprintf(stderr, "bench: %s\n", err.msg);
			return 1;
		}
		/* a vLLM-like stream: weights, meminfo, 32 KV, then a churn of
		 * mixed kinds and sizes (allocated and freed) */
		kvt_policy_engine_init(&eng, &pol, NULL, 0, 0, 1 * G);
		struct kvt_policy_decision d;
		struct kvt_policy_resolutions res;
		uint64_t x = 88172645463325252ull, t = 0;
		double t0 = now_s();
		for (unsigned i = 0; i < rounds; i++) {
			struct kvt_policy_alloc_event a = { .t_ns = t += 1000, .id = i };
			if (i == 300)
				kvt_policy_on_meminfo(&eng, 100 * G, 140 * G, t, &res);
			if (i < 300) {
				a.kind = KVT_KIND_DEVICE;
				a.size = (48 + (i % 4) * 64) * M;
			} else if (i < 332) {
				a.kind = KVT_KIND_DEVICE;
				a.size = 3 * G;
			} else {
				x ^= x << 13; x ^= x >> 7; x ^= x << 17;
				a.kind = (uint8_t)(1 + x % 7);
				a.size = (x >> 8) % (4 * G);
			}
			kvt_policy_on_alloc(&eng, &a, &d, &res);
			sink += d.action.type;
			if (i >= 332 && (x & 1))
				kvt_policy_on_free(&eng, i, d.far_bytes, t, &res);
		}
		double per_dec = (now_s() - t0) * 1e9 / rounds;

		struct kvt_policy_query q = { .kind = KVT_KIND_DEVICE, .nth = 5 };
		t0 = now_s();
		for (unsigned i = 0; i < rounds; i++) {
			q.size = (uint64_t)i * 4099;
			q.kind = (uint8_t)(1 + i % 7);
			q.kv = i & 1;
			sink += (uint64_t)kvt_policy_match(&pol, &q);
		}
		double per_match = (now_s() - t0) * 1e9 / rounds;
		printf("policy: %2u rules: %6.1f ns/decision (engine), %6.1f ns/match (rules only)\n",
		       pol.nr_rules, per_dec, per_match);
	}
	return 0;
}
