"""`IpuOptimizer`: the base of the IPU optimizer wrappers, and how wrappers apply gradients.

Wrappers take `tf.compat.v1.train.Optimizer`s, as the spec says, and also Keras
optimizers (`tf.keras.optimizers.Optimizer` and the legacy ones) for applying
gradients; with a Keras optimizer, `compute_gradients` is the TF1 optimizers'
own (tape or `tf.gradients`).

Every wrapper's `apply_gradients` has the IPU meaning: each replica applies the
gradients it is given (see `replicas`). Replicas that disagree cannot be
emulated with mirrored variables; they get the mean of their gradients.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import tensorflow as tf

from openipu._src.optimizers import replicas

#: What a wrapper wraps: a `tf.compat.v1.train.Optimizer` or a Keras optimizer (both
#: untyped, so Any to the checker).
Optimizer: TypeAlias = Any


def check_grads_and_vars(grads_and_vars, what: str) -> list[tuple]:
    """The (gradient, variable) pairs, checked (rule E65); gradients as tensors or slices."""
    try:
        pairs = list(grads_and_vars)
    except TypeError:
        raise ValueError(
            f"{what}: grads_and_vars must be a list of (gradient, variable) pairs, "
            f"got {grads_and_vars!r}"
        ) from None
    if not pairs:
        raise ValueError(f"{what}: grads_and_vars is empty: give (gradient, variable) pairs")
    checked = []
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(
                f"{what}: grads_and_vars must hold (gradient, variable) pairs, got {pair!r}"
            )
        gradient, variable = pair
        if not isinstance(variable, tf.Variable):
            raise ValueError(
                f"{what}: the second element of each pair must be a tf.Variable, got {variable!r}"
            )
        if gradient is not None:
            gradient = _check_gradient(gradient, variable, what)
        checked.append((gradient, variable))
    if all(gradient is None for gradient, _ in checked):
        names = [variable.name for _, variable in checked]
        raise ValueError(f"{what}: no gradients provided for any variable: {names}")
    return checked


def _check_gradient(gradient, variable: tf.Variable, what: str):
    if not isinstance(gradient, tf.IndexedSlices):
        try:
            gradient = tf.convert_to_tensor(gradient)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{what}: the gradient of {variable.name} is not a tensor: {error}"
            ) from None
    if not (gradient.dtype.is_floating or gradient.dtype.is_complex):
        raise ValueError(
            f"{what}: the gradient of {variable.name} is not a tensor of numbers, "
            f"got dtype {gradient.dtype.name}"
        )
    return gradient


def apply_on_each_replica(opt, grads_and_vars, global_step=None, name=None):
    """`opt` applies `grads_and_vars` as each replica's own update (see the module doc)."""
    pairs = [(g, v) for g, v in grads_and_vars if g is not None]
    if isinstance(opt, IpuOptimizer):
        return opt.apply_gradients(pairs, global_step=global_step, name=name)
    # Stock optimizers sum over the replicas: R copies of g / R sum to g.
    count = replicas.summing_replica_count()
    if count > 1:
        pairs = [(_scale(g, 1.0 / count), v) for g, v in pairs]
    if isinstance(opt, tf.compat.v1.train.Optimizer):
        return opt.apply_gradients(pairs, global_step=global_step, name=name)
    applied = opt.apply_gradients(pairs, **({"name": name} if name else {}))
    if global_step is None:
        return applied
    with tf.control_dependencies([applied] if applied is not None else []):
        return tf.group(global_step.assign_add(1))


def _scale(gradient, factor: float):
    if isinstance(gradient, tf.IndexedSlices):
        values = gradient.values * tf.cast(factor, gradient.values.dtype)
        return tf.IndexedSlices(values, gradient.indices, gradient.dense_shape)
    return gradient * tf.cast(factor, gradient.dtype)


class IpuOptimizer(tf.compat.v1.train.Optimizer):
    """Wraps an optimizer; calls a subclass does not override go to the wrapped optimizer."""

    def __init__(self, opt, name: str | None = None) -> None:
        # The original (optimizers/ipu_optimizer.py:34-46) wraps any object: misuse fails
        # with an AttributeError when the wrapped object is used.
        super().__init__(use_locking=False, name=name or _name_of(opt))
        self._opt = opt

    def compute_gradients(self, loss, var_list=None, **kwargs) -> list[tuple]:
        if isinstance(self._opt, tf.compat.v1.train.Optimizer):
            return self._opt.compute_gradients(loss, var_list=var_list, **kwargs)
        return super().compute_gradients(loss, var_list=var_list, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        pairs = check_grads_and_vars(grads_and_vars, f"{type(self).__name__}.apply_gradients")
        return apply_on_each_replica(self._opt, pairs, global_step, name)

    def get_name(self) -> str:
        return _name_of(self._opt)

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self) -> list[tf.Variable]:
        variables = self._opt.variables
        return list(variables() if callable(variables) else variables)

    def __getattr__(self, name: str):
        # Only reached for names the wrapper lacks, such as Keras hyperparameters. Private
        # names stay the wrapper's own: tracking state must not be shared with the wrapped.
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return getattr(self._opt, name)


def leaf_optimizer(opt):
    """The stock optimizer at the bottom of a chain of wrappers."""
    while isinstance(opt, IpuOptimizer):
        opt = opt._opt  # noqa: SLF001
    return opt


def _name_of(opt) -> str:
    return opt.get_name() if isinstance(opt, tf.compat.v1.train.Optimizer) else opt.name
