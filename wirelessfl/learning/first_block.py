"""A small first layer -- convolution, 2x2 max-pool, ReLU -- as two fused Halide kernels for n stacked models.

Why: on a CPU, oneDNN runs LeNet-5's first block (1 or 3 input channels, 6
output channels per model, grouped over the n models) at a quarter of a core's
peak, and the block's 28x28 activations, its pool indices and their gradients
(2-8 MB each per slot group) miss the L2 cache. One kernel computes two conv
rows at a time in registers, pools them and writes only the pooled values and
a 1-byte arg-max phase; the other forms the conv's weight and bias gradients
straight from the pooled gradient and that phase, one sample's gradient
rebuilt at full resolution on the stack at a time. The full-resolution
activation never exists. Measured per group of 13 slots x 32 EMNIST images on
one Xeon core: forward 3.6 -> 1.6 ms, backward 3.7 -> 2.3 ms, copies included
(docs/research/notes/2026-11-25-hand-written-engine-history.md, "Kept: the first block as Halide kernels"); the backward
kernel alone later 2.0 -> 1.2 ms by summing over shifted gradient rows
("Kept: the block's weight gradient over shifted rows").

Code is generated for Halide's ``HL_TARGET`` (this CPU when unset), and the
register tiles are sized from its vector registers: AVX-512's 32 of 16 lanes
or AVX2's 16 of 8. Tiles sized for AVX-512 spilled on AVX2 (the three kernels
2.8 / 2.9 / 7.5 ms there, now 2.1 / 2.2 / 3.8: "Kept: register tiles per
vector width").

The numbers are the ATen path's up to float rounding: the same max-pool
arg-max rule (first maximum in row-major order within the window; a NaN
wins), the same ReLU (a NaN stays) and ReLU mask (value > 0), sums in another
order.

Layouts (torch order; Halide lists them innermost first):

* input ``[B, n, C, H + 2p, WX]``, zero-padded, ``WX >= WR + k - 1``;
* pooled values and phases ``[B, n, O, HC / 2, WR / 2]``, where ``WR`` is the
  conv's output width rounded up to a multiple of 16 (columns beyond ``WC / 2``
  are computed and ignored, and the backward ignores the gradient there);
* weights ``[n, O, C, k, k]`` and biases ``[n, O]`` (views of the flat parameters).

The block is an accelerator plug-in (``wirelessfl.learning.accelerators``):
installed with ``pip install wirelessfl[halide]`` and switched on with
``WIRELESSFL_ACCELERATORS=halide``, it runs the block of a model whose traced
graph starts with such a conv, max-pool and ReLU; autograd calls its backward.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from . import halide_aot

_SOURCE_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

LANES = 16
"""Row alignment of the kernels' layouts (one AVX-512 float32 vector); the schedules use the target's own vectors."""


@dataclass(frozen=True)
class BlockShape:
    """The first block's sizes: conv ``channels -> outputs`` with a ``kernel`` kernel on a ``height x width`` input."""

    channels: int
    outputs: int
    kernel: int
    padding: int
    height: int
    width: int

    @property
    def conv_height(self) -> int:
        return self.height + 2 * self.padding - self.kernel + 1

    @property
    def conv_width(self) -> int:
        return self.width + 2 * self.padding - self.kernel + 1

    @property
    def rounded_width(self) -> int:
        return -(-self.conv_width // LANES) * LANES

    @property
    def input_width(self) -> int:
        return self.rounded_width + self.kernel - 1

    def key(self) -> str:
        return f"c{self.channels} o{self.outputs} k{self.kernel} p{self.padding} {self.height}x{self.width} lanes{LANES}"

def block_shape(channels: int, outputs: int, kernel: int, padding: int, input_shape: tuple[int, int, int]) -> BlockShape | None:
    """The shape when a conv ``channels -> outputs`` (then a 2x2/2 max-pool and ReLU) is small enough, else None.

    Small: at most 4 input and 8 output channels per model and conv rows of at
    most 64 pixels, so that a kernel's accumulators (outputs x two vectors
    per conv row) stay in registers; anything larger keeps oneDNN. A
    conv row plus k - 1 columns must fit its vectors (LeNet-5's 28 + 4 in 32):
    the weight gradient sums over that many shifted columns.
    """
    shape = BlockShape(channels, outputs, kernel, padding, input_shape[1], input_shape[2])
    if channels != input_shape[0] or channels > 4 or outputs > 8 or not 2 <= shape.conv_width <= 64:
        return None
    if shape.conv_height < 2 or shape.conv_height % 2 or shape.conv_width % 2:
        return None
    if shape.conv_width + kernel - 1 > shape.rounded_width:  # the weight gradient's shifted rows must fit the vectors
        return None
    return shape


def _is_nan(value):
    """NaN test on the bits: the kernels use LLVM's fast-math flags, under which a float test may assume no NaN.

    (``hl.is_nan`` or Halide's StrictFloat feature keep the float semantics, but
    StrictFloat also drops fused multiply-adds: the forward went 1.6 -> 2.1 ms.)
    """
    import halide as hl

    bits = hl.reinterpret(hl.UInt(32), value) & 0x7FFFFFFF
    return bits > 0x7F800000


def _target():
    """Halide's ``HL_TARGET`` (this CPU when unset), with its runtime checks on: a buffer of the wrong shape raises."""
    import halide as hl

    return hl.get_target_from_environment()


def _vectors(target) -> tuple[int, int]:
    """float32 lanes per vector register, and the number of vector registers.

    AVX-512 has 32 registers of 16 lanes, AVX2 16 of 8: the kernels' register
    tiles are sized from these, so that the accumulators and the loads that
    feed them fit without spilling.
    """
    import halide as hl

    lanes = target.natural_vector_size(hl.Float(32))
    registers = 32 if target.has_feature(hl.TargetFeature.AVX512) or target.arch == hl.TargetArch.ARM else 16
    return lanes, registers


def _define_forward(shape: BlockShape):
    import halide as hl

    x = hl.ImageParam(hl.Float(32), 5, "x")  # (w, h, ci, s, b)
    weight = hl.ImageParam(hl.Float(32), 5, "weight")  # (kx, ky, ci, c, s)
    bias = hl.ImageParam(hl.Float(32), 2, "bias")  # (c, s)
    w, h, c, s, b, pw, ph = (hl.Var(v) for v in ("w", "h", "c", "s", "b", "pw", "ph"))
    r = hl.RDom([(0, shape.kernel), (0, shape.kernel), (0, shape.channels)])
    conv = hl.Func("conv")
    conv[w, h, c, s, b] = bias[c, s]
    conv[w, h, c, s, b] += weight[r.x, r.y, r.z, c, s] * x[w + r.x, h + r.y, r.z, s, b]
    window = [hl.Expr(conv[2 * pw + dx, 2 * ph + dy, c, s, b]) for dy in (0, 1) for dx in (0, 1)]
    # arg-max as max_pool2d's: the first maximum in row-major order wins, a NaN wins over numbers
    best, phase = window[0], hl.cast(hl.UInt(8), 0)
    for k in (1, 2, 3):
        better = (window[k] > best) | _is_nan(window[k])
        phase = hl.select(better, hl.cast(hl.UInt(8), k), phase)
        best = hl.select(better, window[k], best)
    pooled = hl.Func("pooled")
    relu = hl.select((best > 0.0) | _is_nan(best), best, 0.0)  # torch.relu keeps a NaN: a diverged model shows
    pooled[pw, ph, c, s, b] = (relu, phase)

    target = _target()
    lanes, _ = _vectors(target)
    pooled_h, pooled_w = shape.conv_height // 2, shape.rounded_width // 2
    # a tile: two conv rows of every output channel over the `columns` that give one pooled vector, in
    # registers, the whole tap loop unrolled; a row at a time, outputs x columns / lanes accumulators are
    # live (12 of AVX-512's 32 registers, 12 of AVX2's 16; AVX2 with whole 32-column rows spilled: 2.8 ms, not 2.1)
    columns = min(shape.rounded_width, 2 * lanes)
    pwo, pwi = hl.Var("pwo"), hl.Var("pwi")
    pooled.bound(pw, 0, pooled_w).bound(ph, 0, pooled_h).bound(c, 0, shape.outputs)
    pooled.split(pw, pwo, pwi, columns // 2).reorder(pwi, c, pwo, ph, s, b)
    pooled.vectorize(pwi, min(lanes, columns // 2)).unroll(c)
    wo, wi = hl.Var("wo"), hl.Var("wi")
    conv.compute_at(pooled, pwo).store_in(hl.MemoryType.Stack).bound_extent(c, shape.outputs).bound_extent(w, columns)
    conv.split(w, wo, wi, columns).vectorize(wi, lanes).unroll(wo).unroll(c).unroll(h)
    conv.update(0).split(w, wo, wi, columns, hl.TailStrategy.RoundUp).vectorize(wi, lanes).unroll(wi).unroll(
        wo
    ).reorder(wi, c, r.x, r.y, r.z, h).unroll(c).unroll(r.x).unroll(r.y).unroll(r.z).unroll(h)
    return hl.Pipeline(pooled), [x, weight, bias], target


def _define_backward(shape: BlockShape):
    import halide as hl

    grad = hl.ImageParam(hl.Float(32), 5, "grad")  # (pw, ph, c, s, b); columns beyond the real ones are not read
    pooled = hl.ImageParam(hl.Float(32), 5, "pooled")
    phase = hl.ImageParam(hl.UInt(8), 5, "phase")
    x = hl.ImageParam(hl.Float(32), 5, "x")  # (w, h, ci, s, b)
    w, h, c, s, b, u, pw, ph = (hl.Var(v) for v in ("w", "h", "c", "s", "b", "u", "pw", "ph"))
    kx, ky, ci = hl.Var("kx"), hl.Var("ky"), hl.Var("ci")
    masked = hl.Func("masked")  # the ReLU's backward
    value = pooled[pw, ph, c, s, b]  # threshold_backward's rule: zero where value <= 0 (a NaN passes)
    passes = (pw < shape.conv_width // 2) & ((value > 0.0) | _is_nan(value))
    masked[pw, ph, c, s, b] = hl.select(passes, grad[pw, ph, c, s, b], 0.0)
    full = hl.Func("full")  # the pool's backward: each pooled gradient at its arg-max position
    here = hl.cast(hl.UInt(8), (h % 2) * 2 + w % 2)
    full[w, h, c, s, b] = hl.select(phase[w / 2, h / 2, c, s, b] == here, masked[w / 2, h / 2, c, s, b], 0.0)
    front = 2 * LANES  # zero columns before each row: the shifted reads below start up to k - 1 left of it
    padded = hl.Func("padded")
    # the column is clamped so that the vectorized select never reads before the buffer (the bounds asserts check it)
    padded[w, h, c, s, b] = hl.select(w >= front, full[hl.max(w - front, 0), h, c, s, b], 0.0)
    batch = grad.dim(4).extent()
    # d_weight[kx, ky] = sum over w, h of full[w, h] x[w + kx, h + ky], summed over w' = w + kx so that the
    # k*k products of a step share k aligned rows of x and k shifted rows of the gradient (k*k unaligned
    # loads of x, one per multiply-add, split cache lines and ran at half the speed)
    r = hl.RDom([(0, shape.rounded_width), (0, shape.conv_height), (0, batch)])
    d_weight = hl.Func("d_weight")
    d_weight[kx, ky, ci, c, s] = 0.0
    d_weight[kx, ky, ci, c, s] += padded[r.x - kx + front, r.y, c, s, r.z] * x[r.x, r.y + ky, ci, s, r.z]
    rb = hl.RDom([(0, shape.rounded_width // 2), (0, shape.conv_height // 2), (0, batch)])
    d_bias = hl.Func("d_bias")
    d_bias[c, s] = 0.0
    d_bias[c, s] += masked[rb.x, rb.y, c, s, rb.z]

    d_weight.bound(kx, 0, shape.kernel).bound(ky, 0, shape.kernel).bound(ci, 0, shape.channels).bound(c, 0, shape.outputs)
    d_weight.reorder(kx, ky, ci, c, s)
    target = _target()
    lanes, registers = _vectors(target)
    # the sum over pixels split into `lanes` partial sums, kernel x `rows` accumulator vectors in registers:
    # all k*k of them with AVX-512's 32 registers, two kernel rows per pass over a sample with AVX2's 16
    # (25 live of 16 spilled: 2.6-2.9 ms on EMNIST, not 2.2-2.4)
    rows = max((r for r in range(1, shape.kernel + 1) if shape.kernel * r <= registers - 6), default=1)
    rxo, rxi = hl.RVar("rxo"), hl.RVar("rxi")
    kyo, kyi = hl.Var("kyo"), hl.Var("kyi")
    partial = d_weight.update().split(r.x, rxo, rxi, lanes).rfactor(rxi, u)
    partial.compute_at(d_weight, ci).reorder_storage(u, kx, ky, ci, c, s)
    partial.vectorize(u, lanes).unroll(kx).unroll(ky)
    partial.update().split(ky, kyo, kyi, rows, hl.TailStrategy.GuardWithIf).reorder(u, kx, kyi, rxo, r.y, kyo, r.z)
    partial.update().vectorize(u, lanes).unroll(kx).unroll(kyi).unroll(rxo)
    # a whole sample's padded gradient before its products: rows just written and read back shifted stalled
    # store forwarding; two rows at a time share the pooled loads, and a 32-wide split turns w / 2 into one interleave
    wo, wi = hl.Var("wo"), hl.Var("wi")
    padded.compute_at(partial, r.z).bound(w, 0, front + shape.rounded_width).bound(h, 0, shape.conv_height)
    padded.split(w, wo, wi, front).vectorize(wi).unroll(wo).unroll(h, 2)
    d_bias.bound(c, 0, shape.outputs)
    bias_partial = d_bias.update().rfactor(rb.x, u)
    bias_partial.compute_at(d_bias, c).vectorize(u, min(LANES, shape.rounded_width // 2))
    bias_partial.update().vectorize(u, min(LANES, shape.rounded_width // 2))
    return hl.Pipeline([d_weight, d_bias]), [grad, pooled, phase, x], target


class FirstBlock:
    """The fused first block of one architecture: ``forward`` and ``backward`` over n stacked models."""

    def __init__(self, shape: BlockShape):
        self.shape = shape
        source_key = f"{shape.key()} {_SOURCE_DIGEST}"  # an edited kernel is a new library
        self._forward = halide_aot.build("wfl_block_forward", source_key, 5, lambda: _define_forward(shape))
        self._backward = halide_aot.build("wfl_block_backward", source_key, 6, lambda: _define_backward(shape))

    def layout(self, x: torch.Tensor) -> torch.Tensor:
        """Batch-major gathered images ``[B, n, C, H, W]`` -> the zero-padded kernel input."""
        p, extra = self.shape.padding, self.shape.input_width - self.shape.width - self.shape.padding
        return F.pad(x, (p, extra, p, p))

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pooled, ReLU'd values and arg-max phases ``[B, n, O, HC/2, WR/2]`` (uint8 phases)."""
        batch, n = x.shape[:2]
        shape = self.shape
        pooled_h = shape.conv_height // 2
        out = torch.empty(batch, n, shape.outputs, pooled_h, shape.rounded_width // 2)
        phase = torch.empty(out.shape, dtype=torch.uint8)
        self._forward(x, weight.view(n, shape.outputs, shape.channels, shape.kernel, shape.kernel), bias, out, phase)
        return out, phase

    def channels_last(self, out: torch.Tensor) -> torch.Tensor:
        """``[B, n, O, Ho, WR/2]`` -> the engine's ``[B, n*O, Ho, Wo]`` channels_last activations."""
        batch, n, outputs, height, _ = out.shape
        width = self.shape.conv_width // 2
        nhwc = out[..., :width].permute(0, 3, 4, 1, 2).reshape(batch, height, width, n * outputs)
        return nhwc.permute(0, 3, 1, 2)

    def backward(
        self, grad: torch.Tensor, x: torch.Tensor, out: torch.Tensor, phase: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Weight ``[n, O*C*k*k]`` and bias ``[n, O]`` gradients from the gradient of the block's output.

        ``grad`` is the engine's channels_last ``[B, n*O, Ho, Wo]``.
        """
        n, outputs = out.shape[1:3]
        shape = self.shape
        d_weight = torch.empty(n, outputs, shape.channels, shape.kernel, shape.kernel)
        d_bias = torch.empty(n, outputs)
        g = torch.empty(out.shape)  # slot-major; the columns beyond the real ones stay unset, the kernel skips them
        g[..., : shape.conv_width // 2].copy_(_to_slot_major(grad, n))
        self._backward(g, out, phase, x, d_weight, d_bias)
        return d_weight.view(n, -1), d_bias


def _to_slot_major(grad: torch.Tensor, n: int) -> torch.Tensor:
    """channels_last ``[B, n*O, H, W]`` as a ``[B, n, O, H, W]`` view (strided: the kernel reads a copy)."""
    batch, channels, height, width = grad.shape
    nhwc = grad.permute(0, 2, 3, 1).reshape(batch, height, width, n, channels // n)
    return nhwc.permute(0, 3, 4, 1, 2)


class _BlockFunction(torch.autograd.Function):
    """The fused block for autograd: the kernels' forward, and their backward for the conv's weight and bias."""

    @staticmethod
    def forward(ctx, padded, weight, bias, block):
        n = weight.shape[0]
        out, phase = block.forward(padded, weight.reshape(n, -1), bias)
        ctx.save_for_backward(padded, out, phase)
        ctx.block, ctx.weight_shape = block, weight.shape
        return block.channels_last(out).contiguous(memory_format=torch.channels_last)

    @staticmethod
    def backward(ctx, grad):
        padded, out, phase = ctx.saved_tensors
        d_weight, d_bias = ctx.block.backward(grad.contiguous(memory_format=torch.channels_last), padded, out, phase)
        return None, d_weight.view(ctx.weight_shape), d_bias, None


class HalideFirstBlock:
    """Accelerator plug-in: a first ``Conv2d -> max-pool 2x2 -> ReLU`` on a CPU as the fused kernels above."""

    name = "halide"

    def __init__(self) -> None:
        self.warned = False

    def claim(self, graph, modules, input_shape, device):
        import torch.fx

        from wirelessfl.learning.accelerators import Claim

        if torch.device(device).type != "cpu":
            return None
        nodes = list(graph.graph.nodes)
        source = next((node for node in nodes if node.op == "placeholder"), None)
        conv = next(iter(source.users), None) if source is not None and len(source.users) == 1 else None
        if conv is None or conv.op != "call_module" or not isinstance(modules.get(conv.target), torch.nn.Conv2d):
            return None
        layer = modules[conv.target]
        pool = _only_user(conv)
        relu = _only_user(pool) if pool is not None else None
        if not (_is_pool_2x2(pool, modules) and relu is not None and relu.op == "call_function" and relu.target is F.relu):
            return None
        if layer.bias is None or layer.stride != (1, 1) or layer.dilation != (1, 1) or layer.groups != 1 or layer.padding_mode != "zeros":
            return None
        if isinstance(layer.padding, str) or layer.padding[0] != layer.padding[1] or layer.kernel_size[0] != layer.kernel_size[1]:
            return None
        shape = block_shape(layer.in_channels, layer.out_channels, layer.kernel_size[0], layer.padding[0], input_shape)
        if shape is None:
            return None
        try:
            block = FirstBlock(shape)
        except halide_aot.KernelUnavailable as err:
            if not self.warned:
                self.warned = True
                import warnings

                warnings.warn(f"wirelessfl: Halide first-block kernels unavailable ({err}); the first layer runs on oneDNN", stacklevel=2)
            return None
        weight, bias = f"{conv.target}.weight", f"{conv.target}.bias"

        def run(params, x):
            from wirelessfl.learning.stacked import images

            batch, channels, height, width = x.tensor.shape
            n = x.n
            padded = block.layout(x.tensor.unflatten(1, (n, channels // n)).contiguous())
            return images(_BlockFunction.apply(padded, params[weight], params[bias], block), n)

        return Claim((conv, pool, relu), source, run, f"halide: {conv.target} conv + 2x2 max-pool + ReLU fused")


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _is_pool_2x2(node, modules) -> bool:
    if node is None:
        return False
    if node.op == "call_module":
        sub = modules.get(node.target)
        return isinstance(sub, torch.nn.MaxPool2d) and _pair(sub.kernel_size) == (2, 2) and _pair(sub.stride or sub.kernel_size) == (2, 2) \
            and _pair(sub.padding) == (0, 0) and _pair(sub.dilation) == (1, 1) and not sub.ceil_mode and not sub.return_indices
    if node.op == "call_function" and node.target is F.max_pool2d:
        args = list(node.args[1:]) + [None] * 5
        kernel = node.kwargs.get("kernel_size", args[0])
        stride = node.kwargs.get("stride", args[1]) or kernel
        padding = node.kwargs.get("padding", args[2] if args[2] is not None else 0)
        dilation = node.kwargs.get("dilation", args[3] if args[3] is not None else 1)
        ceil = node.kwargs.get("ceil_mode", args[4] or False)
        return _pair(kernel) == (2, 2) and _pair(stride) == (2, 2) and _pair(padding) == (0, 0) and _pair(dilation) == (1, 1) \
            and not ceil and not node.kwargs.get("return_indices")
    return False


def _pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)
