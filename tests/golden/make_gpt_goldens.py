"""Golden cases for tests/test_gpt.cpp: one forward and backward pass of the PyTorch reference GPT
(tools/torch_gpt_reference.py), written in the `lathe ref` case format of kind "gpt"
(docs/reference-cases.md).

    /usr/bin/python3 tests/golden/make_gpt_goldens.py

Writes, next to this script, for each case NAME:
  NAME.case.safetensors       config (metadata "case"), every parameter, idx, targets
  NAME.expected.safetensors   logits, loss, grad.<parameter name>

The reference is computed in float64 from the float32 inputs, so the expected values are as exact
as float32 can hold them. Cases:
  gpt_tiny    bias=True, idx/targets i64, lm_head.weight present (so grad.lm_head.weight expected)
  gpt_nobias  bias=False (no Linear biases and, as nanoGPT, no LayerNorm biases), i32 ids,
              T == block_size, lm_head.weight absent
  gpt_ignore  targets of -1, which the loss ignores (nanoGPT's ignore_index): about a quarter of
              them scattered, and one row of the batch all -1; the loss is the mean over the rest
and the modern block's switches (nn/gpt.h), each alone (V 48, C 16, 2 layers of 2 heads), then together:
  gpt_rope, gpt_rms_norm, gpt_layer_norm_noweight, gpt_squared_relu, gpt_swiglu, gpt_qk_norm,
  gpt_untied (lm_head.weight a parameter of its own), gpt_softcap (a cap of 0.2, so that tanh bends
  the small logits of a fresh model), gpt_speedrun (the speedrun-small preset's switches: RoPE,
  RMSNorm without weights, ReLU^2, QK-norm, untied head, no biases, logits capped at 30)
The safetensors package is not installed here; a minimal writer follows the public format.
"""
import importlib.util, json, os
import torch

import golden_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
GPT_TORCH = os.path.join(HERE, "..", "..", "tools", "torch_gpt_reference.py")



def load_reference():
    spec = importlib.util.spec_from_file_location("torch_gpt_reference", GPT_TORCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_case(ref, name, V, block, L, H, C, bias, B, T, id_dtype, with_lm_head, seed, ignore=False, **switches):
    torch.manual_seed(seed)
    model = ref.GPT(V, block, L, H, C, bias=bias, **switches)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (torch.nn.LayerNorm, ref.RMSNorm)):
                # Norm weights away from 1, so their gradients are tested with nontrivial values.
                if mod.weight is not None:
                    mod.weight.add_(0.1 * torch.randn_like(mod.weight))
                if not bias and isinstance(mod, torch.nn.LayerNorm):
                    mod.bias = None  # nanoGPT's LayerNorm(bias=False), dropped after the draws (see the reference)
    idx = torch.randint(0, V, (B, T))
    targets = torch.randint(0, V, (B, T))
    if ignore:
        targets[torch.rand(B, T) < 0.25] = -1
        targets[1] = -1

    config = {"vocab_size": V, "block_size": block, "n_layer": L, "n_head": H, "n_embd": C, "bias": bias, **switches}
    case = {n: p.detach().float().clone() for n, p in model.state_dict().items()}
    if not with_lm_head:
        del case["lm_head.weight"]
    case["idx"] = idx.to(id_dtype)
    case["targets"] = targets.to(id_dtype)
    golden_safetensors.save(os.path.join(HERE, name + ".case.safetensors"), golden_safetensors.by_name(case),
              {"case": json.dumps({"kind": "gpt", "config": config})})

    model = model.double()
    logits, loss = model(idx, targets)
    loss.backward()
    expected = {"logits": logits.float(), "loss": loss.float()}
    for n, p in model.named_parameters():
        expected["grad." + n] = p.grad.float()
    if with_lm_head and switches.get("tie_embeddings", True):  # tied: the same combined gradient under both names
        expected["grad.lm_head.weight"] = model.transformer.wte.weight.grad.float()
    golden_safetensors.save(os.path.join(HERE, name + ".expected.safetensors"), golden_safetensors.by_name(expected))
    print(f"{name}: params={sum(p.numel() for p in model.parameters())} loss={loss.item():.6f}")


def main():
    ref = load_reference()
    make_case(ref, "gpt_tiny", V=64, block=16, L=2, H=2, C=32, bias=True, B=2, T=8,
              id_dtype=torch.int64, with_lm_head=True, seed=1234)
    make_case(ref, "gpt_nobias", V=48, block=8, L=2, H=4, C=16, bias=False, B=3, T=8,
              id_dtype=torch.int32, with_lm_head=False, seed=4321)
    make_case(ref, "gpt_ignore", V=64, block=16, L=2, H=2, C=32, bias=True, B=3, T=8,
              id_dtype=torch.int64, with_lm_head=False, seed=2468, ignore=True)
    modern = {
        "gpt_rope": {"rope": True},
        "gpt_rms_norm": {"norm": "rms_norm"},
        "gpt_layer_norm_noweight": {"norm_weight": False},
        "gpt_squared_relu": {"activation": "squared_relu"},
        "gpt_swiglu": {"activation": "swiglu"},
        "gpt_qk_norm": {"qk_norm": True},
        "gpt_untied": {"tie_embeddings": False},
        "gpt_softcap": {"logit_softcap": 0.2},
    }
    for i, (name, switches) in enumerate(modern.items()):
        make_case(ref, name, V=48, block=16, L=2, H=2, C=16, bias=True, B=2, T=8, id_dtype=torch.int64,
                  with_lm_head=not switches.get("tie_embeddings", True), seed=2000 + i, **switches)
    speedrun = dict(ref.PRESETS["speedrun-small"][2])
    del speedrun["bias"], speedrun["ln_bias"]
    make_case(ref, "gpt_speedrun", V=48, block=16, L=2, H=2, C=16, bias=False, B=2, T=16, id_dtype=torch.int64,
              with_lm_head=True, seed=2100, **speedrun)


if __name__ == "__main__":
    main()
