"""The first IPU Keras API: `ipu.keras.Model` and `ipu.keras.Sequential` (tensorflow2-support.txt).

These are thin facades over the same engine as the later API
(`extensions.KerasExtensions`): what differs is the interface.

- They can only be called through `fit`, `evaluate` and `predict`, inside an
  IPUStrategy scope (calling them directly is a ValueError).
- Gradient accumulation is a constructor argument and sums the gradients.
- A "step" is one weight update: with a gradient accumulation count of N, one
  step (and one progress-bar tick) consumes N batches, `steps_per_epoch` counts
  such steps, and `fit(steps_per_run=S)` runs S of them per host call. So do
  `evaluate` and `predict`: their `steps` count N batches each, as the original's
  (all three run its `_do_internal`).
- `fit` keeps the first API's argument rules (no `batch_size` or `y` with a
  dataset; validation and sample weights are not supported).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import tensorflow as tf
import tf_keras
from tensorflow.python.platform import tf_logging
from tf_keras.src.engine import functional, sequential

from openipu._src.engine.gradient_accumulation import GradientAccumulationReductionMethod
from openipu._src.feeds import infeed
from openipu._src.int_like import plain_int
from openipu._src.keras.extensions.model_extensions import KerasExtensions
from openipu._src.strategy.ipu_strategy import IPUStrategyV1

_UNSUPPORTED_FIT_ARGUMENTS = (
    "validation_data",
    "validation_split",
    "class_weight",
    "sample_weight",
    "validation_steps",
    "validation_freq",
    "max_queue_size",
    "workers",
    "use_multiprocessing",
)
_UNSUPPORTED_COMPILE_ARGUMENTS = (
    "sample_weight_mode",
    "weighted_metrics",
    "target_tensors",
    "distribute",
    "run_eagerly",
)


def _check_count(value, name: str) -> int:
    # NumPy integers work as on the original, which only does arithmetic with the count.
    value = plain_int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


class FirstAPIModel(KerasExtensions):
    """The first API's behaviour, mixed into the Keras model classes below."""

    # Its steps (weight updates, `steps_per_run`) follow rules of its own (data_handler).
    _ipu_original_step_rules = False

    def _first_api_setup(self, gradient_accumulation_count: int = 1) -> None:
        self._ipu.first_api_accumulation = _check_count(
            gradient_accumulation_count, "gradient_accumulation_count"
        )
        if self._ipu.first_api_accumulation > 1:
            KerasExtensions.set_gradient_accumulation_options(
                self, self._ipu.first_api_accumulation, GradientAccumulationReductionMethod.SUM
            )

    @property
    def gradient_accumulation_count(self) -> int:
        return getattr(self._ipu, "first_api_accumulation", 1)

    def __call__(self, *args, **kwargs):
        if not self._ipu.executing and not self._ipu.building:
            raise ValueError(
                f"{type(self).__name__} can only be called through the `fit`, `evaluate` or "
                "`predict` interfaces."
            )
        return super().__call__(*args, **kwargs)

    def compile(self, *args, **kwargs):
        for name in _UNSUPPORTED_COMPILE_ARGUMENTS:
            if kwargs.get(name) is not None:
                raise NotImplementedError(
                    f"{type(self).__name__}.compile does not support `{name}` on the IPU"
                )
        # Keras' compile takes steps_per_execution, but the original's on-device loop
        # ignores it (tensorflow/python/ipu/keras/model.py `_IpuModelBase.compile` passes it
        # on; `_do_internal` runs `steps_per_run` steps): fit's steps_per_run decides.
        kwargs.pop("steps_per_execution", None)
        loss_weights = kwargs.get("loss_weights")
        if loss_weights is not None and not isinstance(loss_weights, (list, tuple)):
            raise ValueError(
                f"loss_weights must be a list (one weight per output), got {loss_weights!r}"
            )
        with self._building():
            return super().compile(*args, **kwargs)

    def _assert_weights_created(self):
        # The first API builds a model at its first fit: until then it has no weights
        # (an empty list), rather than an error.
        if self.built:
            super()._assert_weights_created()

    @contextlib.contextmanager
    def _building(self) -> Iterator[None]:
        outer = self._ipu.building
        self._ipu.building = True
        try:
            yield
        finally:
            self._ipu.building = outer

    # fit / evaluate / predict ------------------------------------------------------------------

    @contextlib.contextmanager
    def _fit_prefetch_depth(self, prefetch_depth) -> Iterator[None]:
        """`fit(prefetch_depth=...)`: the depth of the infeed this fit creates."""
        depth = infeed._validate_prefetch_depth(prefetch_depth)  # noqa: SLF001
        if depth is None:
            yield
            return
        saved = self._ipu.infeed_options
        self._ipu.infeed_options = {**saved, "prefetch_depth": depth}
        try:
            yield
        finally:
            self._ipu.infeed_options = saved

    def fit(
        self,
        x=None,
        y=None,
        *,
        batch_size=None,
        epochs=1,
        verbose=1,
        callbacks=None,
        shuffle=True,
        initial_epoch=0,
        steps_per_epoch=None,
        steps_per_run=None,
        prefetch_depth=None,
        **kwargs,
    ):
        """Trains the model; a step is one weight update of `gradient_accumulation_count` batches."""
        self._check_on_ipu("fit")
        for name in _UNSUPPORTED_FIT_ARGUMENTS:
            if kwargs.get(name) is not None:
                raise NotImplementedError(f"{type(self).__name__}.fit does not support `{name}`")
        batch_size = self._check_data_arguments(x, y, batch_size)
        runs = _check_count(steps_per_run or 1, "steps_per_run")
        steps_per_epoch = self._original_steps(x, batch_size, steps_per_epoch, steps_per_run, "fit")
        with self._first_api_execution(runs), self._fit_prefetch_depth(prefetch_depth):
            return KerasExtensions.fit(
                self,
                x,
                y,
                batch_size=batch_size,
                epochs=epochs,
                verbose=verbose,
                callbacks=callbacks,
                shuffle=shuffle,
                initial_epoch=initial_epoch,
                steps_per_epoch=steps_per_epoch,
            )

    def evaluate(
        self,
        x=None,
        y=None,
        *,
        batch_size=None,
        verbose=1,
        steps=None,
        steps_per_run=None,
        callbacks=None,
        **kwargs,
    ):
        """Evaluates the model on the IPU."""
        self._check_on_ipu("evaluate")
        batch_size = self._check_data_arguments(x, y, batch_size)
        runs = _check_count(steps_per_run or 1, "steps_per_run")
        steps = self._original_steps(x, batch_size, steps, steps_per_run, "evaluate")
        with self._first_api_execution(runs):
            results = KerasExtensions.evaluate(
                self, x, y, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks
            )
        # The original returns its metrics aggregator's results, a list even when it holds
        # the loss alone (model.py `_do_internal`; keras_pipeline_test.py testEval_CpuMatch
        # checks `type(result) == list` and `len(result) == 1`).
        return results if isinstance(results, list) else [results]

    def predict(
        self,
        x,
        *,
        batch_size=None,
        verbose=0,
        steps=None,
        steps_per_run=None,
        callbacks=None,
        **kwargs,
    ):
        """Runs the model's forward pass on the IPU."""
        self._check_on_ipu("predict")
        batch_size = self._check_data_arguments(x, None, batch_size)
        runs = _check_count(steps_per_run or 1, "steps_per_run")
        steps = self._original_steps(x, batch_size, steps, steps_per_run, "predict")
        with self._first_api_execution(runs):
            return KerasExtensions.predict(
                self, x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks
            )

    def _check_on_ipu(self, what: str) -> None:
        strategy = tf.distribute.get_strategy()
        if not isinstance(strategy, IPUStrategyV1):
            raise ValueError(
                f"{type(self).__name__}.{what} can only be used on an IPU device: call it inside "
                "`with ipu.ipu_strategy.IPUStrategy().scope():`"
            )
        self.__dict__["_ipu_device_ordinal"] = strategy.extended.ipu_ordinal
        self._ipu.device_ordinal = strategy.extended.ipu_ordinal

    @staticmethod
    def _check_data_arguments(x, y, batch_size):
        """The batch size to pass on: none with a Dataset, which may only be given a falsy
        one (the original's `if batch_size and isinstance(x, DatasetV2)`, model.py)."""
        if isinstance(x, tf.data.Dataset):
            if batch_size:
                raise ValueError("batch_size cannot be given with a Dataset: batch the dataset")
            if y is not None:
                raise ValueError("y cannot be given with a Dataset: the dataset holds the labels")
            return None
        if _full_batches(x, 1) is not None:
            # Array data: the original's adapter is made without `steps`, so its batch size
            # defaults to Keras' 32 (model.py:104-106), not to the samples over `steps`.
            return batch_size or 32
        return batch_size

    def _original_steps(self, x, batch_size, steps, steps_per_run, mode: str) -> int | None:
        """The steps to hand Keras (per replica), checked as the original does.

        The original's fit, evaluate and predict share one loop (tensorflow/python/ipu/
        keras/model.py:320 `_do_internal`): a step is `gradient_accumulation_count`
        batches on each replica in every mode (model.py:1011 runs `repeat_count *
        gradient_accumulation_count` iterations; pipeline.py passes the count to the
        pipeline for inference too), `steps` counts the steps of all replicas, and a
        dataset of known length must hold whole executions (model.py:490-509).
        """
        if steps is not None:
            steps = _check_count(steps, "steps_per_epoch" if mode == "fit" else "steps")
        accumulation = self.gradient_accumulation_count
        replicas = self._ipu_replica_count()
        per_run = steps_per_run or 1
        steps_word = "Steps per epoch" if mode == "fit" else "Steps"
        dataset_length, full_batches = None, None
        if isinstance(x, tf.data.Dataset):
            cardinality = int(x.cardinality())
            if cardinality >= 0:
                dataset_length = cardinality
            elif steps is None:
                # The original's words for an infinite or unknown length (model.py:421).
                raise ValueError(
                    "When using an infinitely repeating dataset, you must provide the number of "
                    "steps per epoch (steps_per_epoch)."
                )
        else:
            full_batches = _full_batches(x, batch_size)
        name = type(self).__name__
        what = (
            "number of steps in an epoch 'steps_per_epoch'"
            if mode == "fit"
            else "number of steps 'steps'"
        )
        if steps is not None:
            # model.py:432-459.
            if steps_per_run is not None and steps % (steps_per_run * replicas):
                loop = {"fit": "training", "evaluate": "evaluation", "predict": "inference"}[mode]
                raise ValueError(
                    f"{name} requires the {what} ({steps}) to be evenly divisible by the number "
                    f"of steps per execution of the on-device {loop} loop 'steps_per_run' "
                    f"({steps_per_run}) multiplied by the replication factor ({replicas})."
                )
            if steps_per_run is None and steps % replicas:
                raise ValueError(
                    f"{name} requires the {what} ({steps}) to be evenly divisible by the "
                    f"replication factor ({replicas})."
                )
            available = dataset_length if dataset_length is not None else full_batches
            if available is not None and steps * accumulation > available:
                # model.py:348 `check_dataset_not_exhausted`.
                raise ValueError(
                    f"{steps_word} times gradient accumulation count ({steps} x {accumulation}) "
                    f"is greater than the number of mini-batches in the dataset ({available})."
                )
            return steps // replicas
        unit = accumulation * replicas * per_run
        product = (
            f"the gradient accumulation count ({accumulation}) multiplied by the replication "
            f"factor ({replicas})"
        )
        if steps_per_run is not None:
            product += f" multiplied by steps_per_run ({steps_per_run})"
        if dataset_length is not None and dataset_length % unit:
            # model.py:490-509: the mini-batches of a dataset of known length fill whole
            # executions, else it is an error (array data are rounded down instead).
            if steps_per_run is None:
                rule = (
                    f"the gradient accumulation count ({accumulation}) multiplied by the "
                    f"replication factor ({replicas})"
                )
            else:
                rule = (
                    f"the product of 'steps_per_run' ({steps_per_run}), the gradient "
                    f"accumulation count ({accumulation}), and the replication factor "
                    f"({replicas})."
                )
            raise ValueError(
                f"{name} requires the number of mini-batches in the dataset ({dataset_length}) "
                f"to be evenly divisible by {rule}"
            )
        if full_batches is None:
            return None
        # model.py:356-410 `derive_steps_per_epoch` (array data): whole executions of every
        # replica, the mini-batches left over dropped with a warning.
        if full_batches < unit:
            raise ValueError(
                f"The number of mini-batches in the dataset ({full_batches}) must be at least "
                f"{product}."
            )
        executions = full_batches // unit
        if full_batches % unit:
            steps_name = "steps per epoch (steps_per_epoch)" if mode == "fit" else "steps"
            tf_logging.warning(
                f" The number of mini-batches in the dataset ({full_batches}) must be a "
                f"multiple of {product}. Samples have been dropped to give a dataset of "
                f"{executions * unit} mini-batches. Adjust the size of the supplied dataset or "
                f"specify the {steps_name} if you do not want this to happen."
            )
        return executions * per_run

    @contextlib.contextmanager
    def _first_api_execution(self, steps_per_run: int) -> Iterator[None]:
        if self._steps_per_execution is None:
            self._assert_compile_was_called()
        self._check_pipeline_stage_count()
        saved = self._steps_per_execution.numpy()
        # Keras counts in steps; each step of this API, in fit, evaluate and predict alike,
        # is `gradient_accumulation_count` batches (see `_original_steps`).
        self._steps_per_execution.assign(steps_per_run)
        self._ipu.step_batches = self.gradient_accumulation_count
        try:
            yield
        finally:
            self._ipu.step_batches = 1
            self._steps_per_execution.assign(saved)

    def _check_pipeline_stage_count(self) -> None:
        """A pipelined model needs two stages or more: the original runs fit, evaluate and
        predict of its pipelined models through `pipelining_ops.pipeline`, which refuses
        fewer when it is built (pipelining_ops.py:743; pipeline.py:434, 1392)."""
        if self._ipu.pipelining_steps is None:
            return
        records = self._pipeline_records() or []
        stages = self._ipu.pipeline_stage_count or len({r.pipeline_stage for r in records})
        if stages < 2:
            raise ValueError("Pipeline requires at least two computational stages.")

    def _check_fit_options(self) -> None:
        # Steps are weight updates, so an execution is always a whole number of them.
        return None

    def make_train_function(self, force=False):
        return KerasExtensions.make_train_function(self, force)


