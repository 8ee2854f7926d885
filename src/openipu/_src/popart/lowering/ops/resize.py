"""Resampling: Resize, Upsample and GridSample.

Shapes are static in a PopART session, so each resized axis is a fixed linear map built in numpy
when the graph is traced: nearest modes gather precomputed indices, linear and cubic modes
multiply by an [out, in] interpolation matrix. Both compile under XLA. Axes are resized one
after the other, which is exact because the ONNX interpolation is separable.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from openipu._src.popart.errors import popart_exception
from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import normalize_axes

_COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
    "tf_half_pixel_for_nn",  # Resize-11 only
)
# "pytorch" is PopART's own (willow/src/op/resize.cpp): floor(y / scale), computed in
# float32 whatever the coordinate mode; Resize-10's default there.
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "pytorch", "simple")


@dataclass(frozen=True)
class AxisResize:
    """How one axis is resampled: its sizes, scale, roi and the ONNX attributes."""

    in_size: int
    out_size: int
    scale: float
    mode: str
    coordinates: str
    nearest_mode: str = "round_prefer_floor"
    cubic_coeff_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    roi: tuple[float, float] = (0.0, 1.0)
    # PopART's own Resize (opsets 10 and 11): sizes worked out in float32.
    popart: bool = False

    def source_coordinates(self) -> np.ndarray:
        """x_original of each output index: where it samples the input (float64)."""
        y = np.arange(self.out_size, dtype=np.float64)
        size, scale = self.in_size, self.scale
        if self.mode == "nearest" and self.nearest_mode == "pytorch":
            # willow/src/popx/op/resizex.cpp, coordinateTransformation (float arithmetic).
            return (y.astype(np.float32) / np.float32(scale)).astype(np.float64)
        length = scale * size  # the "output width" of the spec: not rounded
        mode = self.coordinates
        if mode == "asymmetric":
            return y / scale
        if mode == "align_corners":
            return np.zeros_like(y) if length == 1 else y * (size - 1) / (length - 1)
        if mode == "pytorch_half_pixel" and self.popart:
            # willow/src/popx/op/resizex.cpp: 0 unless the float32 output width exceeds 1
            # (5 * 0.2f is 1 there, 1.0000000149 in float64).
            wide = np.float32(size) * np.float32(scale) > 1
            return (y + 0.5) / scale - 0.5 if wide else np.zeros_like(y)
        if mode == "pytorch_half_pixel":
            return np.full_like(y, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
        if mode == "half_pixel":
            return (y + 0.5) / scale - 0.5
        if mode == "tf_half_pixel_for_nn":
            return (y + 0.5) / scale
        if mode == "half_pixel_symmetric":
            # Centres the sampled region when the output size was rounded.
            offset = size / 2 * (1 - self.out_size / length)
            return offset + (y + 0.5) / scale - 0.5
        # tf_crop_and_resize: the output spans roi (normalized input coordinates).
        start, end = self.roi
        if length == 1:
            x = np.full_like(y, (end - start) * (size - 1) / 2)
        else:
            x = y * (end - start) * (size - 1) / (length - 1)
        return x + start * (size - 1)

    def extrapolated(self, x: np.ndarray) -> np.ndarray | None:
        """Output positions that take extrapolation_value (tf_crop_and_resize only)."""
        if self.coordinates != "tf_crop_and_resize":
            return None
        outside = (x < 0) | (x > self.in_size - 1)
        return outside if outside.any() else None

    def nearest_indices(self, x: np.ndarray) -> np.ndarray:
        mode = self.nearest_mode
        if mode == "simple":  # Resize-10 and Upsample (onnxruntime's rule)
            mode = "ceil" if self.scale < 1 else "floor"
        if mode == "round_prefer_floor":
            index = np.ceil(x - 0.5)
        elif mode == "round_prefer_ceil":
            index = np.floor(x + 0.5)
        elif mode in ("floor", "pytorch"):
            index = np.floor(x)
        else:
            index = np.ceil(x)
        return np.clip(index, 0, self.in_size - 1).astype(np.int64)

    def kernel(self, distance: np.ndarray) -> np.ndarray:
        d = np.abs(distance)
        if self.mode == "linear":
            return np.clip(1 - d, 0, None)
        a = self.cubic_coeff_a  # Keys' cubic convolution
        near = ((a + 2) * d - (a + 3)) * d * d + 1
        far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return np.where(d <= 1, near, np.where(d < 2, far, 0.0))

    def matrix(self, x: np.ndarray) -> np.ndarray:
        """The [out, in] interpolation matrix of linear or cubic mode.

        Neighbours are counted from x0 = ceil(x) - 1, so that the fraction r = x - x0 lies in
        (0, 1] as in the spec; with antialias (downsampling only) the kernel is stretched by
        1/scale and its weights normalized. Neighbours outside the input take the edge value,
        or weigh nothing with exclude_outside (the others renormalized).
        """
        reach = 1 if self.mode == "linear" else 2
        stretch = min(self.scale, 1.0) if self.antialias else 1.0
        start = math.floor(-reach / stretch) + 1
        offsets = np.arange(start, 2 - start)  # symmetric around 0.5
        x0 = np.ceil(x) - 1
        ratio = x - x0
        weights = self.kernel(stretch * (offsets[None, :] - ratio[:, None]))
        if self.antialias:
            weights = weights / weights.sum(axis=1, keepdims=True)
        neighbours = x0.astype(np.int64)[:, None] + offsets[None, :]
        if self.exclude_outside:
            weights = np.where((neighbours < 0) | (neighbours >= self.in_size), 0.0, weights)
            total = weights.sum(axis=1, keepdims=True)
            weights = weights / np.where(total == 0, 1.0, total)
        matrix = np.zeros((self.out_size, self.in_size))
        rows = np.broadcast_to(np.arange(self.out_size)[:, None], neighbours.shape)
        np.add.at(matrix, (rows, np.clip(neighbours, 0, self.in_size - 1)), weights)
        return matrix


def resize_axis(x: tf.Tensor, axis: int, plan: AxisResize, extrapolation_value: float) -> tf.Tensor:
    """``x`` resampled along ``axis``: float32 and float64 inputs are interpolated in their own
    type, narrower floats in float32 (integers are converted to float64 by the caller)."""
    coordinates = plan.source_coordinates()
    outside = plan.extrapolated(coordinates)
    if plan.mode == "nearest":
        y = tf.gather(x, plan.nearest_indices(coordinates), axis=axis)
    else:
        dtype = x.dtype if x.dtype in (tf.float32, tf.float64) else tf.float32
        matrix = tf.constant(plan.matrix(coordinates), dtype)
        y = tf.tensordot(tf.cast(x, dtype), matrix, axes=[[axis], [1]])  # axis moves last
        rank = x.shape.rank
        y = tf.cast(tf.transpose(y, [*range(axis), rank - 1, *range(axis, rank - 1)]), x.dtype)
    if outside is not None:
        shape = [1] * x.shape.rank
        shape[axis] = -1
        mask = tf.constant(outside.reshape(shape))
        y = tf.where(mask, tf.cast(extrapolation_value, y.dtype), y)
    return y


def _scaled_size(size: int, scale: float, opset_version: int) -> int:
    """floor(size * scale): in float32 up to Resize-11, as PopART (willow/src/op/resize.cpp:
    10 * 0.7f is 7, not 6.99...), in float64 after, as ONNX's reference."""
    if opset_version <= 11:
        return int(np.floor(np.float32(size) * np.float32(scale)))
    return int(math.floor(scale * size))


