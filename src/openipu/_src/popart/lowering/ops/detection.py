"""Object detection: RoiAlign, MaxRoiPool, NonMaxSuppression.

RoiAlign and MaxRoiPool gather and reduce with fixed sample grids, so they compile under XLA.
NonMaxSuppression's output length depends on the scores; it runs in numpy, outside XLA.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.op import Op, static_value
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import to_numpy_function


def _gather_2d(features: tf.Tensor, rows: tf.Tensor, columns: tf.Tensor) -> tf.Tensor:
    """features [R, H, W, C] at rows [R, Y] x columns [R, X] -> [R, Y, X, C]."""
    picked = tf.gather(features, rows, axis=1, batch_dims=1)
    return tf.gather(picked, columns, axis=2, batch_dims=1)


def _bilinear_corners(position: tf.Tensor, size: int) -> tuple[tf.Tensor, ...]:
    """(low index, high index, weight of low, weight of high) of sample positions along an
    axis of ``size``, as RoiAlign clamps them: below 0 reads 0, at or past the last pixel reads
    the last pixel."""
    position = tf.maximum(position, 0.0)
    low = tf.floor(position)
    at_end = low >= size - 1
    low = tf.where(at_end, tf.cast(size - 1, position.dtype), low)
    position = tf.where(at_end, low, position)
    high = tf.where(at_end, low, low + 1)
    fraction = position - low
    return tf.cast(low, tf.int32), tf.cast(high, tf.int32), 1.0 - fraction, fraction


@register_op("RoiAlign", since=(10, 16, 22))
class RoiAlign(Op):
    """Each output bin averages (or maxes) a grid of bilinear samples of its region.

    The grid has ``sampling_ratio`` samples a side, or ceil(region size / bins) when it is 0:
    that adaptive grid differs per region, so it needs constant rois (the grid is then as large
    as the largest region's, the extra samples masked out)."""

    def setup(self) -> None:
        if self.attrs.mode not in ("avg", "max"):
            self.bad_attribute("mode", f"must be avg or max, not {self.attrs.mode!r}")
        coordinates = self.attrs.get("coordinate_transformation_mode") or "output_half_pixel"
        if coordinates not in ("half_pixel", "output_half_pixel"):
            self.bad_attribute("coordinate_transformation_mode", f"is {coordinates!r}")
        # RoiAlign-10 has no attribute and behaves as output_half_pixel.
        self.half_pixel = coordinates == "half_pixel"

    def compute(self, x: tf.Tensor, rois: tf.Tensor, batch_indices: tf.Tensor) -> tf.Tensor:
        _, _, height, width = x.shape.as_list()
        bins_h, bins_w = self.attrs.output_height, self.attrs.output_width
        boxes = tf.cast(rois, tf.float64) * self.attrs.spatial_scale
        if self.half_pixel:
            boxes = boxes - 0.5
        start_w, start_h, end_w, end_h = tf.unstack(boxes, axis=1)
        size_h, size_w = end_h - start_h, end_w - start_w
        if not self.half_pixel:  # malformed regions become 1x1
            size_h, size_w = tf.maximum(size_h, 1.0), tf.maximum(size_w, 1.0)
        grid_h, grid_w, largest_h, largest_w = self._grids(rois, bins_h, bins_w)
        # Sample positions [R, bins * grid] along each axis, and which are real samples.
        y, real_y = self._samples(start_h, size_h / bins_h, grid_h, largest_h, bins_h)
        x_pos, real_x = self._samples(start_w, size_w / bins_w, grid_w, largest_w, bins_w)
        inside = ((y >= -1.0) & (y <= height))[:, :, None] & ((x_pos >= -1.0) & (x_pos <= width))[
            :, None, :
        ]
        y_low, y_high, y_low_weight, y_high_weight = _bilinear_corners(y, height)
        x_low, x_high, x_low_weight, x_high_weight = _bilinear_corners(x_pos, width)
        features = tf.transpose(tf.gather(x, tf.cast(batch_indices, tf.int32)), [0, 2, 3, 1])
        dtype = x.dtype
        terms = []
        for rows, row_weight in ((y_low, y_low_weight), (y_high, y_high_weight)):
            for columns, column_weight in ((x_low, x_low_weight), (x_high, x_high_weight)):
                # Samples outside the map (by more than a pixel) weigh nothing.
                weight = tf.where(inside, row_weight[:, :, None] * column_weight[:, None, :], 0.0)
                values = _gather_2d(features, rows, columns)
                terms.append(tf.cast(weight, dtype)[..., None] * values)  # [R, Y, X, C]
        count = tf.shape(rois)[0]
        channels = x.shape[1]
        shape = [count, bins_h, largest_h, bins_w, largest_w, channels]
        real = tf.reshape(real_y[:, :, None] & real_x[:, None, :], [count, *shape[1:5], 1])
        if self.attrs.mode == "avg":
            total = tf.reshape(tf.add_n(terms), shape)
            total = tf.reduce_sum(tf.where(real, total, tf.zeros_like(total)), axis=[2, 4])
            samples = tf.cast(tf.maximum(grid_h * grid_w, 1), dtype)
            pooled = total / tf.reshape(samples, [-1, 1, 1, 1])
        else:
            # As the spec's reference: the largest of each sample's four weighted corners.
            best = tf.reshape(tf.reduce_max(tf.stack(terms), axis=0), shape)
            pooled = tf.reduce_max(tf.where(real, best, tf.fill(tf.shape(best), -np.inf)), [2, 4])
            pooled = tf.cast(pooled, dtype)
        return tf.transpose(pooled, [0, 3, 1, 2])

    def _grids(self, rois: tf.Tensor, bins_h: int, bins_w: int):
        """Samples per bin side, per region ([R] tensors), and the static largest of each."""
        ratio = self.attrs.sampling_ratio
        if ratio > 0:
            return tf.constant(ratio, tf.float64), tf.constant(ratio, tf.float64), ratio, ratio
        boxes = static_value(rois)
        if boxes is None:
            raise self.error(
                "sampling_ratio 0 (an adaptive grid per region) needs constant rois: give a "
                "sampling_ratio or make rois a constant"
            )
        boxes = np.asarray(boxes, np.float64) * self.attrs.spatial_scale
        size_w, size_h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        if not self.half_pixel:
            size_h, size_w = np.maximum(size_h, 1.0), np.maximum(size_w, 1.0)
        grid_h = np.ceil(size_h / bins_h).astype(np.int64)
        grid_w = np.ceil(size_w / bins_w).astype(np.int64)
        largest_h = max(int(grid_h.max(initial=1)), 1)
        largest_w = max(int(grid_w.max(initial=1)), 1)
        return (
            tf.constant(grid_h, tf.float64),
            tf.constant(grid_w, tf.float64),
            largest_h,
            largest_w,
        )

    @staticmethod
    def _samples(start, bin_size, grid, largest: int, bins: int) -> tuple[tf.Tensor, tf.Tensor]:
        """Positions [R, bins * largest] of the samples: bin b's sample i sits at
        start + b * bin + (i + 0.5) * bin / grid; the ones with i >= grid are not real."""
        grid = tf.broadcast_to(tf.reshape(grid, [-1, 1, 1]), [tf.shape(start)[0], 1, 1])
        index = tf.range(largest, dtype=tf.float64)[None, None, :]
        bin_index = tf.range(bins, dtype=tf.float64)[None, :, None]
        step = bin_size[:, None, None]
        positions = start[:, None, None] + bin_index * step + (index + 0.5) * step / grid
        real = tf.broadcast_to(index < grid, tf.shape(positions))
        rows = tf.shape(start)[0]
        return tf.reshape(positions, [rows, -1]), tf.reshape(real, [rows, -1])


@register_op("MaxRoiPool", since=1)
class MaxRoiPool(Op):
    """Caffe's ROI pooling: each region (batch index, x1, y1, x2, y2, scaled and rounded to
    pixels) is cut into pooled_shape bins of whole pixels, each the maximum of its pixels (0
    for an empty bin)."""

    def compute(self, x: tf.Tensor, rois: tf.Tensor) -> tf.Tensor:
        _, _, height, width = x.shape.as_list()
        bins_h, bins_w = (int(size) for size in self.attrs.pooled_shape)
        rois = tf.cast(rois, tf.float64)
        scaled = rois[:, 1:] * self.attrs.spatial_scale
        # std::round: halves away from zero
        start_w, start_h, end_w, end_h = tf.unstack(
            tf.sign(scaled) * tf.floor(tf.abs(scaled) + 0.5), axis=1
        )
        rows = self._bin_masks(start_h, end_h, bins_h, height)  # [R, bins_h, H]
        columns = self._bin_masks(start_w, end_w, bins_w, width)  # [R, bins_w, W]
        features = tf.gather(x, tf.cast(rois[:, 0], tf.int32))  # [R, C, H, W]
        lowest = tf.constant(-np.inf if x.dtype.is_floating else x.dtype.min, x.dtype)
        # The maximum over a rectangle: over its columns, then over its rows.
        by_column = tf.where(
            columns[:, None, None, :, :], features[:, :, :, None, :], lowest
        )  # [R, C, H, bins_w, W]
        by_column = tf.reduce_max(by_column, axis=-1)  # [R, C, H, bins_w]
        by_row = tf.where(
            rows[:, None, :, :, None], by_column[:, :, None, :, :], lowest
        )  # [R, C, bins_h, H, bins_w]
        pooled = tf.reduce_max(by_row, axis=3)
        empty = tf.logical_not(
            tf.reduce_any(rows, -1)[:, :, None] & tf.reduce_any(columns, -1)[:, None, :]
        )
        return tf.where(empty[:, None], tf.zeros_like(pooled), pooled)

    @staticmethod
    def _bin_masks(start: tf.Tensor, end: tf.Tensor, bins: int, size: int) -> tf.Tensor:
        """[R, bins, size]: the pixels of each bin: [floor(b * s), ceil((b + 1) * s)) from
        the region's start, s = region length / bins, clipped to the map."""
        length = tf.maximum(end - start + 1, 1.0)
        bin_size = (length / bins)[:, None]
        index = tf.range(bins, dtype=tf.float64)[None, :]
        low = tf.clip_by_value(tf.floor(index * bin_size) + start[:, None], 0, size)
        high = tf.clip_by_value(tf.math.ceil((index + 1) * bin_size) + start[:, None], 0, size)
        pixel = tf.range(size, dtype=tf.float64)[None, None, :]
        return (pixel >= low[..., None]) & (pixel < high[..., None])


def _suppress(
    boxes: np.ndarray,
    scores: np.ndarray,
    max_boxes: int,
    iou_threshold: float,
    score_threshold: float | None,
    center_point_box: int,
) -> np.ndarray:
    """Greedy non-maximum suppression per batch and class: [selected, 3] (batch, class, box)."""
    if center_point_box:  # [x_center, y_center, width, height]
        centre, half = boxes[..., :2], boxes[..., 2:] / 2
        low, high = centre - half, centre + half
    else:  # [y1, x1, y2, x2], either diagonal
        low = np.minimum(boxes[..., :2], boxes[..., 2:])
        high = np.maximum(boxes[..., :2], boxes[..., 2:])
    areas = np.prod(high - low, axis=-1)
    selected: list[tuple[int, int, int]] = []
    for batch in range(scores.shape[0]):
        for klass in range(scores.shape[1]):
            class_scores = scores[batch, klass]
            candidates = np.arange(class_scores.size)
            if score_threshold is not None:
                candidates = candidates[class_scores > score_threshold]
            # Highest score first; equal scores in box order.
            order = candidates[np.argsort(-class_scores[candidates], kind="stable")]
            kept: list[int] = []
            for box in order:
                if len(kept) >= max_boxes:
                    break
                if kept:
                    others = np.array(kept)
                    top = np.maximum(low[batch, others], low[batch, box])
                    bottom = np.minimum(high[batch, others], high[batch, box])
                    overlap = np.prod(np.clip(bottom - top, 0, None), axis=-1)
                    union = areas[batch, others] + areas[batch, box] - overlap
                    valid = (areas[batch, others] > 0) & (areas[batch, box] > 0)
                    iou = np.where(valid & (union > 0), overlap / np.where(union > 0, union, 1), 0)
                    if np.any(iou > iou_threshold):
                        continue
                kept.append(int(box))
            selected.extend((batch, klass, box) for box in kept)
    return np.array(selected, np.int64).reshape(-1, 3)


@register_op("NonMaxSuppression", since=(10, 11))
class NonMaxSuppression(Op):
    compilable = False  # the number of selected boxes depends on the scores

    def setup(self) -> None:
        if self.attrs.center_point_box not in (0, 1):
            self.bad_attribute("center_point_box", f"must be 0 or 1: {self.attrs.center_point_box}")

    def compute(
        self,
        boxes: tf.Tensor,
        scores: tf.Tensor,
        max_output_boxes_per_class: tf.Tensor | None = None,
        iou_threshold: tf.Tensor | None = None,
        score_threshold: tf.Tensor | None = None,
    ) -> tf.Tensor:
        center_point_box = self.attrs.center_point_box
        has_threshold = score_threshold is not None
        arguments = [
            boxes,
            scores,
            tf.zeros([], tf.int64)
            if max_output_boxes_per_class is None
            else max_output_boxes_per_class,
            tf.zeros([], tf.float32) if iou_threshold is None else iou_threshold,
            tf.zeros([], tf.float32) if score_threshold is None else score_threshold,
        ]

        def suppress(boxes, scores, max_boxes, iou, score):
            limit = int(np.asarray(max_boxes).reshape(-1)[0]) if np.size(max_boxes) else 0
            return _suppress(
                np.asarray(boxes, np.float64),
                np.asarray(scores, np.float64),
                max(limit, 0),
                float(np.asarray(iou).reshape(-1)[0]) if np.size(iou) else 0.0,
                float(np.asarray(score).reshape(-1)[0])
                if has_threshold and np.size(score)
                else None,
                center_point_box,
            )

        (selected,) = to_numpy_function(suppress, arguments, [tf.int64])
        selected.set_shape([None, 3])
        return selected
