"""Golden cases of the mixed-precision policy: PyTorch computes lathe's bf16 and fp16 answers by
applying the policy table explicitly, op class by op class, to the reference GPT's weights.

    /usr/bin/python3 tests/golden/make_precision_goldens.py

The policy encoded is that of lathe commit f3947c1 (branch bf16, "Merge branch 'main' into bf16:
one dataset interface, the CMake package, the proofs"): nn/precision.h's table and the rules of
docs/design.md's "Mixed precision". POLICY below is that table, the one place to change when
lathe's policy changes; every cast of the model goes through it (`rounded(op_class, x)`).

The rule the model follows: a tensor of op class c holds values of dtype POLICY[c][precision];
an op computes in float64 from its inputs and rounds its result once to its class's dtype, and
the gradient of a tensor is rounded to that tensor's dtype (`Rounded`). Beside that:
  - a Linear reads its weight and bias rounded to the matmul dtype (the f32 masters' copies) and
    adds the bias to the exact sum before the one rounding; its weight and bias gradients are the
    exact sums of the 16-bit products, not rounded (`MasterCopy`);
  - c_fc's GELU is applied to the unrounded sum and rounded as an activation; its backward takes
    the derivative at the sum rounded to the matmul dtype (`GeluOfSum`), as lathe keeps it;
  - LayerNorm reads the f32 residual stream and writes the layer_norm dtype; attention reads q, k,
    v in the matmul dtype, computes scores and softmax in the softmax dtype and rounds its output
    to the matmul dtype; the residual add widens the branch; the logits are the matmul's output
    cast to the loss dtype, and the classifier computes in float64 from them.

Writes, next to this script, for each precision P in (bf16, fp16):
  gpt_P.case.safetensors, gpt_P.expected.safetensors      kind "gpt" with "precision": P: logits
      (in the loss class's dtype), loss, grad.<parameter>
  gpt_P.f32.safetensors                                   the same model under the table's f32
      column (every op rounded to f32): what a 16-bit path that quietly computed in f32 would
      give, which tests/test_precision_golden.cpp requires lathe's answer to lie far from
  train_P.case.safetensors, train_P.expected.safetensors  kind "train" with "precision": P: three
      steps of SGD with momentum, gradients clipped to norm 1, fp16 with PyTorch's GradScaler
      recipe (scale 1024 doubling after 2 good steps); losses, the weights after the last step,
      fp16's skipped steps and scaler state
  train_P.f32.safetensors                                 the f32 column's answer to train_P
"""
import copy
import importlib.util
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
GPT_TORCH = os.path.join(HERE, "..", "..", "tools", "torch_gpt_reference.py")
sys.path.insert(0, HERE)
import golden_safetensors  # noqa: E402

