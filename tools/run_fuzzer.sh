#!/usr/bin/env bash
# Fuzzes the safetensors reader: configures a clang build directory (build-fuzz/, or
# $LATHE_FUZZ_BUILD_DIR), builds the libFuzzer target with AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs it for a bounded time over a copy of the seed corpus
# (tests/fuzz/corpus/ stays unchanged). Any crash, sanitizer report, leak, timeout or
# non-lathe::Error exception fails the run; the input that caused it is saved under
# <build dir>/fuzz-artifacts/. It fuzzes in libFuzzer's fork mode, one process per core (each
# child's crash stops the run, which then exits nonzero), so SECONDS of it are SECONDS on every core.
#
#   tools/run_fuzzer.sh [SECONDS]     default 60; LATHE_JOBS sets the build parallelism and the
#                                     number of fuzzing processes
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build="${LATHE_FUZZ_BUILD_DIR:-build-fuzz}"
cxx="${LATHE_FUZZ_CXX:-$(command -v clang++-14 || command -v clang++)}"
launcher=()
# One unity batch per library, as tools/test.sh's builds: the libraries compile as four files.
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0)
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" \
  -DLATHE_FUZZ=ON -DLATHE_TESTS=OFF -DLATHE_CUDA=OFF -DLATHE_NATIVE=OFF -DLATHE_PYTHON=OFF "${unity[@]}" >/dev/null
cmake --build "$build" --target fuzz_safetensors -j "${LATHE_JOBS:-$(nproc)}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/* "$work/"
mkdir -p "$build/fuzz-artifacts"
jobs="${LATHE_JOBS:-$(nproc)}"
echo "fuzz: running the safetensors reader for ${seconds} s in ${jobs} processes"
ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  "$build/tests/fuzz/fuzz_safetensors" "$work" -fork="$jobs" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -dict=tests/fuzz/safetensors.dict -artifact_prefix="$build/fuzz-artifacts/" -print_final_stats=1
echo "fuzz: clean for ${seconds} s"
