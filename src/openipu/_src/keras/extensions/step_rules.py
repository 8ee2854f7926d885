"""How many steps fit/evaluate/predict run on the IPU: the original's rules.

They are those of graphcore/keras (r2.6/sdk-release-3.4)
keras/ipu/extensions/data_adapter.py, `IPUDataHandler`, whose messages are
kept word for word and logged on TensorFlow's logger (`tf_logging`), as there:

- the user's `steps`/`steps_per_epoch`, or else the data's length in batches,
  count batches over all replicas; each replica runs `steps // replicas`
  steps, and the progress bar, callbacks and `steps_per_execution` count those
  per-replica steps (`_infer_steps`);
- an execution never spans more than one epoch: a larger
  `steps_per_execution` is cut down to the epoch, with a warning
  (`_validate_data_handler` and keras/engine/data_adapter.py
  `_truncate_execution_to_epoch`);
- `steps_per_execution` must then divide the per-replica steps, in fit,
  evaluate and predict alike: there is no shorter last execution.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterator

import tensorflow as tf
from tensorflow.python.platform import tf_logging as logging

PARTIAL_BATCH = (
    "The provided set of data has a partial batch, which could result in "
    "data being dropped. Either adjust the `batch_size` of your model "
    "(currently set to {}) or pad your dataset to ensure there are no "
    "partial batches."
)
UNKNOWN_SIZE = "Could not infer the size of the data. You must specify the number of steps to run."


def check_not_generator(generator_data: bool, data: object) -> None:
    """Data Keras reads through its generator adapter (a generator, an iterator, a
    `keras.utils.Sequence`) is refused: its shapes are not known ahead of time
    (`IPUDataHandler.__init__`)."""
    if not generator_data:
        return
    hint = "use `tf.data.Dataset.from_generator()` to specify the shape of your data."
    if isinstance(data, Iterator) and not isinstance(data, Generator):
        hint = (
            "wrap your iterator inside a generator like so:\n\n"
            "def generator:\n"
            "    while True:\n"
            "        yield next(iterator)\n\n"
            f"and {hint}"
        )
    raise ValueError(
        f"The provided set of data is of type `{type(data).__name__}` which is not "
        "compatible with the IPU's requirement to know the data shape ahead of time. "
        f"Please {hint}"
    )


def _to_this_replica(replicas: int) -> str:
    return " to this replica" if replicas > 1 else ""


def per_replica_steps(total_steps: int | None, replicas: int, dataset_length: int | None) -> int:
    """The steps each replica runs, out of `total_steps` batches (`_infer_steps`).

    `dataset_length` is the data's cardinality when tf.data knows it (the
    original warns about dropped batches only then).
    """
    if total_steps is None:
        raise ValueError(UNKNOWN_SIZE)
    dropped = total_steps % replicas
    if dropped and dataset_length is not None:
        logging.warning(
            f"Dataset of length {dataset_length} is being evenly distributed between "
            f"{replicas} replicas. The remaining {dropped} batch{'es' if dropped > 1 else ''} "
            "will be dropped."
        )
    return total_steps // replicas


def check_dataset(
    element_spec, dataset_length: int | None, steps_read: int, infinite: bool = False
) -> None:
    """The data holds `steps_read` batches and has static shapes (`_validate_dataset`).

    `steps_read` is what one iterator of the data is read for: the per-replica
    steps of one epoch, or of all epochs when the iterator is not recreated.
    That the original compares per-replica steps with the data's batches, not
    steps times replicas, is kept.
    """
    if dataset_length is None and not infinite:
        logging.info(
            "The provided set of data has an unknown size. This can result in "
            "runtime errors if not enough data is provided during execution."
        )
    elif dataset_length is not None and steps_read > dataset_length:
        raise ValueError(
            "Your input does not have enough data. Make sure that your dataset "
            f"or generator can generate at least {steps_read} batches (currently it can "
            f"only generate {dataset_length} batches). You may need to use the repeat() "
            "function when building your dataset."
        )
    for spec in tf.nest.flatten(element_spec):
        if not spec.shape.is_fully_defined():
            raise ValueError(
                f"The provided set of data contains a shape {spec.shape} which is not fully "
                "defined. Executing on IPU requires all dataset elements to have "
                "fully defined shapes. If using batch() make sure to set "
                "`drop_remainder=True`."
            )


def execution_steps(
    steps_per_execution: int,
    steps: int,
    replicas: int,
    dataset_batches: Callable[[], int],
    dataset_items: Callable[[], int] | None = None,
) -> int:
    """The steps of one execution for an epoch of `steps` per-replica steps.

    `dataset_batches` tells the batches the data holds, and `dataset_items` its length
    (the batches when not given), for the message of a replica left with no step (only
    called then).
    """
    if steps_per_execution > steps:
        logging.warning(
            f"`steps_per_execution` has been set to {steps_per_execution} but the dataset "
            f"provided{_to_this_replica(replicas)} only contains {steps} batches. Using "
            f"{steps} as `steps_per_execution`."
        )
    execution = min(steps_per_execution, steps)  # `_truncate_execution_to_epoch`
    if steps == 0:
        batches = dataset_batches()
        each = math.ceil(batches / replicas)
        items = dataset_items() if dataset_items is not None else batches
        raise ValueError(
            f"The provided dataset contains {items} items, but all {replicas} replicas "
            f"are requested to run {each} steps each. Make sure the dataset "
            f"contains at least {each * replicas} items."
        )
    if steps % execution:
        raise ValueError(
            f"`steps_per_execution` ({execution}) must be a divisor of the number of "
            f"batches ({steps}) in the dataset provided{_to_this_replica(replicas)}."
        )
    return execution
