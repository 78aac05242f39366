"""The one golden format: a safetensors file, written (and read back) by the golden generators through
this module.

Tensors are written in insertion order (lathe's reader keeps file order, which is how a case's
inputs keep their positional order), in every dtype lathe reads, with string metadata for what is
not a tensor (e.g. dtype promotion tables, as JSON).
"""
import json
import struct

import torch

KINDS = {torch.float32: "F32", torch.float64: "F64", torch.bfloat16: "BF16", torch.float16: "F16",
         torch.int32: "I32", torch.int64: "I64", torch.bool: "BOOL", torch.uint8: "U8"}


def by_name(tensors):
    """`tensors` in the order of their names, for a file whose order carries no meaning."""
    return dict(sorted(tensors.items()))


def save(path, tensors, metadata=None):
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t  # numpy has no bf16
        data = raw.numpy().tobytes()
        header[name] = {"dtype": KINDS[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def load(path):
    """A safetensors file's tensors (in file order) and its metadata, as save writes them."""
    with open(path, "rb") as f:
        raw = f.read()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + size])
    metadata = header.pop("__metadata__", {})
    body = raw[8 + size:]
    dtypes = {v: k for k, v in KINDS.items()}
    tensors = {}
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        begin, end = info["data_offsets"]
        dtype = dtypes[info["dtype"]]
        read_as = torch.int16 if dtype in (torch.bfloat16, torch.float16) else dtype
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=read_as) if end > begin else torch.empty(0, dtype=read_as)
        tensors[name] = t.view(dtype).reshape(info["shape"]).clone()
    return tensors, metadata
