#!/usr/bin/env bash
# Proves lathe on a machine with an NVIDIA GPU (an H100 or H200), from the binaries that
# tools/gpu_pack.sh built on a CPU machine: run from the root of a copy of the work tree that
# holds .gpuc/pack.tar.xz. Each stage runs under its own timeout and logs into LOGDIR/<stage>.log;
# a table of the stages and one of the benchmarks are printed last (and kept in LOGDIR/summary.txt).
#   bash tools/gpu_check.sh [LOGDIR]         (default: $OUT, else gpu-check)
# Stages:
#   setup          unpack the pack into /tmp/gpupack (unless it is there), source its setup.sh,
#                  name the GPU and what lathe sees
#   cuda-suite     tests/test_cuda.cpp: every kernel against the CPU backend
#   device-suites  every other GPU case: the op registry, `lathe ref` ops, checkpoint placement, and
#                  every golden reference case against its expected result, on cuda:0
#   golden-ref     `lathe ref CASE OUT --device cuda` on every tests/golden/*.case.safetensors
#   resume         tools/resume_check.py: bitwise resume per optimizer and precision on cuda, and a
#                  run that moves cuda -> cpu -> cuda
#   memcheck, racecheck, synccheck
#                  compute-sanitizer over the CUDA suite (racecheck over its block-cooperative
#                  kernels: reductions, softmax, layer norm, embedding, cross-entropy)
#   bench-lathe    lathe bench --config gpt2 in f32 and bf16 at batch 4 and 16: tok/s, MFU, peak
#                  device memory
#   bench-torch    PyTorch on the same model: naive f32, SDPA f32, SDPA bf16 eager (autocast, fused
#                  AdamW) and torch.compile, at batch 4 and 16 (tools/torch_bench_device.py)
#   attention      causal attention alone, B 16, H 12, T 1024, D 64, bf16, forward + backward:
#                  lathe (examples/bench_attention) against PyTorch's SDPA
# The whole run is meant to take under six minutes (its stage limits add up to 16; not yet timed
# on a GPU, so the limits are guesses to correct from its first logs). LATHE_GPU_QUICK=1 leaves
# out the three benchmark stages.
# A GPU case that finds no GPU fails here (LATHE_REQUIRE_GPU=1), where ctest would skip it. The
# script exits 1 when any stage failed or timed out.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
logdir=$(realpath -m "${1:-${OUT:-gpu-check}}")
mkdir -p "$logdir"
pack=/tmp/gpupack
export LATHE_REQUIRE_GPU=1
rows=()
failed=0

# The last line that says how a stage ended: doctest's count of test cases, else the log's last line.
summary() {
  local line
  line=$(grep -E '^\[doctest\] test cases:' "$1" | tail -1)
  [[ -n $line ]] || line=$(grep -v '^\s*$' "$1" | tail -1)
  echo "${line:0:110}"
}

# stage NAME SECONDS COMMAND...: COMMAND (a program or one of the functions here, run by a bash
# of its own) under `timeout`, its output in LOGDIR/NAME.log.
stage() {
  local name=$1 limit=$2 start=$SECONDS rc result
  shift 2
  echo "== $name (at most $limit s)"
  if declare -F "$1" >/dev/null; then
    timeout -k 10 "$limit" bash -o pipefail -c '"$@"' stage "$@" > "$logdir/$name.log" 2>&1
  else
    timeout -k 10 "$limit" "$@" > "$logdir/$name.log" 2>&1
  fi
  rc=$?
  case $rc in
    0) result=pass ;;
    124 | 137) result=TIMEOUT ;;
    *) result="FAIL($rc)" ;;
  esac
  [[ $rc == 0 ]] || failed=$((failed + 1))
  rows+=("$(printf '%-14s %-9s %4d s  %s' "$name" "$result" $((SECONDS - start)) "$(summary "$logdir/$name.log")")")
}

