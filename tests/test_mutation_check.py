"""``tools/mutation_check.py --select covered`` on a toy package: the traced run maps each line to the tests that ran
it, and a mutant runs those first, then the rest of the list (a test that runs the code in a child process is not
seen by the tracer, so only the rest can kill what it alone checks)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import hypothesis  # noqa: F401  (imported here once: each forked pytest would otherwise import its plugin's package)
import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "mutation_check.py"

SOURCE = textwrap.dedent(
    """\
    def double(x):
        return x * 2


    def clip(x):
        return x if x > 0 else 0


    def square(x):
        return x * x


    def triple(x):
        return x * 3
    """
)
TESTS = textwrap.dedent(
    """\
    import subprocess
    import sys

    from toy_mutation_pkg.calc import clip, double, square


    def test_double():
        assert double(3) == 6


    def test_clip():
        assert clip(-1) == 0 and clip(2) == 2


    def test_square_runs():
        assert square(2) > 0


    def test_square_and_triple_in_a_child():
        code = "from toy_mutation_pkg.calc import square, triple; assert square(3) == 9 and triple(2) == 6"
        subprocess.run([sys.executable, "-c", code], check=True)
    """
)
ALL = "tests/test_calc.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("mutation_check_under_test", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    (root / "toy_mutation_pkg").mkdir()
    (root / "toy_mutation_pkg" / "__init__.py").write_text("")
    (root / "toy_mutation_pkg" / "calc.py").write_text(SOURCE)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(TESTS)
    return root


@pytest.fixture(scope="module")
def coverage(tool, toy):
    found = tool.line_coverage(toy, "toy_mutation_pkg/calc.py", ALL, 60)
    assert found is not None
    return found


def test_each_line_maps_to_the_tests_that_ran_it_in_process(coverage):
    double, clip, runs = (f"{ALL}::{name}" for name in ("test_double", "test_clip", "test_square_runs"))
    # a call counts its ``def`` line; the module's own lines ran on import, outside every test; triple ran only in a child
    assert coverage.by_line == {1: [double], 2: [double], 5: [clip], 6: [clip], 9: [runs], 10: [runs]}
    assert sorted(coverage.order) == sorted([double, clip, runs, f"{ALL}::test_square_and_triple_in_a_child"])


def _judge(tool, toy, coverage, line, before, after):
    target = toy / "toy_mutation_pkg" / "calc.py"
    original = target.read_bytes()
    start = original.index(before.encode(), sum(len(row) + 1 for row in SOURCE.splitlines()[: line - 1]))
    mutant = tool.Mutant("toy_mutation_pkg/calc.py", line, before, after, start, start + len(before), after)
    target.write_bytes(original[:start] + after.encode() + original[start + len(before) :])
    try:
        tool.judge(toy, ALL, mutant, coverage, original, 60, False)
    finally:
        target.write_bytes(original)
    return mutant.status, mutant.selected, mutant.full


VERDICTS = [
    pytest.param(10, "x * x", "x / x", ("killed", 1, True), id="selected-pass-then-the-rest-kills"),  # square(2) > 0 still; the child kills
    pytest.param(2, "x * 2", "x / 2", ("killed", 1, False), id="selected-kills", marks=pytest.mark.slow),  # test_double alone
    pytest.param(6, "x > 0", "x >= 0", ("survived", 1, True), id="equivalent-survives", marks=pytest.mark.slow),  # all four pass
    pytest.param(14, "x * 3", "x / 3", ("killed", 4, False), id="no-test-ran-the-line", marks=pytest.mark.slow),  # all, in order
]
"""(line, text, mutated text, (status, tests run first, whether the rest ran)): the path the tracer cannot see in the
default run (about 1.4 s of CPU a case, in forked pytest runs), the others under ``-m slow``."""


@pytest.mark.parametrize(("line", "before", "after", "verdict"), VERDICTS)
def test_a_mutant_runs_its_lines_tests_first_then_the_rest(tool, toy, coverage, line, before, after, verdict):
    assert _judge(tool, toy, coverage, line, before, after) == verdict


def test_the_traced_run_leaves_the_calling_process_untraced(coverage):
    """The tracer is the forked child's: a tracer left on in the caller (the pytest process here, the tool's warm
    parent there) would slow every Python call after it, and every mutant's fork, by about half."""
    import threading

    assert sys.gettrace() is None and threading.gettrace() is None
