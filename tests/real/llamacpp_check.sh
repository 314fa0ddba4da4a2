#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llama.cpp from its npm package (node-llama-cpp + @node-llama-cpp/linux-x64,
# prebuilt CPU binaries; versions pinned by package-lock.json here), natively
# and under `kvtier run` with a rule that binds large anonymous maps to the far
# tier. Installs the packages with `npm ci` (install scripts off: nothing is
# built or downloaded besides the locked packages) into tests/real/node_modules.
#   tests/real/llamacpp_check.sh BUILD OUTDIR
# Passes when: the greedy tokens are identical; both runs hold a map as large
# as the KV cache; every such map under kvtier is where kvtier's trace says
# (a map it bound names the far node in numa_maps, one it did not see keeps
# the default policy); and the KV's map is one kvtier bound, as the rule
# says. llama.cpp makes its CPU KV buffer with posix_memalign, which glibc
# serves with a map of its own: kvtier's heap wrapper (preload/hook_heap.c)
# sees it as kind mmap. Prints where the KV landed either way.
# Exit 0 pass, 1 fail, 77 skip (one line: no node 20+ and npm, or the
# registry is unreachable and the packages are not installed).
set -uo pipefail
build=${1:?usage: llamacpp_check.sh BUILD OUTDIR}
out=${2:?usage: llamacpp_check.sh BUILD OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
kvtier=$(cd "$build" && pwd)/kvtier
CTX=${LLAMACPP_CTX:-8192}            # 32 KiB of KV per token: 256 MiB
NTOK=${LLAMACPP_TOKENS:-32}
RULE='mmap,size>=16M,site~libggml* => bind:cxl; * => native'
skip() { echo "SKIP: llamacpp-npm: $*"; exit 77; }
fail() { echo "FAIL: llamacpp-npm: $*"; exit 1; }

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || skip "node and npm are not installed"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
[ "${major:-0}" -ge 20 ] || skip "node $(node --version 2>/dev/null) is older than node-llama-cpp's 20"
mkdir -p "$out" || fail "cannot create $out"
out=$(cd "$out" && pwd)                # absolute: npm ci runs from $here

# ---- the packages ------------------------------------------------------------
# npm ci only when node_modules is not this lock's install (a copy of the lock
# marks it); one install at a time (sanitizer builds run the suites too).
install() {
	cmp -s "$here/package-lock.json" "$here/node_modules/.kvtier-lock" && return 0
	if ! (cd "$here" && timeout 300 npm ci --ignore-scripts --omit=optional --no-audit --no-fund \
		>"$out/npm-ci.log" 2>&1); then
		timeout 30 npm ping >/dev/null 2>&1 ||
			skip "the npm registry cannot be reached and the packages are not installed"
		tail -5 "$out/npm-ci.log"
		fail "npm ci failed with the registry reachable ($out/npm-ci.log)"
	fi
	cp "$here/package-lock.json" "$here/node_modules/.kvtier-lock"
}
exec 9>"$here/.npm-ci.lock" && flock 9 || fail "cannot lock $here/.npm-ci.lock"
install
exec 9>&-

# ---- the runs ------------------------------------------------------------------
node "$here/tiny_gguf.mjs" "$out/tiny.gguf" --seed 47 >"$out/model.txt" || fail "writing the model failed"
rm -f "$out"/kvtier.*.trace*
timeout 300 node "$here/llamacpp_npm.mjs" "$out/tiny.gguf" "$CTX" "$NTOK" >"$out/native.out" 2>"$out/native.err"
rc=$?
[ $rc = 0 ] || { tail -5 "$out/native.err"; fail "native run exit $rc"; }
KVTIER_POLICY=$RULE timeout 300 "$kvtier" run --trace "$out/kvtier.%p.trace" -- \
	node "$here/llamacpp_npm.mjs" "$out/tiny.gguf" "$CTX" "$NTOK" >"$out/kvtier.out" 2>"$out/kvtier.err"
rc=$?
[ $rc = 0 ] || { tail -5 "$out/kvtier.err"; fail "kvtier run exit $rc"; }

nt=$(grep '^tokens:' "$out/native.out"); kt=$(grep '^tokens:' "$out/kvtier.out")
[ "$(wc -w <<<"$nt")" -gt "$NTOK" ] || fail "native run printed no $NTOK tokens: '$nt'"
[ "$nt" = "$kt" ] || fail "tokens differ: native '$nt', kvtier '$kt'"
echo "llamacpp-npm: $NTOK greedy tokens identical natively and under kvtier: ${nt#tokens: }"

# ---- where the KV landed ---------------------------------------------------------
pid=$(sed -n 's/^pid: //p' "$out/kvtier.out")
trace=$out/kvtier.$pid.trace
[ -s "$trace" ] || fail "no trace of the node process ($trace)"
"$kvtier" dump "$trace" >"$out/kvtier.dump" || fail "kvtier dump $trace failed"
far=$("$kvtier" topo | sed -n 's/^far tier: node \([0-9]*\).*/\1/p')
[ -n "$far" ] || fail "kvtier topo names no far tier"
echo "llamacpp-npm: rule '$RULE'; far tier: $("$kvtier" topo | sed -n 's/^far tier: //p')"
grep -q '^numa: ' "$out/native.out" || fail "natively no map is as large as the KV"
python3 - "$out/kvtier.out" "$out/kvtier.dump" "$far" <<'EOF' || exit 1
# For each map at least as large as the KV (numa_maps near the end of the
# run): the last traced map (mmap, or a heap block) that overlaps it says whether kvtier saw it and
# how it placed it; numa_maps must agree. munmaps are not weighed: the trace
# holds the teardown's, made after numa_maps was read. The map with the KV's
# pages is named.
import re, sys
out, dump, far = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
kv = int(re.search(r"^kv_bytes: (\d+)", out, re.M).group(1))
recs = []
for line in dump.splitlines():
    m = re.search(r"\bt=(\d+) .*\bop=(alloc) api=(\w+) kind=mmap .*\bplace=(\S+) addr=0x([0-9a-f]+) size=(\d+)", line)
    if m:
        recs.append((int(m[1]), m[2], m[4], int(m[5], 16), int(m[6])))
recs.sort()
bad, kv_seen = 0, None
for m in re.finditer(r"^numa: size=(\d+) ([0-9a-f]+) (\S+)(.*)$", out, re.M):
    size, start, policy, rest = int(m[1]), int(m[2], 16), m[3], m[4]
    pages = dict((int(n), int(p)) for n, p in re.findall(r"\bN(\d+)=(\d+)", rest))
    last = None
    for r in recs:
        if r[3] < start + size and start < r[3] + r[4]:
            last = r
    if last and last[2].startswith("bind:"):
        seen = "seen, %s" % last[2]
        ok = re.fullmatch(r"(bind|prefer|preferred_many):([0-9,\-]+)", policy) and far in policy.split(":")[1].split(",") \
            and all(n == int(far) for n in pages)
    else:
        seen = "seen, %s" % last[2] if last else "not seen by kvtier"
        ok = policy == "default"
    held = sum(pages.values()) * 4096
    what = "the KV" if held >= kv else "a map"
    print("llamacpp-npm: %s: %d MiB at 0x%x, %s; numa_maps: %s %s" % (
        what, size >> 20, start, seen, policy,
        " ".join("N%d=%d" % kv_ for kv_ in sorted(pages.items())) or "(no pages)"))
    if what == "the KV":
        kv_seen = seen
    if not ok:
        print("FAIL: llamacpp-npm: numa_maps disagrees with kvtier's trace for the map at 0x%x" % start)
        bad = 1
if kv_seen is None:
    print("FAIL: llamacpp-npm: under kvtier no map holds the KV's %d MiB" % (kv >> 20))
    bad = 1
elif not kv_seen.startswith("seen, bind:"):
    print("FAIL: llamacpp-npm: the KV is not where the rule says (%s)" % kv_seen)
    bad = 1
sys.exit(bad)
EOF
echo "llamacpp-npm: passed (files in $out)"
