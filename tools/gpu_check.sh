#!/usr/bin/env bash
# Settles what lathe is on a GPU in one call of a GPU machine (an H100 or H200; one command of at
# most 600 s, of whose output folder only a few flat files come back), from the binaries that
# tools/gpu_pack.sh built on a CPU machine. Run from the root of a copy of the work tree that holds
# .gpuc/pack.tar.xz:
#   bash tools/gpu_check.sh [OUTDIR]              the check: benchmarks first, then correctness
#   bash tools/gpu_check.sh --sanitize [OUTDIR]   compute-sanitizer, a second and optional call
#   GPU_CHECK_DRY=1 bash tools/gpu_check.sh DIR   the whole script here, on the `sim` device and the
#                                                 CUDA emulator (a ctest test: it cannot rot between
#                                                 chances to run it)
# OUTDIR defaults to $OUT, else gpu-check. Everything goes into it flat, at most 6 files:
#   summary.txt    the commit, the table of stages (result, seconds, budget), the benchmark table
#   figures.jsonl  every figure, one JSON object a line: each benchmark's and each stage's
#   bench.log, tests.log, resume.log (sanitize.log with --sanitize): each stage's output, by group
# Stages of the check, each under `timeout` with the budget beside it (450 s in all, estimates from
# the H200 run of 2026-11-26 and the CPU machine's timings, to correct from the first full log):
#   unpack         unpack the pack afresh and check that it was built from this work tree        15 s
#   setup          check that the GPU is the pack's architecture, name it and what lathe sees     10 s
#   bench-lathe    lathe bench --config gpt2 in f32 and bf16 at batch 4 and 16, and bf16 at batch
#                  16 with the atomic attention backward: tok/s, MFU, peak device memory          85 s
#   bench-torch    PyTorch on the same model: naive f32, SDPA f32 and SDPA bf16 eager at batch 4
#                  and 16, torch.compile bf16 at batch 16 (one compile) (tools/torch_bench_device.py);
#                  left out, saying so, without PyTorch                                          135 s
#   attention      causal attention alone (B 16, H 12, T 1024, D 64, bf16, forward + backward):
#                  examples/bench_attention, split and atomic backward, against PyTorch's SDPA   25 s
#   cuda-suite     tests/test_cuda.cpp: every kernel against the CPU backend                      50 s
#   device-suites  every other GPU case: the op registry, `lathe ref` ops, checkpoint placement,
#                  every golden case against its expected result, on cuda:0                       50 s
#   golden-ref     `lathe ref CASE OUT --device cuda` on every tests/golden/*.case.safetensors,
#                  eight at a time                                                                30 s
#   resume         tools/resume_check.py: bitwise resume per optimizer and precision on cuda, and
#                  a run that moves cuda -> cpu -> cuda                                           55 s
# --sanitize runs memcheck and synccheck over the CUDA suite and racecheck over its block-
# cooperative kernels (reductions, softmax, norms, embedding, cross-entropy, attention, the fused
# classifier); a machine whose driver refuses the sanitizers is reported as such, not as a failure.
# A GPU case that finds no GPU fails here (LATHE_REQUIRE_GPU=1), where ctest would skip it. Exit 1
# when a stage failed or ran out of its budget.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mode=check
if [[ ${1:-} == --sanitize ]]; then
  mode=sanitize
  shift
fi
out=$(realpath -m "${1:-${OUT:-gpu-check}}")
mkdir -p "$out" || exit 1
dry=${GPU_CHECK_DRY:-0}
pack=${LATHE_PACK_DIR:-/tmp/gpupack}
: > "$out/figures.jsonl"
rows=()
failed=0
stopped=""

# The last line that says how a stage ended: doctest's count of test cases, else its last line.
how_it_ended() {
  local line
  line=$(grep -E '^\[doctest\] test cases:' "$1" | tail -1)
  [[ -n $line ]] || line=$(grep -v '^\s*$' "$1" | tail -1)
  echo "${line:0:100}"
}

