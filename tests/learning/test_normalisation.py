"""Samples stay stored as uint8 and are normalised where the engine gathers them: the same bits as a normalised copy."""

import pytest
import torch

from wirelessfl.learning.data.datasets import Normalisation
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

SCALE = Normalisation(mean=(10.0, 100.0), std=(2.0, 50.0))


def test_each_channel_is_shifted_and_scaled_by_its_own_mean_and_std():
    x = torch.tensor([[[[12]], [[200]]], [[[10]], [[50]]]], dtype=torch.uint8)  # [2 samples, 2 channels, 1, 1]
    assert SCALE(x).dtype == torch.float32
    assert SCALE(x).reshape(2, 2).tolist() == [[1.0, 2.0], [0.0, -1.0]]  # (12-10)/2, (200-100)/50; (10-10)/2, (50-100)/50
    assert x.dtype == torch.uint8 and x[0, 0, 0, 0] == 12  # a copy: the stored samples are untouched


def stored_sets(arch, sizes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randint(0, 256, (size, *arch.input_shape), dtype=torch.uint8, generator=g),
         torch.randint(0, arch.num_classes, (size,), generator=g))
        for size in sizes
    ]


def test_an_engine_given_stored_uint8_samples_trains_and_evaluates_bit_for_bit_as_on_their_normalised_copy():
    arch = get_architecture("lenet5", (2, 12, 12), 5)
    sets = stored_sets(arch, [7, 12, 3])
    normalised = [(SCALE(x), y) for x, y in sets]
    params = arch.init_flat(3, torch.Generator().manual_seed(1))
    cfg = TrainConfig(epochs=2, batch_size=4, lr=0.05, momentum=0.9)
    stored = LockstepEngine(arch, normalisation=SCALE)
    plain = LockstepEngine(arch)
    a = stored.train(params, sets, cfg, torch.Generator().manual_seed(2))
    b = plain.train(params, normalised, cfg, torch.Generator().manual_seed(2))
    assert torch.equal(a.params, b.params) and torch.equal(a.loss, b.loss)
    ea, eb = stored.evaluate(a.params, sets), plain.evaluate(b.params, normalised)
    assert torch.equal(ea.loss, eb.loss) and torch.equal(ea.accuracy, eb.accuracy)
    unnormalised = plain.evaluate(a.params, [(x.float(), y) for x, y in sets])
    assert not torch.equal(unnormalised.loss, ea.loss)  # the normalisation is applied, not skipped
    assert torch.equal(stored.inputs(sets[0][0]), normalised[0][0])


def test_a_context_refuses_an_engine_that_would_train_on_unnormalised_pixels():
    from wirelessfl.algorithms.base import Context
    from wirelessfl.learning.data.federated import DataSpec, build_federated_data

    data = build_federated_data(DataSpec(dataset="digits", num_clients=4), seed=0)
    arch = get_architecture("mlp", data.input_shape, data.num_classes)
    mean, std = data.normalisation.mean, data.normalisation.std
    with pytest.raises(ValueError) as error:
        Context(data, arch, LockstepEngine(arch), TrainConfig(), seed=0)
    assert str(error.value) == (
        f"Context: the engine normalises inputs with None but the data needs Normalisation(mean={mean}, std={std}); "
        "build it as LockstepEngine(arch, device, normalisation=data.normalisation)"
    )
    assert Context(data, arch, LockstepEngine(arch, normalisation=data.normalisation), TrainConfig(), seed=0).engine.normalisation == data.normalisation
