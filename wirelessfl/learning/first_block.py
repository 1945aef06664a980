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
(docs/engine.md, "Kept: the first block as Halide kernels"); the backward
kernel alone later 2.0 -> 1.2 ms by summing over shifted gradient rows
("Kept: the block's weight gradient over shifted rows").

A third kernel serves the convolution that follows the block (LeNet-5's conv2,
unpadded): its input gradient, which oneDNN computes at a third of a core's
peak (6 of 16 vector lanes filled), written straight into the block's
slot-major gradient layout (docs/engine.md, "Kept: the next conv's input
gradient as a Halide kernel").

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
* weights ``[n, O, C, k, k]`` and biases ``[n, O]`` (views of the flat parameters);
* the next conv's output gradient ``[B, n, O2, H2, W2 + 2(k2 - 1)]``, zero
  columns either side, and its weights ``[n, O2, O, k2, k2]``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from . import halide_aot
from .models import Op

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
    next_outputs: int = 0
    """Output channels of the unpadded conv right after the block whose input gradient has a kernel (0: none)."""
    next_kernel: int = 0

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

    @property
    def next_height(self) -> int:
        return self.conv_height // 2 - self.next_kernel + 1

    @property
    def next_width(self) -> int:
        return self.conv_width // 2 - self.next_kernel + 1

    @property
    def next_padded_width(self) -> int:
        """The next conv's gradient rows with ``k2 - 1`` zero columns either side, as its kernel reads them."""
        return self.rounded_width // 2 + self.next_kernel - 1

    def key(self) -> str:
        return f"c{self.channels} o{self.outputs} k{self.kernel} p{self.padding} {self.height}x{self.width} lanes{LANES}"

    def next_key(self) -> str:
        return f"{self.key()} next o{self.next_outputs} k{self.next_kernel}"


def block_shape(ops: tuple[Op, ...], input_shape: tuple[int, int, int]) -> BlockShape | None:
    """The shape when ``ops`` start with conv, 2x2/2 max-pool, ReLU on a small first layer, else None.

    Small: at most 4 input and 8 output channels per model and conv rows of at
    most 64 pixels, so that a kernel's accumulators (outputs x two vectors
    per conv row) stay in registers; anything larger keeps oneDNN. A
    conv row plus k - 1 columns must fit its vectors (LeNet-5's 28 + 4 in 32):
    the weight gradient sums over that many shifted columns.
    """
    if len(ops) < 3 or [op.kind for op in ops[:3]] != ["conv", "maxpool", "relu"] or ops[1].args != (2, 2, 0):
        return None
    channels, outputs, kernel, padding = ops[0].args
    shape = BlockShape(channels, outputs, kernel, padding, input_shape[1], input_shape[2])
    if channels != input_shape[0] or channels > 4 or outputs > 8 or not 2 <= shape.conv_width <= 64:
        return None
    if shape.conv_height < 2 or shape.conv_height % 2 or shape.conv_width % 2:
        return None
    if shape.conv_width + kernel - 1 > shape.rounded_width:  # the weight gradient's shifted rows must fit the vectors
        return None
    if len(ops) > 3 and ops[3].kind == "conv":
        cin, cout, k, pad = ops[3].args
        # one output vector per row (pooled rows of 9-16 pixels), the block's outputs as its input, unpadded
        pooled_side = min(shape.conv_height, shape.conv_width) // 2
        if cin == outputs and pad == 0 and shape.rounded_width // 2 == LANES and k <= pooled_side:
            shape = dataclasses.replace(shape, next_outputs=cout, next_kernel=k)
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
    """Halide's ``HL_TARGET`` (this CPU when unset), without runtime checks: the engine passes the shapes expected."""
    import halide as hl

    target = hl.get_target_from_environment()
    return target.with_feature(hl.TargetFeature.NoAsserts).with_feature(hl.TargetFeature.NoBoundsQuery)


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
    padded[w, h, c, s, b] = hl.select(w >= front, full[w - front, h, c, s, b], 0.0)
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


def _define_next_input_grad(shape: BlockShape):
    """d(loss)/d(block output) from the next conv's output gradient: a correlation with the flipped kernel.

    Vectors run along the block's 16-wide pooled rows. The gradient rows are
    zero-padded by ``k2 - 1`` columns either side, so every tap is a dense
    load; the rows are not padded: the sum over kernel rows runs only over
    those that exist (the loop bounds, not a zero test). Four samples share
    each weight broadcast with AVX-512, 4 x 6 accumulators in registers; one
    sample with AVX2, 6 x 2 half rows.
    """
    import halide as hl

    grad = hl.ImageParam(hl.Float(32), 5, "grad")  # (x, y, o, s, b), padded columns
    weight = hl.ImageParam(hl.Float(32), 5, "weight")  # (kx, ky, i, o, s)
    x, y, i, s, b = (hl.Var(v) for v in ("x", "y", "i", "s", "b"))
    k, height = shape.next_kernel, shape.next_height
    last = grad.dim(4).extent() - 1  # samples past the last one (a partial group of four) read it again
    r = hl.RDom([(0, k), (0, k), (0, shape.next_outputs)])
    r.where((y - r.y >= 0) & (y - r.y < height))
    acc = hl.Func("acc")
    acc[x, y, i, s, b] = 0.0
    acc[x, y, i, s, b] += weight[r.x, r.y, i, r.z, s] * grad[x - r.x + k - 1, y - r.y, r.z, s, hl.min(b, last)]
    d_input = hl.Func("d_input")
    d_input[x, y, i, s, b] = acc[x, y, i, s, b]

    target = _target()
    lanes, registers = _vectors(target)
    samples = max(1, registers * 3 // 4 // (shape.outputs * (LANES // lanes)))  # AVX-512: 4 x 6, AVX2: 1 x 6 x 2
    bo, bi = hl.Var("bo"), hl.Var("bi")
    d_input.bound(x, 0, LANES).bound(y, 0, shape.conv_height // 2).bound(i, 0, shape.outputs)
    d_input.split(b, bo, bi, samples, hl.TailStrategy.GuardWithIf).reorder(x, bi, i, y, s, bo)
    d_input.vectorize(x, LANES).unroll(bi).unroll(i)
    acc.compute_at(d_input, y).store_in(hl.MemoryType.Stack)
    acc.bound_extent(x, LANES).bound_extent(y, 1).bound_extent(i, shape.outputs).bound_extent(b, samples)
    acc.vectorize(x, LANES).unroll(b).unroll(i)
    acc.update().reorder(x, i, b, r.x, r.y, r.z, y).vectorize(x, LANES).unroll(i).unroll(b).unroll(r.x)
    return hl.Pipeline(d_input), [grad, weight], target


_CACHED_PADDED_FLOATS = 4 << 20
"""16 MiB: a step of 13 slots x 32 LeNet-5 samples needs 5.3 MB."""


class FirstBlock:
    """The fused first block of one architecture: ``forward`` and ``backward`` over n stacked models."""

    def __init__(self, shape: BlockShape):
        self.shape = shape
        source_key = f"{shape.key()} {_SOURCE_DIGEST}"  # an edited kernel is a new library
        self._forward = halide_aot.build("wfl_block_forward", source_key, 5, lambda: _define_forward(shape))
        self._backward = halide_aot.build("wfl_block_backward", source_key, 6, lambda: _define_backward(shape))
        self._next_input_grad = None
        self._buffers = threading.local()  # the engine's worker threads run slot groups at once
        if shape.next_kernel:
            next_key = f"{shape.next_key()} {_SOURCE_DIGEST}"
            self._next_input_grad = halide_aot.build("wfl_next_input_grad", next_key, 3, lambda: _define_next_input_grad(shape))

    def _padded(self, batch: int, n: int) -> torch.Tensor:
        """A buffer for the next conv's padded gradient whose zero columns are written once per thread.

        (Zeroing 4 + 6 columns per row every step took 0.5 ms, a third of the
        kernel.) Every row of every shape has the same padded width, so one flat
        buffer serves all batch sizes as a prefix; passes larger than a
        training step (a full-gradient batch) get a fresh one instead of
        keeping hundreds of MB alive.
        """
        shape = self.shape
        size = (batch, n, shape.next_outputs, shape.next_height, shape.next_padded_width)
        numel = math.prod(size)
        if numel > _CACHED_PADDED_FLOATS:
            return torch.zeros(size)
        buffer = getattr(self._buffers, "padded", None)
        if buffer is None or buffer.numel() < numel:
            buffer = self._buffers.padded = torch.zeros(numel)
        return buffer[:numel].view(size)

    @property
    def has_next_input_grad(self) -> bool:
        """Whether the conv after the block gets its input gradient from :meth:`next_input_grad`."""
        return self._next_input_grad is not None

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

    def next_input_grad(self, grad: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """The gradient of the block's output, slot-major ``[B, n, O, Ho, WR/2]``, from the next conv's.

        ``grad`` is that conv's channels_last output gradient ``[B, n*O2, H2, W2]``;
        ``weight`` its flat weights ``[n, O2*O*k2*k2]``.
        """
        shape = self.shape
        batch, n = grad.shape[0], weight.shape[0]
        k, width = shape.next_kernel, shape.next_width
        padded = self._padded(batch, n)
        padded[..., k - 1 : k - 1 + width].copy_(_to_slot_major(grad, n))
        d_input = torch.empty(batch, n, shape.outputs, shape.conv_height // 2, shape.rounded_width // 2)
        self._next_input_grad(padded, weight.view(n, shape.next_outputs, shape.outputs, k, k), d_input)
        return d_input

    def backward(
        self, grad: torch.Tensor, x: torch.Tensor, out: torch.Tensor, phase: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Weight ``[n, O*C*k*k]`` and bias ``[n, O]`` gradients from the gradient of the block's output.

        ``grad`` is the engine's channels_last ``[B, n*O, Ho, Wo]``, or already
        slot-major ``[B, n, O, Ho, WR/2]`` as :meth:`next_input_grad` gives it.
        """
        n, outputs = out.shape[1:3]
        shape = self.shape
        d_weight = torch.empty(n, outputs, shape.channels, shape.kernel, shape.kernel)
        d_bias = torch.empty(n, outputs)
        if grad.dim() == 5:
            g = grad
        else:
            g = torch.empty(out.shape)  # slot-major; the columns beyond the real ones stay unset, the kernel skips them
            g[..., : shape.conv_width // 2].copy_(_to_slot_major(grad, n))
        self._backward(g, out, phase, x, d_weight, d_bias)
        return d_weight.view(n, -1), d_bias


def _to_slot_major(grad: torch.Tensor, n: int) -> torch.Tensor:
    """channels_last ``[B, n*O, H, W]`` as a ``[B, n, O, H, W]`` view (strided: the kernel reads a copy)."""
    batch, channels, height, width = grad.shape
    nhwc = grad.permute(0, 2, 3, 1).reshape(batch, height, width, n, channels // n)
    return nhwc.permute(0, 3, 4, 1, 2)
