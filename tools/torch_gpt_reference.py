"""lathe's PyTorch reference model: a GPT-2-style decoder in plain PyTorch, written the way nanoGPT
writes it, with nanoGPT's parameter names, so that lathe's weights, checkpoints and reference cases
load into it by name. It is what the golden generators (tests/golden/make_*_goldens.py), the CPU
benchmark (tools/bench_cpu.sh), tools/torch_bench_device.py and tools/torch_loads_lathe.py compare
lathe against. Needs only PyTorch (Debian: `tools/deps.sh --torch`).

    python3 tools/torch_gpt_reference.py bench PRESET [THREADS] [STEPS]
        forward + backward + AdamW steps on random tokens on the CPU; prints one line with
        step_ms=... and tok_per_s=... (tools/bench_cpu.sh reads it)
    python3 tools/torch_gpt_reference.py train PRESET DATA STEPS LR MIN_LR WARMUP THREADS [EVAL_ITERS [SEED]]
        the training loop of `lathe train` on the bytes of DATA (a file, or a directory read in
        sorted path order; the last 10% is validation), then the mean validation loss over
        EVAL_ITERS (20) batches, in nats per byte. The model starts from nanoGPT's (and `lathe
        train`'s) initialisation, drawn from SEED (1337): N(0, 0.02) Linear and Embedding weights,
        N(0, 0.02 / sqrt(2 n_layer)) for the c_proj weights that end a residual branch, zero biases.

The model, in lathe's terms (nn/gpt.h):
  - token embedding `transformer.wte` and learned positions `transformer.wpe`;
  - n_layer pre-LayerNorm blocks `transformer.h.<i>`: x + attn(ln_1(x)), then x + mlp(ln_2(x));
    attention is one fused projection `attn.c_attn` to q, k, v, causal softmax(q k^T / sqrt(d)),
    then `attn.c_proj`; the MLP is `mlp.c_fc` (4x wider), tanh-approximated GELU, `mlp.c_proj`;
  - a final `transformer.ln_f`, and `lm_head` (no bias) sharing its weight with `wte`;
  - Linear weights in nn.Linear's (out, in) layout; no dropout;
  - the loss is the mean cross-entropy over the targets that are not -1 (nanoGPT's ignore_index).

Initialisation. The golden files under tests/golden were made with this initialisation and must be
reproducible bit for bit, so its order of random draws is part of the contract: modules are built
in the order above (each nn.Linear and nn.Embedding draws its PyTorch default initialisation when
built, lm_head included, before the tie), then every distinct parameter in named_parameters()
order that is 2-D or whose name ends in "bias" is redrawn from N(0, 0.02). LayerNorm biases are
therefore small random values, not zeros, and LayerNorm weights stay 1.

`bias=False` drops the Linear biases. LayerNorm keeps its bias unless `ln_bias=False` is passed
as well (lathe's GPT with bias=false has no LayerNorm biases either, as nanoGPT; the default keeps
the draws of the golden files). Any floating dtype works: `model.double()` is how the goldens get
float64 references.

The modern block's switches, lathe's GPTConfig fields under the same names (nn/gpt.h); off, the model
is the one above, with the same draws:
  rope=True (rope_base=10000.0): rotary embeddings on q and k in the rotate-half convention (Llama's
      rotate_half: out = (x1 cos - x2 sin, x2 cos + x1 sin) for the halves x1, x2 of a head vector,
      angle t * base^(-2i / head_size)); no `wpe`. The angles are computed in float64 and rounded to
      the model's dtype, as lathe does;
  norm="rms_norm": RMSNorm (x * rsqrt(mean(x^2) + 1e-5) * weight) for every LayerNorm;
      norm_weight=False drops the norms' weights (RMSNorm as modded-nanogpt);
  activation="squared_relu" (relu(x)^2) or "swiglu" (c_proj(silu(c_gate(x)) * c_fc(x)), hidden
      width 8 n_embd / 3 rounded up to a multiple of 64);
  qk_norm=True: RMSNorm (no weight) of each head's q and k, after the rotary embeddings;
  tie_embeddings=False: lm_head.weight a parameter of its own;
  logit_softcap=C > 0: logits = C * tanh(logits / C).
New modules are built after the ones they sit beside (c_gate after c_fc), so their draws follow.
"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# lathe's presets (nn/gpt_config.cpp) and the default batch `lathe bench` and `lathe train` use
# for each: name -> (vocab_size, block_size, n_layer, n_head, n_embd), batch.
PRESETS = {
    "tiny": ((256, 64, 2, 2, 64), 8),
    "small": ((256, 128, 4, 4, 128), 16),
    "char": ((256, 256, 6, 6, 384), 8),  # nanoGPT's shakespeare-char size, about 10.8M parameters
    "gpt2": ((50304, 1024, 12, 12, 768), 4),
    # nanoGPT's "I only have a MacBook" recipe: no biases anywhere (nanoGPT's bias=False)
    "nanogpt-cpu": ((256, 64, 4, 4, 128), 12, {"bias": False, "ln_bias": False}),
    # the block of nanochat and the modded-nanogpt speedrun at small's size (nn/gpt_config.cpp)
    "speedrun-small": ((256, 128, 4, 4, 128), 16, {
        "bias": False, "ln_bias": False, "rope": True, "norm": "rms_norm", "norm_weight": False,
        "activation": "squared_relu", "qk_norm": True, "tie_embeddings": False, "logit_softcap": 30.0}),
}


def mlp_hidden_size(n_embd, activation):
    """4 n_embd, or for SwiGLU 8 n_embd / 3 rounded up to a multiple of 64 (nn/block.h)."""
    if activation != "swiglu":
        return 4 * n_embd
    hidden = -(-8 * n_embd // 3)  # ceil(8 n_embd / 3)
    return -(-hidden // 64) * 64


def rms_norm(x, weight=None, eps=1e-5):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


class RMSNorm(nn.Module):
    """RMSNorm over the last dim, its weight (if any) named as nn.LayerNorm's."""

    def __init__(self, dim, weight=True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim)) if weight else None

    def forward(self, x):
        return rms_norm(x, self.weight)


