"""lathe.GPT, lathe.optim, and files (safetensors, weights files, checkpoints) from Python."""
import os

import numpy as np
import pytest

import lathe


def batch(seed, B=2, T=16):
    x = lathe.randint(0, 256, (B, T), seed=seed)
    y = lathe.randint(0, 256, (B, T), seed=seed + 100)
    return x, y


def test_gpt_parameters_are_the_models_own_tensors():
    model = lathe.GPT("tiny", seed=1)
    params = model.named_parameters()
    assert list(params)[:2] == ["transformer.wte.weight", "transformer.wpe.weight"]
    assert sum(p.numel() for p in params.values()) == model.num_params()
    assert model.config["n_layer"] == 2 and lathe.gpt_config("tiny") == model.config
    x, y = batch(1)
    logits, loss = model(x, y)
    assert logits.shape == (2, 16, 256) and loss.shape == ()
    np.testing.assert_allclose(loss.item(), lathe.cross_entropy(logits.reshape(32, 256), y.reshape(32)).item(),
                               rtol=1e-6)
    params["lm_head.weight" if "lm_head.weight" in params else "transformer.wte.weight"].zero_()
    logits, _ = model.forward(x)
    assert np.abs(np.asarray(logits)).max() == 0  # the tied head read the zeroed weight


def test_generate_is_deterministic_and_a_callback_can_stop_it():
    model = lathe.GPT("tiny", seed=2)
    prompt = lathe.tensor([[1, 2, 3]])
    a = model.generate(prompt, 8, seed=5, top_k=10)
    assert a.shape == (1, 11) and a.tolist() == model.generate(prompt, 8, seed=5, top_k=10).tolist()
    assert a.tolist() == model.generate(prompt, 8, seed=5, top_k=10, use_cache=False).tolist()
    seen = []
    b = model.generate(prompt, 8, seed=5, top_k=10, on_token=lambda ids: seen.append(ids) or len(seen) < 3)
    assert b.shape == (1, 6) and b.tolist()[0] == a.tolist()[0][:6] and len(seen) == 3


def test_an_optimizer_by_name_trains_and_shows_its_typed_state():
    model = lathe.GPT("tiny", seed=3)
    opt = lathe.optim.make("adamw", model.parameters(), lr=1e-2, weight_decay=0.1)
    assert "adamw" in lathe.optim.names() and opt.kind == "adamw"
    kinds = {k["name"]: k for k in lathe.optim.kinds()}
    assert list(kinds) == lathe.optim.names() and kinds["adamw"]["has_fused"] and not kinds["prodigy"]["shardable"]
    assert kinds["muon"]["default_lr"] == 0.02 and kinds["muon"]["adamw_beside"] and not kinds["sgd"]["betas"]
    x, y = batch(3)
    first = None
    for _ in range(5):
        opt.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert model.loss(x, y).item() < first and opt.step_count == 5
    entries = {e["name"]: e for e in opt.state_entries()}
    assert entries["param.0.exp_avg"]["placement"] == "with_param"
    assert entries["param.0.exp_avg"]["dtype"] == lathe.f32
    assert opt.state_dict()["param.0.exp_avg"].shape == model.parameters()[0].shape
    opt.set_lr(1e-3)
    assert opt.lr(0) == 1e-3 and opt.param_groups[0]["lr"] == 1e-3


