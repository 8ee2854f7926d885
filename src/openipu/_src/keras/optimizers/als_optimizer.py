"""Automatic loss scaling (`keras.ipu.optimizers.ALSOptimizer`), as graphcore/keras
keras/ipu/optimizers/als_optimizer.py.

The wrapper scales the loss by its loss scaling factor (LSF) before gradients are
taken and divides the gradients by it before the wrapped optimizer applies them.
Every step it counts the float16 gradients (and those captured by
`keras.ipu.layers` capture layers) whose magnitude reaches `histogram_bin_edge`
in a two-bin histogram; every `update_frequency` steps the LSF is multiplied by
`increase_factor`, or divided by it when the overflowing fraction exceeds
`ratio_threshold` (an LSF that would not be finite, not below
`max_loss_scaling_factor` or below 1 is kept), and the histogram is reset.

The ALS hyperparameters are read when a step is traced: changing one after a
program was traced takes effect when it is traced again.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.keras.optimizers.optimizer_wrapper import OptimizerWrapper
from openipu._src.keras.optimizers.parameter_unscaling import (
    ParameterUnscalingOptimizer,
    _is_power_of_two,
)
from openipu._src.ops import statistics_ops


def _read_only(name: str, get) -> property:
    """A property computed by `get`, whose setting raises the original's error."""

    def refuse(self, _) -> None:
        raise ValueError(f"{name} is a read only property.")

    return property(get, refuse)


class ALSDefaults:
    initial_loss_scaling_factor = 1
    update_frequency = 8
    increase_factor = 2
    max_loss_scaling_factor = 32768
    accumulate_statistics_over_update_period = True
    ratio_threshold = 10e-6
    captured_grads_only = False
    lpf_alpha = 0.0
    histogram_bin_edge = 2**13


