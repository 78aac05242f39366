#!/usr/bin/env bash
# Builds lathe with the CUDA backend on a machine with an NVIDIA GPU and runs the CUDA test suite
# (tests/test_cuda.cpp: every kernel against the CPU backend, Philox numbers, allocator, errors).
# The machine needs nvcc (CUDA 12+), cmake 3.25+, ninja and a C++20 compiler; the other
# dependencies come from .deps/, made by tools/fetch_deps.sh on a Debian machine.
#   tools/gpu_check.sh [doctest options]     e.g. tools/gpu_check.sh -tc="cuda: matmul*"
# Environment: LATHE_DEPS (default .deps), LATHE_GPU_BUILD (default build-gpu),
#              LATHE_CUDA_ARCHITECTURES (default 90, the H100/H200), LATHE_GPU_ALL=1 also runs
#              every other test with the CUDA backend compiled in, LATHE_GPU_BENCH=1 also times
#              `lathe bench --config gpt2 --device cuda` against PyTorch eager on the same GPU
#              (tools/torch_bench_device.py; needs PyTorch with CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
deps="$(realpath -m "${LATHE_DEPS:-.deps}")"
build="${LATHE_GPU_BUILD:-build-gpu}"
if [[ ! -d "$deps/include/eigen3" ]]; then
  echo "gpu_check: $deps has no dependencies; run tools/fetch_deps.sh on a Debian machine and carry .deps here" >&2
  exit 1
fi
export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null || { echo "gpu_check: nvcc not found" >&2; exit 1; }
nvidia-smi -L 2>/dev/null || echo "gpu_check: nvidia-smi is not available"
nvcc --version | tail -1

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DLATHE_CUDA_ARCHITECTURES="${LATHE_CUDA_ARCHITECTURES:-90}" \
  -DCMAKE_PREFIX_PATH="$deps" -DCMAKE_INCLUDE_PATH="$deps/include" -DCMAKE_LIBRARY_PATH="$deps/lib" \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target lathe_tests lathe

# Skipping is a failure here: this script exists to run the GPU tests.
export LATHE_REQUIRE_GPU=1
"$build/tests/lathe_tests" -tc="cuda*" "$@"
if [[ "${LATHE_GPU_ALL:-0}" == 1 ]]; then
  "$build/tests/lathe_tests" -tce="cuda*,cli*"
fi
if [[ "${LATHE_GPU_BENCH:-0}" == 1 ]]; then
  # Issue 7's speed target: lathe >= 0.5x PyTorch eager's tokens/s on the same model and GPU.
  "$build/examples/lathe" bench --config gpt2 --device cuda --steps 10
  lathe_rate=$("$build/examples/lathe" bench --config gpt2 --device cuda --steps 10 --json |
    sed -n 's/.*"tok_per_s":\([0-9.e+]*\).*/\1/p')
  torch_rate=$(python3 tools/torch_bench_device.py gpt2 cuda 10 --json | sed -n 's/.*"tok_per_s": \([0-9.e+]*\).*/\1/p')
  python3 tools/torch_bench_device.py gpt2 cuda 10
  awk -v l="$lathe_rate" -v t="$torch_rate" 'BEGIN { printf "gpt2 on cuda: lathe %.0f tok/s, torch %.0f tok/s: %.2fx (target >= 0.5x)\n", l, t, l / t }'
fi
