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
from tensorflow.python.framework import indexed_slices
from tensorflow.python.ops import resource_variable_ops

from openipu._src.optimizers import replicas

#: What a wrapper wraps: a `tf.compat.v1.train.Optimizer` or a Keras optimizer (both
#: untyped, so Any to the checker).
Optimizer: TypeAlias = Any


def check_grads_and_vars(grads_and_vars) -> list[tuple]:
    """The (gradient, variable) pairs, checked as the stock v1 `Optimizer.apply_gradients`.

    The original's wrappers forward `apply_gradients` to the wrapped (stock) optimizer,
    so its checks, types and words are those of tensorflow/python/training/optimizer.py
    (apply_gradients, :569-603): under a strategy, the pairs without a gradient are
    dropped and nothing else is checked here (:569-577; the strategy's own reduction
    fails on what it cannot take); otherwise gradients come back as tensors or slices.
    No dtype is checked (the update ops refuse what they cannot apply).
    """
    if tf.distribute.has_strategy():
        if tf.distribute.in_cross_replica_context():
            raise RuntimeError(
                "Use `_distributed_apply()` instead of `apply_gradients()` in a "
                "cross-replica context."
            )
        # get_filtered_grad_fn (optimizer.py:49-62): iterating and unpacking fail as Python's.
        return [(g, v) for g, v in grads_and_vars if g is not None]
    pairs = tuple(grads_and_vars)  # a TypeError for what is not iterable, as :580
    if not pairs:
        raise ValueError("No variables provided.")
    checked = []
    for gradient, variable in pairs:  # Python's unpacking errors, as :584
        if gradient is not None:
            gradient = _as_tensor_or_slices(gradient)
        _check_variable(variable)
        checked.append((gradient, variable))
    if all(gradient is None for gradient, _ in checked):
        raise ValueError(f"No gradients provided for any variable: {[str(v) for _, v in checked]}.")
    return checked


def _as_tensor_or_slices(gradient):
    try:
        gradient = indexed_slices.convert_to_tensor_or_indexed_slices(gradient)
    except TypeError:
        raise TypeError(
            f"Gradient must be convertible to a Tensor or IndexedSlices, or None: {gradient}"
        ) from None
    if not isinstance(gradient, (tf.Tensor, tf.IndexedSlices)):  # a SparseTensor
        raise TypeError(f"Gradient must be a Tensor, IndexedSlices, or None: {gradient}")
    return gradient


def _check_variable(variable) -> None:
    """What the stock `_get_processor` (optimizer.py:205-221) refuses when it is built.

    Eagerly every value is taken (what cannot be updated fails when it is). In a graph, a
    value without `op` fails reading it (an AttributeError), and one that is neither a
    variable nor a tensor is a NotImplementedError; a tensor fails when it is updated.
    """
    if tf.executing_eagerly():
        return
    if resource_variable_ops.is_resource_variable(variable) and not variable._in_graph_mode:  # noqa: SLF001
        return
    if variable.op.type == "VarHandleOp":
        return
    if not isinstance(variable, (tf.Variable, tf.Tensor)):
        raise NotImplementedError("Trying to optimize unsupported type ", variable)


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
        pairs = check_grads_and_vars(grads_and_vars)
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