# stage NAME GROUP BUDGET COMMAND...: COMMAND (a program, or a function here run by a bash of its
# own) under `timeout BUDGET`; its output goes to GROUP.log after a header, its row to the table and
# figures.jsonl. A command that exits 77 was skipped, saying why (PyTorch missing, a refused tool).
stage() {
  local name=$1 group=$2 budget=$3 start=$SECONDS rc result part
  shift 3
  if [[ -n $stopped ]]; then
    rows+=("$(printf '%-14s %-8s %4s s %4d s  %s' "$name" "not run" - "$budget" "$stopped")")
    return
  fi
  echo "== $name (budget $budget s)"
  part=$(mktemp)
  if declare -F "$1" >/dev/null; then
    timeout -k 5 "$budget" bash -o pipefail -c '"$@"' stage "$@" > "$part" 2>&1
  else
    timeout -k 5 "$budget" "$@" > "$part" 2>&1
  fi
  rc=$?
  case $rc in
    0) result=pass ;;
    77) result=skipped ;;
    124 | 137) result=TIMEOUT ;;
    *) result="FAIL($rc)" ;;
  esac
  [[ $rc == 0 || $rc == 77 ]] || failed=$((failed + 1))
  local seconds=$((SECONDS - start)) ended
  ended=$(how_it_ended "$part")
  { echo "==== $name: $result in $seconds s (budget $budget s)"; cat "$part"; echo; } >> "$out/$group.log"
  rm -f "$part"
  rows+=("$(printf '%-14s %-8s %4d s %4d s  %s' "$name" "$result" "$seconds" "$budget" "$ended")")
  python3 -c 'import json, sys; print(json.dumps({"stage": sys.argv[1], "result": sys.argv[2], "seconds": int(sys.argv[3]), "budget_s": int(sys.argv[4]), "ended": sys.argv[5]}))' \
    "$name" "$result" "$seconds" "$budget" "$ended" >> "$out/figures.jsonl"
}

# ------------------------------------------------------------------------------------------ setup
# The pack, unpacked afresh, and checked against this work tree: the golden cases and the tools the
# stages run must be the ones the binaries were built with.
unpack() {
  [[ -f .gpuc/pack.tar.xz ]] || {
    echo "gpu_check: no .gpuc/pack.tar.xz in $PWD: run tools/gpu_pack.sh on the CPU machine and carry .gpuc/ with the work tree"
    return 1
  }
  local why
  rm -rf "$pack" && mkdir -p "$pack" && why=$(tar -xJf .gpuc/pack.tar.xz -C "$pack" --strip-components=1 2>&1) || {
    echo "gpu_check: .gpuc/pack.tar.xz does not unpack into $pack: $(head -1 <<< "$why")"
    return 1
  }
  [[ -f $pack/MANIFEST && -f $pack/SOURCES.sha256 && -f $pack/setup.sh ]] || {
    echo "gpu_check: .gpuc/pack.tar.xz is not a pack of tools/gpu_pack.sh (no MANIFEST, SOURCES.sha256 or setup.sh)"
    return 1
  }
  local differ
  differ=$(sha256sum --check --quiet "$pack/SOURCES.sha256" 2>/dev/null | sed 's/: .*//' | head -3 | tr '\n' ' ')
  [[ -z $differ ]] || {
    echo "gpu_check: the pack was built from $(sed -n 's/^commit //p' "$pack/MANIFEST"), but this work tree differs (${differ% }): run tools/gpu_pack.sh again"
    return 1
  }
}

gpu_facts() {
  # One line for each way the machine can be wrong: no GPU, another architecture than the pack's.
  command -v nvidia-smi >/dev/null || { echo "gpu_check: no GPU here: nvidia-smi not found"; return 1; }
  local name cap arch
  name=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [[ -n $cap && $cap =~ ^[0-9]+$ ]] || { echo "gpu_check: no GPU here: nvidia-smi says: $name"; return 1; }
  echo "GPU: $name, sm_$cap"
  arch=$(sed -n 's/^arch //p' "$pack/MANIFEST")
  [[ " $arch " == *" $cap "* ]] || {
    echo "gpu_check: the GPU is sm_$cap, the pack holds code for sm_$arch only: run tools/gpu_pack.sh -DLATHE_CUDA_ARCHITECTURES=$cap"
    return 1
  }
}

setup() {
  if [[ $dry == 1 ]]; then
    echo "gpu_check: dry run on the sim device and the CUDA emulator, build $LATHE_BUILD"
    for p in "$lathe" "$tests" "$LATHE_BUILD/examples/bench_attention"; do
      [[ -x $p ]] || { echo "gpu_check: dry run: no $p (build it: cmake --build $LATHE_BUILD)"; return 1; }
    done
  else
    cat "$pack/MANIFEST"
    gpu_facts || return 1
  fi
  "$lathe" info || return 1
  [[ $dry == 1 ]] && return 0
  local n
  n=$("$lathe" info --json | python3 -c 'import json, sys; print(json.load(sys.stdin).get("cuda_devices", 0))' 2>/dev/null)
  [[ ${n:-0} -gt 0 ]] || { echo "gpu_check: lathe sees no GPU (lathe info above)"; return 1; }
}

