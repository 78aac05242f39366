#!/usr/bin/env python3
"""Fails when a file includes against lathe's layer arrows.

    tools/check_layers.py [ROOT]      check the checkout at ROOT (default: this script's repository)
    tools/check_layers.py --self-test show that a deliberate back-edge fails the check

The layers and what each may include (docs/design.md):

    core       core
    cuda       core, cuda
    nn         core, nn
    optim      core, optim
    serialize  core, nn, optim, serialize
    data       core, serialize, data
    train      core, nn, optim, serialize, data, train
    ref        core, nn, optim, serialize, data, train, ref
    examples   core, nn, optim, serialize, data, train, ref, examples
    python     core, nn, optim, serialize, data, train, ref, python
    tests      everything

and only cuda/ (and tests/) may include a CUDA header, so that a reader of core/ never meets a GPU
and nvcc never parses anything above it. An include is `#include "layer/..."` (the first path
component names the layer) or `#include <cuda...>`-style for the CUDA toolkit. Runs in CI as a
ctest test; exit status 1 lists every offending line.
"""
import os
import re
import sys
import tempfile

ALLOWED = {
    "core": {"core"},
    "cuda": {"core", "cuda"},
    "nn": {"core", "nn"},
    "optim": {"core", "optim"},
    "serialize": {"core", "nn", "optim", "serialize"},
    "data": {"core", "serialize", "data"},
    "train": {"core", "nn", "optim", "serialize", "data", "train"},
    "ref": {"core", "nn", "optim", "serialize", "data", "train", "ref"},
    "examples": {"core", "nn", "optim", "serialize", "data", "train", "ref", "examples"},
    "python": {"core", "nn", "optim", "serialize", "data", "train", "ref", "python"},
    "tests": {"core", "cuda", "nn", "optim", "serialize", "data", "train", "ref", "examples", "tests"},
}
MAY_INCLUDE_CUDA = {"cuda", "tests"}
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
QUOTED = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ANGLED = re.compile(r'^\s*#\s*include\s+<([^>]+)>')
CUDA_HEADER = re.compile(r'^(cuda[\w.]*|cublas\w*\.h|cublasLt\.h|curand\w*\.h|cufft\w*\.h|nccl\.h|'
                         r'nvtx\w*\.h|cooperative_groups.*|cub/.*|thrust/.*|mma\.h|vector_types\.h|'
                         r'device_launch_parameters\.h)$')


def violations(root):
    found = []
    for layer, allowed in sorted(ALLOWED.items()):
        top = os.path.join(root, layer)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            # The emulator's shim stands in for the CUDA toolkit's headers: part of cuda/.
            for name in sorted(filenames):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = QUOTED.match(line)
                        if m:
                            target = m.group(1).split("/")[0]
                            if target in ALLOWED and target not in allowed:
                                found.append(f"{rel}:{lineno}: {layer}/ includes \"{m.group(1)}\" "
                                             f"({layer} may include {', '.join(sorted(allowed))})")
                            continue
                        m = ANGLED.match(line)
                        if m and layer not in MAY_INCLUDE_CUDA and CUDA_HEADER.match(m.group(1)):
                            found.append(f"{rel}:{lineno}: {layer}/ includes the CUDA header <{m.group(1)}> "
                                         f"(only cuda/ may)")
    return found


def self_test():
    """A tree with clean files and three back-edges: the check must find exactly the three."""
    files = {
        "core/tensor.h": '#include "core/dtype.h"\n#include <vector>\n',
        "core/bad.cpp": '#include "nn/module.h"  // core may not know nn\n',
        "nn/bad.cpp": "#include <cuda_runtime.h>\n",
        "cuda/kernels.h": '#include <cuda_runtime_api.h>\n#include "core/op_table.h"\n',
        "data/bad.h": '#include "train/trainer.h"  // data sits below train\n',
        "train/ok.cpp": '#include "serialize/checkpoint.h"\n#include "data/dataset.h"\n',
        "ref/ok.cpp": '#include "train/train_step.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        found = violations(root)
    expected = ["core/bad.cpp:1", "data/bad.h:1", "nn/bad.cpp:1"]
    got = [v.split(": ")[0] for v in found]
    if got != expected:
        print("layer check self-test FAILED: expected violations at", expected, "got:", *found, sep="\n  ")
        return 1
    print("layer check self-test: the deliberate back-edges were caught:", *found, sep="\n  ")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = violations(root)
    for v in found:
        print(v)
    if found:
        print(f"layer check: {len(found)} include(s) against the arrows")
        return 1
    print("layer check: every include follows the arrows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
