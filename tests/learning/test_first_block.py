"""The Halide first-block accelerator plug-in equals the general path, checks its buffers, and falls back when it cannot be built."""

import math
import os
import platform
import time
import warnings

import pytest
import torch
import torch.nn.functional as F

from wirelessfl.learning import halide_aot
from wirelessfl.learning.plugins import by_name, from_environment
from wirelessfl.learning.first_block import BlockShape, FirstBlock, HalideFirstBlock, block_shape
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture
from wirelessfl.learning.reference import ReferenceLoop

pytest.importorskip("halide", reason="the Halide accelerator is the optional extra wirelessfl[halide]")

TOL = 1e-5
SHAPES = [(1, 28, 28), (3, 32, 32)]  # LeNet-5 on EMNIST (padding 2) and on CIFAR-10 (no padding)
AVX2 = "x86-64-linux-avx-avx2-f16c-fma-sse41"


@pytest.fixture(params=["host", pytest.param("avx2", marks=pytest.mark.slow)])
def kernel_target(request, monkeypatch):
    """The kernels built for this CPU, and for AVX2 (16 registers of 8 lanes: other register tiles) where it runs."""
    if request.param == "avx2":
        if platform.machine() != "x86_64" or " avx2 " not in f" {halide_aot._machine()} ":
            pytest.skip("AVX2 code runs only on an x86-64 CPU with AVX2")
        monkeypatch.setenv("HL_TARGET", AVX2)
    return request.param


def lenet(shape, classes=10):
    return get_architecture("lenet5", shape, classes)


def fused(arch):
    return LockstepEngine(arch, accelerators=[HalideFirstBlock()])


def make_data(arch, sizes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.rand((size, *arch.input_shape), generator=g), torch.randint(0, arch.num_classes, (size,), generator=g))
        for size in sizes
    ]


def test_the_block_shape_is_found_only_where_its_kernels_apply():
    assert block_shape(1, 6, 5, 2, (1, 28, 28)) == BlockShape(1, 6, 5, 2, 28, 28)
    assert block_shape(3, 6, 5, 0, (3, 32, 32)) == BlockShape(3, 6, 5, 0, 32, 32)
    assert block_shape(1, 6, 5, 2, (1, 32, 32)) is None  # conv rows of 32 + 4 shifted columns: more than two vectors
    assert block_shape(3, 64, 5, 2, (3, 32, 32)) is None  # 64 output channels: accumulators spill
    assert block_shape(1, 6, 5, 2, (3, 28, 28)) is None  # channels do not match the input


def test_the_plug_in_claims_only_a_first_conv_pool_relu_it_can_run():
    assert fused(lenet((1, 28, 28))).model.accelerated == ["halide: 0 conv + 2x2 max-pool + ReLU fused"]
    for name, shape in [("lenet5", (1, 8, 8)), ("cifar_cnn", (3, 32, 32)), ("mlp", (1, 28, 28))]:
        assert fused(get_architecture(name, shape, 10)).model.accelerated == []  # a resize first; 3x3/2 pool, 64 channels; no conv
    assert LockstepEngine(lenet((1, 28, 28))).model.accelerated == []  # off unless asked for
    assert HalideFirstBlock().claim(None, {}, (1, 28, 28), "cuda") is None


def test_plug_ins_by_name_and_from_the_environment(monkeypatch):
    monkeypatch.setenv("WIRELESSFL_ACCELERATORS", "halide")
    assert [a.name for a in from_environment()] == ["halide"]
    monkeypatch.setenv("WIRELESSFL_ACCELERATORS", "")
    assert from_environment() == ()
    with pytest.raises(ValueError, match=r"^unknown accelerator 'cuda-graphs'; known: halide$"):
        by_name("cuda-graphs")


