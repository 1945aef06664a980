"""A small mutation check: do the tests notice when the code is broken on purpose?

Each mutant changes one token of one source file (``<`` to ``<=``, ``+`` to
``-``, ``and`` to ``or``, a number to another, ``not x`` to ``x``...) and the
file's tests are run against it. A mutant the tests pass is a *survivor*: either
an equivalent change (report why) or a hole in the tests.

The check never touches the checkout it is given: it copies the repository to
a temporary directory (the working tree, or the tracked files at ``--rev``,
with ``--take`` paths overlaid from the working tree) and mutates the copy,
restoring each file byte for byte before the next mutant. Mutants run in a
child forked from a process that has already imported torch/numpy/sklearn (not
``wirelessfl``), so each mutant costs only its tests; ``--subprocess`` runs a
fresh interpreter per mutant instead.

Examples (from the repository root)::

    python tools/mutation_check.py                         # every default target
    python tools/mutation_check.py wirelessfl/algorithms/cfl.py --max-per-file 20
    python tools/mutation_check.py --rev HEAD --take tests/algorithms/test_cfl.py
    python tools/mutation_check.py wirelessfl/algorithms/cfl.py \\
        --tests "tests/algorithms/test_cfl.py -k bipartition"
    python tools/mutation_check.py wirelessfl/network/link.py wirelessfl/network/nr.py \\
        --tests-for "wirelessfl/network/nr.py=tests/network/test_nr.py tests/network/test_eesm.py"
    python tools/mutation_check.py wirelessfl/network/rounds.py --select covered --json rounds.json
    python tools/mutation_check.py wirelessfl/network/link.py --at wirelessfl/network/link.py:55 --select covered

Each file is judged by its own tests: ``--tests-for FILE=TESTS`` (repeatable), else
``DEFAULT_TESTS``, else ``tests/<its package>/test_<its name>.py``, else the tests of
its package's folder (``tests/network`` for ``wirelessfl/network/*.py``).
The mutated copy is first on ``PYTHONPATH`` for the tests and for every process
they start (a test that runs ``python -m wirelessfl...`` in a child runs the mutant).

A mutant whose tests run past ``--timeout`` is reported as ``timeout``, not as
killed: it proves nothing either way.

``--select covered`` runs each mutant's tests in a better order. The unmutated run
of a file's tests (forked like the mutants) runs under a ``sys.settrace`` tracer that
follows only the target file's frames and records, per test node id, the lines it
ran (module-scope fixtures count for the test that set them up) and its CPU time.
A mutant then runs first the tests that ran its line, fastest first, stopping at
the first failure, which kills it exactly as the full list would. The tracer does
not see tests that run the code in a child process, so a mutant that passes them
runs the rest of the file's list before it is called a survivor, and one whose line
no test ran (a line run only on import) runs the whole list, fastest first. The
verdicts are those of ``--select all`` (the default); only the cost differs. The
JSON gives each mutant's ``selected`` (how many tests ran first) and ``full``
(whether the rest of the list ran too). On ``link.py`` (2026-11-29) every kill came
from the selected tests, a median 1.8 s a mutant against 16 s of CPU for its whole
list. ``--at FILE:LINE`` runs only the mutants of a line (survivors, once more).

Exit status: 0 when every mutant is killed, 1 when some survive or time out, 2
on a usage error or when the unmutated copy already fails its tests.
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib
import io
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.pyc", "results", "*.egg-info", ".pytest_cache")

#: Which tests judge which file (the fast, local tests; a file not listed gets ``tests/algorithms``).
DEFAULT_TESTS = {
    "wirelessfl/algorithms/base.py": "tests/algorithms/test_baselines.py",
    "wirelessfl/algorithms/fedavg.py": "tests/algorithms/test_baselines.py",
    "wirelessfl/algorithms/local.py": "tests/algorithms/test_baselines.py",
    "wirelessfl/algorithms/oracle.py": "tests/algorithms/test_baselines.py",
    "wirelessfl/learning/lockstep.py": "tests/learning/test_lockstep.py",
    "wirelessfl/network/link.py": (
        "tests/network/test_channel.py tests/network/test_transfer_edges.py tests/network/test_faded_interference.py "
        "tests/network/test_network_standard_channel.py tests/network/test_los_fading.py tests/network/test_nr_link_use.py "
        "tests/network/test_olla.py tests/network/test_input_edges.py"
    ),
    "wirelessfl/network/nr.py": (
        "tests/network/test_nr.py tests/network/test_nr_cache.py tests/network/test_eesm.py tests/network/test_transfer_edges.py "
        "tests/network/test_olla.py tests/network/test_olla_downlink_subbands.py"
    ),
    "wirelessfl/network/rounds.py": (
        "tests/network/test_network_events.py tests/network/test_shared_uplink.py tests/network/test_transfer_edges.py "
        "tests/network/test_network_stochastic.py tests/network/test_prb_scheduling.py"
    ),
}
#: Hand-made breaks a review found unnoticed once: (file, exact text, replacement), always run when the text is there.
KNOWN_BREAKS = [
    (
        "wirelessfl/algorithms/base.py",
        "torch.as_tensor(ctx.sizes() / ctx.sizes().sum(), dtype=torch.float64)",
        "torch.full((ctx.num_clients,), 1.0 / ctx.num_clients, dtype=torch.float64)",
    ),
    ("wirelessfl/algorithms/base.py", "mixing[assignment, np.arange(len(labels))] = sizes", "mixing[assignment, np.arange(len(labels))] = 1.0"),
    ("wirelessfl/algorithms/cfl.py", 'linkage="complete"', 'linkage="single"'),
    ("wirelessfl/algorithms/specs/cfl.py", '(the authors\' demo code)") = "single"', '(the authors\' demo code)") = "complete"'),
    # early stopping, work accounting and slot indexing of IFCA, FedMoE and FedEM, each killed by a test since 3e8bf41
    ("wirelessfl/algorithms/ifca.py", "if not self.params.early_stopping_patience or not len(members):",
     "if self.params.early_stopping_patience or not len(members):"),
    ("wirelessfl/algorithms/ifca.py", "float(self.selectable.sum()) / epochs", "float(self.selectable.sum()) * epochs"),
    ("wirelessfl/algorithms/fedmoe.py", 'self.params.gate_split == "train"', 'self.params.gate_split != "train"'),
    ("wirelessfl/algorithms/fedmoe.py", "work += self.params.local_epochs / epochs", "work += self.params.local_epochs * epochs"),
    ("wirelessfl/algorithms/fedem.py", "(members[:, None] * M + np.arange(M))", "(members[:, None] // M + np.arange(M))"),
    # fedprox.py has no operator for the one-token mutants to swap: its pull, dropped and halved
    ("wirelessfl/algorithms/fedprox.py", "start, GradientCorrection(float(self.params.mu), anchor=start))", "start)"),
    ("wirelessfl/algorithms/fedprox.py", "GradientCorrection(float(self.params.mu), anchor=start)",
     "GradientCorrection(float(self.params.mu) / 2, anchor=start)"),
    # Ditto's personal training sharing the global training's optimizer state, or pulled towards the trained global model
    ("wirelessfl/algorithms/ditto.py", "self.personal[index], pull, self.personal_optimizer)", "self.personal[index], pull)"),
    ("wirelessfl/algorithms/ditto.py", "GradientCorrection(float(self.params.lambda_), anchor=start)",
     "GradientCorrection(float(self.params.lambda_), anchor=trained)"),
]
SWAPS = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.And: ast.Or, ast.Or: ast.And,
}
SYMBOL = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Lt: "<", ast.LtE: "<=",
    ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
    ast.NotIn: "not in", ast.And: "and", ast.Or: "or",
}


@dataclass
class Mutant:
    path: str
    line: int
    before: str
    after: str
    start: int  # byte offsets into the file (ast columns are UTF-8 byte offsets)
    end: int
    replacement: str
    status: str = "pending"
    seconds: float = 0.0
    selected: int = 0  # tests run first under --select covered (0 under --select all)
    full: bool = True  # the rest of the file's list ran too (always under --select all)

    @property
    def label(self) -> str:
        return f"{self.path}:{self.line}: {self.before.strip()}  ->  {self.after.strip()}"


def mutants_of(path: str, text: str) -> list[Mutant]:
    """Every one-token mutant of ``text`` (docstrings, strings, annotations and ``raise`` lines left alone)."""
    tree = ast.parse(text)
    data = text.encode()
    offsets = _line_offsets(data)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Raise, ast.JoinedStr, ast.Assert)) or _is_docstring(node):
            skip.update(id(n) for n in ast.walk(node))
        for annotation in _annotations(node):
            skip.update(id(n) for n in ast.walk(annotation))
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip or not hasattr(node, "lineno"):
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in SWAPS:
            found += _operator(data, offsets, node.left, node.right, node.op)
        elif isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                if type(op) in SWAPS:
                    found += _operator(data, offsets, left, right, op)
                left = right
        elif isinstance(node, ast.BoolOp):
            found += _operator(data, offsets, node.values[0], node.values[1], node.op)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            start, end = _span(offsets, node)
            inner = data[slice(*_span(offsets, node.operand))].decode()
            found.append((start, end, f"({inner})"))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
            start, end = _span(offsets, node)
            found.append((start, end, _other_number(node.value)))
    result = []
    for start, end, replacement in sorted(set(found)):
        mutated = data[:start] + replacement.encode() + data[end:]
        try:
            ast.parse(mutated)
        except SyntaxError:
            continue
        line = data.count(b"\n", 0, start) + 1
        before = data.splitlines()[line - 1].decode()
        after = mutated.splitlines()[line - 1].decode()
        result.append(Mutant(path, line, before, after, start, end, replacement))
    return result


def known_breaks(path: str, text: str) -> list[Mutant]:
    """The ``KNOWN_BREAKS`` of ``path`` whose text occurs exactly once."""
    data = text.encode()
    found = []
    for target, old, new in KNOWN_BREAKS:
        if target != path or data.count(old.encode()) != 1:
            continue
        start = data.index(old.encode())
        line = data.count(b"\n", 0, start) + 1
        mutated = data[:start] + new.encode() + data[start + len(old.encode()) :]
        if _code(mutated) == _code(data):  # the text sits in a docstring or comment
            continue
        before, after = data.splitlines()[line - 1].decode(), mutated.splitlines()[line - 1].decode()
        found.append(Mutant(path, line, before, after, start, start + len(old.encode()), new))
    return found


def _code(source: bytes) -> str:
    """The module's AST without docstrings (to tell code changes from comment/docstring edits)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and _is_docstring(body[0]):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _other_number(value: int | float | bool) -> str:
    if isinstance(value, bool):
        return repr(not value)
    if isinstance(value, int):
        return repr(value + 1) if value != 1 else "0"
    return repr(value * 2.0) if value != 0 else "1.0"


