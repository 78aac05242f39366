#!/usr/bin/env bash
# nanoGPT's "I only have a MacBook" recipe in lathe and in PyTorch, on the same corpus and steps:
# 4 layers, 4 heads, 128 wide, block 64, batch 12, no biases, dropout 0, 2000 steps, AdamW with
# lr 1e-3 (100 warm-up steps) cosine-decayed to 1e-4, beta2 0.99, weight decay 0.1 on 2-D weights,
# gradients clipped at 1. Prints each one's wall time (the whole run, validation included) and final
# validation loss (nats per byte, the mean over 200 batches of the last 10% of the corpus).
#   tools/nanogpt_cpu.sh [CORPUS] [STEPS] [SEED]     default: Debian's fortunes, 2000, 1337
#   ROUNDS=3 tools/nanogpt_cpu.sh                    each program three times, taking turns, the
#                                                    fastest run of each kept (a noisy machine)
# Target: lathe's whole run in at most half of PyTorch's wall time, and validation losses within
# 0.03 nats of each other; the script exits 1 when either is missed (after printing the figures).
# Both programs draw their initialisation and batches from SEED (each with its own generator, so
# the same seed is not the same start; compare means over a few seeds).
# PyTorch is Debian's python3-torch (tools/deps.sh --torch), at TORCH_THREADS threads (default 1:
# its fastest count on a 2-core machine, tools/bench_cpu.sh); lathe at its default thread count.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus="${1:-/usr/share/games/fortunes}"
steps="${2:-2000}"
seed="${3:-1337}"
bash tools/deps.sh --torch
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target lathe >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One file holding the corpus's text, so that both programs read the same bytes (lathe skips the
# binary .dat indexes of a fortunes directory; the PyTorch loop reads files as they are). Each file
# once: Debian's fortunes has `art.u8 -> art` links, and a file read twice would put the same text
# on both sides of the train / validation split (the last 10%); the script refuses a corpus whose
# files still share a text after that, and says how many links it skipped.
if [[ -d "$corpus" ]]; then
  /usr/bin/python3 - "$corpus" "$tmp/corpus.txt" <<'EOF'
import hashlib, os, sys
root, out = sys.argv[1], sys.argv[2]
paths = sorted(os.path.join(d, f) for d, dirs, files in os.walk(root, followlinks=True) for f in files
               if not f.startswith("."))
seen_files, seen_texts, links = set(), {}, 0
with open(out, "wb") as o:
    for p in paths:
        if any(part.startswith(".") for part in os.path.relpath(p, root).split(os.sep)) or not os.path.isfile(p):
            continue
        st = os.stat(p)
        if (st.st_dev, st.st_ino) in seen_files:
            links += 1
            continue
        seen_files.add((st.st_dev, st.st_ino))
        data = open(p, "rb").read()
        if b"\0" in data[:8192] or not data:
            continue
        digest = hashlib.sha256(data).digest()
        if digest in seen_texts:
            sys.exit(f"nanogpt_cpu: {p} holds the same text as {seen_texts[digest]}: it would be on both sides of the split")
        seen_texts[digest] = p
        o.write(data)
print(f"corpus: {len(seen_texts)} files read once each ({links} links to a file already read skipped)")
EOF
  corpus="$tmp/corpus.txt"
fi

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "corpus: $corpus, $(stat -c %s "$corpus") bytes; $steps steps; seed $seed; PyTorch at ${TORCH_THREADS:-1} thread(s)"

# ROUNDS (default 1) runs the pair that many times, taking turns, and keeps each program's fastest
# run: on a shared machine a neighbour's busy minute then slows both alike or neither.
rounds="${ROUNDS:-1}"
lathe_s="" torch_s=""
faster() { [[ -z "$2" ]] || awk "BEGIN { exit !($1 < $2) }"; }  # $1 beats the best so far, $2 (or there is none)
for round in $(seq "$rounds"); do
  rm -rf "$tmp/lathe-run"
  start=$(date +%s.%N)
  ./build/examples/lathe train --data "$corpus" --config nanogpt-cpu --steps "$steps" --lr 1e-3 --min-lr 1e-4 \
    --warmup 100 --beta2 0.99 --weight-decay 0.1 --grad-clip 1 --eval-interval "$steps" --eval-iters 200 \
    --sample-tokens 0 --seed "$seed" --quiet --out "$tmp/lathe-run" >"$tmp/lathe.log" 2>&1 || { cat "$tmp/lathe.log"; exit 1; }
  lathe_round=$(awk "BEGIN { print $(date +%s.%N) - $start }")
  if faster "$lathe_round" "$lathe_s"; then lathe_s=$lathe_round; fi
  lathe_val=$(grep -o '"val_loss":[0-9.]*' "$tmp/lathe-run/metrics.jsonl" | tail -1 | cut -d: -f2)

  start=$(date +%s.%N)
  line=$(/usr/bin/python3 tools/torch_gpt_reference.py train nanogpt-cpu "$corpus" "$steps" 1e-3 1e-4 100 "${TORCH_THREADS:-1}" 200 "$seed")
  torch_round=$(awk "BEGIN { print $(date +%s.%N) - $start }")
  if faster "$torch_round" "$torch_s"; then
    torch_s=$torch_round
    torch_loop_s=$(sed -n 's/.*train_s=\([0-9.]*\).*/\1/p' <<<"$line")
  fi
  torch_val=$(sed -n 's/.*val_loss=\([0-9.]*\).*/\1/p' <<<"$line")
  if (( rounds > 1 )); then printf 'round %d: lathe %.1f s, PyTorch %.1f s\n' "$round" "$lathe_round" "$torch_round"; fi
done

# Both times are whole runs, as a user waits for them: start-up, reading the corpus, training and
# the 200 validation batches (PyTorch's also imports torch). PyTorch's training loop alone is shown
# beside it.
printf 'lathe:   %6.1f s (the whole run)                                     val_loss %.4f\n' "$lathe_s" "$lathe_val"
printf 'PyTorch: %6.1f s (the whole run; its training loop alone %.1f s)     val_loss %.4f\n' "$torch_s" \
  "$torch_loop_s" "$torch_val"
awk "BEGIN { printf \"lathe/PyTorch time %.2f, val_loss difference %+.4f\n\", $lathe_s / $torch_s, $lathe_val - $torch_val }"
if awk "BEGIN { d = $lathe_val - $torch_val; exit !($lathe_s <= 0.5 * $torch_s && d <= 0.03 && d >= -0.03) }"; then
  echo "target met: time at most 0.50 of PyTorch's, validation losses within 0.03"
else
  echo "TARGET MISSED: time at most 0.50 of PyTorch's and validation losses within 0.03"
  exit 1
fi
