"""Feeding Keras `fit`/`evaluate`/`predict` to the device in whole executions.

Keras' DataHandler hands out one batch per `next(iterator)`. An IPU program
runs `steps_per_execution` steps per host call, each step one batch on every
replica, so `IPUDataHandler` hands out *executions*: the dataset is re-batched
into stacks of `steps_per_execution` x replicas batches by tf.data on its own
threads, and Keras' step accounting (progress bar, callbacks, History) counts
per-replica steps, as the original does.

The later API counts steps by the original's rules (`step_rules`); a partial
batch in tensor data is an error there, as IPU programs have static shapes.
The first API (api_v1) keeps its own rules: partial batches are dropped with a
warning, `fit` needs whole executions, `evaluate`/`predict` round down.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.util import nest
from tf_keras.src.engine import base_layer_utils, data_adapter

from openipu._src.engine import stream_dtypes
from openipu._src.integration import dataset_iterators, keras_data_handler, keras_internals
from openipu._src.keras.extensions import step_rules

logger = logging.getLogger(__name__)

_state = threading.local()


@dataclasses.dataclass(frozen=True)
class DataMode:
    """How the data handlers of one model's fit/evaluate/predict count steps."""

    mode: str  # fit, evaluate or predict
    replicas: int = 1
    #: Batches one replica's Keras step consumes: 1 in the later API; the gradient
    #: accumulation count in the first API, whose steps are weight updates.
    batches_per_step: int = 1
    #: The later API's rules (`step_rules`), else the first API's.
    original_rules: bool = True
    #: The handler `fit` makes for its validation data. The original builds it with
    #: its constructor's default of one replica, which runs the rules for one replica
    #: before `evaluate` runs them for the model's replicas (extensions_base.py `fit`).
    fit_validation: bool = False
    #: Asynchronous callbacks: Keras' loop gets every step (each this many times, once per
    #: replica) rather than one per execution; 0 when off.
    step_callbacks: int = 0


@dataclasses.dataclass
class _ModeEntry:
    model: object
    mode: DataMode
    handlers: int = 0  # the data handlers made in this mode so far


@contextlib.contextmanager
def ipu_data_mode(model, mode: DataMode) -> Iterator[None]:
    """Within this context, Keras builds IPU data handlers for `model`."""
    stack = _state.__dict__.setdefault("modes", [])
    stack.append(_ModeEntry(model, mode))
    _install()
    try:
        yield
    finally:
        stack.pop()


def current_async_handler() -> IPUDataHandler | None:
    """The handler whose steps Keras' loop is going through with asynchronous callbacks."""
    return getattr(_state, "async_handler", None)


def _current_mode(model) -> _ModeEntry | None:
    for entry in reversed(getattr(_state, "modes", [])):
        if entry.model is model:
            return entry
    return None


def _install() -> None:
    """Routes `data_adapter.get_data_handler` through openipu (`integration/keras_data_handler.py`)."""
    keras_data_handler.install(_get_data_handler)


def _get_data_handler(stock, *args, **kwargs):
    """An `IPUDataHandler` for models in an IPU data mode, else Keras' own."""
    entry = _current_mode(kwargs.get("model"))
    if entry is None:
        return stock(*args, **kwargs)
    mode = entry.mode
    # `fit` makes its training data's handler first, then its validation data's.
    if mode.mode == "fit" and entry.handlers > 0:
        mode = dataclasses.replace(mode, fit_validation=True)
    entry.handlers += 1
    return IPUDataHandler(*args, ipu_mode=mode, **kwargs)


