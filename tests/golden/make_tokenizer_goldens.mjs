// Writes tests/golden/tokenizer_gpt2_ids.json: tiktoken's `gpt2` ids (encode_ordinary, so
// "<|endoftext|>" is ordinary text) of every UTF-8 text in tests/golden/tokenizer_texts/, and the
// pieces (their lengths in UTF-8 bytes) that the gpt2 and gpt4 pre-tokenizer patterns cut each
// text into when another regex engine, V8's, runs them: a check of PCRE2's matching that does not
// depend on a vocabulary (lathe has none for GPT-4). Files ending in .bin are not UTF-8 and only
// take part in round-trip tests.
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

// tiktoken's patterns in JavaScript's syntax: \s spelled \p{White_Space} as lathe spells it (JS's
// \s also holds U+FEFF), and GPT-4's possessive `?+` and `++` written greedy, which JS lacks; they
// match the same here, since what follows each (a letter, a line break) is outside its class.
const patterns = {
  gpt2: /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu,
  gpt4: /'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\p{White_Space}\p{L}\p{N}]+[\r\n]*|\p{White_Space}*[\r\n]|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu,
};
function pieceLengths(text, re) {
  const lengths = [];
  let covered = 0;
  for (const m of text.matchAll(re)) {
    if (m.index !== covered) throw new Error("a gap in valid UTF-8: the pattern must match every character");
    lengths.push(Buffer.byteLength(m[0], "utf8"));
    covered = m.index + m[0].length;
  }
  if (covered !== text.length) throw new Error("text left unmatched at the end");
  return lengths;
}

const out = {};
const pieces = { gpt2: {}, gpt4: {} };
for (const name of fs.readdirSync(dir).sort()) {
  if (name.endsWith(".bin")) continue;
  const text = fs.readFileSync(path.join(dir, name), "utf8");
  out[name] = Array.from(enc.encode_ordinary(text));
  for (const p of Object.keys(patterns)) pieces[p][name] = pieceLengths(text, patterns[p]);
}
enc.free();
// The package's exports hide package.json; it lies two levels above the resolved entry point.
const pkg = path.join(path.dirname(require.resolve("tiktoken")), "package.json");
const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
const doc = { generator: "tests/golden/make_tokenizer_goldens.mjs", tiktoken: version, encoding: "gpt2", ids: out,
              piece_bytes: pieces };
fs.writeFileSync(path.join(here, "tokenizer_gpt2_ids.json"), JSON.stringify(doc) + "\n");
console.log(`wrote ids of ${Object.keys(out).length} texts (tiktoken ${version})`);
