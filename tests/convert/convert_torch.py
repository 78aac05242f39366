"""What `lathe convert` writes, read by PyTorch; and `lathe sample` on a Hugging Face GPT-2 with
GPT-2's tokenizer against PyTorch's greedy continuation. Needs PyTorch (exit 77, a skip, without
it); uses transformers too where it is importable (the GPU machines have it).

    tests/convert/convert_torch.py --lathe build/examples/lathe exports|sample_gpt2

exports      lathe converts the golden llm.c file (tests/golden/make_convert_goldens.py) to a
             Hugging Face directory, to lathe's weights file and from that to llm.c's v3 file and
             another directory; tools/torch_loads_lathe.py loads each into the PyTorch reference
             model (and the directories into transformers' GPT2LMHeadModel where it exists), whose
             logits must match the golden ones at relative 1e-4.
loads_lathe  tools/torch_loads_lathe.py --lathe: a weights file and a training checkpoint from a
             few steps of `lathe train`, the golden llm.c files (v3 f32, v5 bf16) and Hugging Face
             directory; PyTorch's logits for each must match lathe's own (`lathe ref`) at relative
             1e-4.
sample_gpt2  a random GPT-2 of GPT-2's vocabulary (50,257 ids), written as a Hugging Face
             directory; `lathe sample --tokenizer gpt2 --temperature 0` must print the prompt and
             the continuation that PyTorch's model draws greedily from the prompt's GPT-2 ids,
             decoded with GPT-2's encoder.json (by transformers' GPT2TokenizerFast where it exists).
             The prompt's ids are lathe's (`lathe tokenizer encode`, itself checked against
             tiktoken's by tests/test_tokenizer.cpp), and transformers' when it is there.
llama        a model of Llama's switches (RoPE, RMSNorm, SwiGLU, no biases, untied) trained a few
             steps by lathe and written by `lathe convert --to hf` as a Llama directory; its logits
             in tools/torch_gpt_reference.py's Llama (a transcription of transformers' modelling) and,
             where transformers is importable, in LlamaForCausalLM.from_pretrained, must match lathe's
             own (`lathe ref`) at relative 1e-4; and `lathe convert` reads the directory back bitwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("convert_torch: PyTorch is not importable here; skipped")
    sys.exit(77)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(REPO, "tests", "golden")
sys.path.insert(0, os.path.join(REPO, "tools"))
sys.path.insert(0, GOLDEN)
import torch_loads_lathe  # noqa: E402
import golden_safetensors  # noqa: E402


def lathe(binary, *args):
    p = subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"lathe {' '.join(args)} failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
    return p.stdout


def exports(binary, tmp):
    v3 = os.path.join(GOLDEN, "convert_llmc_v3.bin")
    hf, weights, llmc, hf2 = (os.path.join(tmp, n) for n in ("hf", "model.safetensors", "model.bin", "hf2"))
    lathe(binary, "convert", v3, hf, "--to", "hf")
    lathe(binary, "convert", os.path.join(GOLDEN, "convert_hf"), weights)
    lathe(binary, "convert", weights, llmc, "--to", "llmc")
    lathe(binary, "convert", weights, hf2, "--to", "hf")
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", "torch_loads_lathe.py"), "--expect",
                           os.path.join(GOLDEN, "convert_logits.safetensors"), hf, weights, llmc, hf2]).returncode


def loads_lathe(binary, tmp):
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 200)
    run = os.path.join(tmp, "run")
    lathe(binary, "train", "--data", corpus, "--config", "tiny", "--steps", "3", "--batch", "2",
          "--ckpt-interval", "3", "--eval-interval", "0", "--sample-tokens", "0", "--out", run)
    paths = [os.path.join(run, "model.safetensors"), os.path.join(run, "ckpt-%08d.safetensors" % 3),
             os.path.join(GOLDEN, "convert_llmc_v3.bin"), os.path.join(GOLDEN, "convert_llmc_v5.bin"),
             os.path.join(GOLDEN, "convert_hf")]
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", "torch_loads_lathe.py"), "--lathe", binary,
                           *paths]).returncode


def byte_decoder():
    """GPT-2's token alphabet back to bytes (the inverse of its bytes_to_unicode)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in printable:
            out[chr(b)] = b
        else:
            out[chr(256 + extra)] = b
            extra += 1
    return out


