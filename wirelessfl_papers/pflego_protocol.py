"""PFLEGO's Table 1 (EMNIST) from the protocol scenarios ``scenarios/paper/pflego-emnist-k*-protocol.yaml``.

The paper's budget (T = 200, tau = 50 steps for every method, r = 20%, §5.1's rates, every one of the last 10
rounds evaluated). Besides Table 1's curves, ``fedavg-after-local-steps`` is FedAvg evaluated as the authors'
code evaluates it (each client's model after its tau local steps), read beside the paper's FedAvg row; the K = 2
and K = 31 orderings are checked with it too, and with PFLEGO as the authors' code runs it. At K = 62 FedPer and
FedAvg also run at the authors' client rate (``*-lr0.007``), and FedAvg's claim is checked at it.
"""

from __future__ import annotations

from wirelessfl_papers.pflego import best, build, ordered

AFTER_LOCAL = "fedavg-after-local-steps"
AUTHORS = "pflego-authors-code"
AUTHORS_RATE = "-lr0.007"
LEVELS = ("k2", "k31", "k62")
EXTRA = {AUTHORS: ("pflego", "PFLEGO as the authors' code runs it: Adam on the server"),
         AFTER_LOCAL: ("fedavg", "FedAvg after its tau local steps, as the authors' code evaluates it")}
AT_AUTHORS_RATE = {
    f"fedper{AUTHORS_RATE}": ("fedper", "FedPer at the authors' client rate, 0.007"),
    f"fedavg{AUTHORS_RATE}": ("fedavg", "FedAvg at the authors' client rate, 0.007"),
    f"{AFTER_LOCAL}{AUTHORS_RATE}": ("fedavg", "FedAvg after its tau local steps at the authors' client rate, 0.007"),
}

PAPER = build(
    "pflego-protocol",
    suffix="-protocol",
    extra={level: EXTRA | (AT_AUTHORS_RATE if level == "k62" else {}) for level in LEVELS},
    claims=tuple(
        claim
        for level, degree in (("k2", "high"), ("k31", "medium"))
        for claim in (
            (level, f"PFLEGO >= FedPer >= FedAvg with {degree} personalization, FedAvg evaluated after its local steps "
                    "(Table 1)",
             ordered(level, ("pflego", "fedper", AFTER_LOCAL), ("pflego", "fedper", "fedavg"))),
            (level, f"PFLEGO >= FedPer >= FedAvg with {degree} personalization, as the authors' code runs PFLEGO and "
                    "evaluates FedAvg (Table 1)",
             ordered(level, (AUTHORS, "fedper", AFTER_LOCAL), ("pflego", "fedper", "fedavg"))),
        )
    ) + (
        ("k62", "FedAvg is the best with no personalization, at the authors' client rate and as their code runs "
                "PFLEGO (Table 1)",
         best("k62", (f"fedavg{AUTHORS_RATE}", AUTHORS, f"fedper{AUTHORS_RATE}"), ("fedavg", "pflego", "fedper"))),
        ("k62", "FedAvg is the best with no personalization, evaluated as the authors' code evaluates it, at their "
                "client rate (Table 1)",
         best("k62", (f"{AFTER_LOCAL}{AUTHORS_RATE}", AUTHORS, f"fedper{AUTHORS_RATE}"), ("fedavg", "pflego", "fedper"))),
    ),
    why="docs/research/reproduction-seed-notes.md, section 'The papers' own protocols, at their budgets (runs in progress)'",
    intro=(
        "`fedavg-after-local-steps` is FedAvg's global model fine-tuned by tau = 50 full-batch steps on each client's",
        "own training split before it is evaluated: the authors' code (sotirisnik/PFLEGO, main.py) reports FedAvg's",
        "sampled clients right after their local steps; the paper's text does not say.",
        "`pflego-authors-code` is PFLEGO as that code runs it by default: the server steps the body with Adam at",
        "rho (`--optimizer adam`) and the heads' final step is eq. 3's, without alpha_i; `pflego` is Algorithm 1 as",
        "printed, a plain gradient step of rho = 0.001 on the body each round, which moves it about rho times the",
        "gradient where Adam moves it about rho per coordinate.",
        "At K = 62, `*-lr0.007` are FedPer and FedAvg at 0.007, the client rate the authors' README gives them: at",
        "K = 31 the paper's one stated rate, 0.001, left them 14 and 33 points under Table 1, and 0.007 within 2.",
    ),
)  # fmt: skip
