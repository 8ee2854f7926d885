"""PopLibs sequence slicing (`ipu.slicing_ops`): copy runs of rows between tensors.

Every operation is "row `r` of the result comes from row `src_row[r]` of the
source, or stays as it was": the row map is built with dense comparisons, so
the shapes are static and the ops compile under XLA and differentiate through
a gather.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.int_like import as_attr_int


def sequence_slice(dst, src, num_elems, src_offsets, dst_offsets, zero_unused: bool) -> tf.Tensor:
    """`dst[d_i : d_i + n_i] = src[s_i : s_i + n_i]` for every slice i.

    With `zero_unused`, the rows of `dst` no slice writes to become zero.
    """
    with tf.name_scope("sequence_slice"):
        dst, src = _checked_tensors(dst, src, "sequence_slice")
        counts, offsets = _slice_vectors(
            "sequence_slice", num_elems, src_offsets=src_offsets, dst_offsets=dst_offsets
        )
        return _copy_rows(dst, src, counts, offsets[0], offsets[1], zero_unused)


def sequence_slice_pack(dst, src, num_elems, dst_offsets, zero_unused: bool) -> tf.Tensor:
    """Writes consecutive runs of `src` (lengths `num_elems`) at `dst_offsets` of `dst`."""
    with tf.name_scope("sequence_slice_pack"):
        dst, src = _checked_tensors(dst, src, "sequence_slice_pack")
        counts, (dst_starts,) = _slice_vectors(
            "sequence_slice_pack", num_elems, dst_offsets=dst_offsets
        )
        src_starts = tf.cumsum(counts, exclusive=True)
        return _copy_rows(dst, src, counts, src_starts, dst_starts, zero_unused)


def sequence_slice_unpack(src, num_elems, src_offsets, total_elements: int) -> tf.Tensor:
    """Gathers the runs `src[s_i : s_i + n_i]` one after the other into `total_elements` rows."""
    with tf.name_scope("sequence_slice_unpack"):
        src = tf.convert_to_tensor(src)
        _check_rank(src, "src", "sequence_slice_unpack")
        # An op attribute in the original (IpuSequenceSliceUnpack): a numpy int or any number
        # int() takes is accepted, a str is a TypeError.
        total_elements = as_attr_int(total_elements, "sequence_slice_unpack: total_elements")
        if total_elements < 0:
            raise ValueError(
                f"sequence_slice_unpack: total_elements must be >= 0, got {total_elements}"
            )
        counts, (src_starts,) = _slice_vectors(
            "sequence_slice_unpack", num_elems, src_offsets=src_offsets
        )
        dst = tf.zeros(tf.concat([[total_elements], tf.shape(src)[1:]], 0), src.dtype)
        dst_starts = tf.cumsum(counts, exclusive=True)
        return _copy_rows(dst, src, counts, src_starts, dst_starts, zero_unused=True)


def _check_rank(value: tf.Tensor, label: str, what: str) -> None:
    if value.shape.rank is None or value.shape.rank < 2:
        raise ValueError(f"{what}: {label} must have rank >= 2, got shape {value.shape}")


def _checked_tensors(dst, src, what: str) -> tuple[tf.Tensor, tf.Tensor]:
    dst = tf.convert_to_tensor(dst)
    if isinstance(src, tf.Tensor) and src.dtype != dst.dtype:
        # dst and src share the op's type attribute: TensorFlow's op builder refuses a tensor
        # of another type with this TypeError (values of other kinds are converted).
        raise TypeError(
            f"Input 'src' of 'SequenceSlice' Op has type {src.dtype.name} that does not match "
            f"type {dst.dtype.name} of argument 'dst'. ({what})"
        )
    src = tf.convert_to_tensor(src, dtype=dst.dtype)
    _check_rank(dst, "dst", what)
    _check_rank(src, "src", what)
    if not dst.shape[1:].is_compatible_with(src.shape[1:]):
        # The original's words (tensorflow/python/ipu/ops/slicing_ops.py).
        raise ValueError(
            f"src and dst inner shapes must match. ({what}: dst shape {dst.shape}, src shape "
            f"{src.shape})"
        )
    return dst, src


def _slice_vectors(
    what: str, num_elems, **offset_lists: object
) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """num_elems and the offsets as int32 vectors, one entry per slice (at least one)."""
    named = {"num_elems": tf.convert_to_tensor(num_elems)}
    named.update({label: tf.convert_to_tensor(values) for label, values in offset_lists.items()})
    slices = named["num_elems"].shape[:1]
    if (
        any(vector.shape.rank != 1 for vector in named.values())
        or slices[0] == 0
        or any(not vector.shape.is_compatible_with(slices) for vector in named.values())
    ):
        labels = list(named)
        listed = " and ".join([", ".join(labels[:-1]), labels[-1]])
        # The original's words (tensorflow/python/ipu/ops/slicing_ops.py).
        raise ValueError(
            f"{listed} must have matching, nonzero shapes of rank 1. ({what}: got shapes "
            f"{', '.join(f'{label} {v.shape}' for label, v in named.items())})"
        )
    for label, vector in named.items():
        if not vector.dtype.is_integer:
            raise TypeError(f"{what}: {label} must be integers, got dtype {vector.dtype.name}")
    vectors = [tf.cast(vector, tf.int32) for vector in named.values()]
    return vectors[0], vectors[1:]


def _copy_rows(dst, src, counts, src_starts, dst_starts, zero_unused: bool) -> tf.Tensor:
    rows = tf.range(tf.shape(dst)[0])[:, None]
    written = (rows >= dst_starts[None, :]) & (rows < (dst_starts + counts)[None, :])
    # Where slices overlap in dst, the later slice wins.
    slice_index = (
        tf.shape(counts)[0]
        - 1
        - tf.argmax(tf.reverse(tf.cast(written, tf.int32), axis=[1]), axis=1, output_type=tf.int32)
    )
    is_written = tf.reduce_any(written, axis=1)
    start_in_src = tf.gather(src_starts - dst_starts, slice_index)
    src_rows = tf.clip_by_value(rows[:, 0] + start_in_src, 0, tf.shape(src)[0] - 1)
    copied = tf.gather(src, src_rows)
    kept = tf.zeros_like(dst) if zero_unused else dst
    mask = tf.reshape(
        is_written, tf.concat([tf.shape(is_written), tf.ones_like(tf.shape(dst)[1:])], 0)
    )
    return tf.where(mask, copied, kept)
