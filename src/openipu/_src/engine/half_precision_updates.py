"""In-place updates of half-precision variables, step by step where overflows saturate.

TensorFlow's fused training ops (`ResourceApplyAdam`, `ResourceApplyRMSProp`, ...) compute
their update inside one kernel, where a half-precision `grad * grad` that overflows is an
infinity, and `inf - inf` the next step a NaN. On the IPU the backend lowers them to
elementwise operations that, without `nanoo`, saturate at the largest half value
(`floating_point_checks`), so training goes on: the original's ALS tests
(keras/ipu/optimizers/als_optimizer_test.py, the saturation scenarios) train float16 layers
with Adam through such gradients. In a region that saturates half-precision overflows,
the fused ops of half-precision variables are built here from elementwise operations
(each saturated by the region's op callback), with the formulas of the ops' documentation
(tensorflow/core/ops/training_ops.cc); elsewhere they run as TensorFlow's kernels. So are
`assign_add`/`assign_sub` of half-precision variables (gradient accumulators among them):
their in-place addition has no output the op callback could saturate.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.ops import gen_resource_variable_ops, gen_training_ops

from openipu._src.engine import floating_point_checks
from openipu._src.integration import saturating_updates

_Arguments = dict[str, Any]


def _read(handle: tf.Tensor) -> tf.Tensor:
    return gen_resource_variable_ops.read_variable_op(handle, tf.float16)


def _assign(handle: tf.Tensor, value: tf.Tensor) -> tf.Operation:
    return gen_resource_variable_ops.assign_variable_op(handle, value)


def _half(value: Any) -> tf.Tensor:
    return tf.cast(value, tf.float16)


def _adam(a: _Arguments) -> tf.Operation:
    g = a["grad"]
    beta1, beta2, eps = _half(a["beta1"]), _half(a["beta2"]), _half(a["epsilon"])
    lr = _half(a["lr"]) * tf.sqrt(1 - _half(a["beta2_power"])) / (1 - _half(a["beta1_power"]))
    m = _read(a["m"]) + (g - _read(a["m"])) * (1 - beta1)
    v = _read(a["v"]) + (g * g - _read(a["v"])) * (1 - beta2)
    step = (m * beta1 + (1 - beta1) * g) if a.get("use_nesterov") else m
    var = _read(a["var"]) - lr * step / (tf.sqrt(v) + eps)
    return tf.group(_assign(a["m"], m), _assign(a["v"], v), _assign(a["var"], var))


def _rms_prop(a: _Arguments) -> tf.Operation:
    g, rho = a["grad"], _half(a["rho"])
    ms = _read(a["ms"]) + (g * g - _read(a["ms"])) * (1 - rho)
    mom = _half(a["momentum"]) * _read(a["mom"]) + _half(a["lr"]) * g / tf.sqrt(
        ms + _half(a["epsilon"])
    )
    var = _read(a["var"]) - mom
    return tf.group(_assign(a["ms"], ms), _assign(a["mom"], mom), _assign(a["var"], var))


def _centered_rms_prop(a: _Arguments) -> tf.Operation:
    g, rho = a["grad"], _half(a["rho"])
    mg = _read(a["mg"]) + (g - _read(a["mg"])) * (1 - rho)
    ms = _read(a["ms"]) + (g * g - _read(a["ms"])) * (1 - rho)
    denominator = ms - mg * mg + _half(a["epsilon"])
    mom = _half(a["momentum"]) * _read(a["mom"]) + _half(a["lr"]) * g / tf.sqrt(denominator)
    var = _read(a["var"]) - mom
    return tf.group(
        _assign(a["mg"], mg), _assign(a["ms"], ms), _assign(a["mom"], mom), _assign(a["var"], var)
    )


def _adagrad_v2(a: _Arguments) -> tf.Operation:
    g = a["grad"]
    accum = _read(a["accum"])
    if a.get("update_slots", True):
        accum = accum + g * g
    var = _read(a["var"]) - _half(a["lr"]) * g / (tf.sqrt(accum) + _half(a["epsilon"]))
    return tf.group(_assign(a["accum"], accum), _assign(a["var"], var))


def _keras_momentum(a: _Arguments) -> tf.Operation:
    g, lr, momentum = a["grad"], _half(a["lr"]), _half(a["momentum"])
    accum = _read(a["accum"]) * momentum - lr * g
    step = accum * momentum - lr * g if a.get("use_nesterov") else accum
    return tf.group(_assign(a["accum"], accum), _assign(a["var"], _read(a["var"]) + step))


def _momentum(a: _Arguments) -> tf.Operation:
    g, lr, momentum = a["grad"], _half(a["lr"]), _half(a["momentum"])
    accum = _read(a["accum"]) * momentum + g
    step = g * lr + accum * momentum * lr if a.get("use_nesterov") else accum * lr
    return tf.group(_assign(a["accum"], accum), _assign(a["var"], _read(a["var"]) - step))


def _gradient_descent(a: _Arguments) -> tf.Operation:
    var = _read(a["var"]) - _half(a["alpha"]) * a["delta"]
    return _assign(a["var"], var)


#: The fused op's Python function -> its update from elementwise operations.
_STEPWISE: dict[str, Callable[[_Arguments], tf.Operation]] = {
    "resource_apply_adam": _adam,
    "resource_apply_rms_prop": _rms_prop,
    "resource_apply_centered_rms_prop": _centered_rms_prop,
    "resource_apply_adagrad_v2": _adagrad_v2,
    "resource_apply_keras_momentum": _keras_momentum,
    "resource_apply_momentum": _momentum,
    "resource_apply_gradient_descent": _gradient_descent,
}
_HALF_GRADIENT = {"resource_apply_gradient_descent": "delta"}


def _in_place_addition(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`variable.assign_add(delta)` (or `assign_sub`) as a read, an addition and an
    assignment, for a half-precision variable; None otherwise."""
    variable, delta, *rest = args
    if variable.dtype != tf.float16:
        return None
    use_locking, name, read_value = (*rest, None, None, True)[:3] if rest else (None, None, True)
    use_locking = kwargs.get("use_locking", use_locking)
    name = kwargs.get("name", name)
    read_value = kwargs.get("read_value", read_value)
    delta = tf.cast(delta, tf.float16)
    value = variable.read_value() + delta if op == "assign_add" else variable.read_value() - delta
    return variable.assign(value, use_locking=use_locking, name=name, read_value=read_value)


def _stepwise_update(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The update of `op` built step by step, or None for TensorFlow's own."""
    if not floating_point_checks.saturating_now():
        return None
    if op in ("assign_add", "assign_sub"):
        return _in_place_addition(op, args, kwargs)
    bound = inspect.signature(getattr(gen_training_ops, op)).bind(*args, **kwargs)
    arguments = dict(bound.arguments)
    gradient = arguments.get(_HALF_GRADIENT.get(op, "grad"))
    if getattr(gradient, "dtype", None) != tf.float16:
        return None
    return _STEPWISE[op](arguments)


def install() -> None:
    """Half-precision fused updates in saturating regions go step by step (idempotent)."""
    saturating_updates.install(_stepwise_update)
