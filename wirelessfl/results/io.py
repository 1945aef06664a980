"""Run directories and atomic file writes.

A run directory is ``<results_root>/<scenario>-<YYYYmmdd-HHMMSS>/``. Every file
in it is written to a temporary file in the same directory, fsynced, then moved
over the target with ``os.replace``, so a reader (or a run killed mid-write)
never sees a half-written file: it sees the old file or the new one. A write
that fails (a full disk) removes its temporary file, leaves the old file as it
was and raises :class:`WriteFailed`, an ``OSError`` whose text is one line
naming the file, the reason and what to do.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

TRACE_COLUMNS: tuple[str, ...] = (
    "scenario",
    "algorithm",
    "variant",
    "curve",
    "profile",
    "seed",
    "round",
    "time",
    "time_unit",
    "round_time",
    "avg_acc",
    "worst_acc",
    "p10_acc",
    "avg_val_acc",
    "mean_loss",
    "unseen_acc",
    "dl_payload",
    "ul_payload",
    "dl_bits",
    "ul_bits",
    "cum_dl_payload",
    "cum_ul_payload",
    "streams",
    "aggregated",
    "participants",
)
"""One row per round x algorithm x variant x profile x seed; round 0 = initial models at time 0."""

FIT_COLUMNS: tuple[str, ...] = ("fit_acc", "fit_loss")
"""Trace columns of a run with ``eval_train``: each client's model on its own training split (means over
the training clients), the same measure for every method; NaN in rounds that were not evaluated."""

SAMPLE_COLUMNS: tuple[str, ...] = ("avg_acc_lo", "avg_acc_hi", "evaluated_clients")
"""Trace columns of a run with ``evaluation.clients`` (a sampled evaluation): the 95% interval of the mean
client test accuracy that ``avg_acc`` estimates, and the training clients the round evaluated (all of them
at the last round, where the interval has zero width); NaN in rounds that were not evaluated."""

CLIENT_COLUMNS: tuple[str, ...] = (
    "scenario",
    "algorithm",
    "variant",
    "curve",
    "profile",
    "seed",
    "client",
    "group",
    "accuracy",
)
"""One row per client x curve x profile x seed: the client's own-model accuracy after the last round."""

SEEDING = "common-random-numbers"
"""How simulate derives a run's draws from its seed: every curve of a seed shares them (the same initial model,
batch order, participants and network draws; docs/results.md, "What `seed` fixes"). Recorded in every checkpoint
and in each finished run's ``provenance.json``. Change the value whenever a change of code changes the draws of
an existing scenario."""

SEEDINGS_SHARING_DRAWS = frozenset({SEEDING})
"""Every seeding scheme under which the curves of a seed share their draws; a new ``SEEDING`` that does joins it."""

PROVENANCE_FILE = "provenance.json"
"""``{"seeding": SEEDING}`` in a finished run directory. A directory without it was made before wirelessfl recorded
its seeding (2026-11-25), when each algorithm was seeded apart: its curves of a seed do not share their draws."""

TRACE_FILES = ("trace.parquet", "trace.csv")
MAX_ROUND = 100_000
"""The last round a run can have (``config.MAX_ROUNDS``; a test checks they agree): a trace's ``round`` beyond it
was not written by a run."""
CLIENT_FILES = ("clients.parquet", "clients.csv")
TEXT_COLUMNS = ("scenario", "algorithm", "variant", "curve", "profile", "time_unit")

