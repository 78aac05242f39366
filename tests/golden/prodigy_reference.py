"""A Prodigy reference written from the algorithm (Mishchenko & Defazio, "Prodigy: An Expeditiously
Adaptive Parameter-Free Learner"), following the step of facebookresearch/prodigy (prodigyopt 1.0)
operation for operation, so that lathe's Prodigy can be checked against it without the package.

    step(params_by_group, grads_by_group)

Group options use the reference's names and defaults. Optimizer-wide values (betas, beta3, d_coef,
growth_rate, decouple, use_bias_correction) come from group 0; each group's lr must be the
largest lr or 0.
"""
import math
import torch

DEFAULTS = dict(lr=1.0, betas=(0.9, 0.999), beta3=None, eps=1e-8, weight_decay=0.0, decouple=True,
                use_bias_correction=False, safeguard_warmup=False, d0=1e-6, d_coef=1.0,
                growth_rate=float("inf"), slice_p=1)


class ProdigyReference:
    def __init__(self, groups, d0=DEFAULTS["d0"]):
        """groups: list of dicts with "params" (list of tensors, updated in place) and options;
        d0: the optimizer's own d0 (the constructor argument). As in prodigyopt, every group's d and
        d_max start at it, and a group's own d0 (which defaults to it) only enters the ratio d / d0."""
        self.groups = []
        for g in groups:
            full = dict(DEFAULTS, d0=d0)
            full.update({k: v for k, v in g.items() if k != "params"})
            full["params"] = g["params"]
            full.update(d=d0, d_max=d0, d_numerator=0.0, d_denom=0.0, d_hat=0.0, k=0)
            self.groups.append(full)
        self.state = {}  # id(param) -> dict

    @torch.no_grad()
    def step(self, grads):
        """grads: list (per group) of lists (per param) of tensors or None."""
        g0 = self.groups[0]
        beta1, beta2 = g0["betas"]
        beta3 = g0["beta3"] if g0["beta3"] is not None else math.sqrt(beta2)
        k = g0["k"]
        d, d_max, d_coef = g0["d"], g0["d_max"], g0["d_coef"]
        lr = max(g["lr"] for g in self.groups)
        if g0["use_bias_correction"]:
            bias_correction = ((1 - beta2 ** (k + 1)) ** 0.5) / (1 - beta1 ** (k + 1))
        else:
            bias_correction = 1
        dlr = d * lr * bias_correction
        growth_rate, decouple = g0["growth_rate"], g0["decouple"]
        d_numerator = g0["d_numerator"] * beta3
        d_denom = 0.0
        used = [[None] * len(g["params"]) for g in self.groups]

        for gi, group in enumerate(self.groups):
            decay, group_lr, d0 = group["weight_decay"], group["lr"], group["d0"]
            slice_p = group["slice_p"]
            if group_lr not in [lr, 0.0]:
                raise RuntimeError("different lrs")
            for j, p in enumerate(group["params"]):
                grad = grads[gi][j]
                if grad is None:
                    continue
                grad = grad.clone()
                if decay != 0 and not decouple:
                    grad.add_(p, alpha=decay)
                used[gi][j] = grad
                state = self.state.setdefault(id(p), {})
                if "exp_avg_sq" not in state:
                    state["step"] = 0
                    state["s"] = torch.zeros_like(p.flatten()[::slice_p])
                    if p.any():
                        state["p0"] = p.flatten()[::slice_p].clone()
                    else:
                        state["p0"] = torch.tensor(0, dtype=p.dtype)
                    if beta1 > 0:
                        state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                if group_lr > 0.0:
                    s, p0 = state["s"], state["p0"]
                    sliced_grad = grad.flatten()[::slice_p]
                    d_numerator += (d / d0) * dlr * torch.dot(sliced_grad, p0 - p.flatten()[::slice_p]).item()
                    if beta1 > 0:
                        state["exp_avg"].mul_(beta1).add_(grad, alpha=d * (1 - beta1))
                    state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=d * d * (1 - beta2))
                    if group["safeguard_warmup"]:
                        s.mul_(beta3).add_(sliced_grad, alpha=((d / d0) * d))
                    else:
                        s.mul_(beta3).add_(sliced_grad, alpha=((d / d0) * dlr))
                    d_denom += s.abs().sum().item()

        d_hat = d
        if d_denom == 0:
            return
        if lr > 0.0:
            d_hat = d_coef * d_numerator / d_denom
            if d == self.groups[-1]["d0"]:
                d = max(d, d_hat)
            d_max = max(d_max, d_hat)
            d = min(d_max, d * growth_rate)

        for gi, group in enumerate(self.groups):
            group.update(d_numerator=d_numerator, d_denom=d_denom, d=d, d_max=d_max, d_hat=d_hat)
            decay, eps = group["weight_decay"], group["eps"]
            for j, p in enumerate(group["params"]):
                grad = used[gi][j]
                if grad is None:
                    continue
                state = self.state[id(p)]
                state["step"] += 1
                denom = state["exp_avg_sq"].sqrt().add_(d * eps)
                if decay != 0 and decouple:
                    p.add_(p, alpha=-decay * dlr)
                if beta1 > 0:
                    p.addcdiv_(state["exp_avg"], denom, value=-dlr)
                else:
                    p.addcdiv_(grad, denom, value=-dlr * d)
            group["k"] = group["k"] + 1

    def group_scalars(self, gi):
        g = self.groups[gi]
        return {key: g[key] for key in ("d", "d0", "d_max", "d_numerator", "d_denom", "d_hat", "k")}
