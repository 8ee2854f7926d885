"""Benchmarks of host input pipelines: `dataset_benchmark` and `infeed_benchmark`.

The benchmark pulls elements through the pipeline as an infeed would, reads
each one back to host memory and (with `do_memcpy`) copies it into a
preallocated buffer, standing in for the copy into a Poplar stream buffer.
It reports, per epoch, a JSON object with `elements_processed`,
`total_bytes_processed`, `time_elapsed` (s), `elements_per_second` and
`bandwidth` (GB/s, 1 GB = 1e9 bytes), in a list under the key `"epochs"`.
"""

from __future__ import annotations

import json
import time

import numpy as np
import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.data.host_pipeline import (
    apply_performance_options,
    check_positive_count,
    dataset_graph,
)
from openipu._src.feeds.infeed import IPUInfeedQueue
from openipu._src.integration import dataset_iterators

_BYTES_PER_GB = 1e9
# An epoch faster than the clock can resolve still gets finite rates (JSON has no inf).
_MIN_EPOCH_SECONDS = 1e-9


class BenchmarkStats(str):
    """The JSON statistics of a benchmark.

    A `str`, so `json.loads(stats)` works as the documentation says. The
    original returned a string tensor of shape [1]; `numpy()` gives the same
    value, so programs written as `json.loads(stats.numpy()[0])` work too.
    """

    def numpy(self) -> np.ndarray:
        return np.array([self.encode()], dtype=object)