def make_norm(n_embd, norm, norm_weight, ln_bias):
    if norm == "rms_norm":
        return RMSNorm(n_embd, weight=norm_weight)
    if norm != "layer_norm":
        raise ValueError(f"norm must be layer_norm or rms_norm, got {norm!r}")
    ln = nn.LayerNorm(n_embd, elementwise_affine=True)
    if not norm_weight:
        ln.weight = None
    if not ln_bias:
        ln.bias = None
    return ln


def rotary_tables(T, head_size, base, dtype, device):
    """cos and sin [T, head_size / 2] of positions 0 .. T-1, computed in float64."""
    inv_freq = base ** (-torch.arange(0, head_size, 2, dtype=torch.float64) / head_size)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos().to(dtype=dtype, device=device), angles.sin().to(dtype=dtype, device=device)


def apply_rotary(x, cos, sin):
    """x [B, H, T, D] turned in the rotate-half convention."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, bias, rope=False, rope_base=10000.0, qk_norm=False):
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_embd ({n_embd}) must be a multiple of n_head ({n_head})")
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.rope, self.rope_base, self.qk_norm = rope, rope_base, qk_norm

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.n_head

        def heads(t):  # [B, T, C] -> [B, H, T, hd]
            return t.view(B, T, self.n_head, hd).transpose(1, 2)

        q, k, v = (heads(t) for t in self.c_attn(x).split(C, dim=2))
        if self.rope:
            cos, sin = rotary_tables(T, hd, self.rope_base, x.dtype, x.device)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if self.qk_norm:
            q, k = rms_norm(q), rms_norm(k)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
        probs = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        y = (probs @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd, bias, activation="gelu_tanh"):
        super().__init__()
        if activation not in ("gelu_tanh", "squared_relu", "swiglu"):
            raise ValueError(f"activation must be gelu_tanh, squared_relu or swiglu, got {activation!r}")
        hidden = mlp_hidden_size(n_embd, activation)
        self.activation = activation
        self.c_fc = nn.Linear(n_embd, hidden, bias=bias)
        if activation == "swiglu":
            self.c_gate = nn.Linear(n_embd, hidden, bias=bias)
        self.c_proj = nn.Linear(hidden, n_embd, bias=bias)

    def forward(self, x):
        h = self.c_fc(x)
        if self.activation == "squared_relu":
            h = F.relu(h).square()
        elif self.activation == "swiglu":
            h = F.silu(self.c_gate(x)) * h
        else:
            h = F.gelu(h, approximate="tanh")
        return self.c_proj(h)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, bias, ln_bias, norm="layer_norm", norm_weight=True,
                 activation="gelu_tanh", rope=False, rope_base=10000.0, qk_norm=False):
        super().__init__()
        # Registration order (ln_1, attn, ln_2, mlp) fixes both the parameter order and the draws.
        self.ln_1 = make_norm(n_embd, norm, norm_weight, ln_bias)
        self.attn = CausalSelfAttention(n_embd, n_head, bias, rope, rope_base, qk_norm)
        self.ln_2 = make_norm(n_embd, norm, norm_weight, ln_bias)
        self.mlp = MLP(n_embd, bias, activation)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, bias=True, ln_bias=True, rope=False,
                 rope_base=10000.0, norm="layer_norm", norm_weight=True, activation="gelu_tanh", qk_norm=False,
                 tie_embeddings=True, logit_softcap=0.0):
        super().__init__()
        self.block_size = block_size
        self.logit_softcap = logit_softcap
        modules = {"wte": nn.Embedding(vocab_size, n_embd)}
        if not rope:
            modules["wpe"] = nn.Embedding(block_size, n_embd)
        modules["h"] = nn.ModuleList(Block(n_embd, n_head, bias, ln_bias, norm, norm_weight, activation, rope,
                                           rope_base, qk_norm) for _ in range(n_layer))
        modules["ln_f"] = make_norm(n_embd, norm, norm_weight, ln_bias)
        self.transformer = nn.ModuleDict(modules)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        if tie_embeddings:
            self.lm_head.weight = self.transformer.wte.weight  # tied: one tensor under two names
        with torch.no_grad():
            for name, p in self.named_parameters():  # distinct tensors only: lm_head is skipped
                if p.dim() == 2 or name.endswith("bias"):
                    p.normal_(mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        """idx, targets: [B, T] token ids with T <= block_size. Returns (logits [B, T, V], mean
        cross-entropy or None)."""
        T = idx.shape[1]
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.block_size}")
        x = self.transformer.wte(idx)
        if "wpe" in self.transformer:
            x = x + self.transformer.wpe(torch.arange(T, device=idx.device))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if self.logit_softcap > 0:
            logits = self.logit_softcap * torch.tanh(logits / self.logit_softcap)
        if targets is None:
            return logits, None
        # nanoGPT's ignore_index: a target of -1 is a position the loss leaves out.
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1).long(), ignore_index=-1)
        return logits, loss


class Llama(nn.Module):
    """LlamaForCausalLM's forward, written from transformers' documented modelling (modeling_llama.py:
    LlamaRMSNorm, LlamaRotaryEmbedding, rotate_half, LlamaAttention without grouped queries,
    LlamaMLP) -- a PyTorch transcription, not transformers itself -- under its state_dict names
    (model.embed_tokens, model.layers.<i>.self_attn.{q,k,v,o}_proj, model.layers.<i>.mlp.{gate,up,
    down}_proj, model.layers.<i>.{input,post_attention}_layernorm, model.norm, lm_head), built from a
    config.json's fields. forward(idx) returns the logits [B, T, vocab_size]."""

    def __init__(self, config):
        super().__init__()
        c = config
        self.C, self.H, self.eps, self.theta = c["hidden_size"], c["num_attention_heads"], c["rms_norm_eps"], c["rope_theta"]
        self.hd = self.C // self.H
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(c["vocab_size"], self.C)
        self.model.layers = nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layer = nn.Module()
            layer.self_attn = nn.Module()
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(layer.self_attn, name, nn.Linear(self.C, self.C, bias=False))
            layer.mlp = nn.Module()
            layer.mlp.gate_proj = nn.Linear(self.C, c["intermediate_size"], bias=False)
            layer.mlp.up_proj = nn.Linear(self.C, c["intermediate_size"], bias=False)
            layer.mlp.down_proj = nn.Linear(c["intermediate_size"], self.C, bias=False)
            layer.input_layernorm = nn.Module()
            layer.input_layernorm.weight = nn.Parameter(torch.ones(self.C))
            layer.post_attention_layernorm = nn.Module()
            layer.post_attention_layernorm.weight = nn.Parameter(torch.ones(self.C))
            self.model.layers.append(layer)
        self.model.norm = nn.Module()
        self.model.norm.weight = nn.Parameter(torch.ones(self.C))
        self.lm_head = nn.Linear(self.C, c["vocab_size"], bias=False)
        if c.get("tie_word_embeddings", False):
            self.lm_head.weight = self.model.embed_tokens.weight

    def rms(self, x, weight):  # LlamaRMSNorm: in float32, x * rsqrt(mean(x^2) + eps), times the weight
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def forward(self, idx):
        B, T = idx.shape
        x = self.model.embed_tokens(idx)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
        freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)

        def rotate_half(t):
            return torch.cat((-t[..., self.hd // 2:], t[..., :self.hd // 2]), dim=-1)

        for layer in self.model.layers:
            h = self.rms(x, layer.input_layernorm.weight)
            a = layer.self_attn
            q, k, v = (p(h).view(B, T, self.H, self.hd).transpose(1, 2) for p in (a.q_proj, a.k_proj, a.v_proj))
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            # Spelled out, as the GPT's attention above: Debian 12's PyTorch 1.13 has no
            # scaled_dot_product_attention.
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
            y = scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v
            x = x + a.o_proj(y.transpose(1, 2).reshape(B, T, self.C))
            h = self.rms(x, layer.post_attention_layernorm.weight)
            x = x + layer.mlp.down_proj(F.silu(layer.mlp.gate_proj(h)) * layer.mlp.up_proj(h))
        return self.lm_head(self.rms(x, self.model.norm.weight))


def from_preset(name, **kwargs):
    """The model of a preset and its benchmark batch."""
    if name not in PRESETS:
        raise SystemExit(f"unknown preset {name!r} (presets: {', '.join(PRESETS)})")
    dims, batch, *options = PRESETS[name]
    return GPT(*dims, **{**(options[0] if options else {}), **kwargs}), batch


def bench(preset, threads=1, steps=10):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, B = from_preset(preset)
    V, T = model.transformer.wte.num_embeddings, model.block_size
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))

    def step():
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step(), step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = (time.perf_counter() - t0) / steps
    n = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__} config={preset} params={n} threads={threads} "
          f"step_ms={dt * 1e3:.1f} tok_per_s={B * T / dt:.0f}")