class ALSOptimizer(OptimizerWrapper):
    """Wraps `opt` and scales its loss automatically (see the module)."""

    def __init__(
        self,
        opt,
        initial_loss_scaling_factor=ALSDefaults.initial_loss_scaling_factor,
        update_frequency=ALSDefaults.update_frequency,
        increase_factor=ALSDefaults.increase_factor,
        max_loss_scaling_factor=ALSDefaults.max_loss_scaling_factor,
        accumulate_statistics_over_update_period=(
            ALSDefaults.accumulate_statistics_over_update_period
        ),
        ratio_threshold=ALSDefaults.ratio_threshold,
        captured_grads_only=ALSDefaults.captured_grads_only,
        lpf_alpha=ALSDefaults.lpf_alpha,
        histogram_bin_edge=ALSDefaults.histogram_bin_edge,
        name="ALSOptimizer",
    ) -> None:
        super().__init__(opt, name)
        # The setters check the values, in the original's order.
        self.update_frequency = update_frequency
        self.increase_factor = increase_factor
        self.max_loss_scaling_factor = max_loss_scaling_factor
        self.ratio_threshold = ratio_threshold
        self.initial_loss_scaling_factor = initial_loss_scaling_factor
        self.accumulate_statistics_over_update_period = accumulate_statistics_over_update_period
        self.captured_grads_only = captured_grads_only
        self.lpf_alpha = lpf_alpha
        self.histogram_bin_edge = histogram_bin_edge
        constant = tf_keras.initializers.Constant
        self._hist = self.add_weight("gradient_histogram", (2,), tf.float32, trainable=False)
        self._n = self.add_weight(
            "lsf_update_counter", (), tf.int32, initializer=constant(0), trainable=False
        )
        self._lsf = self.add_weight(
            "loss_scaling_factor",
            (),
            tf.float32,
            initializer=constant(initial_loss_scaling_factor),
            trainable=False,
        )
        self._prev_lsf = self.add_weight(
            "prev_loss_scaling_factor",
            (),
            tf.float32,
            initializer=constant(initial_loss_scaling_factor),
            trainable=False,
        )

    # Loss and gradients ------------------------------------------------------------------------

    def get_scaled_loss(self, loss):
        """`loss` times the current loss scaling factor."""
        return tf.cast(self._lsf, loss.dtype) * loss

    def _transform_loss(self, loss):
        # `minimize` takes the gradients of the scaled loss (the original's _compute_gradients).
        return self.get_scaled_loss(super()._transform_loss(loss))

    def get_gradients(self, loss, params):
        """The gradients of the scaled loss with respect to `params`."""
        return self._opt.get_gradients(self.get_scaled_loss(loss), params)

    def apply_gradients(
        self, grads_and_vars, captured_grads=None, name=None, experimental_aggregate_gradients=True
    ):
        """Collects the scaled gradients' statistics, applies the unscaled gradients with the
        wrapped optimizer and updates the loss scaling factor."""
        del experimental_aggregate_gradients
        rescaled = []
        for gradient, variable in grads_and_vars:
            self._add_grads(gradient)
            rescaled.append((self._unscaled(gradient), variable))
        self._do_lsf_update(captured_grads)
        return self._opt.apply_gradients(rescaled, name=name)

    def _unscaled(self, gradient):
        if gradient is None:
            return None
        if isinstance(self._opt, ParameterUnscalingOptimizer):
            # The wrapped optimizer's update unscales (parameter_unscaling_optimizer.py).
            return gradient
        return gradient / tf.cast(self.loss_scaling_factor, gradient.dtype)

    # Statistics and the loss scaling factor ----------------------------------------------------

    def _updated_hist(self, gradient, hist):
        """`hist` plus the counts of float16 `gradient` below and from the bin edge."""
        if gradient is None or gradient.dtype != tf.float16:
            return hist
        values = tf.reshape(tf.cast(gradient, tf.float32), [-1])
        edge = tf.constant([float(self.histogram_bin_edge)], tf.float32)
        return statistics_ops.histogram_update(hist, values, edge, absolute_of_input=True)

    def _lsf_update_due(self) -> tf.Tensor:
        if self.update_frequency == 1:
            return tf.constant(True)
        return (self._n > 0) & (tf.math.floormod(self._n, self.update_frequency) == 0)

    def _should_update_hist(self) -> tf.Tensor:
        return tf.constant(bool(self.accumulate_statistics_over_update_period)) | (
            self._lsf_update_due()
        )

    def _store_hist(self, hist, skip_lpf=False) -> None:
        alpha = float(self.lpf_alpha)
        if isinstance(skip_lpf, bool):
            skip_lpf = tf.constant(skip_lpf)
        filtered = alpha * self._hist + (1.0 - alpha) * hist
        self._hist.assign(tf.where(skip_lpf, hist, filtered))

    def _add_grads(self, gradient) -> None:
        counted = self._should_update_hist() & tf.constant(not self.captured_grads_only)
        self._store_hist(tf.where(counted, self._updated_hist(gradient, self._hist), self._hist))

    def _add_captured_grads(self, hist, captured_grads):
        for gradients in (captured_grads or {}).values():
            for gradient in gradients if isinstance(gradients, (list, tuple)) else [gradients]:
                hist = self._updated_hist(gradient, hist)
        return hist

    def _updated_lsf(self, hist) -> tf.Tensor:
        ratio = hist[1] / tf.reduce_sum(hist)
        factor = float(self.increase_factor)
        lsf = tf.where(ratio > self.ratio_threshold, self._lsf / factor, self._lsf * factor)
        lsf = tf.where(tf.math.is_finite(lsf), lsf, self._lsf)
        lsf = tf.where(lsf < float(self.max_loss_scaling_factor), lsf, self._lsf)
        return tf.where(lsf >= 1.0, lsf, self._lsf)

    def _do_lsf_update(self, captured_grads=None, weight_update=None) -> None:
        """Adds `captured_grads` to the statistics and, on a weight update (a boolean
        tensor; every call without one), counts it and updates the factor when due."""
        due = self._lsf_update_due()
        if weight_update is not None:
            due = due & weight_update
        hist = tf.where(
            self._should_update_hist(),
            self._add_captured_grads(self._hist, captured_grads),
            self._hist,
        )
        lsf = tf.where(due, self._updated_lsf(hist), self._lsf)
        prev_lsf = tf.where(tf.equal(lsf, self._lsf), self._prev_lsf, self._lsf)
        hist = tf.where(due, tf.zeros_like(hist), hist)
        counted = (
            self._n + 1 if weight_update is None else tf.where(weight_update, self._n + 1, self._n)
        )
        n = tf.where(due, 0, counted)
        self._lsf.assign(lsf)
        self._prev_lsf.assign(prev_lsf)
        self._store_hist(hist, skip_lpf=due)
        self._n.assign(n)
        if isinstance(self._opt, ParameterUnscalingOptimizer):
            self._opt._lsf = tf.convert_to_tensor(self._lsf)  # noqa: SLF001 - its contract
            self._opt._prev_lsf = tf.convert_to_tensor(self._prev_lsf)  # noqa: SLF001

    def reset(self) -> None:
        """Resets the statistics and the loss scaling factor."""
        self._hist.assign(tf.zeros_like(self._hist))
        self._n.assign(0)
        self._lsf.assign(float(self.initial_loss_scaling_factor))

    # Configuration -----------------------------------------------------------------------------

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "initial_loss_scaling_factor": self.initial_loss_scaling_factor,
                "update_frequency": self.update_frequency,
                "increase_factor": self.increase_factor,
                "max_loss_scaling_factor": self.max_loss_scaling_factor,
                "accumulate_statistics_over_update_period": (
                    self.accumulate_statistics_over_update_period
                ),
                "ratio_threshold": self.ratio_threshold,
                "captured_grads_only": self.captured_grads_only,
                "histogram_bin_edge": self.histogram_bin_edge,
            }
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        del custom_objects
        config = dict(config)
        inner = OptimizerWrapper.inner_from_config(config)
        return cls(inner, **config)

    # Read-only state ---------------------------------------------------------------------------

    histogram = _read_only("histogram", lambda self: tf.convert_to_tensor(self._hist))
    normalized_histogram = _read_only(
        "normalized_histogram",
        lambda self: tf.math.divide_no_nan(self.histogram, tf.reduce_sum(self.histogram)),
    )
    loss_scaling_factor = _read_only(
        "loss_scaling_factor", lambda self: tf.convert_to_tensor(self._lsf)
    )
    previous_loss_scaling_factor = _read_only(
        "previous_loss_scaling_factor", lambda self: tf.convert_to_tensor(self._prev_lsf)
    )
    update_counter = _read_only("update_counter", lambda self: tf.convert_to_tensor(self._n))
    decrease_factor = _read_only("decrease_factor", lambda self: 1.0 / self.increase_factor)

    @property
    def supports_captured_grads(self) -> bool:
        return True


