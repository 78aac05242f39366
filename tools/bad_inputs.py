#!/usr/bin/env python3
"""Runs the lathe program on hundreds of bad inputs and judges every run.

Each case is one command line over inputs generated into a temporary directory: damaged and
non-regular files (empty, truncated, garbage, huge header, FIFO, directory, symlink loop,
/dev/null, missing), numeric flags set to negative, zero, huge and non-numeric values for every
subcommand, unknown flags and devices, model configs and reference cases that are wrong in every
way the format allows. A run passes when it

  - exits 1 or 2 with exactly one line on stderr, starting "lathe: ", and
  - is neither killed by a signal (a crash) nor still running after the timeout (a hang).

Exit 0 on a bad input is "silent acceptance", a failure, except for the cases listed as
expected-ok below: values the program legitimately accepts (a seed of 0, --tokens 0, ...), which
must then succeed.

PENDING lists cases whose fix is still to come: they run and are reported but do not fail the
driver, which says when one starts to pass.

  tools/bad_inputs.py --lathe build/examples/lathe [--jobs N] [--timeout S] [--verbose]
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(REPO, "tests", "golden")

# Cases whose fix is still to come: they run and are reported but do not fail the driver, and the
# driver says when one starts to pass (then it moves out of this set). Empty today.
PENDING = set()

# Values the program accepts by design, so exit 0 is the right answer (and anything else a failure).
EXPECTED_OK = {
    # An absurd thread count is capped (4x the hardware threads, at most 1024) with a warning.
    "train.threads.ten_thousand",
    # 0 means "the default" or "off", as each flag's help says.
    "bench.threads.zero", "train.threads.zero", "sample.top-k.zero", "sample.temperature.zero",
    "train.grad-clip.zero", "train.eval-interval.zero", "train.ckpt-interval.zero", "train.warmup.zero",
    "train.weight-decay.zero", "train.min-lr.zero", "train.zero.zero", "train.grad-slices.zero",
    # Any 64-bit seed is a seed.
    "sample.seed.zero", "sample.seed.int64_max", "train.seed.zero", "train.seed.int64_max",
    # PyTorch's ranges: betas in [0, 1); lr, weight decay and the clip norm any finite value >= 0
    # (a hex float such as 0x10 is 16.0). Whether a large one trains well is the user's call.
    "train.beta1.zero", "train.beta2.zero",
    "train.lr.hex", "train.lr.too_big", "train.lr.int64_max",
    "train.weight-decay.hex", "train.weight-decay.too_big", "train.weight-decay.int64_max",
    "train.grad-clip.hex", "train.grad-clip.too_big", "train.grad-clip.int64_max",
    "sample.temperature.hex", "sample.temperature.too_big", "sample.temperature.int64_max",
    # More than there is means all of it: top-k past the vocabulary, intervals past the run (only
    # at the end), keep-last past the checkpoints, a warm-up longer than the run.
    "sample.top-k.int64_max", "train.eval-interval.int64_max", "train.ckpt-interval.int64_max",
    "train.keep-last.int64_max", "train.warmup.int64_max",
    # One corpus file is taken as bytes whatever they are (only a directory skips binary files).
    "train.data.garbage", "train.data.truncated",
    # Any finite positive initial loss scale (fp16 backs off from it), any growth interval >= 1.
    "train.init-scale.hex", "train.init-scale.too_big", "train.init-scale.int64_max",
    "train.scale-growth-interval.int64_max",
}


# ---------------------------------------------------------------------------------------------
# Inputs


def safetensors_bytes(tensors, metadata=None):
    """A safetensors file: tensors is a list of (name, dtype, shape, raw bytes)."""
    header, offset, data = {}, 0, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def read_safetensors(path):
    """(metadata, [(name, dtype, shape, raw)]) of a safetensors file, in file order."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    metadata = header.pop("__metadata__", None)
    tensors = []
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, end = e["data_offsets"]
        tensors.append((name, e["dtype"], e["shape"], data[b:end]))
    return metadata, tensors


