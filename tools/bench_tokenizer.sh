#!/usr/bin/env bash
# Encoding throughput of lathe's GPT-2 tokenizer against tiktoken's, in one run on one machine:
# the 10 MB mixed text of tools/make_bench_text.py (prose, C code, many scripts, emoji, odd
# whitespace), lathe on one thread and on all cores (`lathe tokenizer bench`, best of 5), and the
# npm package tiktoken (its Rust core as WebAssembly, one thread, best of 5), twice each,
# alternating. Also checks that both produce the same number of tokens and, through
# `lathe tokenizer encode`, the same ids.
#   tools/bench_tokenizer.sh [build/examples/lathe]
# Needs node and npm (tiktoken is installed into a temporary directory, never into the tree).
set -euo pipefail
cd "$(dirname "$0")/.."
lathe="${1:-build/examples/lathe}"
bash tools/fetch_gpt2_vocab.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm install --silent --no-audit --no-fund tiktoken@1.0.22 >/dev/null)
python3 tools/make_bench_text.py "$tmp/text.txt"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in 1 2; do
  "$lathe" tokenizer bench --tokenizer gpt2 --repeats 5 "$tmp/text.txt"
  NODE_PATH="$tmp/node_modules" node tools/bench_tiktoken.mjs "$tmp/text.txt" 5
done
# Same ids, not just the same count.
"$lathe" tokenizer encode --tokenizer gpt2 --threads 0 "$tmp/text.txt" > "$tmp/lathe.json"
NODE_PATH="$tmp/node_modules" node -e '
  const { get_encoding } = require("tiktoken");
  const fs = require("fs");
  const ids = Array.from(get_encoding("gpt2").encode_ordinary(fs.readFileSync(process.argv[1], "utf8")));
  const mine = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const same = ids.length === mine.length && ids.every((v, i) => v === mine[i]);
  console.log(same ? `ids: identical (${ids.length} tokens)` : "ids: DIFFERENT");
  process.exit(same ? 0 : 1);' "$tmp/text.txt" "$tmp/lathe.json"