@register_op("Resize", since=(10, 11, 13, 18, 19))
class Resize(Op):
    # Read on Resize-10 too (willow/src/op/resize.cpp).
    popart_attributes = frozenset({"nearest_mode", "coordinate_transformation_mode"})

    def setup(self) -> None:
        attrs = self.attrs
        if attrs.mode not in ("nearest", "linear", "cubic"):
            self.bad_attribute("mode", f"must be nearest, linear or cubic, not {attrs.mode!r}")
        # Resize-10 has neither attribute in ONNX; PopART reads them there too.
        coordinates = attrs.get("coordinate_transformation_mode") or "half_pixel"
        allowed = _COORDINATE_MODES[:-1] if self.opset_version >= 13 else _COORDINATE_MODES
        if coordinates not in allowed:
            self.bad_attribute("coordinate_transformation_mode", f"is {coordinates!r}")
        nearest_mode = attrs.get("nearest_mode") or "pytorch"
        if nearest_mode not in _NEAREST_MODES[:-1]:
            self.bad_attribute("nearest_mode", f"is {nearest_mode!r}")
        if self.opset_version < 11:
            return
        if attrs.get("antialias") and attrs.mode == "nearest":
            self.bad_attribute("antialias", "applies to linear and cubic modes only")
        policy = attrs.get("keep_aspect_ratio_policy") or "stretch"
        if policy not in ("stretch", "not_larger", "not_smaller"):
            self.bad_attribute("keep_aspect_ratio_policy", f"is {policy!r}")

    def compute(self, x, roi=None, scales=None, sizes=None) -> tf.Tensor:
        if self.opset_version < 11:  # Resize-10: (X, scales), asymmetric coordinates
            scales, roi = roi, None
        rank = x.shape.rank
        dims = x.shape.as_list()
        if any(dim is None for dim in dims):
            raise self.error("the input's shape must be static")
        axes = normalize_axes(self.attrs.get("axes") or range(rank), rank)
        scale_values = self._static_floats(scales, "scales")
        size_values = self._static_floats(sizes, "sizes")
        if scale_values is not None and size_values is not None:
            # The original's message (willow/src/op/resize.cpp), word for word.
            raise popart_exception(
                "Resize op has inputs for `sizes` and `scales`. Only one of these tensors "
                "should be present. If `sizes` is needed, please pass an empty string as the "
                "name of `scales` in the input list ( resize([X, roi, '', sizes]) ). If the "
                "proto is not generated from the PopART Builder, please confirm that only one "
                "of the two tensors shall have data."
            )
        if scale_values is None and size_values is None:
            raise self.error("exactly one of 'scales' and 'sizes' must be given")
        given = scale_values if scale_values is not None else size_values
        assert given is not None
        if len(given) != len(axes):
            raise self.error(f"{len(given)} scales or sizes for {len(axes)} axes")
        if size_values is not None:
            out_sizes = [int(size) for size in size_values]
            factors = [size / dims[axis] for size, axis in zip(out_sizes, axes, strict=True)]
            policy = self.attrs.get("keep_aspect_ratio_policy") or "stretch"
            if policy != "stretch":
                factor = min(factors) if policy == "not_larger" else max(factors)
                factors = [factor] * len(axes)
                out_sizes = [int(factor * dims[axis] + 0.5) for axis in axes]  # half up
        else:
            factors = list(given)
            out_sizes = [
                _scaled_size(dims[axis], factor, self.opset_version)
                for factor, axis in zip(factors, axes, strict=True)
            ]
        if any(factor <= 0 for factor in factors):
            raise self.error(f"scales must be positive, not {factors}")
        rois = self._rois(roi, axes, rank)
        attrs = self.attrs
        dtype = x.dtype
        if dtype.is_integer and attrs.mode != "nearest":
            # Interpolated in float64 and rounded once at the end, as the spec's reference.
            x = tf.cast(x, tf.float64)
        for axis, factor, out_size, axis_roi in zip(axes, factors, out_sizes, rois, strict=True):
            plan = AxisResize(
                in_size=dims[axis],
                out_size=out_size,
                scale=float(factor),
                mode=attrs.mode,
                # PopART reads both attributes on Resize-10 too, its nearest mode "pytorch"
                # by default there (willow/src/op/resize.cpp; operators_test/resize_test_1.py).
                coordinates=attrs.get("coordinate_transformation_mode") or "half_pixel",
                nearest_mode=attrs.get("nearest_mode") or "pytorch",
                cubic_coeff_a=float(attrs.get("cubic_coeff_a", -0.75)),
                exclude_outside=bool(attrs.get("exclude_outside")),
                antialias=bool(attrs.get("antialias")),
                roi=axis_roi,
                popart=self.opset_version <= 11,
            )
            if factor == 1 and out_size == dims[axis] and axis_roi == (0.0, 1.0):
                continue  # the identity along this axis
            x = resize_axis(x, axis, plan, float(attrs.get("extrapolation_value") or 0.0))
        if x.dtype != dtype:
            x = tf.cast(tf.clip_by_value(tf.round(x), dtype.min, dtype.max), dtype)
        return x

    def _static_floats(self, value, what: str) -> list[float] | None:
        if value is None:
            return None
        array = np.asarray(self.static(value, what)).reshape(-1)
        return None if array.size == 0 else [float(item) for item in array]

    def _rois(self, roi, axes: list[int], rank: int) -> list[tuple[float, float]]:
        """(start, end) per resized axis; only tf_crop_and_resize reads the roi input."""
        if self.opset_version < 11 or self.attrs.coordinate_transformation_mode != (
            "tf_crop_and_resize"
        ):
            return [(0.0, 1.0)] * len(axes)
        values = self._static_floats(roi, "roi")
        if values is None:
            raise self.error("tf_crop_and_resize needs the 'roi' input")
        count = len(values) // 2
        if len(values) != 2 * count or count not in (len(axes), rank):
            raise self.error(f"roi has {len(values)} values for {len(axes)} axes")
        positions = range(len(axes)) if count == len(axes) else axes
        return [(values[i], values[i + count]) for i in positions]