# ------------------------------------------------------------------------------------- benchmarks
bench_lathe() {
  local precision batch
  for precision in f32 bf16; do
    for batch in 4 16; do
      "$lathe" bench --config "$bench_config" --device "$device" --precision "$precision" --batch "$batch" \
        --steps "$bench_steps" --warmup "$bench_warmup" --json | tee -a "$out/figures.jsonl" || return 1
    done
  done
  # FlashAttention-2's one-kernel backward (dQ by atomics), at the batch the acceptance compares.
  "$lathe" bench --config "$bench_config" --device "$device" --precision bf16 --batch 16 --attention-backward atomic \
    --steps "$bench_steps" --warmup "$bench_warmup" --json | tee -a "$out/figures.jsonl" || return 1
}

have_torch() {
  python3 -c 'import torch' 2>/dev/null && return 0
  echo "gpu_check: PyTorch not found (python3 -c 'import torch'): the PyTorch half of the table is left out"
  return 1
}

bench_torch() {
  have_torch || return 77
  local torch_bench=(python3 tools/torch_bench_device.py "$bench_config" "$torch_device" "$bench_steps"
                     --warmup "$bench_warmup" --json)
  "${torch_bench[@]}" --variant naive_f32 sdpa_f32 sdpa_bf16 --batch 4 16 | tee -a "$out/figures.jsonl" || return 1
  # torch.compile compiles during the warm-up: once, at the batch the acceptance compares.
  [[ $dry == 1 ]] || "${torch_bench[@]}" --variant compile_bf16 --batch 16 | tee -a "$out/figures.jsonl"
}

attention() {
  local backward
  for backward in split atomic; do
    "$LATHE_BUILD/examples/bench_attention" --device "$device" --dtype "$attention_dtype" --shape "$attention_shape" \
      --attention-backward "$backward" --json | tee -a "$out/figures.jsonl" || return 1
  done
  have_torch || return 0
  python3 tools/torch_bench_device.py --attention "$attention_shape" "$torch_device" 20 --dtype "$attention_dtype" \
    --json | tee -a "$out/figures.jsonl"
}

