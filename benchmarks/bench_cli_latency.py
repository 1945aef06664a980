"""CPU time (children included) of the commands that should answer in a second: ``validate``, ``list``,
``--help`` and a schema error, each in a fresh interpreter, beside ``python -c pass`` in the same process.

    PYTHONPATH=. python benchmarks/bench_cli_latency.py [--repeat 3]

Each command runs ``--repeat`` times; the least CPU time counts (other jobs on the machine only add to it).
The ratio to ``python -c pass`` says what the command itself costs beyond starting Python.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) the child ``argv`` used, from ``RUSAGE_CHILDREN`` before and after."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as folder:
        misspelt = Path(folder) / "misspelt.yaml"
        text = (ROOT / "scenarios" / "quickstart.yaml").read_text().replace("rounds: 30", "roundz: 30")
        misspelt.write_text(text)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "validate quickstart": [sys.executable, "-m", "wirelessfl", "validate", "scenarios/quickstart.yaml"],
            "list": [sys.executable, "-m", "wirelessfl", "list"],
            "--help": [sys.executable, "-m", "wirelessfl", "--help"],
            "schema error": [sys.executable, "-m", "wirelessfl", "validate", str(misspelt)],
        }
        best = {name: min(cpu_seconds(argv, env) for _ in range(args.repeat)) for name, argv in commands.items()}
    reference = best["python -c pass"]
    print(f"{'command':<22} {'CPU s':>7} {'x python -c pass':>17}")
    for name, seconds in best.items():
        print(f"{name:<22} {seconds:7.2f} {seconds / reference:17.1f}")


if __name__ == "__main__":
    main()
