"""Shared test helpers: a time limit for tests that would hang on a regression (a FIFO opened for reading)."""

from __future__ import annotations

import signal
from contextlib import contextmanager

import pytest


@contextmanager
def _no_longer_than(seconds: int):
    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def no_longer_than():
    """``with no_longer_than(20): ...`` fails with TimeoutError instead of hanging."""
    return _no_longer_than
