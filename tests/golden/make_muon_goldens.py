"""Golden cases of Muon for tests/test_muon.cpp, in the `lathe ref` case formats (docs/reference-cases.md):

  kind "optim": Muon on given gradients (optim_muon*.case / .expected, as make_optim_goldens.py
                writes them): parameters, and each one's momentum_buffer;
  kind "train": four steps of the training loop with Muon on the hidden matrices beside AdamW on
                the rest (train_muon.case / .expected), as `lathe train --optimizer muon` splits a GPT.

    /usr/bin/python3 tests/golden/make_muon_goldens.py

Muon comes from torch.optim.Muon when this torch has it (PyTorch >= 2.9; on a CUDA machine it runs
there, in a GPU's bf16 arithmetic), else from muon_reference.py, a transcription of PyTorch 2.9's
step for this machine's torch 1.13 (which has no Muon). The goldens in the repository were made by
the transcription; a GPU machine (PyTorch 2.11) can regenerate them with the real optimizer, and
lathe must match either within relative 1e-3 (its Newton-Schulz iteration runs in bf16).
"""
import inspect
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from golden_safetensors import by_name, save  # noqa: E402
from make_optim_goldens import STEPS, make_inputs, reference_model_module, write_case  # noqa: E402
from muon_reference import DEFAULTS, MuonReference  # noqa: E402

# Tall, wide and square matrices; parameter 4 gets its first gradient late, 5 never gets one.
SHAPES = [(4, 3), (3, 5), (6, 6), (2, 7), (5, 2), (3, 4)]

TorchMuon = getattr(torch.optim, "Muon", None)
DEVICE = "cuda" if TorchMuon is not None and torch.cuda.is_available() else "cpu"


def make_muon(groups, use_real=True):
    """(optimizer, where it came from): torch.optim.Muon when it can run these groups, else the
    transcription. Options are lathe's (and PyTorch 2.9's) defaults unless a group says otherwise."""
    if TorchMuon is not None and use_real:
        accepts_addmm = "use_addmm" in inspect.signature(TorchMuon.__init__).parameters
        real_groups = []
        for g in groups:
            g = dict(g)
            if accepts_addmm:
                g.setdefault("use_addmm", DEFAULTS["use_addmm"])  # its default there may differ
            elif not g.pop("use_addmm", True):
                break  # PyTorch 2.9 always fuses: this case needs the transcription
            real_groups.append(g)
        else:
            return TorchMuon(real_groups), "torch.optim.Muon " + torch.__version__ + " on " + DEVICE
    return MuonReference(groups), "muon_reference.py (transcription of PyTorch 2.9)"


def optim_case(name, groups, seed):
    params, grads = make_inputs(seed, shapes=SHAPES)
    work = [p.clone().to(DEVICE).requires_grad_(True) for p in params]
    tgroups = []
    for gr in groups:
        opts = {k: (tuple(v) if k == "ns_coefficients" else v) for k, v in gr.items() if k != "params"}
        tgroups.append(dict(params=[work[i] for i in gr["params"]], **opts))
    opt, source = make_muon(tgroups)
    for t in range(STEPS):
        for i, p in enumerate(work):
            p.grad = grads[(t, i)].clone().to(DEVICE) if (t, i) in grads else None
        opt.step()
    state = {i: {k: v.cpu() for k, v in opt.state[p].items()} for i, p in enumerate(work) if p in opt.state}
    write_case(name, "muon", groups, params, grads, [p.detach().cpu() for p in work], state,
               {"groups": [{} for _ in groups]})
    print(f"optim_{name}: {source}")


def split_for_muon(model):
    """train/muon_groups.h's split: the blocks' matrices; the other matrices; everything else."""
    hidden, matrices, others = [], [], []
    for n, p in model.named_parameters():
        if p.dim() == 2 and n.startswith("transformer.h."):
            hidden.append((n, p))
        elif p.dim() == 2:
            matrices.append((n, p))
        else:
            others.append((n, p))
    return hidden, matrices, others


