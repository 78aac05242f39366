#!/usr/bin/env python3
"""Resumes `lathe train` runs on a device and checks them, as tools/gpu_check.sh does on a GPU:

  bitwise   for every optimizer (adamw, adam, sgd, prodigy) in f32, fused AdamW in f32, and fused
            AdamW in bf16 and in fp16 (with a loss scale that overflows, so the scaler's state
            matters): a run stopped at step K and resumed is bitwise the run that never stopped
            (every logged loss, learning rate, validation loss, loss scale and skipped step; every
            tensor of the last checkpoint and of model.safetensors);
  cross     a run that moves DEVICE -> OTHER -> DEVICE at steps K and 2K (`--resume --device`)
            against the run that stayed on DEVICE: each leg runs on its device, and every logged
            loss and validation loss stays within --rtol (2e-3; the devices' kernels round
            differently, so not bitwise).

  python3 tools/resume_check.py --lathe PATH --device DEVICE [--other cpu] [--work DIR] [--only NAME ...]
  e.g. python3 tools/resume_check.py --lathe build/examples/lathe --device cuda

Prints one line per case and exits 1 when any fails. The model is tiny (1 layer, 32 wide, dropout
0.1, so that the dropout generator's state matters too) on a generated text; each case runs in
seconds. Needs only Python's standard library.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

MODEL = {"vocab_size": 256, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32, "dropout": 0.1, "batch": 4}
STEPS, K = 24, 8  # the bitwise cases stop at K; the cross-device run moves at K and 2K
BITWISE = {
    "adamw f32": ["--optimizer", "adamw"],
    "adam f32": ["--optimizer", "adam"],
    "sgd f32": ["--optimizer", "sgd", "--lr", "0.1"],
    "prodigy f32": ["--optimizer", "prodigy", "--lr", "1.0"],
    "adamw fused f32": ["--optimizer", "adamw", "--fused"],
    "adamw fused bf16": ["--optimizer", "adamw", "--fused", "--precision", "bf16"],
    "adamw fused fp16": ["--optimizer", "adamw", "--fused", "--precision", "fp16", "--init-scale", "1048576",
                         "--scale-growth-interval", "7"],
}
METRIC_KEYS = ("step", "loss", "lr", "val_loss", "scale", "skipped")


def read_tensors(path):
    """Every tensor of a safetensors file: name -> (dtype, shape, raw bytes)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    return {name: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for name, v in header.items() if name != "__metadata__"}


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Runner:
    def __init__(self, lathe, work):
        self.lathe, self.work = lathe, work
        self.data = os.path.join(work, "corpus.txt")
        self.config = os.path.join(work, "model.json")
        with open(self.data, "w") as f:
            f.write("".join(f"the quick brown fox {i} jumps over the lazy dog. " for i in range(80)))
        with open(self.config, "w") as f:
            json.dump(MODEL, f)

    def train(self, out, args, log):
        cmd = [self.lathe, "train", "--quiet", "--data", self.data, "--config", self.config, "--out", out,
               "--threads", "1", "--sample-tokens", "0", "--warmup", "3", "--eval-interval", str(K), "--eval-iters",
               "2", "--ckpt-interval", str(K), "--keep-last", "10"] + args
        self.run(cmd, log)

    def resume(self, out, args, log):
        self.run([self.lathe, "train", "--quiet", "--resume", out] + args, log)

    @staticmethod
    def run(cmd, log):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log.append("$ " + " ".join(cmd) + "\n" + r.stdout)
        if r.returncode != 0:
            raise RuntimeError(f"exit {r.returncode}: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ''}")


def ckpt(directory, step):
    return os.path.join(directory, f"ckpt-{step:08d}.safetensors")


def stop_at(full, part, step):
    """A copy of `full` as a process killed two steps after writing checkpoint `step` leaves it:
    that checkpoint, and metrics of two steps past it, which the resume must drop."""
    os.makedirs(part)
    shutil.copy(ckpt(full, step), ckpt(part, step))
    lines = read_metrics(os.path.join(full, "metrics.jsonl"))
    with open(os.path.join(part, "metrics.jsonl"), "w") as f:
        for m in lines[:step + 2]:
            f.write(json.dumps(m) + "\n")


