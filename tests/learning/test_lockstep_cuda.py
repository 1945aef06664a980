"""On a CUDA device the engine equals the CPU reference loop (skipped where torch sees no GPU)."""

import math

import pytest
import torch

from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture
from wirelessfl.learning.reference import ReferenceLoop

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")


@pytest.fixture(autouse=True)
def exact_float32(monkeypatch):
    """TF32 would round convolutions and matmuls to 10 mantissa bits; compare in true float32."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)


@pytest.mark.parametrize("name, shape", [("lenet5", (1, 28, 28)), ("cifar_cnn", (3, 32, 32)), ("mlp", (1, 8, 8))])
def test_cuda_training_and_evaluation_equal_the_cpu_reference(name, shape):
    arch = get_architecture(name, shape, 10)
    sizes = [9, 4, 7, 0]
    g = torch.Generator().manual_seed(0)
    data = [(torch.rand((n, *shape), generator=g), torch.randint(0, 10, (n,), generator=g)) for n in sizes]
    params = arch.init_flat(len(sizes), torch.Generator().manual_seed(2))
    cfg = TrainConfig(epochs=2, batch_size=4, lr=0.05, momentum=0.9)
    engine = LockstepEngine(arch, device="cuda")
    on_gpu = engine.train(params, data, cfg, torch.Generator().manual_seed(1))
    on_cpu = ReferenceLoop(arch).train(params, data, cfg, torch.Generator().manual_seed(1))
    assert on_gpu.params.device.type == "cuda"
    assert on_gpu.steps.cpu().tolist() == [math.ceil(n / 4) * 2 for n in sizes]
    assert (on_gpu.params.cpu() - on_cpu.params).abs().max() <= 1e-4
    assert (on_gpu.params.cpu() - params).abs().max() > 1e-3
    evaluated = engine.evaluate(on_gpu.params, data, batch_size=4)
    expected = ReferenceLoop(arch).evaluate(on_cpu.params, data)
    assert evaluated.count.cpu().tolist() == sizes
    assert torch.allclose(evaluated.accuracy.cpu(), expected.accuracy, equal_nan=True)
