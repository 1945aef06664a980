"""A run's progress as plain lines, for output that is not a terminal (a CI log, ``nohup``, a notebook's
subprocess), where a progress bar prints nothing until the run ends.

Each trained unit prints a line when it starts and when it is done, and a round line in between whenever
:data:`LINE_EVERY_S` has passed since the last line: the rounds between two lines are those of about 30 s
on this machine, measured as the run goes rather than guessed, so a log is silent for at most about 30 s
and one round, and a run of short units prints only its start and done lines.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from wirelessfl.cost import format_duration

#: the longest silence, in seconds, after which a round line is printed
LINE_EVERY_S = 30.0


def format_elapsed(seconds: float) -> str:
    """A wall time as a clock reads it: ``0:07``, ``1:12``, ``1:02:03``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressLines:
    """The lines of one run's trained units (``units``, their keys), each trained to ``rounds``.

    ``done`` holds the rounds a resumed run's checkpoints already have; ``preview_s`` is the cost preview's
    training time for what is left (NaN: not measured). The time left is the preview's until a round has been
    trained, then the elapsed time per trained round times the rounds left (the preview is an order of
    magnitude; the measurement includes evaluation, building and checkpoints).
    """

    def __init__(
        self,
        print_line: Callable[[str], None],
        units: list[str],
        rounds: int,
        done: Mapping[str, int],
        preview_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._print = print_line
        self._clock = clock
        self._rounds = rounds
        self._preview_s = preview_s
        self._done = done
        self._units = set(units)
        self._total = len(units)
        self._number = sum(1 for key in units if done.get(key, 0) >= rounds)
        self._rounds_left = sum(rounds - min(done.get(key, 0), rounds) for key in units)
        self._rounds_trained = 0
        self._began = self._last_line = clock()
        self._unit_began = self._began

    def unit_started(self, key: str) -> None:
        if key not in self._units:  # a follower that trains alone (resumed at another round than its trainer)
            self._units.add(key)
            self._total += 1
            self._rounds_left += self._rounds - min(self._done.get(key, 0), self._rounds)
        self._number += 1
        self._unit_began = self._clock()
        self._line(key, "started")

    def round_done(self, info: Mapping[str, Any]) -> None:
        """After each trained round (``simulate``'s ``on_round`` information)."""
        self._rounds_trained += 1
        if info["round"] < self._rounds and self._clock() - self._last_line >= LINE_EVERY_S:
            self._line(info["unit"], f"round {info['round']}/{self._rounds}")

    def unit_done(self, key: str) -> None:
        self._line(key, f"done in {format_elapsed(self._clock() - self._unit_began)}")

    def _line(self, key: str, what: str) -> None:
        now = self._clock()
        self._last_line = now
        elapsed = now - self._began
        text = f"[{self._number}/{self._total}] {key.replace('__', ' ')}: {what}, {format_elapsed(elapsed)} elapsed"
        left = self._seconds_left(elapsed)
        self._print(text if left is None else f"{text}, {format_duration(left)} left")

    def _seconds_left(self, elapsed: float) -> float | None:
        """None when nothing is left or nothing is known yet."""
        rounds_left = self._rounds_left - self._rounds_trained
        if rounds_left <= 0:
            return None
        if self._rounds_trained == 0:
            return None if math.isnan(self._preview_s) else self._preview_s
        return elapsed * rounds_left / self._rounds_trained


__all__ = ["LINE_EVERY_S", "ProgressLines", "format_elapsed"]