def test_param_groups_and_bad_options_as_the_command_takes_them():
    model = lathe.GPT("tiny", seed=4)
    ps = model.parameters()
    opt = lathe.optim.make("sgd", [{"params": ps[:2], "lr": 0.5}, {"params": ps[2:]}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.1]
    with pytest.raises(lathe.Error, match="unknown optimizer"):
        lathe.optim.make("adagrad", ps)
    with pytest.raises(lathe.Error, match="betaz"):
        lathe.optim.make("adam", ps, betaz=(0.9, 0.99))
    with pytest.raises(lathe.Error, match="param group needs"):
        lathe.optim.make("adam", [{"lr": 1}])


def test_safetensors_round_trip_onto_a_device(tmp_path):
    path = str(tmp_path / "t.safetensors")
    tensors = {"a": lathe.arange(6, dtype=lathe.f32).reshape(2, 3).T, "b": lathe.ones(2, dtype=lathe.bf16)}
    lathe.save(path, tensors, {"note": "hi"})
    back = lathe.load(path, device="sim:1")
    assert str(back["a"].device) == "sim:1" and back["a"].cpu().tolist() == tensors["a"].tolist()
    assert back["b"].dtype == lathe.bf16 and lathe.load_metadata(path)["note"] == "hi"
    with pytest.raises(lathe.Error, match="nothing.safetensors"):
        lathe.load(str(tmp_path / "nothing.safetensors"))
    open(path, "r+b").write(b"\x00\x00\x00\x00")
    with pytest.raises(lathe.Error, match="t.safetensors"):
        lathe.load(path)


def test_a_weights_file_gives_the_same_model_back(tmp_path):
    model = lathe.GPT("tiny", seed=5)
    path = str(tmp_path / "w.safetensors")
    lathe.save_model(path, model)
    back = lathe.load_model(path, device="sim")
    x, _ = batch(5)
    assert back.config == model.config and str(back.device) == "sim:0"
    assert back(x.to("sim"))[0].cpu().tolist() == model.eval()(x)[0].tolist()


def test_a_checkpoint_resumes_on_another_device_bit_for_bit(tmp_path):
    path = str(tmp_path / "ckpt.safetensors")

    def run(model, opt, steps, seed0):
        for s in range(steps):
            x, y = batch(seed0 + s)
            opt.zero_grad()
            model.loss(x.to(model.device), y.to(model.device)).backward()
            opt.step()

    model = lathe.GPT("tiny", seed=6)
    opt = lathe.optim.make("adamw", model.parameters(), lr=1e-2)
    run(model, opt, 2, 0)
    lathe.save_checkpoint(path, model, opt, step=2)
    run(model, opt, 2, 2)

    ckpt = lathe.Checkpoint(path, device="sim")
    assert ckpt.step == 2 and ckpt.optimizer_kind == "adamw" and ckpt.model_config["n_layer"] == 2
    resumed = lathe.GPT(ckpt.model_config, seed=99, device="sim")
    ropt = lathe.optim.make("adamw", resumed.parameters(), lr=1e-2)
    ckpt.restore(resumed, ropt)
    assert str(ropt.state_dict()["param.0.exp_avg"].device) == "sim:0"  # state lands where its policy says
    run(resumed, ropt, 2, 2)
    for name, p in model.named_parameters().items():
        assert resumed.named_parameters()[name].cpu().tolist() == p.tolist(), name
    wrong = lathe.GPT("small")
    with pytest.raises(lathe.Error, match="ckpt.safetensors"):
        ckpt.restore(wrong, lathe.optim.make("adamw", wrong.parameters()))


def test_state_dicts_precision_and_a_checkpoints_weights(tmp_path):
    a, b = lathe.GPT("tiny", seed=7), lathe.GPT("tiny", seed=8)
    b.load_state_dict(a.state_dict())
    x, y = batch(7)
    assert a.loss(x, y).item() == b.loss(x, y).item()
    with pytest.raises(lathe.Error, match="missing|unexpected|lm_head|wte"):
        b.load_state_dict({"nope": lathe.zeros(1)})
    assert a.precision == "f32"
    a.precision = "bf16"
    assert a.precision == "bf16" and abs(a.loss(x, y).item() - b.loss(x, y).item()) > 0
    with pytest.raises(lathe.Error, match="precision"):
        a.precision = "f8"
    path = str(tmp_path / "c.safetensors")
    opt = lathe.optim.make("sgd", b.parameters(), lr=0.1)
    lathe.save_checkpoint(path, b, opt, step=3, program={"note": "mine"})
    c = lathe.GPT("tiny", seed=9)
    ckpt = lathe.Checkpoint(path)
    ckpt.load_weights(c)
    assert ckpt.program == {"note": "mine"} and c.loss(x, y).item() == b.loss(x, y).item()
