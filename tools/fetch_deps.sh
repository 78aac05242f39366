#!/usr/bin/env bash
# Copies the headers, static libraries and CMake package files lathe builds against from this
# (Debian) machine into .deps/ (git-ignored), laid out like a prefix: .deps/include, .deps/lib,
# .deps/share. Carry .deps to a GPU machine that has nvcc, cmake and ninja but none of these
# packages, then run tools/gpu_check.sh there (it configures with -DCMAKE_PREFIX_PATH=.deps).
#   tools/fetch_deps.sh [destination]     (default: .deps in the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-.deps}"
bash tools/deps.sh
rm -rf "$dest"
mkdir -p "$dest/include" "$dest/lib" "$dest/share/cmake" "$dest/lib/cmake"
arch_lib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

# Header-only libraries and their CMake packages.
cp -rL /usr/include/eigen3 "$dest/include/"
mkdir -p "$dest/share/eigen3" && cp -rL /usr/share/eigen3/cmake "$dest/share/eigen3/"
cp -rL /usr/include/doctest "$dest/include/"
cp -rL /usr/lib/cmake/doctest "$dest/lib/cmake/"
# Debian's doctest package file hard-codes /usr as its prefix; make it relative to where it lies.
sed -i 's|^set(_IMPORT_PREFIX "/usr")|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
  "$dest/lib/cmake/doctest/doctestTargets.cmake"
cp -rL /usr/include/nlohmann "$dest/include/"
cp -rL /usr/share/cmake/nlohmann_json "$dest/share/cmake/"
cp -rL /usr/include/CLI "$dest/include/"
cp -rL /usr/share/cmake/CLI11 "$dest/share/cmake/"

# Compiled libraries as static archives: no shared-library paths to set up on the other machine.
cp -L /usr/include/xxhash.h /usr/include/xxh3.h "$dest/include/"
cp -L "$arch_lib/libxxhash.a" "$dest/lib/"
cp -L /usr/include/zlib.h /usr/include/zconf.h "$dest/include/"
cp -L "$arch_lib/libz.a" "$dest/lib/"

echo "fetch_deps: wrote $(du -sh "$dest" | cut -f1) to $dest"
