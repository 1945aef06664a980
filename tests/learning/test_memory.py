"""The memory estimate (wirelessfl.learning.memory): hand-counted pieces, and whole runs against measured peak RSS."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from wirelessfl.algorithms.specs import BUILT_INS
from wirelessfl.algorithms.specs.ucfl import sigma_groups
from wirelessfl.algorithms.ucfl import UserCentricFL
from wirelessfl.learning.data.guard import format_bytes
from wirelessfl.learning.lockstep import TrainConfig
from wirelessfl.learning.memory import (
    SplitSizes,
    activations,
    estimate_memory,
    optimizer_rows,
)
from wirelessfl.learning.models import get_architecture

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_memory  # noqa: E402

MLP = get_architecture("mlp", (1, 8, 8), 10, hidden=(32,))  # P = 64*32 + 32 + 32*10 + 10 = 2,410
SIZES = SplitSizes(train=(20, 20, 20, 20), val=(5, 5, 5, 5), test=(5, 5, 5, 5))


def test_lenet5_activations_counted_by_hand():
    act = activations(get_architecture("lenet5", (1, 8, 8), 10))
    # every intermediate value autograd may keep: input 64, resized 1x32x32 = 1,024, conv1 and its ReLU
    # 6x28x28 = 4,704 each, pool1 6x14x14 = 1,176 plus int64 indices (2 floats each), conv2 and ReLU
    # 16x10x10 = 1,600 each, pool2 16x5x5 = 400 plus indices, flattened 400, fc 120 and ReLU, 84 and ReLU,
    # 10, log-probabilities and their gradient 2 x 10
    assert act.tape == 64 + 1024 + 2 * 4704 + 3 * 1176 + 2 * 1600 + 3 * 400 + 400 + 2 * 120 + 2 * 84 + 10 + 20 == 19262
    assert act.largest == 4704
    assert act.transient == 6 * 14 * 14  # the largest convolution input copied to channels_last (conv2's)
    # conv weight copies 6*1*25 + 16*6*25, the largest layer's weight gradient (fc1: 400*120 + 120)
    assert act.slot_temporaries == 150 + 2400 + 48120
    assert act.weight_copies == 150 + 2400


@pytest.mark.parametrize("hidden", [16, 200])
def test_mlp_activations_closed_form(hidden):
    act = activations(get_architecture("mlp", (1, 8, 8), 10, hidden=(hidden,)))
    assert act.tape == 64 + 64 + 2 * hidden + 10 + 2 * 10  # input, flattened, fc and ReLU, logits, loss
    assert act.largest == max(64, hidden)
    assert act.transient == 0
    assert act.slot_temporaries == 64 * hidden + hidden
    assert act.weight_copies == 0


def test_optimizer_rows():
    assert optimizer_rows(TrainConfig(momentum=0.9)) == 1
    assert optimizer_rows(TrainConfig(momentum=0.0)) == 0
    assert optimizer_rows(TrainConfig(optimizer="adam", momentum=0.0)) == 2
    assert optimizer_rows(TrainConfig(optimizer="adamw", momentum=0.0)) == 2


def _train_parts(cfg: TrainConfig, **kwargs) -> dict[str, int]:
    est = estimate_memory(MLP, SIZES, cfg, [("fedavg", {})], workers=1, **kwargs)
    assert est.phase == "fedavg train"
    return est.parts


def test_train_phase_parameters_and_optimizer_state():
    row = 2410 * 4
    momentum = _train_parts(TrainConfig(batch_size=10, momentum=0.9))
    assert momentum["parameters"] == 2 * 4 * row  # the gathered starts and the engine's working copy
    assert momentum["optimizer state"] == 4 * row  # one momentum row per slot
    assert momentum["gradients"] == 4 * row  # one group of 4 slots, one gradient buffer
    assert momentum["models kept"] == row  # FedAvg's one global model
    assert momentum["data"] == 120 * (64 * 4 + 8)
    adam = _train_parts(TrainConfig(batch_size=10, optimizer="adam", momentum=0.0))
    assert adam["optimizer state"] == 2 * 4 * row
    assert adam["gradients"] == 2 * 4 * row  # the buffer and Adam's denominator
    kept = _train_parts(TrainConfig(batch_size=10, momentum=0.9), keep_optimizer_state=True)
    assert kept["optimizer state"] == 3 * 4 * row  # fresh init, the rows taken from the store, their device copy


def test_models_kept_per_algorithm():
    cfg = TrainConfig(batch_size=10)
    row, m = 2410 * 4, 4

    def kept(name, params=None):
        return estimate_memory(MLP, SIZES, cfg, [(name, params or {})], workers=1).parts["models kept"]

    assert kept("local") == m * row
    assert kept("fedem", {"components": 3}) == 3 * row
    assert kept("fedfomo") == 3 * m * row + m * m * 8  # base, current, server and the affinity matrix
    assert kept("ucfl", {"streams": 2}) == 2 * row + m * m * 8 + 2 * m * 8  # W [m, m] and the mixing rows [2, m]
    assert kept("ifca", {"clusters": 2}) == 2 * row
    both = estimate_memory(MLP, SIZES, cfg, [("local", {}), ("fedavg", {})], workers=1).parts["models kept"]
    assert both == (m + 1) * row  # every curve of a seed is built before the first trains


@pytest.mark.parametrize("params", [{}, {"sigma_batch_size": 4, "sigma_batches": 3}, {"sigma_batch_size": 0.25, "sigma_batches": 10}])
def test_sigma_groups_follow_ucfl(params):
    sizes = np.array([7, 10, 10, 23, 40, 3])
    typed = UserCentricFL.spec.parse(params)
    batch, count = UserCentricFL.sigma_batches_for(SimpleNamespace(params=typed), sizes.astype(np.float64))
    expected: dict[tuple[int, int], int] = {}
    for b, k in zip(batch.tolist(), count.tolist()):
        expected[(b, k)] = expected.get((b, k), 0) + 1
    assert sorted(sigma_groups(typed, sizes.tolist())) == sorted((rows, k) for (_, k), rows in expected.items())


@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_every_built_in_algorithm_has_every_phase(name):
    """Each declared footprint keeps at least one model, and the peak is at least its largest phase."""
    est = estimate_memory(MLP, SIZES, TrainConfig(batch_size=10), [(name, {})], workers=2)
    assert est.parts["models kept"] >= 2410 * 4
    assert est.total == sum(est.parts.values()) >= max(est.phases.values()) + est.parts["data"]
    assert est.phases[f"{name} evaluate"] > 0 and est.phases[f"{name} checkpoint"] > 0
    assert est.phases[f"{name} train"] > 0 or est.phases[f"{name} algorithm"] > 0  # pflego trains through its own passes


def test_format_bytes():
    assert format_bytes(1.2e9) == "1.2 GB"
    assert format_bytes(340e6) == "340 MB"
    assert format_bytes(999) == "999 B"


# Big enough that the growth is 50-200 MB (well above allocator noise), small enough for seconds.
MEASURED = [
    bench_memory.scenario("mlp-fedavg", 100, 17, {"name": "mlp", "options": {"hidden": [1000]}}, [{"name": "fedavg"}], rounds=1),
    bench_memory.scenario("lenet5-fedem", 40, 16, {"name": "lenet5"}, [{"name": "fedem", "params": {"components": 2}}], rounds=1),
    bench_memory.scenario(
        "mlp-ucfl", 24, 50, {"name": "mlp", "options": {"hidden": [800]}}, [{"name": "ucfl", "params": {"streams": 3, "sigma_batches": 5}}], rounds=1
    ),
]


def test_estimate_within_factor_two_of_measured_peak():
    """Peak RSS growth of whole runs (warm-up first, peak mark reset) against ``check_run``'s estimate: 0.5x to 2x."""
    results = bench_memory.measure(MEASURED)
    for result in results:
        ratio = result["estimate"] / result["measured"]
        assert result["measured"] > 40e6, result
        assert 0.5 <= ratio <= 2.0, result