def aten_block(x, weight, bias, padding):
    """The block as torch computes it: x [B, n, C, H, W], weight [n, O, C, k, k], bias [n, O]."""
    batch, n, channels, height, width = x.shape
    outputs = weight.shape[1]
    y = F.conv2d(x.reshape(batch, n * channels, height, width), weight.reshape(n * outputs, channels, *weight.shape[3:]),
                 bias.reshape(-1), padding=padding, groups=n)
    return torch.relu(F.max_pool2d(y, 2))


def both_blocks(shape, x, weight, bias, generator):
    """The block on the ATen ops with autograd, and fused: outputs, phases and gradients of both."""
    spec = block_shape(shape[0], 6, 5, 2 if shape[1] == 28 else 0, shape)
    block = FirstBlock(spec)
    n = x.shape[1]
    weight.requires_grad_(True)
    bias.requires_grad_(True)
    expected = aten_block(x, weight, bias, spec.padding)
    upstream = torch.randn(expected.shape, generator=generator)
    expected.backward(upstream)
    padded = block.layout(x)
    out, phase = block.forward(padded, weight.detach().reshape(n, -1), bias.detach())
    d_weight, d_bias = block.backward(upstream.contiguous(memory_format=torch.channels_last), padded, out, phase)
    aten = (expected.detach(), weight.grad.reshape(n, -1), bias.grad)
    return spec, aten, (block.channels_last(out), d_weight, d_bias), phase


