#!/usr/bin/env bash
# Keeps tools/gpu_check.sh from rotting between the rare calls of a GPU machine (a ctest test):
#   1. the check and --sanitize, dry (GPU_CHECK_DRY=1: the sim device and the CUDA emulator), end
#      with their tables, every stage passed or skipped as said, and leave at most 6 plain files
#      flat in their output folders, the limits of what comes back from a GPU machine;
#   2. bad input gets one clear line and exit 1: no pack, a pack built from other sources, a
#      machine without a GPU (copies of the script in scratch work trees with made-up packs).
#   bash tools/gpu_check_dry.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=$(realpath "${1:?usage: gpu_check_dry.sh BUILD_DIR}")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
bad=0
fail() {
  echo "gpu_check_dry: FAIL: $*"
  bad=$((bad + 1))
}

# The folder a GPU machine would send back: at most 6 plain files, no folders; every stage row of
# the summary passed or skipped.
check_out() {
  local dir=$1 n
  n=$(find "$dir" -mindepth 1 | wc -l)
  [[ $n -le 6 ]] || fail "$dir holds $n entries, more than 6: $(ls "$dir" | tr '\n' ' ')"
  [[ -z $(find "$dir" -mindepth 1 ! -type f) ]] || fail "$dir holds something other than plain files"
  [[ -s $dir/summary.txt && -s $dir/figures.jsonl ]] || fail "$dir lacks summary.txt or figures.jsonl"
  local rows
  rows=$(grep -cE '^[a-z-]+ +(pass|skipped) ' "$dir/summary.txt")
  [[ $rows -ge 3 ]] || fail "$dir/summary.txt: only $rows stages passed or skipped"
  ! grep -qE '^[a-z-]+ +(FAIL|TIMEOUT|not run)' "$dir/summary.txt" || fail "$dir/summary.txt has a failed stage"
}

echo "== the check, dry"
GPU_CHECK_DRY=1 LATHE_BUILD=$build bash tools/gpu_check.sh "$scratch/check" || fail "the dry check exited $?"
check_out "$scratch/check"
grep -q '"stage": "resume"' "$scratch/check/figures.jsonl" || fail "figures.jsonl has no row for the resume stage"
grep -q '"tok_per_s"' "$scratch/check/figures.jsonl" || fail "figures.jsonl has no benchmark figure"
grep -q '^| lathe bf16 |' "$scratch/check/summary.txt" || fail "summary.txt has no benchmark table"

echo "== the sanitizers, dry"
GPU_CHECK_DRY=1 LATHE_BUILD=$build bash tools/gpu_check.sh --sanitize "$scratch/sanitize" ||
  fail "the dry --sanitize exited $?"
check_out "$scratch/sanitize"

# expect_refusal NAME TEXT: the check in work tree $scratch/NAME exits 1 with TEXT in its summary.
expect_refusal() {
  local tree=$scratch/$1 text=$2 rc
  echo "== bad input: $1"
  (cd "$tree" && PATH=$scratch/bin:/usr/bin:/bin LATHE_PACK_DIR=$tree/unpacked bash tools/gpu_check.sh "$tree/out") \
    > "$tree/stdout" 2>&1
  rc=$?
  [[ $rc == 1 ]] || fail "$1: exit $rc, not 1"
  grep -qF "$text" "$tree/out/summary.txt" "$tree/out/bench.log" ||
    fail "$1: no line saying \"$text\" (summary: $(tr '\n' ' ' < "$tree/out/summary.txt"))"
  grep -F "$text" "$tree/out/bench.log" | head -1
}
tree() {  # a scratch work tree: the script and the golden cases' folder
  mkdir -p "$scratch/$1/tools" "$scratch/$1/tests/golden"
  cp tools/gpu_check.sh "$scratch/$1/tools/"
  echo "case" > "$scratch/$1/tests/golden/a.case.safetensors"
}
made_up_pack() {  # a pack of this tree's sources (or another's), without programs
  local t=$scratch/$1 p=$scratch/$1/stage/gpupack
  mkdir -p "$p" "$t/.gpuc"
  (cd "$t" && sha256sum tools/gpu_check.sh tests/golden/a.case.safetensors) > "$p/SOURCES.sha256"
  printf 'commit 0123456789abcdef\narch 90\nneeds \n' > "$p/MANIFEST"
  : > "$p/setup.sh"
  tar -cJf "$t/.gpuc/pack.tar.xz" -C "$t/stage" gpupack
}
mkdir -p "$scratch/bin"  # a PATH without nvidia-smi
tree no-pack
expect_refusal no-pack "no .gpuc/pack.tar.xz"
tree other-sources
made_up_pack other-sources
echo "another case" > "$scratch/other-sources/tests/golden/a.case.safetensors"
expect_refusal other-sources "this work tree differs (tests/golden/a.case.safetensors)"
tree no-gpu
made_up_pack no-gpu
expect_refusal no-gpu "no GPU here: nvidia-smi not found"
# A GPU of another architecture than the pack's: nvidia-smi stands in, saying sm_80.
tree other-arch
made_up_pack other-arch
printf '#!/bin/sh\ncase "$*" in *compute_cap*) echo 8.0 ;; *) echo "NVIDIA A100, 570.1, 81920 MiB" ;; esac\n' > "$scratch/bin/nvidia-smi"
chmod +x "$scratch/bin/nvidia-smi"
expect_refusal other-arch "the GPU is sm_80, the pack holds code for sm_90 only"

if [[ $bad == 0 ]]; then echo "gpu_check_dry: the dry check and its four refusals as expected"; else exit 1; fi
