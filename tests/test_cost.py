"""Cost before commitment (wirelessfl.cost): the memory guard's refusal and the time estimate."""

from __future__ import annotations

import math
import time
from pathlib import Path

import psutil
import pytest
import torch

import wirelessfl.cost as cost
import wirelessfl.run.probe as probe
from wirelessfl.config import load_scenario, parse_scenario
from wirelessfl.cost import MEMORY_FRACTION, RunCost, available_memory, check_run, format_duration
from wirelessfl.learning.data.federated import build_federated_data
from wirelessfl.learning.memory import MemoryEstimate
from wirelessfl.simulate import simulate
from wirelessfl.learning.models import get_architecture

ROOT = Path(__file__).resolve().parents[1]
HUGE = {
    "name": "huge",
    "device": "cpu",
    "data": {"dataset": "digits", "clients": 10, "samples": {"per_client": 100}},
    "model": {"name": "mlp", "options": {"hidden": [2000000]}},
    "algorithms": [{"name": "fedavg"}],
}


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def test_huge_model_refused_with_one_line_fast_and_without_allocating(monkeypatch):
    """A model too big to train: 10 clients with a 2,000,000-unit hidden layer (150,000,010 parameters, 600 MB a model)."""
    monkeypatch.setattr(cost, "_workers", lambda device: 1)
    scenario = parse_scenario(HUGE)
    build_federated_data(parse_scenario({**HUGE, "model": {"name": "mlp"}}).data_spec(), 0)  # imports warm
    get_architecture("mlp", (1, 8, 8), 10, hidden=[300_000])  # and the meta device's first use (~1 s), on which models
    # over PROBE_ON_CPU_BYTES are described (this one 77 MB; smaller ones are shape-checked on a CPU copy)
    Path("/proc/self/clear_refs").write_text("5")
    before = _status("VmRSS")
    began = time.perf_counter()
    with pytest.raises(ValueError) as refused:
        check_run(scenario, available=16_000_000_000)
    assert time.perf_counter() - began < 1.0
    assert _status("VmHWM") - before < 100e6  # not one model was allocated
    # By hand: P = 64*2e6 + 2e6 + 2e6*10 + 10 = 150,000,010, a row 600 MB; 10 slots in one group of batch 32.
    # parameters 2 x 10 rows = 12.0 GB, momentum 10 rows and the gradient buffer 10 rows = 6.0 GB each;
    # activations per slot: 32 samples x 4 B x (tape: input 64, flattened 64, fc1 2e6 and its ReLU 2e6, logits 10,
    # loss 20; two gradients of the 2e6 layer, two inputs 64) = 1,024.0 MB, plus fc1's weight gradient
    # 4 B x (64*2e6 + 2e6) = 520 MB: 10 x 1.544 GB = 15.4 GB; the one global model 0.6 GB (under 5%, not listed):
    # 40.0 GB in all.
    assert str(refused.value) == (
        "memory: this run needs about 40.0 GB at its peak (activations 15.4 GB, parameters 12.0 GB, "
        "optimizer state 6.0 GB, gradients 6.0 GB) but 16.0 GB is available and a run may use 80% of it; "
        "use fewer clients (data.clients), a smaller training.batch_size, a smaller model (model) or fewer algorithms per run"
    )


def test_huge_model_refused_by_this_machines_memory():
    """Ten times that model (6 GB a model) cannot fit on any machine the tests run on."""
    scenario = parse_scenario({**HUGE, "model": {"name": "mlp", "options": {"hidden": [20000000]}}})
    with pytest.raises(ValueError, match=r"^memory: this run needs about \d+ GB at its peak \(.*\) but [\d.]+ [kMGT]?B is available"):
        check_run(scenario)


