#!/usr/bin/env bash
# lathe's main job: install what is needed, build, train a small GPT on Debian's fortunes corpus,
# then sample from it. Extra arguments go to `lathe train` (e.g. --steps 2000 --config small).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target lathe
out=runs/fortunes
rm -rf "$out"  # a fresh demo run each time (lathe train refuses a directory that holds a run)
./build/examples/lathe train --data /usr/share/games/fortunes --config tiny --lr 3e-3 \
  --steps 600 --out "$out" "$@"
./build/examples/lathe sample --checkpoint "$out/model.safetensors" --prompt "The " --tokens 300 \
  --temperature 0.8 --top-k 40 --seed 1
echo "loss curves: $out/loss.svg, metrics: $out/metrics.jsonl"