@register_op("Upsample", since=(7, 9))
class Upsample(Op):
    """Resize-10's ancestor: asymmetric coordinates, scales as attribute (7) or input (9)."""

    def setup(self) -> None:
        if self.attrs.mode not in ("nearest", "linear"):
            self.bad_attribute("mode", f"must be nearest or linear, not {self.attrs.mode!r}")

    def compute(self, x, scales=None) -> tf.Tensor:
        values = self.attrs.get("scales") if scales is None else self.static(scales, "scales")
        factors = [float(item) for item in np.asarray(values).reshape(-1)]
        dims = x.shape.as_list()
        # PopART takes any scale, below 1 too: the output has floor(dim * scale) elements
        # (willow/src/op/upsample.cpp, setup), and UpsampleToResize makes the op a nearest
        # Resize of PopART's "pytorch" mode, element i reading floor(i / scale)
        # (willow/src/patterns/upsampletoresizepattern.cpp; operators_test/upsample_test.py).
        if len(factors) != len(dims) or any(factor <= 0 for factor in factors):
            raise self.error(f"needs one positive scale per axis, not {factors}")
        nearest = self.attrs.mode == "nearest"
        for axis, factor in enumerate(factors):
            if factor == 1:
                continue
            plan = AxisResize(
                in_size=dims[axis],
                out_size=int(math.floor(factor * dims[axis])),
                scale=factor,
                mode=self.attrs.mode,
                coordinates="half_pixel" if nearest else "asymmetric",
                nearest_mode="pytorch" if nearest else "simple",
                popart=nearest,
            )
            x = resize_axis(x, axis, plan, 0.0)
        return x