def test_round_records_refused_with_fewer_rounds_advised():
    """A round keeps ~200 B of records per client and a ~3 kB trace row: (10 x 200 B + 3 kB) x 100,000 rounds
    = 500 MB (the most rounds a scenario may have; config.MAX_ROUNDS); the data, models and phases add 5 MB."""
    scenario = parse_scenario({**HUGE, "model": {"name": "mlp"}, "rounds": 100_000})
    with pytest.raises(ValueError) as refused:
        check_run(scenario, available=500_000_000)
    message = str(refused.value)
    assert message.startswith("memory: this run needs about 505 MB at its peak (round records 500 MB) but 500 MB is available")
    assert message.endswith("use fewer rounds (rounds), fewer clients (data.clients), a smaller training.batch_size, a smaller model (model) or fewer algorithms per run")


def test_safety_margin_is_the_stated_fraction():
    scenario = parse_scenario({**HUGE, "model": {"name": "mlp"}})
    total = check_run(scenario, probe=False, available=10**12).memory.total
    fits = math.ceil(total / MEMORY_FRACTION)
    assert check_run(scenario, probe=False, available=fits).available == fits
    with pytest.raises(ValueError, match="^memory: "):
        check_run(scenario, probe=False, available=fits - 2)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_one_line():
    with pytest.raises(ValueError, match=r"^device: cuda was requested but torch sees no CUDA device; use auto or cpu$"):
        check_run(parse_scenario({**HUGE, "model": {"name": "mlp"}}), device="cuda")


def test_available_memory_on_cpu():
    import torch

    free = available_memory(torch.device("cpu"))
    assert 0 < free <= psutil.virtual_memory().total