def test_a_sampled_evaluation_gathers_at_most_its_chunk_of_client_rows():
    """FedAvg reads its model by row, one row per slot of the running group: capped at ``eval_clients`` (2 of 4
    clients here): 2 rows of 2,410 x 4 B fewer, 2 slots' forward pass fewer (a chunk of the longest split, 20 samples, x 4 B x (the input
    twice, 2 x 64, and the largest activation three times, 3 x 64)), and the split copy of one call holds 2 clients' training
    samples, not 4 (40 x (64 x 4 + 8) B fewer); FedEM's mixture evaluation (m x M rows, no sampled path) keeps its rows,
    and its copies, as it evaluates every client in one call."""
    cfg = TrainConfig(batch_size=10)

    def evaluation(name, **kwargs):
        return estimate_memory(MLP, SIZES, cfg, [(name, {})], workers=1, **kwargs).phases[f"{name} evaluate"]

    assert evaluation("fedavg") - evaluation("fedavg", eval_clients=2) == 2 * 2410 * 4 + 2 * 20 * 4 * (2 * 64 + 3 * 64) + 40 * (64 * 4 + 8)
    assert evaluation("fedem") == evaluation("fedem", eval_clients=2)


def test_methods_that_evaluate_by_row_gather_no_row_per_client():
    """FedAvg's clients share its model: the evaluation reads it by row (one slot group's rows), as Ditto's and
    FedPer's per-client models are made group by group from their stores, while FedEM's mixture gathers a row per
    client and component."""
    sizes = SplitSizes(train=(7,) * 5000, val=(2,) * 5000, test=(2,) * 5000)
    cfg = TrainConfig(batch_size=10)

    def evaluation(name):
        return estimate_memory(MLP, sizes, cfg, [(name, {})], workers=1, participation=0.02).phases[f"{name} evaluate"]

    row = MLP.param_count * 4
    assert evaluation("ditto") == evaluation("fedper") == evaluation("fedavg")
    assert evaluation("fedem") - evaluation("fedavg") > 0.9 * 5000 * row


