#!/usr/bin/env python3
"""`mpirun -np N lathe train` end to end (docs/design.md, "Data parallelism"); one ctest test per scenario.

    dist_train.py --lathe PATH [--lathe-tests PATH] SCENARIO

Scenarios:
    losses   tiny, 50 steps (--steps), global batch 8, one thread per process: -np 2 logs the losses of one
             process within relative 1e-3 at every step, and bitwise those of one process with
             --grad-slices 2 (the same reduction order); --zero 1 at -np 2 gives bitwise the losses
             and the checkpoint (weights and optimizer state) of --zero 0 at -np 2 (lathe's line
             "optimizer state per process" is printed; zero_state measures the halves)
    resume   a -np 2 checkpoint at step 20 resumes at -np 1, at -np 3 and at -np 3 with --zero 1,
             and continues within relative 1e-3 of the uninterrupted -np 2 run; at -np 1 with
             --grad-slices 2 it continues bitwise
    freeze   --freeze wte at -np 2: the embedding is bitwise unchanged and holds no optimizer state;
             the optimizer's parameters and groups are those of the unfrozen run; the checkpoint
             tests of frozen and left-out parameters pass under mpirun
    zero_state  the test case "dist: ZeRO-1 leaves each process about 1/N ..." of lathe_tests
             (tests/test_dist.cpp) under mpirun -np 2: each process's optimizer state, summed over
             the buffers its state tensors hold (and seen by the allocator), is half of the
             --zero 0 state within the largest parameter's, and the halves add up to the whole
    bad      a global batch not divisible by N, ranks given different options (a default compared
             as the value it stands for), ranks reading different corpora: one error, printed
             once, and every rank exits nonzero
    kill     rank 1 killed mid-run, then rank 0 killed while it checkpoints every step: the job
             ends within 30 s naming the rank, and every checkpoint file is whole
    stuck    rank 1 stopped (SIGSTOP) mid-run under --dist-timeout 5, then rank 0: every process of
             the job, the stopped one included, is gone within the timeout plus 10 s, and stderr
             has one line naming the stopped rank, the step and --dist-timeout

Skips (exit 77, which ctest shows as skipped) when mpirun is not installed or lathe was built
without MPI. Only the standard library: safetensors files are read by hand.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77
MPIRUN = shutil.which("mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def corpus(tmp):
    path = os.path.join(tmp, "corpus.txt")
    with open(path, "w") as f:
        for i in range(400):
            f.write("the quick brown fox %d jumps over the lazy dog; pack my box with five dozen liquor jugs. " % i)
    return path


def train(lathe, np, out, data, *extra, timeout=240):
    """Runs lathe train (the tiny preset unless `extra` names a --config) under mpirun -np NP; returns
    (exit code, stdout + stderr)."""
    config = [] if "--config" in extra else ["--config", "tiny"]
    cmd = [MPIRUN, *MPI_FLAGS, "-np", str(np), lathe, "train", *config, "--data", data,
           "--threads", "1", "--eval-iters", "2", "--sample-tokens", "0", "--out", out, *extra]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p.returncode, p.stdout


def train_ok(lathe, np, out, data, *extra):
    code, text = train(lathe, np, out, data, *extra)
    if code != 0:
        fail("mpirun -np %d lathe train %s exited %d:\n%s" % (np, " ".join(extra), code, text))
    return text


def ckpt(run_dir, step):
    return os.path.join(run_dir, "ckpt-%08d.safetensors" % step)


def losses(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f)}


def tensors(path):
    """name -> raw bytes of every tensor of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    return {k: blob[base + v["data_offsets"][0]:base + v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}


def metadata(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(json.loads(f.read(n))["__metadata__"]["lathe"])


def close(a, b, rtol=1e-3):
    return abs(a - b) <= rtol * max(abs(a), abs(b))


def compare_losses(name, got, want, steps, rtol=1e-3):
    worst = 0.0
    for s in steps:
        if s not in got or s not in want:
            fail("%s: step %d missing" % (name, s))
        worst = max(worst, abs(got[s] - want[s]) / abs(want[s]))
        if not close(got[s], want[s], rtol):
            fail("%s: step %d loss %.8f vs %.8f (relative %.2e > %g)" % (name, s, got[s], want[s],
                                                                         abs(got[s] - want[s]) / abs(want[s]), rtol))
    print("%s: %d steps within relative %.2e (largest difference)" % (name, len(steps), worst))


def scenario_losses(lathe, tmp, data, steps):
    common = ["--steps", str(steps), "--batch", "8", "--lr", "3e-3", "--warmup", "5"]
    train_ok(lathe, 1, os.path.join(tmp, "np1"), data, *common)
    text2 = train_ok(lathe, 2, os.path.join(tmp, "np2"), data, *common)
    textz = train_ok(lathe, 2, os.path.join(tmp, "np2z"), data, *common, "--zero", "1")
    train_ok(lathe, 1, os.path.join(tmp, "np1s2"), data, *common, "--grad-slices", "2")
    one, two, zero, sliced = (losses(os.path.join(tmp, d)) for d in ("np1", "np2", "np2z", "np1s2"))
    compare_losses("-np 2 vs 1 process", two, one, range(1, steps + 1))
    same = sum(two[s] == one[s] for s in range(1, steps + 1))
    print("-np 2 vs 1 process: %d of %d losses bitwise equal" % (same, steps))
    if two != sliced:
        fail("-np 2 differs from one process with --grad-slices 2: %s" %
             [(s, two[s], sliced[s]) for s in range(1, steps + 1) if two[s] != sliced[s]][:3])
    vals = [[json.loads(l).get("val_loss") for l in open(os.path.join(tmp, d, "metrics.jsonl"))] for d in ("np2", "np1s2")]
    if vals[0] != vals[1]:
        fail("-np 2's validation losses differ from one process's with --grad-slices 2: %s" % vals)
    a = tensors(ckpt(os.path.join(tmp, "np2"), steps))
    b = tensors(ckpt(os.path.join(tmp, "np1s2"), steps))
    if any(a[k] != b[k] for k in a):
        fail("-np 2's checkpoint differs from one process's with --grad-slices 2")
    print("-np 2 = one process with --grad-slices 2 bitwise: %d losses, %d checkpoint tensors" % (steps, len(a)))
    # fp16 with its loss scaler (the gradients are reduced while scaled; every rank finds the same inf).
    short = ["--steps", "8", "--batch", "8", "--precision", "fp16"]
    train_ok(lathe, 1, os.path.join(tmp, "fp16s2"), data, *short, "--grad-slices", "2")
    train_ok(lathe, 2, os.path.join(tmp, "fp16np2"), data, *short, "--zero", "1")
    if losses(os.path.join(tmp, "fp16s2")) != losses(os.path.join(tmp, "fp16np2")):
        fail("fp16: -np 2 --zero 1 differs from one process with --grad-slices 2")
    print("fp16 with the loss scaler: -np 2 --zero 1 = one process with --grad-slices 2 bitwise, 8 steps")
    # Dropout: rank r draws its masks where slice r of one process draws them.
    config = os.path.join(tmp, "dropout.json")
    with open(config, "w") as f:
        json.dump({"vocab_size": 256, "block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 32, "dropout": 0.2}, f)
    drop = ["--steps", "8", "--batch", "8", "--config", config]
    train_ok(lathe, 1, os.path.join(tmp, "drop_s2"), data, *drop, "--grad-slices", "2")
    train_ok(lathe, 2, os.path.join(tmp, "drop_np2"), data, *drop)
    if losses(os.path.join(tmp, "drop_s2")) != losses(os.path.join(tmp, "drop_np2")):
        fail("dropout 0.2: -np 2 differs from one process with --grad-slices 2: %s %s" %
             (losses(os.path.join(tmp, "drop_s2")), losses(os.path.join(tmp, "drop_np2"))))
    print("dropout 0.2: -np 2 = one process with --grad-slices 2 bitwise, 8 steps")
    groups = [metadata(ckpt(os.path.join(tmp, d), steps))["optimizer"] for d in ("np1", "np2", "np2z")]
    if any((g["params"], [x["params"] for x in g["groups"]]) != (groups[0]["params"], [x["params"] for x in groups[0]["groups"]])
           for g in groups):
        fail("the optimizer's parameters or groups differ between 1 process, -np 2 and -np 2 --zero 1")
    print("the optimizer tracks the same %d parameters in the same %d groups at -np 1, 2 and 2 with ZeRO-1" %
          (len(groups[0]["params"]), len(groups[0]["groups"])))
    if two != zero:
        fail("--zero 1 losses differ from --zero 0 at -np 2")
    a = tensors(ckpt(os.path.join(tmp, "np2"), steps))
    b = tensors(ckpt(os.path.join(tmp, "np2z"), steps))
    if a.keys() != b.keys() or any(a[k] != b[k] for k in a):
        fail("--zero 1 checkpoint (weights, state) differs from --zero 0's: %s" %
             sorted(k for k in a if a.get(k) != b.get(k))[:5])
    print("--zero 1 = --zero 0 bitwise at -np 2: %d losses, %d checkpoint tensors" % (steps, len(a)))
    policies = {v.get("policy") for k, v in metadata(ckpt(os.path.join(tmp, "np2z"), steps))["tensors"].items()
                if k.startswith("optim.param.")}
    if "sharded" not in policies:
        fail("the --zero 1 checkpoint records no sharded state (policies %s)" % policies)
    # "optimizer state per process: A, B (...)": each about half of the whole copy.
    full = re.search(r"optimizer state per process: ([^(]*)\(each a full copy", text2)
    shard = re.search(r"optimizer state per process: ([^(]*)\(ZeRO-1", textz)
    if not full or not shard:
        fail("no state line in the output:\n" + text2 + textz)
    print("state per process without ZeRO: %s; with ZeRO-1: %s" % (full.group(1).strip(), shard.group(1).strip()))


def size_of(text):
    value, unit = text.split()
    return float(value) * {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}[unit]


def scenario_resume(lathe, tmp, data):
    common = ["--steps", "30", "--batch", "12", "--lr", "3e-3", "--warmup", "5", "--ckpt-interval", "10",
              "--keep-last", "5"]
    full = os.path.join(tmp, "full")
    train_ok(lathe, 2, full, data, *common)
    want = losses(full)
    # (np, extra flags): one process; three; three with the state sharded from the resume on; one
    # process that keeps -np 2's reduction order, which continues bitwise.
    for np, extra in ((1, []), (3, []), (3, ["--zero", "1"]), (1, ["--grad-slices", "2"])):
        d = os.path.join(tmp, "resume%d%s" % (np, "".join(extra)))
        os.makedirs(d)
        shutil.copy(ckpt(full, 20), d)
        with open(os.path.join(full, "metrics.jsonl")) as f, open(os.path.join(d, "metrics.jsonl"), "w") as g:
            g.writelines(line for line in f if json.loads(line)["step"] <= 20)
        cmd = [MPIRUN, *MPI_FLAGS, "-np", str(np), lathe, "train", "--resume", d, "--threads", "1", *extra]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        if p.returncode != 0:
            fail("resume at -np %d exited %d:\n%s" % (np, p.returncode, p.stdout))
        compare_losses("-np 2 checkpoint at step 20 resumed at -np %d %s" % (np, " ".join(extra)), losses(d), want,
                       range(21, 31))
        if "--grad-slices" in extra:
            got = losses(d)
            if any(got[s] != want[s] for s in range(21, 31)):
                fail("resumed at -np 1 with --grad-slices 2: not bitwise the -np 2 run's losses")
            print("  ... and bitwise equal to the uninterrupted -np 2 run")


def scenario_freeze(lathe, lathe_tests, tmp, data):
    common = ["--steps", "20", "--batch", "8", "--lr", "3e-3", "--ckpt-interval", "10"]
    frozen = os.path.join(tmp, "frozen")
    free = os.path.join(tmp, "free")
    train_ok(lathe, 2, frozen, data, *common, "--freeze", "wte")
    train_ok(lathe, 1, free, data, *common)
    # The weights at step 0 are the seed's: a one-process frozen run of one step keeps wte at them.
    start = os.path.join(tmp, "start")
    train_ok(lathe, 1, start, data, "--steps", "1", "--batch", "8", "--freeze", "wte")
    w0 = tensors(ckpt(start, 1))["transformer.wte.weight"]
    for step in (10, 20):
        t = tensors(ckpt(frozen, step))
        if t["transformer.wte.weight"] != w0:
            fail("the frozen embedding changed by step %d" % step)
        if any(k.startswith("optim.param.0.") for k in t):
            fail("the frozen embedding holds optimizer state: %s" % [k for k in t if k.startswith("optim.param.0.")])
    a = metadata(ckpt(frozen, 20))["optimizer"]
    b = metadata(ckpt(free, 20))["optimizer"]
    if a["params"] != b["params"] or [g["params"] for g in a["groups"]] != [g["params"] for g in b["groups"]]:
        fail("the optimizer's parameters or groups differ with --freeze at -np 2")
    print("--freeze wte at -np 2: embedding bitwise unchanged, no state; same optimizer parameters and groups")
    if lathe_tests:
        p = subprocess.run([MPIRUN, *MPI_FLAGS, "-np", "2", lathe_tests,
                            "-tc=checkpoint failure 4*,dist: --freeze*"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=240)
        if p.returncode != 0:
            fail("the frozen-and-subset checkpoint tests under mpirun -np 2:\n" + p.stdout)
        print("the frozen-and-subset checkpoint tests pass under mpirun -np 2")


def scenario_zero_state(lathe_tests):
    if not lathe_tests:
        fail("zero_state needs --lathe-tests")
    p = subprocess.run([MPIRUN, *MPI_FLAGS, "-np", "2", lathe_tests, "-s", "-nc", "-tc=dist: ZeRO-1 leaves each process*"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    held = re.findall(r"rank \d+ of \d+: per-parameter optimizer state .*", p.stdout)
    if p.returncode != 0 or len(held) != 2 or "test cases: 1 | 1 passed" not in p.stdout:
        fail("the ZeRO-1 state test under mpirun -np 2:\n" + p.stdout)
    print("\n".join(held))


def scenario_bad(lathe, tmp, data):
    code, text = train(lathe, 2, os.path.join(tmp, "odd"), data, "--steps", "2", "--batch", "7")
    lines = [l for l in text.splitlines() if l.startswith("lathe:")]
    if code == 0 or len(lines) != 1 or "divisible by the 2 processes" not in lines[0]:
        fail("--batch 7 at -np 2: want one error naming the divisibility, got exit %d:\n%s" % (code, text))
    print("--batch 7 at -np 2: " + lines[0])
    out = os.path.join(tmp, "mixed")
    base = [lathe, "train", "--config", "tiny", "--data", data, "--threads", "1", "--steps", "2", "--out", out,
            "--sample-tokens", "0"]
    cmd = [MPIRUN, *MPI_FLAGS, "-np", "1", *base, "--lr", "1e-3", ":", "-np", "1", *base, "--lr", "2e-3"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    lines = [l for l in p.stdout.splitlines() if l.startswith("lathe:")]
    if p.returncode == 0 or len(lines) != 1 or "--lr is" not in lines[0] or "rank 1" not in lines[0]:
        fail("ranks with different --lr: want one error naming lr and rank 1, got exit %d:\n%s" % (p.returncode, p.stdout))
    print("different --lr per rank: " + lines[0])
    if glob.glob(os.path.join(out, "ckpt-*")):
        fail("a refused run wrote checkpoints")
    # A default is compared as the value it stands for: the preset's batch (tiny: 8), not 0.
    cmd = [MPIRUN, *MPI_FLAGS, "-np", "1", *base, "--batch", "4", ":", "-np", "1", *base]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    lines = [l for l in p.stdout.splitlines() if l.startswith("lathe:")]
    if p.returncode == 0 or len(lines) != 1 or "--batch is 4 on rank 0 but 8 on rank 1" not in lines[0]:
        fail("--batch 4 on rank 0 only: want one error naming both batches, got exit %d:\n%s" % (p.returncode, p.stdout))
    print("--batch 4 on rank 0 only: " + lines[0])
    cmd = [MPIRUN, *MPI_FLAGS, "-np", "1", *base, "--batch", "8", ":", "-np", "1", *base]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if p.returncode != 0:
        fail("--batch 8 on rank 0 and the preset's 8 on rank 1 are the same run, but it exited %d:\n%s" %
             (p.returncode, p.stdout))
    print("--batch 8 on rank 0 beside the preset's 8 on rank 1: the same run, trained")
    # The same --data name, other bytes: each rank starts in its own directory with its own corpus.
    for rank, text in enumerate(("one corpus, " * 400, "another corpus! " * 300)):
        os.makedirs(os.path.join(tmp, "wd%d" % rank))
        with open(os.path.join(tmp, "wd%d" % rank, "corpus.txt"), "w") as f:
            f.write(text)
    base = [os.path.abspath(lathe), "train", "--config", "tiny", "--data", "corpus.txt", "--threads", "1", "--steps", "2",
            "--out", "run", "--sample-tokens", "0"]
    cmd = [MPIRUN, *MPI_FLAGS, "-np", "1", "-wdir", os.path.join(tmp, "wd0"), *base, ":",
           "-np", "1", "-wdir", os.path.join(tmp, "wd1"), *base]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    lines = [l for l in p.stdout.splitlines() if l.startswith("lathe:")]
    if p.returncode == 0 or len(lines) != 1 or "training data differ" not in lines[0]:
        fail("ranks reading different corpora: want one error naming the data, got exit %d:\n%s" % (p.returncode, p.stdout))
    print("different corpora per rank: " + lines[0])


def rank_pid(rank, parent, out_name):
    """The pid of the lathe process of `rank` under mpirun `parent` training into `out_name`."""
    for env in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(env, "rb") as f:
                vars_ = f.read().split(b"\0")
            with open(env.replace("environ", "cmdline"), "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK=%d" % rank in vars_ and b"train" in cmdline and out_name.encode() in cmdline:
            return int(env.split("/")[2])
    return None


def scenario_kill(lathe, tmp, data):
    kill_rank(lathe, tmp, data, rank=1, ckpt_interval=5, wait_for=1)
    # Rank 0 writes a checkpoint every step: killed at some moment, most likely inside a save.
    kill_rank(lathe, tmp, data, rank=0, ckpt_interval=1, wait_for=3)


def kill_rank(lathe, tmp, data, rank, ckpt_interval, wait_for):
    out = os.path.join(tmp, "kill-run%d" % rank)
    cmd = [MPIRUN, *MPI_FLAGS, "-np", "2", lathe, "train", "--config", "tiny", "--data", data, "--threads", "1",
           "--steps", "100000", "--ckpt-interval", str(ckpt_interval), "--keep-last", "1000", "--eval-interval", "0",
           "--sample-tokens", "0", "--out", out]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while (len(glob.glob(os.path.join(out, "ckpt-*.safetensors"))) < wait_for and time.time() < deadline and
           job.poll() is None):
        time.sleep(0.05)
    pid = rank_pid(rank, job.pid, os.path.basename(out))
    if pid is None or job.poll() is not None:
        job.kill()
        fail("could not find rank %d of the running job:\n%s" % (rank, job.communicate()[0] or ""))
    os.kill(pid, signal.SIGKILL)
    killed = time.time()
    try:
        text, _ = job.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        job.kill()
        fail("the job went on for 30 s after rank 1 was killed")
    took = time.time() - killed
    if job.returncode == 0:
        fail("the job exited 0 after rank %d was killed" % rank)
    named = [l.strip() for l in text.splitlines() if re.search(r"rank %d\b" % rank, l)]
    if not named:
        fail("no message names rank %d:\n%s" % (rank, text))
    checkpoints = sorted(glob.glob(os.path.join(out, "ckpt-*.safetensors")),
                         key=lambda p: int(re.search(r"ckpt-(\d+)", p).group(1)))
    for path in checkpoints:  # every file under a checkpoint's name is whole
        p = subprocess.run([lathe, "inspect", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            fail("checkpoint %s is not whole:\n%s" % (path, p.stdout))
    others = sorted(set(os.listdir(out)) - {os.path.basename(p) for p in checkpoints} -
                    {"metrics.jsonl", "loss.svg", "model.safetensors", ".lock"})
    print("rank %d killed: the job ended in %.1f s (exit %d), saying \"%s\"; all %d checkpoints whole (newest %s)%s" %
          (rank, took, job.returncode, named[0], len(checkpoints), os.path.basename(checkpoints[-1]),
           "; left by an interrupted save: %s" % others if others else ""))


def scenario_stuck(lathe, tmp, data):
    # Rank 1 stopped: rank 0 names it. Rank 0 stopped: rank 1, the lowest rank still waiting, names it.
    for rank in (1, 0):
        stop_rank(lathe, tmp, data, rank, timeout=5)


def stop_rank(lathe, tmp, data, rank, timeout):
    out = os.path.join(tmp, "stuck-run%d" % rank)
    cmd = [MPIRUN, *MPI_FLAGS, "-np", "2", lathe, "train", "--config", "tiny", "--data", data, "--threads", "1",
           "--steps", "100000", "--eval-interval", "0", "--sample-tokens", "0", "--dist-timeout", str(timeout),
           "--out", out]
    job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = os.path.join(out, "metrics.jsonl")
    deadline = time.time() + 120
    while time.time() < deadline and job.poll() is None:  # training has started: steps are logged
        if os.path.exists(metrics) and os.path.getsize(metrics) > 0:
            break
        time.sleep(0.05)
    pids = {r: rank_pid(r, job.pid, os.path.basename(out)) for r in (0, 1)}
    if None in pids.values() or job.poll() is not None:
        job.kill()
        fail("could not find the ranks of the running job:\n%s" % (job.communicate()[0] or ""))
    os.kill(pids[rank], signal.SIGSTOP)
    stopped = time.time()
    try:
        _, err = job.communicate(timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        for pid in pids.values():
            os.kill(pid, signal.SIGKILL)
        job.kill()
        fail("the job went on for %d s after rank %d was stopped (--dist-timeout %d)" % (timeout + 10, rank, timeout))
    took = time.time() - stopped
    while time.time() < stopped + timeout + 10 and any(alive(p) for p in pids.values()):
        time.sleep(0.05)
    left = [r for r, p in pids.items() if alive(p)]
    if left:
        for r in left:
            os.kill(pids[r], signal.SIGKILL)
        fail("mpirun ended but rank(s) %s of the job are still alive %.0f s after rank %d was stopped" %
             (left, time.time() - stopped, rank))
    if job.returncode == 0:
        fail("the job exited 0 after rank %d was stopped" % rank)
    lines = [l for l in err.splitlines() if l.startswith("lathe:")]
    if (len(lines) != 1 or not re.search(r"\brank %d of 2 did not arrive" % rank, lines[0]) or
            not re.search(r"\bstep \d+", lines[0]) or "--dist-timeout" not in lines[0]):
        fail("rank %d stopped: want one line naming rank %d, the step and --dist-timeout, got exit %d:\n%s" %
             (rank, rank, job.returncode, err))
    print("rank %d stopped: every process gone in %.1f s (exit %d), saying \"%s\"" % (rank, took, job.returncode,
                                                                                    lines[0]))


def alive(pid):
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lathe", required=True)
    ap.add_argument("--lathe-tests")
    ap.add_argument("scenario", choices=["losses", "resume", "freeze", "zero_state", "bad", "kill", "stuck"])
    ap.add_argument("--steps", type=int, default=50, help="losses: the steps of its four long runs")
    a = ap.parse_args()
    if not MPIRUN:
        print("SKIP: mpirun is not installed (tools/deps.sh installs openmpi-bin and libopenmpi-dev)")
        return SKIP
    info = subprocess.run([a.lathe, "info", "--json"], stdout=subprocess.PIPE, text=True).stdout
    if not json.loads(info).get("mpi", False):
        print("SKIP: this lathe was built without MPI")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="lathe_dist_%s_" % a.scenario)
    try:
        data = corpus(tmp)
        if a.scenario == "losses":
            scenario_losses(a.lathe, tmp, data, a.steps)
        elif a.scenario == "resume":
            scenario_resume(a.lathe, tmp, data)
        elif a.scenario == "freeze":
            scenario_freeze(a.lathe, a.lathe_tests, tmp, data)
        elif a.scenario == "zero_state":
            scenario_zero_state(a.lathe_tests)
        elif a.scenario == "bad":
            scenario_bad(a.lathe, tmp, data)
        elif a.scenario == "kill":
            scenario_kill(a.lathe, tmp, data)
        else:
            scenario_stuck(a.lathe, tmp, data)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