def _check_update_frequency(self, val) -> None:
    if val <= 0:
        raise ValueError("update_frequency must be nonzero and positive")


def _check_power_of_two(name: str):
    def check(self, val) -> None:
        if not _is_power_of_two(val):
            raise ValueError(f"{name} must be a power of two")

    return check


def _check_below_maximum(self, val) -> None:
    # The original checks a new maximum against the current one as it checks the initial
    # factor, with the same message (als_optimizer.py).
    if hasattr(self, "_max_loss_scaling_factor") and val >= self.max_loss_scaling_factor:
        raise ValueError("initial_loss_scaling_factor must be less than max_loss_scaling_factor")


def _check_initial_factor(self, val) -> None:
    _check_power_of_two("initial_loss_scaling_factor")(self, val)
    _check_below_maximum(self, val)
    if (
        hasattr(self, "_max_loss_scaling_factor")
        and val * self.increase_factor >= self.max_loss_scaling_factor
    ):
        raise ValueError(
            "initial_loss_scaling_factor x increase_factor must be less than max_loss_scaling_factor"
        )


def _check_maximum(self, val) -> None:
    _check_power_of_two("max_loss_scaling_factor")(self, val)
    _check_below_maximum(self, val)


def _check_ratio_threshold(self, val) -> None:
    if val >= 1.0 or val <= 0.0:
        raise ValueError("ratio_threshold must be greater than zero and less than one")


def _setting(attribute: str, check=None, resets: bool = False) -> property:
    """A hyperparameter kept in `attribute`: `check(self, value)` runs first; with `resets`,
    changing it resets the statistics (the original's setters)."""

    def get(self):
        return getattr(self, attribute)

    def set_(self, val) -> None:
        if check is not None:
            check(self, val)
        if resets and hasattr(self, attribute) and val != getattr(self, attribute):
            self.reset()
        object.__setattr__(self, attribute, val)

    return property(get, set_)


ALSOptimizer.update_frequency = _setting("_update_frequency", _check_update_frequency)
ALSOptimizer.increase_factor = _setting("_increase_factor", _check_power_of_two("increase_factor"))
ALSOptimizer.initial_loss_scaling_factor = _setting("_initial_lsf", _check_initial_factor)
ALSOptimizer.max_loss_scaling_factor = _setting("_max_loss_scaling_factor", _check_maximum)
ALSOptimizer.ratio_threshold = _setting("_ratio_threshold", _check_ratio_threshold)
ALSOptimizer.accumulate_statistics_over_update_period = _setting("_accumulate_stats")
ALSOptimizer.captured_grads_only = _setting("_captured_grads_only", resets=True)
ALSOptimizer.lpf_alpha = _setting("_lpf_alpha", resets=True)
ALSOptimizer.histogram_bin_edge = _setting("_histogram_bin_edge", resets=True)
