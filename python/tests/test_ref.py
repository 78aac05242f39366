"""lathe.ref: running cases, checking results as `lathe ref --check` does, the fixtures pack, the pytest plugin."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lathe
import lathe.ref

EXAMPLE = os.path.join(os.environ["LATHE_SOURCE_DIR"], "python", "examples", "numpy_ops")


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pack")
    assert lathe.ref.write_fixtures(directory) > 100
    return directory


def test_a_case_file_runs_to_lathes_answer_bit_for_bit(pack):
    case = next(lathe.ref.cases(pack, op="layer_norm", dtype="f32"))
    assert case.kind == "op" and case.op == "layer_norm" and case.dtype == lathe.f32
    verdict = lathe.ref.check(lathe.ref.run(case.path), case.expected_path, rtol=0, atol=0)
    assert verdict and "tensors pass" in verdict.report
    assert lathe.ref.check(case.run(device="sim"), case.expected(), rtol=0, atol=0)


def test_a_case_made_in_python_runs_without_files():
    x = lathe.randn((3, 5), seed=1)
    out, result = lathe.ref.run({"kind": "op", "op": "softmax", "args": {"dim": 1}}, {"input.0": x}, result=True)
    assert out["output"].tolist() == lathe.softmax(x, dim=1).tolist()
    one_dict = lathe.ref.run({"kind": "op", "op": "softmax", "args": {"dim": 1}, "tensors": {"input.0": x}})
    assert one_dict["output"].tolist() == out["output"].tolist()
    with pytest.raises(lathe.Error, match="unknown kind|kind"):
        lathe.ref.run({"kind": "nope"}, {})
    with pytest.raises(lathe.Error, match="input.7"):
        lathe.ref.run({"kind": "op", "op": "exp"}, {"input.0": x, "input.7": x})
    with pytest.raises(TypeError, match="case document"):
        lathe.ref.run("x.safetensors", {"input.0": x})


def test_check_gives_the_commands_verdict_and_report(tmp_path):
    want = {"a": lathe.tensor([1.0, 2.0, 3.0]), "b": lathe.tensor([[0.5]], dtype="bf16")}
    got = {"a": lathe.tensor([1.0, 2.0 + 1e-3, float("nan")]), "b": lathe.tensor([[0.5]], dtype="bf16")}
    verdict = lathe.ref.check(got, want)
    assert not verdict and [t["pass"] for t in verdict.tensors] == [False, True]
    lathe.save(str(tmp_path / "got.safetensors"), got)
    lathe.save(str(tmp_path / "want.safetensors"), want)
    cli = subprocess.run([os.environ["LATHE_BIN"], "ref", "--check", str(tmp_path / "got.safetensors"),
                          str(tmp_path / "want.safetensors")], capture_output=True, text=True)
    assert cli.returncode != 0 and cli.stdout == verdict.report.replace("got:", "got:")
    assert lathe.ref.check(got, want, rtol=0.01, atol=0.01).tensors[0]["pass"] is False  # NaN still fails
    assert lathe.ref.check({"a": got["a"][:2]}, {"a": want["a"][:2]}, rtol=1e-3, atol=0)
    with pytest.raises(lathe.Error, match="both rtol and atol"):
        lathe.ref.check(got, want, rtol=1e-3)


def test_cases_filter_the_pack(pack):
    every = list(lathe.ref.cases(pack))
    assert len(every) == len(os.listdir(pack)) // 2 - 1  # two files a case, then manifest and README
    ops = list(lathe.ref.cases(pack, kind="op", op=["exp", "tanh"], dtype=["f32", lathe.f64]))
    assert sorted(c.name for c in ops) == ["op_exp_f32", "op_exp_f64", "op_tanh_f32", "op_tanh_f64"]
    assert {c.kind for c in every} == {"op", "gpt", "train"}
    with pytest.raises(lathe.Error, match="not a fixtures pack"):
        list(lathe.ref.cases(os.environ["LATHE_SOURCE_DIR"]))


def run_pytest(directory, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", directory, *args],
                          capture_output=True, text=True, env=env)


def test_the_plugin_parametrizes_over_a_pack_given_on_the_command_line(pack):
    r = run_pytest(EXAMPLE, "--lathe-fixtures", str(pack))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "14 passed" in r.stdout  # 7 ops in f32 and f64


def test_the_plugin_fails_a_wrong_implementation_with_the_report(tmp_path, pack):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["lathe.pytest_plugin"]\n')
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_wrong.py").write_text(textwrap.dedent("""
        import lathe, numpy as np, pytest

        @pytest.mark.lathe_cases(kind="op", op="relu", dtype="f32")
        def test_relu(lathe_case):
            got = np.abs(np.asarray(lathe_case.inputs()[0]))  # not relu
            verdict = lathe_case.check({"output": lathe.from_numpy(np.ascontiguousarray(got))})
            assert verdict, verdict.report
    """))
    r = run_pytest(str(tmp_path), "--lathe-fixtures", str(pack))
    assert r.returncode != 0 and "1 failed" in r.stdout and "FAIL output [3, 4] f32" in r.stdout


def test_the_names_lathe_ref_gives(pack):
    case = next(lathe.ref.cases(pack, op="exp", dtype="f64"))
    assert isinstance(case, lathe.ref.Case) and repr(case) == "lathe.ref.Case('op_exp_f64')"
    verdict = case.check(case.expected())
    assert isinstance(verdict, lathe.ref.Verdict) and verdict and str(verdict) == verdict.report
