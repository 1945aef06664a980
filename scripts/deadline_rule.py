"""A scenario's round deadline by a rule fixed before any learning run (docs/network.md, channel-aware-multicell).

The rule: ``--multiple`` (3) times the median scheduled user's round time, where a user's round time is the end of
its stream (k equal streams, in plan order, over the ``training.scheduling.k`` users of best mean uplink SNR), the
mean compute ``t_min + 1/mu``, and its upload alone on the carrier times the number of uploaders that share it.
Pooled over every seed's drop and the first ``--rounds`` rounds' draws of the first profile. Network only: it needs
no model, only the model's parameter count.

    python scripts/deadline_rule.py scenarios/channel-aware-multicell.yaml --params 61706 --streams 4
"""

from __future__ import annotations

import argparse

import numpy as np


def user_round_times(stream_ends: np.ndarray, members: tuple[np.ndarray, ...], upload: np.ndarray, mean_compute: float) -> np.ndarray:
    """Per participant: the end of its last stream + ``mean_compute`` + its upload alone x the uploaders sharing."""
    received = np.zeros(upload.size)
    for end, group in zip(np.asarray(stream_ends, dtype=float), members):
        received[group] = np.maximum(received[group], end)
    return received + mean_compute + upload.size * np.asarray(upload, dtype=float)


def main() -> None:
    from wirelessfl.config import load_scenario
    from wirelessfl.network import NetworkModel
    from wirelessfl.network import physical as phy
    from wirelessfl.run.preflight import prepare_links
    from wirelessfl.run.seeds import static_rng
    from wirelessfl.seam import CommPlan, Stream

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("--params", type=int, required=True, help="the model's parameter count")
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--multiple", type=float, default=3.0)
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    profile = scenario.profiles()[0]
    prepare_links(profile)
    clients = scenario.data.clients
    scheduling = scenario.training.scheduling
    k = scheduling.k if scheduling is not None else clients
    times = []
    for seed in scenario.seeds:
        network = NetworkModel(profile, clients, static_rng(seed, profile))
        uplink_snr = phy.link_snr(profile.physical, "ul", network.uplink_loss_db)
        scheduled = np.sort(np.argsort(-uplink_snr, kind="stable")[:k])
        plan = CommPlan(
            streams=tuple(Stream(1.0, frozenset(g.tolist())) for g in np.array_split(scheduled, args.streams)),
            uplink={int(c): 1.0 for c in scheduled}, work={int(c): 1.0 for c in scheduled}, model_params=args.params,
        )
        for r in range(args.rounds):
            inputs = network.draw_round(plan, np.random.default_rng([seed, r]))
            times.append(user_round_times(np.cumsum(inputs.stream_durations), inputs.stream_members, inputs.upload,
                                          profile.t_min + 1.0 / profile.mu))
    median = float(np.median(np.concatenate(times)))
    print(f"median scheduled user's round: {median:.2f} s; deadline = {args.multiple:g} x that = {args.multiple * median:.1f} s")


if __name__ == "__main__":
    main()
