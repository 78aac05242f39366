// Writes tests/golden/tokenizer_gpt2_ids.json: tiktoken's `gpt2` ids (encode_ordinary, so
// "<|endoftext|>" is ordinary text) of every UTF-8 text in tests/golden/tokenizer_texts/.
// Files ending in .bin are not UTF-8 and only take part in round-trip tests.
//
//   tmp=$(mktemp -d) && (cd "$tmp" && npm install tiktoken@1.0.22)
//   NODE_PATH="$tmp/node_modules" node tests/golden/make_tokenizer_goldens.mjs
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const { get_encoding } = require("tiktoken");
const here = path.dirname(fileURLToPath(import.meta.url));
const dir = path.join(here, "tokenizer_texts");
const enc = get_encoding("gpt2");
const out = {};
for (const name of fs.readdirSync(dir).sort()) {
  if (name.endsWith(".bin")) continue;
  const text = fs.readFileSync(path.join(dir, name), "utf8");
  out[name] = Array.from(enc.encode_ordinary(text));
}
enc.free();
// The package's exports hide package.json; it lies two levels above the resolved entry point.
const pkg = path.join(path.dirname(require.resolve("tiktoken")), "package.json");
const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
const doc = { generator: "tests/golden/make_tokenizer_goldens.mjs", tiktoken: version, encoding: "gpt2", ids: out };
fs.writeFileSync(path.join(here, "tokenizer_gpt2_ids.json"), JSON.stringify(doc) + "\n");
console.log(`wrote ids of ${Object.keys(out).length} texts (tiktoken ${version})`);
