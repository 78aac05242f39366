#!/usr/bin/env bash
# lathe under a busy neighbour: one other process spins on one core while `lathe bench` runs at its
# default thread count (the thread governor's) and at one thread, config after config, interleaved.
# The default must be no slower than one thread: a neighbour should cost lathe at most its share.
# Target: each config's default within 10% of --threads 1 (their medians over the repetitions,
# which take turns); the script exits 1 when a config misses it.
#   tools/bench_contention.sh [CONFIG...]      default: tiny small nanogpt-cpu char
set -euo pipefail
cd "$(dirname "$0")/.."
configs=("$@")
((${#configs[@]})) || configs=(tiny small nanogpt-cpu char)
bash tools/deps.sh
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target lathe >/dev/null

# The neighbour: a shell loop, one core's worth of work, until this script ends.
bash -c 'while :; do :; done' &
spinner=$!
trap 'kill $spinner 2>/dev/null' EXIT
sleep 1
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); one core kept busy by pid $spinner"
ms() {  # prints ms/step and the thread count
  local out
  out=$(./build/examples/lathe bench --config "$1" --steps "$2" --warmup 2 "${@:3}" --json)
  echo "$(sed -n 's/.*"ms_per_step":\([0-9.]*\).*/\1/p' <<<"$out") $(sed -n 's/.*"threads":\([0-9]*\).*/\1/p' <<<"$out")"
}
median() { tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
missed=0
for config in "${configs[@]}"; do
  case "$config" in tiny|nanogpt-cpu) steps=30 ;; small) steps=10 ;; *) steps=4 ;; esac
  governed=() one=()
  for rep in 1 2; do
    r=$(ms "$config" "$steps"); read -r g gt <<<"$r"
    r=$(ms "$config" "$steps" --threads 1); read -r o _ <<<"$r"
    r=$(ms "$config" "$steps" --threads 2); read -r t _ <<<"$r"
    printf '%s default: %.1f ms/step (%s threads)   --threads 1: %.1f ms/step   --threads 2: %.1f ms/step\n' \
      "$config" "$g" "$gt" "$o" "$t"
    governed+=("$g") one+=("$o")
  done
  g=$(echo "${governed[*]}" | median) o=$(echo "${one[*]}" | median)
  if awk "BEGIN { exit !($g <= 1.10 * $o) }"; then
    printf '%s: target met (default %.1f ms/step, within 10%% of --threads 1 at %.1f)\n' "$config" "$g" "$o"
  else
    printf '%s: TARGET MISSED (default %.1f ms/step, more than 10%% over --threads 1 at %.1f)\n' "$config" "$g" "$o"
    missed=1
  fi
done
exit "$missed"