setup() {
  if [[ ! -f $pack/setup.sh ]]; then
    [[ -f .gpuc/pack.tar.xz ]] || { echo "gpu_check: no $pack and no .gpuc/pack.tar.xz: run tools/gpu_pack.sh on the CPU machine and copy the work tree with .gpuc/"; return 1; }
    tar -xJf .gpuc/pack.tar.xz -C "$(dirname "$pack")" || return 1
  fi
  cat "$pack/MANIFEST"
  command -v nvidia-smi >/dev/null || { echo "gpu_check: nvidia-smi not found: is there a GPU and its driver?"; return 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || return 1
  "$LATHE_BUILD/examples/lathe" info || return 1
  local n
  n=$("$LATHE_BUILD/examples/lathe" info --json | python3 -c 'import json, sys; print(json.load(sys.stdin).get("cuda_devices", 0))' 2>/dev/null)
  [[ ${n:-0} -gt 0 ]] || { echo "gpu_check: lathe sees no GPU (lathe info above)"; return 1; }
}

golden_ref() {
  local out bad=0 n=0
  out=$(mktemp -d)
  for c in tests/golden/*.case.safetensors; do
    n=$((n + 1))
    if ! "$LATHE_BUILD/examples/lathe" ref "$c" "$out/$(basename "$c" .case.safetensors).safetensors" --device cuda; then
      echo "FAIL $c"
      bad=$((bad + 1))
    fi
  done
  rm -rf "$out"
  echo "lathe ref on cuda: $((n - bad)) of $n golden cases ran (their results: device-suites' golden case)"
  [[ $bad == 0 && $n -gt 0 ]]
}

sanitize() {
  local tool=$1
  shift
  command -v compute-sanitizer >/dev/null || { echo "gpu_check: compute-sanitizer not found (PATH has /usr/local/cuda/bin)"; return 1; }
  compute-sanitizer --tool "$tool" --error-exitcode 1 "$LATHE_BUILD/tests/lathe_tests" "$@"
}

bench_lathe() {
  local precision batch
  for precision in f32 bf16; do
    for batch in 4 16; do
      "$LATHE_BUILD/examples/lathe" bench --config gpt2 --device cuda --precision "$precision" --batch "$batch" \
        --steps 10 --warmup 3 --json | tee -a "$logdir/bench.jsonl" || return 1
    done
  done
}

bench_torch() {
  python3 tools/torch_bench_device.py gpt2 cuda 10 --variant all --batch 4 16 --json | tee -a "$logdir/bench.jsonl"
}

attention() {
  "$LATHE_BUILD/examples/bench_attention" --device cuda --dtype bf16 --shape 16,12,1024,64 --json |
    tee -a "$logdir/bench.jsonl" || return 1
  python3 tools/torch_bench_device.py --attention 16,12,1024,64 cuda 20 --dtype bf16 --json | tee -a "$logdir/bench.jsonl"
}

# setup.sh sets LATHE_BUILD, LD_LIBRARY_PATH and the links the binaries' paths need, in this shell.
if [[ -f $pack/setup.sh || -f .gpuc/pack.tar.xz ]]; then
  [[ -f $pack/setup.sh ]] || tar -xJf .gpuc/pack.tar.xz -C "$(dirname "$pack")"
  # shellcheck source=/dev/null
  source "$pack/setup.sh"
fi
export LATHE_BUILD="${LATHE_BUILD:-$pack/build}" pack logdir
export -f setup golden_ref sanitize bench_lathe bench_torch attention
: > "$logdir/bench.jsonl"
stage setup 60 setup
tests=$LATHE_BUILD/tests/lathe_tests
stage cuda-suite 90 "$tests" -tc='cuda*'
stage device-suites 90 "$tests" \
  -tc='*on cuda,checkpoint failure *,checkpoint: a file written from a device*,checkpoints: read names*'
stage golden-ref 60 golden_ref
stage resume 90 python3 tools/resume_check.py --lathe "$LATHE_BUILD/examples/lathe" --device cuda --work "$logdir/resume"
stage memcheck 90 sanitize memcheck -tc='cuda*' -tce='*out of memory*'
stage racecheck 90 sanitize racecheck -tc='cuda: sums*,cuda: max*,cuda: softmax*,cuda: layer_norm*,cuda: embedding*,cuda: cross_entropy*'
stage synccheck 60 sanitize synccheck -tc='cuda*' -tce='*out of memory*'
if [[ ${LATHE_GPU_QUICK:-0} != 1 ]]; then
  stage bench-lathe 90 bench_lathe
  stage bench-torch 180 bench_torch
  stage attention 60 attention
fi

{
  echo
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  echo "gpu_check on ${gpu:-no GPU found}, $(head -1 "$pack/MANIFEST" 2>/dev/null || echo 'no pack'), logs in $logdir"
  printf '%-14s %-9s %6s  %s\n' stage result time "how it ended"
  printf '%s\n' "${rows[@]}"
  if [[ -s $logdir/bench.jsonl ]]; then
    echo
    python3 tools/bench_table.py "$logdir/bench.jsonl" || echo "(bench_table.py could not read $logdir/bench.jsonl)"
  fi
  echo
  if [[ $failed == 0 ]]; then echo "gpu_check: every stage passed"; else echo "gpu_check: $failed stage(s) failed or timed out"; fi
} | tee "$logdir/summary.txt"
[[ $failed == 0 ]]
