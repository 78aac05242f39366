#!/usr/bin/env bash
# Builds lathe for a GPU machine on this (CPU) machine and packs what tools/gpu_check.sh runs
# there into .gpuc/pack.tar.xz (git-ignored): the CUDA backend for Hopper (sm_90) with portable
# x86-64-v3 host code, built in $LATHE_GPU_BUILD (default build-gpu; about 10 minutes on two
# cores, incremental after); the three programs the check runs (lathe, lathe_tests,
# bench_attention), stripped, at their paths inside the build; the shared libraries they link that
# a CUDA machine may lack (OpenBLAS, OpenMP, MPI, PCRE2, xxhash, ...; never the C library or
# CUDA's own, which the machine's toolkit provides); a MANIFEST (commit, flags, date, the
# architectures, the CUDA major version); SOURCES.sha256 (the golden cases and tools the check
# reads, so that it refuses another commit's work tree); and setup.sh. The size is printed: the
# work tree carried to a GPU machine may hold 64 MiB in all.
#   tools/gpu_pack.sh [extra cmake options]     e.g. -DLATHE_CUDA_ARCHITECTURES="80;90"
# On the GPU machine, from a copy of the work tree (with .gpuc/):
#   bash tools/gpu_check.sh LOGDIR              (unpacks to /tmp/gpupack itself), or by hand:
#   tar -xJf .gpuc/pack.tar.xz -C /tmp && source /tmp/gpupack/setup.sh && $LATHE_BUILD/tests/lathe_tests -tc='cuda*'
# The binaries carry paths of this machine (the golden files and the lathe program the tests run,
# in this work tree and this build): setup.sh, sourced from the root of the work tree's copy, makes
# them resolve there with symbolic links where they do not exist, and sets LD_LIBRARY_PATH
# (the pack's libraries, then cuBLAS and NCCL wherever the machine has them) and $LATHE_BUILD.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=$(realpath -m "${LATHE_GPU_BUILD:-build-gpu}")
export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null || { echo "gpu_pack: nvcc not found (the CUDA toolkit, e.g. /usr/local/cuda/bin)" >&2; exit 1; }

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# The emulator is for machines without a GPU; the GPU machine runs the real kernels. The Python
# module is not packed (the check runs programs).
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_CUDA=ON -DLATHE_NATIVE=OFF \
  -DCMAKE_CXX_FLAGS="-march=x86-64-v3" -DLATHE_CUDA_ARCHITECTURES=90 -DLATHE_CUDA_EMULATOR=OFF -DLATHE_PYTHON=OFF \
  "${launcher[@]}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pack=$stage/gpupack
mkdir -p "$pack/build" "$pack/lib"
# Only the programs tools/gpu_check.sh runs, stripped of their host symbols (the device code, about
# 12 MB of sm_90 code in each, is data and stays): the work tree carried to the GPU machine may
# hold 64 MiB in all.
for program in "$build"/examples/lathe "$build"/examples/bench_attention "$build"/tests/lathe_tests; do
  f=${program#"$build"/}
  mkdir -p "$pack/build/$(dirname "$f")"
  cp "$program" "$pack/build/$f"
  strip --strip-unneeded "$pack/build/$f"
done
find "$pack/build" -type f -exec ldd {} + 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|cuda|libcublas|libnccl' |
  while read -r lib; do cp -L "$lib" "$pack/lib/"; done
# The files of this work tree that the check reads beside the binaries (the golden cases, the
# tools): gpu_check.sh refuses a work tree where they differ, which would be another commit's.
git ls-files -z tools tests/golden | xargs -0 sha256sum > "$pack/SOURCES.sha256"
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n): $(nvcc --version | tail -1)"
  echo "arch $(grep -oP '(?<=^LATHE_CUDA_ARCHITECTURES:STRING=).*' "$build/CMakeCache.txt" | tr ';' ' ')"
  echo "cuda $(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
  echo "source $src"
  echo "build $build"
  echo "cmake -DLATHE_CUDA=ON -DLATHE_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 -DLATHE_CUDA_ARCHITECTURES=90 $*"
} > "$pack/MANIFEST"

cat > "$pack/setup.sh" <<SETUP
# Sourced from the root of the work tree's copy on the GPU machine (tools/gpu_pack.sh).
_lathe_pack=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
# The paths compiled into the binaries: this machine's work tree and build.
for _lathe_pair in "$src:\$PWD" "$build:\$_lathe_pack/build"; do
  _lathe_from=\${_lathe_pair%%:*}
  _lathe_to=\${_lathe_pair#*:}
  if [ ! -e "\$_lathe_from" ]; then mkdir -p "\$(dirname "\$_lathe_from")" && ln -s "\$_lathe_to" "\$_lathe_from"; fi
done
# cuBLAS, which lathe loads at its first product (cuda/cublas/cublas_loader.cpp: the build's major
# version first, else 13 or 12), and NCCL, wherever this machine keeps them: the toolkit, a PyTorch
# wheel's nvidia/*/lib, the system.
_lathe_dirs=""
_lathe_major=\$(sed -n 's/^cuda //p' "\$_lathe_pack/MANIFEST")
for _lathe_so in libcublasLt.so.\$_lathe_major libcublasLt.so.13 libcublasLt.so.12; do
  _lathe_dir=\$(find /usr/local /usr/lib /opt -name "\$_lathe_so" 2>/dev/null | head -1 | xargs -r dirname)
  if [ -n "\$_lathe_dir" ]; then _lathe_dirs=":\$_lathe_dir"; break; fi
done
[ -n "\$_lathe_dirs" ] || echo "gpu_pack setup: no libcublasLt.so.13 or .12 on this machine (the CUDA toolkit's lib64)" >&2
_lathe_dir=\$(find /usr/local /usr/lib /opt -name 'libnccl.so.2*' 2>/dev/null | head -1 | xargs -r dirname)
_lathe_dirs="\$_lathe_dirs\${_lathe_dir:+:\$_lathe_dir}"
export LD_LIBRARY_PATH="\$_lathe_pack/lib\$_lathe_dirs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export LATHE_BUILD="$build" LATHE_PACK="\$_lathe_pack" PATH="\$PATH:/usr/local/cuda/bin"
unset _lathe_pair _lathe_from _lathe_to _lathe_so _lathe_dir _lathe_dirs _lathe_major
SETUP

mkdir -p "$src/.gpuc"
tar -cf - -C "$stage" gpupack | xz -6 -T"$(nproc)" > "$src/.gpuc/pack.tar.xz"
du -h "$src/.gpuc/pack.tar.xz"
echo "gpu_pack: $(du -h "$src/.gpuc/pack.tar.xz" | cut -f1) in .gpuc/pack.tar.xz ($(find "$pack/build" -type f | wc -l) programs, $(find "$pack/lib" -type f | wc -l) libraries); on the GPU machine: bash tools/gpu_check.sh LOGDIR"
