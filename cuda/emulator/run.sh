#!/usr/bin/env bash
# Runs tests/test_cuda.cpp against the CUDA backend compiled for a CPU emulator, so that the
# kernels' logic (indexing, reductions, barriers, warp shuffles, launch shapes, the cuBLAS
# argument mapping) is tested on machines without a GPU. Slow (minutes), and blind to what only a
# GPU shows (races between threads, timing, memory limits): tools/gpu_check.sh is the real test.
#
# How: every CUDA thread is a fiber (ucontext); blocks run one after another, so __shared__
# becomes `static`; __syncthreads and warp shuffles are cooperative barriers; device memory is
# host memory; cuBLAS's strided batched GEMM is a naive loop over its documented column-major
# contract. The .cu sources are copied with each `kernel<<<cfg>>>(args);` rewritten as
# `::emu::launch(cfg, [&] { kernel(args); });` and compiled by the host C++ compiler against the
# headers in shim/ instead of the CUDA toolkit's.
#   cuda/emulator/run.sh [doctest options]     (default: -tc="cuda*")
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$root/build-cuda-emu"
mkdir -p "$build/src/cuda" "$build/obj"
cmake -S "$root" -B "$build/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_CUDA=OFF -DLATHE_TESTS=OFF >/dev/null
cmake --build "$build/lib" --target lathe_core -j 2

python3 - "$root/cuda" "$build/src/cuda" <<'PY'
import glob, os, re, sys
src, dst = sys.argv[1], sys.argv[2]
launch = re.compile(r'([A-Za-z_][\w:]*(?:<[^;{}()]*?>)?)<<<(.*?)>>>\((.*?)\);', re.S)
for f in glob.glob(os.path.join(src, '*')):
    if os.path.isdir(f):
        continue
    text = launch.sub(lambda m: '::emu::launch(%s, [&] { %s(%s); });' % (m.group(2), m.group(1), m.group(3)),
                      open(f).read())
    assert '<<<' not in text, f
    open(os.path.join(dst, os.path.basename(f)), 'w').write(text)
PY

flags=(-std=c++20 -O1 -fopenmp -I"$root/cuda/emulator/shim" -I"$build/src" -I"$root" -isystem /usr/include/eigen3
       -DLATHE_HAVE_CUDA=1 -Wno-unknown-pragmas)
objs=()
for f in "$build"/src/cuda/*.cu "$build"/src/cuda/*.cpp "$root/tests/test_cuda.cpp" "$root/tests/main.cpp"; do
  o="$build/obj/$(basename "$f").o"
  objs+=("$o")
  g++ "${flags[@]}" -x c++ -c "$f" -o "$o"
done
g++ -fopenmp -o "$build/emu_tests" "${objs[@]}" "$build/lib/core/liblathe_core.a"
if (($# == 0)); then set -- -tc="cuda*"; fi
"$build/emu_tests" "$@"