def test_cost_line():
    estimate = MemoryEstimate(parts={"data": 200_000_000, "parameters": 1_000_000_000}, phase="fedavg train")
    line = RunCost(memory=estimate, available=21_000_000_000, device="cpu", seconds=2400.0).line()
    assert line == "estimated memory for the run 1.2 GB (beyond the loaded libraries) of 21.0 GB available; training about 40 min on this machine"
    unmeasured = RunCost(memory=estimate, available=21_000_000_000, device="cpu", seconds=math.nan).line()
    assert unmeasured == "estimated memory for the run 1.2 GB (beyond the loaded libraries) of 21.0 GB available; training time not measured"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.2, "under a second"),
        (45, "about 45 s"),
        (2400, "about 40 min"),
        (4 * 3600, "about 4 h"),
        (10 * 86400, "about 10 days"),
        (1e12, "about 3.2e+04 years"),
        (math.inf, "without end"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_quickstart_cost_is_quick():
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    data = build_federated_data(scenario.data_spec(), scenario.seeds[0])
    began = time.perf_counter()
    run = check_run(scenario, data=data)
    assert time.perf_counter() - began < 2.0  # the timed step is budgeted at 0.25 s; the machine is shared
    assert run.probe_s < 1.0
    assert run.line().startswith("estimated memory for the run ")


def test_time_estimate_within_an_order_of_magnitude_of_a_measured_run():
    scenario = parse_scenario(
        {
            "name": "tiny",
            "rounds": 2,
            "device": "cpu",
            "data": {"dataset": "digits", "clients": 20, "samples": {"per_client": 60}},
            "model": {"name": "lenet5"},
            "training": {"batch_size": 16, "lr": 0.05},
            "algorithms": [{"name": "fedavg"}],
        }
    )
    estimated = check_run(scenario).seconds
    began = time.perf_counter()
    simulate(scenario)
    measured = time.perf_counter() - began
    assert 0.1 <= estimated / measured <= 10.0, (estimated, measured)


def test_fine_tuning_is_charged_per_evaluation_for_every_client_not_per_round():
    """FedAvg+ trains like FedAvg each round and fine-tunes every client at each evaluation.

    By hand: 10 clients of 60 digits, split 60/20/20 -> 36 training samples each, 360 in all; 6 rounds,
    evaluated at rounds 0, 3 and 6 (eval_every 3): 3 evaluations x 360 samples x 5 fine-tuning epochs at
    1,000 samples/s = 5.4 s more than FedAvg, whatever local_epochs is (charging the fine-tuning as
    round work made it rounds x participants x local_epochs x (1 + 5) instead).
    """
    def estimate(algorithms: list[dict], local_epochs: int) -> float:
        scenario = parse_scenario(
            {
                "name": "tiny", "rounds": 6, "eval_every": 3, "device": "cpu",
                "data": {"dataset": "digits", "clients": 10, "samples": {"per_client": 60}, "split": [0.6, 0.2, 0.2]},
                "model": {"name": "mlp"}, "training": {"local_epochs": local_epochs}, "algorithms": algorithms,
            }
        )
        data = build_federated_data(scenario.data_spec(), 0)
        arch = get_architecture("mlp", (1, 8, 8), 10)
        return cost.estimate_seconds(scenario, data, arch, cost.Throughput(samples_per_s=1000.0, eval_call_s=0.0))

    fedavg, fedavg_ft = {"name": "fedavg"}, {"name": "fedavg_ft", "params": {"finetune_epochs": 5}}
    for local_epochs in (1, 50):
        plain = estimate([fedavg], local_epochs)
        tuned = estimate([fedavg_ft], local_epochs)
        assert tuned - plain == pytest.approx(3 * 360 * 5 / 1000.0)
        # beside FedAvg, FedAvg+ follows its training (6 rounds x 360 samples x local_epochs at 1,000/s, charged
        # once) and adds its evaluations and fine-tuning only
        training = 6 * 360 * local_epochs / 1000.0
        assert estimate([fedavg, fedavg_ft], local_epochs) == pytest.approx(2 * plain - training + 3 * 360 * 5 / 1000.0)


def test_a_resumed_run_is_charged_for_the_rounds_left_only():
    """By hand: 2 seeds x (fedavg, local), 10 rounds; seed 0's fedavg done, seed 1's fedavg at round 4,
    local untouched: fedavg has 0 + 0.6 units left, local 2; the estimate is fedavg's per-unit cost x 0.6
    plus local's x 2, and (0.6 + 2) / 4 = 65% of the run's unit-rounds are left."""
    tiny = {
        "name": "tiny", "rounds": 10, "seeds": [0, 1], "device": "cpu",
        "data": {"dataset": "digits", "clients": 10, "samples": {"per_client": 60}},
        "model": {"name": "mlp"}, "algorithms": [{"name": "fedavg"}, {"name": "local"}],
    }  # fmt: skip
    scenario = parse_scenario(tiny)
    data = build_federated_data(scenario.data_spec(), 0)
    arch = get_architecture("mlp", (1, 8, 8), 10)
    speed = cost.Throughput(samples_per_s=1000.0, eval_call_s=0.0)

    def alone(name: str) -> float:
        one = parse_scenario({**tiny, "seeds": [0], "algorithms": [{"name": name}]})
        return cost.estimate_seconds(one, data, arch, speed)

    done = {"seed0__fedavg": 10, "seed1__fedavg": 4}
    assert cost.units_left(scenario, done) == pytest.approx([0.6, 2.0])
    assert cost.units_left(scenario) == [2.0, 2.0]
    assert cost.estimate_seconds(scenario, data, arch, speed) == pytest.approx(2 * alone("fedavg") + 2 * alone("local"))
    assert cost.estimate_seconds(scenario, data, arch, speed, done) == pytest.approx(0.6 * alone("fedavg") + 2 * alone("local"))
    run = check_run(scenario, data=data, done=done)
    assert run.left == pytest.approx(0.65)
    assert run.line().endswith(" on this machine for what is left (65% of the run's rounds)")
    assert "left" not in check_run(scenario, data=data).line()


def test_cost_line_of_a_resumed_run():
    estimate = MemoryEstimate(parts={"data": 200_000_000, "parameters": 1_000_000_000}, phase="fedavg train")
    line = RunCost(memory=estimate, available=21_000_000_000, device="cpu", seconds=600.0, left=0.004).line()
    assert line.endswith("; training about 10 min on this machine for what is left (under 1% of the run's rounds)")


def test_the_memory_estimate_on_a_gpu_counts_its_larger_slot_groups():
    """50 LeNet-5 clients of 21 training samples (batch 21): on a CPU with 2 worker threads the 50 slots
    train in 4 groups of 13 (512 // 21 = 24 a group at most, a multiple of 2 groups), two at a time; on a GPU
    in one group of 50 (8,192 // 21 = 390): the GPU's training transient holds more slots' activations."""
    import torch

    scenario = parse_scenario(
        {
            "name": "gpu", "device": "cpu", "data": {"dataset": "digits", "clients": 50, "samples": {"per_client": 35}},
            "model": {"name": "lenet5"}, "training": {"batch_size": 32}, "algorithms": [{"name": "fedavg"}],
        }
    )  # fmt: skip
    data = build_federated_data(scenario.data_spec(), 0)
    cost_workers = cost._workers
    try:
        cost._workers = lambda device: 2 if device.type == "cpu" else 1
        on_cpu, _ = cost.estimate_scenario(scenario, data, torch.device("cpu"))
        on_gpu, _ = cost.estimate_scenario(scenario, data, torch.device("cuda"))
    finally:
        cost._workers = cost_workers
    assert on_gpu.total > on_cpu.total


EVERY_THIRD_ROUND = {
    "name": "tiny", "rounds": 6, "eval_every": 3, "device": "cpu",
    "data": {"dataset": "digits", "clients": 10, "samples": {"per_client": 60}, "split": [0.6, 0.2, 0.2]},
    "model": {"name": "mlp"}, "algorithms": [{"name": "fedavg"}],
}  # fmt: skip
"""10 clients of 60 digits split 0.6/0.2/0.2, 6 rounds evaluated at 0, 3 and 6: the evaluation-cost tests' run."""

def test_eval_train_charges_a_forward_pass_of_the_train_split_at_each_evaluation():
    """By hand: 10 clients x 60 digits split 0.6/0.2/0.2 = 360 training samples; 6 rounds evaluated at
    0, 3 and 6; FedAvg's one copy; a forward pass a third of a training pass at 1,000 samples/s:
    eval_train adds 3 x 360 / 3 / 1000 = 0.36 s."""
    base = EVERY_THIRD_ROUND
    data = build_federated_data(parse_scenario(base).data_spec(), 0)
    arch = get_architecture("mlp", (1, 8, 8), 10)
    speed = cost.Throughput(samples_per_s=1000.0, eval_call_s=0.0)
    plain = cost.estimate_seconds(parse_scenario(base), data, arch, speed)
    fit = cost.estimate_seconds(parse_scenario({**base, "eval_train": True}), data, arch, speed)
    assert fit - plain == pytest.approx(3 * 360 / 3 / 1000.0)


def test_a_client_by_client_matrix_is_counted_and_refused_in_one_line():
    """UCFL keeps W [m, m] and, with ``streams: m``, m mixing rows [m, m] (float64): at 100,000 clients
    2 x 8e10 B = 160 GB beside the m models (100,000 x 2,410 x 4 B = 0.964 GB), refused before anything runs;
    Local keeps no such matrix (its m models only)."""
    from wirelessfl.learning.lockstep import TrainConfig
    from wirelessfl.learning.memory import SplitSizes, estimate_memory

    arch = get_architecture("mlp", (1, 8, 8), 10, hidden=(32,))
    m = 100_000
    sizes = SplitSizes(train=(6,) * m, val=(2,) * m, test=(2,) * m)
    ucfl = estimate_memory(arch, sizes, TrainConfig(batch_size=10), [("ucfl", {})], workers=1)
    assert ucfl.parts["models kept"] == m * 2410 * 4 + 2 * m * m * 8
    assert cost.refusal(ucfl, 16_000_000_000).startswith(
        "memory: this run needs about 524 GB at its peak (algorithm extras 362 GB, models kept 161 GB) but 16.0 GB is available"
    )
    local = estimate_memory(arch, sizes, TrainConfig(batch_size=10), [("local", {})], workers=1)
    assert local.parts["models kept"] == m * 2410 * 4


def test_each_evaluated_client_is_charged_and_a_sample_charges_fewer():
    """By hand: 10 clients x 60 digits split 0.6/0.2/0.2 -> 120 val and 120 test samples; 6 rounds evaluated at
    0, 3 and 6; at 1,000 samples/s a forward pass of both splits is 240 / 3 / 1000 = 0.08 s, and each client
    costs 0.01 s a pass beside its samples. Every client: 3 x (0.08 + 2 x 10 x 0.01) = 0.84 s. A sample of 4
    at rounds 0 and 3, all 10 at round 6: 2 x (0.4 x 0.08 + 2 x 4 x 0.01) + (0.08 + 0.2) = 0.504 s."""
    base = EVERY_THIRD_ROUND
    data = build_federated_data(parse_scenario(base).data_spec(), 0)
    arch = get_architecture("mlp", (1, 8, 8), 10)

    def seconds(raw, per_client):
        return cost.estimate_seconds(parse_scenario(raw), data, arch, cost.Throughput(1000.0, 0.0, per_client))

    assert seconds(base, 0.01) - seconds(base, 0.0) == pytest.approx(3 * 2 * 10 * 0.01)
    sampled = {**base, "evaluation": {"clients": 4}}
    assert seconds(base, 0.01) - seconds(sampled, 0.01) == pytest.approx(0.84 - 0.504)


POPULATION = {
    "name": "population", "rounds": 6, "device": "cpu",
    "data": {"dataset": "digits", "clients": 300, "samples": {"per_client": 5}},
    "model": {"name": "mlp"}, "training": {"participation": 0.1}, "algorithms": [{"name": "fedavg"}, {"name": "local"}],
}  # fmt: skip


def test_a_rounds_measured_overhead_is_charged_to_every_training_and_round():
    """By hand: 2 curves (FedAvg, Local) x 6 rounds, each round 0.1 s beyond the model: 2 x 6 x 0.1 = 1.2 s."""
    scenario = parse_scenario(POPULATION)
    data = build_federated_data(scenario.data_spec(), 0)
    arch = get_architecture("mlp", (1, 8, 8), 10)
    speed = cost.Throughput(1000.0, 0.0, 0.0)
    extra = cost.estimate_seconds(scenario, data, arch, speed, round_overhead_s=0.1) - cost.estimate_seconds(scenario, data, arch, speed)
    assert extra == pytest.approx(1.2)


def test_the_preview_of_a_large_population_times_real_rounds(monkeypatch):
    """At 300 clients the preview times real rounds of the first unit: a round that took 1 s beyond a model of
    near nothing (a million samples a second, no evaluation floor) is charged to both curves' 6 rounds:
    about 2 x 6 x 1 = 12 s. Without it the preview said 0.2x of a 1,000-client run."""

    scenario = parse_scenario(POPULATION)
    real = probe.round_seconds
    timed = []

    def round_seconds(unit, **kwargs):
        timed.append(real(unit, **kwargs))  # the real rounds run (and put the global random states back)
        return 1.0

    monkeypatch.setattr(cost, "measure_throughput", lambda *a, **k: (cost.Throughput(1e6, 0.0, 0.0), 0.0))
    monkeypatch.setattr(probe, "round_seconds", round_seconds)
    torch.manual_seed(0)
    first = torch.rand(3)
    torch.manual_seed(0)
    run = check_run(scenario)
    assert torch.equal(torch.rand(3), first)
    assert run.seconds == pytest.approx(12.0, rel=0.01)
    assert len(timed) == 1 and timed[0] > 0 and run.probe_s > 0
