"""torch.optim.Muon's step, transcribed for the torch of this machine (1.13), which has no Muon.

A TRANSCRIPTION, not PyTorch's code: it follows torch/optim/_muon.py of PyTorch 2.9 (Muon.step ->
_single_tensor_muon, _zeropower_via_newtonschulz with addmm, _adjust_lr) as read from PyTorch's
source, plus the unfused form that PyTorch's main branch offers as use_addmm=False. A machine with
PyTorch >= 2.9 (the GPU machines have 2.11) regenerates the goldens with the real torch.optim.Muon:
make_muon_goldens.py uses it whenever `torch.optim.Muon` imports.

The bf16 arithmetic is a GPU's, written out in f32: every product multiplies bf16 values with f32
accumulation and rounds its result to bf16 once (an addmm rounds alpha * A @ B + beta * C once),
and every elementwise bf16 op computes in f32 and rounds once. torch 1.13's own CPU bf16 products
cannot stand in for it: for small matrices they round partial sums to bf16 (a 4x3 @ 3x4 product
differs from f32-then-round in 5 of its 16 elements).
"""
import math

import torch

DEFAULTS = {"lr": 1e-3, "weight_decay": 0.1, "momentum": 0.95, "nesterov": True,
            "ns_coefficients": (3.4445, -4.775, 2.0315), "eps": 1e-7, "ns_steps": 5, "adjust_lr_fn": None,
            "use_addmm": True}


def bf16(x):
    """f32 values rounded to bf16 (round to nearest even)."""
    return x.float().bfloat16()


def mm(a, b):
    """a @ b of bf16 matrices as a GPU computes it: f32 accumulation, one rounding."""
    return bf16(torch.mm(a.float(), b.float()))


def addmm(c, a, b, beta, alpha=1.0):
    """torch.addmm(c, a, b, beta=beta, alpha=alpha) of bf16 tensors: one rounding of the sum."""
    return bf16(beta * c.float() + alpha * torch.mm(a.float(), b.float()))


def scaled(x, s):
    return bf16(s * x.float())


def added(x, y):
    return bf16(x.float() + y.float())


def zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps, eps, use_addmm=True):
    a, b, c = ns_coefficients
    x = grad.bfloat16()
    if grad.size(0) > grad.size(1):
        x = x.T
    # ortho_grad.div_(ortho_grad.norm().clamp(min=eps)): the norm of a bf16 tensor is bf16
    # (accumulated in f32), and so is its clamp.
    norm = bf16(x.float().norm())
    norm = bf16(torch.clamp(norm.float(), min=eps))
    x = bf16(x.float() / norm.float())
    for _ in range(ns_steps):
        gram = mm(x, x.T)
        if use_addmm:
            update = addmm(gram, gram, gram, beta=b, alpha=c)
            x = addmm(x, update, x, beta=a)
        else:
            # b * gram + c * gram @ gram: Python reads the second term as (c * gram) @ gram.
            update = added(scaled(gram, b), mm(scaled(gram, c), gram))
            x = added(scaled(x, a), mm(update, x))
    if grad.size(0) > grad.size(1):
        x = x.T
    return x


def adjust_lr(lr, adjust_lr_fn, shape):
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        raise ValueError(adjust_lr_fn)
    return lr * ratio


class MuonReference:
    """Muon over param groups (dicts with "params" and overrides of DEFAULTS); state keyed by
    parameter like torch.optim's: self.state[p]["momentum_buffer"]."""

    def __init__(self, groups, **defaults):
        self.param_groups = []
        for g in groups:
            group = dict(DEFAULTS)
            group.update(defaults)
            group.update(g)
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(f"Muon only supports 2D parameters, got {tuple(p.shape)}")
            self.param_groups.append(group)
        self.state = {}

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                state = self.state.setdefault(p, {})
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(grad)
                buf = state["momentum_buffer"]
                buf.lerp_(grad, 1 - momentum)
                update = grad.lerp(buf, momentum) if group["nesterov"] else buf
                update = zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"],
                                                    group["eps"], group["use_addmm"])
                adjusted_lr = adjust_lr(lr, group["adjust_lr_fn"], p.shape)
                p.mul_(1 - lr * group["weight_decay"])
                p.add_(update.to(p.dtype), alpha=-adjusted_lr)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None
