"""Hostile scenario files through the command line: every generated file validates or is refused in one line.

Hypothesis mutates a small valid digits scenario (drops keys, wrong types, NaN,
infinities, huge and negative numbers, nested junk, unknown keys) and the YAML
text itself (tabs, anchors and aliases, tags, a second document, truncation),
then runs ``wirelessfl validate`` (and a few ``simulate --rounds 1``) in an
empty folder. The contract of the CLI: exit code 0 or 2, never a traceback, at
most one ``error:`` line, and nothing written for a refused file.

A second family aims at sizes: every field a scenario sizes something with
(clients, samples, the synthetic data's dimensions, hidden layers, rounds, batch
sizes, epochs, the cell's radius and powers, per-client counts) set at and
beyond its range, to huge numbers, to wrong types. These run in a worker process
under an address-space limit (``RLIMIT_AS``), with the available memory fixed
(``learning.data.guard.available_ram``), one example at a time with a time limit: an example
that allocates what the guards should have refused fails with a MemoryError
instead of OOM-killing the machine, and one that does not answer in time fails
as a hang. Examples are derandomized (the same ones every run); ``-m slow``
runs many more.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from wirelessfl.cli import app

runner = CliRunner()

BASE: dict[str, Any] = {
    "name": "fuzz",
    "rounds": 1,
    "seeds": [0],
    "device": "cpu",
    "checkpoint_every": 1,
    "data": {"dataset": "digits", "clients": 3, "samples": {"per_client": 20}, "partition": [{"name": "iid"}], "split": [0.6, 0.2, 0.2]},
    "model": {"name": "mlp", "options": {"hidden": [4]}},
    "training": {"batch_size": 10, "lr": 0.1, "momentum": 0.9, "optimizer": "sgd"},
    "algorithms": [{"name": "ucfl", "params": {"streams": 2}, "variants": {"temperature": [1.0]}}, {"name": "fedavg"}],
    "networks": [{"preset": "wired"}, {"preset": "slow-ul-unreliable", "name": "slow", "rho": 1.0}],
}


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key/index path in ``node`` (the places a mutation can hit)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


PATHS = _paths(BASE)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from([0, -1, 2**31, 2**63, 10**30, 10**100]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["m", "all", "auto", "digits", "mlp", "wired", "fedavg", "ucfl", "ifca", "cfl", "sgd", "iid", ""]),
)
junk = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=3), max_leaves=8
)
keys = st.sampled_from(["extra", "streams", "clusters", "hidden", "lr", "name", "preset", "1", "rounds"]) | st.text(max_size=8)


@st.composite
def mutated_documents(draw) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        node = doc
        try:
            for part in path[:-1]:
                node = node[part]
            action = draw(st.sampled_from(["delete", "replace", "add"]))
            if action == "delete":
                del node[path[-1]]
            elif action == "replace":
                node[path[-1]] = draw(junk)
            elif isinstance(node[path[-1]], dict):
                node[path[-1]][draw(keys)] = draw(junk)
            elif isinstance(node[path[-1]], list):
                node[path[-1]].append(draw(junk))
            else:
                node[path[-1]] = draw(junk)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this path
    return doc


def _dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


ODDITIES = [
    lambda text: text.replace("  ", "\t", 1),
    lambda text: "base: &b {name: fedavg}\n" + text.replace("- name: fedavg", "- *b", 1),
    lambda text: "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n"
    + text.replace("description:", "x:", 1),
    lambda text: text.replace("rounds: 1", "rounds: !!python/object/apply:os.getcwd []", 1),
    lambda text: text.replace("rounds: 1", "rounds: !!str 1", 1),
    lambda text: text.replace("rounds: 1", "rounds: !custom 1", 1),
    lambda text: text.replace("rounds: 1", "rounds: !!binary aGVsbG8=", 1),
    lambda text: text.replace("rounds: 1", "rounds: 2001-12-14t21:59:43.10-05:00", 1),
    lambda text: text.replace("rounds: 1", "rounds: !!set {a, b}", 1),
    lambda text: text.replace("rounds: 1", "rounds: 1\nrounds: 2", 1),
    lambda text: text + "---\nname: other\n",
    lambda text: "\ufeff" + text,
    lambda text: text.replace("fuzz", "fu\x00zz", 1),
    lambda text: text.replace("rounds: 1", "rounds: " + "9" * 5000, 1),
    lambda text: text.replace("rounds: 1", "rounds: " + "[" * 200 + "]" * 200, 1),
    lambda text: text.replace("rounds: 1", "? [1, 2]\n: 3\nrounds: 1", 1),
    lambda text: text.replace("rounds: 1", "<<: {rounds: 1}", 1),
    lambda text: text.replace("lr: 0.1", "lr: .inf", 1),
    lambda text: text.replace("lr: 0.1", "lr: .nan", 1),
    lambda text: text.replace("lr: 0.1", "lr: 1e400", 1),
]


@st.composite
def odd_texts(draw) -> str:
    text = _dump(draw(mutated_documents()) if draw(st.booleans()) else BASE)
    for oddity in draw(st.lists(st.sampled_from(ODDITIES), min_size=1, max_size=2)):
        text = oddity(text)
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


@contextlib.contextmanager
def _in_empty_folder():
    before = Path.cwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            yield Path(folder)
        finally:
            os.chdir(before)


def _check(text: str, command: list[str]) -> None:
    with _in_empty_folder() as folder:
        Path("s.yaml").write_text(text, encoding="utf-8")
        result = runner.invoke(app, [command[0], "s.yaml", *command[1:]])
        assert result.exception is None or isinstance(result.exception, SystemExit), (text, repr(result.exception))
        assert result.exit_code in (0, 2), (text, result.output)
        assert "Traceback" not in result.output, (text, result.output)
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) <= 1, (text, result.output)
        if result.exit_code == 2:
            assert len(errors) == 1 and result.output.strip() == errors[0], (text, result.output)
            assert sorted(p.name for p in folder.iterdir()) == ["s.yaml"], (text, result.output)


FUZZ = settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def test_the_base_scenario_validates():
    with _in_empty_folder():
        Path("s.yaml").write_text(_dump(BASE))
        result = runner.invoke(app, ["validate", "s.yaml"])
        assert result.exit_code == 0, result.output


@FUZZ
@given(mutated_documents())
def test_validate_mutated_documents(doc):
    _check(_dump(doc), ["validate"])


@FUZZ
@given(odd_texts())
def test_validate_yaml_oddities(text):
    _check(text, ["validate"])


@settings(max_examples=3, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_documents())
def test_simulate_one_round_of_mutated_documents(doc):
    _check(_dump(doc), ["simulate", "--rounds", "1", "--quiet", "--out", "run"])


# --------------------------------------------------------------------------- sizes, under an address-space limit

ROOT = Path(__file__).resolve().parents[1]
ADDRESS_SPACE = 8 * 2**30
AVAILABLE = 16_000_000_000
EXAMPLE_TIMEOUT_S = 240
WORKER = f"""
import json, os, resource, sys, tempfile
resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE}))
import wirelessfl.learning.data.guard
wirelessfl.learning.data.guard.available_ram = lambda: {AVAILABLE}
from typer.testing import CliRunner
from wirelessfl.cli import app