def _reflect(x: tf.Tensor, low: float, high: float) -> tf.Tensor:
    """x reflected at the borders low and high until it lies between them."""
    span = high - low
    if span <= 0:
        return tf.fill(tf.shape(x), tf.constant(low, x.dtype))
    below, above = x < low, x > high
    distance = tf.where(below, low - x, x - high)
    folds = tf.floor(distance / span)
    rest = distance - folds * span
    even = tf.equal(tf.math.floormod(folds, 2), 0)
    from_below = tf.where(even, low + rest, high - rest)
    from_above = tf.where(even, high - rest, low + rest)
    return tf.where(below, from_below, tf.where(above, from_above, x))


def _cubic_weights(fraction: tf.Tensor) -> list[tf.Tensor]:
    """Keys' cubic convolution (A = -0.75) at the neighbours -1, 0, 1, 2 of a fraction."""
    a = -0.75

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(fraction + 1), near(fraction), near(1 - fraction), far(2 - fraction)]


@register_op("GridSample", since=(16, 20, 22))
class GridSample(Op):
    """Samples X [N, C, *spatial] at grid [N, *out, D] (normalized, last component the last
    axis): nearest (half to even), linear or cubic, each neighbour read through padding_mode
    (zeros outside, border clamped, reflection mirrored at the borders)."""

    def setup(self) -> None:
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(self.attrs.mode, self.attrs.mode)
        if mode not in ("nearest", "linear", "cubic"):
            self.bad_attribute("mode", f"is {self.attrs.mode!r}")
        if self.attrs.padding_mode not in ("zeros", "border", "reflection"):
            self.bad_attribute("padding_mode", f"is {self.attrs.padding_mode!r}")
        self.mode = mode

    def compute(self, x: tf.Tensor, grid: tf.Tensor) -> tf.Tensor:
        dims = x.shape.as_list()[2:]
        rank = len(dims)
        if None in dims or grid.shape[-1] != rank:
            raise self.error(f"needs static spatial dims and a grid of {rank} components")
        align, padding = bool(self.attrs.align_corners), self.attrs.padding_mode
        dtype = x.dtype if x.dtype in (tf.float32, tf.float64) else tf.float32
        batch = tf.shape(grid)[0]
        out_shape = grid.shape.as_list()[1:-1]
        points = tf.reshape(tf.cast(grid, tf.float64), [batch, -1, rank])
        neighbours = []  # per axis: [(index [N, P] int32, weight [N, P])]
        for axis, size in enumerate(dims):
            g = points[:, :, rank - 1 - axis]
            position = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
            position = tf.cast(tf.cast(position, tf.float32), dtype)  # as the reference
            low, high = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
            if self.mode == "nearest":
                position = tf.round(position)  # half to even
            if padding == "border":  # clamped to the pixel centres once past the borders
                outside = (position < low) | (position > high)
                position = tf.where(outside, tf.clip_by_value(position, 0.0, size - 1.0), position)
            elif padding == "reflection":
                position = _reflect(position, low, high)
            if self.mode == "nearest":
                pairs = [(position, tf.ones_like(position))]
            else:
                base = tf.floor(position)
                fraction = position - base
                if self.mode == "linear":
                    pairs = [(base, 1 - fraction), (base + 1, fraction)]
                else:
                    weights = _cubic_weights(fraction)
                    pairs = [(base + k - 1, weights[k]) for k in range(4)]
            resolved = []
            for index, weight in pairs:
                if padding == "zeros":
                    weight = tf.where((index >= 0) & (index <= size - 1), weight, 0.0)
                    index = tf.clip_by_value(index, 0.0, size - 1.0)
                elif padding == "border":
                    index = tf.clip_by_value(index, 0.0, size - 1.0)
                else:
                    index = _reflect(index, low, high)
                resolved.append((tf.cast(index, tf.int32), weight))
            neighbours.append(resolved)
        features = tf.transpose(tf.cast(x, dtype), [0, *range(2, rank + 2), 1])  # channels last
        total = None
        for combination in itertools.product(*neighbours):
            indices = tf.stack([index for index, _ in combination], axis=-1)  # [N, P, D]
            weight = math.prod(weight for _, weight in combination)
            term = weight[..., None] * tf.gather_nd(features, indices, batch_dims=1)
            total = term if total is None else total + term
        y = tf.reshape(total, [batch, *out_shape, x.shape[1]])
        return tf.cast(tf.transpose(y, [0, rank + 1, *range(1, rank + 1)]), x.dtype)
