"""The NR table cache is checked before it is trusted: what it was built from, the checksum of its arrays, its
shapes and values; a bad file is built again in its place, or named in one line when it cannot be replaced."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from wirelessfl.network import nr, physical
from wirelessfl.network._nr_build import TABLE_ARRAYS, content_digest

pytestmark = pytest.mark.skipif(nr.find_sionna() is None, reason="sionna-no-rt is not installed (pip install -e .)")

PARAMS = {"mcs_table": 1, "re_per_prb": 156}


@pytest.fixture(scope="module")
def real_build(tmp_path_factory):
    """The one run of Sionna in this file (the real child process, not the copying stand-in; ``-m slow``: about 8 s
    of CPU, and the ordinary cache's first build runs the same child in every fresh checkout): a table-1 file built
    over 100 zero bytes in its place. Returns (the path, what reading the damaged file said, the tables
    ``load_tables`` returned, the folder's file names after)."""
    root = tmp_path_factory.mktemp("nr-cache")
    previous = os.environ.get("WIRELESSFL_CACHE")
    os.environ["WIRELESSFL_CACHE"] = str(root)
    nr.load_tables.cache_clear()
    try:
        (root / "nr").mkdir()
        with pytest.MonkeyPatch.context() as patch:  # a build that only records the path asked for
            patch.setattr(nr, "_build_tables", lambda path, params: path.write_bytes(b"\x00" * 100))
            with pytest.raises(ValueError, match="after building it again"):
                nr.load_tables(1, 156)
        nr.load_tables.cache_clear()
        (path,) = (root / "nr").iterdir()
        damaged = nr.read_tables(path, nr.sionna_version(), PARAMS)
        tables = nr.load_tables(1, 156)
    finally:
        nr.load_tables.cache_clear()
        if previous is None:
            del os.environ["WIRELESSFL_CACHE"]
        else:
            os.environ["WIRELESSFL_CACHE"] = previous
    return path, damaged, tables, sorted(p.name for p in path.parent.iterdir())


@pytest.fixture(scope="module")
def built():
    """The table-1 file Sionna built into the ordinary cache (by the first test that needed it, else here), its bytes,
    and the tables read from it. ``real_build`` (``-m slow``) builds one over a damaged file in a cache of its own."""
    tables = nr.load_tables(1, 156)
    path = nr.tables_path(tables.sionna_version, PARAMS)
    return path, path.read_bytes(), tables


@pytest.fixture
def cache(tmp_path, monkeypatch, built):
    """An empty cache whose builder copies the built file into place (so each case needs no Sionna run) and counts
    its calls; returns (the path load_tables uses, the calls)."""
    good, data, _ = built
    monkeypatch.setenv("WIRELESSFL_CACHE", str(tmp_path))
    nr.load_tables.cache_clear()
    calls = []

    def build(path: Path, params: dict) -> None:
        calls.append(params)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)

    monkeypatch.setattr(nr, "_build_tables", build)
    yield tmp_path / "nr" / good.name, calls
    nr.load_tables.cache_clear()


def assert_same_tables(a: nr.NrTables, b: nr.NrTables) -> None:
    for name in ("bler", "qm", "rate", "tbs", "cbs", "ncb"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert (a.snr_grid, a.cbs_grid, a.sionna_version) == (b.snr_grid, b.cbs_grid, b.sionna_version)


def _arrays(data: bytes, tmp_path: Path) -> tuple[dict[str, np.ndarray], dict]:
    source = tmp_path / "source.npz"
    source.write_bytes(data)
    with np.load(source) as npz:
        arrays = {name: npz[name] for name in TABLE_ARRAYS}
        meta = json.loads(str(npz["meta"]))
    return arrays, meta


def _write_npz(path: Path, arrays: dict[str, np.ndarray], meta: dict, rehash: bool = True) -> None:
    """A table file holding ``arrays``; with ``rehash``, its checksum recomputed (so only the other checks can
    refuse it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {**meta, "sha256": content_digest(arrays)} if rehash else meta
    with open(path, "wb") as handle:
        np.savez_compressed(handle, **arrays, meta=np.array(json.dumps(meta, sort_keys=True)))


def test_the_built_file_records_what_it_was_built_from_and_the_checksum_of_its_arrays(built, tmp_path):
    path, data, tables = built
    arrays, meta = _arrays(data, tmp_path)
    assert meta == {"params": PARAMS, "sha256": content_digest(arrays), "sionna": tables.sionna_version}
    assert nr.read_tables(path, tables.sionna_version, PARAMS)[1] is None


def test_a_sound_cache_is_read_without_building(cache, built):
    path, calls = cache
    path.parent.mkdir(parents=True)
    path.write_bytes(built[1])
    assert_same_tables(nr.load_tables(1, 156), built[2])
    assert calls == []


def _edited(name: str, change):
    def make(arrays: dict[str, np.ndarray], meta: dict) -> tuple[dict[str, np.ndarray], dict]:
        arrays = dict(arrays)
        arrays[name] = change(arrays[name].copy())
        return arrays, meta

    return make


def _set(index, value):
    def change(array):
        array[index] = value
        return array

    return change


EDITS = {
    "nan BLER": _edited("bler", _set((1, 12, 0, 100), np.nan)),
    "BLER above 1": _edited("bler", _set((1, 12, 0, 100), 1.5)),
    "zero TBS": _edited("tbs", _set((1, 12, 50), 0)),
    "zero code blocks": _edited("ncb", _set((0, 5, 10), 0)),
    "SNR step 0": _edited("snr_grid", _set(2, 0.0)),
    "NaN in the SNR grid": _edited("snr_grid", _set(0, np.nan)),
    "wrong shape": _edited("tbs", lambda a: a[:, :, :100]),
    "too few SNR points": _edited("bler", lambda a: a[..., :-1]),
    "built for table 2": lambda arrays, meta: (arrays, {**meta, "params": {"mcs_table": 2, "re_per_prb": 156}}),
    "another Sionna": lambda arrays, meta: (arrays, {**meta, "sionna": "0.1"}),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_a_cache_with_unusable_tables_or_made_for_other_settings_is_built_again(cache, built, tmp_path, case):
    path, calls = cache
    arrays, meta = EDITS[case](*_arrays(built[1], tmp_path))
    _write_npz(path, arrays, meta)
    assert nr.read_tables(path, built[2].sionna_version, PARAMS)[0] is None
    assert_same_tables(nr.load_tables(1, 156), built[2])
    assert calls == [PARAMS] and path.read_bytes() == built[1]


def _arrays_with(name: str, value):
    def make(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**arrays, name: value(arrays[name]) if callable(value) else np.array(value)}

    return make


def _invalid_mcs_0(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """MCS 0 marked not valid (qm 0) in both categories, with the zeros a table holds for such an MCS."""
    arrays = {name: array.copy() for name, array in arrays.items()}
    for name in ("qm", "rate", "tbs", "cbs", "ncb"):
        arrays[name][:, 0] = 0
    return arrays


def _edit(name: str, index, value):
    def make(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        array = arrays[name].copy()
        array[index] = value
        return {**arrays, name: array}

    return make


GRID = "not a finite (min, max, step) with min < max and step > 0"
RATE = "no valid MCS, or a code rate outside (0, 1)"
BETA = "eesm_beta has shape [{}] or values that are not finite and >= 0"
FLAWS = {  # one flaw each, and what ``_table_problem`` says of it (None: sound)
    "bler of 3 categories": (_arrays_with("bler", lambda b: np.concatenate([b, b[:1]])), "bler has shape [3, 29, 85, 351], not [2, MCS, code-block sizes, SINRs]"),
    "bler of no SINR": (_arrays_with("bler", lambda b: b[..., :0]), "bler has shape [2, 29, 85, 0], not [2, MCS, code-block sizes, SINRs]"),
    "a code-block grid of 4 numbers": (_arrays_with("cbs_grid", [24.0, 8448.0, 100.0, 1.0]), f"cbs_grid is [24.0, 8448.0, 100.0, 1.0], {GRID}"),
    "an integer code-block grid": (_arrays_with("cbs_grid", [24, 8448, 100]), f"cbs_grid is [24, 8448, 100], {GRID}"),
    "a code-block grid with min = max": (_arrays_with("cbs_grid", [24.0, 24.0, 100.0]), f"cbs_grid is [24.0, 24.0, 100.0], {GRID}"),
    "a code-block grid of other points": (_arrays_with("cbs_grid", [24.0, 8448.0, 50.0]), "cbs_grid [24.0, 8448.0, 50.0] does not have the 85 points of bler"),
    "an SINR grid of other points": (_arrays_with("snr_grid", [-5.0, 30.01, 0.2]), "snr_grid [-5.0, 30.01, 0.2] does not have the 351 points of bler"),
    "an MCS marked not valid": (_invalid_mcs_0, None),
    "a pi/2-BPSK MCS of rate 0": (lambda arrays: _edit("rate", (0, 0), 0.0)(_edit("qm", (0, 0), 1)(arrays)), RATE),
    "no valid MCS": (_arrays_with("qm", lambda q: np.zeros_like(q)), RATE),
    "a code rate of 0": (_edit("rate", (1, 5), 0.0), RATE),
    "a code rate of 1": (_edit("rate", (1, 5), 1.0), RATE),
    "one EESM beta short": (_arrays_with("eesm_beta", lambda b: b[:-1]), BETA.format(28)),
    "integer EESM betas": (_arrays_with("eesm_beta", lambda b: np.rint(b).astype(np.int64)), BETA.format(29)),
}


@pytest.mark.parametrize("case", sorted(FLAWS))
def test_each_flaw_of_a_table_is_named_and_a_sound_variant_is_not_refused(built, tmp_path, case):
    """``read_tables`` says this of a file whose arrays have the flaw (checksum recomputed). Sionna's qm is >= 2
    (a valid MCS); qm 1 is pi/2-BPSK, valid too, so its rate must be in (0, 1); qm 0 marks an MCS a table has not."""
    edit, problem = FLAWS[case]
    assert nr._table_problem(edit(_arrays(built[1], tmp_path)[0])) == problem


def test_the_cache_file_name_is_the_settings_and_a_key_that_ignores_their_order():
    """``sionna-{version}-table{t}-{re}re-{16 hex digits}.npz`` in the cache folder; the key hashes the settings
    sorted, so the same settings in another order name the same file."""
    one = nr.tables_path("2.2.0", {"mcs_table": 2, "re_per_prb": 144})
    assert one == nr.tables_path("2.2.0", {"re_per_prb": 144, "mcs_table": 2})
    assert one.parent == nr.cache_dir() and re.fullmatch(r"sionna-2\.2\.0-table2-144re-[0-9a-f]{16}\.npz", one.name)
    assert one != nr.tables_path("2.2.1", {"mcs_table": 2, "re_per_prb": 144})


def _child(tmp_path: Path, body: str) -> Path:
    """A stand-in for the Python that ``_build_tables`` runs: a shell script that records its arguments, then ``body``."""
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/argv"\n{body}\n')
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(
    ("stderr", "said"),
    [("Traceback (most recent call last):\nImportError: no sionna here", "ImportError: no sionna here"), ("", "no message")],
)
def test_a_failed_build_is_one_line_ending_with_the_childs_last_error_line(tmp_path, monkeypatch, stderr, said):
    lines = "".join(f'echo "{line}" >&2\n' for line in stderr.splitlines())
    monkeypatch.setattr(sys, "executable", str(_child(tmp_path, f"{lines}exit 1")))
    with pytest.raises(nr.SionnaUnavailable) as caught:
        nr._build_tables(tmp_path / "cache" / "nr" / "t.npz", PARAMS)
    assert str(caught.value) == f"physical.link 'nr' needs Sionna SYS: pip install 'sionna-no-rt>=2.2,<3' (building its tables failed: {said})"


def test_a_build_makes_its_folder_and_runs_the_builder_module_there_again(tmp_path, monkeypatch):
    """A cache folder whose parent does not exist yet is made; a second build into it is no error (the child, a
    stand-in that exits 0, writes nothing: what it wrote is ``read_tables``' to judge)."""
    monkeypatch.setattr(sys, "executable", str(_child(tmp_path, "exit 0")))
    path = tmp_path / "cache" / "nr" / "t.npz"
    for _ in range(2):
        assert nr._build_tables(path, PARAMS) is None
        assert path.parent.is_dir() and not path.exists()
    argv = ["-m", "wirelessfl.network._nr_build", str(path), json.dumps(PARAMS)]
    assert (tmp_path / "argv").read_text().splitlines() == argv


def test_a_changed_array_fails_its_checksum(cache, built, tmp_path):
    path, calls = cache
    arrays, meta = _arrays(built[1], tmp_path)
    arrays["tbs"] = arrays["tbs"] * 2  # still sound tables, but not the ones built: only the checksum can tell
    _write_npz(path, arrays, meta, rehash=False)
    assert nr.read_tables(path, built[2].sionna_version, PARAMS) == (None, "its arrays changed after it was built (checksum mismatch)")
    assert_same_tables(nr.load_tables(1, 156), built[2])
    assert calls == [PARAMS]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _symlink_to_a_sound_copy(path: Path) -> None:
    elsewhere = path.parent.parent / "elsewhere.npz"
    shutil.copyfile(path.with_name("good"), elsewhere)
    os.symlink(elsewhere, path)


DAMAGE = {
    "empty": lambda path: path.write_bytes(b""),
    "random bytes": lambda path: path.write_bytes(np.random.default_rng(0).bytes(4096)),
    "a pickle": lambda path: path.write_bytes(b"\x80\x04\x95" + bytes(64)),
    "truncated": lambda path: path.write_bytes(path.with_name("good").read_bytes()[:5000]),
    "a FIFO": _fifo,
    "a symlink": _symlink_to_a_sound_copy,
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_or_irregular_cache_file_is_replaced_without_hanging(cache, built, case, no_longer_than):
    path, calls = cache
    path.parent.mkdir(parents=True)
    path.with_name("good").write_bytes(built[1])
    DAMAGE[case](path)
    with no_longer_than(20):
        assert_same_tables(nr.load_tables(1, 156), built[2])
    assert calls == [PARAMS]
    assert not path.is_symlink() and path.read_bytes() == built[1]


def test_a_folder_in_place_of_the_cache_file_is_one_line_naming_it(cache, tmp_path):
    path, calls = cache
    path.mkdir(parents=True)
    with pytest.raises(ValueError) as caught:
        nr.load_tables(1, 156)
    assert str(caught.value) == (
        f"{path}: a folder, not the table file; delete it (wirelessfl builds the NR tables there again from Sionna)"
    )
    assert calls == []


def test_a_build_that_still_gives_a_bad_file_is_one_line(cache, monkeypatch):
    path, _ = cache
    monkeypatch.setattr(nr, "_build_tables", lambda where, params: where.write_bytes(b"not a table"))
    path.parent.mkdir(parents=True)
    with pytest.raises(ValueError) as caught:
        nr.load_tables(1, 156)
    assert str(caught.value).startswith(f"{path}: not a table file (")
    assert str(caught.value).endswith(") after building it again; delete it and run again")


def test_the_command_line_names_the_cache_folder_in_one_line_and_writes_nothing(cache, tmp_path):
    from typer.testing import CliRunner

    from wirelessfl.cli import app

    path, _ = cache
    path.mkdir(parents=True)
    physical.nr_link.cache_clear()
    scenario = tmp_path / "nr.yaml"
    scenario.write_text(
        "name: nr\nrounds: 1\ndata: {dataset: digits, clients: 4}\nalgorithms: [{name: fedavg}]\n"
        "networks: [{name: cell, physical: {link: nr, bandwidth_hz: 20.0e+6}}]\n"
    )
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--out", str(out)])
    physical.nr_link.cache_clear()
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: {scenario}: network 'cell': {path}: a folder, not the table file; delete it "
        "(wirelessfl builds the NR tables there again from Sionna)"
    )
    assert not out.exists()


@pytest.mark.slow
def test_a_real_rebuild_replaces_random_bytes_with_sionnas_tables(real_build, tmp_path):
    """The real child process (``real_build``), not the copying stand-in: it writes the file whole over the damaged one."""
    path, damaged, tables, names = real_build
    assert damaged[0] is None and damaged[1] is not None  # the 100 zero bytes were refused, so Sionna was run
    assert path.read_bytes() != b"\x00" * 100
    fresh, problem = nr.read_tables(path, tables.sionna_version, PARAMS)
    assert problem is None
    assert_same_tables(fresh, tables)
    assert tables.sionna_version == nr.sionna_version()
    assert names == [path.name]  # no temporary left behind
