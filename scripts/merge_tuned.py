"""One scenario from several `wirelessfl tune` folders: each folder's tuned curve (its `tuned.yaml`) as an algorithm
entry of a base scenario, which keeps its own data, seeds, rounds and profiles.

The new baselines were tuned one study per method (each with a sampler seed that makes its few random trials cover
its grid); their final run needs them in one scenario beside nothing else, so that its seeds pair with a committed
run of the same split (docs/research/cross-paper-baselines.md).

    python scripts/merge_tuned.py scenarios/paper/cross-paper-emnist-tuned.yaml \\
        docs/runs/cross-paper-emnist-baselines-tune/* --name cross-paper-emnist-baselines \\
        --out scenarios/paper/cross-paper-emnist-baselines.yaml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml


def merged(base: dict, tune_dirs: list[Path], name: str) -> dict:
    """``base`` with its algorithms replaced by every tuned curve of ``tune_dirs``, in their order."""
    algorithms = []
    for directory in tune_dirs:
        tuned = directory / "tuned.yaml"
        if not tuned.is_file():
            raise SystemExit(f"error: {directory}: no tuned.yaml (has its study finished?)")
        algorithms.extend(yaml.safe_load(tuned.read_text())["algorithms"])
    labels = [a.get("label") or a["name"] for a in algorithms]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise SystemExit(f"error: curve {twice[0]!r} is tuned in more than one folder")
    return {**base, "name": name, "algorithms": algorithms}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="the scenario whose data, seeds, rounds and profiles the run keeps")
    parser.add_argument("tune_dirs", type=Path, nargs="+")
    parser.add_argument("--name", required=True)
    parser.add_argument("--description", default="")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    scenario = merged(yaml.safe_load(args.base.read_text()), args.tune_dirs, args.name)
    scenario["description"] = args.description or scenario.get("description", "")
    scenario.pop("tune", None)
    args.out.write_text(yaml.safe_dump(scenario, sort_keys=False))


if __name__ == "__main__":
    sys.exit(main())
