#!/usr/bin/env bash
# The acceptance runs of mixed precision (docs/benchmarks.md, "Mixed precision"): the tiny preset,
# 600 steps on the default corpus with a fixed seed, in f32, bf16 and fp16, on cpu and sim; the
# bf16 and fp16 runs must end within 0.03 nats per byte of the f32 run's validation loss on the
# same device. Prints one line per run and a verdict; exit 1 when a run is out of tolerance.
#
#   tools/precision_check.sh [LATHE] [EXTRA TRAIN ARGS...]     (default: build/examples/lathe)
#
# Minutes on two cores; not a ctest test. Runs go to runs/precision/<device>-<precision>.
set -euo pipefail
cd "$(dirname "$0")/.."
lathe=${1:-build/examples/lathe}
shift || true
root=runs/precision
tol=0.03
status=0
printf '%-6s %-6s %10s %10s %8s %8s %s\n' device prec val_loss delta skipped seconds verdict
for device in cpu sim; do
  ref=""
  for precision in f32 bf16 fp16; do
    out="$root/$device-$precision"
    rm -rf "$out"
    start=$(date +%s.%N)
    "$lathe" train --config tiny --steps 600 --seed 1337 --lr 3e-3 --device "$device" --precision "$precision" \
      --sample-tokens 0 --quiet --out "$out" "$@"
    secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    read -r val skipped < <(python3 - "$out/metrics.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
val = [r["val_loss"] for r in recs if "val_loss" in r][-1]
print(f"{val:.4f}", sum(1 for r in recs if r.get("skipped")))
PY
)
    if [ "$precision" = f32 ]; then
      ref=$val
      printf '%-6s %-6s %10s %10s %8s %8s %s\n' "$device" "$precision" "$val" "-" "$skipped" "$secs" reference
      continue
    fi
    delta=$(python3 -c "print(f'{$val - $ref:+.4f}')")
    if python3 -c "import sys; sys.exit(0 if abs($val - $ref) <= $tol else 1)"; then verdict=ok; else verdict="OUT OF TOLERANCE ($tol)"; status=1; fi
    printf '%-6s %-6s %10s %10s %8s %8s %s\n' "$device" "$precision" "$val" "$delta" "$skipped" "$secs" "$verdict"
  done
done
exit $status
