"""docs/scenario-reference.md has one row for every field a scenario file accepts, and no row for a field
that does not exist: a field added to the schema without a row here fails, as does a row left behind by a
removed or renamed field.

The fields come from the code that reads them: the pydantic models from ``config.Scenario`` down, and for a
``networks:`` entry the keys its readers accept, taken from their own unknown-key errors (``preset`` and
``link_budget`` included, which are keys of the readers rather than fields of the dataclasses)."""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from wirelessfl.config import Scenario, _UniqueKeyLoader
from wirelessfl.network.energy import EnergyProfile, split_entry
from wirelessfl.network.profile import NrSettings, OllaSettings, PhysicalChannel, SystemProfile
from wirelessfl.network.topology import Topology

PAGE = Path(__file__).resolve().parents[1] / "docs" / "scenario-reference.md"
ROW = re.compile(r"^\| `([A-Za-z_][A-Za-z0-9_.\[\]]*)` \|")


def documented() -> list[str]:
    """The first cell of every table row of the page that names a field."""
    return [m.group(1) for line in PAGE.read_text(encoding="utf-8").splitlines() if (m := ROW.match(line))]


def _models(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models(arg)]


def _schema_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field path of a pydantic model; a section that is always present (``data``, ``training``) is
    documented by its fields, an optional block or a list of blocks by its own row too."""
    paths = []
    for name, info in model.model_fields.items():
        nested = _models(info.annotation)
        always_there = isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
        if not always_there:
            paths.append(prefix + name)
        for sub in nested:
            listed = typing.get_origin(info.annotation) is list
            paths += _schema_paths(sub, f"{prefix}{name}{'[]' if listed else ''}.")
    return paths


def _accepted_keys(read, marker: str) -> list[str]:
    """The keys a reader accepts, from the one-line error it gives for an unknown key."""
    with pytest.raises(ValueError) as err:
        read({"no_such_key": 1})
    message = str(err.value)
    assert marker in message, message
    return [key.strip() for key in message.split(marker, 1)[1].split(",")]


def network_paths() -> list[str]:
    profile = _accepted_keys(SystemProfile.from_dict, "allowed keys: ")
    assert split_entry({"energy": {}, "name": "x"}) == ({"name": "x"}, {})  # a networks: entry's energy key
    paths = [f"networks[].{key}" for key in [*profile, "energy"]]
    paths += [f"networks[].physical.{key}" for key in _accepted_keys(PhysicalChannel.from_dict, "allowed keys: ")]
    paths += [f"networks[].physical.nr.{key}" for key in _accepted_keys(NrSettings.from_dict, "allowed keys: ")]
    paths += [f"networks[].physical.nr.olla.{key}" for key in _accepted_keys(OllaSettings.from_dict, "allowed keys: ")]
    paths += [f"networks[].physical.topology.{key}" for key in _accepted_keys(Topology.from_dict, "allowed keys: ")]
    paths += [f"networks[].energy.{key}" for key in _accepted_keys(EnergyProfile.from_dict, "allowed: ")]
    return paths


def every_field() -> list[str]:
    return [*_schema_paths(Scenario), *network_paths()]


def test_the_readers_keys_are_found():
    """The walk itself: a broken walk would pass the checks below with too few fields."""
    fields = every_field()
    for path in ("name", "training.scheduling.k", "algorithms[].variants", "tune.pruner", "networks",
                 "networks[].preset", "networks[].physical.link_budget", "networks[].physical.nr.mcs_table",
                 "networks[].physical.topology.isd_m", "networks[].physical.tdd_pattern", "networks[].energy.budget_j"):  # fmt: skip
        assert path in fields, path
    assert "data" not in fields and "data.clients" in fields


def test_every_field_has_a_row_in_the_scenario_reference():
    rows = set(documented())
    missing = [path for path in every_field() if path not in rows]
    assert missing == [], f"fields without a row in {PAGE.name}: {', '.join(missing)}"


def test_every_row_of_the_scenario_reference_names_a_field():
    fields = set(every_field())
    unknown = [path for path in documented() if path not in fields]
    assert unknown == [], f"rows of {PAGE.name} naming no field: {', '.join(unknown)}"


def test_each_field_has_one_row():
    rows = documented()
    assert sorted({r for r in rows if rows.count(r) > 1}) == []


def test_the_row_check_fails_on_a_missing_or_extra_row(tmp_path, monkeypatch):
    """Against a copy of the page with one row taken out and one made up: the checks above can fail."""
    text = PAGE.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `training.lr` |"))
    edited = text.replace(row + "\n", "") + "\n| `training.learning_rate` | number | 0.1 | > 0 | made up |\n"
    copy = tmp_path / "scenario-reference.md"
    copy.write_text(edited, encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "PAGE", copy)
    rows = set(documented())
    assert "training.lr" in set(every_field()) - rows
    assert "training.learning_rate" in rows - set(every_field())


def _code_defaults() -> dict[str, object]:
    """Field path -> its default, for the fields whose default is one number, string, bool or null."""
    import dataclasses

    out: dict[str, object] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            if info.default_factory is None and not info.is_required():
                out[prefix + name] = info.default
            for sub in _models(info.annotation):
                walk(sub, f"{prefix}{name}{'[]' if typing.get_origin(info.annotation) is list else ''}.")

    walk(Scenario, "")
    for cls, prefix in ((SystemProfile, "networks[]."), (PhysicalChannel, "networks[].physical."), (NrSettings, "networks[].physical.nr."),
                        (OllaSettings, "networks[].physical.nr.olla."),
                        (Topology, "networks[].physical.topology."), (EnergyProfile, "networks[].energy.")):  # fmt: skip
        for field in dataclasses.fields(cls):
            if field.default is not dataclasses.MISSING:
                out[prefix + field.name] = field.default
    return {path: value for path, value in out.items() if value is None or isinstance(value, (bool, int, float, str))}


def test_the_defaults_column_gives_the_codes_defaults():
    """A row's default (its first word, backticks dropped, read as YAML) is the code's, for one-value defaults;
    ``(...)`` cells (required, the preset's) are words, not values."""
    import math

    import yaml

    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if ROW.match(line):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows[cells[0].strip("`")] = cells[2]
    wrong = []
    for path, default in _code_defaults().items():
        cell = rows[path]
        if cell.startswith("("):
            continue
        written = cell.split(" (")[0].replace("`", "").replace("−", "-")
        value = yaml.load(written, Loader=_UniqueKeyLoader)  # the loader scenarios are read with: 1e-8 is a number
        if isinstance(default, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
            same = math.isclose(value, default) or (math.isinf(default) and math.isinf(value))
        elif isinstance(default, float) and math.isinf(default):
            same = written == "inf"
        else:
            same = value == default and type(value) is type(default) or (isinstance(default, float) and value == default)
        if not same:
            wrong.append(f"{path}: page {cell!r}, code {default!r}")
    assert wrong == []
