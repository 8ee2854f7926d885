"""What the IPU Keras optimizers share: state dtypes, compute precisions, outlining knobs."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import tensorflow as tf
import tf_keras
from tf_keras.src import backend
from tf_keras.src.optimizers.legacy import optimizer_v2

_DEFAULT_COMPUTE_PRECISIONS = (tf.float32,)


class IpuOptimizerBase(tf_keras.optimizers.legacy.Optimizer):
    """Base of the IPU Keras optimizers (a Keras legacy `OptimizerV2`).

    Adds three keyword arguments to those of Keras:

    - `optimizer_compute_precisions`: the float dtypes the stages of the update
      are computed in (one per stage; `_compute_stage_count` in subclasses).
    - `outline_apply_gradients` and `outline_apply_gradients_kwargs`: on an IPU
      these make the update a reused code block to save memory. The emulated
      IPU has no code memory to save, so they are validated, kept in the
      config and otherwise ignored.

    Slots may have their own dtype (`add_slot_with_dtype`; `add_slot` uses the
    subclass's `_slot_dtypes`, so slots created by a checkpoint restore keep
    theirs): the update reads them into the compute dtype, and casts the new
    state back to the slot dtype and the variable's change to the variable's
    dtype. Sparse gradients (`tf.IndexedSlices`) are not supported.
    """

    _compute_stage_count = 1

    def __init__(
        self,
        name: str,
        optimizer_compute_precisions: Sequence = _DEFAULT_COMPUTE_PRECISIONS,
        outline_apply_gradients: bool = False,
        outline_apply_gradients_kwargs: dict | None = None,
        **kwargs,
    ) -> None:
        super().__init__(name, **kwargs)
        self.opt_dtypes = _compute_precisions(
            type(self).__name__, optimizer_compute_precisions, self._compute_stage_count
        )
        # Kept as given, as the original (keras/optimizers/ipu_optimizer_base.py): the flag
        # counts by truth value, and the kwargs are only unpacked (`**`) when it is on.
        self.outline_apply_gradients = outline_apply_gradients
        self.outline_apply_gradients_kwargs = outline_apply_gradients_kwargs or {}
        # Slot name -> its dtype (None: the variable's); subclasses fill it in.
        self._slot_dtypes: dict[str, tf.DType | None] = {}

    def add_slot(self, var: tf.Variable, slot_name: str, initializer="zeros", shape=None):
        # Checkpoint restores create missing slots through here: they keep their chosen dtype.
        return self.add_slot_with_dtype(
            var, slot_name, self._slot_dtypes.get(slot_name), initializer, shape
        )

    def add_slot_with_dtype(
        self, var: tf.Variable, slot_name: str, dtype, initializer="zeros", shape=None
    ) -> tf.Variable:
        """Like `add_slot`, with the slot's dtype chosen instead of taken from `var`."""
        dtype = tf.as_dtype(dtype) if dtype is not None else _true_dtype(var)
        if slot_name not in self._slot_names:
            self._slot_names.append(slot_name)
        slot_dict = self._slots.setdefault(optimizer_v2._var_key(var), {})
        weight = slot_dict.get(slot_name)
        if weight is not None:
            return weight
        if isinstance(initializer, str) or callable(initializer):
            initializer = tf_keras.initializers.get(initializer)
            if isinstance(initializer, tf.__internal__.tracking.CheckpointInitialValueCallable):
                slot_shape = shape
            else:
                slot_shape = var.shape if shape is None else shape
            initial_value = functools.partial(initializer, shape=slot_shape, dtype=dtype)
        else:
            initial_value = initializer
        with self._distribution_strategy_scope():
            strategy = tf.distribute.get_strategy()
            if not strategy.extended.variable_created_in_scope(var):
                raise ValueError(
                    "Trying to create optimizer slot variable under the scope for "
                    f"tf.distribute.Strategy ({strategy}), which is different from the scope "
                    f"used for the original variable ({var}). Make sure the slot variables "
                    "are created under the same strategy scope. This may happen if you're "
                    "restoring from a checkpoint outside the scope."
                )
            with strategy.extended.colocate_vars_with(var):
                weight = tf.Variable(
                    name=f"{var._shared_name}/{slot_name}",
                    dtype=dtype,
                    trainable=False,
                    initial_value=initial_value,
                )
        backend.track_variable(weight)
        slot_dict[slot_name] = weight
        self._restore_slot_variable(slot_name=slot_name, variable=var, slot_variable=weight)
        self._weights.append(weight)
        return weight

    def apply_gradients(self, grads_and_vars, name=None, experimental_aggregate_gradients=True):
        kwargs = self.outline_apply_gradients_kwargs
        if self.outline_apply_gradients and not isinstance(kwargs, Mapping):
            # What the original's `ipu.outlined_function(fn, **kwargs)` raises.
            raise TypeError(
                "outlined_function() argument after ** must be a mapping, not "
                f"{type(kwargs).__name__}"
            )
        return super().apply_gradients(
            grads_and_vars,
            name=name,
            experimental_aggregate_gradients=experimental_aggregate_gradients,
        )

    def _resource_apply_sparse(self, grad, handle, indices, apply_state=None):
        raise NotImplementedError(
            f"{type(self).__name__} does not support sparse gradients (tf.IndexedSlices, "
            "such as those of an Embedding layer): convert them to dense tensors first"
        )

    @classmethod
    def from_config(cls, config: dict, custom_objects=None):
        # Keras deserializes the learning-rate schedule in place: keep the caller's config intact.
        return super().from_config(dict(config), custom_objects=custom_objects)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "optimizer_compute_precisions": [getattr(d, "name", d) for d in self.opt_dtypes],
            "outline_apply_gradients": self.outline_apply_gradients,
            "outline_apply_gradients_kwargs": (
                dict(self.outline_apply_gradients_kwargs)
                if isinstance(self.outline_apply_gradients_kwargs, Mapping)
                else self.outline_apply_gradients_kwargs
            ),
        }


