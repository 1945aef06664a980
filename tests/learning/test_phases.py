"""Where the time goes: the engine's phase timer and the per-unit breakdown in runtime.json."""

from __future__ import annotations

import json

import pytest
import torch

from wirelessfl.config import parse_scenario
from wirelessfl.learning.lockstep import LockstepEngine, PhaseTimer, TrainConfig
from wirelessfl.learning.models import get_architecture
from wirelessfl.simulate import simulate


class FakeClock:
    """Reads 0, 1, 2, ...: every call is one second later."""

    def __init__(self) -> None:
        self.now = -1.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_time_goes_to_the_innermost_label():
    times = iter([0.0, 2.0, 5.0, 9.0, 10.0, 14.0])
    timer = PhaseTimer(clock=lambda: next(times))
    with timer.phase("round"):  # opens at 0
        with timer.phase("local training"):  # 2 .. 5
            pass
    # closes at 9: "round" gets 0..2 and 5..9
    with timer.phase("local training"):  # 10 .. 14, adds up
        pass
    assert timer.times() == {"round": 6.0, "local training": 7.0}
    assert sum(timer.times(reset=True).values()) == 14.0 - 0.0 - (10.0 - 9.0)
    assert timer.times() == {}


def test_an_exception_still_closes_the_label():
    times = iter([0.0, 3.0, 4.0, 6.0])
    timer = PhaseTimer(clock=lambda: next(times))
    with pytest.raises(RuntimeError):
        with timer.phase("checkpointing"):
            raise RuntimeError("disk full")
    assert not timer.active
    with timer.phase("network"):
        pass
    assert timer.times() == {"checkpointing": 3.0, "network": 2.0}


def test_sync_runs_at_every_boundary():
    calls = []
    timer = PhaseTimer(clock=FakeClock(), sync=lambda: calls.append(1))
    with timer.phase("a"):
        with timer.phase("b"):
            pass
    assert len(calls) == 4


def test_engine_entry_points_are_timed_by_name_unless_a_label_is_open():
    arch = get_architecture("mlp", (1, 8, 8), 10, hidden=(8,))
    g = torch.Generator().manual_seed(0)
    params = arch.init_flat(3, g)
    data = [(torch.rand(5, 1, 8, 8, generator=g), torch.randint(0, 10, (5,), generator=g)) for _ in range(3)]
    engine = LockstepEngine(arch)
    engine.timer = PhaseTimer(clock=FakeClock())
    # an entry point opens at t and closes at t+1; the first one also copies the data (t+1 .. t+2)
    engine.train(params, data, TrainConfig(batch_size=4), torch.Generator().manual_seed(1))  # 0 .. 3
    engine.evaluate(params, data)  # 4 .. 5: the same datasets, not copied again
    engine.full_gradient(params, data)  # 6 .. 7
    with engine.phase("ucfl estimation"):  # 8 .. 9: the calls inside are not timed by name
        engine.full_gradient(params, data)
        engine.logits(params, data)
    assert engine.phase_times(reset=True) == {
        "local training": 2.0, "data movement": 1.0, "evaluate": 1.0, "full_gradient": 1.0, "ucfl estimation": 1.0
    }
    assert engine.phase_times() == {}


def test_profile_sync_is_off_by_default_and_only_syncs_on_cuda():
    arch = get_architecture("mlp", (1, 8, 8), 10, hidden=(8,))
    engine = LockstepEngine(arch)
    assert not engine.profile_sync and engine.timer.sync is None
    engine.profile_sync = True  # a CPU engine has nothing to wait for
    assert engine.timer.sync is None


TINY = {
    "name": "tiny-phases",
    "rounds": 2,
    "checkpoint_every": 1,
    "data": {"dataset": "digits", "clients": 4, "samples": {"per_client": 20}, "partition": [{"name": "iid"}]},
    "model": {"name": "mlp", "options": {"hidden": [8]}},
    "training": {"batch_size": 10, "lr": 0.05},
    "algorithms": [{"name": "fedavg"}, {"name": "local"}],
    "networks": [{"preset": "wired"}],
    "device": "cpu",
}


