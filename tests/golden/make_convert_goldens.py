"""Golden files for tests/test_convert.cpp: one small random GPT-2 written in Hugging Face's layout
and in llm.c's, and its logits for a fixed input.

    /usr/bin/python3 tests/golden/make_convert_goldens.py

The model is transformers' GPT2LMHeadModel when transformers is importable (the GPU machines have
it), saved by its own save_pretrained; otherwise (this machine, Debian's PyTorch 1.13 without
transformers) it is tools/torch_gpt_reference.py's nanoGPT model, and the directory is written by
the small safetensors writer of golden_safetensors.py in the layout save_pretrained uses. The
metadata "generator" of convert_logits.safetensors says which one made the files. Either way the
weights are the same draws (a generator seeded with 3030, in nanoGPT's names and nn.Linear's
layout), so the files differ only in how they were written.

Writes, next to this script:
  convert_hf/                 config.json + model.safetensors as save_pretrained writes them:
                              "transformer." names, Conv1D weights [in, out], no lm_head.weight
  convert_hf_legacy/          the early published files' layout: names without the prefix,
                              lm_head.weight present (equal to wte), the attention-mask buffers
                              h.<i>.attn.bias and h.<i>.attn.masked_bias, and a config.json that
                              leaves most fields to GPT2Config's defaults
  convert_llmc_v3.bin         llm.c's model file, version 3 (f32), V = 100 padded to Vp = 128
  convert_llmc_v5.bin         the same weights in bf16 (rounded to nearest even), version 5
  convert_logits.safetensors  idx [2, 16] (i64); logits [2, 16, 100] of the f32 weights and
                              logits_bf16 of the bf16-rounded ones, both computed in float64 and
                              stored as f32

Sizes: vocab 100, block 16, 2 layers, 2 heads, 16 wide (8,448 parameters), dropout 0.1 in the
config (it changes no logit in eval mode). Weights are drawn wider than GPT-2's initialisation
(N(0, 0.3), LayerNorm gains 1 + N(0, 0.1), biases N(0, 0.1)) so that the logits spread over a few
units and a transposed or misplaced tensor changes them.
"""
import importlib.util
import json
import os
import re
import shutil
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import golden_safetensors  # noqa: E402

V, BLOCK, L, H, C = 100, 16, 2, 2, 16
DROPOUT = 0.1
SEED = 3030
CONV1D = re.compile(r"transformer\.h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight")
LLMC_MAGIC, LLMC_F32, LLMC_BF16 = 20240326, 3, 5