def read_corpus(path):
    if os.path.isfile(path):
        paths = [path]
    else:
        paths = sorted(os.path.join(d, f) for d, _, files in os.walk(path) for f in files)
    data = bytearray()
    for p in paths:
        if os.path.isfile(p):
            with open(p, "rb") as f:
                data += f.read()
    return torch.frombuffer(data, dtype=torch.uint8).long()


def init_as_nanogpt(model):
    """nanoGPT's initialisation, which `lathe train` follows (nn/gpt.cpp): the default one above
    stays as it is for the golden files."""
    n_layer = len(model.transformer.h)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                p.normal_(mean=0.0, std=std)
            elif name.endswith("bias"):
                p.zero_()


def train(preset, data, steps, lr, min_lr, warmup, threads, eval_iters=20, seed=1337):
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    tokens = read_corpus(data)
    split = int(0.9 * len(tokens))
    train_part, val_part = tokens[:split], tokens[split:]
    model, B = from_preset(preset)
    init_as_nanogpt(model)
    T = model.block_size

    def batch(src, gen):
        starts = torch.randint(len(src) - T - 1, (B,), generator=gen).tolist()
        return (torch.stack([src[s:s + T] for s in starts]),
                torch.stack([src[s + 1:s + T + 1] for s in starts]))

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.99))

    def lr_at(it):  # linear warm-up, then cosine down to min_lr
        if it < warmup:
            return lr * (it + 1) / warmup
        progress = min(1.0, (it - warmup) / max(1, steps - warmup))
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)

    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    for it in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(it)
        x, y = batch(train_part, gen)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    seconds = time.perf_counter() - t0
    model.eval()
    val_gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        val = sum(model(*batch(val_part, val_gen))[1].item() for _ in range(eval_iters)) / eval_iters
    print(f"torch {torch.__version__} config={preset} steps={steps} threads={threads} "
          f"train_s={seconds:.1f} val_loss={val:.4f}")


def main(argv):
    if len(argv) >= 2 and argv[0] == "bench" and len(argv) <= 4:
        bench(argv[1], int(argv[2]) if len(argv) > 2 else 1, int(argv[3]) if len(argv) > 3 else 10)
    elif len(argv) in (8, 9, 10) and argv[0] == "train":
        train(argv[1], argv[2], int(argv[3]), float(argv[4]), float(argv[5]), int(argv[6]), int(argv[7]),
              *(int(a) for a in argv[8:]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