class IPUDataHandler(data_adapter.DataHandler):
    """A DataHandler whose iterator yields stacks of `steps_per_execution` x replicas batches."""

    def __init__(self, *args, ipu_mode: DataMode, **kwargs) -> None:
        self._ipu_mode = ipu_mode
        self._batch_size_argument = kwargs.get("batch_size")
        # `fit(epochs=0)` runs no epoch on the original (its IPU data handler,
        # keras/ipu/extensions/data_adapter.py, takes any count); tf_keras 2.21's handler
        # refuses it. The handler is built for one epoch, then runs none.
        self._no_epochs = kwargs.get("epochs") == 0
        if self._no_epochs:
            kwargs["epochs"] = 1
        super().__init__(*args, **kwargs)
        if self._no_epochs:
            self._epochs = 0

    def _configure_dataset_and_inferred_steps(
        self, strategy, x, steps_per_epoch, class_weight, distribute
    ):
        del strategy, distribute  # the engine places and replicates the data itself
        if self._ipu_mode.original_rules:
            step_rules.check_not_generator(
                isinstance(self._adapter, data_adapter.GeneratorDataAdapter), x
            )
        dataset = self._adapter.get_dataset()
        if class_weight:
            dataset = dataset.map(keras_internals.class_weight_map_fn(class_weight))
        dataset = _checked_for_stream(_autocast_float64(dataset))
        steps_per_execution = int(self._steps_per_execution.numpy())
        if self._ipu_mode.original_rules:
            dataset, steps, execution = self._original_steps(
                dataset, steps_per_epoch, steps_per_execution
            )
        else:
            dataset, steps, execution = self._first_api_steps(
                dataset, steps_per_epoch, steps_per_execution
            )
        self._inferred_steps = steps
        self._execution_size = execution
        # Whole executions are prepared on tf.data's threads while the device computes.
        self._dataset = dataset.batch(execution * self._step_batches, drop_remainder=True).prefetch(
            self._prefetched_executions(execution)
        )
        # The engine reads the executions on the host (`execution.py`), in the strategy's
        # scope: its iterator is the stock one, as the original's handler reads infeeds.
        dataset_iterators.keep_stock_iterator(self._dataset)

    def _prefetched_executions(self, execution: int) -> int:
        """Executions the host prepares ahead: two, or what `set_infeed_queue_options`'
        `prefetch_depth` (batches, as an IPUInfeedQueue's) asks for, rounded up."""
        options = getattr(getattr(self._model, "_ipu", None), "infeed_options", None) or {}
        depth = options.get("prefetch_depth")
        if not depth:  # None or 0: the infeed's default, `prefetch_depth or 3`
            return 2
        return max(1, -(-depth // (execution * self._step_batches)))

    def _original_steps(self, dataset, steps_per_epoch, steps_per_execution):
        """(dataset, per-replica steps, execution steps) by the original's rules (`step_rules`)."""
        adapter = self._adapter
        # keras/ipu/extensions/data_adapter.py `_get_and_post_process_dataset`.
        if adapter.has_partial_batch():
            raise ValueError(step_rules.PARTIAL_BATCH.format(adapter.batch_size()))
        if self._ipu_mode.fit_validation and self._ipu_mode.replicas > 1:
            self._count_steps(dataset, steps_per_epoch, steps_per_execution, 1)
        steps, execution = self._count_steps(
            dataset, steps_per_epoch, steps_per_execution, self._ipu_mode.replicas
        )
        return dataset, steps, execution

    def _count_steps(self, dataset, steps_per_epoch, steps_per_execution, replicas):
        """(per-replica steps, execution steps): keras/ipu/extensions/data_adapter.py
        `set_replication_factor` (`_infer_steps`, `_validate_dataset`, `_validate_data_handler`)."""
        adapter = self._adapter
        cardinality = int(dataset.cardinality())
        length = cardinality if cardinality >= 0 else None
        total = data_adapter.DataHandler._infer_steps(self, steps_per_epoch, dataset)
        steps = step_rules.per_replica_steps(total, replicas, length)
        epochs = 0 if self._no_epochs else self._epochs - self._initial_epoch
        steps_read = steps if adapter.should_recreate_iterator() else epochs * steps
        step_rules.check_dataset(
            dataset.element_spec,
            length,
            steps_read,
            infinite=cardinality == tf.data.INFINITE_CARDINALITY,
        )

        def dataset_batches() -> int:
            # What the original reads: the batches Keras infers without `steps` (which
            # refuses an infinite dataset); the requested steps when that is unknown.
            batches = data_adapter.DataHandler._infer_steps(self, None, dataset)
            return batches if batches is not None else total

        def dataset_items() -> int:
            # The original's message reads `len(dataset)`: TensorFlow's TypeError when the
            # length is unknown (empty numpy data, say; keras/ipu/extensions/data_adapter.py
            # `_validate_data_handler`).
            return len(dataset)

        execution = step_rules.execution_steps(
            steps_per_execution, steps, replicas, dataset_batches, dataset_items
        )
        return steps, execution

    def _first_api_steps(self, dataset, steps_per_epoch, steps_per_execution):
        """(dataset, steps, execution steps) by the first API's rules."""
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
        steps = self._first_api_step_rules(steps, steps_per_execution)
        execution = steps_per_execution if steps is None else min(steps_per_execution, steps)
        return dataset, steps, execution

    @property
    def _step_batches(self) -> int:
        """Batches one Keras step takes from the data: one per replica and micro-batch."""
        return self._ipu_mode.batches_per_step * self._ipu_mode.replicas

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
            f"Model.{self._ipu_mode.mode} has no data to run: the data hold {samples}fewer than "
            f"one step of {self._step_batches} whole batch(es) of {batch_size}, and IPU programs "
            "run whole batches only: pass more data or a smaller batch_size"
        )

    def _whole_steps(self, batches: int) -> int:
        steps, leftover = divmod(batches, self._step_batches)
        if leftover:
            logger.warning(
                "%d batch(es) do not fill a step of %d batches and are skipped",
                leftover,
                self._step_batches,
            )
        return steps

    def _infer_steps(self, steps, dataset):
        # Keras re-infers the steps of an epoch from `self._dataset`, which now holds
        # whole executions; the step count was fixed when it was configured.
        if dataset is getattr(self, "_dataset", None):
            return self._inferred_steps
        return super()._infer_steps(steps, dataset)

    @property
    def execution_size(self) -> int:
        return self._execution_size

    def steps(self):
        """Keras' steps: one per execution, or with asynchronous callbacks every step of
        every replica (the original's polling thread calls the callbacks so,
        keras/ipu/extensions/polling_thread.py), the executions running underneath."""
        calls = self._ipu_mode.step_callbacks
        if not calls:
            yield from super().steps()
            return
        # Keras' DataHandler sets `_initial_step` (untyped there).
        self._current_step = self._initial_step  # type: ignore[has-type]
        self._initial_step = 0
        while self._inferred_steps is None or self._current_step < self._inferred_steps:
            if self._insufficient_data:
                break
            self._step_increment = 0
            for _ in range(calls):
                _state.async_handler = self
                yield self._current_step
                if self._insufficient_data:
                    return
            self._current_step += 1

    def executions_follow(self, steps: int) -> bool:
        """Whether another whole execution follows the `steps` from the current step."""
        if self._inferred_steps is None:
            return False
        return self._current_step + steps + self._execution_size <= self._inferred_steps

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

    def _first_api_step_rules(self, steps: int | None, steps_per_execution: int) -> int | None:
        if steps is None or steps % steps_per_execution == 0:
            return steps
        mode = self._ipu_mode.mode
        if mode == "fit":
            raise ValueError(
                f"The number of steps per epoch ({steps}) must be a multiple of "
                f"steps_per_execution ({steps_per_execution}) for Model.fit on the IPU: "
                f"choose steps_per_epoch, the batch size or steps_per_execution so that it divides"
            )
        if steps < steps_per_execution:
            logger.warning(
                "Model.%s runs %d step(s), fewer than steps_per_execution (%d): "
                "running them as one shorter execution",
                mode,
                steps,
                steps_per_execution,
            )
            return steps
        rounded = steps - steps % steps_per_execution
        logger.warning(
            "Model.%s: %d steps is not a multiple of steps_per_execution (%d); "
            "running %d steps, the last %d are skipped",
            mode,
            steps,
            steps_per_execution,
            rounded,
            steps - rounded,
        )
        return rounded


def _autocast_float64(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """float64 data becomes float32 when the v2 dtype behaviour is on, as the original's
    IPU data handler does (keras/ipu/extensions/data_adapter.py `_autocast_dataset`)."""
    specs = nest.flatten(dataset.element_spec)
    if not base_layer_utils.v2_dtype_behavior_enabled() or not any(
        spec.dtype == tf.float64 for spec in specs
    ):
        return dataset

    single = not isinstance(dataset.element_spec, tuple)  # map passes it as one argument

    def autocast(*element):
        cast = nest.map_structure(
            lambda t: tf.cast(t, tf.float32) if t.dtype == tf.float64 else t, element
        )
        return cast[0] if single else cast

    return dataset.map(autocast)


def _checked_for_stream(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """The dataset, if the IPU's infeed can carry its elements: the original's Keras feeds
    its data through an IPUInfeedQueue, whose iterator op fails on other types
    (FailedPreconditionError, kernels/datastream/feeds.cc): int64 labels must be cast."""
    stream_dtypes.check(
        [spec.dtype for spec in nest.flatten(dataset.element_spec)],
        "IPUCreateDatasetIterator with feed id 'infeed'",
    )
    return dataset


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
