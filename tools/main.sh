#!/usr/bin/env bash
# lathe's main job: install what is needed, build, train a small GPT on Debian's fortunes corpus,
# sample from it, then fine-tune it on conversations and ask it two questions. Extra arguments go
# to the first `lathe train` (e.g. --steps 2000 --config small).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
# Each stage says when it starts, counted from the start (README's figures are these lines').
stage() { echo "== $1 (at $((SECONDS - start)) s)"; }
stage "packages"
bash tools/deps.sh
export PATH="$PATH:/usr/local/cuda/bin"
# The job needs the `lathe` program only, built in its own folder, build-main/, so that its options
# never change the test builds' caches (build/, tools/test.sh's). Measured from a clean clone on two
# cores (docs/benchmarks.md, "The main job"), each choice:
#  - only the program: no test suites, no Python module (and so no position-independent code), no
#    emulated kernels;
#  - a unity build with one batch per library (CMAKE_UNITY_BUILD_BATCH_SIZE=0): the standard
#    library's and JSON's headers parsed once per library instead of once per file. The libraries'
#    files one by one took 470 s; batches of eight 212 s; one batch per library 171 s, the two
#    cores busy throughout (core's batch, 100 s, beside nn, optim, serialize and data).
# Without a GPU the CUDA kernels are not compiled: they would only cost minutes.
if nvidia-smi -L >/dev/null 2>&1; then cuda=(); else cuda=(-DLATHE_CUDA=OFF); fi
build=build-main
stage "configure ($build/)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" -DLATHE_TESTS=OFF -DLATHE_PYTHON=OFF \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 >/dev/null
stage "compile the lathe program (a line per library)"
cmake --build "$build" -j "$(nproc)" --target lathe
out=runs/fortunes
rm -rf "$out"  # a fresh demo run each time (lathe train refuses a directory that holds a run)
# The `small` preset (0.8M parameters), 1000 steps of Muon on the blocks' matrices beside AdamW on
# the rest (modded-nanogpt's split): about 80 s on two cores, and a sample that reads like English
# (validation loss about 1.69 nats per byte; AdamW needs 2500 steps, 135 s, for 1.72). A setting
# given as an argument replaces the default (lathe refuses a flag given twice); the corpus and the
# run directory are fixed. With another --optimizer, the lr defaults to AdamW's 3e-3.
given() { local a; for a in "${@:2}"; do [[ $a == "$1" || $a == "$1="* ]] && return 0; done; return 1; }
defaults=()
given --config "$@" || defaults+=(--config small)
if given --optimizer "$@"; then
  given --lr "$@" || defaults+=(--lr 3e-3)
else
  defaults+=(--optimizer muon)
  given --lr "$@" || defaults+=(--lr 0.02)
  given --adam-lr "$@" || defaults+=(--adam-lr 1e-2)
fi
given --steps "$@" || defaults+=(--steps 1000)
given --eval-interval "$@" || defaults+=(--eval-interval 250)
# A small multiple-choice set (tools/make_eval_sets.py) scored at each evaluation: its accuracy rises
# from chance (0.25) as the model learns English words.
given --eval-mc "$@" || defaults+=(--eval-mc examples/data/english_mc.jsonl)
stage "train"
"./$build/examples/lathe" train --data /usr/share/games/fortunes --out "$out" "${defaults[@]}" "$@"
stage "sample"
"./$build/examples/lathe" sample --checkpoint "$out/model.safetensors" --prompt "The " --tokens 300 \
  --temperature 0.8 --top-k 40 --seed 1
# Then what people do next with a model they pretrained: supervised fine-tuning on conversations
# (docs/chat.md; about twenty seconds), and a chat that answers in the taught format.
stage "fine-tune for chat, then chat"
chat=runs/fortunes-chat
rm -rf "$chat"
"./$build/examples/lathe" train --init-from "$out/model.safetensors" --sft examples/data/chat_sft.jsonl \
  --out "$chat" --steps 300 --batch 16 --lr 3e-3 --warmup 40 --eval-interval 100 --sample-tokens 0
printf 'Hi there.\nSay something wise.\n' |
  "./$build/examples/lathe" chat --checkpoint "$chat/model.safetensors" --temperature 0
stage "done"
echo "loss curves: $out/loss.svg, metrics: $out/metrics.jsonl; the chat: lathe chat --checkpoint $chat/model.safetensors"