def _operator(data: bytes, offsets: list[int], left: ast.AST, right: ast.AST, op: ast.AST) -> list[tuple[int, int, str]]:
    """Replace the operator token that sits between ``left`` and ``right``."""
    gap_start = _span(offsets, left)[1]
    gap_end = _span(offsets, right)[0]
    gap = data[gap_start:gap_end].decode("ascii", errors="replace")  # one byte per character
    symbol = SYMBOL[type(op)]
    words = symbol[0].isalpha()
    for index in range(len(gap)):
        if gap.startswith(symbol, index) and gap[index - 1 : index] not in ("=", "*", "/", "<", ">", "!"):
            end = index + len(symbol)
            if gap[end : end + 1] in ("=", "/", "*") and not words:
                continue
            if words and (gap[end : end + 1].isalnum() or (index and gap[index - 1].isalnum())):
                continue
            return [(gap_start + index, gap_start + end, SYMBOL[SWAPS[type(op)]])]
    return []


def _span(offsets: list[int], node: ast.AST) -> tuple[int, int]:
    return offsets[node.lineno - 1] + node.col_offset, offsets[node.end_lineno - 1] + node.end_col_offset


def _line_offsets(data: bytes) -> list[int]:
    """Byte offset of each line start."""
    offsets, total = [], 0
    for line in data.splitlines(keepends=True):
        offsets.append(total)
        total += len(line)
    return offsets + [total]


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _annotations(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.AnnAssign):
        return [node.annotation]
    if isinstance(node, ast.arg) and node.annotation is not None:
        return [node.annotation]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
        return [node.returns]
    return []


