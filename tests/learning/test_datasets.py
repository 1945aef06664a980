"""Loaders read real torchvision-format files written into temp dirs; the offline copies are used when present."""

import hashlib
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.datasets import CIFAR10, FashionMNIST
from torchvision.io import decode_jpeg, encode_jpeg, write_png

from wirelessfl.learning.data.catalog import DATASETS
from wirelessfl.learning.data.datasets import (
    CIFAR10_CLASSES,
    DatasetError,
    channel_stats,
    load_pool,
    resolve_root,
    synthetic_mixture,
)

SHARED_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def write_idx(path: Path, array: np.ndarray) -> None:
    """The idx format torchvision's MNIST readers expect: magic (0x08 = uint8, ndim), big-endian dims, bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    array = np.ascontiguousarray(array, dtype=np.uint8)
    with open(path, "wb") as handle:
        handle.write(struct.pack(">I", 0x0800 + array.ndim))
        handle.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        handle.write(array.tobytes())


def tiny_images(count: int, size: int = 28, offset: int = 0) -> np.ndarray:
    images = np.zeros((count, size, size), dtype=np.uint8)
    for i in range(count):
        images[i, i % size, (2 * i) % size] = 200 + offset + i  # one bright, non-symmetric pixel per image
        images[i, 0, 1] = 10 + i
    return images


def test_registry_lists_every_dataset_with_description_and_options():
    assert sorted(DATASETS) == ["cifar10", "digits", "emnist", "fashion_mnist", "imagefolder", "mnist", "synthetic"]
    assert all(info.description for info in DATASETS.values())
    assert dict(DATASETS["emnist"].options) == {"split": "byclass", "pool": ("train", "test")}
    assert dict(DATASETS["imagefolder"].options) == {"path": ".", "pool": (".",), "image_size": 32, "channels": 3}


def test_channel_stats_are_exact_on_a_hand_case():
    x = torch.tensor([0, 255, 0, 255], dtype=torch.uint8).view(1, 1, 2, 2)
    assert channel_stats(x) == ((127.5,), (127.5,))
    two = torch.stack([torch.full((2, 2), 4), torch.tensor([[0, 2], [4, 6]])]).to(torch.uint8).unsqueeze(0)
    mean, std = channel_stats(two)
    assert mean == (4.0, 3.0)
    assert std[0] == pytest.approx(1e-6) and std[1] == pytest.approx(np.sqrt(5.0))


def test_digits_pool():
    pool = load_pool("digits")
    assert pool.x.shape == (1797, 1, 8, 8) and pool.x.dtype == torch.uint8
    assert pool.y.dtype == torch.int64 and pool.num_classes == 10 and pool.class_names == tuple("0123456789")
    values = pool.x.numpy().astype(np.float64)
    assert pool.mean[0] == pytest.approx(values.mean()) and pool.std[0] == pytest.approx(values.std())
    normalised = pool.normalise(pool.x)
    assert normalised.dtype == torch.float32
    assert float(normalised.mean()) == pytest.approx(0.0, abs=1e-5) and float(normalised.std()) == pytest.approx(1.0, abs=1e-3)


def test_digits_are_scikit_learns_then_read_from_the_cache_and_a_bad_cache_is_drawn_again(tmp_path, monkeypatch):
    import sklearn.datasets

    images = sklearn.datasets.load_digits().images
    first = load_pool("digits", root=tmp_path)
    (cache_file,) = (tmp_path / ".wirelessfl-cache").iterdir()
    assert cache_file.name.startswith("digits-scikit-learn-")
    np.testing.assert_array_equal(first.x[:, 0].numpy(), images)
    asked = []
    monkeypatch.setattr(sklearn.datasets, "load_digits", lambda: asked.append(1) or pytest.fail("scikit-learn asked again"))
    again = load_pool("digits", root=tmp_path)
    assert asked == [] and torch.equal(again.x, first.x) and torch.equal(again.y, first.y)
    assert (again.mean, again.std, again.class_names) == (first.mean, first.std, first.class_names)
    monkeypatch.undo()
    cache_file.write_bytes(b"\x00" * 64)  # a partial write or a foreign file: drawn from scikit-learn and written again
    assert torch.equal(load_pool("digits", root=tmp_path).x, first.x) and cache_file.stat().st_size > 64
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    assert torch.equal(load_pool("digits", root=blocked).x, first.x)  # an unwritable cache is left out


def test_root_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("WIRELESSFL_DATA", str(tmp_path))
    assert resolve_root(None) == tmp_path.resolve()
    assert resolve_root(tmp_path / "other") == (tmp_path / "other").resolve()
    monkeypatch.delenv("WIRELESSFL_DATA")
    assert resolve_root(None) == Path("~/.cache/wirelessfl").expanduser().resolve()


def test_unknown_dataset_and_option_errors():
    with pytest.raises(ValueError, match=r"^data\.dataset must be one of cifar10, digits, emnist, fashion_mnist, imagefolder, mnist, synthetic; got 'cifar'$"):
        load_pool("cifar")
    with pytest.raises(ValueError, match=r"^data\.options for dataset 'emnist': unknown option 'splits'; allowed: split, pool$"):
        load_pool("emnist", options={"splits": "byclass"})
    with pytest.raises(ValueError, match=r"^data\.options\.split for dataset 'emnist' must be one of byclass, bymerge, balanced, letters, digits, mnist; got 'bychar'$"):
        load_pool("emnist", options={"split": "bychar"})
    with pytest.raises(ValueError, match=r"^data\.options\.pool for dataset 'mnist' must be a non-empty list of 'train' and/or 'test'; got \['valid'\]$"):
        load_pool("mnist", options={"pool": ["valid"]})


@pytest.mark.parametrize(("name", "folder"), [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_mnist_family_reads_idx_files_and_pools_splits(tmp_path, name, folder):
    train, test = tiny_images(6), tiny_images(4, offset=20)
    raw = tmp_path / folder / "raw"
    write_idx(raw / "train-images-idx3-ubyte", train)
    write_idx(raw / "train-labels-idx1-ubyte", np.array([0, 1, 2, 3, 4, 5]))
    write_idx(raw / "t10k-images-idx3-ubyte", test)
    write_idx(raw / "t10k-labels-idx1-ubyte", np.array([9, 8, 7, 6]))
    pool = load_pool(name, root=tmp_path)
    assert torch.equal(pool.x[:, 0], torch.from_numpy(np.concatenate([train, test])))
    assert pool.y.tolist() == [0, 1, 2, 3, 4, 5, 9, 8, 7, 6] and pool.num_classes == 10
    only_test = load_pool(name, root=tmp_path, options={"pool": ["test"]})
    assert torch.equal(only_test.x[:, 0], torch.from_numpy(test)) and only_test.y.tolist() == [9, 8, 7, 6]


def test_emnist_test_split_alone_is_pooled_and_made_upright(tmp_path):
    stored = tiny_images(5)  # as in the EMNIST files: transposed
    raw = tmp_path / "EMNIST" / "raw"
    write_idx(raw / "emnist-byclass-test-images-idx3-ubyte", stored)
    write_idx(raw / "emnist-byclass-test-labels-idx1-ubyte", np.array([0, 10, 36, 61, 5]))
    pool = load_pool("emnist", root=tmp_path, options={"split": "byclass", "pool": ["test"]})
    assert torch.equal(pool.x[:, 0], torch.from_numpy(stored).transpose(1, 2))
    assert pool.y.tolist() == [0, 10, 36, 61, 5]
    assert pool.num_classes == 62 and pool.class_names[10] == "A" and pool.class_names[36] == "a"


def test_emnist_other_splits_use_torchvisions_class_lists(tmp_path):
    raw = tmp_path / "EMNIST" / "raw"
    write_idx(raw / "emnist-letters-train-images-idx3-ubyte", tiny_images(3))
    write_idx(raw / "emnist-letters-train-labels-idx1-ubyte", np.array([1, 26, 2]))
    pool = load_pool("emnist", root=tmp_path, options={"split": "letters", "pool": ["train"]})
    assert pool.num_classes == 27 and pool.class_names[:3] == ("N/A", "a", "b")  # class 0 exists but is never used
    assert pool.y.tolist() == [1, 26, 2]


def test_missing_emnist_split_says_where_and_how(tmp_path):
    raw = tmp_path / "EMNIST" / "raw"
    write_idx(raw / "emnist-byclass-test-images-idx3-ubyte", tiny_images(2))
    write_idx(raw / "emnist-byclass-test-labels-idx1-ubyte", np.array([0, 1]))
    expected = (
        f"dataset 'emnist': the train split not found at {raw / 'emnist-byclass-train-images-idx3-ubyte'}. "
        "Get it with `download: true` (needs internet), or on the offline machines run "
        "`python ../shared/data/prepare.py ROOT` and set data.root to that ROOT "
        "(it holds only the byclass test split: set data.options to {split: byclass, pool: [test]})"
    )
    with pytest.raises(DatasetError) as error:
        load_pool("emnist", root=tmp_path)
    assert str(error.value) == expected
    assert isinstance(error.value, ValueError)
    (raw / "emnist-byclass-test-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetError, match=r"^dataset 'emnist': the test split not found at .*emnist-byclass-test-labels-idx1-ubyte\. Get it"):
        load_pool("emnist", root=tmp_path, options={"pool": ["test"]})


def test_mnist_names_the_file_torchvision_misses_even_from_the_other_split(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    write_idx(raw / "t10k-images-idx3-ubyte", tiny_images(2))
    write_idx(raw / "t10k-labels-idx1-ubyte", np.array([0, 1]))
    expected = (
        f"dataset 'mnist': the train split (torchvision's MNIST needs it to read the test split) not found at "
        f"{raw / 'train-images-idx3-ubyte'}. Get it with `download: true` (needs internet); the offline machines have no copy "
        "of it (see ../shared/data/README.md)"
    )
    with pytest.raises(DatasetError) as error:
        load_pool("mnist", root=tmp_path, options={"pool": ["test"]})
    assert str(error.value) == expected


def test_failed_download_is_one_line_naming_the_path(tmp_path, monkeypatch):
    def offline(self):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried https://mirror/, got:\n<urlopen error>")

    monkeypatch.setattr(FashionMNIST, "download", offline)
    with pytest.raises(DatasetError) as error:
        load_pool("fashion_mnist", root=tmp_path, download=True)
    assert str(error.value) == (
        f"dataset 'fashion_mnist': the train split not found at {tmp_path / 'FashionMNIST' / 'raw' / 'train-images-idx3-ubyte'} "
        "(download failed: Error downloading train-images-idx3-ubyte.gz:). Get it with `download: true` (needs internet); "
        "the offline machines have no copy of it (see ../shared/data/README.md)"
    )


def write_image_folder(base: Path, classes, per_class: int, size: int, fmt: str = "png", seed: int = 0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    images = {}
    for label, name in enumerate(classes):
        (base / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            image = torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=generator)
            path = base / name / f"{i:03d}.{fmt}"
            if fmt == "png":
                write_png(image, str(path))
            else:
                path.write_bytes(encode_jpeg(image, quality=95).numpy().tobytes())
            images[(label, i)] = image
    return images


def test_imagefolder_reads_pngs_exactly_resizes_and_caches(tmp_path):
    images = write_image_folder(tmp_path / "pets", ["cat", "dog"], 3, size=6)
    pool = load_pool("imagefolder", root=tmp_path, options={"path": "pets", "image_size": 6})
    assert pool.x.shape == (6, 3, 6, 6) and pool.y.tolist() == [0, 0, 0, 1, 1, 1]
    assert pool.class_names == ("cat", "dog")
    assert torch.equal(pool.x[4], images[(1, 1)])
    cache = list((tmp_path / ".wirelessfl-cache").glob("pets-*.pt"))
    assert len(cache) == 1
    assert torch.equal(load_pool("imagefolder", root=tmp_path, options={"path": "pets", "image_size": 6}).x, pool.x)
    small = load_pool("imagefolder", root=tmp_path, options={"path": "pets", "image_size": 4, "channels": 1})
    assert small.x.shape == (6, 1, 4, 4)
    assert len(list((tmp_path / ".wirelessfl-cache").glob("pets-*.pt"))) == 2


def test_imagefolder_without_a_writable_cache_warns_and_still_loads(tmp_path):
    write_image_folder(tmp_path / "pets", ["cat"], 2, size=4)
    (tmp_path / ".wirelessfl-cache").write_text("a file where the cache folder would go")
    with pytest.warns(UserWarning, match=r"^could not cache decoded images at .*pets-[0-9a-f]{16}\.pt \(.*\); they will be decoded again next time$"):
        pool = load_pool("imagefolder", root=tmp_path, options={"path": "pets", "image_size": 4})
    assert pool.x.shape == (2, 3, 4, 4)


def test_imagefolder_cache_notices_changed_files(tmp_path):
    write_image_folder(tmp_path / "pets", ["cat", "dog"], 2, size=4)
    first = load_pool("imagefolder", root=tmp_path, options={"path": "pets", "image_size": 4})
    replacement = torch.full((3, 4, 4), 7, dtype=torch.uint8)
    write_png(replacement, str(tmp_path / "pets" / "dog" / "001.png"))
    os.utime(tmp_path / "pets" / "dog" / "001.png", ns=(1, 1))
    second = load_pool("imagefolder", root=tmp_path, options={"path": "pets", "image_size": 4})
    assert torch.equal(second.x[3], replacement) and not torch.equal(first.x[3], replacement)


def test_imagefolder_errors(tmp_path):
    with pytest.raises(DatasetError) as error:
        load_pool("imagefolder", root=tmp_path, options={"path": "nothing"})
    assert str(error.value) == (
        f"dataset 'imagefolder': the ImageFolder directory not found at {tmp_path / 'nothing'}. Point data.root, or "
        "data.options.path (relative to data.root, or absolute), at a folder laid out as <folder>/<class>/<image>; "
        "`download` cannot fetch an arbitrary ImageFolder"
    )
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"^dataset 'imagefolder': an ImageFolder tree <class>/<image> with images not found at .*empty \(torchvision: Couldn't find any class folder"):
        load_pool("imagefolder", root=tmp_path, options={"path": "empty"})
    write_image_folder(tmp_path / "two" / "a", ["cat", "dog"], 1, size=4)
    write_image_folder(tmp_path / "two" / "b", ["cat", "cow"], 1, size=4)
    with pytest.raises(DatasetError, match=r"^dataset 'imagefolder': ImageFolder .*b has classes \['cat', 'cow'\], but the other pooled folders have \['cat', 'dog'\]$"):
        load_pool("imagefolder", root=tmp_path, options={"path": "two", "pool": ["a", "b"]})
    with pytest.raises(ValueError, match=r"^data\.options\.path for dataset 'imagefolder' must be a folder name \(relative to data\.root, or absolute\); got 3$"):
        load_pool("imagefolder", root=tmp_path, options={"path": 3})
    with pytest.raises(ValueError, match=r"^data\.options\.pool for dataset 'imagefolder' must be a non-empty list of sub-folders of path; got \[\]$"):
        load_pool("imagefolder", root=tmp_path, options={"pool": []})
    with pytest.raises(ValueError, match=r"^data\.options\.image_size for dataset 'imagefolder' must be a positive integer; got 0$"):
        load_pool("imagefolder", root=tmp_path, options={"image_size": 0})
    with pytest.raises(ValueError, match=r"^data\.options\.channels for dataset 'imagefolder' must be 1 or 3; got 2$"):
        load_pool("imagefolder", root=tmp_path, options={"channels": 2})


def test_cifar10_from_an_image_folder_of_jpegs(tmp_path):
    base = tmp_path / "cifar10-jpeg"
    write_image_folder(base / "train", CIFAR10_CLASSES, 2, size=32, fmt="jpg")
    write_image_folder(base / "test", CIFAR10_CLASSES, 1, size=32, fmt="jpg", seed=1)
    pool = load_pool("cifar10", root=tmp_path)
    assert pool.x.shape == (30, 3, 32, 32) and pool.num_classes == 10 and pool.class_names == CIFAR10_CLASSES
    assert pool.y.tolist() == [c for c in range(10) for _ in range(2)] + list(range(10))
    stored = torch.frombuffer(bytearray((base / "test" / "truck" / "000.jpg").read_bytes()), dtype=torch.uint8)
    assert torch.equal(pool.x[-1], decode_jpeg(stored))
    assert load_pool("cifar10", root=tmp_path, options={"pool": ["test"]}).x.shape[0] == 10


def test_cifar10_image_folder_with_other_classes_is_refused(tmp_path):
    write_image_folder(tmp_path / "cifar10-jpeg" / "train", ["a", "b"], 1, size=32)
    with pytest.raises(DatasetError, match=r"^dataset 'cifar10': ImageFolder .* has classes \['a', 'b'\], expected \['airplane'"):
        load_pool("cifar10", root=tmp_path, options={"pool": ["train"]})


def write_cifar_pickles(base: Path, monkeypatch, train_per_batch: int = 1, test_count: int = 2, seed: int = 0) -> tuple[np.ndarray, list[int]]:
    """The torchvision CIFAR-10 layout (5 train batches, a test batch, batches.meta). torchvision accepts
    only the official files' MD5 sums, so the class's checksum lists are pointed at these files."""
    rng = np.random.default_rng(seed)
    base.mkdir(parents=True)
    rows, labels, sums = [], [], {}
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        count = test_count if name == "test_batch" else train_per_batch
        data = rng.integers(0, 256, size=(count, 3 * 32 * 32), dtype=np.uint8)
        batch_labels = rng.integers(0, 10, size=count).tolist()
        (base / name).write_bytes(pickle.dumps({"data": data, "labels": batch_labels}))
        rows.append(data)
        labels += batch_labels
    (base / "batches.meta").write_bytes(pickle.dumps({"label_names": list(CIFAR10_CLASSES)}))
    for name in [*names, "batches.meta"]:
        sums[name] = hashlib.md5((base / name).read_bytes()).hexdigest()
    monkeypatch.setattr(CIFAR10, "train_list", [[n, sums[n]] for n in names[:5]])
    monkeypatch.setattr(CIFAR10, "test_list", [["test_batch", sums["test_batch"]]])
    monkeypatch.setattr(CIFAR10, "meta", {"filename": "batches.meta", "key": "label_names", "md5": sums["batches.meta"]})
    return np.concatenate(rows), labels


def test_cifar10_from_torchvision_pickles_is_preferred_to_an_image_folder(tmp_path, monkeypatch):
    rows, labels = write_cifar_pickles(tmp_path / "cifar-10-batches-py", monkeypatch)
    write_image_folder(tmp_path / "cifar10-jpeg" / "train", CIFAR10_CLASSES, 1, size=32, fmt="jpg")
    pool = load_pool("cifar10", root=tmp_path)
    assert pool.x.shape == (7, 3, 32, 32) and pool.x.dtype == torch.uint8
    assert torch.equal(pool.x, torch.from_numpy(rows).view(7, 3, 32, 32))  # rows hold the R, G and B planes in turn
    assert pool.y.tolist() == labels and pool.class_names == CIFAR10_CLASSES
    only_test = load_pool("cifar10", root=tmp_path, options={"pool": ["test"]})
    assert torch.equal(only_test.x, torch.from_numpy(rows[5:]).view(2, 3, 32, 32))


def test_corrupted_cifar10_pickles_are_named(tmp_path, monkeypatch):
    write_cifar_pickles(tmp_path / "cifar-10-batches-py", monkeypatch)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(b"truncated")
    with pytest.raises(DatasetError) as error:
        load_pool("cifar10", root=tmp_path)
    assert str(error.value) == (
        f"dataset 'cifar10': the train split (torchvision pickles with the official MD5 sums) not found at "
        f"{tmp_path / 'cifar-10-batches-py'}. Get it with `download: true` (needs internet), or on the offline machines "
        "run `python ../shared/data/prepare.py ROOT` and set data.root to that ROOT"
    )


def test_cifar10_image_folder_without_the_test_split_names_it(tmp_path):
    write_image_folder(tmp_path / "cifar10-jpeg" / "train", CIFAR10_CLASSES, 1, size=32)
    with pytest.raises(DatasetError, match=r"^dataset 'cifar10': the ImageFolder directory not found at .*cifar10-jpeg/test\. Get it with `download: true`"):
        load_pool("cifar10", root=tmp_path)


def test_missing_cifar10_names_both_layouts(tmp_path):
    with pytest.raises(DatasetError) as error:
        load_pool("cifar10", root=tmp_path)
    assert str(error.value) == (
        f"dataset 'cifar10': the train split not found at {tmp_path / 'cifar-10-batches-py'} (torchvision pickles) nor at "
        f"{tmp_path / 'cifar10-jpeg' / 'train'} (ImageFolder). Get it with `download: true` (needs internet), or on the offline "
        "machines run `python ../shared/data/prepare.py ROOT` and set data.root to that ROOT"
    )


def test_synthetic_mixture_follows_the_sign_rule_without_noise():
    x, y, latent, theta = synthetic_mixture(np.random.default_rng(3), 500, 7, 3, 0.0)
    assert x.shape == (500, 7) and theta.shape == (3, 7)
    assert np.array_equal(y, (np.einsum("nd,nd->n", x, theta[latent]) > 0).astype(np.int64))
    assert np.abs(x).max() <= 1 and set(np.unique(latent)) == {0, 1, 2}


def test_synthetic_pool_shape_and_seed():
    options = {"num_samples": 300, "dim": 5}
    pool = load_pool("synthetic", options=options)
    assert pool.x.shape == (300, 1, 1, 5) and pool.x.dtype == torch.float32 and pool.num_classes == 2
    assert pool.latent is not None and pool.latent.shape == (300,)
    assert torch.equal(load_pool("synthetic", options=options).x, pool.x)
    assert not torch.equal(load_pool("synthetic", options={**options, "seed": 1}).x, pool.x)
    assert torch.equal(pool.normalise(pool.x), pool.x)
    with pytest.raises(ValueError, match=r"^data\.options\.dim for dataset 'synthetic' must be an integer >= 1; got 0$"):
        load_pool("synthetic", options={"dim": 0})
    with pytest.raises(ValueError, match=r"^data\.options\.noise for dataset 'synthetic' must be a number >= 0; got -0\.1$"):
        load_pool("synthetic", options={"noise": -0.1})


@pytest.fixture(scope="module")
def offline_emnist_root(tmp_path_factory):
    if not (SHARED_DATA / "prepare.py").exists():
        pytest.skip(f"offline dataset copies not found at {SHARED_DATA.resolve()} (../shared/data from the repo root)")
    root = tmp_path_factory.mktemp("offline")
    subprocess.run([sys.executable, str(SHARED_DATA / "prepare.py"), str(root), "--only", "emnist"], check=True, capture_output=True)
    return root


@pytest.mark.data
def test_offline_emnist_byclass_test_split(offline_emnist_root):
    pool = load_pool("emnist", root=offline_emnist_root, options={"split": "byclass", "pool": ["test"]})
    assert pool.x.shape == (116_323, 1, 28, 28) and pool.num_classes == 62
    assert set(torch.unique(pool.y).tolist()) == set(range(62))
    upright = np.load(SHARED_DATA / "emnist-byclass-test.npz")["x"][:3]
    assert torch.equal(pool.x[:3, 0], torch.from_numpy(upright))


@pytest.mark.data
@pytest.mark.slow
def test_offline_cifar10_image_folder(tmp_path):
    if not (SHARED_DATA / "prepare.py").exists():
        pytest.skip(f"offline dataset copies not found at {SHARED_DATA.resolve()} (../shared/data from the repo root)")
    subprocess.run([sys.executable, str(SHARED_DATA / "prepare.py"), str(tmp_path), "--only", "cifar10"], check=True, capture_output=True)
    pool = load_pool("cifar10", root=tmp_path)
    assert pool.x.shape == (60_000, 3, 32, 32) and pool.class_names == CIFAR10_CLASSES
    assert np.bincount(pool.y.numpy()).tolist() == [6000] * 10
    assert [round(m / 255, 1) for m in pool.mean] == [0.5, 0.5, 0.4]  # official means 0.491, 0.482, 0.447


@pytest.mark.parametrize(
    "dataset, options",
    [("emnist", {"split": "byclass", "pool": ["test"]}), ("mnist", {}), ("fashion_mnist", {"pool": ["test"]}), ("cifar10", {})],
)
def test_the_torch_free_check_says_what_the_loader_says(tmp_path, dataset, options):
    from wirelessfl.learning.data.data_files import missing_dataset

    with pytest.raises(DatasetError) as caught:
        load_pool(dataset, tmp_path, options=options)
    assert missing_dataset(dataset, tmp_path, False, options) == str(caught.value)
    assert missing_dataset(dataset, tmp_path, True, options) is None


def test_the_torch_free_check_knows_torchvisions_emnist_splits():
    from torchvision.datasets import EMNIST

    from wirelessfl.learning.data.data_files import EMNIST_SPLITS

    assert EMNIST_SPLITS == tuple(EMNIST.splits)


def test_validate_names_a_missing_dataset_before_loading_anything(tmp_path):
    """Before torchvision, the cost probe and the data: 2.4 s instead of 4.3 s unloaded (13-38 s were seen under load)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: missing\nalgorithms: [{name: fedavg}]\n"
        f"data: {{dataset: emnist, root: {tmp_path / 'empty'}, options: {{split: byclass, pool: [test]}}}}\n"
    )
    probe = (
        "import sys\nfrom wirelessfl.cli import run\nsys.argv = ['wirelessfl', 'validate', sys.argv[1]]\n"
        "try:\n    run()\nexcept SystemExit as done:\n    print('exit', done.code, 'torchvision' in sys.modules, 'wirelessfl.cost' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe, str(scenario)], capture_output=True, text=True, check=True)
    raw = (tmp_path / "empty").resolve() / "EMNIST" / "raw" / "emnist-byclass-test-images-idx3-ubyte"
    assert result.stdout.strip() == "exit 2 False False"
    assert " ".join(result.stderr.split()).startswith(f"error: {scenario}: dataset 'emnist': the test split not found at {raw}.")
