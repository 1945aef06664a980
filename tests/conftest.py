"""Shared test helpers: a time limit for tests that would hang on a regression (a FIFO opened for reading), static
figures drawn only in the tests about them, and OpenMP threads that sleep instead of spinning while they wait."""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager

import pytest

# Set before any test imports torch (libgomp reads it when it loads) and inherited by the CLI subprocesses: between
# the tiny kernels of the test models, idle OpenMP threads otherwise spin on a core. Results are the same; the CPU
# time is not: the CI-sized quickstart test took 41.5 s of CPU spinning and 25.6 s sleeping (2 cores, loaded machine).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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


PNG_STAND_IN = b"\x89PNG\r\n\x1a\n(a stand-in: this test does not draw its static figures)"


def _convert_only(fig, image_format="png"):
    from wirelessfl.results import static

    static.static_figure(fig)  # the plotly -> matplotlib conversion still runs, and fails as it would
    return PNG_STAND_IN


@pytest.fixture(scope="session", autouse=True)
def _static_figures_not_drawn():
    """In every test, static figures (PNG, PDF, SVG) are converted from plotly but not rasterized: their files hold
    ``PNG_STAND_IN``. Yields the real renderer.

    matplotlib's drawing was about 60% of the CPU of a small CLI run (five figures, 2 s each with constrained layout
    and the tick labels' extents). Every file name, atomic write and note stays as it was; the drawing itself is
    checked where figures are the subject: tests marked ``draws_figures`` (tests/results/test_static.py,
    tests/results/test_figures.py, the trade-off maps and the figure tests of tests/test_cli.py). Child processes
    are out of this patch's reach: a CLI run in a subprocess draws unless its test says otherwise.
    """
    from wirelessfl.results import static

    real = static.render
    patch = pytest.MonkeyPatch()
    patch.setattr(static, "render", _convert_only)
    yield real
    patch.undo()


@pytest.fixture(autouse=True)
def _draw_when_marked(request, _static_figures_not_drawn, monkeypatch):
    if request.node.get_closest_marker("draws_figures") is not None:
        from wirelessfl.results import static

        monkeypatch.setattr(static, "render", _static_figures_not_drawn)


_LAST_RAY_TEST: list[str] = []


def pytest_collection_modifyitems(session, config, items):
    """Remember the last test that needs the local Ray, so that Ray stops once it has run (an idle Ray costs
    about 2.5 s of CPU a minute)."""
    users = [item.nodeid for item in items if "local_ray" in getattr(item, "fixturenames", ())]
    _LAST_RAY_TEST[:] = users[-1:]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if _LAST_RAY_TEST and item.nodeid == _LAST_RAY_TEST[0]:
        import sys

        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()


@pytest.fixture(scope="session")
def local_ray():
    """One local two-CPU Ray for every test that needs one (skipped without Ray): starting Ray costs more CPU than
    the tests' own work, so it starts once, and stops after the last test that needs it."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield ray
    ray.shutdown()
