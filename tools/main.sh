#!/usr/bin/env bash
# lathe's main job: install what is needed, build, train a small GPT on Debian's fortunes corpus,
# sample from it, then fine-tune it on conversations and ask it two questions. Extra arguments go
# to the first `lathe train` (e.g. --steps 2000 --config small).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
export PATH="$PATH:/usr/local/cuda/bin"
# The job trains on the CPU. Without a GPU, compiling the CUDA kernels would only cost minutes, so
# the program is built without them in build-cpu/ (tools/test.sh's build/ always compiles them).
if nvidia-smi -L >/dev/null 2>&1; then build=build cuda=(); else build=build-cpu cuda=(-DLATHE_CUDA=OFF); fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target lathe
out=runs/fortunes
rm -rf "$out"  # a fresh demo run each time (lathe train refuses a directory that holds a run)
# The `small` preset (0.8M parameters), 2500 steps: about four minutes on two cores, and a sample
# that reads like English (validation loss about 1.72 nats per byte). A setting given as an argument
# replaces the default (lathe refuses a flag given twice); the corpus and the run directory are fixed.
given() { local a; for a in "${@:2}"; do [[ $a == "$1" || $a == "$1="* ]] && return 0; done; return 1; }
defaults=()
given --config "$@" || defaults+=(--config small)
given --lr "$@" || defaults+=(--lr 3e-3)
given --steps "$@" || defaults+=(--steps 2500)
given --eval-interval "$@" || defaults+=(--eval-interval 250)
# A small multiple-choice set (tools/make_eval_sets.py) scored at each evaluation: its accuracy rises
# from chance (0.25) as the model learns English words.
given --eval-mc "$@" || defaults+=(--eval-mc examples/data/english_mc.jsonl)
"./$build/examples/lathe" train --data /usr/share/games/fortunes --out "$out" "${defaults[@]}" "$@"
"./$build/examples/lathe" sample --checkpoint "$out/model.safetensors" --prompt "The " --tokens 300 \
  --temperature 0.8 --top-k 40 --seed 1
# Then what people do next with a model they pretrained: supervised fine-tuning on conversations
# (docs/chat.md; about twenty seconds), and a chat that answers in the taught format.
chat=runs/fortunes-chat
rm -rf "$chat"
"./$build/examples/lathe" train --init-from "$out/model.safetensors" --sft examples/data/chat_sft.jsonl \
  --out "$chat" --steps 300 --batch 16 --lr 3e-3 --warmup 40 --eval-interval 100 --sample-tokens 0
printf 'Hi there.\nSay something wise.\n' |
  "./$build/examples/lathe" chat --checkpoint "$chat/model.safetensors" --temperature 0
echo "loss curves: $out/loss.svg, metrics: $out/metrics.jsonl; the chat: lathe chat --checkpoint $chat/model.safetensors"