def test_runtime_json_splits_each_unit_into_phases(tmp_path):
    result = simulate(parse_scenario(TINY), run_dir=tmp_path)
    assert set(result.runtime) == {"seed0__fedavg", "seed0__local"}
    for unit in result.runtime.values():
        phases = json.loads(json.dumps(unit))["phases"]
        assert {"local training", "evaluation", "network", "checkpointing", "other"} <= set(phases)
        assert all(seconds >= 0 for seconds in phases.values())
        # the phases cover the rounds (wall_s) plus round 0's evaluation and the checkpoints
        assert sum(phases.values()) >= unit["wall_s"]
        assert sum(phases.values()) - unit["wall_s"] <= phases["evaluation"] + phases["checkpointing"] + 0.05


def tiny_engine_and_data(**kwargs):
    arch = get_architecture("mlp", (1, 8, 8), 10, hidden=(8,))
    g = torch.Generator().manual_seed(0)
    data = [(torch.rand(5, 1, 8, 8, generator=g), torch.randint(0, 10, (5,), generator=g)) for _ in range(3)]
    return LockstepEngine(arch, **kwargs), arch.init_flat(3, g), data


def test_the_same_datasets_are_copied_to_the_device_once():
    engine, params, data = tiny_engine_and_data()
    # a dataset given for several slots is copied once and the slots share its offset
    x_cat, y_cat, offsets = engine._concat([data[1], data[0], data[1]])
    assert offsets == [0, 5, 0] and len(x_cat) == 10
    assert torch.equal(x_cat[:5], data[1][0]) and torch.equal(y_cat[5:], data[0][1])
    # any subset, order or repetition of cached datasets uses the cached copy
    again, _, offsets = engine._concat([data[0], data[0]])
    assert again is x_cat and offsets == [5, 5]
    # a dataset not in it makes a new copy
    other, _, offsets = engine._concat(data)
    assert other is not x_cat and offsets == [0, 5, 10] and torch.equal(other[10:], data[2][0])


def test_data_changed_in_place_is_copied_again():
    engine, params, data = tiny_engine_and_data()
    before = engine.evaluate(params, data).loss
    data[2][0].mul_(-1.0)
    data[0][1][:] = (data[0][1] + 1) % 10
    fresh, _, _ = tiny_engine_and_data()
    after = engine.evaluate(params, data).loss
    assert torch.equal(after, fresh.evaluate(params, data).loss)
    assert after[1] == before[1] and after[0] != before[0] and after[2] != before[2]


def test_the_data_cache_is_bounded():
    engine, params, data = tiny_engine_and_data(data_cache_bytes=15 * (64 * 4 + 8))  # room for 15 samples
    first, _, _ = engine._concat(data[:2])
    engine._concat(data[2:])
    assert engine._concat(data[:1])[0] is first  # 10 + 5 samples cached: both stay
    engine._concat([tiny_engine_and_data()[2][0]])  # 5 more: the least recently used copy (data[2:]) goes
    assert engine._concat(data[:1])[0] is first and len(engine._data_cache) == 2
    none, _, _ = tiny_engine_and_data(data_cache_bytes=0)
    none._concat(data)
    assert not none._data_cache
    with pytest.raises(ValueError, match=r"^engine data_cache_bytes must be an int >= 0, got -1$"):
        tiny_engine_and_data(data_cache_bytes=-1)


def test_copies_made_uncached_are_used_once_and_cached_ones_still_serve():
    engine, params, data = tiny_engine_and_data()
    kept, _, _ = engine._concat(data[:1])
    with engine.uncached():
        once, _, _ = engine._concat(data[1:])
        assert engine._concat(data[:1])[0] is kept  # a copy cached before is still used
        assert engine._concat(data[1:])[0] is not once  # nothing made inside is kept
        with engine.uncached():
            pass
        assert engine._concat(data[1:])[0] is not once  # still inside the outer block
    assert len(engine._data_cache) == 1
    after, _, _ = engine._concat(data[1:])
    assert engine._concat(data[1:])[0] is after  # outside: cached again


def test_per_sample_weights_see_their_own_slot_when_datasets_repeat():
    """Two slots on one dataset with different weights train as if each had its own copy."""
    engine, params, data = tiny_engine_and_data()
    weights = [torch.tensor([1.0, 0, 0, 0, 1]), torch.tensor([0, 1.0, 1, 1, 0])]
    cfg = TrainConfig(batch_size=5)
    shared = engine.train(params[:2], [data[0], data[0]], cfg, torch.Generator().manual_seed(1), sample_weights=weights)
    copies = [(data[0][0].clone(), data[0][1].clone()) for _ in range(2)]
    separate = engine.train(params[:2], copies, cfg, torch.Generator().manual_seed(1), sample_weights=weights)
    assert torch.equal(shared.params, separate.params)
