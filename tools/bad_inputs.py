#!/usr/bin/env python3
"""Runs the lathe program on hundreds of bad inputs and judges every run.

Each case is one command line over inputs generated into a temporary directory: damaged and
non-regular files (empty, truncated, garbage, huge header, FIFO, directory, symlink loop,
/dev/null, missing), numeric flags set to negative, zero, huge and non-numeric values for every
subcommand, unknown flags and devices, model configs and reference cases that are wrong in every
way the format allows, tokenizers and token shard directories that are wrong in every way found
so far. A run passes when it

  - exits 1 or 2 with exactly one line on stderr, starting "lathe: " (and, for the cases that say
    what it must name, naming it), and
  - is neither killed by a signal (a crash) nor still running after the timeout (a hang), nor
    past the address space a case allows.

`lathe ref --check` on results that differ is a verdict, not an error: exit 1, its report on
stdout, nothing on stderr; its cases require the report to say what differs.

Exit 0 on a bad input is "silent acceptance", a failure, except for the cases listed as
expected-ok below: values the program legitimately accepts (a seed of 0, --tokens 0, ...), which
must then succeed.

PENDING lists cases whose fix is still to come: they run and are reported but do not fail the
driver, which says when one starts to pass.

  tools/bad_inputs.py --lathe build/examples/lathe [--jobs N] [--timeout S] [--verbose]
"""

import argparse
import collections
import concurrent.futures
import fcntl
import json
import os
import resource
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
    "bench.peak-tflops.hex",
    # More than there is means all of it: top-k past the vocabulary, intervals past the run (only
    # at the end), keep-last past the checkpoints, a warm-up longer than the run.
    "sample.top-k.int64_max", "train.eval-interval.int64_max", "train.ckpt-interval.int64_max",
    "train.keep-last.int64_max", "train.warmup.int64_max",
    # One corpus file is taken as bytes whatever they are (only a directory skips binary files).
    "train.data.garbage", "train.data.truncated",
    # Any finite positive initial loss scale (fp16 backs off from it), any growth interval >= 1.
    "train.init-scale.hex", "train.init-scale.too_big", "train.init-scale.int64_max",
    "train.scale-growth-interval.int64_max",
    # The undamaged files of the convert section: every command takes them.
    "convert.hf.good", "sample.hf.good", "train.init-from.hf.good",
    "convert.llmc.good", "sample.llmc.good", "train.init-from.llmc.good",
    # The runners' sampling options: top-p 1 and min-p 0 are "off", a penalty's window of any size is a
    # window (past the text: all of it), a penalty of 0x10 is 16.
    "sample.min-p.zero", "sample.repetition-window.zero",
    "sample.repetition-window.int64_max", "sample.repetition-penalty.hex", "sample.repetition-penalty.too_big",
    "sample.repetition-penalty.int64_max",
    # 50 MB of spaces encode in memory proportionate to the input.
    "tokenizer.encode.spaces_50mb",
    # The third round: a context of 2^61 or 10^8 positions is a model like any other (its rotary tables
    # and sampling cache hold the positions used; the cases bound the memory); integral floats are
    # integers for every field; paths of any bytes; large documents within their time bounds.
    "round3.sample.rope_block_2_61", "round3.convert.rope_block_2_61", "round3.sample.rope_block_1e8",
    "round3.convert.rope_block_1e8", "round3.ref.rope_block_2_61", "round3.train.config.batch_float",
    "round3.train.config.layers_float", "round3.path.train_out", "round3.path.convert_out",
    "round3.path.tokenize_tokenizer", "round3.inspect.header_80000_entries", "round3.convert.llmc_4000_layers",
    "round3.convert.llmc_4000_layers_to_llmc",
    # A chat reads whatever a user types: any bytes, a line of any length.
    "chat.stdin.line_1mib", "chat.stdin.invalid_utf8", "chat.stdin.commands", "chat.stdin.no_newline",
}


# ---------------------------------------------------------------------------------------------
# Inputs


def safetensors_bytes(tensors, metadata=None):
    """A safetensors file: tensors is a list of (name, dtype, shape, raw bytes)."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    # Joined once: appending each tensor to the bytes so far copied them all again (a model with
    # GPT-2's vocabulary took 4 s to write).
    return b"".join([struct.pack("<Q", len(text)), text, *(raw for _, _, _, raw in tensors)])


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
        self.shard_directory_inputs()

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


def tokenizer_json(merges):
    """A file of `lathe tokenizer train`'s format with these merges."""
    n = 256 + len(merges)
    return json.dumps({"format": "lathe-bpe-tokenizer", "version": 1, "pattern": "gpt2", "vocab_size": n,
                       "end_of_text": n, "merges": merges}).encode()


def _shard_directory_inputs(self):
    """Tokenizers whose tokens would not fit in memory or repeat a merge, shard directories that
    disagree with their manifest (as a killed or concurrent rewrite, or a hand edit, leaves them),
    outputs that overlap their input or cannot be written, and 50 MB of spaces."""
    lathe = self.lathe
    # [97, 97], then 40 merges each of the previous token with itself: tokens of 2^42 bytes from 600
    # bytes of file; and 60,000 merges that each grow a token by one byte (1.8 GB in all).
    self.tok_doubling = self.write("tok/doubling.json", tokenizer_json([[97, 97]] + [[256 + k, 256 + k] for k in range(40)]))
    self.tok_growing = self.write("tok/growing.json", tokenizer_json([[97, 97]] + [[256 + k, 97] for k in range(59999)]))
    self.tok_repeated_pair = self.write("tok/repeated_pair.json", tokenizer_json([[97, 98], [99, 100], [97, 98]]))
    self.tok_same_bytes = self.write("tok/same_bytes.json", tokenizer_json([[97, 98], [256, 99], [98, 99], [97, 258]]))
    _, encoder = small_gpt2_vocab()
    self.gpt2_repeated = self.write("tok/gpt2_repeated/vocab.bpe", b"#version: 0.2\nt h\nt h\n")
    self.write_json("tok/gpt2_repeated/encoder.json", encoder)
    self.gpt2_later = self.write("tok/gpt2_later/vocab.bpe", b"#version: 0.2\nth e\nt h\n")
    self.write_json("tok/gpt2_later/encoder.json", encoder)

    # Directories of shards that a reader must refuse: copies of self.shards (one shard of the
    # trained tokenizer) with their manifest edited, and the shards of `bytes` under that manifest.
    self.disagreeing_shards = {}
    with open(os.path.join(self.shards, "tokenizer.json")) as f:
        manifest = json.load(f)
    edits = {
        "manifest_tokens_5": {"tokens": 5},
        "manifest_tokens_negative": {"tokens": -1},
        "manifest_vocab_size": {"vocab_size": manifest["vocab_size"] + 1},
        "manifest_end_of_text": {"end_of_text": manifest["end_of_text"] - 1},
        "manifest_kind": {"tokenizer": {**manifest["tokenizer"], "kind": "gpt2"}},
        "manifest_older_lathe": {"version": None, "state": None, "files": None},
        "manifest_writing": {"state": "writing", "writer": "lathe tokenize (process 4242)"},
    }
    for label, change in edits.items():
        d = self.path(f"tok/shards_{label}")
        shutil.copytree(self.shards, d)
        edited = {k: v for k, v in {**manifest, **change}.items() if v is not None}
        self.write_json(f"tok/shards_{label}/tokenizer.json", edited)
        self.disagreeing_shards[label] = d
    bytes_shards = self.path("tok/bytes_shards")
    subprocess.run([lathe, "tokenize", "--tokenizer", "bytes", "--data", self.corpus, "--out", bytes_shards],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    # A killed re-tokenize of old (before the manifest went first): byte shards under the manifest
    # of the trained tokenizer.
    mixed = self.path("tok/shards_mixed")
    shutil.copytree(self.shards, mixed)
    shutil.copy(os.path.join(bytes_shards, "shard_000000.bin"), os.path.join(mixed, "shard_000000.bin"))
    self.disagreeing_shards["mixed_tokenizers"] = mixed
    # A shard past a gap that an older re-run left, and one of a concurrent run.
    stale = self.path("tok/shards_stale")
    shutil.copytree(self.shards, stale)
    shutil.copy(os.path.join(self.shards, "shard_000000.bin"), os.path.join(stale, "shard_000007.bin"))
    self.disagreeing_shards["stale_past_gap"] = stale

    # Outputs: a corpus directory, a shard directory another process holds, one whose
    # tokenizer.json is another program's.
    self.corpus_dir = self.path("tok/corpus_dir")
    self.write("tok/corpus_dir/a.txt", b"a document of the corpus\n")
    self.locked_out = self.path("tok/locked_out")
    os.makedirs(self.locked_out)
    self.held_lock = open(os.path.join(self.locked_out, ".lock"), "w")
    fcntl.flock(self.held_lock, fcntl.LOCK_EX)  # held by this driver for as long as it runs
    self.held_lock.write(f"{os.getpid()} lathe tokenize\n")
    self.held_lock.flush()
    self.foreign_out = self.path("tok/foreign_out")
    self.write("tok/foreign_out/tokenizer.json", b'{"version": "1.0", "model": {"type": "BPE"}}')

    # A corpus with a subdirectory that cannot be read; root reads everything, so then the case
    # runs as nobody (setpriv), in a tree everyone may traverse.
    self.unreadable_corpus = self.path("tok/unreadable")
    self.write("tok/unreadable/a.txt", b"readable\n")
    self.write("tok/unreadable/locked/b.txt", b"locked away\n")
    os.chmod(os.path.join(self.unreadable_corpus, "locked"), 0)
    # nobody runs a copy of the program from this tree: the build tree may lie where nobody can
    # reach (a checkout under /root). Where nobody cannot run even that, the cases are skipped and
    # the driver says why.
    self.as_nobody, self.lathe_for_nobody, self.nobody_skip = [], None, None
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        self.nobody_skip = "running as root without setpriv, no directory is unreadable"
    elif os.geteuid() == 0:
        os.chmod(self.root, 0o755)
        os.chmod(os.path.dirname(self.unreadable_corpus), 0o755)
        copy = self.path("lathe_for_nobody")
        shutil.copy2(lathe, copy)
        os.chmod(copy, 0o755)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        probe = subprocess.run(as_nobody + [copy, "--version"], capture_output=True, text=True, timeout=60)
        if probe.returncode == 0:
            self.as_nobody, self.lathe_for_nobody = as_nobody, copy
        else:
            why = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[0]
            self.nobody_skip = f"nobody (uid 65534) cannot run {copy}: {why}"
    self.can_test_unreadable = os.geteuid() != 0 or bool(self.as_nobody)

    # 50 MB of spaces, and a 512-token vocabulary trained on runs of spaces (tokens of 2, 4, 8, ...).
    runs = self.write("tok/space_runs.txt", b"".join(b" " * n + b"x" for n in range(1, 2000, 3)))
    self.tok_spaces = self.path("tok/spaces512.json")
    subprocess.run([lathe, "tokenizer", "train", "--data", runs, "--vocab-size", "512", "--out", self.tok_spaces],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    self.spaces_50mb = self.write("tok/spaces_50mb.txt", b" " * (50 << 20))


Inputs.shard_directory_inputs = _shard_directory_inputs


# ---------------------------------------------------------------------------------------------
# Cases


class Case:
    """One command line. `says`: text the message must hold (it names the fault). `verdict`: the
    run is `lathe ref --check` judging results, not an error: exit 1, nothing on stderr, and `says`
    in its report on stdout. `prefix`: what runs lathe (setpriv, to run as nobody), `program`: the
    program it runs instead of the one under test (a copy nobody can reach); `memory_mb`:
    the address space it may take, so that a blow-up fails fast instead of swapping (generous: a
    CUDA build maps cuBLAS, some hundreds of megabytes, before main); `peak_rss_mb`: the resident
    memory it may reach, measured (the bound a case states about lathe's own use); `timeout`: the
    seconds of a case whose work is large by design, in place of --timeout."""

    def __init__(self, name, args, says=None, verdict=False, prefix=None, program=None, memory_mb=None,
                 peak_rss_mb=None, timeout=None):
        self.name, self.args, self.says, self.verdict = name, args, says, verdict
        self.prefix, self.program, self.memory_mb, self.peak_rss_mb = prefix or [], program, memory_mb, peak_rss_mb
        self.timeout = timeout


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
                            "--samples": "int", "--top-p": "float", "--min-p": "float",
                            "--repetition-penalty": "float", "--repetition-window": "int"}),
        "bench": (bench, {"--steps": "int", "--warmup": "int", "--batch": "int", "--threads": "int",
                          "--peak-tflops": "float"}),
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
        "gpt.config_unknown_key": ("gpt_tiny", dict(edit_spec=lambda s: s["config"].update(n_laters=3),
                                                    says='unknown field "n_laters"')),
        "gpt.config_zero_heads": ("gpt_tiny", dict(edit_spec=lambda s: s["config"].update(n_head=0))),
        "gpt.config_huge_vocab": ("gpt_tiny", dict(edit_spec=lambda s: s["config"].update(vocab_size=1 << 50))),
        "gpt.precision_unknown": ("gpt_bf16", dict(edit_spec=setter(precision="fp8"))),
        "gpt.precision_number": ("gpt_bf16", dict(edit_spec=setter(precision=16))),
    }
    cases = []
    out = inp.path("out/ref_out.safetensors")
    for label, (golden, kw) in variants.items():
        edits = {k: v for k, v in kw.items() if k != "says"}
        path = edited_case(inp, golden + ".case.safetensors", label, **edits)
        cases.append(Case(f"ref.{label}", ["ref", path, out], says=kw.get("says")))
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
        "too_few_operands": ({"op": "maximum"}, [f32(2)]),
        "number_form_without_number": ({"op": "add"}, [f32(2)]),
        "number_and_operand": ({"op": "pow", "args": {"exponent": 2}}, [f32(2), f32(2)]),
        "too_many_optional_operands": ({"op": "layer_norm"}, [f32(2, 3), f32(3), f32(3), f32(3)]),
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


