// SPDX-License-Identifier: MIT
// A tiny random-weights Llama-architecture GGUF model, written by kvtier's own
// code from GGUF's documented layout (version 3, little-endian): few weights, a
// wide KV (many heads of 64 over a narrow embedding), so that a context of a
// few thousand tokens holds a KV cache of hundreds of MiB. Deterministic for a
// seed. Test-only; writes nothing but the file it is given.
//   node tiny_gguf.mjs OUT [--seed N]      (or import { writeTinyGguf })
import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

/* ---- the file format ---- */
// Metadata value types and tensor types, as the GGUF specification numbers them.
const T_UINT32 = 4, T_INT32 = 5, T_FLOAT32 = 6, T_BOOL = 7, T_STRING = 8, T_ARRAY = 9;
const GGML_F32 = 0;
const ALIGN = 32;                       // general.alignment's default

class Out {
	constructor() { this.parts = []; this.len = 0; }
	push(buf) { this.parts.push(buf); this.len += buf.length; }
	u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.push(b); }
	i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.push(b); }
	u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
	f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.push(b); }
	str(s) { const b = Buffer.from(s, "utf8"); this.u64(b.length); this.push(b); }
	pad() { const n = (ALIGN - (this.len % ALIGN)) % ALIGN; if (n) this.push(Buffer.alloc(n)); }
}

// One metadata pair: [key, type, value] (arrays: [key, T_ARRAY, [elemType, values]]).
function writeKv(o, [key, type, value]) {
	o.str(key);
	o.u32(type);
	const one = (t, v) => {
		if (t === T_UINT32) o.u32(v);
		else if (t === T_INT32) o.i32(v);
		else if (t === T_FLOAT32) o.f32(v);
		else if (t === T_BOOL) o.push(Buffer.from([v ? 1 : 0]));
		else if (t === T_STRING) o.str(v);
		else throw new Error(`tiny_gguf: type ${t} not written`);
	};
	if (type !== T_ARRAY) return one(type, value);
	const [et, vals] = value;
	o.u32(et);
	o.u64(vals.length);
	for (const v of vals) one(et, v);
}

/* ---- the model ---- */
// A SentencePiece ("llama") vocabulary: <unk> <s> </s>, the 256 byte tokens
// SPM falls back to (llama.cpp needs <0x0A> as its newline token), "▁w", then
// words "▁w0".."▁wN" so that "w1 w2 ..." is one token per word.
const TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_BYTE = 6;
function vocab(n) {
	const tokens = ["<unk>", "<s>", "</s>"], scores = [0, 0, 0];
	const types = [TOK_UNKNOWN, TOK_CONTROL, TOK_CONTROL];
	for (let b = 0; b < 256; b++) {
		tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
		scores.push(0); types.push(TOK_BYTE);
	}
	tokens.push("\u2581w"); scores.push(0); types.push(TOK_NORMAL);
	for (let i = 0; tokens.length < n; i++) {
		tokens.push(`\u2581w${i}`); scores.push(-i); types.push(TOK_NORMAL);  // SPM prefers higher scores
	}
	return { tokens, scores, types };
}

// mulberry32 and Box-Muller: the same normal deviates for a seed on every machine.
function normals(seed) {
	let s = seed >>> 0;
	const u = () => {
		s = (s + 0x6d2b79f5) >>> 0;
		let t = s;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
	};
	return () => Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
}

// Tensors as [name, ne (ggml order: the row length first), Float32Array].
// q and k at gain 4: attention far from uniform, so each token depends on
// what the KV holds; an untied output matrix keeps greedy tokens varied.
function weights(m, randn) {
	const e = m.embd, h = m.heads * m.headDim, ff = m.ff, v = m.vocab;
	const mat = (nIn, nOut, gain = 1) => {
		const a = new Float32Array(nIn * nOut), k = gain / Math.sqrt(nIn);
		for (let i = 0; i < a.length; i++) a[i] = k * randn();
		return [[nIn, nOut], a];
	};
	const ones = (n) => [[n], new Float32Array(n).fill(1)];
	const out = [["token_embd.weight", ...mat(e, v, Math.sqrt(e))], ["output_norm.weight", ...ones(e)],
		["output.weight", ...mat(e, v, 4)]];
	for (let i = 0; i < m.layers; i++) {
		const p = `blk.${i}.`;
		out.push([p + "attn_norm.weight", ...ones(e)],
			[p + "attn_q.weight", ...mat(e, h, 4)], [p + "attn_k.weight", ...mat(e, h, 4)],
			[p + "attn_v.weight", ...mat(e, h)], [p + "attn_output.weight", ...mat(h, e)],
			[p + "ffn_norm.weight", ...ones(e)],
			[p + "ffn_gate.weight", ...mat(e, ff)], [p + "ffn_up.weight", ...mat(e, ff)],
			[p + "ffn_down.weight", ...mat(ff, e)]);
	}
	return out;
}

