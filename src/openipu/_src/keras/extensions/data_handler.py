"""Feeding Keras `fit`/`evaluate`/`predict` to the device in whole executions.

Keras' DataHandler hands out one batch per `next(iterator)`. An IPU program
runs `steps_per_execution` steps per host call, so `IPUDataHandler` hands out
*executions*: the dataset is re-batched into stacks of `steps_per_execution`
batches by tf.data on its own threads, and Keras' step accounting (progress
bar, callbacks, History) stays in batches.

IPU programs have static shapes, so partial batches cannot run: they are
dropped with a warning. The step rules of the later Keras API:
`fit` needs the steps per epoch to be a multiple of `steps_per_execution`
(a ValueError names the numbers); `evaluate`/`predict` round their step count
down to a multiple and warn, or run one shorter execution when there are
fewer steps than `steps_per_execution`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.util import nest
from tf_keras.src.engine import data_adapter

from openipu._src.integration import keras_data_handler, keras_internals

logger = logging.getLogger(__name__)

_state = threading.local()


@contextlib.contextmanager
def ipu_data_mode(model, mode: str, batches_per_step: int = 1) -> Iterator[None]:
    """Within this context, Keras builds IPU data handlers for `model` (mode fit/evaluate/predict).

    `batches_per_step` is how many batches one Keras step (one progress-bar step)
    consumes: 1 in the later API; the gradient accumulation count in the first
    API, whose steps are weight updates.
    """
    stack = _state.__dict__.setdefault("modes", [])
    stack.append((model, (mode, batches_per_step)))
    _install()
    try:
        yield
    finally:
        stack.pop()


def _current_mode(model) -> str | None:
    for candidate, mode in reversed(getattr(_state, "modes", [])):
        if candidate is model:
            return mode
    return None


def _install() -> None:
    """Routes `data_adapter.get_data_handler` through openipu (`integration/keras_data_handler.py`)."""
    keras_data_handler.install(_get_data_handler)


def _get_data_handler(stock, *args, **kwargs):
    """An `IPUDataHandler` for models in an IPU data mode, else Keras' own."""
    mode = _current_mode(kwargs.get("model"))
    if mode is None:
        return stock(*args, **kwargs)
    return IPUDataHandler(*args, ipu_mode=mode[0], batches_per_step=mode[1], **kwargs)