def dataset_benchmark(
    dataset: tf.data.Dataset,
    number_of_epochs: int,
    elements_per_epochs: int,
    print_stats: bool = True,
    apply_options: bool = True,
    do_memcpy: bool = True,
):
    """Benchmarks a `tf.data.Dataset` on the host.

    One iterator runs through all the epochs, like an infeed streaming a
    repeated dataset; a dataset with fewer than
    `number_of_epochs * elements_per_epochs` elements raises OutOfRangeError.

    Returns the JSON statistics: a `BenchmarkStats` string for an eager
    dataset; for a dataset built in a TF1 graph, a string tensor of shape [1]
    that runs the benchmark when a session evaluates it (as the original op).

    Raises:
      TypeError: `dataset` is not a `tf.data.Dataset`.
      ValueError: `number_of_epochs` or `elements_per_epochs` is less than 1.
      InvalidArgumentError: an element has a dimension of size 0.
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"dataset_benchmark needs a tf.data.Dataset, got {type(dataset).__name__}")
    epochs = check_positive_count(number_of_epochs, "number_of_epochs")
    elements = check_positive_count(elements_per_epochs, "elements_per_epochs")
    if apply_options:
        dataset = apply_performance_options(dataset)
    return _benchmark(dataset, epochs, elements, bool(print_stats), bool(do_memcpy))


def infeed_benchmark(
    infeed_queue: IPUInfeedQueue,
    number_of_epochs: int,
    elements_per_epochs: int,
    print_stats: bool = True,
    do_memcpy: bool = True,
):
    """Benchmarks the dataset of an `IPUInfeedQueue`, as `dataset_benchmark` does.

    The queue itself is left untouched: the benchmark reads the queue's
    dataset (with its prefetch) through an iterator of its own.

    Raises:
      TypeError: `infeed_queue` is not an `IPUInfeedQueue`.
      ValueError: `number_of_epochs` or `elements_per_epochs` is less than 1.
      InvalidArgumentError: an element has a dimension of size 0.
    """
    if not isinstance(infeed_queue, IPUInfeedQueue):
        raise TypeError(
            f"infeed_benchmark needs an ipu_infeed_queue.IPUInfeedQueue, got "
            f"{type(infeed_queue).__name__}"
        )
    epochs = check_positive_count(number_of_epochs, "number_of_epochs")
    elements = check_positive_count(elements_per_epochs, "elements_per_epochs")
    return _benchmark(infeed_queue._dataset, epochs, elements, bool(print_stats), bool(do_memcpy))


def _benchmark(
    dataset: tf.data.Dataset, epochs: int, elements: int, print_stats: bool, do_memcpy: bool
):
    graph = dataset_graph(dataset)
    if graph is None:
        return _run(dataset, epochs, elements, print_stats, do_memcpy)

    element_spec = dataset.element_spec

    def run_from_variant(variant: tf.Tensor) -> tf.Tensor:
        same_dataset = tf.data.experimental.from_variant(variant, element_spec)
        return tf.constant(str(_run(same_dataset, epochs, elements, print_stats, do_memcpy)))

    # The original's op fails when the session runs it (its kernel checks the shapes when
    # made): so does an assertion (the error a py_function raises would lose its type).
    empty = _empty_dimension_of(element_spec)
    with graph.as_default(), tf.device("/device:CPU:0"):
        checks = [] if empty is None else [tf.debugging.Assert(False, [empty.message])]
        with tf.control_dependencies(checks):
            stats = tf.py_function(
                run_from_variant, [dataset._variant_tensor], tf.string, name="dataset_benchmark"
            )
        return tf.reshape(stats, [1])


def _run(
    dataset: tf.data.Dataset, epochs: int, elements: int, print_stats: bool, do_memcpy: bool
) -> BenchmarkStats:
    _check_no_empty_dimension(dataset.element_spec)
    with tf.device("/device:CPU:0"):
        # Read on the host: the stock iterator even in an IPUStrategy scope.
        iterator = dataset_iterators.stock_iterator(dataset)
    host_buffers = _HostBuffers()
    epoch_stats = []
    for epoch in range(epochs):
        total_bytes = 0
        start = time.perf_counter()
        for index in range(elements):
            try:
                element = next(iterator)
            except StopIteration:
                raise tf.errors.OutOfRangeError(
                    None,
                    None,
                    f"The dataset ran out of elements in epoch {epoch} after {index} of "
                    f"{elements} elements: benchmark a repeated dataset "
                    "(`dataset.repeat()`) or ask for fewer elements",
                ) from None
            arrays = [_host_array(t) for t in nest.flatten(element, expand_composites=True)]
            _check_no_empty_array(arrays)
            total_bytes += sum(_nbytes(a) for a in arrays)
            if do_memcpy:
                host_buffers.copy_in(arrays)
        seconds = max(time.perf_counter() - start, _MIN_EPOCH_SECONDS)
        epoch_stats.append(
            {
                "elements_processed": elements,
                "total_bytes_processed": total_bytes,
                "time_elapsed": seconds,
                "elements_per_second": elements / seconds,
                "bandwidth": total_bytes / seconds / _BYTES_PER_GB,
            }
        )
    stats = BenchmarkStats(json.dumps({"epochs": epoch_stats}, indent=2))
    if print_stats:
        print(stats)
    return stats


class _HostBuffers:
    """One preallocated byte buffer per element component, grown when an element is larger."""

    def __init__(self) -> None:
        self._buffers: list[np.ndarray] = []

    def copy_in(self, arrays: list[np.ndarray]) -> None:
        for index, array in enumerate(arrays):
            raw = _raw_bytes(array)
            if index == len(self._buffers):
                self._buffers.append(np.empty(raw.size, np.uint8))
            elif self._buffers[index].size < raw.size:
                self._buffers[index] = np.empty(raw.size, np.uint8)
            np.copyto(self._buffers[index][: raw.size], raw)


def _host_array(tensor: tf.Tensor) -> np.ndarray:
    if tensor.dtype == tf.string:
        # A scalar string reads back as bare bytes; keep every string tensor an object array.
        return np.array(tensor.numpy(), dtype=object)
    return tensor.numpy()


def _raw_bytes(array: np.ndarray) -> np.ndarray:
    if array.dtype == object:  # tf.string: the bytes of every string, back to back
        return np.frombuffer(b"".join(array.ravel().tolist()), np.uint8)
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _nbytes(array: np.ndarray) -> int:
    if array.dtype == object:
        return sum(len(s) for s in array.ravel().tolist())
    return array.nbytes


def _empty_dimension_error(shape, where: str) -> tf.errors.InvalidArgumentError:
    # Starts with the original's words (kernels/datastream/dataset_benchmark.cc).
    return tf.errors.InvalidArgumentError(
        None,
        None,
        "Detected a tensor in the dataset with a dimension of size 0: an element has the "
        f"shape {list(shape)}{where}; an empty tensor cannot be streamed to an IPU.",
    )


def _empty_dimension_of(element_spec) -> tf.errors.InvalidArgumentError | None:
    for path, spec in nest.flatten_with_joined_string_paths(element_spec):
        shape = getattr(spec, "shape", None)
        if shape is not None and shape.rank is not None and 0 in shape.as_list():
            return _empty_dimension_error(shape, f" (component {path!r})" if path else "")
    return None


def _check_no_empty_dimension(element_spec) -> None:
    error = _empty_dimension_of(element_spec)
    if error is not None:
        raise error


def _check_no_empty_array(arrays: list[np.ndarray]) -> None:
    for array in arrays:
        if 0 in array.shape:
            raise _empty_dimension_error(array.shape, "")