_SCENARIO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _check_columns(df: pd.DataFrame, required: Iterable[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{what} is missing columns {missing}; required columns are {list(required)}")
    if df.empty:
        raise ValueError(f"{what} has no rows")


def validate_trace(df: pd.DataFrame) -> None:
    """Raise ValueError naming every column of TRACE_COLUMNS that ``df`` lacks."""
    _check_columns(df, TRACE_COLUMNS, "trace")


def validate_clients(df: pd.DataFrame) -> None:
    """Raise ValueError naming every column of CLIENT_COLUMNS that ``df`` lacks."""
    _check_columns(df, CLIENT_COLUMNS, "clients")


def fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; not every filesystem allows opening a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_FULL = tuple(getattr(errno, name) for name in ("ENOSPC", "EDQUOT") if hasattr(errno, name))


class WriteFailed(OSError):
    """An ``OSError`` from writing ``filename``, told in one line; ``strerror`` keeps the system's reason."""

    def __init__(self, err: OSError, path: Path, advice: str) -> None:
        super().__init__(err.errno, err.strerror or str(err), str(path))
        self.advice = advice

    @property
    def reason(self) -> str:
        if self.errno in _FULL:
            return "no space left on device" if self.errno == errno.ENOSPC else "disk quota exceeded"
        return (self.strerror or "write failed").lower()

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.reason}; the previous version (if any) is unchanged; {self.advice}"


def _advice(err: OSError, then: str) -> str:
    return f"{'free space' if err.errno in _FULL else 'fix that'} and {then}"


def _write_fully(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is out (it may write fewer than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that ``path`` is always either old or complete.

    An ``OSError`` while writing (ENOSPC, EIO, ...) removes the temporary file
    and is raised as :class:`WriteFailed`.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise ValueError(f"cannot write {target}: directory {target.parent} does not exist")
    try:
        fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as err:
        raise WriteFailed(err, target, _advice(err, "write it again")) from err
    try:
        try:
            _write_fully(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(temp_name, 0o644)
        os.replace(temp_name, target)
    except BaseException as err:
        try:
            os.unlink(temp_name)
        except FileNotFoundError:
            pass
        if isinstance(err, OSError) and not isinstance(err, WriteFailed):
            raise WriteFailed(err, target, _advice(err, "write it again")) from err
        raise
    fsync_directory(target.parent)


@contextmanager
def resumable_writes(run_dir) -> Iterator[None]:
    """Inside, a failed write says how to continue the run: ``wirelessfl simulate --resume RUN_DIR``.

    Every checkpoint and result file is written atomically, so after freeing
    space a resumed run reads the last checkpoints and writes the rest.
    """
    try:
        yield
    except WriteFailed as err:
        err.advice = _advice(err, f"run `wirelessfl simulate --resume {run_dir}`")
        raise


def atomic_write_text(path, text: str) -> None:
    """UTF-8 text through ``atomic_write_bytes``."""
    atomic_write_bytes(path, text.encode("utf-8"))


def jsonable(value: Any) -> Any:
    """numpy scalars/arrays and tensors (``tolist``), sets and tuples as JSON; anything else as its str."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def read_provenance(run_dir) -> dict[str, Any]:
    """The run directory's ``provenance.json``; ``{}`` when it has none (made before runs recorded their seeding)."""
    path = Path(run_dir) / PROVENANCE_FILE
    if not path.exists():
        return {}
    text = read_text_file(path)
    try:
        provenance = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{path}: not JSON ({err}); it holds {{\"seeding\": \"{SEEDING}\"}}") from None
    if not isinstance(provenance, dict):
        raise ValueError(f"{path}: must be a JSON object such as {{\"seeding\": \"{SEEDING}\"}}, got {provenance!r}")
    return provenance


def shares_draws(provenance: dict[str, Any]) -> bool:
    """Whether a run's curves of a seed share their random numbers, from its provenance (:func:`read_provenance`)."""
    return provenance.get("seeding") in SEEDINGS_SHARING_DRAWS


def atomic_write_json(path, obj: Any) -> Any:
    """Write ``obj`` as indented JSON (see :func:`jsonable`); returns it as read back (plain dicts, lists, numbers)."""
    text = json.dumps(obj, indent=1, default=jsonable)
    atomic_write_text(path, text)
    return json.loads(text)


def atomic_write_frame(path, df: pd.DataFrame) -> None:
    """Write a DataFrame as CSV or Parquet (chosen by the suffix), without its index."""
    target = Path(path)
    if target.suffix == ".csv":
        data = df.to_csv(index=False).encode("utf-8")
    elif target.suffix == ".parquet":
        buffer = io.BytesIO()
        df.to_parquet(buffer, index=False)
        data = buffer.getvalue()
    else:
        raise ValueError(f"atomic_write_frame: path suffix must be '.csv' or '.parquet', got {target.suffix!r} ({target})")
    atomic_write_bytes(target, data)


def new_run_dir(results_root, scenario_name: str, now: datetime | None = None) -> Path:
    """Create ``<results_root>/<scenario_name>-<YYYYmmdd-HHMMSS>/`` (``-2``, ``-3``... if taken).

    ``mkdir`` without ``exist_ok`` is atomic, so two runs started in the same
    second (even in two processes) never share a directory.
    """
    if not isinstance(scenario_name, str) or not _SCENARIO_NAME.match(scenario_name):
        raise ValueError(
            f"scenario_name must start with a letter or digit and contain only letters, digits, '.', '_' and '-', "
            f"got {scenario_name!r}"
        )
    root = Path(results_root)
    root.mkdir(parents=True, exist_ok=True)
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    base = f"{scenario_name}-{stamp}"
    attempt = 1
    while True:
        candidate = root / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            attempt += 1
            continue
        return candidate


def check_regular_file(path) -> Path:
    """``path`` when it is a regular file (or a link to one); one-line ValueError naming it when it is a FIFO, a
    device or a folder, which are never opened: reading a FIFO blocks until something writes to it."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise ValueError(f"{path}: cannot read it: {err.strerror or err}") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise ValueError(f"{path}: {kind}, not a file; wirelessfl reads only regular files in a run folder (replace it with the file or remove it)")
    return path


def read_text_file(path) -> str:
    """A run folder's UTF-8 text file (:func:`check_regular_file` first); ValueError naming it when it is not text."""
    path = check_regular_file(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not a UTF-8 text file (byte {err.start}: {err.reason})") from None


def _read_frame(run_dir, names: tuple[str, str], columns: tuple[str, ...], what: str) -> pd.DataFrame:
    directory = Path(run_dir)
    if not directory.is_dir():
        raise ValueError(f"run directory {directory} does not exist or is not a directory")
    parquet_path, csv_path = (directory / name for name in names)
    try:
        if parquet_path.exists():
            return pd.read_parquet(check_regular_file(parquet_path))
        if csv_path.exists():
            text_columns = [c for c in TEXT_COLUMNS if c in columns]
            numeric_columns = [c for c in columns if c not in text_columns]
            # Keep empty strings (e.g. a variant-less algorithm) as "" and empty numbers as NaN.
            return pd.read_csv(
                check_regular_file(csv_path),
                dtype={c: str for c in text_columns},
                keep_default_na=False,
                na_values={c: ["", "NaN", "nan"] for c in numeric_columns},
            )
    except (ValueError, OSError, TypeError) as err:  # a damaged file: pandas and pyarrow say what, not which file
        path = parquet_path if parquet_path.exists() else csv_path
        text = str(err)
        if text.startswith(str(path)):
            raise ValueError(text) from None
        reason = " ".join(text.split())[:200] or type(err).__name__
        raise ValueError(f"{path}: cannot be read as the run's {what} ({reason})") from None
    raise ValueError(f"run directory {directory} has no {what}: expected {names[0]} or {names[1]}")


def read_trace(run_dir) -> pd.DataFrame:
    """The run's trace (``trace.parquet`` if present, else ``trace.csv``), validated."""
    trace = _read_frame(run_dir, TRACE_FILES, TRACE_COLUMNS, "trace")
    if "unseen_acc" not in trace.columns:  # runs written before held-out clients existed
        trace.insert(list(TRACE_COLUMNS).index("unseen_acc"), "unseen_acc", float("nan"))
    validate_trace(trace)
    source = next((Path(run_dir) / name for name in TRACE_FILES if (Path(run_dir) / name).exists()))
    _check_rounds(trace, source)
    return trace


def _check_rounds(trace: pd.DataFrame, source: Path) -> None:
    """Every ``round`` a whole number from 0 to ``MAX_ROUND``; else one line naming the file and the value."""
    rounds = pd.to_numeric(trace["round"], errors="coerce")  # a 20-digit round is read as text or a float
    whole = rounds.notna() & (rounds >= 0) & (rounds <= MAX_ROUND) & (rounds == rounds.round())
    if not whole.all():
        bad = str(trace["round"][~whole].iloc[0])
        raise ValueError(
            f"{source}: round {bad[:30]} is not a round a run can have (whole numbers from 0 to {MAX_ROUND:,}); "
            "the file was changed after the run wrote it"
        )


def read_clients(run_dir) -> pd.DataFrame:
    """The run's per-client final accuracies (``clients.parquet`` if present, else ``clients.csv``)."""
    clients = _read_frame(run_dir, CLIENT_FILES, CLIENT_COLUMNS, "per-client table")
    validate_clients(clients)
    return clients


def write_trace(run_dir, trace: pd.DataFrame, clients: pd.DataFrame) -> list[Path]:
    """Write trace.{csv,parquet} and clients.{csv,parquet}, columns in their documented order."""
    validate_trace(trace)
    validate_clients(clients)
    directory = Path(run_dir)
    written = []
    for frame, columns, names in ((trace, TRACE_COLUMNS, TRACE_FILES), (clients, CLIENT_COLUMNS, CLIENT_FILES)):
        ordered = frame.loc[:, list(columns) + [c for c in frame.columns if c not in columns]]
        for name in names:
            atomic_write_frame(directory / name, ordered)
            written.append(directory / name)
    return written
