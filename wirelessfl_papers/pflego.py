"""Our runs of PFLEGO's EMNIST experiments beside the paper's Table 1 (EMNIST column).

S. Nikoloutsopoulos, I. Koutsopoulos, M. K. Titsias, "Personalized Federated Learning
with Exact Distributed Stochastic Gradient Descent Updates" (PFLEGO):
Table 1 (test accuracy on EMNIST with K = 2, 31 and 62 of the 62 classes per client:
high, medium and no personalization, §4.3) and the claims of §4.4. Curves ``pflego``, ``fedper`` and ``fedavg``.
:func:`build` makes the page of one family of scenarios: the scaled ones here (``PAPER``) and
the protocol ones at the paper's budget (``wirelessfl_papers.pflego_protocol``).
"""

from __future__ import annotations

from collections.abc import Callable

from wirelessfl.results.reproduction import (
    Claim, Paper, PaperTable, Run, Section, TableRow, Verdict, pp, seeds_text, within_intervals,
)

NAMES = {"pflego": "PFLEGO", "fedper": "FedPer", "fedavg": "FedAvg"}
TABLE_1 = {
    # degree of personalization: (title, {curve: (mean, 95% half-width)})
    "k2": ("EMNIST, high personalization: K = 2 classes per client (Table 1)",
           {"pflego": (98.49, 0.43), "fedper": (97.78, 0.51), "fedavg": (97.29, 0.54)}),
    "k31": ("EMNIST, medium personalization: K = 31 classes per client (Table 1)",
            {"pflego": (74.43, 0.40), "fedper": (74.19, 0.36), "fedavg": (68.82, 0.29)}),
    "k62": ("EMNIST, no personalization: every client has all 62 classes (Table 1)",
            {"pflego": (55.42, 0.19), "fedper": (48.12, 0.23), "fedavg": (69.4, 0.10)}),
}  # fmt: skip
OURS = (("average", "avg_acc"), ("bottom decile", "p10_acc"), ("worst user", "worst_acc"))


def _section(scenario: str, level: str, extra: dict[str, tuple[str, str]]) -> Section:
    """``extra``: more of our curves, each read beside the paper's row of a method (curve -> (method, name))."""
    title, numbers = TABLE_1[level]
    rows = [TableRow(curve, (mean, ci), NAMES[curve]) for curve, (mean, ci) in numbers.items()]
    rows += [TableRow(curve, numbers[method], name) for curve, (method, name) in extra.items()]
    return Section(
        scenario,
        title,
        (PaperTable("Table 1, test accuracy", ("accuracy", "±"), OURS, tuple(rows), digits=2),),
        paper_runs="not stated; its numbers are means over the final 10 rounds",
    )


def _paper(level: str, methods) -> str:
    return " / ".join(pp(TABLE_1[level][1][m][0]) for m in methods)


def ordered(level: str, curves: tuple[str, ...], methods: tuple[str, ...] | None = None) -> Callable[[Run], Verdict]:
    """Each curve's average accuracy at least the next one's; ``methods``: the paper's method of each curve."""
    methods = methods or curves

    def check(run: Run) -> Verdict:
        accs = {c: run.acc(c) for c in curves}
        if missing := [c for c, v in accs.items() if v is None]:
            return Verdict(None, f"needs {', '.join(missing)}")
        values = list(accs.values())
        names = {c: NAMES.get(c, f"{NAMES[m]} ({c})") for c, m in zip(curves, methods)}
        shown = " / ".join(f"{names[c]} {run.acc_text(c)}" for c in curves)
        return Verdict(
            all(a >= b for a, b in zip(values, values[1:])),
            f"average accuracy {shown}, {seeds_text(run)}{within_intervals(run, list(zip(curves, curves[1:])), names)}; "
            f"Table 1: {_paper(level, methods)}",
        )

    return check


def best(level: str, curves: tuple[str, ...], methods: tuple[str, ...] | None = None) -> Callable[[Run], Verdict]:
    """The first curve's average accuracy above every other one's; ``methods``: the paper's method of each curve."""
    methods = methods or curves

    def check(run: Run) -> Verdict:
        accs = {c: run.acc(c) for c in curves}
        if missing := [c for c, v in accs.items() if v is None]:
            return Verdict(None, f"needs {', '.join(missing)}")
        names = {c: NAMES.get(c, f"{NAMES[m]} ({c})") for c, m in zip(curves, methods)}
        first, *others = curves
        shown = " and ".join(f"{names[c]} {run.acc_text(c)}" for c in others)
        close = within_intervals(run, [(first, c) for c in others], names)
        return Verdict(
            accs[first] > max(accs[c] for c in others),
            f"average accuracy {names[first]} {run.acc_text(first)} vs {shown}, {seeds_text(run)}{close}; "
            f"Table 1: {_paper(level, methods)}",
        )

    return check


def build(name: str, suffix: str = "", extra: dict[str, dict[str, tuple[str, str]]] | None = None,
          claims: tuple[tuple[str, str, Callable[[Run], Verdict]], ...] = (), intro: tuple[str, ...] = (),
          why: str = "") -> Paper:
    """The page of the scenarios ``pflego-emnist-{k2,k31,k62}{suffix}``: Table 1 beside each, its three claims and
    ``claims`` (level, text, check) more; ``extra[level]`` adds curves beside a method's row."""
    scenario = {level: f"pflego-emnist-{level}{suffix}" for level in TABLE_1}
    every = (
        ("k2", "PFLEGO >= FedPer >= FedAvg with high personalization (Table 1)", ordered("k2", ("pflego", "fedper", "fedavg"))),
        ("k31", "PFLEGO >= FedPer >= FedAvg with medium personalization (Table 1)", ordered("k31", ("pflego", "fedper", "fedavg"))),
        ("k62", "FedAvg is the best with no personalization (Table 1)", best("k62", ("fedavg", "pflego", "fedper"))),
        *claims,
    )  # fmt: skip
    return Paper(
        name=name,
        title="PFLEGO: Personalized Federated Learning with Exact Distributed SGD Updates (Table 1, EMNIST)",
        source="pflego.txt",
        sections=tuple(_section(scenario[level], level, (extra or {}).get(level, {})) for level in TABLE_1),
        claims=tuple(Claim(scenario[level], text, check) for level, text, check in every),
        why=why,
        last_rounds=10,
        intro=(
            "Table 1's numbers are means over the final 10 rounds, with confidence intervals (±); ours are means over the",
            "evaluated rounds among the last 10.",
            "The high-personalization ordering rests on gaps of 0.7 and 0.5 points, about the paper's own intervals.",
            *intro,
        ),
    )


PAPER = build("pflego", why="docs/research/reproduction-seed-notes.md, section 'PFLEGO (Table 1, EMNIST)'")
