#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch part of the real-GPU check (tests/gpu/run.sh).

A small randomly initialised Llama-style model (transformers) generates
greedily with a static KV cache, once natively and once under `kvtier run`
(default policy, small KVTIER_HBM_BUDGET); the output tokens must be
identical. Prints one summary line last. Exits 77 when torch, transformers
or a CUDA device is absent, 1 when the tokens differ or a run fails.
"""
import argparse
import json
import os
import subprocess
import sys
import time

SKIP = 77


def child(args):
    """One generation in this process; prints a JSON line."""
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(json.dumps({"skip": f"import failed: {e}"}))
        return SKIP
    if not torch.cuda.is_available():
        print(json.dumps({"skip": "torch.cuda.is_available() is False"}))
        return SKIP
    torch.manual_seed(1234)
    cfg = LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1376,
                      num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
                      max_position_embeddings=4096)
    model = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.float16).eval()
    gen = torch.Generator().manual_seed(99)
    prompt = torch.randint(0, cfg.vocab_size, (args.batch, 64), generator=gen).cuda()
    kw = dict(max_new_tokens=args.new_tokens, do_sample=False,
              cache_implementation="static", pad_token_id=0)
    with torch.inference_mode():
        model.generate(prompt, **dict(kw, max_new_tokens=4))          # warm-up
        torch.cuda.synchronize()
        t0 = time.monotonic()
        out = model.generate(prompt, **kw)
        torch.cuda.synchronize()
        dt = time.monotonic() - t0
    new = out[:, prompt.shape[1]:]
    print(json.dumps({"tokens": new.tolist(), "seconds": dt,
                      "tokens_per_s": new.numel() / dt,
                      "max_memory_allocated": torch.cuda.max_memory_allocated()}))
    return 0


def run(cmd, env, log):
    with open(log, "w") as f:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=f, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    return p.returncode, (json.loads(lines[-1]) if lines else {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--kvtier", default="build/gpu/kvtier")
    ap.add_argument("--out", default=".")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--budget", default="64M", help="KVTIER_HBM_BUDGET under kvtier")
    args = ap.parse_args()
    if args.child:
        return child(args)

    me = [sys.executable, os.path.abspath(__file__), "--child",
          "--batch", str(args.batch), "--new-tokens", str(args.new_tokens)]
    env = dict(os.environ)
    rc_n, native = run(me, env, os.path.join(args.out, "torch-native.err"))
    if rc_n == SKIP or "skip" in native:
        print(f"torch: SKIP: {native.get('skip', 'skipped')}")
        return SKIP
    env_k = dict(env, KVTIER_HBM_BUDGET=args.budget)
    trace = os.path.join(args.out, "torch-kvtier.%p.trace")
    rc_k, kvt = run([args.kvtier, "run", "--trace", trace, "--"] + me, env_k,
                    os.path.join(args.out, "torch-kvtier.err"))
    with open(os.path.join(args.out, "torch.json"), "w") as f:
        json.dump({"native": native, "kvtier": kvt}, f)
    if rc_n or rc_k or "tokens" not in native or "tokens" not in kvt:
        print(f"torch: FAIL: native rc {rc_n}, kvtier rc {rc_k} (see torch-*.err)")
        return 1
    same = native["tokens"] == kvt["tokens"]
    print(f"torch: tokens {'identical' if same else 'DIFFER'} "
          f"({args.batch}x{args.new_tokens}); native {native['tokens_per_s']:.0f} tok/s "
          f"{native['seconds']:.2f} s, kvtier {kvt['tokens_per_s']:.0f} tok/s {kvt['seconds']:.2f} s")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