# ------------------------------------------------------------------------------------ correctness
golden_ref() {
  local work
  work=$(mktemp -d)
  # Each case is its own process (the command a user runs); eight at a time, the GPU has room.
  printf '%s\n' tests/golden/*.case.safetensors | head -n "$golden_cases" |
    xargs -P 8 -I{} sh -c '"$1" ref "$2" "$3/$(basename "$2" .case.safetensors).safetensors" --device "$4" >/dev/null 2>"$3/$(basename "$2").err" || { echo "FAIL $2: $(tail -1 "$3/$(basename "$2").err")"; exit 1; }' \
      sh "$lathe" {} "$work" "$device"
  local rc=$? n
  n=$(find "$work" -name '*.safetensors' | wc -l)
  rm -rf "$work"
  echo "lathe ref on $device: $n golden cases written (device-suites compares their results)"
  return $rc
}

# --------------------------------------------------------------------------------------- sanitize
# A sandboxed GPU machine may refuse the sanitizers (no profiler permission, an unsupported
# driver): a short probe first; a refusal is reported and the stages skip (77), not fail.
sanitizer_refusal() {
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found (the CUDA toolkit's bin/)"; return 0; }
  local probe
  probe=$(compute-sanitizer --tool memcheck --error-exitcode 1 "$tests" -tc='cuda: fill and arange*' 2>&1)
  if [[ $? != 0 ]] && ! grep -qE 'ERROR SUMMARY: [1-9]' <<< "$probe"; then
    echo "compute-sanitizer refused on this machine: $(grep -m1 -iE 'error|not supported|permission|unable' <<< "$probe" | cut -c1-150)"
    return 0
  fi
  return 1
}

sanitize() {
  local tool=$1
  shift
  if [[ -n $refused ]]; then
    echo "gpu_check: $refused"
    return 77
  fi
  compute-sanitizer --tool "$tool" --error-exitcode 1 "$tests" "$@"
}

# ------------------------------------------------------------------------------------------- main
export out dry pack
export -f unpack
if [[ $dry == 1 ]]; then
  export LATHE_BUILD=${LATHE_BUILD:-build}
  lathe=$LATHE_BUILD/examples/lathe tests=$LATHE_BUILD/tests/lathe_emu_tests
  device=sim torch_device=cpu bench_config=tiny bench_steps=2 bench_warmup=1
  attention_shape=2,2,64,16 attention_dtype=bf16 golden_cases=6 resume_only=(--only "adamw f32" cross)
  suite_filter=('-tc=cuda: fill and arange*,cuda: the fused classifier*,cuda: causal attention is deterministic*')
  device_filter=('-tc=ops: every sample matches the cpu on cuda')
else
  export LATHE_REQUIRE_GPU=1
  stage unpack bench 15 unpack
  [[ $failed == 0 ]] || stopped="no usable pack (unpack above)"
  # setup.sh sets LATHE_BUILD, LD_LIBRARY_PATH and the links the binaries' paths need, in this shell.
  # shellcheck source=/dev/null
  [[ -z $stopped ]] && source "$pack/setup.sh"
  export LATHE_BUILD=${LATHE_BUILD:-$pack/build}
  lathe=$LATHE_BUILD/examples/lathe tests=$LATHE_BUILD/tests/lathe_tests
  device=cuda torch_device=cuda bench_config=gpt2 bench_steps=10 bench_warmup=3
  attention_shape=16,12,1024,64 attention_dtype=bf16 golden_cases=1000 resume_only=()
  suite_filter=('-tc=cuda*')
  device_filter=('-tc=*on cuda,checkpoint failure *,checkpoint: a file written from a device*,checkpoints: read names*')
fi
export lathe tests device torch_device bench_config bench_steps bench_warmup attention_shape \
  attention_dtype golden_cases
export -f gpu_facts setup bench_lathe have_torch bench_torch attention golden_ref sanitize
stage setup bench 10 setup
[[ $failed == 0 || -n $stopped ]] || stopped="setup failed (bench.log)"

if [[ $mode == check ]]; then
  stage bench-lathe bench 85 bench_lathe
  stage bench-torch bench 135 bench_torch
  stage attention bench 25 attention
  stage cuda-suite tests 50 "$tests" "${suite_filter[@]}"
  stage device-suites tests 50 "$tests" "${device_filter[@]}"
  stage golden-ref tests 30 golden_ref
  # Its runs go to a temporary directory, kept (and named in the log) only when a case fails.
  stage resume resume 50 python3 tools/resume_check.py --lathe "$lathe" --device "$device" "${resume_only[@]}"
else
  refused=""
  if [[ $dry == 1 ]]; then
    refused="dry run: compute-sanitizer needs a GPU"
  elif [[ -z $stopped ]]; then
    refused=$(sanitizer_refusal) || refused=""
  fi
  export refused
  racy=('-tc=cuda: sums*,cuda: max*,cuda: softmax*,cuda: layer_norm*,cuda: rms_norm*,cuda: embedding*,cuda: cross_entropy*,cuda: causal attention*,cuda: the fused classifier*')
  [[ $dry == 1 ]] && racy=('-tc=cuda: softmax*')
  stage memcheck sanitize 120 sanitize memcheck "${suite_filter[@]}" '-tce=*out of memory*'
  stage racecheck sanitize 150 sanitize racecheck "${racy[@]}"
  stage synccheck sanitize 90 sanitize synccheck "${suite_filter[@]}" '-tce=*out of memory*'
fi

{
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  [[ $dry == 1 ]] && gpu="no GPU (dry run: sim and the CUDA emulator)"
  echo "gpu_check $mode on ${gpu:-no GPU found}; $(head -1 "$pack/MANIFEST" 2>/dev/null || echo "build $LATHE_BUILD, no pack"); $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf '%-14s %-8s %6s %6s  %s\n' stage result time budget "how it ended"
  printf '%s\n' "${rows[@]}"
  if grep -q '"tok_per_s"\|"ms_fwd_bwd"' "$out/figures.jsonl"; then
    echo
    python3 tools/bench_table.py "$out/figures.jsonl" || echo "(tools/bench_table.py could not read figures.jsonl)"
  fi
  echo
  if [[ $failed == 0 ]]; then echo "gpu_check: every stage passed or was skipped as said"; else echo "gpu_check: $failed stage(s) failed or ran out of time"; fi
} | tee "$out/summary.txt"
[[ $failed == 0 ]]
