"""PyTorch loads what lathe writes: a weights file or a training checkpoint from `lathe train`
goes into the nanoGPT-style reference model of tools/torch_gpt_reference.py with a strict
load_state_dict, and its logits match `lathe sample`'s model to f32 rounding.

  /usr/bin/python3 tools/torch_loads_lathe.py FILE [FILE...]

Reads safetensors with a minimal reader that follows the public format (the `safetensors`
package is not in Debian 12); a training checkpoint's optimizer state (optim.*, scaler.*) is
listed and left out of the model, as `safetensors.torch.load_file` + `load_state_dict` users do.
"""
import importlib.util, json, os, struct, sys
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}


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


def main():
    spec = importlib.util.spec_from_file_location("torch_gpt_reference", os.path.join(HERE, "torch_gpt_reference.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    for path in sys.argv[1:]:
        tensors, meta = load_file(path)
        doc = json.loads(meta.get("lathe", "{}"))
        cfg = doc["model"] if doc.get("kind") == "training_state" else json.loads(meta["config"])
        weights = {k: v for k, v in tensors.items() if not k.startswith(("optim.", "scaler."))}
        if "lm_head.weight" not in weights:  # a file that stores the tied weight once
            weights["lm_head.weight"] = weights["transformer.wte.weight"]
        model = ref.GPT(cfg["vocab_size"], cfg["block_size"], cfg["n_layer"], cfg["n_head"], cfg["n_embd"],
                        bias=cfg["bias"], ln_bias=cfg["bias"])
        model.load_state_dict(weights, strict=True)
        idx = torch.arange(min(16, cfg["block_size"])).remainder(cfg["vocab_size"]).view(1, -1)
        logits, _ = model(idx, idx)
        print(f"{path}: {doc.get('kind', 'weights')}, {len(weights)} weights loaded strictly, "
              f"{len(tensors) - len(weights) + ('lm_head.weight' not in tensors)} optimizer/scaler tensors; "
              f"logits[0, 0, :3] = {logits[0, 0, :3].tolist()}")


if __name__ == "__main__":
    main()
