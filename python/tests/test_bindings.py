"""Every name the module binds is used by some test: a binding without one fails here by name."""
import glob
import os
import re

import lathe
import lathe.ref
from test_ops import REF_UNARY

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ["LATHE_SOURCE_DIR"]


def bound_names():
    """(where, name) of every public name: the module's, and each bound class's own."""
    names = set()
    for n in dir(lathe._lathe):
        if not n.startswith("_"):
            names.add(("lathe", n))
    classes = [lathe.Tensor, lathe.GPT, lathe.optim.Optimizer, lathe.Tokenizer, lathe.Dataset, lathe.Checkpoint,
               lathe.Device, lathe.Generator, lathe.DType, lathe.no_grad]
    for cls in classes:
        for n in vars(cls):
            if not n.startswith("_") and n not in ("name", "value"):  # the enum's own
                names.add((cls.__name__, n))
    for n in lathe.ref.__all__:
        names.add(("lathe.ref", n))
    for n in dir(lathe.optim):
        if not n.startswith("_") and n != "Optimizer":
            names.add(("lathe.optim", n))
    return sorted(names)


def test_every_bound_name_is_used_by_a_test():
    sources = glob.glob(os.path.join(HERE, "test_*.py")) + [os.path.join(ROOT, "examples", "tutorial", "ch11_python.py")]
    sources = [s for s in sources if os.path.basename(s) != "test_bindings.py"]
    text = "\n".join(open(s).read() for s in sources)
    # The unary ops bound from the op registry are used by the test that iterates it (test_ops.py).
    text += "\n" + " ".join(REF_UNARY)
    missing = [f"{where}.{name}" for where, name in bound_names() if not re.search(r"\b%s\b" % re.escape(name), text)]
    assert not missing, "bound but used by no test: " + ", ".join(missing)
