"""Scenario files: every malformed input gets its own clear, located message."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import yaml

from wirelessfl.config import ScenarioError, apply_settings, canonical, dump_scenario, load_scenario, parse_scenario

VALID = {
    "name": "tiny",
    "rounds": 2,
    "data": {"dataset": "digits", "clients": 4, "samples": {"per_client": 40}},
    "algorithms": [{"name": "fedavg"}],
    "networks": [{"preset": "wired"}],
}


def with_change(path: str, value, base=VALID):
    """A copy of ``base`` with ``path`` (dotted, [i] for lists) set; value DELETE removes it."""
    import copy

    doc = copy.deepcopy(base)
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    node = doc
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
    last = parts[-1]
    key = int(last[1:-1]) if last.startswith("[") else last
    if value is DELETE:
        del node[key]
    else:
        node[key] = value
    return doc


DELETE = object()

MALFORMED = [
    ("name", DELETE, r"name: required field is missing"),
    ("algorithms", DELETE, r"algorithms: required field is missing"),
    ("colour", "blue", r"colour: unknown key"),
    ("name", "my run", r"name: String should match pattern"),
    ("rounds", 0, r"rounds: Input should be greater than or equal to 1 \(got 0\)"),
    ("rounds", "ten", r"rounds: Input should be a valid integer"),
    ("seeds", [], r"seeds: List should have at least 1 item"),
    ("target_accuracy", 1.5, r"target_accuracy: Input should be less than or equal to 1 \(got 1.5\)"),
    ("device", "tpu", r"device: Input should be 'auto', 'cpu' or 'cuda' \(got 'tpu'\)"),
    ("eval_every", -1, r"eval_every: Input should be greater than or equal to 1"),
    ("data.dataset", "imagenet21k", r"data.dataset: unknown dataset 'imagenet21k'; allowed: .*digits"),
    ("data.clients", 0, r"data.clients: Input should be greater than or equal to 1 \(got 0\)"),
    ("data.split", [0.5, 0.2, 0.2], r"data.split: train/val/test fractions must be .* summing to 1; got \[0.5, 0.2, 0.2\]"),
    ("data.split", [0.5, 0.5], r"data.split: must list 3 fractions \[train, val, test\]; got \[0.5, 0.5\]"),
    ("data.shuffle", True, r"data.shuffle: unknown key"),
    ("data.partition", [], r"data.partition: List should have at least 1 item"),
    ("data.partition", [{"name": "zipf"}], r"data.partition\[0\].name must be one of: dirichlet, iid, .*; got 'zipf'"),
    ("model.name", "resnet152", r"model.name: unknown model 'resnet152'; allowed: .*lenet5"),
    ("training.lr", -0.1, r"training.lr: Input should be greater than 0 \(got -0.1\)"),
    ("training.momentum", 1.0, r"training.momentum: Input should be less than 1 \(got 1.0\)"),
    ("training.participation", 0, r"training.participation: Input should be greater than 0"),
    ("training.batch_size", 2.5, r"training.batch_size: Input should be a valid integer"),
    ("training.optimizer", "rmsprop", r"training.optimizer: Input should be 'sgd', 'adam' or 'adamw' \(got 'rmsprop'\)"),
    ("training", {"optimizer": "adam", "nesterov": True}, r"^s.yaml: training.nesterov: needs optimizer: sgd with momentum > 0$"),
    ("training.betas", [0.9], r"training.betas: List should have at least 2 items"),
    ("training.betas", [0.9, 1.0], r"training.betas\[1\]: Input should be less than 1 \(got 1.0\)"),
    ("training.clip_norm", 0, r"training.clip_norm: Input should be greater than 0"),
    ("training.lr_schedule", {"milestones": [150, 100]}, r"training.lr_schedule.milestones: must increase strictly, got \[150, 100\]$"),
    ("training.lr_schedule", {"milestones": [100], "gamma": 0}, r"training.lr_schedule.gamma: Input should be greater than 0"),
    ("training.lr_schedule", {"milestones": []}, r"training.lr_schedule.milestones: List should have at least 1 item"),
    ("training.momentum_decay", 0.5, r"training.momentum_decay: unknown key"),
    ("algorithms[0].name", "fedbogus", r"algorithms\[0\]: .*unknown algorithm 'fedbogus'; allowed: .*fedavg.* or 'package.module:Class'$"),
    ("algorithms[0].params", {"mu": 0.1}, r"algorithms\[0\]: .*fedavg has no parameter 'mu'; allowed: none"),
    ("algorithms[0].weights", 3, r"algorithms\[0\].weights: unknown key"),
    ("algorithms", [], r"algorithms: List should have at least 1 item"),
    ("algorithms", [{"name": "fedavg"}, {"name": "fedavg"}], r"curve names must be unique, repeated: fedavg \(set `label:`\)"),
    ("networks", [], r"networks: List should have at least 1 item"),
    ("networks", [{"preset": "wired"}, {"preset": "wired"}], r"networks: profile names must be unique, repeated: wired \(set `name:`\)"),
    ("networks[0]", {"preset": "5g-mmwave"}, r"networks\[0\]: preset must be one of 'slow-ul-unreliable', 'fast-ul-reliable', 'wired', got '5g-mmwave'"),
    ("networks[0]", {"preset": "wired", "rho": -1}, r"networks\[0\]: rho must be > 0, got -1.0"),
    ("networks[0]", {"preset": "wired", "colour": 1}, r"networks\[0\]: unknown profile keys \['colour'\]; allowed keys: preset, name, rho"),
    ("rounds", True, r"rounds: Input should be a valid integer \(got True\)"),
    ("eval_every", 2.0, r"eval_every: Input should be a valid integer \(got 2.0\)"),
    ("training.lr", "0.1", r"training.lr: Input should be a valid number \(got '0.1'\)"),
    ("data.download", "yes", r"data.download: Input should be a valid boolean \(got 'yes'\)"),
    ("seeds", [0, 0], r"seeds: must list each seed once; repeated: 0$"),
    ("seeds", [-1], r"seeds\[0\]: Input should be greater than or equal to 0 \(got -1\)"),
    ("data", ["digits"], r"data: must be a mapping of keys to values \(\{key: value, ...\}\), got a list$"),
    ("algorithms[0]", "fedavg", r"algorithms\[0\]: must be a mapping of keys to values \(\{key: value, ...\}\), got a string$"),
    ("algorithms[0]", {"name": "ucfl", "variants": {"streams": 4}}, r"algorithms\[0\].variants.streams: Input should be a valid list \(got 4\)"),
    ("algorithms[0]", {"name": "ucfl", "variants": {"streams": []}}, r"algorithms\[0\]: variants.streams must list at least one value$"),
    ("networks[0]", {"preset": "wired", "deadline": -1}, r"networks\[0\]: deadline must be > 0 and finite, or null for no deadline, got -1.0$"),
    ("networks[0]", {"preset": "wired", "physical": {"path_loss_exponent": 1e6}},
     r"networks\[0\]: physical.path_loss_exponent must be in \[1.5, 8\] \(1.6-1.8 in corridors, 2 in free space, 2.7-6 in cities and buildings\), got 1e\+06$"),
    ("networks[0]", {"preset": "wired", "physical": {"ue_power_dbm": -1e300}},
     r"networks\[0\]: physical.ue_power_dbm must be in \[-40, 40\] \(0-10 dBm IoT devices, 23-26 dBm phones\), got -1e\+300$"),
]


def test_valid_scenario_parses_with_defaults():
    sc = parse_scenario(VALID)
    assert sc.training.lr == 0.1 and sc.training.momentum == 0.9
    assert [p.name for p in sc.profiles()] == ["wired"]


@pytest.mark.parametrize(("path", "value", "message"), MALFORMED, ids=[f"{p}={v!r}"[:60] for p, v, _ in MALFORMED])
def test_malformed_scenario_names_the_field(path, value, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(with_change(path, value), source="s.yaml")


def test_each_malformed_case_has_its_own_message():
    messages = set()
    for path, value, _ in MALFORMED:
        with pytest.raises(ScenarioError) as info:
            parse_scenario(with_change(path, value))
        messages.add(str(info.value))
    assert len(messages) == len(MALFORMED) >= 20


def test_top_level_must_be_a_mapping():
    with pytest.raises(ScenarioError, match=r"s.yaml: the top level must be a mapping of fields .*got list"):
        parse_scenario([1, 2], source="s.yaml")


BAD_FILES = [
    ("tabs.yaml", b"name: t\nalgorithms:\n\t- {name: fedavg}\n", r"tabs.yaml: not valid YAML at line 3, column 1: found character '\\t' that cannot start any token$"),
    ("dup.yaml", b"name: t\nrounds: 3\nrounds: 4\nalgorithms: [{name: fedavg}]\n", r"dup.yaml: not valid YAML at line 3, column 1: duplicate key 'rounds'$"),
    ("nested-dup.yaml", b"name: t\nalgorithms: [{name: fedavg}]\ndata: {clients: 4, clients: 5}\n", r"nested-dup.yaml: not valid YAML at line 3, column 20: duplicate key 'clients'$"),
    ("empty.yaml", b"", r"empty.yaml: the file is empty; a scenario needs at least name: and algorithms:$"),
    ("comment.yaml", b"# nothing here\n", r"comment.yaml: the file is empty; a scenario needs at least name: and algorithms:$"),
    ("latin1.yaml", b"name: caf\xe9\nalgorithms: [{name: fedavg}]\n", r"latin1.yaml: not a UTF-8 text file \(byte 9: invalid continuation byte\)$"),
    ("two-docs.yaml", b"name: t\nalgorithms: [{name: fedavg}]\n---\nname: u\n", r"two-docs.yaml: not valid YAML at line 3, column 1: but found another document$"),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_FILES, ids=[n for n, _, _ in BAD_FILES])
def test_malformed_files_are_one_clear_error(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_a_directory_is_not_a_scenario(tmp_path):
    folder = tmp_path / "d.yaml"
    folder.mkdir()
    with pytest.raises(ScenarioError, match=r"d.yaml: not a file \(give the path of a scenario YAML file\)$"):
        load_scenario(folder)


def test_yaml_merge_keys_may_override_without_counting_as_duplicates(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("name: t\nalgorithms:\n  - &avg {name: fedavg, label: a}\n  - {<<: *avg, label: b}\n")
    assert [a.label for a in load_scenario(path).algorithms] == ["a", "b"]


def test_yaml_syntax_error_gives_line_and_column(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nalgorithms: [fedavg\n")
    with pytest.raises(ScenarioError, match=r"bad.yaml: not valid YAML at line \d+, column \d+"):
        load_scenario(path)


def test_yaml_is_loaded_safely(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("name: !!python/object/apply:os.system ['true']\nalgorithms: [{name: fedavg}]\n")
    with pytest.raises(ScenarioError, match=r"not valid YAML"):
        load_scenario(path)


def test_missing_file_is_one_clear_error(tmp_path):
    with pytest.raises(ScenarioError, match=r"nope.yaml: no such scenario file"):
        load_scenario(tmp_path / "nope.yaml")


def test_variants_expand_into_named_curves():
    doc = with_change("algorithms", [{"name": "fedavg", "label": "avg"}, {"name": "local"}])
    sc = parse_scenario(doc)
    assert [c for a in sc.algorithms for _, c, _ in a.expand()] == ["avg", "local"]


def test_resolved_scenario_round_trips(tmp_path):
    sc = parse_scenario(VALID)
    path = tmp_path / "resolved.yaml"
    path.write_text(dump_scenario(sc))
    again = load_scenario(path)
    assert again.model_dump(exclude={"networks"}) == sc.model_dump(exclude={"networks"})
    assert again.profiles() == sc.profiles()
    assert dump_scenario(again) == dump_scenario(sc)
    assert yaml.safe_load(path.read_text())["training"]["lr"] == 0.1


def test_an_infinite_sweep_value_round_trips_through_the_resolved_scenario(tmp_path):
    """sweep.yaml is the resolved scenario: mu = .inf (reliable devices) must come back as inf, not null."""
    sc = parse_scenario({**VALID, "networks": [{"name": "cell", "rho": 1.0, "mu": 0.5}], "sweep": {"mu": [float("inf"), 0.2]}})
    path = tmp_path / "sweep.yaml"
    path.write_text(dump_scenario(sc))
    assert load_scenario(path).sweep == {"mu": [float("inf"), 0.2]}


def test_the_resolved_scenario_writes_every_profile_field():
    sc = parse_scenario({**VALID, "networks": [{"preset": "wired"}, {"name": "cell", "physical": {"cell_radius_m": 500}}]})
    networks = yaml.safe_load(dump_scenario(sc))["networks"]
    fields = ["name", "rho", "t_dl", "t_min", "mu", "scale_compute_with_work", "channels", "schedule", "duplex",
              "stream_order", "deadline", "backend", "physical", "bits_per_parameter", "description"]
    assert [list(entry) for entry in networks] == [fields, fields]
    assert networks[0]["rho"] == 1.0 and networks[0]["mu"] == "inf" and networks[1]["rho"] is None
    assert networks[1]["physical"]["cell_radius_m"] == 500.0 and networks[1]["physical"]["path_loss_exponent"] == 3.5


def test_shipped_scenarios_validate():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "scenarios"
    files = sorted(root.rglob("*.yaml"))
    assert files, "no shipped scenarios found"
    for path in files:
        load_scenario(path)


def test_overrides_replace_fields(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(yaml.safe_dump(VALID)))
    sc = load_scenario(path, {"rounds": 7, "seeds": [3], "device": None})
    assert sc.rounds == 7 and sc.seeds == [3] and sc.device == "auto"


def test_readme_lists_every_field_with_its_real_default():
    from pathlib import Path

    from wirelessfl.config import AlgorithmConfig, DataConfig, ModelConfig, Scenario, TrainingConfig

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Scenario file\n.*?```yaml\n(.*?)```", readme, re.S).group(1)
    doc = yaml.safe_load(block)
    sections = {None: (Scenario, doc), "data": (DataConfig, doc["data"]), "model": (ModelConfig, doc["model"])}
    sections.update({"training": (TrainingConfig, doc["training"]), "algorithms": (AlgorithmConfig, doc["algorithms"][0])})
    for section, (model, shown) in sections.items():
        assert list(shown) == list(model.model_fields), section
    required = {"name": doc["name"], "algorithms": [{"name": doc["algorithms"][0]["name"]}]}
    assert parse_scenario(doc) == parse_scenario(required)


SHIPPED = sorted((Path(__file__).parents[1] / "scenarios").rglob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_scenarios_pass_the_schema(path):
    sc = load_scenario(path)
    assert sc.name and sc.algorithms and sc.profiles()


def test_every_scenario_folder_is_covered():
    assert {p.parent.name for p in SHIPPED} == {"scenarios", "paper", "pilot"}
    assert len(SHIPPED) >= 7


def test_apply_settings_sets_nested_fields_lists_and_new_keys_without_touching_the_input():
    raw = {"training": {"lr": 0.1}, "algorithms": [{"name": "ucfl"}]}
    out = apply_settings(raw, ["training.lr=0.01", "algorithms.0.params.streams=[1, 4]", "rounds=3", "description=a=b"])
    assert out == {
        "training": {"lr": 0.01}, "algorithms": [{"name": "ucfl", "params": {"streams": [1, 4]}}],
        "rounds": 3, "description": "a=b",
    }
    assert raw == {"training": {"lr": 0.1}, "algorithms": [{"name": "ucfl"}]}


@pytest.mark.parametrize(
    "setting, message",
    [
        ("training.lr", "--set training.lr: expected PATH=VALUE, e.g. training.lr=0.01"),
        ("training..lr=1", "--set training..lr=1: expected PATH=VALUE, e.g. training.lr=0.01"),
        ("algorithms.3.name=x", "--set algorithms.3.name=x: algorithms.3 must be a list index from 0 to 0"),
        ("algorithms.first=x", "--set algorithms.first=x: algorithms.first must be a list index from 0 to 0"),
        ("rounds.value=3", "--set rounds.value=3: rounds is a value, not a mapping or list"),
        ("rounds=[1", "--set rounds=[1: the value is not valid YAML"),
        ("algorithms[0].params.alpha=0.2",
         "--set algorithms[0].params.alpha=0.2: a list position is a dotted index: algorithms.0.params.alpha, not algorithms[0].params.alpha"),
        ("a.b[1][2]=3", "--set a.b[1][2]=3: a list position is a dotted index: a.b.1.2, not a.b[1][2]"),
    ],
)
def test_apply_settings_rejects_malformed_settings(setting, message):
    raw = {"rounds": 2, "algorithms": [{"name": "fedavg"}], "training": {}}
    with pytest.raises(ScenarioError, match="^" + re.escape(message) + "$"):
        apply_settings(raw, [setting])


def test_optimizer_fields_reach_the_engine_and_yaml_reads_exponent_floats(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nalgorithms: [{name: fedavg}]\n"
        "training: {optimizer: adamw, lr: 1e-3, eps: 1e-6, betas: [0.8, 0.99], weight_decay: 1e-2, clip_norm: 5, keep_optimizer_state: true}\n"
    )
    training = load_scenario(path).training
    cfg = training.train_config()
    assert (cfg.optimizer, cfg.lr, cfg.eps, cfg.betas, cfg.weight_decay, cfg.clip_norm) == ("adamw", 1e-3, 1e-6, (0.8, 0.99), 1e-2, 5)
    assert training.keep_optimizer_state is True
    nesterov = parse_scenario(with_change("training.nesterov", True)).training.train_config()
    assert nesterov.nesterov and nesterov.momentum == 0.9


# Hostile inputs (infinite, NaN, huge or negative values): each refused in one line that names the field and the allowed range.
HOSTILE = [
    ("training.lr", float("inf"), r"^s.yaml: training.lr: Input should be a finite number \(got inf\)$"),
    ("training.weight_decay", float("nan"), r"^s.yaml: training.weight_decay: Input should be a finite number \(got nan\)$"),
    ("seeds", list(range(1001)), r"^s.yaml: seeds: List should have at most 1000 items after validation, not 1001$"),
    ("seeds", [2**63], r"^s.yaml: seeds\[0\]: Input should be less than or equal to 9223372036854775807 \(got 9223372036854775808\)$"),
    ("data.clients", 100_001, r"^s.yaml: data.clients: Input should be less than or equal to 100000 \(got 100001\)$"),
    ("description", "x" * 10_001, r"^s.yaml: description: String should have at most 10000 characters \(got 'xxx[x]*\.\.\.\)$"),
    ("name", "n" * 101, r"^s.yaml: name: String should have at most 100 characters \(got 'nnn[n]*\.\.\.\)$"),
    ("networks", [{"preset": "wired", "name": f"w{i}"} for i in range(101)], r"^s.yaml: networks: List should have at most 100 items"),
    ("networks[0]", {"preset": []}, r"^s.yaml: networks\[0\]: a value of the wrong type in \{'preset': \[\]\} \(unhashable type: 'list'\)$"),
    ("data.partition", [{"name": ["iid"]}], r"^s.yaml: data.partition: a value of the wrong type in \[\{'name': \['iid'\]\}\] \(unhashable type: 'list'\)$"),
    ("algorithms[0].params", {1: 2}, r"^s.yaml: algorithms\[0\].params: keys must be strings, got 1$"),
    ("algorithms[0].label", "x" * 101, r"^s.yaml: algorithms\[0\]: curve name 'xxx[x]*\.\.\. is 101 bytes \(UTF-8\), at most 100 \(it names files; "),
    (
        "algorithms",
        [{"name": "ucfl", "variants": {"streams": list(range(1, 33)), "sigma_batches": list(range(1, 33))}}],
        r"^s.yaml: algorithms\[0\]: variants: the grid has 1024 curves \(32 x 32\); at most 1000 allowed$",
    ),
    (
        "algorithms",
        [{"name": "fedavg", "label": f"a{i}"} for i in range(999)] + [{"name": "ucfl", "variants": {"streams": [1, 2]}}],
        r"^s.yaml: algorithms: 1001 curves in all \(algorithms x variants\); at most 1000 allowed$",
    ),
    ("sweep", {"rho": list(range(40)), "mu": list(range(40))}, r"^s.yaml: sweep: the grid has 1600 points \(40 x 40\); at most 1000 allowed$"),
    (
        "algorithms",
        [{"name": "ucfl", "params": {"streams": 5}}],
        r"^s.yaml: algorithms\[0\].params.streams: 5 is more than one stream per user \(data.clients = 4\); at most 4$",
    ),
    (
        "algorithms",
        [{"name": "ucfl", "variants": {"streams": [2, 9]}}],
        r"^s.yaml: algorithms\[0\].variants.streams: 9 is more than one stream per user \(data.clients = 4\); at most 4$",
    ),
    (
        "algorithms",
        [{"name": "fedfomo", "params": {"models_per_client": 4}}],
        r"^s.yaml: algorithms\[0\].params.models_per_client: 4 is more than the other users a client can download from "
        r"\(data.clients = 4\); at most 3$",
    ),
    ("algorithms", [{"name": "fedavg"}, {"name": "fedavg"}], r"^s.yaml: algorithms: curve names must be unique, repeated: fedavg \(set `label:`\)$"),
]


@pytest.mark.parametrize(("path", "value", "message"), HOSTILE, ids=[f"{p}={v!r}"[:50] for p, v, _ in HOSTILE])
def test_hostile_values_are_refused_in_one_line_naming_the_field(path, value, message):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(with_change(path, value), source="s.yaml")
    assert re.search(message, str(info.value)), str(info.value)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_streams_equal_to_the_number_of_users_is_allowed():
    assert parse_scenario(with_change("algorithms", [{"name": "ucfl", "params": {"streams": 4}}])).algorithms[0].params == {"streams": 4}


ALIAS_BOMB = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(9))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("big.yaml", b"name: t\nalgorithms: [{name: fedavg}]\ndescription: " + b"x" * 1_000_000 + b"\n", r"big.yaml: the file is over 1,000,000 bytes; a scenario is a short file of settings$"),
        ("bomb.yaml", ("name: t\n" + ALIAS_BOMB + "algorithms: [{name: ucfl, variants: {streams: [*l8]}}]\n").encode(), r"bomb.yaml: more than 100,000 values \(each use of a YAML alias counts\); a scenario is a short file of settings$"),
        ("deep.yaml", b"name: t\nalgorithms: [{name: fedavg}]\nx: " + b"[" * 40 + b"]" * 40 + b"\n", r"deep.yaml: x(\[0\]){32}: nested more than 32 levels deep$"),
        ("deeper.yaml", b"name: t\nalgorithms: [{name: fedavg}]\nx: " + b"[" * 100_000 + b"]" * 100_000 + b"\n", r"deeper.yaml: not valid YAML: nested too deeply \(at most 32 levels\)$"),
        ("digits.yaml", b"name: t\nalgorithms: [{name: fedavg}]\nrounds: " + b"9" * 5000 + b"\n", r"digits.yaml: not valid YAML: Exceeds the limit \(4300 digits\) for integer string conversion"),
        ("key.yaml", b"name: t\nalgorithms: [{name: fedavg}]\n1: 3\n", r"key.yaml: \(top level\): keys must be strings, got 1$"),
        ("inf.yaml", b"name: t\nalgorithms: [{name: fedavg}]\ntraining: {lr: .inf}\n", r"inf.yaml: training.lr: Input should be a finite number \(got inf\)$"),
    ],
    ids=lambda v: v if isinstance(v, str) and v.endswith(".yaml") else "",
)
def test_oversized_or_malformed_files_are_refused_before_validation(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_a_bad_set_is_reported_with_the_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(VALID))
    with pytest.raises(ScenarioError, match=r"^" + re.escape(f"{path}: --set rounds.value=3: rounds is a value, not a mapping or list") + "$"):
        load_scenario(path, settings=["rounds.value=3"])


@pytest.mark.parametrize(
    ("algorithms", "data", "message"),
    [
        ([{"name": "ucfl", "variants": {"streams": [2, 0]}}], {}, "s.yaml: algorithms[0].variants.streams: must be a positive int, 'm', 'all' or 'auto', got 0"),
        (
            [{"name": "ifca", "label": "a", "params": {"clusters": 2}}, {"name": "ifca", "params": {"clusters": 0}}],
            {},
            "s.yaml: algorithms[1].params.clusters: must be an int >= 1, got 0",
        ),
        ([{"name": "ifca"}], {"clients": 2}, "s.yaml: algorithms[0].params.clusters: 3 is more than one cluster per user (data.clients = 2); at most 2"),
        ([{"name": "fedavg"}], {"partition": [{"name": "dirichlet", "alpha": -1}]}, "s.yaml: data.partition[0] (dirichlet): alpha must be a positive finite number; got -1"),
        ([{"name": "fedavg"}], {"samples": {"per_client": 5, "reuses": 2}}, "s.yaml: data.samples: unknown key 'reuses'; allowed: per_client, total, distribution, sigma, reuse"),
        ([{"name": "fedavg"}], {"samples": {"per_client": 5, "reuse": 0}}, "s.yaml: data.samples.reuse must be a positive integer (how many clients may share a sample); got 0"),
        ([{"name": "fedavg"}], {"samples": {"total": 50, "reuse": 2}}, "s.yaml: data.samples.reuse needs per_client (each pass over the pool deals whole clients of n samples); got {'total': 50, 'reuse': 2}"),
        ([{"name": "fedavg"}], {"samples": {"total": -3}}, "s.yaml: data.samples.total must be a positive integer or 'all'; got -3"),
        ([{"name": "fedavg"}], {"samples": {"total": 90, "distribution": "lognormal", "sigma": -1}}, "s.yaml: data.samples.sigma must be a finite number >= 0; got -1"),
        ([{"name": "fedavg"}], {"samples": [100]}, "s.yaml: data.samples must be a mapping like {'per_client': 80} or {'total': 10000}; got [100]"),
    ],
)
def test_schema_and_preflight_name_the_file_and_the_parameter(algorithms, data, message):
    from wirelessfl.run.preflight import preflight

    doc = {**VALID, "model": {"name": "mlp", "options": {"hidden": [4]}}, "algorithms": algorithms, "data": {**VALID["data"], **data}}
    with pytest.raises(ScenarioError) as info:
        preflight(parse_scenario(doc, "s.yaml"), "s.yaml")
    assert str(info.value) == message


def test_an_lr_schedule_is_multistep_by_round_and_null_in_the_resolved_scenario_without_one():
    """FedEM's multi_step: milestones 100 and 150 of 200 rounds, gamma 0.1: rounds 1-100 at lr, 101-150 at lr/10,
    151-200 at lr/100. Without a schedule the resolved scenario writes it null and the fingerprinted form has
    no such key (fingerprints stay)."""
    schedule = parse_scenario(with_change("training.lr_schedule", {"milestones": [100, 150]})).training.lr_schedule
    assert [schedule.factor(r) for r in (1, 100, 101, 150, 151, 200)] == [1.0, 1.0, 0.1, 0.1, 0.1**2, 0.1**2]
    assert "  lr_schedule: null\n" in dump_scenario(parse_scenario(VALID))
    assert "lr_schedule" not in canonical(parse_scenario(VALID))["training"]
    assert "lr_schedule" in dump_scenario(parse_scenario(with_change("training.lr_schedule", {"milestones": [3]})))


def test_first_line_cuts_only_at_a_newline():
    from wirelessfl.config import first_line

    assert first_line("model.\t\x85: unknown key\nmore") == "model.\t\x85: unknown key"
    assert first_line("a\u2028b\r\nc") == "a\u2028b"
    assert first_line("  ", "ValueError") == "ValueError"


def test_the_networks_are_parsed_once_into_typed_profiles(monkeypatch):
    from wirelessfl.network import SystemProfile

    doc = {**VALID, "networks": [{"preset": "wired"}, {"preset": "wired", "name": "fast", "rho": 0.5}]}
    scenario = parse_scenario(doc)
    expected = [SystemProfile.from_dict({"preset": "wired"}), SystemProfile.from_dict({"preset": "wired", "name": "fast", "rho": 0.5})]

    def refuse(*args, **kwargs):
        raise AssertionError("a profile parsed again")

    monkeypatch.setattr(SystemProfile, "from_dict", refuse)
    assert scenario.profiles() == expected and scenario.profiles() == expected
    assert all(isinstance(profile, SystemProfile) for profile in scenario.profiles())
