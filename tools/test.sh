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

echo "== release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
echo "== release tests"
(cd build && ctest --output-on-failure -j "$jobs")

echo "== the installed package, used by another project (tests/consumer/)"
bash tools/check_package.sh build

echo "== sanitizer build (address, undefined; CPU only)"
# Built for AVX2 where the machine has it, not for the machine itself: f32 products then run lathe's
# own kernel (core/cpu/matmul.cpp takes it in AVX2 and AVX-512 builds) on its 8-float vectors, so the
# sanitizers check that path, while the Release suite checks the AVX-512 one.
asan_flags="-O1"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then asan_flags="-O1 -mavx2 -mfma"; fi
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLATHE_CUDA=OFF -DLATHE_NATIVE=OFF \
  -DLATHE_SANITIZE=address,undefined -DCMAKE_CXX_FLAGS="$asan_flags" >/dev/null
cmake --build build-asan -j "$jobs" --target lathe_tests
echo "== sanitizer tests"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j "$jobs")

if [[ -x tools/run_fuzzer.sh ]]; then
  echo "== fuzzing the safetensors reader"
  bash tools/run_fuzzer.sh "${LATHE_FUZZ_SECONDS:-60}"
fi
echo "== all tests passed in $((SECONDS - start)) s"
