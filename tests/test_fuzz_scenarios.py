"""Hostile scenario files through the command line: every generated file validates or is refused in one line.

Hypothesis mutates a small valid digits scenario (drops keys, wrong types, NaN,
infinities, huge and negative numbers, nested junk, unknown keys) and the YAML
text itself (tabs, anchors and aliases, tags, a second document, truncation),
then runs ``wirelessfl validate`` (and a few ``simulate --rounds 1``) in an
empty folder. The contract of the CLI: exit code 0 or 2, never a traceback, at
most one ``error:`` line, and nothing written for a refused file.
"""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
from pathlib import Path
from typing import Any

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
