#!/usr/bin/env bash
# Installs the Debian packages lathe needs, skipping those already installed.
#   tools/deps.sh            build + test dependencies
#   tools/deps.sh --torch    also PyTorch and OpenBLAS (only to regenerate golden files or run the
#                            reference benchmark; without OpenBLAS, Debian's torch uses the slow reference BLAS)
set -euo pipefail
# OpenBLAS (libopenblas-dev) multiplies f32/f64 matrices on the CPU (core/cpu/matmul.cpp).
# curl fetches GPT-2's vocabulary (tools/fetch_gpt2_vocab.sh); PCRE2 runs the tokenizer's regexes.
# clang builds the fuzzer (tests/fuzz): libclang-rt-14-dev holds libFuzzer and the sanitizers'
# runtimes, libomp-dev clang's OpenMP runtime (lathe's CMake requires OpenMP; g++ has its own).
# Open MPI (openmpi-bin: mpirun; libopenmpi-dev: the C API) runs data parallel training across
# processes, `mpirun -np N lathe train` (train/distributed/); without it lathe trains in one process.
# The Python module (python/, `import lathe`): python3-dev, pybind11-dev and pybind11-json-dev to build
# it, libdlpack-dev for DLPack's header, python3-numpy and python3-pytest for its tests.
# xz-utils packs the GPU machine's binaries (tools/gpu_pack.sh) and unpacks them (tools/gpu_check.sh,
# and its dry run in ctest).
pkgs=(cmake ninja-build g++ pkg-config libeigen3-dev doctest-dev nlohmann-json3-dev libcli11-dev
      libxxhash-dev libopenblas-dev libpcre2-dev curl ca-certificates fortunes python3 clang libclang-rt-14-dev libomp-dev
      openmpi-bin libopenmpi-dev xz-utils python3-dev pybind11-dev pybind11-json-dev libdlpack-dev python3-numpy
      python3-pytest)
[[ "${1:-}" == "--torch" ]] && pkgs+=(python3-torch libopenblas0-pthread)
# Node.js and npm run llama.cpp's npm package for the GGUF tests (tools/fetch_llama_cpp.sh). Wanted
# only where the commands are missing: a Node.js from elsewhere (NodeSource's bundles npm) is kept,
# and Debian's npm package would conflict with it.
command -v node >/dev/null || pkgs+=(nodejs)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