@pytest.mark.parametrize("shape", SHAPES)
def test_block_forward_and_gradients_equal_autograd_through_the_aten_ops(shape, kernel_target):
    g = torch.Generator().manual_seed(0)
    n, batch = 3, 5
    x = torch.rand(batch, n, *shape, generator=g)
    weight = torch.randn(n, 6, shape[0], 5, 5, generator=g) * 0.2
    bias = torch.randn(n, 6, generator=g) * 0.1
    # channel 0 is its bias everywhere: every window ties, and where the gradient goes (the
    # first pixel, as max_pool2d picks) changes that channel's weight gradient, the pixels differ
    weight[:, 0], bias[:, 0] = 0.0, 0.5
    spec, (expected, weight_grad, bias_grad), (got, d_weight, d_bias), phase = both_blocks(shape, x, weight, bias, g)
    assert (got - expected).abs().max() <= 1e-5
    assert phase.dtype == torch.uint8 and int(phase.max()) <= 3
    assert torch.all(phase[:, :, 0, :, : spec.conv_width // 2] == 0)
    assert phase[:, :, 1:].float().mean() > 1  # elsewhere all four positions win
    assert (d_weight - weight_grad).abs().max() <= TOL * weight_grad.abs().max()
    assert (d_bias - bias_grad).abs().max() <= TOL * bias_grad.abs().max()


def test_the_backward_kernel_ignores_the_columns_beyond_the_real_ones(kernel_target):
    """The forward computes pooled columns 14-15 of a 16-wide row; the gradient there is never set."""
    spec = BlockShape(1, 6, 5, 2, 28, 28)
    block = FirstBlock(spec)
    g = torch.Generator().manual_seed(4)
    padded = block.layout(torch.rand(3, 2, 1, 28, 28, generator=g))
    out, phase = block.forward(padded, torch.randn(2, 150, generator=g) * 0.2, torch.full((2, 6), 0.3))
    grads = []
    for fill in (0.0, float("nan")):
        upstream = torch.full(out.shape, fill)
        upstream[..., :14] = torch.randn(out[..., :14].shape, generator=torch.Generator().manual_seed(5))
        d_weight, d_bias = torch.empty(2, 6, 1, 5, 5), torch.empty(2, 6)
        block._backward(upstream, out, phase, padded, d_weight, d_bias)
        grads.append((d_weight, d_bias))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
    assert not torch.isnan(grads[1][0]).any()


@pytest.mark.parametrize("shape", SHAPES)
def test_fused_training_equals_the_reference_loop_and_the_general_path(shape, kernel_target):
    arch = lenet(shape)
    sizes = [9, 4, 6]
    data = make_data(arch, sizes)
    params = arch.init_flat(len(sizes), torch.Generator().manual_seed(2))
    cfg = TrainConfig(epochs=1, batch_size=4, lr=0.05, momentum=0.9)
    engine = fused(arch)
    assert engine.model.accelerated
    results = [e.train(params, data, cfg, torch.Generator().manual_seed(1)) for e in (engine, LockstepEngine(arch), ReferenceLoop(arch))]
    for other in results[1:]:
        assert torch.equal(results[0].steps, other.steps)
        assert (results[0].params - other.params).abs().max() <= TOL
    assert results[0].steps.tolist() == [math.ceil(s / 4) for s in sizes]
    evaluations = [e.evaluate(results[0].params, data) for e in (engine, LockstepEngine(arch))]
    assert torch.equal(evaluations[0].accuracy, evaluations[1].accuracy)
    assert (evaluations[0].loss - evaluations[1].loss).abs().max() <= TOL


def test_a_frozen_first_layer_weight_stays_exact_while_its_bias_trains():
    arch = lenet((1, 28, 28))
    data = make_data(arch, [10, 6])
    params = arch.init_flat(2, torch.Generator().manual_seed(3))
    weight, bias = arch.param_slices[0], arch.param_slices[1]
    trainable = ~arch.mask(["0.weight"])
    cfg = TrainConfig(epochs=1, batch_size=4, lr=0.1, momentum=0.9)
    fused_result = fused(arch).train(params, data, cfg, torch.Generator().manual_seed(1), trainable=trainable)
    reference = ReferenceLoop(arch).train(params, data, cfg, torch.Generator().manual_seed(1), trainable=trainable)
    assert torch.equal(fused_result.params[:, weight.offset : weight.stop], params[:, weight.offset : weight.stop])
    assert (fused_result.params[:, bias.offset : bias.stop] != params[:, bias.offset : bias.stop]).all()
    assert (fused_result.params - reference.params).abs().max() <= TOL


def test_without_kernels_the_plug_in_warns_once_and_the_general_path_runs(monkeypatch):
    def unavailable(self, shape):
        raise halide_aot.KernelUnavailable("no C compiler driver (cc or gcc) to link the kernel library")

    monkeypatch.setattr(FirstBlock, "__init__", unavailable)
    arch = lenet((1, 28, 28))
    with pytest.warns(UserWarning, match=r"Halide first-block kernels unavailable \(no C compiler driver"):
        engine = fused(arch)
    assert engine.model.accelerated == []
    data = make_data(arch, [6, 5])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    cfg = TrainConfig(epochs=1, batch_size=4, lr=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reference = LockstepEngine(arch).train(params, data, cfg, torch.Generator().manual_seed(1))
    assert torch.equal(engine.train(params, data, cfg, torch.Generator().manual_seed(1)).params, reference.params)


def test_the_kernels_check_their_buffers_instead_of_reading_past_them():
    """Built with Halide's asserts and bounds queries: a wrong shape is an error, not memory corruption."""
    block = FirstBlock(BlockShape(1, 6, 5, 2, 28, 28))
    padded = block.layout(torch.rand(3, 2, 1, 28, 28))
    out = torch.empty(3, 2, 6, 14, 4)  # 4 pooled columns where the kernel writes 16
    with pytest.raises(RuntimeError, match="Halide pipeline failed with status"):
        block._forward(padded, torch.randn(2, 6, 1, 5, 5), torch.zeros(2, 6), out, torch.empty(out.shape, dtype=torch.uint8))


def test_the_cache_keeps_the_most_recently_used_libraries(tmp_path):
    libraries = []
    for k in range(7):
        path = tmp_path / f"wfl_block_forward-{k:020d}.so"
        path.write_bytes(b"")
        os.utime(path, (time.time() - 100 + k, time.time() - 100 + k))
        libraries.append(path)
    (tmp_path / "wfl_block_backward-0.so").write_bytes(b"")  # another pipeline: untouched
    removed = halide_aot.prune("wfl_block_forward", libraries[0])
    assert sorted(removed) == libraries[1:4]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([libraries[0].name, *(p.name for p in libraries[4:]), "wfl_block_backward-0.so"])


def test_a_compiled_pipeline_reads_and_writes_strided_tensor_views(tmp_path, monkeypatch):
    """The halide_buffer_t mapping: dimensions innermost first, strides in elements, no copies."""
    monkeypatch.setenv("WIRELESSFL_KERNEL_CACHE", str(tmp_path))

    def define():
        import halide as hl

        source = hl.ImageParam(hl.Float(32), 2, "source")
        source.dim(0).set_stride(hl.Expr())
        x, y = hl.Var("x"), hl.Var("y")
        result = hl.Func("result")
        result[x, y] = source[x, y] * 2.0 + hl.cast(hl.Float(32), y)
        return hl.Pipeline(result), [source], hl.get_host_target()

    pipeline = halide_aot.build("wfl_test_double", "v1", 2, define)  # (the prune after a build keeps it)
    assert len(list(tmp_path.glob("wfl_test_double-*.so"))) == 1
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    source = base.t()[1:5]  # [4, 4] with strides (1, 6): dim 0 of Halide (x) has stride 6
    out = torch.full((8, 4), -1.0)[::2]  # [4, 4], row stride 8
    pipeline(source, out)
    assert torch.equal(out, source * 2 + torch.arange(4.0).unsqueeze(1))
    assert halide_aot.build("wfl_test_double", "v1", 2, define) is pipeline  # loaded once per process
    monkeypatch.setenv("HL_TARGET", AVX2)  # code for another CPU is another library, not this one's from the cache
    assert halide_aot.build("wfl_test_double", "v1", 2, define) is not pipeline
    assert len(list(tmp_path.glob("wfl_test_double-*.so"))) == 2


def test_a_failing_build_is_reported_as_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("WIRELESSFL_KERNEL_CACHE", str(tmp_path))

    def define():
        raise RuntimeError("schedule error")

    with pytest.raises(halide_aot.KernelUnavailable, match="building wfl_test_broken failed: RuntimeError: schedule error"):
        halide_aot.build("wfl_test_broken", "v1", 1, define)
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_a_nan_weight_gives_nan_outputs_as_on_the_aten_path():
    """A diverged model must still show: the fused pool and ReLU keep NaNs as max_pool2d and relu do."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 1, 28, 28, generator=g)
    weight, bias = torch.randn(3, 6, 1, 5, 5, generator=g) * 0.2, torch.randn(3, 6, generator=g) * 0.1
    weight[1, 2, 0, 0, 0] = float("nan")  # slot 1's channel 2: NaN everywhere
    x[0, 2, 0, 9, 12] = float("nan")  # slot 2: a 5x5 patch of NaNs, windows on its edge half NaN
    _, (expected, weight_grad, bias_grad), (got, d_weight, d_bias), _ = both_blocks((1, 28, 28), x, weight, bias, g)
    assert torch.equal(torch.isnan(got), torch.isnan(expected)) and torch.isnan(got).any()
    finite = ~torch.isnan(expected)
    assert (got[finite] - expected[finite]).abs().max() <= 1e-5
    assert torch.equal(torch.isnan(d_weight), torch.isnan(weight_grad)) and torch.isnan(d_weight).any()
    assert torch.equal(torch.isnan(d_bias), torch.isnan(bias_grad))
    # threshold_backward passes the gradient of a NaN output (NaN <= 0 is false): the bias sees it
    assert (d_bias - bias_grad).abs().max() <= TOL * bias_grad.abs().max()
    ok = ~torch.isnan(d_weight)
    assert (d_weight[ok] - weight_grad[ok]).abs().max() <= TOL * weight_grad[ok].abs().max()
