"""lathe.ref: lathe as the reference another implementation is tested against (docs/reference-cases.md).

    out = lathe.ref.run("case.safetensors")                     # a case file, as `lathe ref CASE OUT`
    out = lathe.ref.run({"kind": "op", "op": "softmax", "args": {"dim": 1}}, {"input.0": x})
    verdict = lathe.ref.check(got, want)                        # `lathe ref --check`'s verdicts
    assert verdict, verdict.report
    for case in lathe.ref.cases(): ...                          # the fixtures pack, case by case

The work is the C++ harness's (ref/); this file only names things for Python.
"""
import json
import os
import tempfile

from . import _lathe
from ._lathe import load, load_metadata

__all__ = ["Case", "Verdict", "cases", "check", "run", "write_fixtures"]


def run(case, tensors=None, device="cpu", result=False):
    """Runs a case on `device` and returns its output tensors ({name: tensor}).

    `case` is a case file's path, or a case document (a dict with its "kind") whose tensors are
    `tensors` or, in one dict, its "tensors" entry. With result=True, returns (tensors, the result
    document or None).
    """
    if isinstance(case, dict) and "tensors" in case and tensors is None:
        case = dict(case)
        tensors = case.pop("tensors")
    if isinstance(case, dict):
        out, res = _lathe._ref.run(dict(tensors or {}), case, device)
    else:
        if tensors is not None:
            raise TypeError("lathe.ref.run: a case file holds its own tensors; tensors= goes with a case document")
        out, res = _lathe._ref.run(os.fspath(case), None, device)
    return (out, res) if result else out


class Verdict:
    """`lathe ref --check`'s decision: true when every tensor passes; `report` is what it prints."""

    def __init__(self, passed, report, tensors):
        self.passed, self.report, self.tensors = passed, report, tensors

    def __bool__(self):
        return self.passed

    def __str__(self):
        return self.report

    __repr__ = __str__


def check(got, want, rtol=None, atol=None, equal_nan=False):
    """Compares results tensor by tensor as `lathe ref --check GOT WANT` does (torch.testing's rules).

    `got` and `want` are result files' paths or {name: tensor}; rtol and atol come together, else
    each dtype's default. Returns a Verdict.
    """
    def source(x):
        return os.fspath(x) if isinstance(x, (str, os.PathLike)) else dict(x)

    return Verdict(*_lathe._ref.check(source(got), source(want), rtol, atol, equal_nan))


def ops():
    """The op registry (ref/op_registry.h), one dict per op: "name", "ref_kind" (an op of the kind
    "op", under PyTorch's name and arguments), "operands" ((least, most), most None for any number)
    and "args" (the argument names it takes)."""
    return _lathe._ref.ops()


def write_fixtures(directory, device="cpu"):
    """Writes the fixtures pack (`lathe ref --write-fixtures DIR`); returns the number of cases."""
    return _lathe._ref.write_fixtures(os.fspath(directory), device)


class Case:
    """One case of the fixtures pack: its files, what it covers, and the tolerance to compare at."""

    def __init__(self, directory, entry):
        self.name = entry["name"]
        self.kind = entry["kind"]
        self.covers = entry["covers"]
        self.path = os.path.join(directory, entry["case"])
        self.expected_path = os.path.join(directory, entry["expected"])
        tol = entry["tolerance"]
        self.tolerance = (tol["rtol"], tol["atol"]) if isinstance(tol, dict) else None  # None: the dtype's default
        self._document = None

    def __repr__(self):
        return f"lathe.ref.Case({self.name!r})"

    @property
    def document(self):
        """The case document: {"kind": ..., and what the kind reads (an op's "op" and "args")}."""
        if self._document is None:
            self._document = json.loads(load_metadata(self.path)["case"])
        return self._document

    @property
    def op(self):
        return self.document.get("op")

    @property
    def args(self):
        return self.document.get("args") or {}

    def tensors(self):
        """The case's tensors, {name: tensor}."""
        return load(self.path)

    def inputs(self):
        """An op case's operands in order: input.0, input.1, ..."""
        t = self.tensors()
        return [t[f"input.{i}"] for i in range(len(t)) if f"input.{i}" in t]

    @property
    def dtype(self):
        """The dtype the case tests: that of its first floating-point tensor."""
        return next((t.dtype for t in self.tensors().values() if t.dtype.is_floating_point), None)

    def expected(self):
        """lathe's answer, {name: tensor}."""
        return load(self.expected_path)

    def run(self, device="cpu"):
        """lathe's answer computed again, on `device`."""
        return run(self.path, device=device)

    def check(self, got):
        """Checks `got` ({name: tensor}: all of lathe's answer or some of it, such as {"output": y})
        against the expected tensors of the same names, at the case's tolerance."""
        want = {name: t for name, t in self.expected().items() if name in got}
        rtol, atol = self.tolerance if self.tolerance else (None, None)
        return check(got, want, rtol, atol)


_default_pack = None


def cases(directory=None, kind=None, op=None, dtype=None):
    """The cases of a fixtures pack, in its manifest's order, optionally only those of a kind, of
    some ops (a name or a collection) and of some dtypes ("f32", lathe.f32, or a collection).

    Without a directory, a pack this lathe writes once per process into a temporary directory.
    """
    global _default_pack
    if directory is None:
        if _default_pack is None:
            _default_pack = tempfile.mkdtemp(prefix="lathe_fixtures_")
            write_fixtures(_default_pack)
        directory = _default_pack
    directory = os.fspath(directory)
    manifest = os.path.join(directory, "manifest.json")
    if not os.path.isfile(manifest):
        raise _lathe.Error(f"{directory}: no manifest.json, not a fixtures pack (lathe ref --write-fixtures DIR writes one)")

    def wanted(value, allowed):  # a name or a collection of them; a dtype by its name
        if allowed is None:
            return True
        allowed = [allowed] if isinstance(allowed, str) or not hasattr(allowed, "__iter__") else allowed
        return str(value) in {str(a) for a in allowed}

    for entry in json.load(open(manifest)):
        case = Case(directory, entry)
        if wanted(case.kind, kind) and (op is None or wanted(case.op, op)) and (dtype is None or wanted(case.dtype, dtype)):
            yield case