export const DEFAULTS = { seed: 47, layers: 16, embd: 64, heads: 8, headDim: 64, ff: 128, vocab: 512,
	ctxTrain: 1 << 20 };

// KV bytes per token of context: f16 K and V, every layer.
export const kvBytesPerToken = (m) => 2 * m.layers * m.heads * m.headDim * 2;

export function writeTinyGguf(path, opts = {}) {
	const m = { ...DEFAULTS, ...opts };
	const voc = vocab(m.vocab);
	const A = "llama";
	const kv = [
		["general.architecture", T_STRING, A],
		["general.name", T_STRING, `kvtier-tiny-llama-seed${m.seed}`],
		["general.file_type", T_UINT32, 0],                     // all F32
		[`${A}.context_length`, T_UINT32, m.ctxTrain],
		[`${A}.embedding_length`, T_UINT32, m.embd],
		[`${A}.block_count`, T_UINT32, m.layers],
		[`${A}.feed_forward_length`, T_UINT32, m.ff],
		[`${A}.attention.head_count`, T_UINT32, m.heads],
		[`${A}.attention.head_count_kv`, T_UINT32, m.heads],
		[`${A}.attention.key_length`, T_UINT32, m.headDim],
		[`${A}.attention.value_length`, T_UINT32, m.headDim],
		[`${A}.rope.dimension_count`, T_UINT32, m.headDim],
		[`${A}.attention.layer_norm_rms_epsilon`, T_FLOAT32, 1e-5],
		[`${A}.vocab_size`, T_UINT32, m.vocab],
		["tokenizer.ggml.model", T_STRING, "llama"],
		["tokenizer.ggml.tokens", T_ARRAY, [T_STRING, voc.tokens]],
		["tokenizer.ggml.scores", T_ARRAY, [T_FLOAT32, voc.scores]],
		["tokenizer.ggml.token_type", T_ARRAY, [T_INT32, voc.types]],
		["tokenizer.ggml.unknown_token_id", T_UINT32, 0],
		["tokenizer.ggml.bos_token_id", T_UINT32, 1],
		["tokenizer.ggml.eos_token_id", T_UINT32, 2],
		["tokenizer.ggml.add_bos_token", T_BOOL, true],
		["tokenizer.ggml.add_eos_token", T_BOOL, false],
	];
	const tensors = weights(m, normals(m.seed));
	const o = new Out();
	o.push(Buffer.from("GGUF", "latin1"));
	o.u32(3);
	o.u64(tensors.length);
	o.u64(kv.length);
	for (const pair of kv) writeKv(o, pair);
	let off = 0;
	for (const [name, ne, data] of tensors) {          // tensor infos, offsets into the data section
		o.str(name);
		o.u32(ne.length);
		for (const d of ne) o.u64(d);
		o.u32(GGML_F32);
		o.u64(off);
		off += Math.ceil(data.byteLength / ALIGN) * ALIGN;
	}
	o.pad();
	for (const [, , data] of tensors) {
		o.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
		o.pad();
	}
	writeFileSync(path, Buffer.concat(o.parts, o.len));
	return m;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
	const [out, flag, seed] = process.argv.slice(2);
	if (!out || (flag && flag !== "--seed")) {
		console.error("usage: node tiny_gguf.mjs OUT [--seed N]");
		process.exit(2);
	}
	const m = writeTinyGguf(out, flag ? { seed: Number(seed) } : {});
	console.log(`kv_bytes_per_token=${kvBytesPerToken(m)} vocab=${m.vocab} layers=${m.layers} seed=${m.seed}`);
}