HEAD = 32 * 10 + 10  # MLP's personal head: fc2's weights and biases


@pytest.mark.parametrize(("name", "models", "heads", "momenta"), [
    ("local", 4, 0, 4),
    ("ditto", 4, 0, 8),  # the global training's momentum and the personal one's
    ("pfedme", 4, 0, 0),  # the inner solve is plain SGD, nothing kept
    ("apfl", 4, 0, 4),
    ("fedper", 0, 4, 4),
    ("fedrep", 0, 4, 8),  # the head training's momentum and the body's
    ("pflego", 0, 4, 0),
])
def test_per_client_state_in_client_stores_counts_as_disk_when_the_store_is_on_disk(name, models, heads, momenta):
    """With momentum kept, m = 4 clients all training over 4 rounds: the stored rows (personal models, heads of
    330 parameters, momenta) leave the RAM kept between rounds and the checkpoint, and the disk holds them three
    times (the live file and two snapshots)."""
    row = MLP.param_count * 4
    stored = models * row + heads * HEAD * 4 + momenta * row

    def estimate(on_disk):
        return estimate_memory(MLP, SIZES, TrainConfig(batch_size=10), [(name, {})], workers=1, rounds=4,
                               keep_optimizer_state=True, client_store_on_disk=on_disk)

    ram, disk = estimate(False), estimate(True)
    assert ram.parts["models kept"] - disk.parts["models kept"] == pytest.approx(stored, abs=1)
    assert ram.disk == 0 and disk.disk == pytest.approx(3 * stored, abs=3)
    checkpoint = 3 * (models * row + heads * HEAD * 4)
    assert ram.phases[f"{name} checkpoint"] - disk.phases[f"{name} checkpoint"] == pytest.approx(checkpoint, abs=1)


