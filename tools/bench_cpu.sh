#!/usr/bin/env bash
# lathe against PyTorch on the CPU, measured in the same run on the same machine (issue 5's speed
# target): PyTorch's best of 1 and 2 threads, lathe at 1 and 2 threads, tokens/s and peak memory.
#   tools/bench_cpu.sh [CONFIG] [STEPS]      default: char 10
# PyTorch is Debian's python3-torch; `tools/deps.sh --torch` installs it together with OpenBLAS,
# without which Debian's torch falls back to the reference BLAS and runs about 25x slower (a
# comparison against that would flatter lathe).
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-char}"
steps="${2:-10}"
bash tools/deps.sh --torch
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target lathe >/dev/null

peak_kib() { /usr/bin/time -f "%M" -o "$tmp/rss" "$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
best_torch=0
best_torch_rss=0
for t in 1 2; do
  peak_kib /usr/bin/python3 tools/torch_gpt_reference.py bench "$config" "$t"
  line=$(cat "$tmp/out")
  rate=$(sed -n 's/.*tok_per_s=\([0-9.]*\).*/\1/p' <<<"$line")
  echo "$line peak_rss_mib=$(($(cat "$tmp/rss") / 1024))"
  if awk "BEGIN { exit !($rate > $best_torch) }"; then best_torch=$rate; best_torch_rss=$(($(cat "$tmp/rss") / 1024)); fi
done
for t in 1 2; do
  peak_kib ./build/examples/lathe bench --config "$config" --steps "$steps" --threads "$t" --json
  rate=$(sed -n 's/.*"tok_per_s":\([0-9.e+]*\).*/\1/p' "$tmp/out")
  rss=$(($(cat "$tmp/rss") / 1024))
  printf 'lathe threads=%d tok_per_s=%.0f peak_rss_mib=%d  vs torch best (%s tok/s, %d MiB): %.2fx\n' \
    "$t" "$rate" "$rss" "$best_torch" "$best_torch_rss" "$(awk "BEGIN { print $rate / $best_torch }")"
done
