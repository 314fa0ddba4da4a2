// SPDX-License-Identifier: MIT
// llama.cpp as its npm package ships it (node-llama-cpp with its prebuilt CPU
// binaries, tests/real/package.json): loads MODEL (written by tiny_gguf.mjs)
// with a context of CTX tokens, generates N tokens greedily (temperature 0)
// after a fixed prompt and prints them. Then prints what it knows of where the
// KV cache's memory is: its size, and every map of /proc/self/numa_maps at
// least that large (not file-backed), with its policy and pages per node.
//   node llamacpp_npm.mjs MODEL CTX N
// stdout: "tokens: t1 t2 ...", "pid: P", "kv_bytes: B" then "numa: size=B <numa_maps line>"...
// Never builds llama.cpp and never downloads anything (build: "never").
import { readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, ctxArg, nArg] = process.argv.slice(2);
if (!modelPath || !ctxArg || !nArg) {
	console.error("usage: node llamacpp_npm.mjs MODEL CTX N");
	process.exit(2);
}
const ctx = Number(ctxArg), n = Number(nArg);

const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
	progressLogs: false, logLevel: LlamaLogLevel.error, maxThreads: 2 });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({ contextSize: ctx, batchSize: 64, sequences: 1,
	flashAttention: false, threads: 2 });
const seq = context.getSequence();

const prompt = model.tokenize("w1 w2 w3 w4 w5 w6 w7 w8");
const out = [];
for await (const t of seq.evaluate(prompt, { temperature: 0 })) {
	out.push(t);
	if (out.length >= n) break;
}
console.log(`tokens: ${out.join(" ")}`);

// The KV: f16 K and V of every layer for CTX tokens (the model's metadata).
// Then every map at least that large (the KV's own, and others a rule on
// size could catch), as "numa: size=BYTES <its /proc/self/numa_maps line>".
const a = model.fileInfo.metadata.llama.attention;
const kvBytes = ctx * model.fileInfo.metadata.llama.block_count * a.head_count_kv *
	(a.key_length + a.value_length) * 2;
console.log(`pid: ${process.pid}`);
console.log(`kv_bytes: ${kvBytes}`);
const sizes = new Map();
for (const line of readFileSync("/proc/self/maps", "utf8").split("\n")) {
	const m = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
	if (m) sizes.set(m[1], Number(BigInt(`0x${m[2]}`) - BigInt(`0x${m[1]}`)));
}
for (const line of readFileSync("/proc/self/numa_maps", "utf8").split("\n")) {
	const size = sizes.get(line.split(" ")[0]) ?? 0;
	if (size >= kvBytes && !/\bfile=/.test(line)) console.log(`numa: size=${size} ${line}`);
}
await context.dispose();
await model.dispose();
await llama.dispose();
