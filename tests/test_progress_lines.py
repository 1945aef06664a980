"""The progress lines of a run without a terminal, against a clock the test sets."""

from __future__ import annotations

import math

from wirelessfl.progress_lines import LINE_EVERY_S, ProgressLines, format_elapsed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _lines(units, rounds, done, preview_s):
    clock, printed = Clock(), []
    return ProgressLines(printed.append, units, rounds, done, preview_s, clock=clock), clock, printed


def _round(lines, clock, at, key, number):
    clock.now = at
    lines.round_done({"unit": key, "round": number})


def test_format_elapsed_reads_like_a_clock():
    assert [format_elapsed(s) for s in (0, 7.9, 72, 3723)] == ["0:00", "0:07", "1:12", "1:02:03"]


def test_a_line_at_each_start_and_end_and_a_round_line_after_30_s_of_silence():
    assert LINE_EVERY_S == 30.0
    lines, clock, printed = _lines(["seed0__fedavg", "seed0__local"], 4, {}, preview_s=120.0)
    clock.now = 1.0
    lines.unit_started("seed0__fedavg")
    _round(lines, clock, 20.0, "seed0__fedavg", 1)  # 19 s since the last line: quiet
    _round(lines, clock, 40.0, "seed0__fedavg", 2)  # 39 s: a round line
    _round(lines, clock, 50.0, "seed0__fedavg", 3)
    _round(lines, clock, 80.0, "seed0__fedavg", 4)  # the last round: the done line says it
    clock.now = 81.0
    lines.unit_done("seed0__fedavg")
    clock.now = 82.0
    lines.unit_started("seed0__local")
    for number in range(1, 5):
        _round(lines, clock, 82.0 + number, "seed0__local", number)
    clock.now = 87.0
    lines.unit_done("seed0__local")
    assert printed == [
        "[1/2] seed0 fedavg: started, 0:01 elapsed, about 2 min left",  # the cost preview's 120 s
        "[1/2] seed0 fedavg: round 2/4, 0:40 elapsed, about 2 min left",  # 40 s for 2 rounds, 6 to go
        "[1/2] seed0 fedavg: done in 1:20, 1:21 elapsed, about 81 s left",  # 81 s for 4 rounds, 4 to go
        "[2/2] seed0 local: started, 1:22 elapsed, about 82 s left",
        "[2/2] seed0 local: done in 0:05, 1:27 elapsed",  # nothing left
    ]


def test_a_resumed_run_counts_from_its_finished_units_and_a_lone_follower_joins_the_count():
    units = ["seed0__a", "seed0__b", "seed0__c"]
    lines, clock, printed = _lines(units, 4, {"seed0__a": 4, "seed0__b": 2}, preview_s=math.nan)
    clock.now = 5.0
    lines.unit_started("seed0__b")  # no preview time and nothing trained yet: no time left said
    _round(lines, clock, 6.0, "seed0__b", 3)
    _round(lines, clock, 7.0, "seed0__b", 4)
    lines.unit_done("seed0__b")
    clock.now = 8.0
    lines.unit_started("seed0__c__wired")  # a follower resumed at another round than its trainer trains alone
    assert printed == [
        "[2/3] seed0 b: started, 0:05 elapsed",
        "[2/3] seed0 b: done in 0:02, 0:07 elapsed, about 14 s left",  # 7 s for 2 rounds, 4 of c to go
        "[3/4] seed0 c wired: started, 0:08 elapsed, about 32 s left",  # and 4 of the follower's
    ]
