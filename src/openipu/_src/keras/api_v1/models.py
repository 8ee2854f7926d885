"""The first IPU Keras API: `ipu.keras.Model` and `ipu.keras.Sequential` (tensorflow2-support.txt).

These are thin facades over the same engine as the later API
(`extensions.KerasExtensions`): what differs is the interface.

- They can only be called through `fit`, `evaluate` and `predict`, inside an
  IPUStrategy scope (calling them directly is a ValueError).
- Gradient accumulation is a constructor argument and sums the gradients.
- A "step" is one weight update: with a gradient accumulation count of N, one
  step (and one progress-bar tick) consumes N batches, `steps_per_epoch` counts
  such steps, and `fit(steps_per_run=S)` runs S of them per host call.
- `fit` keeps the first API's argument rules (no `batch_size` or `y` with a
  dataset; validation and sample weights are not supported).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import tensorflow as tf
import tf_keras
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
        self._check_dataset_length(x, steps_per_epoch)
        with self._first_api_execution(runs, "fit"), self._fit_prefetch_depth(prefetch_depth):
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
        with self._first_api_execution(runs, "evaluate", batches_per_step=1):
            return KerasExtensions.evaluate(
                self, x, y, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks
            )

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
        with self._first_api_execution(runs, "predict", batches_per_step=1):
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
        return batch_size

    def _check_dataset_length(self, x, steps_per_epoch) -> None:
        if not isinstance(x, tf.data.Dataset):
            return
        size = int(x.cardinality())
        if size == tf.data.INFINITE_CARDINALITY and steps_per_epoch is None:
            # The original's words (tensorflow/python/ipu/keras/model.py `_do_internal`).
            raise ValueError(
                "When using an infinitely repeating dataset, you must provide the number of "
                "steps per epoch (steps_per_epoch)."
            )
        if size >= 0 and steps_per_epoch is not None:
            needed = steps_per_epoch * self.gradient_accumulation_count
            if needed > size:
                raise ValueError(
                    f"Steps per epoch times gradient accumulation count ({steps_per_epoch} x "
                    f"{self.gradient_accumulation_count}) is greater than the number of "
                    f"mini-batches in the dataset ({size})."
                )

    @contextlib.contextmanager
    def _first_api_execution(
        self, steps_per_run: int, mode: str, batches_per_step: int | None = None
    ) -> Iterator[None]:
        if self._steps_per_execution is None:
            self._assert_compile_was_called()
        per_step = (
            self.gradient_accumulation_count if batches_per_step is None else batches_per_step
        )
        saved = self._steps_per_execution.numpy()
        # Keras counts in steps; each step of this API is `per_step` batches.
        self._steps_per_execution.assign(steps_per_run)
        self._ipu.step_batches = per_step
        try:
            yield
        finally:
            self._ipu.step_batches = 1
            self._steps_per_execution.assign(saved)

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
