"""Client stores: RAM and disk give the same rows; disk files stay sparse, snapshots are immutable and checked."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from wirelessfl.learning.client_store import ClientStores, DiskStore, MemoryStore, StoreError

ROWS, WIDTH = 50, 1_000


def pair(tmp_path):
    default = torch.arange(WIDTH, dtype=torch.float32)
    memory = ClientStores("memory", tmp_path / "m").new("models", ROWS, default)
    disk = ClientStores("disk", tmp_path / "d").new("models", ROWS, default)
    return memory, disk


def test_memory_and_disk_give_the_same_rows_and_compact_evaluation_rows(tmp_path):
    memory, disk = pair(tmp_path)
    assert isinstance(memory, MemoryStore) and isinstance(disk, DiskStore)
    values = torch.randn(3, WIDTH, generator=torch.Generator().manual_seed(0))
    for store in (memory, disk):
        store.scatter(np.array([4, 17, 40]), values)
    ids = np.array([40, 0, 4, 4, 49])
    assert torch.equal(memory.gather(ids), disk.gather(ids))
    assert torch.equal(disk.gather(ids)[0], values[2]) and torch.equal(disk.gather(ids)[1], torch.arange(WIDTH, dtype=torch.float32))
    params, rows = disk.compact(ids)
    assert params.shape == (3, WIDTH) and rows.tolist() == [2, 0, 1, 1, 0]  # the default once, rows 4 and 40 once each
    assert torch.equal(params[rows], memory.gather(ids))
    assert torch.equal(disk.full(), memory.full())


def test_a_disk_store_is_a_sparse_file_that_grows_with_the_rows_written(tmp_path):
    store = ClientStores("disk", tmp_path).new("models", 100_000, torch.zeros(WIDTH))
    assert store.live.stat().st_size == 100_000 * WIDTH * 4
    assert store.live.stat().st_blocks * 512 <= 64 * 1024  # 400 MB mapped, nothing allocated
    store.gather(np.arange(0, 100_000, 997))  # unwritten rows are never read
    assert store.live.stat().st_blocks * 512 <= 64 * 1024
    store.scatter(np.array([5]), torch.ones(1, WIDTH))
    assert store.live.stat().st_blocks * 512 <= 64 * 1024 + 2 * WIDTH * 4


def test_names_are_unique_in_the_order_asked(tmp_path):
    stores = ClientStores("disk", tmp_path)
    names = [stores.new("optimizer", 2, torch.zeros(3)).name for _ in range(3)]
    assert names == ["optimizer", "optimizer-2", "optimizer-3"]
    with pytest.raises(ValueError, match="^client store where must be one of memory, disk, got 'cloud'$"):
        ClientStores("cloud")


def test_a_snapshot_is_not_changed_by_later_writes_and_loads_back_exactly(tmp_path):
    memory, disk = pair(tmp_path)
    first = torch.randn(2, WIDTH, generator=torch.Generator().manual_seed(1))
    disk.scatter(np.array([3, 9]), first)
    state = disk.state_dict()
    assert state["rows"].tolist() == [3, 9] and (tmp_path / "d" / state["file"]).stat().st_size == 2 * WIDTH * 4
    disk.scatter(np.array([3, 11]), torch.zeros(2, WIDTH))  # in place, after the checkpoint
    again = ClientStores("disk", tmp_path / "d").new("models", ROWS, torch.arange(WIDTH, dtype=torch.float32))
    again.load_state_dict(state)
    assert torch.equal(again.gather(np.array([3, 9])), first) and not again.written[11]
    memory.directory = tmp_path / "d"  # a run's stores of one unit share its folder
    memory.load_state_dict(state)  # either kind loads either kind of state
    assert torch.equal(memory.full(), again.full())
    assert torch.equal(disk.gather(np.array([3])), torch.zeros(1, WIDTH))  # the live rows moved on


def test_a_store_keeps_its_two_latest_snapshots(tmp_path):
    _, disk = pair(tmp_path)
    names = []
    for k in range(3):
        disk.scatter(np.array([k]), torch.full((1, WIDTH), float(k)))
        names.append(disk.state_dict()["file"])
    left = sorted(p.name for p in (tmp_path / "d").iterdir() if p.suffix == ".rows")
    assert left == sorted(names[1:])
    (tmp_path / "d" / "models.0123456789abcdef.rows").write_bytes(b"")  # left by a run that crashed
    stores = ClientStores("disk", tmp_path / "d")
    stores.stores.append(disk)
    stores.release(keep_latest=True)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [names[2]]
    stores.release()
    assert not (tmp_path / "d").exists()


def test_a_changed_or_missing_snapshot_is_one_line(tmp_path):
    _, disk = pair(tmp_path)
    disk.scatter(np.array([1]), torch.ones(1, WIDTH))
    state = disk.state_dict()
    path = tmp_path / "d" / state["file"]
    raw = bytearray(path.read_bytes())
    raw[7] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(StoreError) as caught:
        disk.load_state_dict(state)
    assert str(caught.value) == (
        f"{path}: checksum mismatch: the client-store snapshot changed after its checkpoint was written; "
        "delete the unit's checkpoint to retrain it"
    )
    os.unlink(path)
    with pytest.raises(StoreError, match=r": cannot read the client-store snapshot: No such file or directory; delete"):
        disk.load_state_dict(state)
