"""A pytest plugin: a test that takes `lathe_case` runs once per case of lathe's fixtures pack.

    # conftest.py                       (or: pytest -p lathe.pytest_plugin)
    pytest_plugins = ["lathe.pytest_plugin"]

    # test_mine.py
    @pytest.mark.lathe_cases(kind="op", op=["relu", "exp"], dtype=["f32", "f64"])
    def test_my_ops_match_lathe(lathe_case):
        got = my_implementation(lathe_case.op, [np.asarray(t) for t in lathe_case.inputs()])
        verdict = lathe_case.check({"output": lathe.from_numpy(got)})
        assert verdict, verdict.report

`pytest --lathe-fixtures DIR` takes the pack in DIR (`lathe ref --write-fixtures DIR`); without it,
this lathe writes one for the session. The mark's keywords filter the cases as lathe.ref.cases does.
"""
import pytest

from . import ref


def pytest_addoption(parser):
    parser.addoption("--lathe-fixtures", metavar="DIR", default=None,
                     help="lathe's fixtures pack (lathe ref --write-fixtures DIR); default: one written for the session")


def pytest_configure(config):
    config.addinivalue_line("markers", "lathe_cases(kind=None, op=None, dtype=None): the fixtures pack's cases a "
                                       "test of lathe_case runs over")


def pytest_generate_tests(metafunc):
    if "lathe_case" not in metafunc.fixturenames:
        return
    mark = metafunc.definition.get_closest_marker("lathe_cases")
    filters = dict(mark.kwargs) if mark else {}
    selected = list(ref.cases(metafunc.config.getoption("lathe_fixtures"), **filters))
    metafunc.parametrize("lathe_case", selected, ids=[c.name for c in selected])