# -- the copy -------------------------------------------------------------------------------


def make_copy(source: Path, rev: str | None, take: list[str]) -> Path:
    """A throw-away copy of the repository (working tree, or ``rev`` plus ``take`` paths)."""
    root = Path(tempfile.mkdtemp(prefix="wirelessfl-mutation-"))
    if rev is None:
        shutil.copytree(source, root, ignore=COPY_IGNORE, dirs_exist_ok=True)
    else:
        archive = subprocess.run(["git", "-C", str(source), "archive", rev], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(root, filter="data")
    for path in take:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / path, target)
    if root.resolve() == source.resolve():
        raise RuntimeError("refusing to mutate the source checkout")
    return root


# -- running the tests ------------------------------------------------------------------------


PYTEST_ARGS = ["-x", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts=-m 'not slow'"]


def run_tests(root: Path, tests: str | list[str], timeout: float, use_subprocess: bool) -> tuple[str, float]:
    """``("passed" | "failed" | "timeout", seconds)`` for ``pytest -x -q <tests>`` in ``root``."""
    code, seconds = _pytest_code(root, tests, timeout, use_subprocess)
    return ("timeout" if code is None else "passed" if code == 0 else "failed"), seconds


def _pytest_code(root: Path, tests: str | list[str], timeout: float, use_subprocess: bool, plugin: object = None) -> tuple[int | None, float]:
    """pytest's exit code (``None`` past ``timeout``) and the seconds it took; ``tests`` is a string to split or a list."""
    args = [*PYTEST_ARGS, *(shlex.split(tests) if isinstance(tests, str) else tests)]
    begin = time.perf_counter()
    if use_subprocess:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": copy_first_path(root)}
        try:
            code = subprocess.run(
                [sys.executable, "-m", "pytest", *args], cwd=root, env=env, capture_output=True, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            return None, time.perf_counter() - begin
    else:
        code = _forked_pytest(root, args, timeout, plugin)
    return code, time.perf_counter() - begin


def _forked_pytest(root: Path, args: list[str], timeout: float, plugin: object = None) -> int | None:
    pid = os.fork()
    if pid == 0:  # child: import the copy's package fresh and run pytest quietly
        code = 3
        try:
            os.chdir(root)
            sys.path.insert(0, str(root))
            os.environ["PYTHONPATH"] = copy_first_path(root)  # the tests' own child processes import the copy too
            os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            import pytest

            code = int(pytest.main(args, plugins=[plugin] if plugin is not None else None))
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.05)


# -- choosing a mutant's tests by the lines they run (--select covered) ---------------------


@dataclass
class Coverage:
    """What a traced run of a file's tests saw: per line of the file, the tests that ran it, and every test."""

    by_line: dict[int, list[str]]  # each line's tests, fastest first
    order: list[str]  # every test of the list, fastest first


def line_coverage(root: Path, path: str, tests: str, timeout: float) -> Coverage | None:
    """One forked pytest run of ``tests`` under a tracer that follows only ``path``'s frames (``None`` when it does not
    pass)."""
    handle, out = tempfile.mkstemp(prefix="wirelessfl-coverage-", suffix=".json")
    os.close(handle)
    try:
        code, _ = _pytest_code(root, tests, timeout, False, _line_recorder(str(root / path), out))
        if code != 0:
            return None
        found = json.loads(Path(out).read_text())
    finally:
        os.unlink(out)
    order = sorted(found["lines"], key=lambda n: found["seconds"][n])
    by_line: dict[int, list[str]] = {}
    for nodeid in order:
        for line in found["lines"][nodeid]:
            by_line.setdefault(line, []).append(nodeid)
    return Coverage(by_line, order)


def covering(coverage: Coverage, original: bytes, mutant: Mutant) -> list[str]:
    """The tests that ran a line the mutant changes, each line's fastest first; when none did (a line run only on import,
    or only in the tests' child processes), every test, fastest first."""
    last = mutant.line + original.count(b"\n", mutant.start, mutant.end)
    chosen = dict.fromkeys(nodeid for line in range(mutant.line, last + 1) for nodeid in coverage.by_line.get(line, []))
    return list(chosen) or list(coverage.order)


def _line_recorder(filename: str, out: str) -> object:
    """A pytest plugin recording which lines of ``filename`` each test runs and its CPU seconds, written to ``out`` as
    JSON when the session ends. Other files' frames get no local tracer, so the tests run at near full speed."""
    import pytest

    class LineRecorder:
        def __init__(self) -> None:
            self.lines: dict[str, set[int]] = {}
            self.seconds: dict[str, float] = {}
            self.current: set[int] = set()  # lines run outside any test: imports and collection

        def pytest_sessionstart(self, session):
            """Traced from here, in the forked child: a tracer set where the plugin is made (the parent) would stay on
            in the parent and every later fork, and a global tracer slows every Python call there by about 45%."""
            sys.settrace(self.enter)
            threading.settrace(self.enter)

        def enter(self, frame, event, arg):
            if frame.f_code.co_filename != filename:
                return None
            self.current.add(frame.f_lineno)  # a resumed generator continues on this line
            return self.step

        def step(self, frame, event, arg):
            if event == "line":
                self.current.add(frame.f_lineno)
            return self.step

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):
            outside, self.current = self.current, self.lines.setdefault(item.nodeid, set())
            begin = time.process_time()
            yield
            self.seconds[item.nodeid] = time.process_time() - begin
            self.current = outside

        def pytest_sessionfinish(self, session, exitstatus):
            sys.settrace(None)
            threading.settrace(None)
            lines = {nodeid: sorted(found) for nodeid, found in self.lines.items()}
            Path(out).write_text(json.dumps({"lines": lines, "seconds": self.seconds}))

    return LineRecorder()


