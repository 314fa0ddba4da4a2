#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# README's serving table from the last `make bench-serve`: rewrites the text
# between <!-- serve:begin --> and <!-- serve:end --> in README.md from
# $BUILD/bench-serve.json (jq only), dated and with the commit. Everything
# outside the markers is left byte for byte. `make bench` runs it after
# bench-serve; by hand: tests/bench/serve_readme.sh [bench-serve.json [README.md]].
# SERVE_ROWS=all writes every row (docs/performance.md has them); the
# default keeps README short: the 4x rows of native, offload and kvtier.
# SERVE_ROWS=trace writes the trace rows (serve-like --trace) of the
# default persona between <!-- serve-trace:begin --> and
# <!-- serve-trace:end --> instead; SERVE_ROWS=trace-all every persona's.
# Exit: 0 written (or no jq), 1 missing JSON or markers.
set -u
BUILD=${BUILD:-build}
JSON=${1:-$BUILD/bench-serve.json}
README=${2:-README.md}
ROWS=${SERVE_ROWS:-readme}
BEGIN='<!-- serve:begin -->'
END='<!-- serve:end -->'
if [ "$ROWS" = trace ] || [ "$ROWS" = trace-all ]; then
	BEGIN='<!-- serve-trace:begin -->'
	END='<!-- serve-trace:end -->'
fi

if ! command -v jq >/dev/null; then
	echo "serve_readme: jq not installed: $README's serving table left as it was" >&2
	exit 0
fi
[ -s "$JSON" ] || { echo "serve_readme: no $JSON (run make bench-serve first)" >&2; exit 1; }
if [ "$(grep -cxF "$BEGIN" "$README")" != 1 ] || [ "$(grep -cxF "$END" "$README")" != 1 ]; then
	echo "serve_readme: $README needs exactly one '$BEGIN' line and one '$END' line" >&2
	exit 1
fi
DATE=$(date -u -r "$JSON" +%Y-%m-%dT%H:%MZ)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