def sample_gpt2(binary, tmp):
    vocab_dir = os.environ.get("LATHE_GPT2_DIR") or os.path.join(REPO, ".deps", "gpt2")
    encoder_json, vocab_bpe = os.path.join(vocab_dir, "encoder.json"), os.path.join(vocab_dir, "vocab.bpe")
    if not (os.path.exists(encoder_json) and os.path.exists(vocab_bpe)):
        raise SystemExit(f"GPT-2's vocabulary is missing from {vocab_dir}: run tools/fetch_gpt2_vocab.sh")
    V, block, L, H, C = 50257, 64, 2, 2, 32
    gen = torch.Generator().manual_seed(4242)
    ref = torch_loads_lathe.load_reference()
    shapes = {n: p.shape for n, p in ref.GPT(V, block, L, H, C).state_dict().items() if n != "lm_head.weight"}
    # Wide draws, so that the greedy choice is never a near tie that f32 rounding could flip.
    weights = {n: (1 + 0.1 * torch.randn(s, generator=gen)) if len(s) == 1 and not n.endswith("bias")
               else 0.5 * torch.randn(s, generator=gen) for n, s in shapes.items()}
    hf = os.path.join(tmp, "gpt2")
    os.makedirs(hf)
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V, "n_positions": block,
              "n_embd": C, "n_layer": L, "n_head": H, "activation_function": "gelu_new"}
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(config, f)
    golden_safetensors.save(os.path.join(hf, "model.safetensors"),
                            {n: t.t().contiguous() if torch_loads_lathe.CONV1D.fullmatch(n) else t
                             for n, t in weights.items()}, {"format": "pt"})

    prompt, steps = "The lathe turns the wood, and", 12
    prompt_file = os.path.join(tmp, "prompt.txt")
    with open(prompt_file, "w") as f:
        f.write(prompt)
    ids = json.loads(lathe(binary, "tokenizer", "encode", "--tokenizer", "gpt2", prompt_file))
    try:
        from transformers import GPT2LMHeadModel, GPT2TokenizerFast
        tokenizer = GPT2TokenizerFast(vocab_file=encoder_json, merges_file=vocab_bpe)
        assert tokenizer.encode(prompt) == ids, (tokenizer.encode(prompt), ids)
        model = GPT2LMHeadModel.from_pretrained(hf)
        forward = lambda x: model(x).logits
        decode = tokenizer.decode
        by = "transformers"
    except ImportError:
        model = torch_loads_lathe.reference_model(ref, {**config, "block_size": block, "bias": True},
                                                  torch_loads_lathe.read_hf(hf)[2])
        forward = lambda x: model(x)[0]
        with open(encoder_json) as f:
            decoder = {i: t for t, i in json.load(f).items()}
        alphabet = byte_decoder()
        decode = lambda xs: bytes(alphabet[c] for x in xs for c in decoder[x]).decode("utf-8", errors="replace")
        by = "the reference model"
    model = model.double().eval()
    x = torch.tensor([ids])
    with torch.no_grad():
        for _ in range(steps):
            top2 = forward(x)[0, -1].topk(2).values
            assert top2[0] - top2[1] > 1e-3, f"a near tie ({top2.tolist()}): the test's weights do not decide"
            x = torch.cat([x, forward(x)[0, -1].argmax().view(1, 1)], dim=1)
    want = decode(x[0].tolist())
    got = lathe(binary, "sample", "--checkpoint", hf, "--tokenizer", "gpt2", "--prompt", prompt, "--temperature", "0",
                "--tokens", str(steps)).decode("utf-8", errors="replace")
    print(f"sample_gpt2 ({by}): {want!r}")
    if got != want + "\n":
        print(f"lathe sample printed {got!r}\nwanted {want + chr(10)!r}")
        return 1
    return 0


def llama(binary, tmp):
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 200)
    config = os.path.join(tmp, "llama.json")
    with open(config, "w") as f:
        json.dump({"vocab_size": 256, "block_size": 32, "n_layer": 2, "n_head": 4, "n_embd": 64, "bias": False,
                   "rope": True, "norm": "rms_norm", "activation": "swiglu", "tie_embeddings": False,
                   "rope_base": 500000.0}, f)
    run, hf, back = (os.path.join(tmp, n) for n in ("run", "hf", "back.safetensors"))
    lathe(binary, "train", "--data", corpus, "--config", config, "--steps", "5", "--batch", "2", "--eval-interval", "0",
          "--sample-tokens", "0", "--quiet", "--out", run)
    weights = os.path.join(run, "model.safetensors")
    lathe(binary, "convert", weights, hf, "--to", "hf")
    lathe(binary, "convert", hf, back)
    a, _ = torch_loads_lathe.load_file(weights)
    b, _ = torch_loads_lathe.load_file(back)
    if sorted(a) != sorted(b) or any(not torch.equal(a[k], b[k]) for k in a):
        print("llama: lathe -> Llama directory -> lathe is not bitwise")
        return 1
    ref = torch_loads_lathe.load_reference()
    with open(os.path.join(hf, "config.json")) as f:
        cfg = json.load(f)
    tensors, _ = torch_loads_lathe.load_file(os.path.join(hf, "model.safetensors"))
    model = ref.Llama(cfg)
    model.load_state_dict(tensors, strict=True)
    model = model.double().eval()
    idx = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]])
    with torch.no_grad():
        want = model(idx)
    got = torch_loads_lathe.lathe_logits(binary, weights, "lathe", idx, tmp)
    worst = ((got - want).abs() / want.abs().clamp_min(1e-3)).max().item()
    status = 0 if torch.allclose(got, want, rtol=1e-4, atol=1e-5) else 1
    print(f"llama: the reference Llama's logits against lathe's: max relative difference {worst:.3g}")
    try:
        from transformers import LlamaForCausalLM
    except ImportError:
        print("llama: transformers is not importable; LlamaForCausalLM not checked")
        return status
    hf_model = LlamaForCausalLM.from_pretrained(hf, torch_dtype=torch.float64).eval()
    with torch.no_grad():
        theirs = hf_model(idx).logits
    ok = torch.allclose(theirs, want, rtol=1e-6, atol=1e-8)
    print(f"llama: LlamaForCausalLM against the reference: {'equal' if ok else 'DIFFERENT'}")
    return status if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lathe", required=True)
    ap.add_argument("scenario", choices=["exports", "loads_lathe", "sample_gpt2", "llama"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lathe_convert_torch_") as tmp:
        run = {"exports": exports, "loads_lathe": loads_lathe, "sample_gpt2": sample_gpt2, "llama": llama}[args.scenario]
        return run(os.path.abspath(args.lathe), tmp)


if __name__ == "__main__":
    sys.exit(main())
