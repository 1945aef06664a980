"""Where the time goes: wall seconds per phase label, charged to the innermost open label."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

class PhaseTimer:
    """Wall seconds per label, nesting-aware: time is charged to the innermost open label.

    Entering or leaving a label charges the time since the previous event to the
    label open until then, so an inner label's time is never counted twice and
    the labels' sum is the time some label was open. ``sync`` (called at every
    event, e.g. ``torch.cuda.synchronize``) makes asynchronous device work land
    in the label that queued it; it is only set when profiling, so default runs
    do not wait for the device. ``clock`` is injectable for tests.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter, sync: Callable[[], None] | None = None):
        self.clock = clock
        self.sync = sync
        self._open: list[str] = []
        self._since = 0.0
        self._times: dict[str, float] = {}

    @property
    def active(self) -> bool:
        """Whether any label is open."""
        return bool(self._open)

    def _charge(self) -> None:
        if self.sync is not None:
            self.sync()
        now = self.clock()
        if self._open:
            label = self._open[-1]
            self._times[label] = self._times.get(label, 0.0) + (now - self._since)
        self._since = now

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Charge the time inside the block (less that of nested labels) to ``label``."""
        self._charge()
        self._open.append(label)
        try:
            yield
        finally:
            self._charge()
            self._open.pop()

    def times(self, reset: bool = False) -> dict[str, float]:
        """Accumulated seconds per label up to the last label boundary; ``reset`` starts over from zero."""
        times = dict(self._times)
        if reset:
            self._times.clear()
        return times


ENTRY_LABELS = {"train": "local training"}
"""Label of an engine entry point timed with no label open (default: the method's name)."""


def timed_entry(method):
    """Time an engine entry point under its own label, unless the caller has a label open.

    So an algorithm's ``with engine.phase("ucfl estimation"):`` takes the
    ``full_gradient`` calls inside it, and a bare call still shows up by name.
    """
    label = ENTRY_LABELS.get(method.__name__, method.__name__)

    @functools.wraps(method)
    def timed(self, *args, **kwargs):
        if self.timer.active:
            return method(self, *args, **kwargs)
        with self.timer.phase(label):
            return method(self, *args, **kwargs)

    return timed