def _true_dtype(var: tf.Variable) -> tf.DType:
    # Under a mixed precision policy variables report their cast dtype; state
    # and updates follow the stored one.
    return getattr(var, "true_dtype", var.dtype).base_dtype


def float_dtype_or_none(owner: str, parameter: str, value) -> tf.DType | None:
    """`value` as a floating-point `tf.DType`, or None; a clear error otherwise."""
    if value is None:
        return None
    try:
        dtype = tf.as_dtype(value)
    except TypeError:
        raise TypeError(
            f"{owner}: {parameter} must be None or a floating-point dtype, got {value!r}"
        ) from None
    if not dtype.is_floating:
        raise ValueError(
            f"{owner}: {parameter} must be None or a floating-point dtype, got {dtype.name}"
        )
    return dtype


def dtype_name_or_none(dtype: tf.DType | None) -> str | None:
    return None if dtype is None else dtype.name


def _compute_precisions(owner: str, precisions, stage_count: int) -> tuple[tf.DType, ...]:
    if isinstance(precisions, (str, tf.DType)) or not isinstance(precisions, Sequence):
        raise TypeError(
            f"{owner}: optimizer_compute_precisions must be a tuple of {stage_count} "
            f"floating-point dtypes, got {precisions!r}"
        )
    # The original's Adam and SGD read the first dtype only (a longer tuple works); its LAMB
    # wants exactly two (keras/optimizers/lamb_optimizer.py).
    if len(precisions) < stage_count or (stage_count > 1 and len(precisions) != stage_count):
        raise ValueError(
            f"{owner}: optimizer_compute_precisions must hold {stage_count} dtype(s) (one per "
            f"stage of the update), got {len(precisions)}: {precisions!r}"
        )
    dtypes = []
    for precision in precisions[:stage_count]:
        dtype = float_dtype_or_none(owner, "optimizer_compute_precisions", precision)
        if dtype is None:
            raise TypeError(
                f"{owner}: optimizer_compute_precisions must hold floating-point dtypes, got "
                f"{precisions!r}"
            )
        dtypes.append(dtype)
    return (*dtypes, *precisions[stage_count:])


def variable_dtype(var: tf.Variable) -> tf.DType:
    """The dtype the variable stores (its change is cast to it)."""
    return _true_dtype(var)
