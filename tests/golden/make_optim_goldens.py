"""Golden cases for tests/test_optim.cpp: optimizer runs on given gradients in the `lathe ref` case
format of kind "optim" (docs/reference-cases.md), checked against torch.optim (SGD, Adam,
AdamW; single-tensor path, foreach=False) and against prodigy_reference.py (Prodigy).

    /usr/bin/python3 tests/golden/make_optim_goldens.py

Writes, next to this script, for each case NAME:
  optim_NAME.case.safetensors       metadata "case", param.<i>, grad.<t>.<i> (missing: no grad)
  optim_NAME.expected.safetensors   param.<i>, state.<i>.<key>, metadata "result" {"groups": [...]}

Every case has several groups, >= 20 steps, skipped gradients, a parameter whose first gradient
comes late and one that never gets one. Parameters have realistic scale (~0.02).
"""
import json, os, struct, sys
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from golden_safetensors import by_name, save  # noqa: E402
from prodigy_reference import ProdigyReference  # noqa: E402

SHAPES = [(4, 3), (5,), (2, 2, 3), (3,), (6,), (2, 5)]
STEPS = 24


def has_grad(t, i):
    if i == 4:
        return t >= 5 and t % 4 != 1  # first gradient comes late
    if i == 5:
        return False  # never a gradient: no state
    return (t + 2 * i) % 7 != 3


def make_inputs(seed, zero_param=None, shapes=SHAPES):
    g = torch.Generator().manual_seed(seed)
    params = [0.02 * torch.randn(s, generator=g) for s in shapes]
    if zero_param is not None:
        params[zero_param].zero_()
    grads = {}
    for t in range(STEPS):
        for i, s in enumerate(shapes):
            if has_grad(t, i):
                grads[(t, i)] = 0.1 * torch.randn(s, generator=g) + 0.01 * (i + 1)
    return params, grads


def write_case(name, optimizer, groups, params, grads, final, state, result, extra=None):
    spec = {"kind": "optim", "optimizer": optimizer, "steps": STEPS, "groups": groups, **(extra or {})}
    case = {f"param.{i}": p for i, p in enumerate(params)}
    case.update({f"grad.{t}.{i}": gr for (t, i), gr in grads.items()})
    save(os.path.join(HERE, f"optim_{name}.case.safetensors"), by_name(case), {"case": json.dumps(spec)})
    exp = {f"param.{i}": p for i, p in enumerate(final)}
    for i, st in state.items():
        for key, v in st.items():
            if v is None:
                continue
            if torch.is_tensor(v):
                exp[f"state.{i}.{key}"] = v
            else:  # Prodigy's per-parameter step is a Python int
                exp[f"state.{i}.{key}"] = torch.tensor(v, dtype=torch.int64 if isinstance(v, int) else torch.float32)
    save(os.path.join(HERE, f"optim_{name}.expected.safetensors"), by_name(exp), {"result": json.dumps(result)})


def torch_case(name, optimizer, cls, groups, seed):
    params, grads = make_inputs(seed)
    work = [p.clone().requires_grad_(True) for p in params]
    tgroups = []
    for gr in groups:
        opts = {k: (tuple(v) if k == "betas" else v) for k, v in gr.items() if k != "params"}
        tgroups.append(dict(params=[work[i] for i in gr["params"]], **opts))
    opt = cls(tgroups, foreach=False)
    for t in range(STEPS):
        for i, p in enumerate(work):
            p.grad = grads[(t, i)].clone() if (t, i) in grads else None
        opt.step()
    state = {}
    for i, p in enumerate(work):
        if p in opt.state:
            state[i] = {k: v for k, v in opt.state[p].items()}
    write_case(name, optimizer, groups, params, grads, [p.detach() for p in work], state,
               {"groups": [{} for _ in groups]})


def prodigy_case(name, groups, seed, zero_param=None, d0=None):
    """d0: the optimizer's own d0 (written beside "groups" when given; 1e-6 otherwise)."""
    params, grads = make_inputs(seed, zero_param)
    work = [p.clone() for p in params]
    ref_groups = []
    for gr in groups:
        opts = {k: (tuple(v) if k == "betas" else v) for k, v in gr.items() if k != "params"}
        if opts.get("growth_rate", 0) is None:
            opts["growth_rate"] = float("inf")
        ref_groups.append(dict(params=[work[i] for i in gr["params"]], **opts))
    opt = ProdigyReference(ref_groups) if d0 is None else ProdigyReference(ref_groups, d0=d0)
    for t in range(STEPS):
        opt.step([[grads.get((t, i)) for i in gr["params"]] for gr in groups])
    state = {}
    for i, p in enumerate(work):
        if id(p) in opt.state:
            state[i] = dict(opt.state[id(p)])
    write_case(name, "prodigy", groups, params, grads, work, state,
               {"groups": [opt.group_scalars(g) for g in range(len(groups))]},
               None if d0 is None else {"d0": d0})