def train_case():
    """Kind "train" with "muon": the reference GPT of tools/torch_gpt_reference.py in float64 from
    float32 inputs, Muon (PyTorch's defaults but ns_steps 2: lr 1e-3, weight decay 0.1) on the
    blocks' matrices, AdamW (lr 3e-3, betas (0.9, 0.95), weight decay 0.1 on wte / wpe, 0 on gains
    and biases) on the rest; clip 1.0; each step Muon, then AdamW. The optimizer state comes back
    under parameter names.

    Two Newton-Schulz steps, not five, on purpose: lathe's f32 gradients now and then round to the
    other bf16 neighbour of these f64 ones, and the iteration multiplies such a difference by up to
    a = 3.4445 per step (optim/muon.h); after five it moves most elements of an update by several
    percent, past the test's tolerance, after two it stays far inside it. The optim goldens pin
    the five-step iteration down exactly; this case checks the training loop around it."""
    ref = reference_model_module()
    V, block, L, H, C, B, T, steps = 64, 16, 2, 2, 32, 2, 8, 4
    torch.manual_seed(79)
    model = ref.GPT(V, block, L, H, C, bias=True)
    case = {n: p.detach().float().clone() for n, p in model.state_dict().items()}
    for t in range(steps):
        case[f"idx.{t}"] = torch.randint(0, V, (B, T))
        case[f"targets.{t}"] = torch.randint(0, V, (B, T))
    opt_spec = {"name": "muon", "ns_steps": 2, "adamw": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}}
    spec = {"kind": "train", "config": {"vocab_size": V, "block_size": block, "n_layer": L, "n_head": H,
                                        "n_embd": C, "bias": True},
            "steps": steps, "grad_clip": 1.0, "optimizer": opt_spec, "return_state": True}
    save(os.path.join(HERE, "train_muon.case.safetensors"), by_name(case), {"case": json.dumps(spec)})

    model = model.double().to(DEVICE)
    hidden, matrices, others = split_for_muon(model)
    muon, source = make_muon([{"params": [p for _, p in hidden], "ns_steps": 2}])
    adamw = torch.optim.AdamW([{"params": [p for _, p in matrices], "weight_decay": 0.1},
                               {"params": [p for _, p in others], "weight_decay": 0.0}],
                              lr=3e-3, betas=(0.9, 0.95), foreach=False)
    losses = []
    for t in range(steps):
        _, loss = model(case[f"idx.{t}"].to(DEVICE), case[f"targets.{t}"].to(DEVICE))
        losses.append(loss.item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        muon.step()
        adamw.step()
        muon.zero_grad(set_to_none=True)
        adamw.zero_grad(set_to_none=True)
    expected = {n: p.detach().float().cpu() for n, p in model.state_dict().items()}
    expected["losses"] = torch.tensor(losses, dtype=torch.float32)
    for n, p in hidden:
        expected[f"optimizer_state.{n}.momentum_buffer"] = muon.state[p]["momentum_buffer"].float().cpu()
    for n, p in matrices + others:
        for key in ("exp_avg", "exp_avg_sq"):
            expected[f"optimizer_state.{n}.{key}"] = adamw.state[p][key].float().cpu()
    save(os.path.join(HERE, "train_muon.expected.safetensors"), by_name(expected))
    print(f"train_muon: {source}; losses {losses}")


def main():
    torch.set_num_threads(1)
    every = list(range(len(SHAPES)))
    # Nothing but the lr changed from PyTorch's defaults, and no weight decay.
    optim_case("muon", [{"params": every, "lr": 0.02, "weight_decay": 0.0}], seed=11)
    # PyTorch's defaults (weight decay 0.1) at a larger lr, so that the decay shows.
    optim_case("muon_decay", [{"params": every, "lr": 0.02}], seed=12)
    optim_case("muon_nonesterov", [{"params": every, "lr": 0.02, "nesterov": False, "momentum": 0.9}], seed=13)
    optim_case("muon_match_rms", [{"params": every, "lr": 0.01, "adjust_lr_fn": "match_rms_adamw",
                                   "weight_decay": 0.05}], seed=14)
    # Two groups at different lrs, one with every other option set.
    optim_case("muon_groups", [
        {"params": [0, 3, 5], "lr": 0.02},
        {"params": [1, 2, 4], "lr": 0.005, "adjust_lr_fn": "original", "ns_steps": 3, "eps": 1e-5,
         "ns_coefficients": [3.0, -3.2, 1.2], "momentum": 0.8, "weight_decay": 0.2},
    ], seed=15)
    # The unfused Newton-Schulz form of PyTorch's main branch (use_addmm=False).
    optim_case("muon_unfused", [{"params": every, "lr": 0.02, "use_addmm": False}], seed=16)
    train_case()


if __name__ == "__main__":
    main()
