#!/usr/bin/env node
// Runs a GGUF file in real llama.cpp -- the CPU binary that the npm package node-llama-cpp 3.21.1
// ships prebuilt (tools/fetch_llama_cpp.sh installs it into .deps/llama_cpp) -- and prints, as one
// JSON object per model, one line each in the order given, what tools/gguf_check.py compares with lathe:
//
//   node tools/llama_cpp_check.mjs MODEL.gguf [MODEL.gguf ...] --text TEXT [--special] --tokens 1,2,3 --greedy N [--deps DIR]
//
// Several models in one process load llama.cpp once (its import and binary check: about 1.1 s of
// each process's 2.6 s for a small model).
//   tokenize   llama.cpp's ids of TEXT, without BOS or EOS, and without special-token parsing
//              unless --special (then "<|end|>" in TEXT is the token of that name)
//   eos, chat_template   the model's end-of-generation token and its tokenizer.chat_template
//   logprobs   for every position of --tokens, the log-probability of every vocabulary entry:
//              node-llama-cpp gives no raw logits, but with temperature 0 it hands out the whole
//              softmax of llama.cpp's logits (float32), whose logarithm is the logits less their
//              log-sum-exp (about 1e-6 off); entries whose probability is below float32's
//              smallest normal number (underflowed, wholly or in part) are null
//   greedy     N tokens after --tokens, each the argmax (temperature 0, no penalty, llama.cpp's
//              greedy sampler), not stopped at an end-of-generation token
//   greedy_text  llama.cpp's detokenization of the greedy tokens before the first EOS
//
// The context runs on one thread, keeps its KV cache in f32 and runs without flash attention (node-llama-cpp's defaults,
// f16 and "auto", would add errors of about 1e-2). Exit 77 (a skip) with one line saying why when the
// package is not installed.
import fs from "node:fs";
import path from "node:path";
import url from "node:url";

function parse(argv) {
  const o = {models: [], text: null, special: false, tokens: [], greedy: 0,
             deps: path.join(path.dirname(url.fileURLToPath(import.meta.url)), "..", ".deps", "llama_cpp")};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--text") o.text = argv[++i];
    else if (a === "--special") o.special = true;
    else if (a === "--tokens") o.tokens = argv[++i].split(",").filter((s) => s !== "").map(Number);
    else if (a === "--greedy") o.greedy = Number(argv[++i]);
    else if (a === "--deps") o.deps = argv[++i];
    else if (a.startsWith("--")) throw new Error("llama_cpp_check: unknown argument " + a);
    else o.models.push(a);
  }
  if (o.models.length === 0)
    throw new Error("usage: node tools/llama_cpp_check.mjs MODEL.gguf [MODEL.gguf ...] [--text T] [--tokens 1,2] [--greedy N]");
  return o;
}

const FLT_MIN = 1.1754943508222875e-38;
const o = parse(process.argv.slice(2));
const entry = path.join(process.env.LATHE_LLAMA_CPP_DIR || o.deps, "node_modules", "node-llama-cpp", "dist", "index.js");
if (!fs.existsSync(entry)) {
  console.log(`llama_cpp_check: node-llama-cpp is not installed (${entry}); run tools/fetch_llama_cpp.sh`);
  process.exit(77);
}
const {getLlama, LlamaLogLevel} = await import(url.pathToFileURL(entry).href);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
// What gguf_check.py compares, for one model file.
async function check(modelPath) {
  const model = await llama.loadModel({modelPath, gpuLayers: 0});
  const out = {llama_cpp: llama.llamaCppRelease, architecture: model.fileInfo.metadata?.general?.architecture,
               eos: model.tokens.eos, chat_template: model.fileInfo.metadata?.tokenizer?.chat_template ?? null};

  if (o.text !== null) out.tokenize = Array.from(model.tokenize(o.text, o.special));

  if (o.tokens.length > 0) {
    const size = o.tokens.length + o.greedy + 1;
    const context = await model.createContext({
      // One thread: the models checked are small, and llama.cpp's default thread count spins on
      // every core it counts (a greedy continuation of 64 tokens took 36 s here, 0.04 s on one).
      contextSize: size, batchSize: size, sequences: 1, flashAttention: false, threads: 1,
      experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const sequence = context.getSequence();
    const evaluated = await sequence.controlledEvaluate(
        o.tokens.map((t) => [t, {generateNext: {probabilities: true, token: true}}]));
    out.logprobs = evaluated.map((r) => {
      const lp = new Array(r.next.probabilities.size).fill(null);
      // A probability below float32's smallest normal number has lost bits to underflow (one of
      // 1e-44 keeps three): it says nothing of llama.cpp's logits, and is left out as one that is 0.
      for (const [token, p] of r.next.probabilities) lp[token] = p >= FLT_MIN ? Math.log(p) : null;
      return lp;
    });
    if (o.greedy > 0) {
      await sequence.clearHistory();
      out.greedy = [];
      for await (const token of sequence.evaluate(o.tokens, {temperature: 0, yieldEogToken: true})) {
        out.greedy.push(token);
        if (out.greedy.length >= o.greedy) break;
      }
      const end = out.greedy.indexOf(model.tokens.eos);
      out.greedy_text = model.detokenize(end < 0 ? out.greedy : out.greedy.slice(0, end));
    }
    await context.dispose();
  }
  await model.dispose();
  return out;
}

for (const modelPath of o.models) process.stdout.write(JSON.stringify(await check(modelPath)) + "\n");
await llama.dispose();
