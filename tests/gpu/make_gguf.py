#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes a tiny random-weights Llama-architecture GGUF model for the llama.cpp
# steps of the real-GPU check (issue 25): few weights, a wide KV (many heads of
# a set head size over a narrow embedding), so that the KV at a given -c is
# many times the weights. Needs numpy and llama.cpp's own gguf-py (PYTHONPATH=
# <llama.cpp>/gguf-py); writes nothing else. Deterministic for a given --seed.
import argparse
import sys

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("make_gguf.py: no gguf module: set PYTHONPATH=<llama.cpp source>/gguf-py")

# ---- the vocabulary ----------------------------------------------------------
# A minimal SentencePiece ("llama") vocabulary: <unk> <s> </s>, the 256 byte
# tokens SPM falls back to (llama.cpp needs <0x0A> for its newline token), then
# words "▁w0".."▁wN" so that a prompt of "w1 w2 ..." is one token per word.
SPACE = "\u2581"


def vocab(n_vocab):
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [
        gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    for b in range(256):
        tokens.append("<0x%02X>" % b)
        scores.append(0.0)
        types.append(gguf.TokenType.BYTE)
    # SPM merges adjacent pieces whose concatenation is a token: "▁"+"w"
    # must be one ("▁w") for "▁w"+"1" to reach "▁w1"
    tokens.append(SPACE + "w")
    scores.append(0.0)
    types.append(gguf.TokenType.NORMAL)
    for i in range(n_vocab - len(tokens)):
        tokens.append("%sw%d" % (SPACE, i))
        scores.append(-float(i))            # SPM merges prefer higher scores
        types.append(gguf.TokenType.NORMAL)
    return tokens, scores, types


# ---- the weights ---------------------------------------------------------------
# numpy shapes are ggml's ne reversed: a {n_in, n_out} matrix is (n_out, n_in)
def weights(a, rng):
    e, h, ff, v = a.embd, a.heads * a.head_dim, a.ff, a.vocab

    def mat(n_out, n_in, gain=1.0):
        return (gain * rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float16)

    def ones(n):
        return np.ones(n, dtype=np.float32)

    # q and k at gain 4: attention far from uniform, so the output depends on
    # what the KV holds; an untied output matrix keeps greedy tokens varied
    out = [("token_embd.weight", mat(v, e, np.sqrt(e))), ("output_norm.weight", ones(e)),
           ("output.weight", mat(v, e, 4.0))]
    for i in range(a.layers):
        p = "blk.%d." % i
        out += [(p + "attn_norm.weight", ones(e)),
                (p + "attn_q.weight", mat(h, e, 4.0)), (p + "attn_k.weight", mat(h, e, 4.0)),
                (p + "attn_v.weight", mat(h, e)), (p + "attn_output.weight", mat(e, h)),
                (p + "ffn_norm.weight", ones(e)),
                (p + "ffn_gate.weight", mat(ff, e)), (p + "ffn_up.weight", mat(ff, e)),
                (p + "ffn_down.weight", mat(e, ff))]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--ctx-train", type=int, default=1 << 20)
    a = ap.parse_args()
    if a.vocab < 261:
        sys.exit("make_gguf.py: --vocab must be at least 261 (specials, 256 bytes, two words)")

    rng = np.random.default_rng(a.seed)
    arch = "llama"
    w = gguf.GGUFWriter(a.out, arch)
    w.add_name("kvtier-tiny-llama-seed%d" % a.seed)
    w.add_context_length(a.ctx_train)
    w.add_embedding_length(a.embd)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.heads)
    w.add_key_length(a.head_dim)
    w.add_value_length(a.head_dim)
    w.add_rope_dimension_count(a.head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    tokens, scores, types = vocab(a.vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    for name, t in weights(a, rng):
        w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # f16 K and V, every layer: what one token of context costs in KV
    print("kv_bytes_per_token=%d" % (2 * a.layers * a.heads * a.head_dim * 2))
    print("vocab=%d layers=%d seed=%d" % (a.vocab, a.layers, a.seed))


if __name__ == "__main__":
    main()