class Inputs:
    """Every file the cases use, generated once into `root`."""

    def __init__(self, root, lathe):
        self.root = root
        self.lathe = lathe
        self.corpus = self.write("corpus.txt", ("the quick brown fox jumps over the lazy dog. " * 200).encode())
        self.tiny = self.write_json("tiny.json", tiny_config())
        self.base_run = os.path.join(root, "base_run")
        subprocess.run([lathe, "train", "--data", self.corpus, "--config", self.tiny, "--steps", "2", "--batch", "2",
                        "--eval-iters", "1", "--sample-tokens", "0", "--quiet", "--out", self.base_run],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        self.weights = os.path.join(self.base_run, "model.safetensors")
        ckpts = sorted(f for f in os.listdir(self.base_run) if f.startswith("ckpt-"))
        self.checkpoint = os.path.join(self.base_run, ckpts[-1])
        self.bad = self.bad_files()
        self.tokenizer_inputs()

    def path(self, name):
        return os.path.join(self.root, name)

    def write(self, name, data):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def write_json(self, name, value):
        return self.write(name, json.dumps(value).encode())

    def bad_files(self):
        """name -> path of a file no command should accept as its input."""
        with open(self.checkpoint, "rb") as f:
            good = f.read()
        files = {
            "empty": self.write("bad/empty", b""),
            "truncated": self.write("bad/truncated", good[: len(good) // 2]),
            "truncated_header": self.write("bad/truncated_header", good[:20]),
            "garbage": self.write("bad/garbage", bytes((i * 7919 + 13) % 256 for i in range(4096))),
            "huge_header": self.write("bad/huge_header", struct.pack("<Q", 1 << 60) + b"{}" + b" " * 6),
            "header_past_end": self.write("bad/header_past_end", struct.pack("<Q", 4096) + b"{}      "),
            "text": self.write("bad/text.txt", b"hello, not a safetensors file\n"),
            "missing": self.path("bad/missing"),
            "directory": self.path("bad/a_directory"),
            "fifo": self.path("bad/fifo"),
            "symlink_loop": self.path("bad/loop_a"),
            "dangling_link": self.path("bad/dangling"),
            "dev_null": "/dev/null",
            "dev_urandom": "/dev/urandom",
        }
        # JSON nested 20,000 deep in a metadata string: the checkpoint document, and a weights config.
        deep = "[" * 20000 + "]" * 20000
        files["deep_lathe"] = self.write("bad/deep_lathe", safetensors_bytes([("x", "F32", [1], b"\0" * 4)], {"lathe": deep}))
        files["deep_config"] = self.write("bad/deep_config", safetensors_bytes([("x", "F32", [1], b"\0" * 4)], {"config": deep}))
        os.makedirs(files["directory"], exist_ok=True)
        os.mkfifo(files["fifo"])
        os.symlink(self.path("bad/loop_b"), files["symlink_loop"])
        os.symlink(files["symlink_loop"], self.path("bad/loop_b"))
        os.symlink(self.path("bad/nowhere"), files["dangling_link"])
        return files


def gpt2_alphabet():
    """GPT-2's byte -> character map (bytes_to_unicode): printable bytes stand for themselves, the
    other 68, in order, for U+0100 up."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def small_gpt2_vocab():
    """(vocab.bpe text, encoder.json dict) of a small vocabulary in GPT-2's format: the 256 byte
    tokens, merges "t h" -> "th" and "th e" -> "the", then <|endoftext|>."""
    alphabet = gpt2_alphabet()
    encoder = {alphabet[b]: i for i, b in enumerate(range(256))}
    encoder["th"] = 256
    encoder["the"] = 257
    encoder["<|endoftext|>"] = 258
    return "#version: 0.2\nt h\nth e\n", encoder


def tiny_config():
    return {"vocab_size": 256, "block_size": 8, "n_layer": 1, "n_head": 1, "n_embd": 8}


def _tokenizer_inputs(self):
    """A trained tokenizer, GPT-2-format vocabularies good and bad, token shards good and bad."""
    lathe = self.lathe
    self.tok = self.path("tok/trained.json")
    os.makedirs(os.path.dirname(self.tok), exist_ok=True)
    subprocess.run([lathe, "tokenizer", "train", "--data", self.corpus, "--vocab-size", "300", "--out", self.tok],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    vocab, encoder = small_gpt2_vocab()
    self.gpt2_good = self.write("tok/gpt2_good/vocab.bpe", vocab.encode())
    self.write_json("tok/gpt2_good/encoder.json", encoder)
    no_eot = dict(encoder)
    del no_eot["<|endoftext|>"]
    no_the = {k: v for k, v in encoder.items() if k != "the"}
    no_the["<|endoftext|>"] = 257
    encoder_text = json.dumps(encoder).encode()
    vocabs = {
        "vocab_truncated": (vocab.rsplit("\n", 2)[0] + "\n", encoder_text),   # one merge short
        "vocab_midline": (vocab[:-3], encoder_text),                          # "th" without its pair
        "vocab_not_bpe": ("t h\nth e\n", encoder_text),                        # no #version line
        "encoder_truncated": (vocab, encoder_text[: len(encoder_text) // 2]),
        "encoder_mismatch": (vocab, json.dumps(no_the).encode()),             # "the" of vocab.bpe missing
        "encoder_no_eot": (vocab, json.dumps(no_eot).encode()),
        "encoder_not_object": (vocab, b"[1, 2, 3]"),
        "encoder_missing": (vocab, None),
    }
    self.bad_tokenizers = {}
    for label, (v, e) in vocabs.items():
        self.bad_tokenizers[label] = self.write(f"tok/{label}/vocab.bpe", v.encode())
        if e is not None:
            self.write(f"tok/{label}/encoder.json", e)
    with open(self.tok, "rb") as f:
        trained = f.read()
    doc = json.loads(trained)
    files = {
        "trained_truncated": trained[: len(trained) // 2],
        "trained_wrong_format": json.dumps({**doc, "format": "sentencepiece"}).encode(),
        "trained_wrong_version": json.dumps({**doc, "version": 2}).encode(),
        "trained_bad_merge": json.dumps({**doc, "merges": [[97, 999]] + doc["merges"][1:]}).encode(),
        "trained_size_mismatch": json.dumps({**doc, "vocab_size": 12}).encode(),
        "trained_bad_pattern": json.dumps({**doc, "pattern": "gpt5"}).encode(),
    }
    for label, data in files.items():
        self.bad_tokenizers[label] = self.write(f"tok/{label}.json", data)
    for label in ("empty", "garbage", "missing", "directory", "fifo", "symlink_loop", "dev_null"):
        self.bad_tokenizers["file_" + label] = self.bad[label]

    # Token shards of the trained tokenizer, then copies with one thing wrong.
    self.shards = self.path("tok/shards")
    subprocess.run([lathe, "tokenize", "--tokenizer", self.tok, "--data", self.corpus, "--out", self.shards],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    with open(os.path.join(self.shards, "shard_000000.bin"), "rb") as f:
        shard = f.read()
    with open(os.path.join(self.shards, "tokenizer.json"), "rb") as f:
        manifest = json.loads(f.read())
    header = lambda magic, version, count: struct.pack("<3i", magic, version, count) + shard[12:1024]
    body = shard[1024:]
    count = len(body) // 2
    beyond = body[:2] + struct.pack("<H", 300 + 1 + 5) + body[4:]
    variants = {
        "wrong_magic": header(20240521, 1, count) + body,
        "wrong_version": header(20240520, 3, count) + body,
        "truncated": shard[:-3],
        "count_too_big": header(20240520, 1, count + 10) + body,
        "negative_count": header(20240520, 1, -1) + body,
        "header_only_half": shard[:500],
        "token_beyond_vocab": shard[:1024] + beyond,
        "uint32_magic_with_uint16": header(20240801, 7, count) + body,
    }
    self.bad_shards = {}
    for label, data in variants.items():
        d = self.path(f"tok/shards_{label}")
        self.write(f"tok/shards_{label}/shard_000000.bin", data)
        self.write_json(f"tok/shards_{label}/tokenizer.json", manifest)
        self.bad_shards[label] = d
    # The directory right, its surroundings wrong.
    d = self.path("tok/shards_no_manifest")
    self.write("tok/shards_no_manifest/shard_000000.bin", shard)
    self.bad_shards["no_manifest"] = d
    for label, change in {"tokenizer_changed": {"checksum": "0123456789abcdef"},
                          "tokenizer_gone": {"path": self.path("tok/no_such_tokenizer.json")}}.items():
        self.write(f"tok/shards_{label}/shard_000000.bin", shard)
        self.write_json(f"tok/shards_{label}/tokenizer.json", {**manifest, "tokenizer": {**manifest["tokenizer"], **change}})
        self.bad_shards[label] = self.path(f"tok/shards_{label}")
    self.write("tok/shards_gap/shard_000001.bin", shard)
    self.write_json("tok/shards_gap/tokenizer.json", manifest)
    self.bad_shards["gap"] = self.path("tok/shards_gap")
    # A run on shards whose tokenizer is then changed, and one whose tokenizer is then deleted:
    # sampling from either must refuse, naming the tokenizer.
    self.sample_tok_runs = {}
    for label in ("changed", "gone"):
        tok = self.path(f"tok/run_{label}.json")
        shutil.copy(self.tok, tok)
        shards = self.path(f"tok/run_{label}_shards")
        subprocess.run([lathe, "tokenize", "--tokenizer", tok, "--data", self.corpus, "--out", shards],
                       check=True, stdout=subprocess.DEVNULL, timeout=60)
        run = self.path(f"tok/run_{label}")
        subprocess.run([lathe, "train", "--data", shards, "--config", self.tiny, "--steps", "1", "--batch", "2",
                        "--eval-iters", "1", "--sample-tokens", "0", "--quiet", "--out", run],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        if label == "changed":
            with open(tok, "ab") as f:
                f.write(b" ")
        else:
            os.remove(tok)
        self.sample_tok_runs[label] = os.path.join(run, "model.safetensors")
    self.write("tok/shards_bad_manifest/shard_000000.bin", shard)
    self.write("tok/shards_bad_manifest/tokenizer.json", b"{not json")
    self.bad_shards["bad_manifest"] = self.path("tok/shards_bad_manifest")


Inputs.tokenizer_inputs = _tokenizer_inputs


# ---------------------------------------------------------------------------------------------
# Cases


class Case:
    def __init__(self, name, args):
        self.name, self.args = name, args


def numeric_values(kind):
    """Bad values of a numeric flag; `kind` is "int" or "float"."""
    values = {"neg": "-1", "huge_neg": "-9223372036854775808", "too_big": "99999999999999999999999",
              "int64_max": "9223372036854775807", "word": "abc", "empty": "", "hex": "0x10", "zero": "0"}
    if kind == "int":
        values.update({"fraction": "1.5", "exp": "1e999"})
    else:
        values.update({"nan": "nan", "inf": "inf", "neg_inf": "-inf", "exp": "1e999"})
    return values


def file_cases(inp):
    """Every bad file in every place a command reads one."""
    cases = []
    out = inp.path("out/unused.safetensors")
    run = lambda name: ["--steps", "1", "--eval-iters", "1", "--sample-tokens", "0", "--quiet", "--out",
                        inp.path("runs/" + name)]
    for bad, path in inp.bad.items():
        cases.append(Case(f"inspect.file.{bad}", ["inspect", path]))
        cases.append(Case(f"sample.checkpoint.{bad}", ["sample", "--checkpoint", path, "--tokens", "4"]))
        cases.append(Case(f"ref.case.{bad}", ["ref", path, out]))
        cases.append(Case(f"train.resume.{bad}", ["train", "--resume", path, "--steps", "3", "--quiet"]))
        cases.append(Case(f"train.config.{bad}", ["train", "--data", inp.corpus, "--config", path] + run("c" + bad)))
        cases.append(Case(f"bench.config.{bad}", ["bench", "--config", path, "--steps", "1", "--warmup", "0"]))
        if bad not in ("text", "deep_lathe", "deep_config"):  # any regular file's bytes are a fine corpus
            cases.append(Case(f"train.data.{bad}", ["train", "--data", path, "--config", inp.tiny] + run("d" + bad)))
    # Files of the wrong kind: valid, but not what the command reads.
    cases.append(Case("sample.checkpoint.ref_case", ["sample", "--checkpoint", os.path.join(GOLDEN, "optim_sgd.case.safetensors")]))
    cases.append(Case("ref.case.weights", ["ref", inp.weights, out]))
    cases.append(Case("ref.case.checkpoint", ["ref", inp.checkpoint, out]))
    cases.append(Case("train.resume.weights", ["train", "--resume", inp.weights, "--steps", "3", "--quiet"]))
    cases.append(Case("train.resume.case", ["train", "--resume", os.path.join(GOLDEN, "gpt_tiny.case.safetensors"), "--quiet"]))
    cases.append(Case("train.data.empty_dir", ["train", "--data", inp.bad["directory"], "--config", inp.tiny] + run("empty_dir")))
    return cases


def flag_cases(inp):
    """Every numeric flag of every subcommand, set to each bad value."""
    sample = ["sample", "--checkpoint", inp.weights, "--tokens", "4"]
    bench = ["bench", "--config", inp.tiny, "--steps", "1", "--warmup", "0", "--batch", "1"]
    flags = {
        "sample": (sample, {"--tokens": "int", "--temperature": "float", "--top-k": "int", "--seed": "int",
                            "--samples": "int"}),
        "bench": (bench, {"--steps": "int", "--warmup": "int", "--batch": "int", "--threads": "int"}),
        "train": (None, {"--steps": "int", "--batch": "int", "--lr": "float", "--min-lr": "float", "--warmup": "int",
                         "--weight-decay": "float", "--grad-clip": "float", "--beta1": "float", "--beta2": "float",
                         "--seed": "int", "--eval-interval": "int", "--eval-iters": "int", "--ckpt-interval": "int",
                         "--keep-last": "int", "--threads": "int", "--sample-tokens": "int",
                         "--init-scale": "float", "--scale-growth-interval": "int", "--zero": "int",
                         "--grad-slices": "int"}),
    }
    cases = []
    for command, (base, options) in flags.items():
        for flag, kind in options.items():
            for label, value in numeric_values(kind).items():
                name = f"{command}.{flag.lstrip('-')}.{label}"
                if command == "train":
                    base = ["train", "--data", inp.corpus, "--config", inp.tiny, "--steps", "1", "--eval-iters", "1",
                            "--sample-tokens", "0", "--quiet", "--out", inp.path("runs/" + name)]
                cases.append(Case(name, base + [flag, value]))
    return cases


def usage_cases(inp):
    """Unknown flags, subcommands, devices and missing arguments."""
    out = inp.path("out/unused.safetensors")
    case = os.path.join(GOLDEN, "optim_sgd.case.safetensors")
    train = ["train", "--data", inp.corpus, "--config", inp.tiny, "--steps", "1", "--eval-iters", "1",
             "--sample-tokens", "0", "--quiet"]
    commands = {
        "info": ["info"],
        "inspect": ["inspect", inp.weights],
        "sample": ["sample", "--checkpoint", inp.weights, "--tokens", "2"],
        "bench": ["bench", "--config", inp.tiny, "--steps", "1", "--warmup", "0", "--batch", "1"],
        "ref": ["ref", case, out],
        "train": train + ["--out", inp.path("runs/usage")],
    }
    cases = [Case("no_subcommand", []), Case("unknown_subcommand", ["frobnicate"]), Case("unknown_top_flag", ["--frob"]),
             Case("inspect.no_file", ["inspect"]), Case("ref.no_out", ["ref", case]), Case("ref.no_args", ["ref"]),
             Case("sample.no_checkpoint", ["sample"]), Case("info.extra_argument", ["info", "extra"]),
             Case("inspect.two_files", ["inspect", inp.weights, inp.weights]),
             Case("train.no_data_value", ["train", "--data"]), Case("train.unknown_optimizer", train + ["--optimizer", "lion", "--out", inp.path("runs/lion")]),
             Case("train.empty_optimizer", train + ["--optimizer", "", "--out", inp.path("runs/noopt")]),
             Case("train.unknown_preset", ["train", "--data", inp.corpus, "--config", "enormous", "--steps", "1"]),
             Case("bench.unknown_preset", ["bench", "--config", "enormous"]),
             Case("ref.out_is_directory", ["ref", case, inp.bad["directory"]]),
             Case("ref.out_in_missing_dir", ["ref", case, inp.path("no/such/dir/out.safetensors")]),
             Case("ref.out_is_dev_full", ["ref", case, "/dev/full"])]
    for command, base in commands.items():
        cases.append(Case(f"{command}.unknown_flag", base + ["--frobnicate"]))
        cases.append(Case(f"{command}.unknown_flag_value", base + ["--frobnicate=3"]))
    cases.append(Case("train.out.empty", train + ["--out", ""]))
    # --precision: f32, bf16 or fp16, nothing else, in every command that takes it.
    for label, value in {"unknown": "fp8", "empty": "", "upper": "FP16", "dtype_name": "f16"}.items():
        for command in ("sample", "bench", "train"):
            base = commands[command] if command != "train" else train + ["--out", inp.path("runs/prec_" + label)]
            cases.append(Case(f"{command}.precision.{label}", base + ["--precision", value]))
    cases.append(Case("train.init-scale.past_f32", train + ["--out", inp.path("runs/scale_f32"), "--precision", "fp16",
                                                            "--init-scale", "1e39"]))
    cases.append(Case("train.fused.sgd", train + ["--out", inp.path("runs/fused_sgd"), "--fused", "--optimizer", "sgd"]))
    cases.append(Case("train.fused.prodigy", train + ["--out", inp.path("runs/fused_prodigy"), "--fused", "--optimizer",
                                                      "prodigy"]))
    cases.append(Case("train.threads.ten_thousand", train + ["--out", inp.path("runs/threads"), "--threads", "10000"]))
    # Data parallelism: --zero 0 or 1 (and not with prodigy), --freeze a regular expression that
    # matches some parameters but not all.
    cases.append(Case("train.zero.two", train + ["--out", inp.path("runs/zero2"), "--zero", "2"]))
    cases.append(Case("train.zero.prodigy", train + ["--out", inp.path("runs/zero_prodigy"), "--zero", "1",
                                                     "--optimizer", "prodigy"]))
    for label, pattern in {"bad_regex": "(", "no_match": "no_such_parameter", "everything": "."}.items():
        cases.append(Case(f"train.freeze.{label}", train + ["--out", inp.path("runs/freeze_" + label), "--freeze", pattern]))
    cases.append(Case("bench.threads.ten_thousand", commands["bench"] + ["--threads", "10000"]))
    devices = {"gpu": "gpu", "cuda99": "cuda:99", "sim99": "sim:99", "cpu1": "cpu:1", "empty": "", "cuda_neg": "cuda:-1",
               "sim_word": "sim:abc", "trailing_colon": "cpu:", "spaces": " cpu "}
    for command in ("sample", "bench", "ref", "train"):
        for label, device in devices.items():
            base = commands[command] if command != "train" else train + ["--out", inp.path("runs/dev_" + label)]
            cases.append(Case(f"{command}.device.{label}", base + ["--device", device]))
    return cases


def config_cases(inp):
    """Model configs (train --config, bench --config) wrong in every way."""
    def with_(**changes):
        c = tiny_config()
        c.update(changes)
        return c
    deep = "[" * 20000 + "]" * 20000
    configs = {
        "unknown_key": with_(n_laters=2),
        "string_field": with_(n_layer="2"),
        "float_field": with_(n_embd=8.5),
        "bool_field": with_(n_head=True),
        "null_field": with_(block_size=None),
        "negative": with_(n_layer=-1),
        "zero_vocab": with_(vocab_size=0),
        "zero_block": with_(block_size=0),
        "heads_not_dividing": with_(n_head=3),
        "dropout_one": with_(dropout=1.0),
        "dropout_negative": with_(dropout=-0.5),
        "bias_string": with_(bias="yes"),
        "rope_string": with_(rope="yes"),
        "rope_odd_head": with_(rope=True, n_embd=18, n_head=2),
        "rope_base_one": with_(rope=True, rope_base=1.0),
        "norm_unknown": with_(norm="batch_norm"),
        "norm_number": with_(norm=1),
        "activation_unknown": with_(activation="gelu"),
        "softcap_negative": with_(logit_softcap=-30),
        "tie_embeddings_null": with_(tie_embeddings=None),
        "huge_embd": with_(n_embd=1 << 40, n_head=1),
        "huge_layers": with_(n_layer=1000000000),
        "huge_vocab": with_(vocab_size=1 << 50),
        "huge_block": with_(block_size=1 << 50),
        "int64_overflow": with_(n_embd=2**63, n_head=1),
        "missing_field": {k: v for k, v in tiny_config().items() if k != "n_head"},
        "empty_object": {},
        "array": [1, 2, 3],
        "number": 7,
        "string": "tiny",
    }
    cases = []
    for label, value in list(configs.items()) + [("deep_nesting", None), ("not_json", None), ("trailing", None)]:
        if label == "deep_nesting":
            path = inp.write(f"configs/{label}.json", deep.encode())
        elif label == "not_json":
            path = inp.write(f"configs/{label}.json", b"{vocab_size: 256")
        elif label == "trailing":
            path = inp.write(f"configs/{label}.json", json.dumps(tiny_config()).encode() + b" }")
        else:
            path = inp.write_json(f"configs/{label}.json", value)
        cases.append(Case(f"train.config_file.{label}", ["train", "--data", inp.corpus, "--config", path, "--steps", "1",
                                                        "--eval-iters", "1", "--sample-tokens", "0", "--quiet", "--out",
                                                        inp.path("runs/cfg_" + label)]))
        cases.append(Case(f"bench.config_file.{label}", ["bench", "--config", path, "--steps", "1", "--warmup", "0",
                                                        "--batch", "1"]))
    return cases


def edited_case(inp, golden, name, edit_spec=None, edit_tensors=None, raw_case=None):
    """A reference case: golden's tensors and document, edited."""
    metadata, tensors = read_safetensors(os.path.join(GOLDEN, golden))
    if raw_case is not None:
        metadata = {"case": raw_case} if raw_case is not False else None
    elif edit_spec is not None:
        spec = json.loads(metadata["case"])
        edit_spec(spec)
        metadata = {"case": json.dumps(spec)}
    if edit_tensors is not None:
        tensors = edit_tensors(tensors)
    return inp.write(f"cases/{name}.safetensors", safetensors_bytes(tensors, metadata))


def drop(name):
    return lambda ts: [t for t in ts if t[0] != name]


def replace(name, dtype, shape, raw):
    return lambda ts: [(n, dtype, shape, raw) if n == name else (n, d, s, r) for n, d, s, r in ts]


def add(name, dtype, shape, raw):
    return lambda ts: ts + [(name, dtype, shape, raw)]


def setter(**changes):
    def edit(spec):
        for k, v in changes.items():
            if v is _DELETE:
                spec.pop(k, None)
            else:
                spec[k] = v
    return edit


_DELETE = object()


def ref_cases(inp):
    """Reference cases wrong in every way the format allows."""
    f32 = lambda n: struct.pack(f"<{n}f", *([0.5] * n))
    i64 = lambda n, v=0: struct.pack(f"<{n}q", *([v] * n))
    deep = "[" * 20000 + "]" * 20000
    variants = {
        # any kind
        "no_case_key": ("optim_sgd", dict(raw_case=False)),
        "case_not_json": ("optim_sgd", dict(raw_case="{kind: optim")),
        "case_deep": ("optim_sgd", dict(raw_case=deep)),
        "case_deep_object": ("optim_sgd", dict(raw_case='{"a":' * 20000 + "1" + "}" * 20000)),
        "case_array": ("optim_sgd", dict(raw_case="[1, 2]")),
        "kind_unknown": ("optim_sgd", dict(edit_spec=setter(kind="lstm"))),
        "kind_missing": ("optim_sgd", dict(edit_spec=setter(kind=_DELETE))),
        "kind_number": ("optim_sgd", dict(edit_spec=setter(kind=3))),
        # optim
        "optim.steps_huge": ("optim_adam", dict(edit_spec=setter(steps=1 << 62))),
        "optim.steps_uint64": ("optim_adam", dict(edit_spec=setter(steps=2**64 - 1))),
        "optim.steps_past_limit": ("optim_adam", dict(edit_spec=setter(steps=100001))),
        "optim.steps_negative": ("optim_adam", dict(edit_spec=setter(steps=-1))),
        "optim.steps_string": ("optim_adam", dict(edit_spec=setter(steps="24"))),
        "optim.steps_float": ("optim_adam", dict(edit_spec=setter(steps=2.5))),
        "optim.steps_missing": ("optim_adam", dict(edit_spec=setter(steps=_DELETE))),
        "optim.steps_below_grads": ("optim_adam", dict(edit_spec=setter(steps=3))),
        "optim.optimizer_unknown": ("optim_adam", dict(edit_spec=setter(optimizer="lion"))),
        "optim.optimizer_number": ("optim_adam", dict(edit_spec=setter(optimizer=1))),
        "optim.groups_empty": ("optim_adam", dict(edit_spec=setter(groups=[]))),
        "optim.groups_not_list": ("optim_adam", dict(edit_spec=setter(groups={"params": [0]}))),
        "optim.group_bad_index": ("optim_adam", dict(edit_spec=setter(groups=[{"params": [0, 1, 2, 3, 4, 5, 99]}]))),
        "optim.group_negative_index": ("optim_adam", dict(edit_spec=setter(groups=[{"params": [-1]}]))),
        "optim.group_twice": ("optim_adam", dict(edit_spec=setter(groups=[{"params": [0, 1, 2, 3, 4, 5]}, {"params": [0]}]))),
        "optim.group_unknown_option": ("optim_adam", dict(edit_spec=setter(groups=[{"params": [0, 1, 2, 3, 4, 5], "lrr": 1}]))),
        "optim.group_lr_string": ("optim_adam", dict(edit_spec=setter(groups=[{"params": [0, 1, 2, 3, 4, 5], "lr": "x"}]))),
        "optim.param_missing": ("optim_adam", dict(edit_tensors=drop("param.2"))),
        "optim.param_int": ("optim_adam", dict(edit_tensors=replace("param.1", "I64", [5], i64(5)))),
        "optim.grad_wrong_shape": ("optim_adam", dict(edit_tensors=replace("grad.0.0", "F32", [3, 4], f32(12)))),
        "optim.grad_step_beyond": ("optim_adam", dict(edit_tensors=add("grad.24.0", "F32", [4, 3], f32(12)))),
        "optim.grad_unknown_param": ("optim_adam", dict(edit_tensors=add("grad.0.9", "F32", [4], f32(4)))),
        "optim.grad_malformed_name": ("optim_adam", dict(edit_tensors=add("grad.x.0", "F32", [4, 3], f32(12)))),
        "optim.unexpected_tensor": ("optim_adam", dict(edit_tensors=add("extra", "F32", [1], f32(1)))),
        # train
        "train.steps_huge": ("train_tiny", dict(edit_spec=setter(steps=1 << 62))),
        "train.steps_int64_max": ("train_tiny", dict(edit_spec=setter(steps=2**63 - 1))),
        "train.steps_beyond_inputs": ("train_tiny", dict(edit_spec=setter(steps=5))),
        "train.steps_zero": ("train_tiny", dict(edit_spec=setter(steps=0))),
        "train.steps_string": ("train_tiny", dict(edit_spec=setter(steps="4"))),
        "train.optimizer_missing": ("train_tiny", dict(edit_spec=setter(optimizer=_DELETE))),
        "train.optimizer_unknown": ("train_tiny", dict(edit_spec=setter(optimizer={"name": "lion"}))),
        "train.optimizer_string": ("train_tiny", dict(edit_spec=setter(optimizer="adamw"))),
        "train.grad_clip_negative": ("train_tiny", dict(edit_spec=setter(grad_clip=-1))),
        "train.config_missing": ("train_tiny", dict(edit_spec=setter(config=_DELETE))),
        "train.config_huge_layers": ("train_tiny", dict(edit_spec=setter(config={**tiny_config(), "n_layer": 10**9}))),
        "train.config_huge_embd": ("train_tiny", dict(edit_spec=setter(config={"vocab_size": 64, "block_size": 16, "n_layer": 2, "n_head": 1, "n_embd": 1 << 40}))),
        "train.idx_missing": ("train_tiny", dict(edit_tensors=drop("idx.2"))),
        "train.targets_missing": ("train_tiny", dict(edit_tensors=drop("targets.0"))),
        "train.idx_float": ("train_tiny", dict(edit_tensors=replace("idx.0", "F32", [2, 8], f32(16)))),
        "train.idx_3d": ("train_tiny", dict(edit_tensors=replace("idx.1", "I64", [2, 2, 4], i64(16)))),
        "train.idx_out_of_vocab": ("train_tiny", dict(edit_tensors=replace("idx.0", "I64", [2, 8], i64(16, 64)))),
        "train.idx_negative": ("train_tiny", dict(edit_tensors=replace("idx.0", "I64", [2, 8], i64(16, -1)))),
        "train.targets_shape": ("train_tiny", dict(edit_tensors=replace("targets.0", "I64", [2, 7], i64(14)))),
        "train.too_long": ("train_tiny", dict(edit_tensors=lambda ts: replace("targets.0", "I64", [1, 17], i64(17))(
            replace("idx.0", "I64", [1, 17], i64(17))(ts)))),
        "train.weight_missing": ("train_tiny", dict(edit_tensors=drop("transformer.h.1.ln_2.weight"))),
        "train.wte_wrong_shape": ("train_tiny", dict(edit_tensors=replace("transformer.wte.weight", "F32", [64, 31], f32(64 * 31)))),
        "train.weight_f64_wrong_shape": ("train_tiny", dict(edit_tensors=replace("transformer.ln_f.weight", "F64", [3], b"\0" * 24))),
        "train.unexpected_tensor": ("train_tiny", dict(edit_tensors=add("idx.9", "I64", [2, 8], i64(16)))),
        "train.noncanonical_name": ("train_tiny", dict(edit_tensors=add("idx.01", "I64", [2, 8], i64(16)))),
        "train.precision_unknown": ("train_tiny", dict(edit_spec=setter(precision="fp8"))),
        "train.precision_number": ("train_tiny", dict(edit_spec=setter(precision=16))),
        "train.scaler_without_fp16": ("train_tiny", dict(edit_spec=setter(precision="bf16", scaler={"init_scale": 2.0}))),
        "train.scaler_not_object": ("train_tiny", dict(edit_spec=setter(precision="fp16", scaler=[1]))),
        "train.scaler_unknown_option": ("train_tiny", dict(edit_spec=setter(precision="fp16", scaler={"init": 2.0}))),
        "train.scaler_negative_scale": ("train_tiny", dict(edit_spec=setter(precision="fp16", scaler={"init_scale": -1}))),
        "train.scaler_scale_past_f32": ("train_tiny", dict(edit_spec=setter(precision="fp16", scaler={"init_scale": 1e39}))),
        "train.scaler_growth_zero": ("train_tiny", dict(edit_spec=setter(precision="fp16", scaler={"growth_interval": 0}))),
        "train.scaler_state_in_f32": ("train_tiny", dict(edit_tensors=add("scaler.scale", "F32", [], f32(1)))),
        "train.scaler_state_unknown": ("train_tiny", dict(edit_spec=setter(precision="fp16"),
                                                          edit_tensors=add("scaler.bogus", "F32", [], f32(1)))),
        "train.scaler_state_zero": ("train_tiny", dict(edit_spec=setter(precision="fp16"),
                                                       edit_tensors=add("scaler.scale", "F32", [], struct.pack("<f", 0.0)))),
        # gpt
        "gpt.idx_missing": ("gpt_tiny", dict(edit_tensors=drop("idx"))),
        "gpt.idx_float": ("gpt_tiny", dict(edit_tensors=replace("idx", "F32", [2, 8], f32(16)))),
        "gpt.targets_i8": ("gpt_tiny", dict(edit_tensors=replace("targets", "I8", [2, 8], b"\0" * 16))),
        "gpt.wpe_missing": ("gpt_tiny", dict(edit_tensors=drop("transformer.wpe.weight"))),
        "gpt.config_not_object": ("gpt_tiny", dict(edit_spec=setter(config=[1, 2]))),
        "gpt.config_unknown_key": ("gpt_tiny", dict(edit_spec=lambda s: s["config"].update(n_laters=3))),
        "gpt.config_zero_heads": ("gpt_tiny", dict(edit_spec=lambda s: s["config"].update(n_head=0))),
        "gpt.config_huge_vocab": ("gpt_tiny", dict(edit_spec=lambda s: s["config"].update(vocab_size=1 << 50))),
    }
    cases = []
    out = inp.path("out/ref_out.safetensors")
    for label, (golden, kw) in variants.items():
        path = edited_case(inp, golden + ".case.safetensors", label, **kw)
        cases.append(Case(f"ref.{label}", ["ref", path, out]))
    return cases


def op_cases(inp):
    """Cases of the kind "op" wrong in every way the format allows, param_groups and optimizer
    state of a train case that do not fit the model, and the checker's and the fixtures' bad calls."""
    f32 = lambda *shape: ("F32", list(shape), struct.pack(f"<{_n(shape)}f", *([0.5] * _n(shape))))
    f64 = lambda *shape: ("F64", list(shape), struct.pack(f"<{_n(shape)}d", *([0.5] * _n(shape))))
    i64 = lambda values: ("I64", [len(values)], struct.pack(f"<{len(values)}q", *values))
    ops = {
        "unknown": ({"op": "erfinv"}, [f32(2)]),
        "op_missing": ({}, [f32(2)]),
        "op_number": ({"op": 7}, [f32(2)]),
        "args_list": ({"op": "sum", "args": [0]}, [f32(2)]),
        "arg_unknown": ({"op": "add", "args": {"alpha": 2}}, [f32(2), f32(2)]),
        "arg_wrong_type": ({"op": "sum", "args": {"dim": "0"}}, [f32(2)]),
        "arg_missing": ({"op": "softmax"}, [f32(2, 3)]),
        "arg_bad_choice": ({"op": "gelu", "args": {"approximate": "fast"}}, [f32(2)]),
        "clamp_no_bound": ({"op": "clamp"}, [f32(2)]),
        "too_few_operands": ({"op": "add"}, [f32(2)]),
        "too_many_operands": ({"op": "exp"}, [f32(2), f32(2)]),
        "no_operands": ({"op": "cat"}, []),
        "operand_gap": ({"op": "add"}, [f32(2), f32(2)], ["input.0", "input.2"]),
        "operand_leading_zero": ({"op": "exp"}, [f32(2)], ["input.00"]),
        "unexpected_tensor": ({"op": "exp"}, [f32(2), f32(2)], ["input.0", "weights"]),
        "mixed_dtypes": ({"op": "add"}, [f32(2), f64(2)]),
        "shapes_do_not_broadcast": ({"op": "add"}, [f32(2), f32(3)]),
        "matmul_mismatch": ({"op": "matmul"}, [f32(2, 3), f32(4, 2)]),
        "dim_out_of_range": ({"op": "softmax", "args": {"dim": 5}}, [f32(2, 3)]),
        "embedding_id_out_of_range": ({"op": "embedding"}, [i64([0, 9]), f32(5, 3)]),
        "embedding_ids_float": ({"op": "embedding"}, [f32(2), f32(5, 3)]),
        "cross_entropy_target_out_of_range": ({"op": "cross_entropy"}, [f32(2, 5), i64([1, 5])]),
        "cross_entropy_3d": ({"op": "cross_entropy"}, [f32(2, 2, 5), ("I64", [2, 2], struct.pack("<4q", 0, 1, 2, 3))]),
        "index_select_negative": ({"op": "index_select", "args": {"dim": 0}}, [f32(4, 2), i64([-1])]),
        "gather_out_of_range": ({"op": "gather", "args": {"dim": 0}}, [f32(4, 2), ("I64", [1, 2], struct.pack("<2q", 9, 0))]),
        "where_condition_float": ({"op": "where"}, [f32(2), f32(2), f32(2)]),
        "grad_output_shape": ({"op": "exp"}, [f32(2), f32(3)], ["input.0", "grad_output"]),
        "grad_output_dtype": ({"op": "exp"}, [f32(2), f64(2)], ["input.0", "grad_output"]),
        "huge_broadcast": ({"op": "add"}, [f32(1 << 15, 1), f32(1, 1 << 15)]),
        "huge_matmul": ({"op": "matmul"}, [f32(1 << 15, 1), f32(1, 1 << 15)]),
    }
    cases = []
    out = inp.path("out/ref_out.safetensors")
    for label, spec in ops.items():
        doc, tensors = spec[0], spec[1]
        names = spec[2] if len(spec) > 2 else [f"input.{k}" for k in range(len(tensors))]
        body = [(n, d, sh, raw) for n, (d, sh, raw) in zip(names, tensors)]
        path = inp.write(f"cases/op_{label}.safetensors", safetensors_bytes(body, {"case": json.dumps({"kind": "op", **doc})}))
        cases.append(Case(f"ref.op.{label}", ["ref", path, out]))

    names = ["transformer.wte.weight", "transformer.wpe.weight"]
    groups = {
        "not_list": {"params": names},
        "empty": [],
        "missing_param": [{"params": names}],
        "repeated_param": [{"params": names + ["transformer.wte.weight"]}],
        "unknown_param": [{"params": ["transformer.wxe.weight"]}],
        "name_not_string": [{"params": [0]}],
        "no_params": [{"lr": 0.1}],
    }
    for label, g in groups.items():
        path = edited_case(inp, "train_param_groups.case.safetensors", f"groups_{label}",
                           edit_spec=setter(param_groups=g))
        cases.append(Case(f"ref.train.param_groups.{label}", ["ref", path, out]))
    f32raw = lambda n: struct.pack(f"<{n}f", *([0.5] * n))
    state = {
        "unknown_param": add("optimizer_state.transformer.wxe.weight.exp_avg", "F32", [64, 32], f32raw(64 * 32)),
        "wrong_shape": add("optimizer_state.transformer.wpe.weight.exp_avg", "F32", [3], f32raw(3)),
        "unknown_key": add("optimizer_state.transformer.wpe.weight.momentum", "F32", [16, 32], f32raw(16 * 32)),
        "unknown_group": add("optimizer_state.group.9.lr", "F32", [], f32raw(1)),
    }
    for label, edit in state.items():
        path = edited_case(inp, "train_param_groups.case.safetensors", f"state_{label}", edit_tensors=edit)
        cases.append(Case(f"ref.train.optimizer_state.{label}", ["ref", path, out]))
    for label, edit in {"return_state_string": setter(return_state="yes"),
                        "fused_sgd": setter(optimizer={"name": "sgd", "lr": 0.1, "fused": True}),
                        "fused_string": setter(optimizer={"name": "adamw", "fused": "yes"})}.items():
        path = edited_case(inp, "train_param_groups.case.safetensors", label, edit_spec=edit)
        cases.append(Case(f"ref.train.{label}", ["ref", path, out]))

    good = os.path.join(GOLDEN, "check_pairs.want.safetensors")
    cases += [
        Case("ref.check.missing_file", ["ref", "--check", good, inp.path("no/such.safetensors")]),
        Case("ref.check.not_safetensors", ["ref", "--check", inp.write("check/junk.safetensors", b"junk" * 10), good]),
        Case("ref.check.one_file", ["ref", "--check", good]),
        Case("ref.check.rtol_alone", ["ref", "--check", good, good, "--rtol", "1e-3"]),
        Case("ref.check.negative_atol", ["ref", "--check", good, good, "--rtol", "1e-3", "--atol", "-1"]),
        Case("ref.check.nan_rtol", ["ref", "--check", good, good, "--rtol", "nan", "--atol", "0"]),
        Case("ref.check.with_case", ["ref", good, out, "--check", good, good]),
        Case("ref.check.tolerance_without_check", ["ref", good, out, "--rtol", "1e-3", "--atol", "0"]),
        Case("ref.fixtures.not_empty", ["ref", "--write-fixtures", os.path.dirname(inp.write("fixtures/mine.txt", b"x"))]),
        Case("ref.fixtures.is_file", ["ref", "--write-fixtures", inp.write("fixtures_file", b"x")]),
        Case("ref.fixtures.with_check", ["ref", "--write-fixtures", inp.path("fx"), "--check", good, good]),
    ]
    return cases


def _n(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def tokenizer_cases(inp):
    """lathe tokenizer train|encode|decode|bench and lathe tokenize on bad values and files, and
    lathe train on bad token shards."""
    cases = []
    tok_out = inp.path("out/tok.json")
    train_tok = ["tokenizer", "train", "--data", inp.corpus, "--out", tok_out]
    for label, value in {"below_256": "255", "zero": "0", "neg": "-1", "above_2_32": str(2**32 + 1),
                         "uint64_max": str(2**64 - 1), "too_big": "99999999999999999999999", "word": "abc",
                         "empty": "", "fraction": "300.5"}.items():
        cases.append(Case(f"tokenizer.train.vocab-size.{label}", train_tok + ["--vocab-size", value]))
    cases.append(Case("tokenizer.train.vocab-size.missing", train_tok))
    cases.append(Case("tokenizer.train.pattern.unknown", train_tok + ["--vocab-size", "300", "--pattern", "gpt3"]))
    cases.append(Case("tokenizer.train.out.directory", ["tokenizer", "train", "--data", inp.corpus, "--vocab-size", "300",
                                                        "--out", inp.bad["directory"]]))
    cases.append(Case("tokenizer.train.out.missing_dir", ["tokenizer", "train", "--data", inp.corpus, "--vocab-size",
                                                          "300", "--out", inp.path("no/such/dir/tok.json")]))
    cases.append(Case("tokenizer.no_subcommand", ["tokenizer"]))
    for label in ("missing", "directory", "fifo", "symlink_loop", "dev_null"):
        cases.append(Case(f"tokenizer.train.data.{label}", ["tokenizer", "train", "--data", inp.bad[label],
                                                           "--vocab-size", "300", "--out", tok_out]))
        cases.append(Case(f"tokenizer.encode.file.{label}", ["tokenizer", "encode", "--tokenizer", "bytes", inp.bad[label]]))
        cases.append(Case(f"tokenizer.decode.file.{label}", ["tokenizer", "decode", "--tokenizer", "bytes", inp.bad[label]]))
        cases.append(Case(f"tokenize.data.{label}", ["tokenize", "--tokenizer", "bytes", "--data", inp.bad[label],
                                                     "--out", inp.path("out/shards_" + label)]))
    for label, path in inp.bad_tokenizers.items():
        cases.append(Case(f"tokenizer.encode.tokenizer.{label}", ["tokenizer", "encode", "--tokenizer", path, inp.corpus]))
        cases.append(Case(f"tokenize.tokenizer.{label}", ["tokenize", "--tokenizer", path, "--data", inp.corpus,
                                                          "--out", inp.path("out/shards_tok_" + label)]))
    cases.append(Case("tokenizer.encode.tokenizer.unknown_name", ["tokenizer", "encode", "--tokenizer", "gpt5", inp.corpus]))
    cases.append(Case("tokenizer.encode.threads.neg", ["tokenizer", "encode", "--tokenizer", "bytes", "--threads", "-1",
                                                        inp.corpus]))
    for label, value in {"zero": "0", "neg": "-1", "word": "x"}.items():
        cases.append(Case(f"tokenizer.bench.repeats.{label}", ["tokenizer", "bench", "--tokenizer", "bytes", "--repeats",
                                                                value, inp.corpus]))
    cases.append(Case("tokenizer.bench.threads.neg", ["tokenizer", "bench", "--tokenizer", "bytes", "--threads", "-1",
                                                       inp.corpus]))
    cases.append(Case("tokenizer.bench.file.missing", ["tokenizer", "bench", "--tokenizer", "bytes", inp.bad["missing"]]))
    decode_inputs = {"not_json": b"[1, 2", "object": b'{"a": 1}', "negative": b"[1, -2]", "string": b'[1, "2"]',
                     "float": b"[1, 2.5]", "beyond_vocab": b"[1, 301]", "nested": b"[[1]]", "deep": b"[" * 20000 + b"]" * 20000}
    for label, data in decode_inputs.items():
        path = inp.write(f"tok/decode_{label}.json", data)
        cases.append(Case(f"tokenizer.decode.ids.{label}", ["tokenizer", "decode", "--tokenizer", inp.tok, path]))
    for label, value in {"zero": "0", "neg": "-1", "too_big": str(2**31), "word": "x"}.items():
        cases.append(Case(f"tokenize.shard-tokens.{label}", ["tokenize", "--tokenizer", "bytes", "--data", inp.corpus,
                                                             "--out", inp.path("out/st_" + label), "--shard-tokens", value]))
    cases.append(Case("tokenize.out.empty", ["tokenize", "--tokenizer", "bytes", "--data", inp.corpus, "--out", ""]))
    cases.append(Case("tokenize.out.is_file", ["tokenize", "--tokenizer", "bytes", "--data", inp.corpus, "--out", inp.corpus]))
    cases.append(Case("tokenize.threads.neg", ["tokenize", "--tokenizer", "bytes", "--data", inp.corpus, "--out",
                                               inp.path("out/threads_neg"), "--threads", "-1"]))
    for label, d in inp.bad_shards.items():
        cases.append(Case(f"train.shards.{label}", ["train", "--data", d, "--config", inp.tiny, "--steps", "1",
                                                    "--eval-iters", "1", "--sample-tokens", "0", "--quiet", "--out",
                                                    inp.path("runs/shards_" + label)]))
    for label, weights in inp.sample_tok_runs.items():
        cases.append(Case(f"sample.tokenizer.{label}", ["sample", "--checkpoint", weights, "--tokens", "4"]))
    # Shards of a good tokenizer under a model with a block too long for the data.
    cases.append(Case("train.shards.block_past_data", ["train", "--data", inp.shards, "--config", "gpt2", "--steps", "1",
                                                       "--quiet", "--out", inp.path("runs/shards_block")]))
    return cases


def all_cases(inp):
    return (file_cases(inp) + flag_cases(inp) + usage_cases(inp) + config_cases(inp) + ref_cases(inp) +
            op_cases(inp) + tokenizer_cases(inp))


# ---------------------------------------------------------------------------------------------
# Judging


def judge(case, lathe, cwd, timeout):
    """(verdict, detail): verdict "ok", or what went wrong."""
    start = time.monotonic()
    # A pending case known to hang (a model of a billion layers being built) must not hold the
    # driver, nor grow for long.
    timeout = min(timeout, 10.0) if case.name in PENDING else timeout
    try:
        p = subprocess.run([lathe] + case.args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang", f"still running after {timeout} s"
    seconds = time.monotonic() - start
    err = p.stderr.decode(errors="replace")
    if p.returncode < 0:
        return "crash", f"killed by signal {-p.returncode}; stderr: {err[-300:]!r}"
    if case.name in EXPECTED_OK:
        return ("ok", f"{seconds:.1f} s") if p.returncode == 0 else ("refused", f"exit {p.returncode}: {err.strip()[:300]}")
    if p.returncode == 0:
        return "silent acceptance", "exit 0"
    if p.returncode not in (1, 2):
        return "bad exit code", f"exit {p.returncode}; stderr: {err[-300:]!r}"
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith("lathe: "):
        return "bad message", f"exit {p.returncode}; stderr ({len(lines)} lines): {err[:300]!r}"
    return "ok", f"exit {p.returncode}: {lines[0][:200]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lathe", required=True, help="the lathe program (build/examples/lathe)")
    ap.add_argument("--jobs", type=int, default=max(2, os.cpu_count() or 2))
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds before a run counts as a hang")
    ap.add_argument("--verbose", action="store_true", help="print every case, not only failures")
    args = ap.parse_args()
    lathe = os.path.abspath(args.lathe)
    root = tempfile.mkdtemp(prefix="lathe_bad_inputs_")
    try:
        inp = Inputs(root, lathe)
        cases = all_cases(inp)
        names = [c.name for c in cases]
        assert len(set(names)) == len(names), "duplicate case names"
        for listed in (PENDING | EXPECTED_OK) - set(names):
            print(f"bad_inputs: listed case {listed} does not exist", file=sys.stderr)
            return 1
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda c: (c, judge(c, lathe, root, args.timeout)), cases))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    failures, pending_open, pending_fixed = [], [], []
    for case, (verdict, detail) in results:
        if case.name in PENDING:
            (pending_fixed if verdict == "ok" else pending_open).append((case, verdict, detail))
        elif verdict != "ok":
            failures.append((case, verdict, detail))
        if args.verbose:
            print(f"{verdict:>17}  {case.name}: {detail}")
    for case, verdict, detail in failures:
        print(f"FAIL {verdict}: {case.name}: lathe {' '.join(case.args)}\n     {detail}")
    for case, verdict, detail in pending_open:
        print(f"pending {verdict}: {case.name}: {detail}")
    for case, _, _ in pending_fixed:
        print(f"pending case now passes, move it out of PENDING: {case.name}")
    print(f"bad_inputs: {len(cases)} cases, {len(failures)} failed, {len(EXPECTED_OK)} expected-ok, "
          f"{len(pending_open)} pending, {len(pending_fixed)} pending already fixed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
