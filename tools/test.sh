#!/usr/bin/env bash
# Builds lathe and runs every test: the Release suite (with the CUDA backend compiled whenever the
# toolkit is found; GPU tests skip visibly without a GPU, and run on the CPU through the CUDA
# emulator as the ctest tests "emu:...", cuda/emulator/README.md), lathe installed and built into
# another project through find_package (tools/check_package.sh), the same suite under
# AddressSanitizer and UndefinedBehaviorSanitizer (CPU only), and the safetensors fuzzer for a
# bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
# GPT-2's vocabulary for the tokenizer tests (they fail, saying so, without it).
bash tools/fetch_gpt2_vocab.sh
export PATH="$PATH:/usr/local/cuda/bin"
jobs=$(nproc)
start=$SECONDS
# Each stage says when it starts, counted from the start, so that a slow run shows where it went.
stage() { echo "== $1 (at $((SECONDS - start)) s)"; }

stage "release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
stage "release tests"
(cd build && ctest --output-on-failure -j "$jobs")

stage "the installed package, used by another project (tests/consumer/)"
bash tools/check_package.sh build

stage "sanitizer build (address, undefined; CPU only)"
# Built for AVX2 where the machine has it, not for the machine itself: f32 products then run lathe's
# own kernel (core/cpu/matmul.cpp takes it in AVX2 and AVX-512 builds) on its 8-float vectors, so the
# sanitizers check that path, while the Release suite checks the AVX-512 one.
asan_flags="-O1"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then asan_flags="-O1 -mavx2 -mfma"; fi
# Line tables (-g1) are all the sanitizers' reports need (file and line in each frame); full debug
# information made each object 2.5x larger and took 30% more compile time.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLATHE_CUDA=OFF -DLATHE_NATIVE=OFF \
  -DLATHE_SANITIZE=address,undefined -DCMAKE_CXX_FLAGS="$asan_flags" -DCMAKE_CXX_FLAGS_DEBUG=-g1 >/dev/null
cmake --build build-asan -j "$jobs" --target lathe_tests
stage "sanitizer tests"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j "$jobs")

if [[ -x tools/run_fuzzer.sh ]]; then
  stage "fuzzing the safetensors reader"
  bash tools/run_fuzzer.sh "${LATHE_FUZZ_SECONDS:-60}"
fi
echo "== all tests passed in $((SECONDS - start)) s"
