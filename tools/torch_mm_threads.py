#!/usr/bin/env python3
"""PyTorch's f32 matrix product at torch.set_num_threads(1): GFLOP/s and CPU time over wall time.

Debian's torch hands products to OpenBLAS, whose own thread pool set_num_threads does not reach, so
PyTorch's "1 thread" multiplies on every core (docs/benchmarks.md, "Why 2x is out of reach on
char here"). Run it as is and with OPENBLAS_NUM_THREADS=1 (one core in truth):
    /usr/bin/python3 tools/torch_mm_threads.py
    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/torch_mm_threads.py
"""
import os
import resource
import time

import torch

SHAPES = [(1024, 1024, 1024), (384, 2048, 1536)]  # m x k x n: a square and char's mlp.c_fc


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, set_num_threads(1), OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    for m, k, n in SHAPES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(3):
            torch.mm(a, b)
        reps = max(5, int(2e10 / (2 * m * k * n)))
        best = float("inf")
        for _ in range(5):
            wall0, cpu0 = time.perf_counter(), cpu_seconds()
            for _ in range(reps):
                torch.mm(a, b)
            wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
            if wall < best:
                best, ratio = wall, cpu / wall
        print(f"{m} x {k} x {n}: {2 * m * k * n * reps / best / 1e9:.1f} GFLOP/s, CPU time / wall time {ratio:.2f}")


if __name__ == "__main__":
    main()