def copy_first_path(root: Path) -> str:
    """``PYTHONPATH`` with the mutated copy first, ahead of whatever the caller had (an editable install elsewhere)."""
    return os.pathsep.join([str(root), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])


def tests_for(path: str, root: Path, override: str | None, per_file: dict[str, str] | None = None) -> str:
    """The tests judging ``path``: ``--tests``, its ``--tests-for``, ``DEFAULT_TESTS``, its own test file, its package's
    test folder, in that order."""
    if override:
        return override
    if per_file and path in per_file:
        return per_file[path]
    if path in DEFAULT_TESTS:
        return DEFAULT_TESTS[path]
    own = root / "tests" / Path(path).parent.name / f"test_{Path(path).stem}.py"
    if own.exists():
        return str(own.relative_to(root))
    folder = root / "tests" / Path(path).parent.name
    return str(folder.relative_to(root)) if folder.is_dir() else "tests/algorithms"


def parse_tests_for(values: list[str]) -> dict[str, str]:
    """``FILE=TESTS`` pairs of ``--tests-for``; a value without ``=`` is a usage error (one line)."""
    pairs = {}
    for value in values:
        path, sep, tests = value.partition("=")
        if not sep or not path.strip() or not tests.strip():
            raise SystemExit(f"mutation_check: --tests-for takes FILE=TESTS (pytest arguments), got {value!r}")
        pairs[path.strip()] = tests.strip()
    return pairs