# lathe's policy table (nn/precision.h): op class -> the dtype its results hold, per precision.
POLICY = {
    "matmul":     {"f32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16},
    "activation": {"f32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16},
    "softmax":    {"f32": torch.float32, "bf16": torch.float32,  "fp16": torch.float32},
    "layer_norm": {"f32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16},
    "residual":   {"f32": torch.float32, "bf16": torch.float32,  "fp16": torch.float32},
    "embedding":  {"f32": torch.float32, "bf16": torch.float32,  "fp16": torch.float32},
    "loss":       {"f32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float32},
}


def round_to(x, dtype):
    """x (float64) rounded to `dtype`, held in float64. Through float32 first, as lathe's 16-bit
    results are f32 arithmetic rounded once."""
    return x.to(torch.float32).to(dtype).to(torch.float64)


class Rounded(torch.autograd.Function):
    """A result of an op, rounded to its dtype; its gradient, held in the same dtype, too."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = dtype
        return round_to(x, dtype)

    @staticmethod
    def backward(ctx, g):
        return round_to(g, ctx.dtype), None


class MasterCopy(torch.autograd.Function):
    """A parameter's copy in the products' dtype: the gradient goes to the f32 master unrounded."""

    @staticmethod
    def forward(ctx, p, dtype):
        return round_to(p, dtype)

    @staticmethod
    def backward(ctx, g):
        return g, None


class GeluOfSum(torch.autograd.Function):
    """GELU (tanh) of a product's exact sum; the backward's derivative is taken at the sum rounded
    to the product's dtype (what lathe keeps for it), and the gradient of the sum, a tensor of that
    dtype, is rounded to it."""

    @staticmethod
    def forward(ctx, s, dtype):
        ctx.dtype = dtype
        ctx.save_for_backward(round_to(s, dtype))
        return F.gelu(s, approximate="tanh")

    @staticmethod
    def backward(ctx, g):
        (pre,) = ctx.saved_tensors
        with torch.enable_grad():
            p = pre.detach().requires_grad_()
            (d,) = torch.autograd.grad(F.gelu(p, approximate="tanh"), p, g)
        return round_to(d, ctx.dtype), None


class PolicyGPT:
    """The reference GPT (tools/torch_gpt_reference.py; GPT-2's block: LayerNorm, GELU, tied head)
    computed under one column of POLICY, over float64 parameters."""

    def __init__(self, model, precision, n_head):
        self.m, self.precision, self.n_head = model, precision, n_head

    def dtype(self, op_class):
        return POLICY[op_class][self.precision]

    def rounded(self, op_class, x):
        return Rounded.apply(x, self.dtype(op_class))

    def linear(self, lin, x, gelu=False, weight=None):
        """x (already in the matmul dtype) @ W^T + b, the bias added before the one rounding."""
        dt = self.dtype("matmul")
        w = MasterCopy.apply(lin.weight if weight is None else weight, dt)
        s = x @ w.t()
        if lin.bias is not None:
            s = s + MasterCopy.apply(lin.bias, dt)
        if gelu:
            return self.rounded("activation", GeluOfSum.apply(s, dt))
        return self.rounded("matmul", s)

    def layer_norm(self, ln, x):
        return self.rounded("layer_norm", F.layer_norm(x, (x.shape[-1],), ln.weight, ln.bias, 1e-5))

    def attention(self, attn, x):
        B, T, C = x.shape
        hd = C // self.n_head
        qkv = self.linear(attn.c_attn, x)
        q, k, v = (t.view(B, T, self.n_head, hd).transpose(1, 2) for t in qkv.split(C, dim=2))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
        probs = self.rounded("softmax", scores.masked_fill(future, float("-inf")).softmax(dim=-1))
        y = self.rounded("matmul", probs @ v).transpose(1, 2).reshape(B, T, C)
        return self.linear(attn.c_proj, y)

    def mlp(self, mlp, x):
        return self.linear(mlp.c_proj, self.linear(mlp.c_fc, x, gelu=True))

    def forward(self, idx, targets):
        tr = self.m.transformer
        T = idx.shape[1]
        x = self.rounded("embedding", tr.wte.weight[idx]) + self.rounded("embedding", tr.wpe.weight[:T])
        x = self.rounded("residual", x)
        for block in tr.h:
            x = self.rounded("residual", x + self.attention(block.attn, self.layer_norm(block.ln_1, x)))
            x = self.rounded("residual", x + self.mlp(block.mlp, self.layer_norm(block.ln_2, x)))
        h = self.layer_norm(tr.ln_f, x)
        logits = self.rounded("loss", self.linear(self.m.lm_head, h))
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)
        return logits, loss


def load_reference():
    spec = importlib.util.spec_from_file_location("torch_gpt_reference", GPT_TORCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


V, BLOCK, L, H, C = 64, 16, 2, 2, 32
CONFIG = {"vocab_size": V, "block_size": BLOCK, "n_layer": L, "n_head": H, "n_embd": C, "bias": True}


def make_model(ref, seed):
    """The reference GPT's draws (as make_gpt_goldens.py), LayerNorm weights moved away from 1, in
    float64."""
    torch.manual_seed(seed)
    model = ref.GPT(V, BLOCK, L, H, C, bias=True)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.add_(0.1 * torch.randn_like(mod.weight))
    return model


def weights_of(model):
    return {n: p.detach().float().clone() for n, p in model.state_dict().items() if n != "lm_head.weight"}


def f64_model(model):
    """A float64 copy holding the float32 values the case file carries."""
    m = copy.deepcopy(model)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.float().double())
    return m.double()


def gpt_answer(model, precision, idx, targets):
    m = f64_model(model)
    logits, loss = PolicyGPT(m, precision, H).forward(idx, targets)
    loss.backward()
    out = {"logits": logits.to(POLICY["loss"][precision]), "loss": loss.float()}
    for n, p in m.named_parameters():
        out["grad." + n] = p.grad.float()
    return out


def gpt_case(ref, precision, seed):
    name = f"gpt_{precision}"
    model = make_model(ref, seed)
    B, T = 4, BLOCK
    idx = torch.randint(0, V, (B, T))
    targets = torch.randint(0, V, (B, T))
    case = weights_of(model)
    case["idx"], case["targets"] = idx, targets
    golden_safetensors.save(os.path.join(HERE, name + ".case.safetensors"), case,
                            {"case": {"kind": "gpt", "config": CONFIG, "precision": precision}})
    for column, suffix in ((precision, ".expected"), ("f32", ".f32")):
        out = gpt_answer(model, column, idx, targets)
        golden_safetensors.save(os.path.join(HERE, name + suffix + ".safetensors"), out)
        print(f"{name}{suffix}: loss={out['loss'].item():.6f}")


STEPS, LR, MOMENTUM, GRAD_CLIP = 3, 0.1, 0.9, 1.0
SCALER = {"init_scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2}


def train_answer(model, precision, idx, targets, scaled):
    """STEPS steps of the training loop (ref/train_case.cpp) under POLICY[*][precision], float32
    master weights (rounded to float32 after each update, as lathe keeps them); `scaled`: with
    GradScaler's recipe (a power-of-two scale, so the f32 column takes the same steps)."""
    m = f64_model(model)
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM)
    policy = PolicyGPT(m, precision, H)
    scale, tracker = SCALER["init_scale"], 0
    losses, skipped = [], []
    for t in range(STEPS):
        _, loss = policy.forward(idx[t], targets[t])
        losses.append(loss.item())
        (loss * scale if scaled else loss).backward()
        grads = [p.grad for p in m.parameters()]
        if scaled:
            for g in grads:
                g.div_(scale)
        finite = all(torch.isfinite(g).all() for g in grads)
        if finite:
            torch.nn.utils.clip_grad_norm_(m.parameters(), GRAD_CLIP)
            opt.step()
            with torch.no_grad():
                for p in m.parameters():
                    p.copy_(p.float().double())
                for state in opt.state.values():
                    state["momentum_buffer"].copy_(state["momentum_buffer"].float().double())
        opt.zero_grad(set_to_none=True)
        skipped.append(0 if finite else 1)
        if scaled:  # GradScaler.update
            if not finite:
                scale, tracker = scale * SCALER["backoff_factor"], 0
            else:
                tracker += 1
                if tracker == SCALER["growth_interval"]:
                    scale, tracker = scale * SCALER["growth_factor"], 0
    out = {"losses": torch.tensor(losses, dtype=torch.float32)}
    out.update({n: p.detach().float() for n, p in m.state_dict().items() if n != "lm_head.weight"})
    if scaled:
        out["skipped"] = torch.tensor(skipped, dtype=torch.int32)
        out["scaler.scale"] = torch.tensor(scale, dtype=torch.float32)
        out["scaler.growth_tracker"] = torch.tensor(tracker, dtype=torch.int32)
    return out


def train_case(ref, precision, seed):
    name = f"train_{precision}"
    model = make_model(ref, seed)
    B, T = 4, BLOCK
    idx = [torch.randint(0, V, (B, T)) for _ in range(STEPS)]
    targets = [torch.randint(0, V, (B, T)) for _ in range(STEPS)]
    case = weights_of(model)
    for t in range(STEPS):
        case[f"idx.{t}"], case[f"targets.{t}"] = idx[t], targets[t]
    doc = {"kind": "train", "config": CONFIG, "precision": precision, "steps": STEPS, "grad_clip": GRAD_CLIP,
           "optimizer": {"name": "sgd", "lr": LR, "momentum": MOMENTUM},
           "param_groups": [{"params": [n for n, _ in model.named_parameters()]}]}
    if precision == "fp16":
        doc["scaler"] = SCALER
    golden_safetensors.save(os.path.join(HERE, name + ".case.safetensors"), case, {"case": doc})
    for column, suffix in ((precision, ".expected"), ("f32", ".f32")):
        out = train_answer(model, column, idx, targets, scaled=precision == "fp16")
        golden_safetensors.save(os.path.join(HERE, name + suffix + ".safetensors"), out)
        print(f"{name}{suffix}: losses={[round(v, 6) for v in out['losses'].tolist()]}")


def main():
    ref = load_reference()
    gpt_case(ref, "bf16", seed=3100)
    gpt_case(ref, "fp16", seed=3200)
    train_case(ref, "bf16", seed=3300)
    train_case(ref, "fp16", seed=3400)


if __name__ == "__main__":
    main()
