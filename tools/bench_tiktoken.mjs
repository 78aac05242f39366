// Times tiktoken's `gpt2` encoder (the npm package: tiktoken's Rust core compiled to WebAssembly)
// on a file: encode_ordinary, best of N runs, one thread. Prints one JSON line like
// `lathe tokenizer bench`. Used by tools/bench_tokenizer.sh.
//   NODE_PATH=.../node_modules node tools/bench_tiktoken.mjs FILE [REPEATS]
import { createRequire } from "node:module";
import fs from "node:fs";

const require = createRequire(import.meta.url);
const { get_encoding } = require("tiktoken");
const [file, repeatsArg] = process.argv.slice(2);
const repeats = Number(repeatsArg ?? 3);
const text = fs.readFileSync(file, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
const enc = get_encoding("gpt2");
let best = Infinity, tokens = 0;
for (let r = 0; r < repeats; ++r) {
  const t0 = process.hrtime.bigint();
  tokens = enc.encode_ordinary(text).length;
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
enc.free();
console.log(JSON.stringify({ tokenizer: "tiktoken gpt2 (wasm)", bytes, tokens, single_thread_mb_s: +(bytes / 1e6 / best).toFixed(2) }));
