"""A matmul split into `serialization_factor` smaller matmuls, forward and backward.

On the IPU this trades cycles for memory; on the host the numbers are those of
one matmul (up to the rounding of the partial sums when `k` is split).
"""

from __future__ import annotations

import tensorflow as tf

INPUT_COLUMNS = "input_columns"
INPUT_ROWS_KERNEL_COLUMNS = "input_rows_kernel_columns"
KERNEL_ROWS = "kernel_rows"
SERIALIZATION_DIMENSIONS = (INPUT_COLUMNS, INPUT_ROWS_KERNEL_COLUMNS, KERNEL_ROWS)


def _split_matmul_over_rows(a: tf.Tensor, b: tf.Tensor, factor: int) -> tf.Tensor:
    """`a @ b` computed in `factor` slices of the rows (axis -2) of `a`."""
    slices = tf.split(a, factor, axis=-2)
    return tf.concat([tf.matmul(part, b) for part in slices], axis=-2)


def _split_matmul_over_columns(a: tf.Tensor, b: tf.Tensor, factor: int) -> tf.Tensor:
    """`a @ b` computed in `factor` slices of the columns (axis -1) of `b`."""
    slices = tf.split(b, factor, axis=-1)
    return tf.concat([tf.matmul(a, part) for part in slices], axis=-1)


def _split_matmul_over_inner(a: tf.Tensor, b: tf.Tensor, factor: int) -> tf.Tensor:
    """`a @ b` as the sum of `factor` partial products over the shared dimension."""
    a_slices = tf.split(a, factor, axis=-1)
    b_slices = tf.split(b, factor, axis=-2)
    return tf.add_n([tf.matmul(x, y) for x, y in zip(a_slices, b_slices, strict=True)])


def _flatten_leading(x: tf.Tensor) -> tf.Tensor:
    """Collapses all but the last axis, so a batched input meets the kernel as one matrix."""
    return tf.reshape(x, [-1, tf.shape(x)[-1]])


def serialized_matmul(
    inputs: tf.Tensor, kernel: tf.Tensor, factor: int, dimension: str
) -> tf.Tensor:
    """`inputs @ kernel` for inputs `[..., m, k]` and kernel `[k, n]`, serialized along `dimension`.

    The gradients are serialized along the same dimension of the problem.
    """

    @tf.custom_gradient
    def matmul(x: tf.Tensor, w: tf.Tensor):
        if dimension == INPUT_COLUMNS:
            result = _split_matmul_over_rows(x, w, factor)
        elif dimension == INPUT_ROWS_KERNEL_COLUMNS:
            result = _split_matmul_over_inner(x, w, factor)
        else:
            result = _split_matmul_over_columns(x, w, factor)

        def grad(upstream: tf.Tensor):
            w_t = tf.transpose(w)
            if dimension == INPUT_COLUMNS:
                # Rows of x map to rows of the output: slice both the same way, and
                # accumulate the kernel gradient slice by slice.
                grad_x = _split_matmul_over_rows(upstream, w_t, factor)
                x_slices = tf.split(x, factor, axis=-2)
                upstream_slices = tf.split(upstream, factor, axis=-2)
                grad_w = tf.add_n(
                    [
                        tf.matmul(_flatten_leading(xs), _flatten_leading(us), transpose_a=True)
                        for xs, us in zip(x_slices, upstream_slices, strict=True)
                    ]
                )
            elif dimension == INPUT_ROWS_KERNEL_COLUMNS:
                # Splitting k splits the columns of grad_x and the rows of grad_w.
                grad_x = _split_matmul_over_columns(upstream, w_t, factor)
                grad_w = _split_matmul_over_rows(
                    tf.transpose(_flatten_leading(x)), _flatten_leading(upstream), factor
                )
            else:
                # Splitting n is a sum over n for grad_x and splits the columns of grad_w.
                grad_x = _split_matmul_over_inner(upstream, w_t, factor)
                grad_w = _split_matmul_over_columns(
                    tf.transpose(_flatten_leading(x)), _flatten_leading(upstream), factor
                )
            return grad_x, grad_w

        return result, grad

    return matmul(inputs, kernel)
