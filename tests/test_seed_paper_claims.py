"""FedEM, PFLEGO and adaptive-experts claims at small scale, checked with the report's own claim functions.

The paper-scale runs are scenarios/paper/{fedem,pflego,experts}-*.yaml (docs/research/reproduction-*.md).
These reduced runs (synthetic or embedded digits, tens of clients, tens of rounds) keep
the orderings that do not need the papers' scale; where one does not hold at this
scale, the test says so and checks what does.
"""

from __future__ import annotations

import pytest

from wirelessfl.config import parse_scenario
from wirelessfl_papers import adaptive_experts, fedem, pflego
from wirelessfl.results.reproduction import Run
from wirelessfl.simulate import simulate

NETWORKS = [{"preset": "wired"}]
"""One profile: these claims are about accuracy, which every profile shares (a second profile only re-times the
same learning)."""


def run_of(doc: dict) -> Run:
    return Run.from_trace(simulate(parse_scenario({"eval_every": doc["rounds"], "device": "cpu", "networks": NETWORKS, **doc})).trace)


def claim(paper, text: str):
    return next(c for c in paper.PAPER.claims if c.text.startswith(text))


@pytest.fixture(scope="module")
def fedem_synthetic() -> Run:
    """FedEM's synthetic mixture at 40 clients x 60 features x ~100 samples; 20% of the clients held out."""
    return run_of(
        {
            "name": "fedem-synthetic",
            "rounds": 40,
            "data": {
                "dataset": "synthetic",
                "options": {"num_samples": 4000, "dim": 60},
                "clients": 40,
                "samples": {"total": "all", "distribution": "lognormal", "sigma": 1.0},
                "partition": [{"name": "dirichlet", "alpha": 0.4, "over": "latent"}],
            },
            "model": {"name": "mlp", "options": {"hidden": []}},
            "training": {"batch_size": 32, "lr": 0.5, "momentum": 0.0, "unseen_fraction": 0.2},
            "algorithms": [{"name": "fedem"}, {"name": "fedavg"}, {"name": "local"}],
        }
    )


def test_fedem_above_fedavg_and_local_and_its_unseen_clients_not_below(fedem_synthetic):
    """Table 2 (average, bottom decile) and Table 3. Measured on seeds 0-3: the average claim
    held on all four (FedEM 69-79% vs FedAvg 63-68%, Local 59-61%), the bottom decile on three
    (seed 2: 34.0 vs 33.3 and 38.6), unseen clients on all four (seed 2 by 0.1 point)."""
    runs = {"fedem-synthetic": fedem_synthetic}
    assert claim(fedem, "FedEM is clearly above FedAvg and Local on the average").verdict(runs).holds
    assert claim(fedem, "FedEM is clearly above FedAvg and Local on the bottom decile").verdict(runs).holds
    assert claim(fedem, "FedEM's unseen clients are at least as good").verdict(runs).holds


def pflego_doc(name: str, classes: int) -> dict:
    return {
        "name": name,
        "rounds": 30,
        "data": {"dataset": "digits", "clients": 20, "samples": {"total": "all"}, "partition": [{"name": "random_classes", "classes": classes}]},
        "model": {"name": "mlp", "options": {"hidden": [64]}},
        "training": {"batch_size": 16, "lr": 0.05, "momentum": 0.9, "participation": 0.2},
        "algorithms": [{"name": "pflego", "params": {"tau": 10, "server_lr": 0.5, "client_lr": 0.2}}, {"name": "fedper"}, {"name": "fedavg"}],
    }


@pytest.fixture(scope="module")
def pflego_runs() -> dict[str, Run]:
    return {"pflego-emnist-k2": run_of(pflego_doc("pflego-emnist-k2", 2)), "pflego-emnist-k62": run_of(pflego_doc("pflego-emnist-k62", 10))}


def test_pflego_personalization_orderings(pflego_runs):
    """Table 1: with K = 2 classes per client the personalized methods are far above FedAvg;
    with every class, FedAvg is best. PFLEGO vs FedPer at K = 2 is a tie at this scale
    (98.5% each on the digits pilot), so only 'both above FedAvg' is asserted there."""
    high = pflego_runs["pflego-emnist-k2"]
    assert min(high.acc("pflego"), high.acc("fedper")) > high.acc("fedavg") + 5.0
    assert claim(pflego, "FedAvg is the best with no personalization").verdict(pflego_runs).holds


def experts_doc(p: float) -> dict:
    gate = {"clusters": 3, "gate_lr": 0.01, "local_lr": 0.001, "gate_split": "val"}
    return {
        "name": f"experts-cifar10-p{p}",
        "rounds": 12,
        "data": {"dataset": "digits", "clients": 10, "samples": {"per_client": 150}, "partition": [{"name": "majority", "p": p}]},
        "model": {"name": "examples.user_models:two_conv_dropout", "options": {"width": 8, "hidden": 32, "p": 0.0}},
        "training": {"batch_size": 16, "lr": 0.05, "momentum": 0.9},
        "algorithms": [{"name": "fedmoe", "params": gate}, {"name": "ifca", "params": {"clusters": 3}}, {"name": "local"}],
    }


@pytest.fixture(scope="module")
def experts_runs() -> dict[str, Run]:
    return {f"experts-cifar10-p{p}": run_of(experts_doc(p)) for p in (0.2, 1.0)}


def test_mixture_of_experts_gains_on_ifca_grow_with_the_majority_fraction(experts_runs):
    """Table 2: MoE above IFCA by more as p grows, and Local climbing from far below MoE to near it.
    Measured here (12 rounds, every curve from the same initial model, a two-convolution CNN on the 8x8 digits:
    LeNet-5 upsampled to 32x32 gave the same verdicts at 3x the CPU): MoE vs IFCA 76.7 vs 79.7 at p = 0.2 and
    96.3 vs 70.7 at p = 1.0; Local 58.7 and 98.3. The p = 0.2 lead (+1.1 in the paper) does not hold at this
    scale: IFCA is ahead there, so "MoE beats IFCA at every p" is asserted at p = 1.0 only and the growth of the
    lead on its own. Exploration vs none is left to the paper-scale runs."""
    low, high = experts_runs["experts-cifar10-p0.2"], experts_runs["experts-cifar10-p1.0"]
    assert high.acc("fedmoe") > high.acc("ifca") + 20.0
    assert claim(adaptive_experts, "Local climbs from far below MoE").verdict(experts_runs).holds
    assert high.acc("fedmoe") - high.acc("ifca") > low.acc("fedmoe") - low.acc("ifca") + 10.0