def test_fedreps_heads_are_kept_as_fedpers_not_a_model_per_client():
    """One body plus 4 heads, and with momentum kept one more row per client for the head training's."""
    row = MLP.param_count * 4

    def kept(name, keep):
        return estimate_memory(MLP, SIZES, TrainConfig(batch_size=10), [(name, {})], workers=1, keep_optimizer_state=keep).parts["models kept"]

    assert kept("fedrep", False) == kept("fedper", False) == row + 4 * HEAD * 4
    assert kept("fedrep", True) - kept("fedper", True) == 4 * row
    assert kept("fedrep", False) == estimate_memory(
        MLP, SIZES, TrainConfig(batch_size=10), [("fedrep", {"personal_layers": 0})], workers=1).parts["models kept"] + 4 * HEAD * 4


def test_the_data_cache_grows_with_the_rounds_of_partial_participation_up_to_its_bound():
    """Each round's participants add their training copy (100 of 5,000 clients x 7 samples x (64 x 4 + 8) B);
    the evaluated splits are copied once; the engine's bound caps it. Full participation copies the training split once."""
    from wirelessfl.learning.lockstep import DATA_CACHE_BYTES

    sizes = SplitSizes(train=(7,) * 5000, val=(2,) * 5000, test=(2,) * 5000)
    cfg = TrainConfig(batch_size=10)
    feature = 64 * 4 + 8

    def cache(rounds, participation=0.02):
        return estimate_memory(MLP, sizes, cfg, [("fedavg", {})], participation=participation, rounds=rounds).parts["data cache"]

    assert cache(1) == (5000 * 4 + 100 * 7) * feature
    assert cache(11) - cache(1) == 10 * 100 * 7 * feature
    assert cache(100_000) == DATA_CACHE_BYTES
    assert cache(1, 1.0) == cache(50, 1.0) == 5000 * 11 * feature


def test_a_sampled_evaluation_caches_its_samples_splits_and_nothing_of_the_last_rounds_full_pass():
    """5,000 clients of 2 + 2 evaluation samples, 100 sampled a round for 10 rounds and everyone in the 11th: the cache
    holds the 10 samples' copies (10 x 100 x 4 samples), not the 20,000 of every client; the trained rounds as before."""
    sizes = SplitSizes(train=(7,) * 5000, val=(2,) * 5000, test=(2,) * 5000)
    feature = 64 * 4 + 8

    def cache(**kwargs):
        return estimate_memory(
            MLP, sizes, TrainConfig(batch_size=10), [("fedavg", {})], participation=0.02, rounds=11, **kwargs
        ).parts["data cache"]

    trained = 11 * 100 * 7 * feature
    assert cache() == (5000 * 4) * feature + trained
    assert cache(eval_sample=100, evaluated_rounds=11) == 10 * 100 * 4 * feature + trained
    assert cache(eval_sample=100, evaluated_rounds=3) == 2 * 100 * 4 * feature + trained
    assert cache(eval_sample=5000, evaluated_rounds=11) == cache()  # never more than every client's splits once


def test_the_data_part_counts_the_pool_where_clients_index_it():
    """SIZES deal 120 samples of 64 values; stored as uint8 each costs 64 B plus an 8 B index: 8,640 B. Clients that
    index a pool of 50 samples hold the pool and an index per dealt sample: 50 x 64 + 120 x 8 = 4,160 B."""
    cfg = TrainConfig(batch_size=10)
    dealt = estimate_memory(MLP, SIZES, cfg, [("fedavg", {})], workers=1, input_bytes=1).parts["data"]
    assert dealt == 120 * (64 + 8) == estimate_memory(MLP, SIZES, cfg, [("fedavg", {})], workers=1, input_bytes=1, held_samples=120).parts["data"]
    assert estimate_memory(MLP, SIZES, cfg, [("fedavg", {})], workers=1, input_bytes=1, held_samples=50).parts["data"] == 50 * 64 + 120 * 8