runner = CliRunner()
home = os.getcwd()
for line in sys.stdin:
    request = json.loads(line)
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        with open("s.yaml", "w", encoding="utf-8") as file:
            file.write(request["text"])
        try:
            result = runner.invoke(app, request["args"])
            failure = result.exception if result.exception is not None and not isinstance(result.exception, SystemExit) else None
            answer = dict(code=result.exit_code, output=result.output, files=sorted(os.listdir(".")),
                          exception=None if failure is None else repr(failure)[:2000])
        except BaseException as err:
            answer = dict(code=-1, output="", files=[], exception=repr(err)[:2000])
        os.chdir(home)
    print(json.dumps(answer), flush=True)
"""

HUGE_INTS = [0, -1, 1, 2, 3, 2**31, 10**9, 10**12, 10**18, 2**63, 10**30]
sizes = st.one_of(
    st.sampled_from(HUGE_INTS),
    st.integers(min_value=-(10**3), max_value=10**7),
    st.sampled_from([0.5, 1e9, 1e300, float("nan"), float("inf"), -float("inf"), "1e9", "big", None, True, [10**9], {"n": 1}]),
)
#: (path, what a value there sizes): every place a scenario sizes something with.
SIZE_PATHS = [
    ("data", "clients"), ("data", "samples", "per_client"), ("data", "samples", "total"),
    ("data", "options", "num_samples"), ("data", "options", "dim"), ("data", "options", "components"),
    ("model", "options", "hidden", 0), ("model", "options", "hidden", 1), ("rounds",), ("eval_every",), ("eval_last",),
    ("checkpoint_every",), ("training", "batch_size"), ("training", "local_epochs"),
    ("algorithms", 0, "params", "streams"), ("algorithms", 0, "params", "sigma_batches"), ("algorithms", 1, "params", "finetune_epochs"),
    ("networks", 0, "physical", "cell_radius_m"), ("networks", 0, "physical", "bs_power_dbm"),
    ("networks", 0, "physical", "ue_power_dbm"), ("networks", 0, "channels"), ("tune", "rounds"), ("tune", "last_rounds"),
]
SYNTHETIC = {"dataset": "synthetic", "clients": 3, "samples": {"per_client": 20}, "options": {"num_samples": 200, "dim": 8, "components": 2}}


def _set(doc: dict, path: tuple, value: Any) -> None:
    """``doc`` at ``path`` = ``value``, making the mappings on the way (``tune:``, ``physical:``) and list slots."""
    node = doc
    for part, following in zip(path[:-1], path[1:]):
        if isinstance(node, dict) and not isinstance(node.get(part), (dict, list)):
            node[part] = [] if isinstance(following, int) else {}
        node = node[part]
    if isinstance(node, list):
        node.extend([4] * (path[-1] + 1 - len(node)))
    node[path[-1]] = value


@st.composite
def sized_documents(draw) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["algorithms"] = [{"name": "ucfl", "params": {"streams": 2}}, {"name": "fedavg_ft"}]
    doc["networks"] = [{"preset": "wired", **({"physical": {}} if draw(st.booleans()) else {})}]
    if draw(st.booleans()):
        doc["data"] = copy.deepcopy(SYNTHETIC)
    for path in draw(st.lists(st.sampled_from(SIZE_PATHS), min_size=1, max_size=3, unique=True)):
        _set(doc, path, draw(sizes))
    return doc


class Worker:
    """One child process under the address-space limit that runs the command line on each example it is sent."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env, cwd=ROOT,
        )

    def run(self, text: str, args: list[str]) -> dict[str, Any]:
        self.process.stdin.write(json.dumps({"text": text, "args": args}) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], EXAMPLE_TIMEOUT_S)
        if not ready:
            self.close()
            raise AssertionError(f"no answer within {EXAMPLE_TIMEOUT_S} s (a hang): {args} on\n{text}")
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise AssertionError(f"the worker died (exit {code}; killed for memory?) on {args}:\n{text}")
        return json.loads(line)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def worker():
    running = Worker()
    yield running
    running.close()