def load_reference():
    path = os.path.join(HERE, "..", "..", "tools", "torch_gpt_reference.py")
    spec = importlib.util.spec_from_file_location("torch_gpt_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def random_weights():
    """nanoGPT's state_dict of the model (nn.Linear layout, lm_head left out: tied to wte)."""
    ref = load_reference()
    shapes = {n: p.shape for n, p in ref.GPT(V, BLOCK, L, H, C).state_dict().items() if n != "lm_head.weight"}
    gen = torch.Generator().manual_seed(SEED)
    out = {}
    for name, shape in shapes.items():
        noise = torch.randn(shape, generator=gen)
        if name.endswith("bias"):
            out[name] = 0.1 * noise
        elif len(shape) == 1:  # LayerNorm gains
            out[name] = 1 + 0.1 * noise
        else:
            out[name] = 0.3 * noise
    return out


def hf_config(**extra):
    return {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": DROPOUT,
            "embd_pdrop": DROPOUT, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": BLOCK, "n_embd": C,
            "n_head": H, "n_inner": None, "n_layer": L, "n_positions": BLOCK, "resid_pdrop": DROPOUT,
            "vocab_size": V, **extra}


def hf_tensors(weights, prefix=True):
    """The weights as GPT2LMHeadModel stores them: Conv1D weights transposed to [in, out]."""
    out = {}
    for name, t in weights.items():
        t = t.t().contiguous() if CONV1D.fullmatch(name) else t
        out[name if prefix else name[len("transformer."):]] = t
    return out


def write_dir(path, config, tensors):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    golden_safetensors.save(os.path.join(path, "model.safetensors"), tensors, {"format": "pt"})


def tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()  # numpy has no bf16


def llmc_bytes(weights, dtype):
    """llm.c's model file (its train_gpt2.py's write_model layout) of the weights."""
    Vp = (V + 127) // 128 * 128
    header = [0] * 256
    header[:8] = [LLMC_MAGIC, LLMC_F32 if dtype == torch.float32 else LLMC_BF16, BLOCK, V, L, H, C, Vp]
    wte = torch.cat([weights["transformer.wte.weight"], torch.zeros(Vp - V, C)])
    layer = lambda suffix: torch.stack([weights[f"transformer.h.{i}.{suffix}"] for i in range(L)])
    tensors = [wte, weights["transformer.wpe.weight"]] + [layer(s) for s in (
        "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
        "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")] + [
        weights["transformer.ln_f.weight"], weights["transformer.ln_f.bias"]]
    data = b"".join(tensor_bytes(t.to(dtype)) for t in tensors)
    return struct.pack("<256i", *header) + data


def transformers_model():
    """GPT2LMHeadModel and its config class, or None when transformers is not importable."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return None
    return GPT2Config, GPT2LMHeadModel


def hf_model(hf, weights):
    """transformers' GPT2LMHeadModel holding the weights."""
    GPT2Config, GPT2LMHeadModel = hf
    model = GPT2LMHeadModel(GPT2Config(**{k: v for k, v in hf_config().items() if k != "architectures"}))
    missing, unexpected = model.load_state_dict(
        {**hf_tensors(weights), "lm_head.weight": weights["transformer.wte.weight"]}, strict=False)
    # Only the mask buffers of older transformers may be left to the model.
    assert not unexpected and all(re.fullmatch(r"transformer\.h\.\d+\.attn\.(bias|masked_bias)", k) for k in missing), \
        (missing, unexpected)
    return model


def logits_of(weights, idx, hf):
    """The model's logits for idx, computed in float64."""
    if hf:
        model = hf_model(hf, weights).double().eval()
        with torch.no_grad():
            return model(idx).logits
    ref = load_reference()
    model = ref.GPT(V, BLOCK, L, H, C)
    model.load_state_dict({**weights, "lm_head.weight": weights["transformer.wte.weight"]})
    model = model.double().eval()
    with torch.no_grad():
        return model(idx)[0]


def main():
    hf = transformers_model()
    weights = random_weights()
    idx = torch.randint(0, V, (2, BLOCK), generator=torch.Generator().manual_seed(SEED + 1))

    target = os.path.join(HERE, "convert_hf")
    if hf:
        shutil.rmtree(target, ignore_errors=True)
        hf_model(hf, weights).save_pretrained(target, safe_serialization=True)
        generator = "transformers " + __import__("transformers").__version__
    else:
        write_dir(target, hf_config(scale_attn_weights=True, use_cache=True), hf_tensors(weights))
        generator = "tools/torch_gpt_reference.py (torch " + torch.__version__ + ")"

    # The early published layout: no prefix, the head stored, the mask buffers, a sparse config.
    legacy = hf_tensors(weights, prefix=False)
    legacy["lm_head.weight"] = weights["transformer.wte.weight"].clone()
    for i in range(L):
        legacy[f"h.{i}.attn.bias"] = torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK)
        legacy[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    write_dir(os.path.join(HERE, "convert_hf_legacy"),
              {"model_type": "gpt2", "vocab_size": V, "n_positions": BLOCK, "n_ctx": BLOCK, "n_embd": C,
               "n_layer": L, "n_head": H}, legacy)

    for name, dtype in (("convert_llmc_v3.bin", torch.float32), ("convert_llmc_v5.bin", torch.bfloat16)):
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(llmc_bytes(weights, dtype))

    rounded = {n: t.to(torch.bfloat16).float() for n, t in weights.items()}
    logits = logits_of(weights, idx, hf)
    logits_bf16 = logits_of(rounded, idx, hf)
    golden_safetensors.save(os.path.join(HERE, "convert_logits.safetensors"),
                            {"idx": idx, "logits": logits.float(), "logits_bf16": logits_bf16.float()},
                            {"generator": generator})
    print(f"convert goldens by {generator}: logits in [{logits.min():.3f}, {logits.max():.3f}], "
          f"bf16 rounding moves them by up to {(logits - logits_bf16).abs().max():.2e}")


if __name__ == "__main__":
    main()
