"""Signal processing: DFT and STFT.

Lengths are static in a PopART session, so a DFT is a product with cosine and sine matrices
built in numpy when the graph is traced, computed in float64 (XLA compiles it like any matmul).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import normalize_axis


def _fitted(values: tf.Tensor, length: int) -> tf.Tensor:
    """The last axis cut or zero-padded to ``length``."""
    size = values.shape[-1]
    if size >= length:
        return values[..., :length]
    return tf.pad(values, [[0, 0]] * (values.shape.rank - 1) + [[0, length - size]])


def transform(
    real: tf.Tensor, imaginary: tf.Tensor | None, length: int, inverse: bool, onesided: bool
) -> list[tf.Tensor]:
    """[real, imaginary] of the DFT (inverse: divided by n) of length ``length`` along the
    last axis of a real or complex signal, cut or zero-padded to that length."""
    count = length // 2 + 1 if onesided else length
    angle = 2 * np.pi * np.outer(np.arange(length), np.arange(count)) / length
    sign = 1.0 if inverse else -1.0
    scale = 1 / length if inverse else 1.0
    cos = tf.constant(np.cos(angle) * scale, real.dtype)
    sin = tf.constant(sign * np.sin(angle) * scale, real.dtype)
    a = _fitted(real, length)
    # (a + ib)(cos + i sin), sin carrying the transform's sign
    y_real = tf.tensordot(a, cos, 1)
    y_imaginary = tf.tensordot(a, sin, 1)
    if imaginary is not None:
        b = _fitted(imaginary, length)
        y_real -= tf.tensordot(b, sin, 1)
        y_imaginary += tf.tensordot(b, cos, 1)
    return [y_real, y_imaginary]


@register_op("DFT", since=(17, 20))
class DFT(Op):
    """The discrete Fourier transform along ``axis`` of a real [..., 1] or complex [..., 2]
    signal: forward (onesided keeps frequencies 0..n/2), inverse (divided by n), or inverse
    onesided, which reads frequencies 0..n/2 of a real signal of length n (imaginary parts of
    the frequencies 0 and n/2 do not count)."""

    def compute(self, x: tf.Tensor, dft_length=None, axis=None) -> tf.Tensor:
        rank = x.shape.rank
        if self.opset_version >= 20:
            axis = -2 if axis is None else self.static_ints(axis, "axis")[0]
        else:
            axis = self.attrs.axis
        axis = normalize_axis(axis, rank)
        if not 0 < axis < rank - 1 and not (axis == 0 and rank > 1):
            self.bad_attribute("axis", f"{axis} is not a signal axis of rank {rank}")
        inverse, onesided = bool(self.attrs.inverse), bool(self.attrs.onesided)
        size = x.shape[axis]
        if dft_length is not None:
            length = self.static_ints(dft_length, "dft_length")[0]
        else:
            length = 2 * (size - 1) if inverse and onesided else size
        order = [*range(axis), *range(axis + 1, rank - 1), axis, rank - 1]
        moved = tf.transpose(x, order)  # [..., signal, components]
        dtype = tf.float64  # sums of n terms that cancel: float32 leaves ~1e-7 where 0 is due
        real = tf.cast(moved[..., 0], dtype)
        imaginary = tf.cast(moved[..., 1], dtype) if x.shape[-1] == 2 else None
        if inverse and onesided:
            bins = length // 2 + 1
            weight = np.full(bins, 2.0)
            weight[0] = 1.0
            if length % 2 == 0:
                weight[-1] = 1.0
            angle = 2 * np.pi * np.outer(np.arange(bins), np.arange(length)) / length
            cos = weight[:, None] * np.cos(angle) / length
            sin = weight[:, None] * np.sin(angle) / length
            y = tf.tensordot(_fitted(real, bins), tf.constant(cos, dtype), 1)
            if imaginary is not None:
                y -= tf.tensordot(_fitted(imaginary, bins), tf.constant(sin, dtype), 1)
            parts = [y]
        else:
            parts = transform(real, imaginary, length, inverse, onesided and not inverse)
        y = tf.stack(parts, axis=-1)
        back = list(np.argsort(order))
        return tf.cast(tf.transpose(y, back), x.dtype)


@register_op("STFT", since=17)
class STFT(Op):
    """Frames of frame_length samples every frame_step along [batch, length, 1 or 2], each
    multiplied by the window and transformed: [batch, frames, bins, 2]."""

    def compute(self, signal, frame_step, window=None, frame_length=None) -> tf.Tensor:
        step = self.static_ints(frame_step, "frame_step")[0]
        if frame_length is not None:
            size = self.static_ints(frame_length, "frame_length")[0]
        elif window is not None:
            size = window.shape[0]
        else:
            raise self.error("needs a window or a frame_length")
        frames = (signal.shape[1] - size) // step + 1
        starts = np.arange(frames)[:, None] * step + np.arange(size)[None, :]
        framed = tf.gather(tf.cast(signal, tf.float64), starts, axis=1)  # [B, F, size, c]
        real = framed[..., 0]
        imaginary = framed[..., 1] if signal.shape[-1] == 2 else None
        if window is not None:
            weights = tf.cast(window, tf.float64)
            real = real * weights
            imaginary = None if imaginary is None else imaginary * weights
        # One-sided output of a complex signal keeps the first half too, as onnx.reference
        # (the spec says it is "not possible" without saying what to do)
        onesided = bool(self.attrs.onesided)
        parts = transform(real, imaginary, size, inverse=False, onesided=onesided)
        return tf.cast(tf.stack(parts, axis=-1), signal.dtype)