# the number, ratio, size and verdict formats of every table
DEFS=$(cat <<'JQ'
  def n($d): if . == null then "-" else (. * pow(10; $d) | round / pow(10; $d) | tostring) end;
  def x($b): if . == null or $b == null or $b == 0 then "-" else ((. / $b) * 100 | round / 100 | tostring) + "×" end;
  def mib: if . == null then "-" else (. / 1048576 | round | tostring) end;
  def verdict: if . == null or . == "-" then "" elif startswith("met") then "met"
               else "**missed**" + (ltrimstr("MISSED") | if . == "" then "" else "" + . end) end;
JQ
)
if [ "$BEGIN" = '<!-- serve-trace:begin -->' ]; then
section=$(jq -r --arg date "$DATE" --arg commit "$COMMIT" --arg rows "$ROWS" "$DEFS"'
  map(select(.trace != null and ($rows == "trace-all" or (.persona == "vllm-v2" and .alternative != "oracle")))) |
  "Serving from public request traces (`make bench-serve`, \($date), commit \($commit); SIMULATED GPU, every figure simulated): `serve-like --trace` replays the Mooncake FAST'"'"'25 synthetic trace (kvcache-ai/Mooncake, Apache-2.0; prefixes shared by hash id) and the Azure LLM inference conversation trace (Azure/AzurePublicDataset, CC-BY-4.0, Splitwise ISCA 2024; no prefix information), read from `../shared/traces/`, at a 4× pool. Open loop: arrivals at trace time ÷ the trace'"'"'s time scale; goodput: requests per trace second within TTFT ≤ 2 s and TPOT ≤ 100 ms of trace time. Closed loop: every request at once, in trace order. The model, the time scales and why: [docs/workloads.md](docs/workloads.md), \"Serving from request traces\". Targets (kvtier): closed ≥ 1.2× native tok/s and ≥ 1.0× offload; open goodput ≥ 1.2× native and TTFT p50 ≤ 0.75× native.",
  "",
  "| trace | persona | loop | alternative | output tok/s | goodput req/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | prefix hits | link MiB | targets |",
  "|---|---|---|---|---|---|---|---|---|---|---|",
  ( group_by([.trace, .persona, .mode]) | sort_by(.[0] | [(.trace | startswith("synthetic") | not), .persona != "vllm-v2", .mode != "open"]) | .[] |
    (map(select(.alternative == "native")) | .[0]) as $nat |
    .[] |
    "| \(.trace) | \(.persona) | \(.mode) | \(.alternative) | \(.output_tokens_per_s | n(0))\(if .alternative != "native" and $nat != null then " (" + (.output_tokens_per_s | x($nat.output_tokens_per_s)) + ")" else "" end) | \(if .goodput_rps == null then "-" else (.goodput_rps | n(3)) + (if .alternative != "native" and $nat != null then " (" + (.goodput_rps | x($nat.goodput_rps)) + ")" else "" end) end) | \(.ttft_ms_p50 | n(2)) / \(.ttft_ms_p99 | n(1)) | \(.tpot_ms_p50 | n(3)) / \(.tpot_ms_p99 | n(3)) | \(.prefix_hit_rate | n(3)) | \(.bytes_link / 1048576 | round) | \(.targets | verdict) |" )
' "$JSON") || { echo "serve_readme: $JSON did not parse" >&2; exit 1; }
elif [ "$ROWS" = readme ]; then
section=$(jq -r --arg date "$DATE" --arg commit "$COMMIT" "$DEFS"'
  def sees: {
    "vllm-v2": ["appended block ids and UVA staged writes; its decoders rebuild the GPU table in shadow and tell which blocks a step takes fresh, whose dead contents kvtier drops instead of moving", "`VLLM_USE_V2_MODEL_RUNNER=0` with the `TRITON_ATTN` backend (the `vllm-v1-triton` row)"],
    "vllm-v1-fa": ["whole table rows uploaded; FlashAttention'"'"'s params struct, read whole, names them", "`TRITON_ATTN` (the `vllm-v1-triton` row)"],
    "vllm-v1-triton": ["whole table rows uploaded beside separate K/V parameters", "nothing more to give"],
    "sglang": ["request rows and lengths only: slot ids never leave the GPU", "none known; SGLang sizes its pool from free memory, so under kvtier it keeps the pool that fits (kvtier = native)"],
    "llamacpp": ["one buffer, read up to its high-water cell every step", "none; with `-c` unset (its default) `--fit` sizes the cache to the free memory, so under kvtier it keeps the cache that fits (kvtier = native); a `-c` past HBM is read whole each step (0.07× native at 4×)"],
    "hybrid": ["two pools (window, full), block tables uploaded; its larger pool lets it run a larger batch than HBM holds (kvtier says so)", "cap its running requests (vLLM `--max-num-seqs`; serve-like `--max-batch`): docs/performance.md, hybrid, measured it above native at every pool (at 5 running requests for 2×, 8 for 4× and 8×)"] };
  "Serving by server (`make bench-serve`, \($date), commit \($commit); SIMULATED GPU: the `serve-like` workload, one persona per server'"'"'s default path, [docs/workloads.md](docs/workloads.md)). `native`: the pool that fits; `offload`: the server'"'"'s own KV offload at a 4× pool; `kvtier`: an N× pool under `kvtier run`, shipped defaults, as × native throughput at N = 2, 4, 8; `evidence`: the class kvtier settled on at 4× (`blocks`: a block table names each step'"'"'s blocks). Targets (4×): ≥ 1.2× native throughput, ≤ 0.75× its TTFT p50, ≥ 1.0× offload, never below native. Every row and why: [docs/performance.md](docs/performance.md), \"Server personas\".",
  "",
  "| server (persona) | what kvtier sees on the default path | to give it more | native tok/s | offload 4× | kvtier 2× / 4× / 8× | TTFT 4× ÷ native | evidence | targets (4×) |",
  "|---|---|---|---|---|---|---|---|---|",
  ( map(select(.trace == null)) | group_by(.persona // "vllm-v1-triton") | sort_by(.[0].persona | if . == "vllm-v2" then 0 elif . == "vllm-v1-fa" then 1 elif . == "vllm-v1-triton" then 2 elif . == "sglang" then 3 elif . == "llamacpp" then 4 elif . == "hybrid" then 5 else 6 end) | .[] |
    . as $g | ($g[0].persona // "vllm-v1-triton") as $p |
    ($g | map(select(.alternative == "native")) | .[0]) as $nat |
    ($g | map(select(.alternative == "offload" and .pool_over_hbm == 4)) | .[0]) as $off |
    ([2, 4, 8] | map(. as $x | ($g | map(select(.alternative == "kvtier" and .pool_over_hbm == $x)) | .[0]))) as $kv |
    (sees[$p] // ["-", "-"]) as $t |
    "| \($p) | \($t[0]) | \($t[1]) | \($nat.output_tokens_per_s | n(0)) | \(if $off == null then "none" else ($off.output_tokens_per_s | x($nat.output_tokens_per_s)) end) | \($kv | map(if . == null or .output_tokens_per_s == null then "no result" else (.output_tokens_per_s | x($nat.output_tokens_per_s)) end) | join(" / ")) | \(if $kv[1] == null then "-" else ($kv[1].ttft_ms_p50 | x($nat.ttft_ms_p50)) end) | \(if $kv[1] == null or ($kv[1].evidence // "-") == "-" then "" else ($kv[1].evidence | gsub("\\+"; ", ")) end) | \(if $kv[1] == null then "**missed** (no result)" else ($kv[1].targets | verdict) end) |" )
' "$JSON") || { echo "serve_readme: $JSON did not parse" >&2; exit 1; }
else
section=$(jq -r --arg date "$DATE" --arg commit "$COMMIT" --arg rows "$ROWS" "$DEFS"'
  "Serving (`make bench-serve`, \($date), commit \($commit); SIMULATED GPU, every figure simulated): the `serve-like` workload (multi-turn sessions, an LRU prefix cache) on the same arrival schedule for every row, once per server persona: how the server talks to the GPU each step, as that server'"'"'s default path does ([docs/workloads.md](docs/workloads.md), \"Server personas\"). `native`: the pool that fits; `offload`: that pool plus the server'"'"'s own KV offload (vLLM OffloadingConnector: a pinned host pool of N−1×); `kvtier`: an N× pool from `cudaMalloc` under `kvtier run`, shipped defaults; `oracle`: an N× managed pool with each step'"'"'s chunks prefetched on a copy engine as soon as the step is known. `evidence`: the class of evidence kvtier settled on for its KV ranges on that run (its trace, `evidence.classes`): `blocks` (a block table names each step'"'"'s blocks: uploaded, or rebuilt by a server decoder), `allocation` (launches name the allocation, not which part), `faults` (CUPTI faults only), `none`. The device runs in virtual time, so every run prints these same figures. Targets (kvtier rows): at 4× ≥ 1.2× native throughput and ≤ 0.75× its TTFT p50; at every N ≥ 1.0× offload throughput; never below native. Why, and where kvtier misses: [docs/performance.md](docs/performance.md), \"Server personas\".",
  "",
  "| persona | pool ÷ HBM | alternative | output tok/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | prefix hits | link MiB | evidence | targets |",
  "|---|---|---|---|---|---|---|---|---|---|",
  ( map(select(.trace == null and ($rows == "all" or ((.pool_over_hbm == 4 or .alternative == "native") and .alternative != "oracle")))) | group_by(.persona // "vllm-v1-triton") | sort_by(.[0].persona | if . == "vllm-v2" then 0 elif . == "vllm-v1-fa" then 1 elif . == "vllm-v1-triton" then 2 elif . == "sglang" then 3 elif . == "llamacpp" then 4 elif . == "hybrid" then 5 else 6 end) | .[] |
    ((map(select(.alternative == "native")) | .[0:1]) + map(select(.alternative != "native")))[] |
    "| \(.persona // "vllm-v1-triton") | \(if .alternative == "native" then "1" else (.pool_over_hbm | tostring) end)×\(if (.pool_capped // 0) == 1 then " (the server kept 1×)" else "" end) | \(.alternative) | \(.output_tokens_per_s | n(0)) | \(.ttft_ms_p50 | n(2)) / \(.ttft_ms_p99 | n(1)) | \(.tpot_ms_p50 | n(3)) / \(.tpot_ms_p99 | n(3)) | \(.prefix_hit_rate | n(3)) | \(.bytes_link | mib) | \(if (.evidence // "-") == "-" then "" else (.evidence | gsub("\\+"; ", ")) end) | \(.targets | verdict) |" )
' "$JSON") || { echo "serve_readme: $JSON did not parse" >&2; exit 1; }
fi

tmp=$README.serve.$$
printf '%s\n' "$section" >"$tmp.body"
awk -v b="$BEGIN" -v e="$END" -v bodyfile="$tmp.body" '
	$0 == b { print; while ((getline l < bodyfile) > 0) print l; skip = 1; next }
	$0 == e { skip = 0 }
	!skip' "$README" >"$tmp" && mv "$tmp" "$README"
rc=$?
rm -f "$tmp" "$tmp.body"
[ $rc = 0 ] || exit 1
echo "serve_readme: $README serving table rewritten from $JSON ($DATE)"