# ---------------------------------------------------------------------------------------------
# Muon (optim/muon.h): `lathe ref` cases of the kinds "optim" and "train" and `lathe train
# --optimizer muon`, wrong in each of its options.

# --adam-lr takes any finite positive lr, as --lr does.
EXPECTED_OK.update({"train.muon.adam-lr.hex", "train.muon.adam-lr.too_big", "train.muon.adam-lr.int64_max"})


def muon_cases(inp):
    """Muon given a vector; negative, non-finite or mistyped options, ns_steps out of [1, 100), an
    unknown adjust_lr_fn; AdamW's options of the pair; --adam-lr."""
    cases = []
    out = inp.path("out/ref_out.safetensors")
    every = [0, 1, 2, 3, 4, 5]
    bad_options = {
        "lr_negative": {"lr": -0.02},
        "weight_decay_negative": {"weight_decay": -0.1},
        "momentum_negative": {"momentum": -0.5},
        "eps_zero": {"eps": 0.0},
        "eps_negative": {"eps": -1e-7},
        "ns_steps_zero": {"ns_steps": 0},
        "ns_steps_100": {"ns_steps": 100},
        "ns_steps_fraction": {"ns_steps": 2.5},
        "ns_steps_string": {"ns_steps": "5"},
        "ns_coefficients_two": {"ns_coefficients": [3.4445, -4.775]},
        "ns_coefficients_string": {"ns_coefficients": "abc"},
        "adjust_lr_fn_unknown": {"adjust_lr_fn": "spectral"},
        "adjust_lr_fn_number": {"adjust_lr_fn": 1},
        "nesterov_string": {"nesterov": "yes"},
        "use_addmm_number": {"use_addmm": 1},
        "unknown_option": {"betas": [0.9, 0.99]},
    }
    for label, options in bad_options.items():
        path = edited_case(inp, "optim_muon.case.safetensors", f"muon_{label}",
                           edit_spec=setter(groups=[{"params": every, **options}]))
        field = next(iter(options))  # the message names it
        cases.append(Case(f"ref.muon.optim.{label}", ["ref", path, out], says=field))
        path = edited_case(inp, "train_muon.case.safetensors", f"train_muon_{label}",
                           edit_spec=lambda spec, o=options: spec["optimizer"].update(o))
        cases.append(Case(f"ref.muon.train.{label}", ["ref", path, out], says=field))
    # A number past a double's range in the document.
    _, tensors = read_safetensors(os.path.join(GOLDEN, "optim_muon.case.safetensors"))
    raw = '{"kind": "optim", "optimizer": "muon", "steps": 24, "groups": [{"params": %s, "lr": 1e999}]}' % every
    cases.append(Case("ref.muon.optim.lr_overflow",
                      ["ref", inp.write("cases/muon_lr_overflow.safetensors", safetensors_bytes(tensors, {"case": raw})), out],
                      says="1e999"))
    # A vector given to Muon: parameter 1 as 15 numbers, without gradients.
    vector = lambda ts: [("param.1", "F32", [15], struct.pack("<15f", *([0.02] * 15))) if n == "param.1" else (n, d, sh, r)
                         for n, d, sh, r in ts if not (n.startswith("grad.") and n.endswith(".1"))]
    path = edited_case(inp, "optim_muon.case.safetensors", "muon_vector", edit_tensors=vector)
    cases.append(Case("ref.muon.optim.vector_parameter", ["ref", path, out], says="param.1"))
    # The pair of kind "train": AdamW's options, and explicit groups that do not say their optimizer
    # or give Muon a vector.
    names = ["transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"]
    hidden = [f"transformer.h.{i}.{m}.weight" for i in range(2) for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")]
    rest = [f"transformer.h.{i}.{m}" for i in range(2) for m in
            ("attn.c_attn.bias", "attn.c_proj.bias", "mlp.c_fc.bias", "mlp.c_proj.bias", "ln_1.weight", "ln_1.bias",
             "ln_2.weight", "ln_2.bias")]
    train_edits = {
        "adamw_not_object": lambda spec: spec["optimizer"].update(adamw=3e-3),
        "adamw_lr_negative": lambda spec: spec["optimizer"].update(adamw={"lr": -1}),
        "adamw_unknown_option": lambda spec: spec["optimizer"].update(adamw={"momentum": 0.9}),
        "adamw_fused_string": lambda spec: spec["optimizer"].update(adamw={"fused": "yes"}),
        "groups_without_optimizer": setter(param_groups=[{"params": hidden, "optimizer": "muon"},
                                                         {"params": names + rest}]),
        "groups_unknown_optimizer": setter(param_groups=[{"params": hidden, "optimizer": "lion"},
                                                         {"params": names + rest, "optimizer": "adamw"}]),
        "groups_vector_to_muon": setter(param_groups=[{"params": hidden + rest, "optimizer": "muon"},
                                                      {"params": names, "optimizer": "adamw"}]),
    }
    train_says = {"adamw_not_object": "adamw", "adamw_lr_negative": "lr", "adamw_unknown_option": "momentum",
                  "adamw_fused_string": "fused", "groups_without_optimizer": "param_groups[1]",
                  "groups_unknown_optimizer": "param_groups[0]", "groups_vector_to_muon": rest[0]}
    for label, edit in train_edits.items():
        path = edited_case(inp, "train_muon.case.safetensors", f"train_muon_{label}", edit_spec=edit)
        cases.append(Case(f"ref.muon.train.{label}", ["ref", path, out], says=train_says[label]))
    # lathe train: --adam-lr is muon's, and an lr.
    train = ["train", "--data", inp.corpus, "--config", inp.tiny, "--steps", "1", "--eval-iters", "1",
             "--sample-tokens", "0", "--quiet"]
    for label, value in numeric_values("float").items():
        cases.append(Case(f"train.muon.adam-lr.{label}", train + ["--out", inp.path("runs/muon_adam_lr_" + label),
                                                                  "--optimizer", "muon", "--adam-lr", value],
                          says=None if f"train.muon.adam-lr.{label}" in EXPECTED_OK else "--adam-lr"))
    cases.append(Case("train.muon.adam-lr.with_adamw", train + ["--out", inp.path("runs/muon_adamw"), "--adam-lr", "1e-3"],
                      says="--adam-lr"))
    cases.append(Case("train.sgd.beta2", train + ["--out", inp.path("runs/sgd_beta2"), "--optimizer", "sgd",
                                                  "--beta2", "0.99"], says="--beta2"))
    cases.append(Case("train.muon.lr.negative", train + ["--out", inp.path("runs/muon_lr"), "--optimizer", "muon",
                                                         "--lr", "-0.02"], says="--lr"))
    return cases


# ---------------------------------------------------------------------------------------------
# Messages that name the fault: each of these once gave a message that pointed elsewhere (issue
# 32), so each must now say what is wrong, not only be one line.


def named_fault_cases(inp):
    cases = []
    out = inp.path("out/ref_out.safetensors")
    # A parameter index past int64 (2^64 - 1) read as -1.
    path = edited_case(inp, "optim_adam.case.safetensors", "named_group_index",
                       edit_spec=setter(groups=[{"params": [0, 1, 2, 3, 4, 5, 2**64 - 1]}]))
    cases.append(Case("ref.named.group_index_uint64_max", ["ref", path, out],
                      says="group 0 names parameter 18446744073709551615 which does not exist"))
    # A growth interval of 2^70 (a float to the JSON parser) or 2^64 - 1 (past int64) named an
    # "unknown option or wrong type", or turned negative.
    for label, value in {"2_70": 2**70, "uint64_max": 2**64 - 1, "float": 2.0}.items():
        path = edited_case(inp, "train_tiny.case.safetensors", f"named_growth_{label}",
                           edit_spec=setter(precision="fp16", scaler={"growth_interval": value}))
        cases.append(Case(f"ref.named.growth_interval_{label}", ["ref", path, out],
                          says="growth_interval must be an integer from 1 to 9223372036854775807"))
    train = ["train", "--data", inp.corpus, "--config", inp.tiny, "--steps", "1", "--eval-iters", "1",
             "--sample-tokens", "0", "--quiet"]
    cases.append(Case("train.named.scale_growth_interval_2_70",
                      train + ["--out", inp.path("runs/named_growth"), "--scale-growth-interval", str(2**70)],
                      says="--scale-growth-interval"))
    # --dist-timeout: a positive number of seconds (not a number at all is CLI11's to say).
    for label in ("zero", "neg", "huge_neg", "nan", "inf", "neg_inf", "exp", "word", "empty"):
        numeric = label not in ("word", "empty")
        cases.append(Case(f"train.named.dist_timeout_{label}",
                          train + ["--out", inp.path("runs/named_timeout_" + label),
                                   "--dist-timeout", numeric_values("float")[label]],
                          says="--dist-timeout must be a positive number of seconds" if numeric else "--dist-timeout"))
    # ref --check on NaN and infinities said "max |got - want| 0": it says where they are and how
    # they differ, in its verdict.
    values = lambda *v: safetensors_bytes([("x", "F32", [len(v)], struct.pack(f"<{len(v)}f", *v))])
    nan, inf = float("nan"), float("inf")
    want = inp.write("check/finite.safetensors", values(1.0, 2.0, 3.0))
    pairs = {
        "nan_in_got": (values(1.0, nan, 3.0), want, "NaN in got only: 1 element, at [1] (got nan, want 2)"),
        "nan_in_want": (values(1.0, 2.0, 3.0), inp.write("check/nan.safetensors", values(1.0, nan, 3.0)),
                        "NaN in want only: 1 element, at [1] (got 2, want nan)"),
        "nan_in_both": (values(1.0, nan, 3.0), inp.write("check/nan_too.safetensors", values(1.0, nan, 3.0)),
                        "NaN in both (equal only with --equal-nan): 1 element, at [1]"),
        "inf_in_got": (values(inf, 2.0, 3.0), want, "infinite in got only: 1 element, at [0] (got inf, want 1)"),
        "opposite_infs": (values(1.0, 2.0, -inf), inp.write("check/inf.safetensors", values(1.0, 2.0, inf)),
                          "infinities of opposite signs: 1 element, at [2] (got -inf, want inf)"),
    }
    for label, (got, want_path, says) in pairs.items():
        got_path = inp.write(f"check/got_{label}.safetensors", got)
        cases.append(Case(f"ref.check.named.{label}", ["ref", "--check", got_path, want_path], says=says, verdict=True))
    return cases


# ---------------------------------------------------------------------------------------------
# lathe convert, and GPT-2's formats wherever weights are read (sample --checkpoint, train --init-from)


def convert_cases(inp):
    """Hugging Face directories and llm.c model files wrong in every way, through lathe convert,
    lathe sample and lathe train --init-from; convert's own usage errors. The files are the base
    run's weights (a byte-level model, so that sample and train take them whole) converted by
    lathe, then damaged; undamaged, each command accepts them (the *.good cases)."""
    hf_base, llmc_base = inp.path("convert/base_hf"), inp.path("convert/base.bin")
    for d in ("out", "convert"):
        os.makedirs(inp.path(d), exist_ok=True)
    for args in (["--to", "hf"], ["--to", "llmc"]):
        subprocess.run([inp.lathe, "convert", inp.weights, hf_base if args[1] == "hf" else llmc_base] + args,
                       check=True, stdout=subprocess.DEVNULL, timeout=60)
    with open(os.path.join(hf_base, "config.json"), "rb") as f:
        config = json.loads(f.read())
    metadata, tensors = read_safetensors(os.path.join(hf_base, "model.safetensors"))
    C, V, T = config["n_embd"], config["vocab_size"], config["n_positions"]

    def hf_dir(label, config_bytes=None, tensor_list=None, extra=None):
        d = inp.path(f"convert/{label}")
        if config_bytes is not False:
            inp.write(f"convert/{label}/config.json", config_bytes if config_bytes is not None else json.dumps(config).encode())
        if tensor_list is not False:
            inp.write(f"convert/{label}/model.safetensors", safetensors_bytes(tensor_list or tensors, metadata))
        for name, data in (extra or {}).items():
            inp.write(f"convert/{label}/{name}", data)
        os.makedirs(d, exist_ok=True)
        return d

    def with_config(**changes):
        c = dict(config)
        for k, v in changes.items():
            if v is _DELETE:
                c.pop(k, None)
            else:
                c[k] = v
        return json.dumps(c).encode()

    f32 = lambda n: struct.pack(f"<{n}f", *([0.25] * n))
    c_attn = "transformer.h.0.attn.c_attn.weight"
    dirs = {
        "no_config": hf_dir("no_config", config_bytes=False),
        "no_weights": hf_dir("no_weights", tensor_list=False),
        "pickle_only": hf_dir("pickle_only", tensor_list=False, extra={"pytorch_model.bin": b"\x80\x02pickle"}),
        "config_not_json": hf_dir("config_not_json", config_bytes=b"{model_type: gpt2"),
        "config_deep": hf_dir("config_deep", config_bytes=b"[" * 20000 + b"]" * 20000),
        "config_array": hf_dir("config_array", config_bytes=b"[1, 2]"),
        "model_type_llama": hf_dir("model_type_llama", with_config(model_type="llama")),
        "model_type_missing": hf_dir("model_type_missing", with_config(model_type=_DELETE)),
        "activation_gelu": hf_dir("activation_gelu", with_config(activation_function="gelu")),
        "n_inner": hf_dir("n_inner", with_config(n_inner=3 * C)),
        "eps": hf_dir("eps", with_config(layer_norm_epsilon=1e-6)),
        "untied": hf_dir("untied", with_config(tie_word_embeddings=False)),
        "by_layer": hf_dir("by_layer", with_config(scale_attn_by_inverse_layer_idx=True)),
        "upcast": hf_dir("upcast", with_config(reorder_and_upcast_attn=True)),
        "unscaled": hf_dir("unscaled", with_config(scale_attn_weights=False)),
        "dropouts_differ": hf_dir("dropouts_differ", with_config(attn_pdrop=0.25)),
        "n_layer_more": hf_dir("n_layer_more", with_config(n_layer=5)),
        "n_layer_huge": hf_dir("n_layer_huge", with_config(n_layer=2**31 - 1)),
        "n_embd_huge": hf_dir("n_embd_huge", with_config(n_embd=2**40)),
        "n_embd_string": hf_dir("n_embd_string", with_config(n_embd="16")),
        "heads_not_dividing": hf_dir("heads_not_dividing", with_config(n_head=3)),
        "vocab_zero": hf_dir("vocab_zero", with_config(vocab_size=0)),
        "vocab_larger": hf_dir("vocab_larger", with_config(vocab_size=V + 1)),
        "tensor_missing": hf_dir("tensor_missing", tensor_list=drop("transformer.ln_f.bias")(tensors)),
        "tensor_linear_layout": hf_dir("tensor_linear_layout",
                                       tensor_list=replace(c_attn, "F32", [3 * C, C], f32(3 * C * C))(tensors)),
        "tensor_int": hf_dir("tensor_int", tensor_list=replace("transformer.wpe.weight", "I32", [T, C],
                                                               struct.pack(f"<{T * C}i", *([1] * (T * C))))(tensors)),
        "tensor_unknown": hf_dir("tensor_unknown", tensor_list=add("score.weight", "F32", [2, C], f32(2 * C))(tensors)),
        "head_differs": hf_dir("head_differs", tensor_list=add("lm_head.weight", "F32", [V, C], f32(V * C))(tensors)),
        "two_names": hf_dir("two_names", tensor_list=add("wpe.weight", "F32", [T, C], f32(T * C))(tensors)),
        "weights_garbage": hf_dir("weights_garbage", tensor_list=False, extra={"model.safetensors": b"\x07" * 100}),
        "index_outside": hf_dir("index_outside", tensor_list=False, extra={
            "model.safetensors.index.json": json.dumps({"weight_map": {"wte.weight": "../model.safetensors"}}).encode()}),
        "index_missing_shard": hf_dir("index_missing_shard", tensor_list=False, extra={
            "model.safetensors.index.json": json.dumps({"weight_map": {"wte.weight": "model-1.safetensors"}}).encode()}),
        "index_not_map": hf_dir("index_not_map", tensor_list=False, extra={"model.safetensors.index.json": b"[]"}),
    }
    config_dir = hf_dir("config_is_dir", config_bytes=False)
    os.makedirs(os.path.join(config_dir, "config.json"), exist_ok=True)
    dirs["config_is_dir"] = config_dir
    fifo_dir = hf_dir("config_fifo", config_bytes=False)
    os.mkfifo(os.path.join(fifo_dir, "config.json"))
    dirs["config_fifo"] = fifo_dir

    with open(llmc_base, "rb") as f:
        v3 = f.read()
    header = lambda i, value: v3[:4 * i] + struct.pack("<i", value) + v3[4 * i + 4:]
    llmc = {
        "shard_magic": header(0, 20240520),
        "other_magic": header(0, 12345),
        "version_4": header(1, 4),
        "version_negative": header(1, -3),
        "maxT_zero": header(2, 0),
        "vocab_negative": header(3, -100),
        "layers_zero": header(4, 0),
        "heads_not_dividing": header(5, 3),
        "embd_huge": header(6, 2**30),
        "padded_below_vocab": header(7, 128),
        "layers_more": header(4, 2),
        "truncated": v3[:-1],
        "truncated_header": v3[:100],
        "header_only": v3[:1024],
        "extra_bytes": v3 + b"\0" * 4,
        "empty": b"",
    }
    files = {label: inp.write(f"convert/llmc_{label}.bin", data) for label, data in llmc.items()}

    out = inp.path("out/converted.safetensors")
    cases = []
    for kind, label, path in [("hf", l, p) for l, p in dirs.items()] + [("llmc", l, p) for l, p in files.items()]:
        cases.append(Case(f"convert.{kind}.{label}", ["convert", path, out]))
        cases.append(Case(f"sample.{kind}.{label}", ["sample", "--checkpoint", path, "--tokens", "2", "--tokenizer", "bytes"]))
        cases.append(Case(f"train.init-from.{kind}.{label}", [
            "train", "--init-from", path, "--data", inp.corpus, "--steps", "1", "--eval-iters", "1", "--sample-tokens",
            "0", "--quiet", "--out", inp.path(f"runs/init_{kind}_{label}")]))
    for bad, path in inp.bad.items():
        cases.append(Case(f"convert.in.{bad}", ["convert", path, out]))
        cases.append(Case(f"train.init-from.{bad}", ["train", "--init-from", path, "--data", inp.corpus, "--steps", "1",
                                                     "--quiet", "--out", inp.path(f"runs/init_{bad}")]))
    # The undamaged files, accepted by every command (EXPECTED_OK).
    for kind, path in (("hf", hf_base), ("llmc", llmc_base)):
        cases += [
            Case(f"convert.{kind}.good", ["convert", path, inp.path(f"out/good_{kind}.safetensors")]),
            Case(f"sample.{kind}.good", ["sample", "--checkpoint", path, "--tokens", "2", "--tokenizer", "bytes"]),
            Case(f"train.init-from.{kind}.good", ["train", "--init-from", path, "--data", inp.corpus, "--steps", "1",
                                                  "--eval-iters", "1", "--sample-tokens", "0", "--quiet", "--out",
                                                  inp.path(f"runs/init_{kind}_good")]),
        ]
    # Good weights that cannot be used as asked.
    hf_golden = os.path.join(GOLDEN, "convert_hf")  # vocabulary 100, fewer ids than the bytes'
    cases += [
        # A Hugging Face directory and an llm.c file record no tokenizer.
        Case("sample.hf.no_tokenizer", ["sample", "--checkpoint", hf_base, "--tokens", "2"]),
        Case("sample.llmc.no_tokenizer", ["sample", "--checkpoint", llmc_base, "--tokens", "2"]),
        Case("sample.hf.tokenizer_larger", ["sample", "--checkpoint", hf_golden, "--tokens", "2", "--tokenizer", "bytes"]),
        Case("sample.hf.tokenizer_missing", ["sample", "--checkpoint", hf_base, "--tokenizer", inp.bad["missing"]]),
        Case("train.init-from.vocab_below_bytes", ["train", "--init-from", hf_golden, "--data", inp.corpus, "--steps", "1",
                                                  "--quiet", "--out", inp.path("runs/init_small_vocab")]),
        Case("train.init-from.config_contradicts", ["train", "--init-from", inp.weights, "--config", "tiny", "--data",
                                                    inp.corpus, "--steps", "1", "--quiet", "--out",
                                                    inp.path("runs/init_contradicts")]),
        Case("train.init-from.empty_string", ["train", "--init-from", "", "--data", inp.corpus, "--steps", "1", "--quiet"]),
        Case("train.config.empty_string", ["train", "--config", "", "--data", inp.corpus, "--steps", "1", "--quiet"]),
    ]
    # Usage: formats, flags and outputs that do not fit.
    usage = {
        "no_args": ["convert"],
        "no_out": ["convert", hf_base],
        "three_args": ["convert", hf_base, out, out],
        "to_unknown": ["convert", hf_base, out, "--to", "onnx"],
        "to_empty": ["convert", hf_base, out, "--to", ""],
        "to_checkpoint": ["convert", hf_base, out, "--to", "checkpoint"],
        "bf16_without_llmc": ["convert", hf_base, out, "--bf16"],
        "bf16_with_hf": ["convert", hf_base, inp.path("out/hf_bf16"), "--to", "hf", "--bf16"],
        "tokenizer_with_hf": ["convert", hf_base, inp.path("out/hf_tok"), "--to", "hf", "--tokenizer", "bytes"],
        "tokenizer_with_llmc": ["convert", hf_base, inp.path("out/tok.bin"), "--to", "llmc", "--tokenizer", "bytes"],
        "tokenizer_larger": ["convert", hf_golden, inp.path("out/tok.safetensors"), "--tokenizer", "bytes"],
        "tokenizer_unknown": ["convert", hf_base, inp.path("out/tok2.safetensors"), "--tokenizer", "gpt5"],
        "out_bin_without_to": ["convert", hf_base, inp.path("out/model.bin")],
        "out_empty": ["convert", hf_base, ""],
        "out_is_directory": ["convert", hf_base, inp.bad["directory"]],
        "out_hf_is_file": ["convert", hf_base, inp.corpus, "--to", "hf"],
        "out_in_missing_dir": ["convert", hf_base, inp.path("no/such/dir/out.safetensors")],
        "out_hf_in_missing_dir": ["convert", hf_base, inp.path("no/such/dir/hf"), "--to", "hf"],
        "out_llmc_dev_full": ["convert", hf_base, "/dev/full", "--to", "llmc"],
        "out_fifo": ["convert", hf_base, inp.bad["fifo"]],
        "unknown_flag": ["convert", hf_base, out, "--frobnicate"],
    }
    cases += [Case(f"convert.usage.{label}", args) for label, args in usage.items()]
    return cases


# ---------------------------------------------------------------------------------------------
# Token shard directories and tokenizer files (issue 32's data half)


def shard_directory_cases(inp):
    """The faults of issue 32's data half: tokenizers past the memory bound or with repeated
    merges, shard directories that disagree with their manifest, `lathe tokenize` writing where it
    must not, and messages that name what is wrong."""
    cases = []
    encode = lambda tok, path=inp.corpus: ["tokenizer", "encode", "--tokenizer", tok, path]
    for label, tok, expect in [
        ("doubling", inp.tok_doubling, "merge 24 (279, 279) makes a token of 33554432 bytes"),
        ("growing", inp.tok_growing, "makes a token of"),
        ("repeated_pair", inp.tok_repeated_pair, "merge 2 repeats the pair (97, 98) of merge 0"),
        ("same_bytes", inp.tok_same_bytes, "makes the same bytes as merge 1"),
        ("gpt2_repeated", inp.gpt2_repeated, "which merge 0 already makes"),
        ("gpt2_later", inp.gpt2_later, "which neither a byte nor an earlier merge makes"),
    ]:
        cases.append(Case(f"tokenizer.encode.tokenizer.{label}", encode(tok), says=expect, memory_mb=4096))
        cases.append(Case(f"tokenize.tokenizer.{label}", ["tokenize", "--tokenizer", tok, "--data", inp.corpus,
                                                          "--out", inp.path("out/shards_" + label)],
                          says=expect, memory_mb=4096))
    # Encoding memory follows the input: 50 MB of spaces in about 650 MB (2.1 GB and over 20 s before).
    # About 3 s on a quiet 2-core machine, 11 s beside four compilers: 60 s before it is a hang.
    cases.append(Case("tokenizer.encode.spaces_50mb", encode(inp.tok_spaces, inp.spaces_50mb), memory_mb=4096,
                      peak_rss_mb=1536, timeout=60))

    train = lambda d, name: ["train", "--data", d, "--config", inp.tiny, "--steps", "1", "--eval-iters", "1",
                             "--sample-tokens", "0", "--quiet", "--out", inp.path("runs/shards_" + name)]
    expects = {
        "manifest_tokens_5": "\"tokens\" says 5",
        "manifest_tokens_negative": "\"tokens\" is -1, not a count",
        "manifest_vocab_size": "vocab_size",
        "manifest_end_of_text": "end_of_text",
        "manifest_kind": "is recorded as gpt2",
        "manifest_older_lathe": "written by an older lathe",
        "manifest_writing": "has not finished",
        "mixed_tokenizers": "the header says",
        "stale_past_gap": "shard_000007.bin is not one of the 1 shards",
    }
    for label, expect in expects.items():
        cases.append(Case(f"train.shards.{label}", train(inp.disagreeing_shards[label], label), says=expect))

    tokenize = lambda data, out: ["tokenize", "--tokenizer", "bytes", "--data", data, "--out", out]
    cases += [
        Case("tokenize.out.same_as_data", tokenize(inp.corpus_dir, inp.corpus_dir), says="are the same directory"),
        Case("tokenize.out.inside_data", tokenize(inp.corpus_dir, inp.corpus_dir + "/shards"), says="lies inside --data"),
        Case("tokenize.data.inside_out", tokenize(inp.corpus_dir + "/a.txt", inp.corpus_dir), says="lies inside --out"),
        Case("tokenize.out.locked", tokenize(inp.corpus, inp.locked_out),
             says=f"another lathe tokenize (process {os.getpid()})"),
        Case("tokenize.out.not_empty", tokenize(inp.corpus, inp.foreign_out), says="give --overwrite"),
        Case("tokenize.out.foreign_manifest", tokenize(inp.corpus, inp.foreign_out) + ["--overwrite"],
             says="is not the manifest"),
        Case("tokenizer.train.out.empty", ["tokenizer", "train", "--data", inp.corpus, "--vocab-size", "300", "--out", ""],
             says="--out must name"),
    ]
    # An --out no one may write: every command that writes one names the path and the system error.
    if os.path.isdir("/sys/kernel") and not os.access("/sys/kernel", os.W_OK):
        for where, path in {"existing": "/sys/kernel", "new": "/sys/kernel/lathe_out"}.items():
            cases.append(Case(f"tokenize.out.unwritable_{where}", tokenize(inp.corpus, path), says=path))
            cases.append(Case(f"train.out.unwritable_{where}", ["train", "--data", inp.corpus, "--config", inp.tiny,
                                                                  "--steps", "1", "--quiet", "--out", path], says=path))
        cases.append(Case("tokenizer.train.out.unwritable", ["tokenizer", "train", "--data", inp.corpus, "--vocab-size",
                                                             "300", "--out", "/sys/kernel/tok.json"],
                          says="/sys/kernel/tok.json"))
    if inp.can_test_unreadable:
        locked = os.path.join(inp.unreadable_corpus, "locked")
        cases.append(Case("tokenizer.train.data.unreadable_subdir",
                          ["tokenizer", "train", "--data", inp.unreadable_corpus, "--vocab-size", "300", "--out",
                           inp.path("out/unreadable.json")], says=f"cannot read the directory {locked}",
                          prefix=inp.as_nobody, program=inp.lathe_for_nobody))
        cases.append(Case("tokenize.data.unreadable_subdir", tokenize(inp.unreadable_corpus, inp.path("out/unreadable")),
                          says=f"cannot read the directory {locked}", prefix=inp.as_nobody,
                          program=inp.lathe_for_nobody))
    return cases


# ---------------------------------------------------------------------------------------------
# The third hardening round (issue 39): the newer surfaces -- convert, the modern block's switches,
# configs, JSON documents, outputs that hold something, paths that are not UTF-8.


def llmc_bytes(layers, C=4, V=8, T=4):
    """An llm.c version-3 model file of `layers` blocks, n_embd C, one head, every weight 0.01."""
    per_block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C
    n = V * C + T * C + layers * per_block + 2 * C
    return struct.pack("<256i", *([20240326, 3, T, V, layers, 1, C, V] + [0] * 248)) + struct.pack(f"<{n}f", *([0.01] * n))


def round3_cases(inp):
    cases = []
    out_file = lambda name: inp.path("out/r3_" + name)
    metadata, tensors = read_safetensors(inp.weights)
    config = json.loads(metadata["config"])
    no_wpe = [t for t in tensors if t[0] != "transformer.wpe.weight"]

    def weights_with(label, tensor_list=None, keep_checksums=True, raw_config=None, **changes):
        m = dict(metadata)
        c = dict(config)
        c.update(changes)
        m["config"] = raw_config if raw_config is not None else json.dumps(c)
        if not keep_checksums:
            m.pop("lathe", None)
        return inp.write(f"r3/{label}.safetensors", safetensors_bytes(tensor_list or tensors, m))

    # Sizes in a weights file's config: checked before anything is allocated, the rotary tables and
    # the sampling cache as large as the positions used (block_size 2^61 segfaulted, 1e8 took GBs).
    sizes = {
        "rope_block_2_61": (weights_with("rope_block_2_61", no_wpe, False, rope=True, block_size=2**61), None),
        "rope_block_1e8": (weights_with("rope_block_1e8", no_wpe, False, rope=True, block_size=10**8), None),
        "layers_1e6": (weights_with("layers_1e6", n_layer=10**6), "but the file holds only"),
        "layers_2_40": (weights_with("layers_2_40", n_layer=2**40), "but the file holds only"),
        "vocab_2_62": (weights_with("vocab_2_62", vocab_size=2**62), "overflows 64-bit arithmetic"),
        "vocab_uint64_max": (weights_with("vocab_uint64_max", vocab_size=2**64 - 1), "got 18446744073709551615"),
        "layers_1e30": (weights_with("layers_1e30", n_layer=1e30), "got 1e+30"),
        "softcap_1e39": (weights_with("softcap_1e39", logit_softcap=1e39), "a positive cap that f32 holds"),
        "softcap_1e308": (weights_with("softcap_1e308", logit_softcap=1e308), "a positive cap that f32 holds"),
        "dropout_rounds_to_one": (weights_with("dropout_rounds_to_one", dropout=1 - 1e-12), "(1 in f32)"),
        "rope_base_without_rope": (weights_with("rope_base_without_rope", rope_base=500000.0), "rope is off"),
        "tie_null": (weights_with("tie_null", tie_embeddings=None), "\"tie_embeddings\" must be true or false"),
        "duplicate_key": (weights_with("duplicate_key", raw_config=json.dumps(config)[:-1] + ', "n_layer": 5}'),
                          "appears twice"),
    }
    for label, (path, says) in sizes.items():
        ok = says is None
        cases.append(Case(f"round3.sample.{label}", ["sample", "--checkpoint", path, "--tokens", "4", "--prompt", "a"],
                          says=says, memory_mb=3072, peak_rss_mb=400 if ok else None))
        cases.append(Case(f"round3.convert.{label}", ["convert", path, out_file(label + ".safetensors")], says=says,
                          memory_mb=3072, peak_rss_mb=400 if ok else None))
        if not ok:
            cases.append(Case(f"round3.init_from.{label}",
                              ["train", "--init-from", path, "--data", inp.corpus, "--steps", "1", "--eval-iters", "1",
                               "--sample-tokens", "0", "--quiet", "--out", inp.path("runs/r3_init_" + label)],
                              says=says, memory_mb=3072))
    cases.append(Case("round3.convert_hf.rope_block_2_61", ["convert", sizes["rope_block_2_61"][0], out_file("rope_hf"),
                                                             "--to", "hf"], says="norm = \"layer_norm\" with rope"))
    cases.append(Case("round3.init_from.rope_block_2_61",
                      ["train", "--init-from", sizes["rope_block_2_61"][0], "--data", inp.corpus, "--steps", "1",
                       "--quiet", "--out", inp.path("runs/r3_init_rope")], says="shorter than one window"))
    # The same in a checkpoint's document, and a reference case of a context of 2^61.
    ck_meta, ck_tensors = read_safetensors(inp.checkpoint)
    doc = json.loads(ck_meta["lathe"])
    doc["model"]["n_layer"] = 10**6
    ck = inp.write("r3/ckpt_layers_1e6.safetensors", safetensors_bytes(ck_tensors, dict(ck_meta, lathe=json.dumps(doc))))
    cases.append(Case("round3.sample.checkpoint_layers_1e6", ["sample", "--checkpoint", ck, "--tokens", "2"],
                      says="holds only", memory_mb=3072))
    cases.append(Case("round3.resume.checkpoint_layers_1e6", ["train", "--resume", ck, "--out", inp.path("runs/r3_ck")],
                      memory_mb=3072))
    rope_case = edited_case(inp, "gpt_tiny.case.safetensors", "r3_rope_2_61",
                            edit_spec=lambda spec: spec["config"].update(rope=True, block_size=2**61),
                            edit_tensors=drop("transformer.wpe.weight"))
    cases.append(Case("round3.ref.rope_block_2_61", ["ref", rope_case, out_file("rope_case.safetensors")]))

    # Config files: the modern switches and numbers as f32 holds them.
    def config(label, raw=None, **changes):
        c = tiny_config()
        c.update(changes)
        return inp.write(f"r3/configs/{label}.json", raw if raw is not None else json.dumps(c).encode())
    configs = {
        "softcap_1e39": (config("softcap_1e39", logit_softcap=1e39), "a positive cap that f32 holds"),
        "softcap_subnormal": (config("softcap_subnormal", logit_softcap=1e-40), "a positive cap that f32 holds"),
        "softcap_null": (config("softcap_null", logit_softcap=None), "must be a number"),
        "dropout_rounds_to_one": (config("dropout_rounds_to_one", dropout=1 - 1e-12), "(1 in f32)"),
        "rope_base_without_rope": (config("rope_base_without_rope", rope_base=500000.0), "rope is off"),
        "vocab_uint64_max": (config("vocab_uint64_max", vocab_size=2**64 - 1), "got 18446744073709551615"),
        "vocab_2_64": (config("vocab_2_64", vocab_size=2**64), "got 1.8446744073709552e+19"),
        "layers_1e30": (config("layers_1e30", n_layer=1e30), "got 1e+30"),
        "batch_uint64_max": (config("batch_uint64_max", batch=2**64 - 1), "\"batch\" must be an integer"),
        "batch_fraction": (config("batch_fraction", batch=2.5), "\"batch\" must be an integer"),
        "duplicate_key": (config("duplicate_key", raw=b'{"vocab_size": 256, "block_size": 8, "n_layer": 1, "n_head": 1, '
                                                      b'"n_embd": 8, "n_layer": 2}'), "appears twice"),
        "swiglu_qk_norm_rope_odd": (config("swiglu_qk_norm_rope_odd", rope=True, qk_norm=True, activation="swiglu",
                                           n_embd=6, n_head=2), "rope needs an even head size"),
        "norm_weight_null": (config("norm_weight_null", norm_weight=None), "must be true or false"),
        "oversized": (config("oversized", raw=b'{"vocab_size": 256, "pad": "' + b"x" * (2 << 20) + b'"}'),
                      "more than the 1048576"),
        # 200,000 empty objects: 11-13 s in nlohmann's callback parser.
        "many_objects": (config("many_objects", raw=b'{"n_laters": [' + b",".join([b"{}"] * 200000) + b"]}"),
                         "unknown field"),
    }
    for label, (path, says) in configs.items():
        cases.append(Case(f"round3.train.config.{label}",
                          ["train", "--data", inp.corpus, "--config", path, "--steps", "1", "--eval-iters", "1",
                           "--sample-tokens", "0", "--quiet", "--out", inp.path("runs/r3_cfg_" + label)],
                          says=says, timeout=5 if label == "many_objects" else None))
        cases.append(Case(f"round3.bench.config.{label}", ["bench", "--config", path, "--steps", "1", "--warmup", "0",
                                                           "--batch", "1"], says=says))
    for label, changes in {"batch_float": {"batch": 4.0}, "layers_float": {"n_layer": 1.0}}.items():
        cases.append(Case(f"round3.train.config.{label}",
                          ["train", "--data", inp.corpus, "--config", config(label, **changes), "--steps", "1",
                           "--eval-iters", "1", "--sample-tokens", "0", "--quiet", "--out", inp.path("runs/r3_" + label)]))
    # --init-from with a --config whose switch the file's model lacks.
    cases.append(Case("round3.init_from.config_switch_not_in_file",
                      ["train", "--init-from", inp.weights, "--config", config("rope_on", rope=True),
                       "--data", inp.corpus, "--steps", "1", "--quiet", "--out", inp.path("runs/r3_switch")],
                      says="has rope = true, but --init-from"))

    # Large documents, each with its time bound (minutes before: the quadratic parse and writer).
    big_header = inp.write("r3/header_80k.safetensors", safetensors_bytes(
        [(f"layer.{i}.w", "F32", [1], b"\0\0\x80\x3f") for i in range(80000)], {"note": "x"}))
    cases.append(Case("round3.inspect.header_80000_entries", ["inspect", big_header], timeout=10))
    dup_header = inp.write("r3/header_dup.safetensors", safetensors_bytes(
        [(f"layer.{i}.w", "F32", [1], b"\0\0\x80\x3f") for i in range(20000)], None).replace(
        b'"layer.19999.w"', b'"layer.00007.w"').replace(b'"layer.7.w"', b'"layer.00007.w"'))
    cases.append(Case("round3.inspect.header_duplicate_among_20000", ["inspect", dup_header], says="twice", timeout=10))
    deep_llmc = inp.write("r3/layers_4000.bin", llmc_bytes(4000))
    cases.append(Case("round3.convert.llmc_4000_layers", ["convert", deep_llmc, out_file("deep.safetensors")],
                      timeout=20))
    cases.append(Case("round3.convert.llmc_4000_layers_to_llmc", ["convert", deep_llmc, out_file("deep.bin"),
                                                                  "--to", "llmc"], timeout=20))

    # Outputs that hold something this command did not write: refused unless --overwrite.
    hf_dir = inp.path("r3/hf_model")
    subprocess.run([inp.lathe, "convert", inp.weights, hf_dir, "--to", "hf"], check=True, stdout=subprocess.DEVNULL,
                   timeout=60)
    cases += [
        Case("round3.train.out_holds_a_model", ["train", "--data", inp.corpus, "--config", inp.tiny, "--steps", "1",
                                                "--quiet", "--out", hf_dir], says="is not empty"),
        Case("round3.train.out_holds_the_init_weights",
             ["train", "--init-from", hf_dir, "--data", inp.corpus, "--steps", "1", "--quiet", "--out", hf_dir,
              "--overwrite"], says="which this run reads"),
        Case("round3.train.resume_overwrite", ["train", "--resume", inp.base_run, "--overwrite"], says="--overwrite"),
        Case("round3.convert.out_exists", ["convert", inp.weights, inp.checkpoint], says="exists; give --overwrite"),
        Case("round3.convert_hf.out_not_empty", ["convert", inp.weights, hf_dir, "--to", "hf"], says="is not empty"),
        Case("round3.convert_hf.out_is_a_file", ["convert", inp.weights, inp.checkpoint, "--to", "hf", "--overwrite"],
             says="a Hugging Face model is a directory"),
    ]

    # Paths that are not UTF-8: runs save, errors show them escaped (\xFF), nothing is lost.
    ff = lambda name: os.fsdecode(os.fsencode(inp.path("r3")) + b"/" + name)
    cases += [
        Case("round3.path.train_out", ["train", "--data", inp.corpus, "--config", inp.tiny, "--steps", "1",
                                       "--eval-iters", "1", "--sample-tokens", "0", "--quiet",
                                       "--out", ff(b"run\xff")]),
        Case("round3.path.missing_checkpoint", ["sample", "--checkpoint", ff(b"none\xff.safetensors")], says="\\xFF"),
        Case("round3.path.missing_config", ["train", "--data", inp.corpus, "--config", ff(b"cfg\xff.json"), "--steps",
                                            "1", "--out", inp.path("runs/r3_ffcfg")], says="\\xFF"),
        Case("round3.path.convert_out", ["convert", inp.weights, ff(b"w\xff.safetensors")]),
        Case("round3.path.tokenize_tokenizer", ["tokenize", "--tokenizer", inp.tok, "--data", inp.corpus, "--out",
                                                ff(b"shards\xff")]),
    ]

    # The medium findings.
    shard = os.path.join(inp.shards, "shard_000000.bin")
    corpus_with_tok = inp.path("r3/corpus_with_tokenizer")
    inp.write("r3/corpus_with_tokenizer/a.txt", b"some text to train on " * 100)
    inp.write("r3/corpus_with_tokenizer/tokenizer.json", b'{"version": "1.0", "model": {"type": "BPE"}}')
    nan_meta = dict(metadata)
    nan_meta.pop("lathe", None)
    nan_tensors = [(n, d, sh, struct.pack("<f", float("nan")) + r[4:]) if n == "transformer.ln_f.weight" else (n, d, sh, r)
                   for n, d, sh, r in tensors]
    nan_weights = inp.write("r3/nan.safetensors", safetensors_bytes(nan_tensors, nan_meta))
    train_quick = ["--steps", "1", "--eval-iters", "1", "--sample-tokens", "0", "--quiet"]
    cases += [
        Case("round3.train.data_is_one_shard", ["train", "--data", shard, "--out", inp.path("runs/r3_shard")] + train_quick,
             says="is a token shard"),
        Case("round3.train.corpus_holds_tokenizer_json",
             ["train", "--data", corpus_with_tok, "--out", inp.path("runs/r3_ctok")] + train_quick,
             says="was taken for a directory of token shards"),
        Case("round3.bench.peak_tflops_tiny", ["bench", "--config", inp.tiny, "--steps", "1", "--warmup", "0",
                                               "--peak-tflops", "1e-300"], says="--peak-tflops"),
        Case("round3.convert.nan_weights", ["convert", nan_weights, out_file("nan.safetensors")], says="not finite"),
        Case("round3.train.weight_decay_1e300",
             ["train", "--data", inp.corpus, "--config", inp.tiny, "--steps", "3", "--warmup", "0", "--weight-decay",
              "1e300", "--out", inp.path("runs/r3_wd")] + train_quick[2:], says="lower --weight-decay"),
    ]
    # A ref train case whose optimizer step is not a step count; state named as the case names it.
    f32 = lambda v: struct.pack("<f", v)
    for label, value in {"nan": float("nan"), "negative": -3.0, "fraction": 1.5}.items():
        path = edited_case(inp, "train_param_groups.case.safetensors", f"r3_step_{label}",
                           edit_tensors=add("optimizer_state.transformer.wpe.weight.step", "F32", [], f32(value)))
        cases.append(Case(f"round3.ref.optimizer_step_{label}", ["ref", path, out_file("step.safetensors")],
                          says='"optimizer_state.transformer.wpe.weight.step": adamw: state'))
    path = edited_case(inp, "train_muon.case.safetensors", "r3_muon_ns_2_64",
                       edit_spec=lambda spec: spec["optimizer"].update(ns_steps=2**64))
    cases.append(Case("round3.ref.muon_ns_steps_2_64", ["ref", path, out_file("muon.safetensors")],
                      says="got 1.8446744073709552e+19"))
    # Hugging Face configs with null fields, and a tensor in two shards of an index.
    with open(os.path.join(hf_dir, "config.json")) as f:
        hf_config = json.load(f)
    hf_meta, hf_tensors = read_safetensors(os.path.join(hf_dir, "model.safetensors"))
    for field in ("activation_function", "layer_norm_epsilon", "tie_word_embeddings"):
        d = inp.path(f"r3/hf_null_{field}")
        inp.write(f"r3/hf_null_{field}/config.json", json.dumps(dict(hf_config, **{field: None})).encode())
        shutil.copy(os.path.join(hf_dir, "model.safetensors"), os.path.join(d, "model.safetensors"))
        cases.append(Case(f"round3.convert.hf_null_{field}", ["convert", d, out_file(f"null_{field}.safetensors")],
                          says=field))
    two = inp.path("r3/hf_two_shards")
    inp.write("r3/hf_two_shards/config.json", json.dumps(hf_config).encode())
    inp.write("r3/hf_two_shards/model-1.safetensors", safetensors_bytes(hf_tensors, hf_meta))
    inp.write("r3/hf_two_shards/model-2.safetensors", safetensors_bytes(hf_tensors[:1], hf_meta))
    weight_map = {t[0]: "model-1.safetensors" for t in hf_tensors}
    weight_map["other"] = "model-2.safetensors"
    inp.write("r3/hf_two_shards/model.safetensors.index.json", json.dumps({"weight_map": weight_map}).encode())
    cases.append(Case("round3.convert.hf_tensor_in_two_shards", ["convert", two, out_file("two.safetensors")],
                      says="is in two shards"))
    return cases


# ---------------------------------------------------------------------------------------------
# lathe eval (issue 40)


def eval_cases(inp):
    cases = []
    ev = ["eval", "--checkpoint", inp.weights]
    good = inp.write("eval/good.jsonl", b'{"context": "the quick", "choices": ["brown", "nworb"], "answer": 0}\n')
    long_items = inp.write("eval/long.jsonl", b'{"context": "' + b"x" * 40 + b'", "choices": ["a", "b"], "answer": 0}\n')
    all_bad = inp.write("eval/all_bad.jsonl", b'{"context": "a", "choices": ["b"], "answer": 0}\n[1]\n{"ctx": 3}\n')
    for label, path in [("missing", inp.bad["missing"]), ("directory", inp.bad["directory"]), ("fifo", inp.bad["fifo"]),
                        ("empty", inp.bad["empty"]), ("garbage", inp.bad["garbage"]), ("all_bad", all_bad)]:
        cases.append(Case(f"eval.mc.{label}", ev + ["--mc", path]))
    cases += [
        Case("eval.mc.too_long_for_the_model", ev + ["--mc", long_items], says="no item fits the model"),
        Case("eval.nothing_to_do", ev, says="give --mc FILE"),
        Case("eval.out_without_mc", ev + ["--text", inp.corpus, "--out", inp.path("out/items.jsonl")], says="--out"),
        Case("eval.out_exists", ev + ["--mc", good, "--out", inp.corpus], says="exists; give --overwrite"),
        Case("eval.text.empty", ev + ["--text", inp.bad["empty"]], says="at least two are needed"),
        Case("eval.text.fifo", ev + ["--text", inp.bad["fifo"]]),
        Case("eval.checkpoint.garbage", ["eval", "--checkpoint", inp.bad["garbage"], "--mc", good]),
    ]
    for label, value in numeric_values("int").items():
        name = f"eval.batch.{label}"
        cases.append(Case(name, ev + ["--mc", good, "--batch", value], says=None if name in EXPECTED_OK else "--batch"))
    return cases


# ---------------------------------------------------------------------------------------------
# lathe convert --to gguf (issue 40)


def gguf_cases(inp):
    def trained(label, **config):
        c = tiny_config()
        c.update(config)
        run = inp.path(f"gguf/{label}")
        subprocess.run([inp.lathe, "train", "--data", inp.corpus, "--config", inp.write_json(f"gguf/{label}.json", c),
                        "--steps", "1", "--batch", "2", "--eval-iters", "1", "--sample-tokens", "0", "--quiet",
                        "--out", run], check=True, stdout=subprocess.DEVNULL, timeout=120)
        return os.path.join(run, "model.safetensors")
    softcap = trained("softcap", n_embd=32, n_head=2, bias=False, rope=True, norm="rms_norm", norm_weight=False,
                      activation="squared_relu", qk_norm=True, tie_embeddings=False, logit_softcap=30.0)
    relu2_qk = trained("relu2_qk", n_embd=32, n_head=2, bias=False, rope=True, norm="rms_norm",
                       activation="squared_relu", qk_norm=True)
    rope_ln = trained("rope_ln", n_embd=32, n_head=2, bias=False, rope=True)
    narrow = trained("narrow", n_embd=48, n_head=2)
    out = lambda name: inp.path(f"out/{name}.gguf")
    gguf = inp.path("out/made.gguf")
    subprocess.run([inp.lathe, "convert", inp.weights, gguf, "--to", "gguf"], check=True, stdout=subprocess.DEVNULL,
                   timeout=60)
    return [
        Case("gguf.softcap", ["convert", softcap, out("softcap"), "--to", "gguf"], says="logit_softcap"),
        Case("gguf.relu2_with_qk_norm", ["convert", relu2_qk, out("relu2_qk"), "--to", "gguf"], says="qk_norm"),
        Case("gguf.rope_with_layer_norm", ["convert", rope_ln, out("rope_ln"), "--to", "gguf"], says="layer_norm"),
        Case("gguf.q8_0_narrow", ["convert", narrow, out("narrow"), "--to", "gguf", "--dtype", "q8_0"],
             says="cannot be Q8_0"),
        Case("gguf.dtype_unknown", ["convert", inp.weights, out("x"), "--to", "gguf", "--dtype", "q4_0"], says="--dtype"),
        Case("gguf.dtype_without_gguf", ["convert", inp.weights, inp.path("out/x.safetensors"), "--dtype", "f16"],
             says="--dtype"),
        Case("gguf.name_without_to", ["convert", inp.weights, out("y")], says="--to gguf"),
        Case("gguf.exists", ["convert", inp.weights, gguf, "--to", "gguf"], says="exists; give --overwrite"),
        Case("gguf.read_as_weights", ["sample", "--checkpoint", gguf], says="does not read"),
        Case("gguf.hf_without_tokenizer", ["convert", inp.path("r3/hf_model"), out("hf"), "--to", "gguf"],
             says="--tokenizer"),
    ]


# ---------------------------------------------------------------------------------------------
# lathe train --sft and lathe chat (issue 40)


def chat_cases(inp):
    lathe_train = lambda *a: subprocess.run([inp.lathe, "train", *a, "--batch", "2", "--eval-iters", "1",
                                             "--sample-tokens", "0", "--quiet"],
                                            check=True, stdout=subprocess.DEVNULL, timeout=120)
    good = inp.write("chat/good.jsonl", b"".join(
        b'{"messages": [{"role": "user", "content": "%d"}, {"role": "assistant", "content": "%d"}]}\n' % (i, i)
        for i in range(10)))  # 6 tokens each: the tiny model's block_size is 8
    other = inp.write("chat/other.jsonl", b"".join(
        b'{"messages": [{"role": "user", "content": "%d"}, {"role": "assistant", "content": "x%d"}]}\n' % (i, i)
        for i in range(10)))
    sft_run = inp.path("chat/sft_run")
    lathe_train("--init-from", inp.weights, "--sft", good, "--steps", "2", "--ckpt-interval", "1", "--out", sft_run)
    tuned = os.path.join(sft_run, "model.safetensors")
    first_ckpt = os.path.join(sft_run, "ckpt-00000001.safetensors")
    meta, tensors = read_safetensors(tuned)

    def tuned_with(label, template):
        m = dict(meta)
        if template is None:
            m.pop("chat_template")
        else:
            m["chat_template"] = template
        return inp.write(f"chat/{label}.safetensors", safetensors_bytes(tensors, m))

    recorded = json.loads(meta["chat_template"])
    shifted = dict(recorded, tokens={k: v + 1 for k, v in recorded["tokens"].items()})
    # The template's record on weights whose vocabulary has no room for the chat tokens.
    base_meta, base_tensors = read_safetensors(inp.weights)
    small_vocab = inp.write("chat/small_vocab.safetensors",
                            safetensors_bytes(base_tensors, dict(base_meta, chat_template=meta["chat_template"])))
    files = {
        "not_a_conversation": b"hello\n[1, 2]\n{\"messages\": 3}\n",
        "no_assistant": b'{"messages": [{"role": "user", "content": "hi"}]}\n',
        "system_not_first": b'{"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}, '
                            b'{"role": "assistant", "content": "c"}]}\n',
        "unknown_role": b'{"messages": [{"role": "bot", "content": "a"}]}\n',
        "content_not_text": b'{"messages": [{"role": "assistant", "content": ["a"]}]}\n',
        "duplicate_key": b'{"messages": [{"role": "assistant", "content": "a", "content": "b"}]}\n',
        "nested_100000": b"[" * 100000 + b"]" * 100000 + b"\n",
        "line_2mib": b'{"messages": [{"role": "assistant", "content": "' + b"x" * (2 << 20) + b'"}]}\n',
        "too_long_for_the_model": b'{"messages": [{"role": "assistant", "content": "' + b"x" * 200 + b'"}]}\n',
        "binary": bytes(range(256)) * 64,
    }
    says = {"not_a_conversation": "line 1", "no_assistant": "no assistant message", "system_not_first": "first",
            "unknown_role": "role must be", "content_not_text": "content must be a string", "duplicate_key": "twice",
            "too_long_for_the_model": "block_size"}
    cases = []
    sft = lambda path, out: ["train", "--init-from", inp.weights, "--sft", path, "--out", inp.path(f"runs/sft_{out}")]
    for label, blob in files.items():
        path = inp.write(f"chat/{label}.jsonl", blob)
        cases.append(Case(f"chat.sft.{label}", sft(path, label), says=says.get(label, "no conversation to train on")))
    for label in ("missing", "directory", "fifo", "empty", "garbage"):
        cases.append(Case(f"chat.sft.file_{label}", sft(inp.bad[label], label)))
    cases += [
        Case("chat.sft.without_init_from", ["train", "--sft", good, "--out", inp.path("runs/sft_noinit")],
             says="--init-from"),
        Case("chat.sft.with_data", sft(good, "with_data") + ["--data", inp.corpus], says="--sft"),
        Case("chat.sft.resume_not_conversations", ["train", "--resume", first_ckpt, "--sft", inp.corpus,
                                                   "--out", inp.path("runs/sft_resume_text")], says="--sft"),
        Case("chat.sft.resume_other_conversations", ["train", "--resume", first_ckpt, "--sft", other,
                                                     "--out", inp.path("runs/sft_resume_other")],
             says="the data windows would differ"),
        Case("chat.sft.resume_with_data", ["train", "--resume", first_ckpt, "--data", inp.corpus,
                                           "--out", inp.path("runs/sft_resume_data")], says="not --data"),
        Case("chat.sft.resume_pretraining_with_sft", ["train", "--resume", inp.checkpoint, "--sft", good,
                                                      "--out", inp.path("runs/sft_resume_pre")], says="--init-from"),
        Case("chat.not_fine_tuned", ["chat", "--checkpoint", inp.weights], says="not fine-tuned for chat"),
        Case("chat.template_garbage", ["chat", "--checkpoint", tuned_with("garbage", "{not json")], says="chat_template"),
        Case("chat.template_other_format", ["chat", "--checkpoint", tuned_with("other", json.dumps({"format": "chatml"}))],
             says="chat template"),
        Case("chat.template_version_2", ["chat", "--checkpoint", tuned_with("v2", json.dumps(dict(recorded, version=2)))],
             says="version"),
        Case("chat.template_other_ids", ["chat", "--checkpoint", tuned_with("ids", json.dumps(shifted))],
             says="not those of its tokenizer"),
        Case("chat.template_without_room", ["chat", "--checkpoint", small_vocab], says="does not hold the chat tokens"),
        Case("chat.checkpoint_missing", ["chat", "--checkpoint", inp.bad["missing"]]),
        Case("chat.checkpoint_garbage", ["chat", "--checkpoint", inp.bad["garbage"]]),
        Case("chat.max_tokens_zero", ["chat", "--checkpoint", tuned, "--max-tokens", "0"], says="--max-tokens"),
        Case("chat.top_p_two", ["chat", "--checkpoint", tuned, "--top-p", "2"], says="--top-p"),
        Case("chat.temperature_negative", ["chat", "--checkpoint", tuned, "--temperature", "-1"], says="temperature"),
        Case("chat.device_unknown", ["chat", "--checkpoint", tuned, "--device", "tpu"], says="tpu"),
        Case("chat.convert_gguf_of_other_ids", ["convert", tuned_with("ids_gguf", json.dumps(shifted)),
                                                inp.path("out/chat_ids.gguf"), "--to", "gguf"],
             says="not those of its tokenizer"),
    ]
    # What a user types is text of any bytes and length: a line longer than the model's context (its
    # last block_size tokens are the condition), invalid UTF-8 and NUL bytes, the commands alone.
    for label, blob in {"line_1mib": b"y" * (1 << 20) + b"\n", "invalid_utf8": b"\xff\xfe\x00\xc3(\n",
                        "commands": b"/reset\n/reset\n/quit\nignored\n", "no_newline": b"hi"}.items():
        stdin = inp.write(f"chat/stdin_{label}.txt", blob)
        cases.append(Case(f"chat.stdin.{label}", ["--checkpoint", tuned, "--max-tokens", "4", "--temperature", "0"],
                          prefix=["sh", "-c", 'exec "$0" chat "$@" < "' + stdin + '"']))
    return cases


def all_cases(inp):
    return (file_cases(inp) + flag_cases(inp) + usage_cases(inp) + config_cases(inp) + ref_cases(inp) +
            op_cases(inp) + tokenizer_cases(inp) + shard_directory_cases(inp) + named_fault_cases(inp) +
            convert_cases(inp) + muon_cases(inp) + round3_cases(inp) + eval_cases(inp) +
            gguf_cases(inp) + chat_cases(inp))


# ---------------------------------------------------------------------------------------------
# Judging


# Whether the program under test is built with AddressSanitizer (tools/test.sh's second suite): its
# shadow memory reserves terabytes of address space and its allocator keeps freed memory a while,
# so the memory bounds of the cases that state them (memory_mb, peak_rss_mb) are not applied.
SANITIZED = False


def is_sanitized(lathe):
    p = subprocess.run(["ldd", lathe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
    return b"libasan" in p.stdout


Run = collections.namedtuple("Run", "signal code out err peak_mb seconds")


def run(case, lathe, cwd, timeout, limit):
    """Runs the case's command: None when it is still running after `timeout` seconds (it is then
    killed), else how it ended, with its output and its own peak resident memory (wait4's)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        p = subprocess.Popen(case.prefix + [case.program or lathe] + case.args, cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=out_file if case.verdict else subprocess.DEVNULL, stderr=err_file,
                             preexec_fn=limit)
        poll = 0.002
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                p.kill()
                os.wait4(p.pid, 0)
                p.returncode = -9  # reaped here: keep Popen from waiting again
                return None
            time.sleep(poll)
            poll = min(poll * 2, 0.05)
        p.returncode = 0  # reaped here: keep Popen from waiting again
        out_file.seek(0)
        err_file.seek(0)
        return Run(os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0,
                   os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                   out_file.read().decode(errors="replace"), err_file.read().decode(errors="replace"),
                   usage.ru_maxrss / 1024, time.monotonic() - start)


def judge(case, lathe, cwd, timeout):
    """(verdict, detail): verdict "ok", or what went wrong."""
    # A pending case known to hang (a model of a billion layers being built) must not hold the
    # driver, nor grow for long.
    if case.timeout:
        timeout = case.timeout * (3 if SANITIZED else 1)
    timeout = min(timeout, 10.0) if case.name in PENDING else timeout
    limit = None
    if case.memory_mb and not SANITIZED:
        limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (case.memory_mb << 20, case.memory_mb << 20))
    r = run(case, lathe, cwd, timeout, limit)
    if r is None:
        return "hang", f"still running after {timeout} s"
    err = r.err
    if r.signal:
        return "crash", f"killed by signal {r.signal}; stderr: {err[-300:]!r}"
    if case.verdict:
        if r.code != 1 or err or case.says not in r.out:
            return "bad verdict", f"exit {r.code}, stderr {err[:200]!r}, want {case.says!r} in: {r.out[:600]!r}"
        return "ok", f"exit 1: {case.says}"
    if case.name in EXPECTED_OK or case.peak_rss_mb:
        if r.code != 0:
            return "refused", f"exit {r.code}: {err.strip()[:300]}"
        # Under AddressSanitizer the shadow memory counts too.
        if case.peak_rss_mb and r.peak_mb > case.peak_rss_mb and not SANITIZED:
            return "over its memory", f"peak resident {r.peak_mb:.0f} MB, bound {case.peak_rss_mb} MB"
        return "ok", f"{r.seconds:.1f} s, peak resident {r.peak_mb:.0f} MB"
    if r.code == 0:
        return "silent acceptance", "exit 0"
    if r.code not in (1, 2):
        return "bad exit code", f"exit {r.code}; stderr: {err[-300:]!r}"
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith("lathe: "):
        return "bad message", f"exit {r.code}; stderr ({len(lines)} lines): {err[:300]!r}"
    if case.says is not None and case.says not in lines[0]:
        return "message misses the fault", f"want {case.says!r} in: {lines[0][:300]}"
    return "ok", f"exit {r.code}: {lines[0][:200]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lathe", required=True, help="the lathe program (build/examples/lathe)")
    ap.add_argument("--jobs", type=int, default=max(2, os.cpu_count() or 2))
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds before a run counts as a hang")
    ap.add_argument("--verbose", action="store_true", help="print every case, not only failures")
    ap.add_argument("--shard", default="1/1", metavar="I/N",
                    help="run only the I-th of N interleaved parts of the cases (ctest runs N in parallel)")
    args = ap.parse_args()
    lathe = os.path.abspath(args.lathe)
    global SANITIZED
    SANITIZED = is_sanitized(lathe)
    if SANITIZED:
        args.timeout *= 3  # AddressSanitizer's build runs a few times slower
    root = tempfile.mkdtemp(prefix="lathe_bad_inputs_")
    started = time.monotonic()
    try:
        inp = Inputs(root, lathe)
        cases = all_cases(inp)
        names = [c.name for c in cases]
        assert len(set(names)) == len(names), "duplicate case names"
        for listed in (PENDING | EXPECTED_OK) - set(names):
            print(f"bad_inputs: listed case {listed} does not exist", file=sys.stderr)
            return 1
        shard, shards = (int(x) for x in args.shard.split("/"))
        if not 1 <= shard <= shards:
            print(f"bad_inputs: --shard {args.shard}: I must be from 1 to N", file=sys.stderr)
            return 2
        cases = cases[shard - 1::shards]
        def timed(case):
            start = time.monotonic()
            verdict = judge(case, lathe, root, args.timeout)
            return case, verdict, time.monotonic() - start
        setup_seconds = time.monotonic() - started
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            timed_results = list(pool.map(timed, cases))
        results = [(case, verdict) for case, verdict, _ in timed_results]
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", root], stderr=subprocess.DEVNULL)  # the unreadable directory
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
    # The slowest runs, so that a case that grows slow (this driver has a ctest timeout) is seen.
    slowest = sorted(timed_results, key=lambda r: -r[2])[:5]
    print(f"bad_inputs: inputs built in {setup_seconds:.1f} s; slowest cases: "
          + ", ".join(f"{case.name} {seconds:.1f} s" for case, _, seconds in slowest))
    if inp.nobody_skip:
        print(f"bad_inputs: the unreadable-directory cases are skipped: {inp.nobody_skip}")
    print(f"bad_inputs: {len(cases)} cases, {len(failures)} failed, {len(EXPECTED_OK)} expected-ok, "
          f"{len(pending_open)} pending, {len(pending_fixed)} pending already fixed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
