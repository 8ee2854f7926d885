"""Helpers shared by the host-side dataset tools (benchmarks, exports)."""

from __future__ import annotations

import operator

import tensorflow as tf


def check_positive_count(value, name: str) -> int:
    """`value` as an int, or an error saying it must be a whole number >= 1."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    try:
        count = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}") from None
    if count < 1:
        raise ValueError(f"{name} must be at least 1, got {count}")
    return count


def apply_performance_options(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """The dataset with the tf.data optimisations that speed up a host input pipeline.

    Only order-preserving optimisations, so exported files and benchmarks see
    the elements in the order the dataset defines.
    """
    options = tf.data.Options()
    options.autotune.enabled = True
    options.experimental_optimization.map_parallelization = True
    options.experimental_optimization.parallel_batch = True
    return dataset.with_options(options)


def dataset_graph(dataset: tf.data.Dataset) -> tf.Graph | None:
    """The TF1 graph a dataset was built in, or None for an eager dataset."""
    # Eager tensors have no `graph` attribute (accessing it raises).
    return getattr(dataset._variant_tensor, "graph", None)
