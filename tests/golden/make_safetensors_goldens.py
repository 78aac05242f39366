"""Golden files for tests/test_safetensors.cpp, written by PyTorch the way
safetensors.torch.save_file writes them (the safetensors package is not installed here, so this
script writes through golden_safetensors.py, the public format, in the reference writer's layout:
tensors sorted by dtype, widest first, then by name; compact JSON with __metadata__ first; header
padded with spaces to a multiple of 8 bytes).

    /usr/bin/python3 tests/golden/make_safetensors_goldens.py

Writes, next to this script:
  safetensors_torch_dtypes.safetensors   one tensor of every dtype lathe reads, edge values
  safetensors_torch_dtypes.json          the expected values, as Python numbers
  safetensors_nanogpt.safetensors        a tiny nanoGPT state_dict (lm_head.weight dropped: it is
                                         tied to transformer.wte.weight, and save_file refuses
                                         shared tensors)
  safetensors_nanogpt.json               name -> dtype, shape, sum, first values
"""
import json, math, os, sys
import torch

import golden_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))  # torch_gpt_reference.py

DTYPES = {  # torch dtype -> (safetensors name, rank of the reference writer's Dtype enum)
    torch.bool: ("BOOL", 0), torch.uint8: ("U8", 1), torch.float16: ("F16", 7),
    torch.bfloat16: ("BF16", 8), torch.int32: ("I32", 9), torch.float32: ("F32", 11),
    torch.float64: ("F64", 12), torch.int64: ("I64", 13),
}


def save_file(tensors, path, metadata=None):
    """The reference writer's order: by dtype, widest first, then by name."""
    order = sorted(tensors, key=lambda n: (-DTYPES[tensors[n].dtype][1], n))
    golden_safetensors.save(path, {n: tensors[n] for n in order}, metadata)


def values(t):
    return t.detach().to(torch.float64 if t.is_floating_point() else torch.int64).flatten().tolist()


def dtypes_case():
    tensors = {
        "f32": torch.tensor([[1.5, -2.25, 3.0], [0.1, 1e-30, -0.0]], dtype=torch.float32),
        "f64": torch.tensor([math.pi, -1e300, 2.5], dtype=torch.float64),
        "bf16": torch.tensor([1.0, -3.140625, 65280.0, 1e-3], dtype=torch.bfloat16),
        "f16": torch.tensor([0.5, -65504.0, 6e-8, 1.0009765625], dtype=torch.float16),
        "i32": torch.tensor([-2**31, 2**31 - 1, 7], dtype=torch.int32),
        "i64": torch.tensor([[-2**63, 2**63 - 1], [42, -1]], dtype=torch.int64),
        "mask": torch.tensor([True, False, True], dtype=torch.bool),
        "scalar": torch.tensor(7.25, dtype=torch.float32),
        "empty": torch.zeros(0, 3, dtype=torch.float32),
    }
    save_file(tensors, os.path.join(HERE, "safetensors_torch_dtypes.safetensors"), {"source": "torch"})
    expected = {n: {"shape": list(t.shape), "values": values(t)} for n, t in tensors.items()}
    with open(os.path.join(HERE, "safetensors_torch_dtypes.json"), "w") as f:
        json.dump(expected, f, indent=1)


def nanogpt_case():
    from torch_gpt_reference import GPT
    torch.manual_seed(0)
    model = GPT(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16)
    sd = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(sd, os.path.join(HERE, "safetensors_nanogpt.safetensors"))
    expected = {n: {"dtype": DTYPES[t.dtype][0], "shape": list(t.shape), "sum": t.double().sum().item(),
                    "first": values(t)[:4]} for n, t in sd.items()}
    with open(os.path.join(HERE, "safetensors_nanogpt.json"), "w") as f:
        json.dump(expected, f, indent=1)


if __name__ == "__main__":
    dtypes_case()
    nanogpt_case()
