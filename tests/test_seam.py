"""The seam types: validated, immutable, picklable, and free of torch and simpy."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

from wirelessfl.seam import CommPlan, RoundTiming, Stream


def test_broadcast_plan_payloads():
    plan = CommPlan.broadcast(range(3), payload=2.0, uplink=0.5)
    assert plan.downlink_payload == 2.0 and plan.uplink_payload == 1.5
    assert plan.participants == frozenset({0, 1, 2})


def test_plan_is_immutable_and_picklable():
    plan = CommPlan.broadcast(range(3))
    with pytest.raises(TypeError):
        plan.uplink[0] = 5.0
    assert pickle.loads(pickle.dumps(plan)) == plan
    timing = RoundTiming({0: 1.0}, {0: 2.0}, {0: 3.0}, {0}, 3.0)
    assert pickle.loads(pickle.dumps(timing)) == timing


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Stream(1.0, frozenset()), r"stream.receivers must name at least one client, got an empty set"),
        (lambda: Stream(0.0, {1}), r"stream.payload must be a positive finite number of model units, got 0.0"),
        (lambda: CommPlan((), {5: 1.0}, {0: 1.0}), r"plan.uplink names client 5, which is not a participant"),
        (lambda: CommPlan((), {0: -1.0}, {0: 1.0}), r"plan.uplink\[0\] must be a finite payload >= 0, got -1.0"),
        (lambda: CommPlan((), {}, {0: float("nan")}), r"plan.work\[0\] must be a finite relative work >= 0, got nan"),
        (lambda: CommPlan((Stream(1.0, {7}),), {}, {0: 1.0}), r"sends to clients \[7\], which are not participants"),
    ],
)
def test_bad_plans_are_rejected(build, message):
    with pytest.raises(ValueError, match=message):
        build()


LAYERS = [
    ("wirelessfl.seam", "torch"), ("wirelessfl.seam", "simpy"), ("wirelessfl.network", "torch"),
    ("wirelessfl.learning.lockstep", "simpy"), ("wirelessfl.algorithms", "simpy"), ("wirelessfl.results.tables", "torch"),
    ("wirelessfl.learning.gating", "simpy"), ("wirelessfl_papers", "torch"),
    ("wirelessfl.learning.memory", "simpy"), ("wirelessfl.results.tradeoff", "torch"), ("wirelessfl.results.streams", "torch"),
    ("wirelessfl.algorithms.streams", "simpy"), ("wirelessfl.learning", "simpy"),
    ("wirelessfl.learning.data.data_files", "torch"), ("wirelessfl.learning.data.federated", "simpy"),
    ("wirelessfl.results.run_outputs", "torch"),
]
"""(module, a package it must not import, even indirectly)."""

BASE = ("numpy", "pandas", "scipy", "sklearn", "matplotlib.pyplot", "plotly.graph_objects", "pydantic", "yaml", "rich")
"""Third-party packages both groups load: imported once, then each group imports its modules in a fork."""
IMPORTS = "import importlib, sys\nfor name in sys.argv[2:]: importlib.import_module(name)\nsys.exit(1 if sys.argv[1] in sys.modules else 0)"
FORKED = """
import importlib, json, os, sys
for name in BASE:
    importlib.import_module(name)
assert not {f for f, _ in GROUPS} & set(sys.modules), "a third-party base package imports a forbidden one"
codes = {}
for forbidden, modules in GROUPS:
    pid = os.fork()
    if pid == 0:
        try:
            for name in modules:
                importlib.import_module(name)
            os._exit(1 if forbidden in sys.modules else 0)
        except BaseException:
            os._exit(1)
    codes[forbidden] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(codes))
"""


def _imports(modules: list[str], forbidden: str) -> bool:
    """Whether importing ``modules`` in a fresh interpreter imports ``forbidden`` (or fails)."""
    return subprocess.run([sys.executable, "-c", IMPORTS, forbidden, *modules]).returncode != 0


@pytest.fixture(scope="module")
def layering() -> dict[str, int]:
    """Per forbidden package, the exit code of importing every module that must not import it: one interpreter
    imports ``BASE`` (none of which imports a forbidden package) and forks once per package, so the third-party
    imports (seconds of CPU) are paid once."""
    groups = [(f, [m for m, g in LAYERS if g == f]) for f in sorted({f for _, f in LAYERS})]
    code = f"BASE = {BASE!r}\nGROUPS = {groups!r}\n{FORKED}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("forbidden", sorted({f for _, f in LAYERS}))
def test_layering(forbidden, layering):
    """All modules that must not import ``forbidden`` in one forked interpreter (none does, so neither does their
    union); only on a failure one fresh interpreter each, to name the culprits (~2 s of CPU each)."""
    modules = [m for m, f in LAYERS if f == forbidden]
    if layering[forbidden] != 0:
        culprits = [m for m in modules if _imports([m], forbidden)]
        pytest.fail(f"{', '.join(culprits) or 'their union'} imports {forbidden}")


def test_an_analog_aggregation_with_cells_is_immutable_picklable_and_checked():
    from dataclasses import FrozenInstanceError

    from wirelessfl.seam import AnalogAggregation, AnalogCell

    cells = (AnalogCell(3, {0, 1}, 0.5), AnalogCell(5, set(), 0.0), AnalogCell(8, {1}, 0.25))
    analog = AnalogAggregation({0, 1}, {2}, 0.4, 0.1, cells)
    assert pickle.loads(pickle.dumps(analog)) == analog and hash(analog) == hash(pickle.loads(pickle.dumps(analog)))
    with pytest.raises(FrozenInstanceError):
        analog.cells = ()
    with pytest.raises(ValueError, match=r"passed \[0, 1, 2\] must be the devices of the cells, \[0, 1\]"):
        AnalogAggregation({0, 1, 2}, set(), 0.4, 0.1, cells)
    with pytest.raises(ValueError, match=r"cells must be AnalogCells with increasing stops > 0, got stops \[3, 3\]"):
        AnalogAggregation({0}, set(), 0.4, 0.1, (AnalogCell(3, {0}, 0.5), AnalogCell(3, {0}, 0.5)))
    with pytest.raises(ValueError, match=r"analog cell: noise_var must be a finite variance >= 0, got -1.0"):
        AnalogCell(3, {0}, -1.0)
