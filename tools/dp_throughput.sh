#!/usr/bin/env bash
# Data parallel throughput on this machine (docs/benchmarks.md, "Data parallel training"): a
# preset (default `char`) trained by `mpirun -np 2 lathe train --threads 1` against one process
# with `--threads 2` (and, for scale, one process with one thread), interleaved REPS times so that
# a neighbour's load falls on all alike. Prints
# per run the tokens per second over steps 2..STEPS (step 1 warms up) and, for -np 2, the share of
# those steps' time that rank 0 spent in collectives (metrics.jsonl's comm_seconds).
#   tools/dp_throughput.sh [STEPS=6] [REPS=3] [CONFIG=char]
# Target (a quiet machine): -np 2 reaches at least 0.8x the tokens/s of one process with two
# threads, their medians over the repetitions; the script exits 1 when it does not.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-6}; reps=${2:-3}; config=${3:-char}
lathe=build/examples/lathe
out=$(mktemp -d /tmp/lathe_dp_bench_XXXX)
trap 'rm -rf "$out"' EXIT
common=(train --config "$config" --steps "$steps" --eval-interval 0 --eval-iters 1 --sample-tokens 0 --quiet)
summary() {  # run directory, label, file the tokens/s are appended to
  python3 - "$1" "$2" "$3" <<'PY'
import glob, json, struct, sys
run, label, rates = sys.argv[1], sys.argv[2], sys.argv[3]
with open(glob.glob(run + "/ckpt-*.safetensors")[0], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    doc = json.loads(json.loads(f.read(n))["__metadata__"]["lathe"])
tokens = doc["program"]["batch"] * doc["model"]["block_size"]  # per step, over all processes
recs = [json.loads(l) for l in open(run + "/metrics.jsonl")]
timed = recs[1:]
seconds = sum(tokens / r["tok_per_s"] for r in timed)
line = "%-32s %7.0f tok/s" % (label, tokens * len(timed) / seconds)
if "comm_seconds" in recs[0]:
    comm = recs[-1]["comm_seconds"] - recs[0]["comm_seconds"]
    line += " | %4.1f%% of the step time in collectives (rank 0)" % (100 * comm / seconds)
print(line)
open(rates, "a").write("%f\n" % (tokens * len(timed) / seconds))
PY
}
for rep in $(seq "$reps"); do
  rm -rf "$out/one" "$out/two" "$out/single"
  "$lathe" "${common[@]}" --threads 1 --out "$out/single"
  summary "$out/single" "rep $rep: 1 process x 1 thread" "$out/rates.single"
  "$lathe" "${common[@]}" --threads 2 --out "$out/one"
  summary "$out/one" "rep $rep: 1 process x 2 threads" "$out/rates.threads"
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$lathe" "${common[@]}" --threads 1 --out "$out/two"
  summary "$out/two" "rep $rep: 2 processes x 1 thread" "$out/rates.np2"
done
python3 - "$out/rates.threads" "$out/rates.np2" <<'PY'
import statistics, sys
threads, np2 = (statistics.median(float(v) for v in open(f)) for f in sys.argv[1:])
ratio = np2 / threads
verdict = "target met" if ratio >= 0.8 else "TARGET MISSED"
print(f"-np 2 / 2 threads: {ratio:.2f}x (medians {np2:.0f} / {threads:.0f} tok/s); {verdict}: at least 0.80x")
sys.exit(0 if ratio >= 0.8 else 1)
PY
