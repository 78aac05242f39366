#!/usr/bin/env bash
# lathe as a CMake package, checked as another project would use it: installs BUILD (default
# build) into a temporary prefix, configures tests/consumer/ against it with find_package(lathe
# 0.1), builds it, trains `tiny` for three steps through it, and checks the losses are finite and
# the CUDA backend is there exactly when the build has it.
#   tools/check_package.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
prefix=$(mktemp -d /tmp/lathe_package_XXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix/install" >/dev/null
for f in include/lathe/core/tensor.h include/lathe/train/trainer.h lib/cmake/lathe/latheConfig.cmake \
         lib/cmake/lathe/latheConfigVersion.cmake bin/lathe; do
  [[ -e "$prefix/install/$f" ]] || { echo "check_package: $f is not installed" >&2; exit 1; }
done
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S tests/consumer -B "$prefix/consumer" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix/install" >"$prefix/configure.log" 2>&1 || { cat "$prefix/configure.log" >&2; exit 1; }
cmake --build "$prefix/consumer" -j "$(nproc)" >"$prefix/build.log" 2>&1 || { cat "$prefix/build.log" >&2; exit 1; }
out=$("$prefix/consumer/lathe_consumer" README.md "$prefix/run")
echo "$out"
[[ $(grep -c '^step [0-9]* loss [0-9.]*$' <<<"$out") == 3 ]] || { echo "check_package: three finite losses expected" >&2; exit 1; }
want="absent"
grep -q '^LATHE_CUDA:BOOL=ON' "$build/CMakeCache.txt" && want="registered"
grep -q "CUDA backend $want" <<<"$out" || { echo "check_package: the CUDA backend should be $want" >&2; exit 1; }
# A version the package does not offer is refused.
if cmake -S tests/consumer -B "$prefix/too_new" -DCMAKE_PREFIX_PATH="$prefix/install" -DLATHE_CONSUMER_VERSION=1.0 >/dev/null 2>&1; then
  echo "check_package: find_package(lathe 1.0) accepted a lathe 0.1" >&2; exit 1
fi
# The Python module, where the build has it, imports from the prefix and trains with the installed code.
if grep -q '^LATHE_PYTHON:BOOL=ON' "$build/CMakeCache.txt"; then
  python=$(sed -n 's/^LATHE_PYTHON_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
  site="$prefix/install/$(sed -n 's/^LATHE_PYTHON_INSTALL_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")"
  PYTHONPATH="$site" "$python" -c "
import lathe
assert lathe.__file__.startswith('$site'), lathe.__file__
m = lathe.GPT('tiny', seed=0)
x = lathe.randint(0, 256, (2, 8), seed=1)
print('installed python module: tiny loss', round(m.loss(x, x).item(), 4))
" || { echo "check_package: the installed Python module does not import from $site" >&2; exit 1; }
fi
echo "check_package: the installed lathe builds and trains a consumer project"
