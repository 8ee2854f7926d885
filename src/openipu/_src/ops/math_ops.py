"""IPU maths operators (`ipu.math_ops`): segment sums and serialised matrix products."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.ops.int_argument import as_int

_SERIALIZATION_DIMENSIONS = ("a_columns", "a_rows_b_columns", "b_rows")


def segment_sum(data, segment_ids, num_segments, name=None) -> tf.Tensor:
    """Sums the rows of `data` that share a segment id; empty segments are 0.

    `segment_ids` must be sorted (an unsorted one gives an undefined result,
    as on the IPU) and `num_segments` must exceed its largest id.
    """
    # The original's checks and messages (tensorflow/python/ipu/ops/math_ops.py): its
    # multi-update needs static shapes.
    with tf.name_scope(name or "segment_sum"):
        data = tf.convert_to_tensor(data)
        segment_ids = tf.convert_to_tensor(segment_ids, dtype=tf.int32)
        if not data.shape.is_fully_defined():
            raise ValueError(f"Shape of data must be fully defined (got {data.shape})")
        if not segment_ids.shape.is_fully_defined():
            raise ValueError(
                f"Shape of segment_ids must be fully defined (got {segment_ids.shape})"
            )
        data_shape = data.shape.with_rank_at_least(1)
        segment_ids_shape = segment_ids.shape.with_rank(1)
        num_segments = as_int(num_segments, "segment_sum: num_segments")
        if num_segments <= 0:
            raise ValueError(f"num_segments must be greater than 0; got {num_segments}")
        if data_shape[0] != segment_ids_shape[0]:
            raise ValueError(
                f"segment_ids (shape {segment_ids_shape}) must have same length as axis 0 of "
                f"data (shape {data_shape})"
            )
        return tf.math.unsorted_segment_sum(data, segment_ids, num_segments)


def serialized_matmul(
    a,
    b,
    serialization_factor: int,
    serialization_dimension: str,
    transpose_a: bool = False,
    transpose_b: bool = False,
    name=None,
) -> tf.Tensor:
    """`a @ b` computed as `serialization_factor` smaller products along one dimension.

    `a_columns` splits m (the rows of the result), `a_rows_b_columns` splits k
    (partial products are summed), `b_rows` splits n (the columns of the
    result). Differentiation goes through the same slices, so the gradient is
    serialised too.
    """
    # The original's checks, in its order and with its words (ops/math_ops.py).
    # It takes int(serialization_factor): 2.0 and "2" work as 2.
    serialization_factor = as_int(serialization_factor, "serialized_matmul: serialization_factor")
    if serialization_factor < 1:
        raise ValueError(
            f"serialization_factor has to be at least 1, but was {serialization_factor}. "
            "(serialized_matmul)"
        )
    with tf.name_scope(name or "serialized_matmul"):
        a = tf.convert_to_tensor(a)
        b = tf.convert_to_tensor(b, dtype=a.dtype)
        for operand, label in ((a, "a"), (b, "b")):
            if operand.shape.rank is None or operand.shape.rank < 2:
                raise ValueError(
                    f"Expected tensor '{label}' to have a minimum rank of 2 "
                    f"(serialized_matmul: got shape {operand.shape})"
                )
        if serialization_dimension not in _SERIALIZATION_DIMENSIONS:
            raise ValueError(
                f"Invalid serialization_dimension={serialization_dimension}, expected one of: "
                "'a_columns', 'a_rows_b_columns', 'b_rows'."
            )
        if transpose_a:
            a = tf.linalg.matrix_transpose(a)
        if transpose_b:
            b = tf.linalg.matrix_transpose(b)
        if not a.shape[-1:].is_compatible_with(b.shape[-2:-1]):
            raise ValueError(
                f"Expected the number of columns in 'a' ({a.shape[-1]}) to match the number of "
                f"rows in 'b' ({b.shape[-2]}). (serialized_matmul: a is {a.shape} and b is "
                f"{b.shape} after the transpositions)"
            )
        if serialization_dimension == "a_columns":
            slices = _split(a, -2, serialization_factor, "columns dimension of 'a'")
            return tf.concat([tf.matmul(part, b) for part in slices], axis=-2)
        if serialization_dimension == "b_rows":
            slices = _split(b, -1, serialization_factor, "rows dimension of 'b'")
            return tf.concat([tf.matmul(a, part) for part in slices], axis=-1)
        a_slices = _split(a, -1, serialization_factor, "rows dimension of 'a'")
        b_slices = _split(b, -2, serialization_factor, "rows dimension of 'a'")
        return tf.add_n([tf.matmul(x, y) for x, y in zip(a_slices, b_slices, strict=True)])


def _split(value: tf.Tensor, axis: int, factor: int, dimension: str) -> list[tf.Tensor]:
    size = value.shape[axis]
    if size is None:
        raise ValueError(f"serialized_matmul: the {dimension} must be known to serialise it")
    if size % factor:
        # The original's words, which name m "the columns dimension of 'a'", k "the rows
        # dimension of 'a'" and n "the rows dimension of 'b'".
        raise ValueError(
            f"Expected 'serialization_factor' ({factor}) to divide the {dimension} ({size})."
        )
    return tf.split(value, factor, axis=axis)
