#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch part of the real-GPU check (tests/gpu/run.sh).

A small randomly initialised Llama-style model (transformers) generates
greedily with a static KV cache, once natively and once under `kvtier run`
(default policy, small KVTIER_HBM_BUDGET); the output tokens must be
identical. Prints one summary line last. Exits 77 when torch, transformers
or a CUDA device is absent, 1 when the tokens differ or a run fails.

Each generation runs in a child with its own time limit (--child-s). The
child logs its stages with timestamps to stderr; when it overruns, the
parent sends SIGUSR1 (faulthandler prints every thread's Python stack to
the child's .err log), waits 3 s, then kills it: a timeout says where it
was. torch.compile is off (TORCHDYNAMO_DISABLE=1) in both runs: generate()
with a static cache may compile the model first, which can take minutes,
and this check is about kvtier under the process, not compile time.
"""
import argparse
import faulthandler
import json
import os
import signal
import subprocess
import sys
import time

T0 = time.monotonic()


def stage(what):
    """A timestamped progress line on stderr (the .err logs)."""
    print(f"[{time.monotonic() - T0:7.2f} s] {what}", file=sys.stderr, flush=True)

SKIP = 77


def child(args):
    """One generation in this process; prints a JSON line."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stage("child start")
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(json.dumps({"skip": f"import failed: {e}"}))
        return SKIP
    stage(f"imported torch {torch.__version__}")
    if not torch.cuda.is_available():
        print(json.dumps({"skip": "torch.cuda.is_available() is False"}))
        return SKIP
    torch.manual_seed(1234)
    cfg = LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1376,
                      num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
                      max_position_embeddings=4096)
    model = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.float16).eval()
    stage("model on the GPU")
    gen = torch.Generator().manual_seed(99)
    prompt = torch.randint(0, cfg.vocab_size, (args.batch, 64), generator=gen).cuda()
    kw = dict(max_new_tokens=args.new_tokens, do_sample=False,
              cache_implementation="static", pad_token_id=0)
    with torch.inference_mode():
        model.generate(prompt, **dict(kw, max_new_tokens=4))          # warm-up
        torch.cuda.synchronize()
        stage("warm-up generate done")
        t0 = time.monotonic()
        out = model.generate(prompt, **kw)
        torch.cuda.synchronize()
        dt = time.monotonic() - t0
    stage(f"generate done in {dt:.2f} s")
    new = out[:, prompt.shape[1]:]
    print(json.dumps({"tokens": new.tolist(), "seconds": dt,
                      "tokens_per_s": new.numel() / dt,
                      "max_memory_allocated": torch.cuda.max_memory_allocated()}))
    return 0


def run(cmd, env, log, limit_s):
    """Run a child with a time limit; on overrun its stacks go to log.
    Returns (rc, last JSON line as a dict); rc 124 on a timeout."""
    # its own process group: under `kvtier run` the Python child is a
    # grandchild, and the signals must reach it
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=f, text=True,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=limit_s)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            f.write(f"torch_check: the child overran {limit_s:.0f} s; its stacks:\n")
            f.flush()
            os.killpg(p.pid, signal.SIGUSR1)
            time.sleep(3)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, _ = p.communicate()
            rc = 124
    lines = [l for l in (out or "").splitlines() if l.startswith("{")]
    return rc, (json.loads(lines[-1]) if lines else {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--kvtier", default="build/gpu/kvtier")
    ap.add_argument("--out", default=".")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--budget", default="64M", help="KVTIER_HBM_BUDGET under kvtier")
    ap.add_argument("--child-s", type=float, default=80,
                    help="time limit of each generation child, seconds")
    args = ap.parse_args()
    if args.child:
        return child(args)

    me = [sys.executable, os.path.abspath(__file__), "--child",
          "--batch", str(args.batch), "--new-tokens", str(args.new_tokens)]
    env = dict(os.environ, TORCHDYNAMO_DISABLE="1")
    rc_n, native = run(me, env, os.path.join(args.out, "torch-native.err"), args.child_s)
    if rc_n == SKIP or "skip" in native:
        print(f"torch: SKIP: {native.get('skip', 'skipped')}")
        return SKIP
    env_k = dict(env, KVTIER_HBM_BUDGET=args.budget)
    trace = os.path.join(args.out, "torch-kvtier.%p.trace")
    rc_k, kvt = run([args.kvtier, "run", "--trace", trace, "--"] + me, env_k,
                    os.path.join(args.out, "torch-kvtier.err"), args.child_s)
    with open(os.path.join(args.out, "torch.json"), "w") as f:
        json.dump({"native": native, "kvtier": kvt}, f)
    if rc_n or rc_k or "tokens" not in native or "tokens" not in kvt:
        why = lambda rc: "TIMEOUT (stacks in its .err)" if rc == 124 else f"rc {rc}"
        print(f"torch: FAIL: native {why(rc_n)}, kvtier {why(rc_k)} (see torch-*.err)")
        return 1
    same = native["tokens"] == kvt["tokens"]
    print(f"torch: tokens {'identical' if same else 'DIFFER'} "
          f"({args.batch}x{args.new_tokens}); native {native['tokens_per_s']:.0f} tok/s "
          f"{native['seconds']:.2f} s, kvtier {kvt['tokens_per_s']:.0f} tok/s {kvt['seconds']:.2f} s")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
