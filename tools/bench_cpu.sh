#!/usr/bin/env bash
# lathe against PyTorch on the CPU, measured in the same run on the same machine: for each config,
# PyTorch at 1 and 2 threads (its best counts) and on exactly one core, lathe at 1 and 2 threads
# and at its default (the thread governor's), tokens/s and peak memory, and lathe's default against
# PyTorch's best.
#   tools/bench_cpu.sh [CONFIG...]      default: tiny small nanogpt-cpu char
# Steps per config: 30 (tiny, nanogpt-cpu), 10 (small), 5 (char); LATHE_BENCH_STEPS overrides.
# PyTorch is Debian's python3-torch; `tools/deps.sh --torch` installs it together with OpenBLAS,
# without which Debian's torch falls back to the reference BLAS and runs about 25x slower (a
# comparison against that would flatter lathe).
set -euo pipefail
cd "$(dirname "$0")/.."
configs=("$@")
((${#configs[@]})) || configs=(tiny small nanogpt-cpu char)
bash tools/deps.sh --torch
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target lathe >/dev/null

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
peak_kib() { /usr/bin/time -f "%M" -o "$tmp/rss" "$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for config in "${configs[@]}"; do
  case "$config" in tiny|nanogpt-cpu) steps=30 ;; small) steps=10 ;; *) steps=5 ;; esac
  steps="${LATHE_BENCH_STEPS:-$steps}"
  echo "== $config ($steps timed steps)"
  best_torch=0
  best_torch_rss=0
  # torch.set_num_threads(1) does not reach OpenBLAS's own thread pool: PyTorch's "1 thread" runs
  # its matrix products on every core. The third run pins OpenBLAS to one core too (one core each).
  for t in 1 2 1-core; do
    if [[ $t == 1-core ]]; then
      peak_kib env OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/torch_gpt_reference.py bench "$config" 1 "$steps"
    else
      peak_kib /usr/bin/python3 tools/torch_gpt_reference.py bench "$config" "$t" "$steps"
    fi
    line=$(cat "$tmp/out")
    [[ $t == 1-core ]] && line="$line (OPENBLAS_NUM_THREADS=1)"
    rate=$(sed -n 's/.*tok_per_s=\([0-9.]*\).*/\1/p' <<<"$line")
    echo "$line peak_rss_mib=$(($(cat "$tmp/rss") / 1024))"
    if awk "BEGIN { exit !($rate > $best_torch) }"; then best_torch=$rate; best_torch_rss=$(($(cat "$tmp/rss") / 1024)); fi
  done
  for t in 1 2 default; do
    threads=(--threads "$t"); [[ $t == default ]] && threads=()
    peak_kib ./build/examples/lathe bench --config "$config" --steps "$steps" "${threads[@]}" --json
    rate=$(sed -n 's/.*"tok_per_s":\([0-9.e+]*\).*/\1/p' "$tmp/out")
    used=$(sed -n 's/.*"threads":\([0-9]*\).*/\1/p' "$tmp/out")
    rss=$(($(cat "$tmp/rss") / 1024))
    printf 'lathe threads=%s(%s) tok_per_s=%.0f peak_rss_mib=%d  vs torch best (%s tok/s, %d MiB): %.2fx\n' \
      "$t" "$used" "$rate" "$rss" "$best_torch" "$best_torch_rss" "$(awk "BEGIN { print $rate / $best_torch }")"
  done
done
