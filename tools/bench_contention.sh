#!/usr/bin/env bash
# lathe under a busy neighbour: one other process spins on one core while `lathe bench` runs at its
# default thread count (the thread governor's) and at one thread, config after config, interleaved.
# The default must be no slower than one thread: a neighbour should cost lathe at most its share.
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
ms() {
  local out
  out=$(./build/examples/lathe bench --config "$1" --steps "$2" --warmup 2 "${@:3}" --json)
  printf '%.1f ms/step (%s threads)' "$(sed -n 's/.*"ms_per_step":\([0-9.]*\).*/\1/p' <<<"$out")" \
    "$(sed -n 's/.*"threads":\([0-9]*\).*/\1/p' <<<"$out")"
}
for config in "${configs[@]}"; do
  case "$config" in tiny|nanogpt-cpu) steps=30 ;; small) steps=10 ;; *) steps=4 ;; esac
  for rep in 1 2; do
    echo "$config default: $(ms "$config" "$steps")   --threads 1: $(ms "$config" "$steps" --threads 1)   --threads 2: $(ms "$config" "$steps" --threads 2)"
  done
done
