// SPDX-License-Identifier: MIT
/* libFuzzer target: the KVTIER_POLICY parser and canonical form, policy
 * matching, and the replay line reader (`kvtier replay` text input). The
 * options table and value readers have their own target (fuzz_options.c).
 * Invariants checked beyond "no crash, leak or UB":
 *   - a parse either succeeds or names a column inside the text (+1);
 *   - the canonical form re-parses to equal rules and is a fixed point;
 *   - matching a parsed policy never reads outside it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier/policy.h"

static struct kvt_policy p1, p2;
static char text[KVT_POLICY_MAX_TEXT + 64];
static char c1[2 * KVT_POLICY_MAX_TEXT], c2[2 * KVT_POLICY_MAX_TEXT];

static int frames(void *ctx, unsigned i, const char **sym, const char **mod)
{
	const char *s = ctx;
	if (i >= 2)
		return -1;
	*sym = i ? "llama_kv_cache::llama_kv_cache" : s;
	*mod = i ? "/usr/lib/libllama.so" : NULL;
	return 0;
}

static void fuzz_policy(const char *t, size_t len)
{
	struct kvt_policy_error err;
	int rc = kvt_policy_parse(t, &p1, &err);
	if (rc) {
		if (rc != -EINVAL || err.column < 1 || err.column > len + 1 ||
		    strncmp(err.msg, "column ", 7) != 0)
			abort();
		return;
	}
	size_t n = kvt_policy_format(&p1, c1, sizeof c1);
	if (n >= sizeof c1)
		abort();
	if (kvt_policy_parse(c1, &p2, &err))
		abort();
	if (!kvt_policy_equal(&p1, &p2))
		abort();
	kvt_policy_format(&p2, c2, sizeof c2);
	if (strcmp(c1, c2))
		abort();
	for (uint8_t kind = 0; kind < KVT_KIND__COUNT; kind++) {
		struct kvt_policy_query q = {
			.kind = kind, .kv = kind & 1, .size = (uint64_t)len << (kind * 5),
			.nth = kind, .after = len & 3, .site = frames, .site_ctx = (void *)t,
		};
		int r = kvt_policy_match(&p1, &q);
		if (r < -1 || r >= (int)p1.nr_rules)
			abort();
	}
}

static void fuzz_replay(const char *t)
{
	struct kvt_replay_event ev;
	struct kvt_policy_error err;
	int rc = kvt_replay_parse_line(t, &ev, &err);
	if (rc < -EINVAL || rc > 1)
		abort();
	if (rc == 1 && strnlen(ev.site, sizeof ev.site) >= sizeof ev.site)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* first byte picks the target; the rest is NUL-terminated text (longer
	 * than the policy limit is allowed through to exercise that error) */
	if (size < 1)
		return 0;
	size_t len = size - 1;
	if (len > sizeof text - 1)
		len = sizeof text - 1;
	memcpy(text, data + 1, len);
	text[len] = 0;
	if (data[0] % 4 == 3)
		fuzz_replay(text);
	else
		fuzz_policy(text, strlen(text));
	return 0;
}
