"""Convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv, Col2Im (NCHW, as ONNX lays
them out; Conv also channels-last, inside chains of spatial ops)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.op import Op, RunContext
from openipu._src.popart.lowering.ops.quantization import requantize
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.spatial import (
    channels_first,
    channels_last,
    spatial_pad,
    window_for,
)

_CONV_DTYPES = {tf.float16, tf.bfloat16, tf.float32, tf.float64}


@functools.cache  # fixed for the process (TensorFlow reads it once, at start-up)
def _onednn_enabled() -> bool:
    """Whether TensorFlow runs its oneDNN kernels here (TF 2.21 turns them on by default only
    on CPUs with AVX-512 VNNI, BF16 or AMX). Without them Grappler still fuses a grouped
    convolution with the following bias into `_FusedConv2D`, whose plain CPU kernel refuses
    groups at run time ("Fused conv implementation does not support grouped convolutions")."""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:  # a TensorFlow without the query: per-group convolutions always work
        return False
    return bool(_pywrap_util_port.IsMklEnabled())


def convolve(
    x: tf.Tensor,
    weight: tf.Tensor,
    strides: list[int],
    dilations: list[int],
    groups: int,
) -> tf.Tensor:
    """VALID convolution of an already padded channels-first ``x`` with an ONNX [M, C/g, k...] weight."""
    output = convolve_channels_last(channels_last(x), weight, strides, dilations, groups)
    return channels_first(output)


Convolution = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


def _per_group(conv: Convolution, x: tf.Tensor, filters: tf.Tensor, groups: int) -> tf.Tensor:
    """One convolution per group of channels, concatenated."""
    parts = tf.split(x, groups, axis=-1)
    kernels = tf.split(filters, groups, axis=-1)
    return tf.concat([conv(p, k) for p, k in zip(parts, kernels, strict=True)], axis=-1)


def _grouped(conv: Convolution, x: tf.Tensor, filters: tf.Tensor, groups: int) -> tf.Tensor:
    """A grouped convolution in one kernel, differentiated one group at a time.

    TensorFlow's CPU kernels run grouped convolutions forward, but its filter gradient
    (Conv2DBackpropFilter) refuses grouped filters; PopART trains them, so the gradient is
    that of the per-group convolutions, which compute the same function.
    """

    @tf.custom_gradient
    def grouped(x: tf.Tensor, filters: tf.Tensor):
        def gradient(upstream: tf.Tensor):
            with tf.GradientTape() as tape:
                tape.watch([x, filters])
                output = _per_group(conv, x, filters, groups)
            return tape.gradient(output, [x, filters], output_gradients=upstream)

        return conv(x, filters), gradient

    return grouped(x, filters)


def convolve_channels_last(
    x: tf.Tensor,
    weight: tf.Tensor,
    strides: list[int],
    dilations: list[int],
    groups: int,
    pads_begin: list[int] | None = None,
    pads_end: list[int] | None = None,
) -> tf.Tensor:
    """Convolution of a channels-last ``x`` with an ONNX [M, C/g, k...] weight, padded by
    ``pads_begin``/``pads_end`` (negative pads crop); the result is channels-last.

    TensorFlow's CPU kernels are channels-last; 3-D grouped convolutions and strides combined with
    dilations are done piecewise because those kernels lack them, and so are the gradients of
    grouped convolutions (see `_grouped`) and, without oneDNN, grouped convolutions (see
    `_onednn_enabled`).
    """
    dtype = x.dtype
    if dtype not in _CONV_DTYPES:
        x, weight = tf.cast(x, tf.float32), tf.cast(weight, tf.float32)
    spatial = x.shape.rank - 2
    pads_begin = pads_begin or [0] * spatial
    pads_end = pads_end or [0] * spatial
    filters = tf.transpose(weight, [*range(2, spatial + 2), 1, 0])
    strided_and_dilated = any(s > 1 for s in strides) and any(d > 1 for d in dilations)
    conv_strides = [1] * spatial if strided_and_dilated else strides
    explicit = spatial == 2 and min(pads_begin + pads_end) >= 0 and max(dilations) == 1
    if explicit:
        # The padding inside the convolution, where oneDNN fuses it, rather than a Pad op.
        padding = [[0, 0], *zip(pads_begin, pads_end, strict=True), [0, 0]]

        def conv(part: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
            return tf.nn.conv2d(part, kernel, strides, padding=padding, dilations=dilations)

    else:
        x = spatial_pad(x, pads_begin, pads_end, channels_last=True)

        def conv(part: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
            return tf.nn.convolution(
                part, kernel, strides=conv_strides, padding="VALID", dilations=dilations
            )

    if groups == 1:
        output = conv(x, filters)
    elif spatial == 3 or not _onednn_enabled():
        output = _per_group(conv, x, filters, groups)
    else:
        output = _grouped(conv, x, filters, groups)
    if strided_and_dilated:  # never explicit: that has no dilations
        output = output[(slice(None), *[slice(None, None, s) for s in strides], slice(None))]
    return tf.cast(output, dtype) if output.dtype != dtype else output


def add_channel_bias(y: tf.Tensor, bias: tf.Tensor | None) -> tf.Tensor:
    if bias is None:
        return y
    return y + tf.reshape(bias, [1, -1] + [1] * (y.shape.rank - 2))


def kernel_shape(op: Op, weight: tf.Tensor) -> list[int]:
    return list(op.attrs.get("kernel_shape") or weight.shape.as_list()[2:])


@register_op("Conv", since=(1, 11, 22))
class Conv(Op):
    """Computed channels-last, where TensorFlow's kernels and oneDNN's conv+bias+activation
    fusions are (see `channels_last`)."""

    channels_last_always = True

    def compute(self, x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor | None = None) -> tf.Tensor:
        return channels_first(self.convolve(channels_last(x), weight, bias))

    def run_channels_last(self, context: RunContext, inputs: Sequence[Any]) -> tf.Tensor:
        x, weight, *rest = inputs
        return self.convolve(x, weight, rest[0] if rest else None)

    def convolve(self, x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor | None) -> tf.Tensor:
        window = window_for(self, x.shape.as_list()[1:-1], kernel_shape(self, weight))
        y = convolve_channels_last(
            x,
            weight,
            window.strides,
            window.dilations,
            self.attrs.group,
            window.pads_begin,
            window.pads_end,
        )
        return y if bias is None else tf.nn.bias_add(y, bias)


class IntegerConvolution(Op):
    def convolve_integers(
        self,
        x: tf.Tensor,
        weight: tf.Tensor,
        x_zero_point: tf.Tensor | None,
        w_zero_point: tf.Tensor | None,
    ) -> tf.Tensor:
        """The int32 convolution of the zero-point-shifted integers (exact in float64)."""
        x = tf.cast(x, tf.int32)
        weight = tf.cast(weight, tf.int32)
        if x_zero_point is not None:
            x = x - tf.cast(x_zero_point, tf.int32)
        if w_zero_point is not None:
            zero = tf.cast(w_zero_point, tf.int32)
            weight = weight - tf.reshape(zero, [-1] + [1] * (weight.shape.rank - 1))
        window = window_for(self, x.shape.as_list()[2:], kernel_shape(self, weight))
        padded = spatial_pad(tf.cast(x, tf.float64), window.pads_begin, window.pads_end)
        y = convolve(
            padded, tf.cast(weight, tf.float64), window.strides, window.dilations, self.attrs.group
        )
        return tf.cast(tf.round(y), tf.int32)


@register_op("ConvInteger", since=10)
class ConvInteger(IntegerConvolution):
    def compute(
        self,
        x: tf.Tensor,
        weight: tf.Tensor,
        x_zero_point: tf.Tensor | None = None,
        w_zero_point: tf.Tensor | None = None,
    ) -> tf.Tensor:
        return self.convolve_integers(x, weight, x_zero_point, w_zero_point)


@register_op("QLinearConv", since=10)
class QLinearConv(IntegerConvolution):
    """ConvInteger of the zero-point-shifted inputs plus the int32 bias, requantized by
    x_scale * w_scale / y_scale (w_scale per output channel when 1-D)."""

    def compute(
        self,
        x,
        x_scale,
        x_zero_point,
        w,
        w_scale,
        w_zero_point,
        y_scale,
        y_zero_point=None,
        bias=None,
    ):
        accumulated = self.convolve_integers(x, w, x_zero_point, w_zero_point)
        if bias is not None:
            accumulated = add_channel_bias(accumulated, tf.cast(bias, tf.int32))
        if w_scale.shape.rank == 1 and w_scale.shape[0] != 1:
            w_scale = tf.reshape(w_scale, [1, -1] + [1] * (x.shape.rank - 2))
        scale = x_scale * tf.cast(w_scale, x_scale.dtype)
        dtype = x.dtype if y_zero_point is None else y_zero_point.dtype
        return requantize(accumulated, scale, y_scale, y_zero_point, dtype)


def upsample_with_zeros(x: tf.Tensor, strides: list[int]) -> tf.Tensor:
    """Insert ``stride - 1`` zeros between neighbours along each spatial dim."""
    for index, stride in enumerate(strides):
        if stride == 1:
            continue
        axis = index + 2
        dims = x.shape.as_list()
        zeros = tf.zeros_like(x)
        interleaved = tf.stack([x] + [zeros] * (stride - 1), axis=axis + 1)
        merged = dims[:axis] + [dims[axis] * stride] + dims[axis + 1 :]
        x = tf.reshape(interleaved, merged)
        x = x[(slice(None),) * axis + (slice(0, (dims[axis] - 1) * stride + 1),)]
    return x


@register_op("ConvTranspose", since=(1, 11, 22))
class ConvTranspose(Op):
    """Lowered as a stride-1 convolution of the zero-upsampled input with the flipped kernel."""

    def compute(self, x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor | None = None) -> tf.Tensor:
        groups = self.attrs.group
        spatial = x.shape.rank - 2
        kernel = kernel_shape(self, weight)
        strides = list(self.attrs.get("strides") or [1] * spatial)
        dilations = list(self.attrs.get("dilations") or [1] * spatial)
        output_padding = list(self.attrs.get("output_padding") or [0] * spatial)
        input_spatial = x.shape.as_list()[2:]
        full = [
            (size - 1) * stride + (k - 1) * dilation + 1 + extra
            for size, stride, k, dilation, extra in zip(
                input_spatial, strides, kernel, dilations, output_padding, strict=True
            )
        ]
        begin, end = self._pads(full, spatial, input_spatial, strides)
        # [C, M/g, k...] -> [M, C/g, k...], kernel flipped in space.
        channels_in, per_group_out = weight.shape.as_list()[:2]
        w = tf.reshape(weight, [groups, channels_in // groups, per_group_out, *kernel])
        w = tf.transpose(w, [0, 2, 1, *range(3, spatial + 3)])
        w = tf.reshape(w, [groups * per_group_out, channels_in // groups, *kernel])
        w = tf.reverse(w, axis=list(range(2, spatial + 2)))
        upsampled = upsample_with_zeros(x, strides)
        halo = [(k - 1) * d for k, d in zip(kernel, dilations, strict=True)]
        padded = spatial_pad(
            upsampled,
            [h - b for h, b in zip(halo, begin, strict=True)],
            [h + extra - e for h, extra, e in zip(halo, output_padding, end, strict=True)],
        )
        y = convolve(padded, w, [1] * spatial, dilations, groups)
        return add_channel_bias(y, bias)

    def _pads(
        self, full: list[int], spatial: int, input_spatial: list[int], strides: list[int]
    ) -> tuple[list[int], list[int]]:
        output_shape = list(self.attrs.get("output_shape") or [])
        auto_pad = self.attrs.get("auto_pad") or "NOTSET"
        if len(output_shape) == spatial:
            return self._pads_for_output_shape(full, output_shape, auto_pad)
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            targets = [size * stride for size, stride in zip(input_spatial, strides, strict=True)]
        else:
            pads = list(self.attrs.get("pads") or [0] * (2 * spatial))
            if auto_pad == "VALID":
                pads = [0] * (2 * spatial)
            return pads[:spatial], pads[spatial:]
        totals = [f - t for f, t in zip(full, targets, strict=True)]
        # A negative total (output_shape beyond the full output) extends the end.
        if auto_pad == "SAME_UPPER":
            begin = [total // 2 for total in totals]
        else:
            begin = [total - total // 2 for total in totals]
        end = [total - b for total, b in zip(totals, begin, strict=True)]
        return begin, end

    def _pads_for_output_shape(
        self, full: list[int], output_shape: list[int], auto_pad: str
    ) -> tuple[list[int], list[int]]:
        """The spatial output_shape PopART works the pads out from (willow/src/op/
        convtranspose.cpp): the odd one of an odd total is cut at the end unless auto_pad is
        SAME_UPPER (NOTSET counts as SAME_LOWER). A whole output shape (batch and channels
        too) only declares the output: the pads attribute applies, as without output_shape."""
        if auto_pad == "VALID":
            self.bad_attribute("auto_pad", "VALID cannot be used if the output_shape is also set")
        totals = [f - t for f, t in zip(full, output_shape, strict=True)]
        if auto_pad == "SAME_UPPER":
            begin = [total - total // 2 for total in totals]
        else:
            begin = [total // 2 for total in totals]
        return begin, [total - b for total, b in zip(totals, begin, strict=True)]


@register_op("Col2Im", since=18)
class Col2Im(Op):
    """The inverse of im2col: columns [N, C * prod(block), L] summed back into the image
    [N, C, *image_shape]. Block k at sliding position l adds to a fixed pixel of the padded
    image, so the whole op is one matrix (built when tracing) of the static shapes."""

    def compute(self, x: tf.Tensor, image_shape: tf.Tensor, block_shape: tf.Tensor) -> tf.Tensor:
        image = self.static_ints(image_shape, "image_shape")
        block = self.static_ints(block_shape, "block_shape")
        rank = len(image)
        strides = list(self.attrs.get("strides") or [1] * rank)
        dilations = list(self.attrs.get("dilations") or [1] * rank)
        pads = list(self.attrs.get("pads") or [0] * (2 * rank))
        padded = [size + pads[d] + pads[d + rank] for d, size in enumerate(image)]
        counts = [
            (padded[d] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(rank)
        ]
        blocks, positions = math.prod(block), math.prod(counts)
        if x.shape[2] != positions or x.shape[1] % blocks:
            raise self.error(
                f"input {x.shape.as_list()} does not hold {blocks} x {positions} blocks"
            )
        # pixel of the unpadded image each (block offset, position) lands on; -1 in the pads
        offsets = np.indices(block).reshape(rank, -1)  # [rank, K]
        starts = np.indices(counts).reshape(rank, -1)  # [rank, L]
        matrix = np.zeros((blocks * positions, math.prod(image)), np.float32)
        pixel = np.zeros((blocks, positions), np.int64)
        inside = np.ones((blocks, positions), bool)
        for d in range(rank):
            where = starts[d][None, :] * strides[d] + offsets[d][:, None] * dilations[d] - pads[d]
            inside &= (where >= 0) & (where < image[d])
            pixel = pixel * image[d] + np.clip(where, 0, image[d] - 1)
        rows = np.arange(blocks * positions).reshape(blocks, positions)
        matrix[rows[inside], pixel[inside]] = 1
        batch, channels = tf.shape(x)[0], x.shape[1] // blocks
        columns = tf.reshape(x, [batch, channels, blocks * positions])
        dtype = x.dtype if x.dtype.is_floating else tf.float64
        y = tf.tensordot(tf.cast(columns, dtype), tf.constant(matrix, dtype), axes=1)
        return tf.cast(tf.reshape(y, [batch, channels, *image]), x.dtype)