def _check_limited(worker: Worker, doc: dict[str, Any], command: list[str]) -> None:
    text = _dump(doc)
    answer = worker.run(text, [command[0], "s.yaml", *command[1:]])
    assert answer["exception"] is None, (text, answer["exception"])
    assert answer["code"] in (0, 2), (text, answer["output"])
    assert "Traceback" not in answer["output"], (text, answer["output"])
    errors = [line for line in answer["output"].splitlines() if line.startswith("error:")]
    if answer["code"] == 2:
        assert len(errors) == 1 and answer["output"].strip() == errors[0], (text, answer["output"])
        assert answer["files"] == ["s.yaml"], (text, answer["output"], answer["files"])
    else:
        assert not errors, (text, answer["output"])


LIMITED = dict(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))


def test_the_worker_refuses_a_data_bomb_and_validates_the_base(worker):
    """The harness itself: the base validates, and the probe's 1,600 TB synthetic matrix is refused in one line."""
    _check_limited(worker, BASE, ["validate"])
    bomb = {**BASE, "data": {**SYNTHETIC, "options": {"dim": 10**9}}}
    answer = worker.run(_dump(bomb), ["validate", "s.yaml"])
    assert answer["code"] == 2 and answer["output"].startswith("error: s.yaml: memory: building the data needs about 1,600 TB"), answer


@settings(max_examples=25, **LIMITED)
@given(sized_documents())
def test_validate_sized_documents_under_a_memory_limit(worker, doc):
    _check_limited(worker, doc, ["validate"])


@settings(max_examples=4, **LIMITED)
@given(sized_documents())
def test_simulate_one_round_of_sized_documents_under_a_memory_limit(worker, doc):
    _check_limited(worker, doc, ["simulate", "--rounds", "1", "--quiet", "--out", "run"])


@pytest.mark.slow
@settings(max_examples=400, **{**LIMITED, "derandomize": False})
@given(sized_documents())
def test_validate_many_sized_documents_under_a_memory_limit(worker, doc):
    _check_limited(worker, doc, ["validate"])


@pytest.mark.slow
@settings(max_examples=60, **{**LIMITED, "derandomize": False})
@given(st.one_of(sized_documents(), mutated_documents()))
def test_simulate_one_round_of_many_documents_under_a_memory_limit(worker, doc):
    _check_limited(worker, doc, ["simulate", "--rounds", "1", "--quiet", "--out", "run"])