def reference_model_module():
    """tools/torch_gpt_reference.py, imported by path."""
    import importlib.util
    path = os.path.join(HERE, "..", "..", "tools", "torch_gpt_reference.py")
    spec_ = importlib.util.spec_from_file_location("torch_gpt_reference", path)
    ref = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(ref)
    return ref


def nanogpt_steps(model, opt, case, steps):
    """nanoGPT's loop on the case's idx.<t> / targets.<t>: the loss of each step, before its update."""
    losses = []
    for t in range(steps):
        _, loss = model(case[f"idx.{t}"], case[f"targets.{t}"])
        losses.append(loss.item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return losses


def nanogpt_adamw(params):
    """nanoGPT's AdamW: decay on the matrices, none on gains and biases."""
    decay = [p for p in params.values() if p.dim() >= 2]
    nodecay = [p for p in params.values() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                             lr=3e-3, betas=(0.9, 0.95), foreach=False)


def reference_train_case(name, seed, batch, steps, spec, make_optimizer, draw_targets=None, state_keys=()):
    """Kind "train" on the reference GPT of tools/torch_gpt_reference.py (vocabulary 64, block 16, 2
    layers of 2 heads, 32 wide, windows of 8): `steps` batches drawn after the weights from `seed`,
    nanoGPT's loop computed in float64 from the float32 inputs with the optimizer that
    make_optimizer(named parameters) builds. `spec`: the case's "optimizer" and any other fields;
    draw_targets(t, shape) replaces uniform targets; state_keys: optimizer state returned per
    parameter ("return_state")."""
    ref = reference_model_module()
    V, block, L, H, C, T = 64, 16, 2, 2, 32, 8
    torch.manual_seed(seed)
    model = ref.GPT(V, block, L, H, C, bias=True)
    case = {n: p.detach().float().clone() for n, p in model.state_dict().items()}
    for t in range(steps):
        case[f"idx.{t}"] = torch.randint(0, V, (batch, T))
        case[f"targets.{t}"] = draw_targets(t, (batch, T)) if draw_targets else torch.randint(0, V, (batch, T))
    spec = {"kind": "train", "config": {"vocab_size": V, "block_size": block, "n_layer": L, "n_head": H,
                                        "n_embd": C, "bias": True},
            "steps": steps, "grad_clip": 1.0, **spec}
    save(os.path.join(HERE, f"{name}.case.safetensors"), by_name(case), {"case": json.dumps(spec)})

    model = model.double()
    params = dict(model.named_parameters())
    opt = make_optimizer(params)
    losses = nanogpt_steps(model, opt, case, steps)
    expected = {n: p.detach().float() for n, p in model.state_dict().items()}
    expected["losses"] = torch.tensor(losses, dtype=torch.float32)
    for n, p in params.items():
        for key in state_keys:
            expected[f"optimizer_state.{n}.{key}"] = opt.state[p][key].float()
    save(os.path.join(HERE, f"{name}.expected.safetensors"), by_name(expected))
    print(f"{name} losses", losses)


def train_case():
    """nanoGPT's loop: AdamW with decay / no-decay groups, grad clip."""
    reference_train_case("train_tiny", 77, 2, 4, {"optimizer": {"name": "adamw", "lr": 3e-3, "weight_decay": 0.1,
                                                                "betas": [0.9, 0.95]}}, nanogpt_adamw)


def train_param_groups_case():
    """Explicit "param_groups": torch.optim.AdamW(model.parameters(), weight_decay=0.1) (every
    parameter decays, which nanoGPT's grouping cannot say), the embeddings in a group of their own
    at another lr; "return_state": the optimizer's state comes back under parameter names."""
    embeddings = ["transformer.wte.weight", "transformer.wpe.weight"]
    names = [n for n, _ in reference_model_module().GPT(64, 16, 2, 2, 32, bias=True).named_parameters()]
    groups = [{"params": embeddings, "lr": 1e-3}, {"params": [n for n in names if n not in embeddings]}]

    def adamw_groups(params):
        return torch.optim.AdamW([{"params": [params[n] for n in g["params"]],
                                   **{k: v for k, v in g.items() if k != "params"}} for g in groups],
                                 lr=3e-3, weight_decay=0.1, foreach=False)

    reference_train_case("train_param_groups", 78, 2, 4,
                         {"optimizer": {"name": "adamw", "lr": 3e-3, "weight_decay": 0.1}, "param_groups": groups,
                          "return_state": True},
                         adamw_groups, state_keys=("exp_avg", "exp_avg_sq"))


def train_ignore_case():
    """Targets of -1, which the loss ignores (nanoGPT's ignore_index): step 0 has about a quarter of
    them scattered, step 1 one row all -1 beside rows with some, step 2 every target -1, whose loss
    is NaN (0 / 0) and whose gradients are zero, as in PyTorch: AdamW then only decays the weights
    and its moments."""
    def targets(t, shape):
        drawn = torch.randint(0, 64, shape)
        drawn[torch.rand(*shape) < 0.25] = -1
        if t == 1:
            drawn[0] = -1
        if t == 2:
            drawn[:] = -1
        return drawn

    reference_train_case("train_ignore", 79, 3, 3, {"optimizer": {"name": "adamw", "lr": 3e-3, "weight_decay": 0.1,
                                                                  "betas": [0.9, 0.95]}},
                         nanogpt_adamw, draw_targets=targets)


def main():
    torch.set_num_threads(1)
    train_case()
    train_param_groups_case()
    train_ignore_case()
    torch_case("sgd", "sgd", torch.optim.SGD, [
        {"params": [0, 3], "lr": 0.1, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01},
        {"params": [1, 4], "lr": 0.05, "momentum": 0.8, "nesterov": True, "maximize": True},
        {"params": [2, 5], "lr": 0.2, "weight_decay": 0.1},
    ], seed=1)
    torch_case("adam", "adam", torch.optim.Adam, [
        {"params": [0, 3], "lr": 0.001},
        {"params": [1, 4], "lr": 0.002, "amsgrad": True, "weight_decay": 0.05},
        {"params": [2, 5], "lr": 0.003, "maximize": True, "betas": [0.8, 0.99], "eps": 1e-6},
    ], seed=2)
    torch_case("adamw", "adamw", torch.optim.AdamW, [
        {"params": [0, 3]},
        {"params": [1, 4], "lr": 0.002, "amsgrad": True, "weight_decay": 0.1, "maximize": True},
        {"params": [2, 5], "lr": 0.01, "betas": [0.85, 0.95], "eps": 1e-7, "weight_decay": 0.0},
    ], seed=3)
    prodigy_case("prodigy", [
        {"params": [0, 3, 5], "weight_decay": 0.01},
        {"params": [1, 2, 4]},
    ], seed=4)
    prodigy_case("prodigy_options", [
        {"params": [0, 1, 5], "use_bias_correction": True, "safeguard_warmup": True, "decouple": False,
         "weight_decay": 0.05, "slice_p": 2, "d_coef": 3.0, "growth_rate": 1.05, "beta3": 0.95,
         "betas": [0.85, 0.99], "d0": 1e-6},
        {"params": [2, 3, 4], "slice_p": 3, "eps": 1e-6, "safeguard_warmup": True, "decouple": False,
         "weight_decay": 0.05, "d0": 1e-6},
    ], seed=5, zero_param=3)
    prodigy_case("prodigy_nobeta1", [
        {"params": [0, 2], "betas": [0.0, 0.99], "lr": 0.5},
        {"params": [1, 3, 4, 5], "lr": 0.0, "weight_decay": 0.1},
    ], seed=6)
    # A d0 per group: d and d_max still start at the optimizer's d0; a group's d0 only scales d / d0.
    prodigy_case("prodigy_group_d0", [
        {"params": [0, 1, 2], "d0": 1e-5},
        {"params": [3, 4, 5], "d0": 1e-4},
    ], seed=7)
    # The optimizer's own d0 (written beside "groups"), which one group overrides for its ratio.
    prodigy_case("prodigy_opt_d0", [
        {"params": [0, 1, 2]},
        {"params": [3, 4, 5], "d0": 1e-4},
    ], seed=8, d0=1e-5)


if __name__ == "__main__":
    main()
