"""ALS optimizers whose moments are kept in loss-scaled units: ALSOptimizerSGD, ALSOptimizerAdam
and ALSOptimizerRMSProp (graphcore/keras keras/ipu/optimizers/gradient_descent.py, adam.py,
rmsprop.py). Their updates are the original's formulas, computed in float32, with `sigma` the
loss scaling factor after this step's update and `sigma_prev` the one before it.

As in the original, the RMSProp update's averaging coefficient is the optimizer's `decay`
hyperparameter (the learning rate decay, 0 unless given), not `rho`.
"""

from __future__ import annotations

import tensorflow as tf
from tf_keras.optimizers import legacy

from openipu._src.keras.optimizers.als_optimizer import ALSDefaults, ALSOptimizer
from openipu._src.keras.optimizers.parameter_unscaling import ParameterUnscalingOptimizer


def _assign(variable, value):
    return variable.assign(tf.cast(value, variable.dtype), use_locking=False).op


def _f32(value):
    return tf.cast(value, tf.float32)


class _ParameterUnscalingSGD(ParameterUnscalingOptimizer, legacy.SGD):
    _fixed_arguments = {"nesterov": False, "name": "SGD_HypLSFScale"}

    def _resource_apply_dense(self, grad, var, apply_state=None):
        coefficients = self._coefficients(var, apply_state)
        grad, eta, sigma = _f32(grad), _f32(coefficients["lr_t"]), coefficients["lsf"]
        if not self._momentum:
            return _assign(var, _f32(var) - (eta / sigma) * grad)
        alpha = _f32(coefficients["momentum"])
        m = self.get_slot(var, "momentum")
        m_new = alpha * sigma / coefficients["prev_lsf"] * _f32(m) + grad
        return tf.group(_assign(m, m_new), _assign(var, _f32(var) - (eta / sigma) * m_new))


class _ParameterUnscalingAdam(ParameterUnscalingOptimizer, legacy.Adam):
    _fixed_arguments = {"amsgrad": False, "name": "Adam_HypLSFScale"}

    def _resource_apply_dense(self, grad, var, apply_state=None):
        coefficients = self._coefficients(var, apply_state)
        grad, sigma = _f32(grad), coefficients["lsf"]
        v, m = self.get_slot(var, "v"), self.get_slot(var, "m")
        beta_1, beta_2 = _f32(coefficients["beta_1_t"]), _f32(coefficients["beta_2_t"])
        v_new = _f32(v) * beta_2 * sigma * sigma + (1 - beta_2) * grad * grad
        m_new = _f32(m) * beta_1 * sigma + (1 - beta_1) * grad
        beta_1_power = _f32(coefficients["beta_1_power"])
        beta_2_power = _f32(coefficients["beta_2_power"])
        eta = _f32(coefficients["lr_t"]) * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        epsilon = _f32(coefficients["epsilon"]) * sigma
        var_new = _f32(var) - eta * m_new / (tf.sqrt(v_new) + epsilon)
        return tf.group(_assign(var, var_new), _assign(m, m_new), _assign(v, v_new))


class _ParameterUnscalingRMSProp(ParameterUnscalingOptimizer, legacy.RMSprop):
    _fixed_arguments = {"name": "RMSProp_HypLSFScale"}

    def _resource_apply_dense(self, grad, var, apply_state=None):
        coefficients = self._coefficients(var, apply_state)
        grad = _f32(grad)
        beta = self._get_hyper("decay", tf.float32)  # the original's choice (see the module)
        eta = _f32(coefficients["lr_t"])
        sigma, sigma_prev = coefficients["lsf"], coefficients["prev_lsf"]
        epsilon = _f32(coefficients["epsilon"]) * sigma * sigma
        m = self.get_slot(var, "momentum") if self._momentum else 0
        mu = _f32(coefficients["momentum"])
        v = self.get_slot(var, "rms")
        v_new = (sigma * sigma) / (sigma_prev * sigma_prev) * beta * _f32(v) + (
            1.0 - beta
        ) * grad * grad
        if self._momentum and self.centered:
            h = self.get_slot(var, "mg")
            h_new = beta * sigma / sigma_prev * _f32(h) + (1.0 - beta) * grad
            m_new = mu * _f32(m) + grad / tf.sqrt(v_new + epsilon + h_new * h_new)
            return tf.group(
                _assign(h, h_new),
                _assign(v, v_new),
                _assign(var, _f32(var) - eta * m_new),
                _assign(m, m_new),
            )
        m_new = _f32(m) * mu + grad / tf.sqrt(v_new + epsilon)
        updates = [_assign(var, _f32(var) - eta * m_new)]
        if self._momentum:
            updates.append(_assign(m, m_new))
        return tf.group(*updates)


_ALS_ARGUMENTS = (
    "initial_loss_scaling_factor",
    "update_frequency",
    "increase_factor",
    "max_loss_scaling_factor",
    "accumulate_statistics_over_update_period",
    "ratio_threshold",
    "captured_grads_only",
    "lpf_alpha",
    "histogram_bin_edge",
)


class _ParameterUnscalingALSOptimizer(ALSOptimizer):
    """An ALSOptimizer around one of the optimizers above, made from their arguments."""

    _inner_type: type
    _inner_arguments: tuple[str, ...]

    def __init__(self, name, **arguments) -> None:
        als = {key: arguments.pop(key) for key in _ALS_ARGUMENTS if key in arguments}
        initial = als.get("initial_loss_scaling_factor", ALSDefaults.initial_loss_scaling_factor)
        inner = self._inner_type(**arguments, loss_scaling_factor=initial)
        super().__init__(inner, name=name, **als)

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("inner_optimizer_type")
        inner = config.pop("inner_optimizer_config")
        config.update({key: inner[key] for key in self._inner_arguments})
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        del custom_objects
        return cls(**config)


def _own_arguments(cls, arguments: dict) -> dict:
    """The arguments of the wrapped optimizer among a constructor's `locals()`."""
    return {key: arguments[key] for key in cls._inner_arguments}


class ALSOptimizerSGD(_ParameterUnscalingALSOptimizer):
    """An SGD optimizer that performs automatic loss scaling, with its moments kept scaled."""

    _inner_type = _ParameterUnscalingSGD
    _inner_arguments = ("learning_rate", "momentum")

    def __init__(self, learning_rate=0.01, momentum=0.0, name="ALSOptimizerSGD", **als) -> None:
        super().__init__(name, **_own_arguments(ALSOptimizerSGD, locals()), **als)


class ALSOptimizerAdam(_ParameterUnscalingALSOptimizer):
    """An Adam optimizer that performs automatic loss scaling, with its moments kept scaled."""

    _inner_type = _ParameterUnscalingAdam
    _inner_arguments = ("learning_rate", "beta_1", "beta_2", "epsilon")

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-7,
        name="ALSOptimizerAdam",
        **als,
    ) -> None:
        super().__init__(name, **_own_arguments(ALSOptimizerAdam, locals()), **als)


class ALSOptimizerRMSProp(_ParameterUnscalingALSOptimizer):
    """An RMSProp optimizer that performs automatic loss scaling, with its moments kept scaled."""

    _inner_type = _ParameterUnscalingRMSProp
    _inner_arguments = ("learning_rate", "rho", "momentum", "epsilon", "centered")

    def __init__(
        self,
        learning_rate=0.001,
        rho=0.9,
        momentum=0.0,
        epsilon=1e-7,
        centered=False,
        name="ALSOptimizerRMSProp",
        **als,
    ) -> None:
        super().__init__(name, **_own_arguments(ALSOptimizerRMSProp, locals()), **als)
