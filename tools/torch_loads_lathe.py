"""PyTorch loads what lathe writes: a weights file or a training checkpoint from `lathe train`, a
Hugging Face GPT-2 directory or an llm.c model file from `lathe convert`, goes into the
nanoGPT-style reference model of tools/torch_gpt_reference.py with a strict load_state_dict, and
with --lathe, its logits match lathe's own for the same file.

  /usr/bin/python3 tools/torch_loads_lathe.py [--lathe LATHE] [--expect LOGITS [--logits NAME]] PATH [PATH...]

A Hugging Face directory is read from its config.json and model.safetensors (Conv1D weights
transposed back to nn.Linear's layout); where transformers is importable it is also loaded with
GPT2LMHeadModel.from_pretrained, whose logits must agree with the reference model's. An llm.c file
is read from its header and tensors (version 3 f32, version 5 bf16), the padding rows of wte
dropped. --expect LOGITS (a safetensors file with "idx" and "logits", e.g.
tests/golden/convert_logits.safetensors; --logits NAME picks another tensor of it) compares every
model's logits for idx, computed in float64, with the file's at relative 1e-4 and absolute 1e-5;
the exit status is 1 when one differs. --lathe LATHE (the `lathe` program) has lathe compute the
logits of each file itself: a weights file or checkpoint as it stands, a Hugging Face directory or
llm.c file as `lathe convert` reads it into a weights file; those weights and idx go into a
reference case of kind "gpt" (docs/reference-cases.md) that `lathe ref` runs in f32, and
PyTorch's float64 logits must match lathe's at relative 1e-4 and absolute 1e-5 (f32 rounding of
a small model), or the exit status is 1. Exit 77 (a skip for ctest) where PyTorch is not
importable.

Reads safetensors with a minimal reader that follows the public format (the `safetensors`
package is not in Debian 12); a training checkpoint's optimizer state (optim.*, scaler.*) is
listed and left out of the model, as `safetensors.torch.load_file` + `load_state_dict` users do.
"""
import argparse, importlib.util, json, os, re, struct, subprocess, sys, tempfile

try:
    import torch
except ImportError:
    print("torch_loads_lathe: PyTorch is not importable here; skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "golden"))
import golden_safetensors  # noqa: E402  the one safetensors writer of the scripts

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}
CONV1D = re.compile(r"transformer\.h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight")
LLMC_LAYER = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
              "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
              "mlp.c_proj.bias"]


