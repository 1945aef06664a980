"""scenario.yaml writes every default (config.resolved), while the fingerprints that stamp checkpoints and name
sweep units hash the earlier form (config.canonical), so run folders written before keep resuming."""

from __future__ import annotations

import yaml
from pydantic import BaseModel

from wirelessfl.config import Scenario, canonical, dump_scenario, is_dump_of, parse_scenario, resolved, scenario_fingerprint
from wirelessfl.run.curves import curves_of
from wirelessfl.run.keys import unit_fingerprint
from wirelessfl.sweep.grid import unit_key

PINNED = {
    "name": "fp", "rounds": 3, "data": {"clients": 4}, "algorithms": [{"name": "fedavg"}, {"name": "local"}],
    "networks": [{"preset": "wired"}, {"name": "cell", "physical": {"cell_radius_m": 300}, "energy": {"p_tx_w": 2.5}}],
}  # fmt: skip


def _field_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    paths = []
    for name, info in model.model_fields.items():
        paths.append(prefix + name)
        nested = info.annotation if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel) else None
        if nested is not None:
            paths += _field_paths(nested, f"{prefix}{name}.")
    return paths


def _has(data: dict, path: str) -> bool:
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def test_the_resolved_scenario_writes_every_field_of_the_schema():
    written = yaml.safe_load(dump_scenario(parse_scenario(PINNED)))
    missing = [path for path in _field_paths(Scenario) if not _has(written, path)]
    assert missing == []
    assert all(set(algo) == {"name", "label", "params", "variants", "training"} for algo in written["algorithms"])
    assert (written["eval_last"], written["eval_train"], written["tune"], written["tuned_from"]) == (0, False, None, None)
    assert [written["training"][k] for k in ("lr_schedule", "scheduling", "compression", "aggregation")] == [None] * 4


def test_fingerprints_and_sweep_unit_keys_are_those_of_the_version_before_every_default_was_written():
    """Computed by the code before this change: a changed value means old run folders and sweeps stop resuming."""
    scenario = parse_scenario(PINNED)
    assert scenario_fingerprint(scenario) == "9c17ffb147787192a19eb8b876c88b32b108c4e74be98682e9844bb0b7ed2924"
    assert unit_fingerprint(scenario, curves_of(scenario)[0], 0) == (
        "09db5b9ba1df6e6e2c94806c5bf71c9ee39aa58fa5f064fe5ddd8b945aa28fa7"
    )
    assert unit_key(scenario) == "732f9cb1fa2e8bd9"


def test_a_written_scenario_loads_back_to_the_same_file_and_fingerprint():
    scenario = parse_scenario(PINNED)
    again = parse_scenario(yaml.safe_load(dump_scenario(scenario)))
    assert dump_scenario(again) == dump_scenario(scenario)
    assert scenario_fingerprint(again) == scenario_fingerprint(scenario)
    assert unit_key(again) == unit_key(scenario)
    assert canonical(again) == canonical(scenario)


def test_a_folder_written_in_the_earlier_form_still_holds_the_same_scenario():
    scenario = parse_scenario(PINNED)
    earlier = yaml.safe_dump(canonical(scenario), sort_keys=False)
    assert earlier != dump_scenario(scenario)
    assert is_dump_of(earlier, scenario) and is_dump_of(dump_scenario(scenario), scenario)
    assert not is_dump_of(dump_scenario(parse_scenario({**PINNED, "rounds": 4})), scenario)
    assert scenario_fingerprint(parse_scenario(yaml.safe_load(earlier))) == scenario_fingerprint(scenario)


def test_resolved_keeps_the_schema_order_and_canonical_leaves_out_only_the_optional_defaults():
    scenario = parse_scenario(PINNED)
    assert list(resolved(scenario)) == list(Scenario.model_fields)
    left_out = set(resolved(scenario)) - set(canonical(scenario))
    assert left_out == {"client_store", "eval_last", "eval_train", "evaluation", "tune", "tuned_from"}