class Model(FirstAPIModel, functional.Functional):
    """A Keras functional model for one IPU: `Model(inputs, outputs, gradient_accumulation_count)`."""

    def __init__(self, inputs, outputs, gradient_accumulation_count=1, **kwargs):
        functional.Functional.__init__(self, inputs=inputs, outputs=outputs, **kwargs)
        self._first_api_setup(gradient_accumulation_count)


class Sequential(FirstAPIModel, sequential.Sequential):
    """A Keras Sequential model for one IPU."""

    def __init__(self, layers=None, gradient_accumulation_count=1, name=None, **kwargs):
        if layers is not None:
            if not isinstance(layers, (list, tuple)):
                # The original's words (tensorflow/python/ipu/keras/model.py IPUSequential).
                raise ValueError("IPU Sequential requires a list of Layers.")
            for layer in layers:
                # `keras.Input(...)` (a Keras tensor) is accepted as in stock Keras.
                if not isinstance(layer, tf_keras.layers.Layer) and not hasattr(
                    layer, "_keras_history"
                ):
                    raise ValueError(
                        "An IPU Sequential's list of Layers may only contain Keras Layers."
                    )
        sequential.Sequential.__init__(self, layers=None, name=name)
        with self._building():
            for layer in layers or []:
                self.add(layer)
        self._first_api_setup(gradient_accumulation_count)

    def add(self, layer):
        with self._building():
            return super().add(layer)

    def build(self, input_shape=None):
        with self._building():
            return super().build(input_shape)


def _full_batches(x, batch_size) -> int | None:
    """The whole batches of array data (the original drops a partial batch, model.py:111-117),
    None when their number is not known before the data are read."""
    flat = tf.nest.flatten(x)
    if not flat or not all(hasattr(t, "shape") and len(t.shape) for t in flat):
        return None
    samples = flat[0].shape[0]
    if samples is None:
        return None
    return int(samples) // (batch_size or 32)