class IPUDataHandler(data_adapter.DataHandler):
    """A DataHandler whose iterator yields stacks of `steps_per_execution` batches."""

    def __init__(self, *args, ipu_mode: str, batches_per_step: int = 1, **kwargs) -> None:
        self._ipu_mode = ipu_mode
        self._batches_per_step = batches_per_step
        self._batch_size_argument = kwargs.get("batch_size")
        super().__init__(*args, **kwargs)

    def _configure_dataset_and_inferred_steps(
        self, strategy, x, steps_per_epoch, class_weight, distribute
    ):
        del x, strategy, distribute  # the engine places and replicates the data itself
        dataset = self._adapter.get_dataset()
        if class_weight:
            dataset = dataset.map(keras_internals.class_weight_map_fn(class_weight))
        dataset, full_batches = self._without_partial_batches(dataset)
        if steps_per_epoch not in (None, -1):
            steps = steps_per_epoch
        else:
            batches = self._infer_steps(steps_per_epoch, dataset)
            if full_batches is not None:
                batches = full_batches
            steps = None if batches is None else self._whole_steps(batches)
        if steps == 0:
            raise ValueError(self._no_whole_step_message())
        steps_per_execution = int(self._steps_per_execution.numpy())
        steps = self._apply_step_rules(steps, steps_per_execution)
        execution = steps_per_execution if steps is None else min(steps_per_execution, steps)
        self._inferred_steps = steps
        self._execution_size = execution
        # Whole executions are prepared on tf.data's threads while the device computes.
        chunk = execution * self._batches_per_step
        self._dataset = dataset.batch(chunk, drop_remainder=True).prefetch(2)

    def _batch_size(self) -> int | None:
        """The data's batch size: the adapter's, else the `batch_size` argument."""
        return _adapter_batch_size(self._adapter) or self._batch_size_argument

    def _no_whole_step_message(self) -> str:
        adapter = self._adapter
        batch_size = self._batch_size()
        samples = ""
        if adapter.has_partial_batch() and adapter.get_size() == 1:
            samples = f"{adapter.partial_batch_size()} sample(s), "
        return (
            f"Model.{self._ipu_mode} has no data to run: the data hold {samples}fewer than one "
            f"step of {self._batches_per_step} whole batch(es) of {batch_size}, and IPU programs "
            "run whole batches only: pass more data or a smaller batch_size"
        )

    def _whole_steps(self, batches: int) -> int:
        steps, leftover = divmod(batches, self._batches_per_step)
        if leftover:
            logger.warning(
                "%d batch(es) do not fill a step of %d batches and are skipped",
                leftover,
                self._batches_per_step,
            )
        return steps

    def _infer_steps(self, steps, dataset):
        # Keras re-infers the steps of an epoch from `self._dataset`, which now holds
        # whole executions; the step count (in batches) was fixed when it was configured.
        if dataset is getattr(self, "_dataset", None):
            return self._inferred_steps
        return super()._infer_steps(steps, dataset)

    @property
    def execution_size(self) -> int:
        return self._execution_size

    def _without_partial_batches(self, dataset: tf.data.Dataset):
        """Drops a trailing partial batch (IPU programs have static shapes)."""
        batch_dims = {
            spec.shape[0] if spec.shape.rank else None
            for spec in nest.flatten(dataset.element_spec)
        }
        if None not in batch_dims:
            return dataset, None
        adapter = self._adapter
        batch_size = self._batch_size()
        if batch_size is None:
            raise ValueError(
                "The batch size of this data is not static and cannot be inferred: IPU programs "
                "need a fixed batch size. Batch the dataset with `drop_remainder=True`."
            )
        full_batches = None
        if adapter.has_partial_batch():
            partial = adapter.partial_batch_size()
            logger.warning(
                "The last %d sample(s) do not fill a batch of %d and are skipped: IPU programs "
                "run whole batches only",
                partial,
                batch_size,
            )
            full_batches = adapter.get_size() - 1
        fixed = dataset.filter(lambda *element: _leading_dim(element) == batch_size)
        shaped = fixed.map(lambda *element: _with_batch_dim(element, batch_size))
        return shaped, full_batches

    def _apply_step_rules(self, steps: int | None, steps_per_execution: int) -> int | None:
        if steps is None or steps % steps_per_execution == 0:
            return steps
        if self._ipu_mode == "fit":
            raise ValueError(
                f"The number of steps per epoch ({steps}) must be a multiple of "
                f"steps_per_execution ({steps_per_execution}) for Model.fit on the IPU: "
                f"choose steps_per_epoch, the batch size or steps_per_execution so that it divides"
            )
        if steps < steps_per_execution:
            logger.warning(
                "Model.%s runs %d step(s), fewer than steps_per_execution (%d): "
                "running them as one shorter execution",
                self._ipu_mode,
                steps,
                steps_per_execution,
            )
            return steps
        rounded = steps - steps % steps_per_execution
        logger.warning(
            "Model.%s: %d steps is not a multiple of steps_per_execution (%d); "
            "running %d steps, the last %d are skipped",
            self._ipu_mode,
            steps,
            steps_per_execution,
            rounded,
            steps - rounded,
        )
        return rounded


def _adapter_batch_size(adapter) -> int | None:
    try:
        size = adapter.batch_size()
    except (AttributeError, NotImplementedError):
        size = None
    # Generators: the size of the first batch, which Keras peeked at.
    return size or keras_internals.first_batch_size(adapter)


def _leading_dim(element) -> tf.Tensor:
    return tf.shape(nest.flatten(element)[0])[0]


def _with_batch_dim(element, batch_size: int):
    fixed = nest.map_structure(
        lambda t: tf.ensure_shape(t, [batch_size] + t.shape[1:].as_list()), element
    )
    return fixed if len(fixed) != 1 else fixed[0]
