#!/usr/bin/env bash
# The op registry's goldens, in two steps: lathe draws every golden sample of every op
# (ref/op_registry.cpp) into tests/golden/op_samples.safetensors, then PyTorch answers them into
# op_samples.expected.safetensors (tests/golden/make_op_goldens.py). Run it after adding or changing
# a sample or an op's line of the PyTorch table; needs PyTorch (tools/deps.sh --torch).
#
#   bash tools/make_op_goldens.sh [BUILD_DIR]    (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
"$build/examples/lathe" ref --write-op-samples tests/golden/op_samples.safetensors
/usr/bin/python3 tests/golden/make_op_goldens.py tests/golden/op_samples.safetensors