def bitwise_case(runner, name, args, device, work, log):
    full, part = os.path.join(work, "full"), os.path.join(work, "part")
    runner.train(full, ["--device", device, "--steps", str(STEPS)] + args, log)
    stop_at(full, part, K)
    runner.resume(part, [], log)
    a, b = read_metrics(os.path.join(full, "metrics.jsonl")), read_metrics(os.path.join(part, "metrics.jsonl"))
    if len(a) != STEPS or len(b) != STEPS:
        return f"{len(a)} and {len(b)} metrics lines, want {STEPS}"
    for x, y in zip(a, b):
        for key in METRIC_KEYS:
            if x.get(key) != y.get(key):
                return f"step {x.get('step')}: {key} {y.get(key)!r} after the resume, {x.get(key)!r} without"
    for label, path in (("last checkpoint", ckpt(full, STEPS)), ("model.safetensors", os.path.join(full, "model.safetensors"))):
        want, got = read_tensors(path), read_tensors(path.replace(full, part))
        if want.keys() != got.keys():
            return f"{label}: tensors {sorted(set(want) ^ set(got))} in one run only"
        differ = [n for n in want if want[n] != got[n]]
        if differ:
            return f"{label}: {len(differ)} of {len(want)} tensors differ, e.g. {differ[0]}"
    skipped = sum(1 for m in a if m.get("skipped"))
    extra = f", {skipped} skipped steps" if "fp16" in name else ""
    return f"ok: {STEPS} steps, stopped at {K}; {len(read_tensors(ckpt(full, STEPS)))} tensors bitwise{extra}"


def cross_case(runner, device, other, rtol, work, log):
    # Every leg keeps the run's --steps (the learning-rate schedule depends on it): the run on
    # OTHER is resumed from the stayed run's checkpoint K and runs to the end, and the last leg
    # resumes on DEVICE from that run's checkpoint 2K, cut off there as a killed process leaves it.
    stay, leg, move = os.path.join(work, "stay"), os.path.join(work, "leg"), os.path.join(work, "move")
    runner.train(stay, ["--device", device, "--optimizer", "adamw", "--steps", str(3 * K)], log)
    stop_at(stay, leg, K)
    runner.resume(leg, ["--device", other], log)
    stop_at(leg, move, 2 * K)
    runner.resume(move, ["--device", device], log)
    a, b = read_metrics(os.path.join(stay, "metrics.jsonl")), read_metrics(os.path.join(move, "metrics.jsonl"))
    if len(a) != 3 * K or len(b) != 3 * K:
        return f"{len(a)} and {len(b)} metrics lines, want {3 * K}"
    worst, where = 0.0, ""
    for x, y in zip(a, b):
        for key in ("loss", "val_loss"):
            if key in x:
                d = abs(x[key] - y[key]) / max(abs(x[key]), 1e-12)
                if d > worst:
                    worst, where = d, f"{key} at step {x['step']}"
    if worst > rtol:
        return f"{where} differs by {worst:.2e} (relative; at most {rtol:g})"
    vals = [f"{m['val_loss']:.4f}" for m in b if "val_loss" in m]
    return (f"ok: {device} -> {other} -> {device} at steps {K} and {2 * K}; val losses {', '.join(vals)}; "
            f"largest relative difference from the run that stayed {worst:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lathe", required=True, help="the lathe program")
    ap.add_argument("--device", required=True, help="the device to check (cpu, sim, cuda)")
    ap.add_argument("--other", default="cpu", help="where the cross-device run moves in between (cpu)")
    ap.add_argument("--rtol", type=float, default=2e-3, help="the cross-device run's tolerance (2e-3)")
    ap.add_argument("--work", help="where the runs go (a temporary directory, removed unless a case fails)")
    ap.add_argument("--only", nargs="+", help="cases to run: names of the bitwise cases, or 'cross'")
    a = ap.parse_args()
    names = list(BITWISE) + ["cross"]
    if a.only:
        unknown = [n for n in a.only if n not in names]
        if unknown:
            ap.error(f"unknown case(s) {unknown}; cases: {names}")
        names = [n for n in names if n in a.only]
    work = a.work or tempfile.mkdtemp(prefix="lathe-resume-")
    os.makedirs(work, exist_ok=True)
    runner = Runner(os.path.abspath(a.lathe), work)
    failed = 0
    for name in names:
        case_dir = os.path.join(work, name.replace(" ", "_"))
        shutil.rmtree(case_dir, ignore_errors=True)
        os.makedirs(case_dir)
        log = []
        try:
            if name == "cross":
                verdict = cross_case(runner, a.device, a.other, a.rtol, case_dir, log)
            else:
                verdict = bitwise_case(runner, name, BITWISE[name], a.device, case_dir, log)
        except RuntimeError as e:
            verdict = f"lathe train failed: {e}"
        with open(os.path.join(case_dir, "log.txt"), "w") as f:
            f.write("\n".join(log))
        ok = verdict.startswith("ok")
        failed += not ok
        label = f"cross-device resume on {a.device}" if name == "cross" else f"bitwise resume {name} on {a.device}"
        print(f"{'PASS' if ok else 'FAIL'} {label}: {verdict}", flush=True)
    if failed:
        print(f"resume_check: {failed} of {len(names)} failed; runs and logs in {work}")
    elif not a.work:
        shutil.rmtree(work)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