def judge(root: Path, tests: str, mutant: Mutant, coverage: Coverage | None, original: bytes,
          timeout: float, use_subprocess: bool) -> None:
    """Set the mutant's status: ``killed`` when a test fails, ``survived`` when the file's full list passes, ``timeout``.
    With ``coverage`` (``--select covered``) the tests that ran its lines go first, fastest first; when they pass, the
    rest of the list runs (a selection pytest cannot run, exit codes 4 and 5, sends it to the full list)."""
    seconds = 0.0
    if coverage is not None:
        chosen = covering(coverage, original, mutant)
        mutant.selected, mutant.full = len(chosen), False
        code, seconds = _pytest_code(root, chosen, timeout, use_subprocess)
        if code is None or code not in (0, 4, 5):
            mutant.status, mutant.seconds = ("timeout" if code is None else "killed"), seconds
            return
        mutant.full = True
        if code == 0:  # they passed: the rest of the list runs without them (nothing left to run is a pass)
            rest = [*shlex.split(tests), *(arg for nodeid in chosen for arg in ("--deselect", nodeid))]
            code, more = _pytest_code(root, rest, timeout, use_subprocess)
            mutant.seconds = seconds + more
            mutant.status = "timeout" if code is None else "survived" if code in (0, 5) else "killed"
            return
    status, more = run_tests(root, tests, timeout, use_subprocess)
    mutant.status = {"passed": "survived", "failed": "killed"}.get(status, status)
    mutant.seconds = seconds + more