def load_file(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    buf = data[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(buf[b:end]), dtype=DTYPES[e["dtype"]]) if end > b else torch.empty(0, dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"])
    return out, meta


def lathe_logits(lathe, path, kind, idx, tmp):
    """lathe's logits for idx from the model in `path`: the weights lathe reads from it (through
    `lathe convert` where it is not lathe's own file) in a "gpt" case run by `lathe ref`."""
    def run(*args):
        p = subprocess.run([lathe, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise SystemExit(f"lathe {' '.join(args)} failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
    if kind in ("hf", "llmc"):
        converted = os.path.join(tmp, "converted.safetensors")
        run("convert", path, converted, "--overwrite")
        path = converted
    _, cfg, weights, _ = read_lathe(path)
    case = dict(weights, idx=idx.long(), targets=idx.long())
    config = dict(cfg)  # every field the file records, the modern block's switches included
    case_path, out_path = os.path.join(tmp, "case.safetensors"), os.path.join(tmp, "out.safetensors")
    golden_safetensors.save(case_path, golden_safetensors.by_name(case), {"case": json.dumps({"kind": "gpt", "config": config})})
    run("ref", case_path, out_path)
    return load_file(out_path)[0]["logits"].double()


def load_reference():
    spec = importlib.util.spec_from_file_location("torch_gpt_reference", os.path.join(HERE, "torch_gpt_reference.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    return ref


def read_lathe(path):
    """(kind, config, weights, other tensor count) of a weights file or checkpoint."""
    tensors, meta = load_file(path)
    doc = json.loads(meta.get("lathe", "{}"))
    cfg = doc["model"] if doc.get("kind") == "training_state" else json.loads(meta["config"])
    weights = {k: v for k, v in tensors.items() if not k.startswith(("optim.", "scaler."))}
    return doc.get("kind", "weights"), cfg, weights, len(tensors) - len(weights)


def read_hf(path):
    """A Hugging Face GPT-2 directory in the reference model's names and layout."""
    with open(os.path.join(path, "config.json")) as f:
        hf = json.load(f)
    cfg = {"vocab_size": hf["vocab_size"], "block_size": hf["n_positions"], "n_layer": hf["n_layer"],
           "n_head": hf["n_head"], "n_embd": hf["n_embd"], "bias": True}
    tensors, meta = load_file(os.path.join(path, "model.safetensors"))
    assert meta.get("format") == "pt", f"{path}: model.safetensors lacks the metadata transformers needs"
    weights = {}
    for name, t in tensors.items():
        if re.fullmatch(r"(transformer\.)?h\.\d+\.attn\.(bias|masked_bias)", name):
            continue  # the causal-mask buffers of older files
        name = name if name.startswith("transformer.") or name == "lm_head.weight" else "transformer." + name
        weights[name] = t.t().contiguous() if CONV1D.fullmatch(name) else t
    return "hf", cfg, weights, 0


def read_llmc(path):
    """An llm.c model file in the reference model's names."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, maxT, V, L, NH, C, Vp = struct.unpack("<8i", data[:32])
    assert magic == 20240326 and version in (3, 5), f"{path}: not an llm.c model file (magic {magic}, version {version})"
    dtype = torch.float32 if version == 3 else torch.bfloat16
    raw = torch.frombuffer(bytearray(data[1024:]), dtype=torch.int32 if version == 3 else torch.int16).view(dtype)
    shapes = [[Vp, C], [maxT, C], [L, C], [L, C], [L, 3 * C, C], [L, 3 * C], [L, C, C], [L, C], [L, C], [L, C],
              [L, 4 * C, C], [L, 4 * C], [L, C, 4 * C], [L, C], [C], [C]]
    parts, offset = [], 0
    for shape in shapes:
        n = 1
        for d in shape:
            n *= d
        parts.append(raw[offset:offset + n].reshape(shape).float())
        offset += n
    assert offset == raw.numel(), f"{path}: {raw.numel() - offset} elements after the last tensor"
    weights = {"transformer.wte.weight": parts[0][:V], "transformer.wpe.weight": parts[1],
               "transformer.ln_f.weight": parts[14], "transformer.ln_f.bias": parts[15]}
    for i, suffix in enumerate(LLMC_LAYER):
        for layer in range(L):
            weights[f"transformer.h.{layer}.{suffix}"] = parts[2 + i][layer]
    cfg = {"vocab_size": V, "block_size": maxT, "n_layer": L, "n_head": NH, "n_embd": C, "bias": True}
    return "llmc", cfg, weights, 0


def reference_model(ref, cfg, weights):
    weights = dict(weights)
    if "lm_head.weight" not in weights:  # a file that stores the tied weight once
        weights["lm_head.weight"] = weights["transformer.wte.weight"]
    model = ref.GPT(cfg["vocab_size"], cfg["block_size"], cfg["n_layer"], cfg["n_head"], cfg["n_embd"],
                    bias=cfg["bias"], ln_bias=cfg["bias"])
    model.load_state_dict(weights, strict=True)
    return model.double().eval()


def transformers_logits(path, idx):
    """GPT2LMHeadModel.from_pretrained(path)'s logits, or None without transformers."""
    try:
        from transformers import GPT2LMHeadModel
    except ImportError:
        return None
    model = GPT2LMHeadModel.from_pretrained(path).double().eval()
    with torch.no_grad():
        return model(idx).logits


def close(got, want, rtol=1e-4, atol=1e-5):
    return bool(((got - want).abs() <= atol + rtol * want.abs()).all())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--expect", help="a safetensors file with idx and logits to compare every model's logits with")
    ap.add_argument("--logits", default="logits", help="the expected logits' name in --expect (default: logits)")
    ap.add_argument("--lathe", help="the lathe program: compare every model's logits with lathe's own")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    ref = load_reference()
    expected = load_file(args.expect)[0] if args.expect else None
    failed = False
    for path in args.paths:
        reader = read_hf if os.path.isdir(path) else read_llmc if path.endswith(".bin") else read_lathe
        kind, cfg, weights, others = reader(path)
        model = reference_model(ref, cfg, weights)
        idx = expected["idx"] if expected else torch.arange(min(16, cfg["block_size"])).remainder(cfg["vocab_size"]).view(1, -1)
        with torch.no_grad():
            logits = model(idx)[0]
        line = (f"{path}: {kind}, {len(weights)} weights loaded strictly, {others} optimizer/scaler tensors; "
                f"logits[0, 0, :3] = {logits[0, 0, :3].tolist()}")
        if kind == "hf":
            hf_logits = transformers_logits(path, idx)
            if hf_logits is not None:
                ok = close(hf_logits, logits)
                failed |= not ok
                line += f"; transformers' GPT2LMHeadModel {'agrees' if ok else 'DIFFERS'}"
        if expected is not None:
            ok = close(logits, expected[args.logits].double())
            failed |= not ok
            line += f"; logits {'match' if ok else 'DIFFER FROM'} {args.expect}"
        if args.lathe:
            with tempfile.TemporaryDirectory() as tmp:
                theirs = lathe_logits(args.lathe, path, kind, idx, tmp)
            ok = theirs.shape == logits.shape and close(logits, theirs)
            failed |= not ok
            worst = (logits - theirs).abs().max().item() if theirs.shape == logits.shape else float("nan")
            line += f"; lathe's logits {'match' if ok else 'DIFFER'} (largest difference {worst:.2e})"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
