"""benchmarks/profile_step.py: its FLOP accounting and its op recording are what the engine notes quote."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import profile_step  # noqa: E402


def record(fn):
    with profile_step.OpRecorder() as recorder:
        recorder.part = "test"
        fn()
    return recorder.calls


def test_grouped_conv_and_its_gradients_counted_by_hand():
    x = torch.randn(2, 12, 14, 14)  # 2 groups of 6 channels, LeNet's conv2
    w = torch.randn(32, 6, 5, 5)
    (_, func, args, _), = [c for c in record(lambda: F.conv2d(x, w, groups=2)) if "conv" in c[1].__name__]
    out = func(*args)
    assert profile_step.macs(func, args, out) == 2 * 32 * 10 * 10 * 6 * 25  # samples x outputs x (cin/group x k x k)

    g = torch.randn(2, 32, 10, 10)
    calls = record(lambda: torch.ops.aten.convolution_backward(g, x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 2, [True, False, False]))
    (_, func, args, _), = calls
    assert profile_step.macs(func, args, None) == 2 * 32 * 10 * 10 * 6 * 25
    args = (*args[:10], [True, True, False])
    assert profile_step.macs(func, args, None) == 2 * (2 * 32 * 10 * 10 * 6 * 25)


def test_batched_matmuls_counted():
    a, b, bias = torch.randn(3, 4, 5), torch.randn(3, 5, 7), torch.randn(3, 1, 7)
    calls = record(lambda: (torch.bmm(a, b), torch.baddbmm(bias, a, b)))
    assert [profile_step.macs(f, args, None) for _, f, args, _ in calls] == [3 * 4 * 5 * 7] * 2
    assert profile_step.macs(torch.ops.aten.relu.default, (a,), None) == 0


def test_recorded_arguments_are_taken_before_the_op_writes_them():
    base = torch.arange(12.0).view(3, 4)
    view = base[:, 1:3]  # a strided view: the replay must see the same view, not a compacted copy
    (_, func, args, _), = record(lambda: view.mul_(2))
    assert torch.equal(args[0], torch.arange(12.0).view(3, 4)[:, 1:3])
    assert args[0].stride() == view.stride() and args[0].storage_offset() == view.storage_offset()
    assert args[0].untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    expanded = torch.ones(3, 1).expand(3, 5)
    (_, _, args, _), = record(lambda: expanded.contiguous())
    assert args[0].stride() == (1, 0)


def test_the_fused_first_block_kernels_are_recorded_and_counted():
    pytest.importorskip("halide", reason="the Halide accelerator is the optional extra wirelessfl[halide]")
    from wirelessfl.learning.first_block import BlockShape, FirstBlock

    block = FirstBlock(BlockShape(1, 6, 5, 2, 28, 28))
    recorder = profile_step.OpRecorder()
    recorder.part = "forward"
    per_sample = 6 * 1 * 25 * 28 * 28
    call = profile_step.KernelRecorder(block._forward, "forward", recorder, per_sample)
    block._forward = call
    x = block.layout(torch.rand(4, 3, 1, 28, 28))
    out, _ = block.forward(x, torch.randn(3, 150), torch.randn(3, 6))
    (part, func, args, _), = recorder.calls
    assert part == "forward" and func is call
    assert profile_step.kernel_macs(func, args) == 4 * 3 * per_sample  # batch x slots x one conv's multiply-adds
    replayed = torch.empty_like(out)
    func.replay(args[0], args[1], args[2], replayed, torch.empty(out.shape, dtype=torch.uint8))
    assert torch.equal(replayed, out)


def test_recording_a_kernel_call_records_no_copy_ops():
    pytest.importorskip("halide", reason="the Halide accelerator is the optional extra wirelessfl[halide]")
    from wirelessfl.learning.first_block import BlockShape, FirstBlock

    block = FirstBlock(BlockShape(1, 6, 5, 2, 28, 28))
    x = block.layout(torch.rand(2, 2, 1, 28, 28))
    with profile_step.OpRecorder() as recorder:
        recorder.part = "forward"
        block._forward = profile_step.KernelRecorder(block._forward, "forward", recorder, 1)
        block.forward(x, torch.randn(2, 150), torch.randn(2, 6))
    assert [type(func).__name__ for _, func, _, _ in recorder.calls if isinstance(func, profile_step.KernelRecorder)] == ["KernelRecorder"]
    assert not any("copy" in str(func) or "clone" in str(func) for _, func, _, _ in recorder.calls)