#: Imported once by the parent so that no forked child pays for them (never ``wirelessfl``: the children import the copy).
WARM = (
    "numpy", "scipy", "scipy.special", "scipy.stats", "sklearn", "torch", "pytest", "hypothesis", "simpy", "yaml",
    "matplotlib.figure", "plotly.graph_objects", "sionna.sys",
)


def warm() -> None:
    """Import ``WARM`` (those installed) and freeze the heap: the children's collections then skip the parent's objects
    (pytest collects garbage several times on exit) and leave its pages shared."""
    for name in WARM:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
    gc.freeze()


def default_targets(root: Path) -> list[str]:
    files = sorted(p for p in (root / "wirelessfl" / "algorithms").glob("*.py") if p.name != "__init__.py")
    return [str(p.relative_to(root)) for p in files] + ["wirelessfl/learning/lockstep.py"]


def summary(mutants: list[Mutant]) -> str:
    """``K killed, S survived, T timed out``: a timeout is neither killed nor survived."""
    count = {status: sum(m.status == status for m in mutants) for status in ("killed", "survived", "timeout")}
    return f"{count['killed']} killed, {count['survived']} survived, {count['timeout']} timed out"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="source files to mutate (default: wirelessfl/algorithms/*.py and learning/lockstep.py)")
    parser.add_argument("--tests", help="pytest arguments judging every path (default: per-file mapping, see DEFAULT_TESTS)")
    parser.add_argument("--tests-for", action="append", default=[], metavar="FILE=TESTS",
                        help="pytest arguments judging one file (repeatable; --tests overrides them all)")
    parser.add_argument("--rev", help="copy the tracked files at this git revision instead of the working tree")
    parser.add_argument("--take", nargs="*", default=[], help="paths copied from the working tree over --rev's files")
    parser.add_argument("--max-per-file", type=int, default=0, help="sample at most this many mutants per file (0: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--at", action="append", default=[], metavar="FILE:LINE",
                        help="only the mutants on this line (repeatable; to run again the survivors of a run)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant before it is stopped and reported as timeout")
    parser.add_argument("--subprocess", action="store_true", help="fresh interpreter per mutant instead of fork")
    parser.add_argument("--select", choices=("all", "covered"), default="all",
                        help="all: every mutant runs its file's tests; covered: first only the tests that ran its line "
                             "(a survivor is judged again by all of them)")
    parser.add_argument("--list", action="store_true", help="only list the mutants")
    parser.add_argument("--json", type=Path, help="write every mutant and its status here")
    args = parser.parse_args(argv)
    try:
        per_file = parse_tests_for(args.tests_for)
    except SystemExit as error:
        print(error, file=sys.stderr)
        return 2
    if args.select == "covered" and args.subprocess:
        print("mutation_check: --select covered needs the forked runs; drop --subprocess", file=sys.stderr)
        return 2

    source = REPO
    root = make_copy(source, args.rev, args.take)
    try:
        paths = args.paths or default_targets(root)
        plan: list[tuple[str, str, list[Mutant]]] = []
        for path in paths:
            if not (root / path).is_file():
                print(f"mutation_check: no such file in the copy: {path}", file=sys.stderr)
                return 2
            text = (root / path).read_text()
            mutants = mutants_of(path, text)
            if args.at:
                mutants = [m for m in mutants if f"{path}:{m.line}" in args.at]
            if args.max_per_file and len(mutants) > args.max_per_file:
                rng = random.Random(f"{args.seed}:{path}")
                mutants = sorted(rng.sample(mutants, args.max_per_file), key=lambda m: m.start)
            mutants += [m for m in known_breaks(path, text) if not args.at or f"{path}:{m.line}" in args.at]
            plan.append((path, tests_for(path, root, args.tests, per_file), mutants))
        if args.list:
            for path, tests, mutants in plan:
                print(f"# {path} ({len(mutants)} mutants) judged by: {tests}")
                for mutant in mutants:
                    print(mutant.label)
            return 0
        if not args.subprocess:
            warm()

        sys.dont_write_bytecode = True
        results: list[Mutant] = []
        for path, tests, mutants in plan:
            begin = time.perf_counter()
            if args.select == "covered":  # the traced run is the unmutated check
                coverage = line_coverage(root, path, tests, args.timeout * 6)
                seen = f", {len(coverage.by_line)} lines run by some test" if coverage is not None else ""
                status = "passed" if coverage is not None else "failed"
            else:
                coverage, seen = None, ""
                status, _ = run_tests(root, tests, args.timeout * 3, args.subprocess)
            seconds = time.perf_counter() - begin
            print(f"# {path}: {len(mutants)} mutants, tests: {tests} (unmutated: {status}, {seconds:.1f} s{seen})", flush=True)
            if status != "passed":
                print(f"mutation_check: the unmutated copy fails {tests}; fix that first", file=sys.stderr)
                return 2
            target = root / path
            original = target.read_bytes()
            try:
                for mutant in mutants:
                    target.write_bytes(original[: mutant.start] + mutant.replacement.encode() + original[mutant.end :])
                    judge(root, tests, mutant, coverage, original, args.timeout, args.subprocess)
                    how = f" [{mutant.selected} selected{', then the rest' if mutant.full else ''}]" if coverage else ""
                    print(f"  {mutant.status:8s} {mutant.seconds:5.1f}s  {mutant.label}{how}", flush=True)
                    results.append(mutant)
            finally:
                target.write_bytes(original)
            assert target.read_bytes() == original
            if args.json:  # after each file, so that a stopped run keeps what it found
                args.json.write_text(json.dumps([asdict(m) for m in results], indent=1))
        counts = summary(results)
        print(f"\n{len(results)} mutants: {counts}")
        for path, _, mutants in plan:
            done = [m for m in mutants if m.status != "pending"]
            print(f"  {path}: {len(done)} mutants, {summary(done)}")
        if args.json:
            args.json.write_text(json.dumps([asdict(m) for m in results], indent=1))
        return 0 if all(m.status == "killed" for m in results) else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
