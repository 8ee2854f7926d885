"""`export_dataset_to_file` and `export_inputs_to_file` (format: see `exported_file`)."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.data.host_pipeline import (
    apply_performance_options,
    check_positive_count,
    dataset_graph,
)
from openipu._src.feeds.infeed import IPUInfeedQueue
from openipu._src.int_like import as_attr_int, plain_int
from openipu._src.utils.exported_file import component_filenames, write_exported_file


def export_dataset_to_file(
    dataset_or_infeed,
    output_filename: str | os.PathLike,
    num_elements: int,
    feed_name: str = "",
    apply_options: bool = True,
) -> list[str]:
    """Exports the first `num_elements` elements of a dataset or infeed as binary files.

    Each component of the elements (tuple item, dict value in sorted key
    order, or nested leaf) goes to its own file, holding the component of
    all the elements stacked along a new first axis: for 'my_dataset.bin',
    the files are 'my_dataset.0.bin', 'my_dataset.1.bin', ...; elements of a
    single tensor go to `output_filename` itself. `feed_name` is recorded in
    each file. Returns the paths written.
    """
    if isinstance(dataset_or_infeed, IPUInfeedQueue):
        dataset = dataset_or_infeed._dataset
    elif isinstance(dataset_or_infeed, tf.data.Dataset):
        dataset = dataset_or_infeed
    else:
        # The original asserts the type (utils.py): an AssertionError.
        raise AssertionError(
            "export_dataset_to_file needs a tf.data.Dataset or an IPUInfeedQueue, got "
            f"{type(dataset_or_infeed).__name__}"
        )
    # The original's extractor op takes num_elements as an int attribute (int(): 2.0 is 2).
    count = check_positive_count(
        as_attr_int(plain_int(num_elements), "num_elements"), "num_elements"
    )
    if not isinstance(feed_name, str):
        raise TypeError(f"export_dataset_to_file: feed_name must be a str, got {feed_name!r}")
    if apply_options:
        dataset = apply_performance_options(dataset)
    components = [
        path or "0" for path, _ in nest.flatten_with_joined_string_paths(dataset.element_spec)
    ]
    stacked = _first_elements_stacked(dataset, count)
    return _write_components(output_filename, stacked, components, feed_name)


def export_inputs_to_file(inputs, output_filename: str | os.PathLike, feed_dict) -> list[str]:
    """Exports the values of graph inputs as binary files, one per input.

    The value of each input comes from `feed_dict` (keys: the tensors or
    their names); other graph tensors are evaluated in a session fed with
    `feed_dict`, and eager tensors or variables give their current value.
    Files are named as by `export_dataset_to_file`; each holds one input's
    value with its own shape. Returns the paths written.
    """
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    if not inputs:
        raise ValueError("export_inputs_to_file: inputs is empty; pass the tensors to export")
    if feed_dict is not None and not isinstance(feed_dict, dict):
        raise TypeError(
            f"export_inputs_to_file: feed_dict must be a dict, got {type(feed_dict).__name__}"
        )
    values = _input_values(list(inputs), feed_dict or {})
    names = [getattr(x, "name", None) or str(index) for index, x in enumerate(inputs)]
    return _write_components(output_filename, values, names, feed_name="")


def _write_components(
    output_filename, arrays: list[np.ndarray], components: list[str], feed_name: str
) -> list[str]:
    if not isinstance(output_filename, (str, os.PathLike)):
        raise TypeError(f"output_filename must be a path, got {type(output_filename).__name__}")
    paths = component_filenames(output_filename, len(arrays))
    for path, array, component in zip(paths, arrays, components, strict=True):
        write_exported_file(path, array, feed_name, component)
    return paths


def _first_elements_stacked(dataset: tf.data.Dataset, count: int) -> list[np.ndarray]:
    specs = nest.flatten(dataset.element_spec)
    if not all(isinstance(spec, tf.TensorSpec) for spec in specs):
        raise TypeError(
            "export_dataset_to_file can only export dense tensors; the dataset has elements "
            f"of {dataset.element_spec}"
        )
    batched = dataset.take(count).batch(count)
    try:
        stacked = _first_element(batched)
    except tf.errors.InvalidArgumentError as error:
        raise tf.errors.InvalidArgumentError(
            None,
            None,
            "export_dataset_to_file stacks the exported elements, so they must all have the "
            f"same shape: {error.message}",
        ) from error
    if stacked is None:
        raise ValueError("export_dataset_to_file: the dataset has no elements")
    flat = [np.asarray(a) for a in nest.flatten(stacked)]
    if flat[0].shape[0] < count:
        raise ValueError(
            f"export_dataset_to_file: num_elements={count} but the dataset has only "
            f"{flat[0].shape[0]} elements"
        )
    return flat


def _first_element(dataset: tf.data.Dataset):
    """The first element of a dataset as numpy values (None if it is empty)."""
    graph = dataset_graph(dataset)
    if graph is None:
        with tf.device("/device:CPU:0"):
            return next(dataset.as_numpy_iterator(), None)
    with graph.as_default(), tf.device("/device:CPU:0"):
        iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
        next_element = iterator.get_next()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(iterator.initializer)
        try:
            return session.run(next_element)
        except tf.errors.OutOfRangeError:
            return None


def _input_values(inputs: list, feed_dict: dict) -> list[np.ndarray]:
    values: list[np.ndarray | None] = []
    to_evaluate: dict[int, tf.Tensor] = {}
    for index, x in enumerate(inputs):
        fed = _fed_value(x, feed_dict)
        if fed is not None:
            values.append(np.asarray(fed, dtype=_numpy_dtype(x)))
        elif isinstance(x, (tf.Tensor, tf.Variable)):
            # Eager values have no graph (asking for it raises AttributeError).
            if getattr(x, "graph", None) is None:
                values.append(x.numpy())
            else:
                values.append(None)
                to_evaluate[index] = x
        else:
            values.append(np.asarray(x))
    if to_evaluate:
        graphs = {tensor.graph for tensor in to_evaluate.values()}
        if len(graphs) != 1:
            raise ValueError("export_inputs_to_file: the inputs come from different graphs")
        with tf.compat.v1.Session(graph=graphs.pop()) as session:
            evaluated = session.run(list(to_evaluate.values()), feed_dict=feed_dict)
        for index, value in zip(to_evaluate, evaluated, strict=True):
            values[index] = np.asarray(value)
    return [value for value in values if value is not None]  # every None was evaluated


def _fed_value(x, feed_dict: dict):
    name = getattr(x, "name", None)
    for key, value in feed_dict.items():
        if key is x or (isinstance(key, str) and key == name):
            return value
    return None


def _numpy_dtype(x):
    dtype = getattr(x, "dtype", None)
    return tf.as_dtype(dtype).as_numpy_dtype if dtype is not None else None
