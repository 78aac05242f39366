#!/usr/bin/env bash
# lathe against PyTorch on the CPU, measured in the same run on the same machine: for each config,
# PyTorch at 1 and 2 threads (its best counts) and on exactly one core, lathe at 1 and 2 threads
# and at its default (the thread governor's), tokens/s and peak memory, and lathe's default against
# PyTorch's best.
#   tools/bench_cpu.sh [CONFIG...]      default: tiny small nanogpt-cpu char
# Steps per config: 30 (tiny, nanogpt-cpu), 10 (small), 5 (char); LATHE_BENCH_STEPS overrides.
# LATHE_BENCH_ROUNDS=R runs every program R times, interleaved, and reports each one's best.
# Target, per config: lathe's default at least 1.25x PyTorch's best tokens/s, with a peak RSS no
# larger than that PyTorch run's; the script exits 1 when a config misses either (after printing
# every figure).
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
# A shared machine slows single runs by whatever else runs then; the best of several interleaved
# rounds is each program's speed. LATHE_BENCH_ROUNDS (default 1) sets how many.
rounds="${LATHE_BENCH_ROUNDS:-1}"
for config in "${configs[@]}"; do
  case "$config" in tiny|nanogpt-cpu) steps=30 ;; small) steps=10 ;; *) steps=5 ;; esac
  steps="${LATHE_BENCH_STEPS:-$steps}"
  echo "== $config ($steps timed steps, best of $rounds round(s))"
  declare -A best=() best_rss=() threads_used=()
  for ((round = 1; round <= rounds; round++)); do
    # torch.set_num_threads(1) does not reach OpenBLAS's own thread pool: PyTorch's "1 thread"
    # runs its matrix products on every core. "1-core" pins OpenBLAS to one core too.
    for t in torch:1 torch:2 torch:1-core lathe:1 lathe:2 lathe:default; do
      case "$t" in
        torch:1-core) peak_kib env OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/torch_gpt_reference.py bench "$config" 1 "$steps" ;;
        torch:*) peak_kib /usr/bin/python3 tools/torch_gpt_reference.py bench "$config" "${t#torch:}" "$steps" ;;
        lathe:default) peak_kib ./build/examples/lathe bench --config "$config" --steps "$steps" --json ;;
        lathe:*) peak_kib ./build/examples/lathe bench --config "$config" --steps "$steps" --threads "${t#lathe:}" --json ;;
      esac
      if [[ $t == torch:* ]]; then
        rate=$(sed -n 's/.*tok_per_s=\([0-9.]*\).*/\1/p' "$tmp/out")
      else
        rate=$(sed -n 's/.*"tok_per_s":\([0-9.e+]*\).*/\1/p' "$tmp/out")
        threads_used[$t]=$(sed -n 's/.*"threads":\([0-9]*\).*/\1/p' "$tmp/out")
      fi
      printf '  round %d %-14s %8.0f tok/s\n' "$round" "$t" "$rate"
      if awk "BEGIN { exit !($rate > ${best[$t]:-0}) }"; then best[$t]=$rate; best_rss[$t]=$(($(cat "$tmp/rss") / 1024)); fi
    done
  done
  best_torch=torch:1
  for t in torch:2 torch:1-core; do
    awk "BEGIN { exit !(${best[$t]} > ${best[$best_torch]}) }" && best_torch=$t
  done
  for t in torch:1 torch:2 torch:1-core lathe:1 lathe:2 lathe:default; do
    printf '%-14s %8.0f tok/s  peak RSS %5d MiB' "$t" "${best[$t]}" "${best_rss[$t]}"
    [[ $t == lathe:* ]] && printf '  (%s threads)  %.2fx %s' "${threads_used[$t]}" \
      "$(awk "BEGIN { print ${best[$t]} / ${best[$best_torch]} }")" "$best_torch"
    printf '\n'
  done
  ratio=$(awk "BEGIN { printf \"%.2f\", ${best[lathe:default]} / ${best[$best_torch]} }")
  if awk "BEGIN { exit !($ratio >= 1.25 && ${best_rss[lathe:default]} <= ${best_rss[$best_torch]}) }"; then
    echo "$config: target met (lathe's default ${ratio}x $best_torch, at least 1.25x; peak RSS ${best_rss[lathe:default]} <= ${best_rss[$best_torch]} MiB)"
  else
    echo "$config: TARGET MISSED (lathe's default ${ratio}x $best_torch, target at least 1.25x; peak RSS ${best_rss[lathe:default]} against ${best_rss[$best_torch]} MiB, target no more)"
    missed=1
  fi
  unset best best_rss threads_used
done
exit "${missed:-0}"
