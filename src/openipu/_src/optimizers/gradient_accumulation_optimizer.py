"""Gradient accumulation optimizers: one weight update per N mini-batches.

Each `apply_gradients` call adds the mini-batch's gradients into accumulators;
every N-th call the wrapped optimizer applies the accumulated gradients and
the accumulators restart. The accumulation is the engine's
(`engine.gradient_accumulation`): accumulators and the call counter are engine
state (each replica's own, made once however often the program is traced, never
initialized or saved by the user's program, and not among the optimizer's
`variables()`, as in the original's ipu_optimizer.py), so accumulation carries on
across calls of a compiled function and through the iterations of device loops.

The cross-replica variants wrap the optimizer in a `CrossReplicaOptimizer`, as
the original did: replicas exchange gradients only when they apply them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import tensorflow as tf
from tensorflow.python.framework import ops

from openipu._src.engine import device_loop
from openipu._src.engine.gradient_accumulation import (
    AccumulatorDType,
    AccumulatorStore,
    GradientAccumulation,
    GradientAccumulationReductionMethod,
    floating_accumulator_dtype,
)
from openipu._src.optimizers import ipu_optimizer, replicas
from openipu._src.optimizers.cross_replica_optimizer import CrossReplicaOptimizer
from openipu._src.optimizers.ipu_optimizer import Optimizer


class GradientAccumulationOptimizerV2(ipu_optimizer.IpuOptimizer):
    """Accumulates the gradients of `num_mini_batches` calls, then applies them with `opt`.

    `dtype` is the accumulators' type: None for the variable's, a DType, or a
    callable from the variable to a DType; the wrapped optimizer receives
    gradients of that type. `reduction_method` combines the mini-batches
    (SUM, MEAN or RUNNING_MEAN). Offloading and state sharding only place
    variables on the device: they are checked and kept.
    """

    def __init__(
        self,
        opt: Optimizer,
        num_mini_batches: int,
        offload_weight_update_variables: bool | None = None,
        replicated_optimizer_state_sharding: bool | None = False,
        dtype: AccumulatorDType = None,
        reduction_method: GradientAccumulationReductionMethod | str = (
            GradientAccumulationReductionMethod.SUM
        ),
        name: str = "GradientAccumulationOptimizerV2",
    ) -> None:
        super().__init__(opt, name=name)
        what = type(self).__name__
        # The original's only check (optimizers/gradient_accumulation_optimizer.py:131-134,
        # :256, :303, :374): what is not comparable with 1 fails with Python's TypeError.
        # The value is kept as given; what the update can count with is decided when
        # gradients are applied (`_count_for_update`), as the original's ops do.
        if num_mini_batches < 1:
            raise ValueError("num_mini_batches must be a positive number.")
        self._num_mini_batches = num_mini_batches
        self._offload_weight_update_variables = _check_optional_bool(
            offload_weight_update_variables, "offload_weight_update_variables", what
        )
        self._replicated_optimizer_state_sharding = _check_optional_bool(
            replicated_optimizer_state_sharding, "replicated_optimizer_state_sharding", what
        )
        self._accumulator_dtype = _check_accumulator_dtype_rule(dtype, what)
        self._reduction_method = GradientAccumulationReductionMethod.parse(reduction_method)
        self._losses = threading.local()
        self._accumulation: GradientAccumulation[tf.Variable] = GradientAccumulation(
            1,  # set by every apply_gradients (`_count_for_update`)
            self._reduction_method,
            AccumulatorStore(f"{name}/mini_batch_counter"),
            dtype=self._accumulator_dtype,
            owner=what,
        )

    @property
    def num_mini_batches(self) -> int:
        """The count as given (the original keeps it so: see `_count_for_update`)."""
        return self._num_mini_batches

    def _count_for_update(self) -> int:
        """How many mini-batches an update takes, or the original's error for the count.

        The original hands the count to `_compile_function`, which makes it a tensor, and
        then to the `GradientAccumulationCount` op, whose input is int32
        (ops/op_util.py:474-476, optimizers/gradient_accumulation_optimizer.py:173-174,
        ops/poputil/stateful_gradient_accumulate.cc:70-73): a float (even 2.0), a bool, a
        NumPy int64 or an int beyond int32 is the op's TypeError when gradients are applied.
        """
        dtype = ops.convert_n_to_tensor([self._num_mini_batches])[0].dtype
        if dtype != tf.int32:
            raise TypeError(
                "Input 'value' of 'GradientAccumulationCount' Op has type "
                f"{dtype.name} that does not match expected type of int32."
            )
        return int(self._num_mini_batches)

    def compute_gradients(self, loss, var_list=None, **kwargs) -> list[tuple]:
        # Kept so that the update waits for the loss (see apply_gradients); per thread, as
        # replicas are built in threads of their own.
        self._losses.loss = loss if isinstance(loss, tf.Tensor) else None
        return super().compute_gradients(loss, var_list=var_list, **kwargs)

    @property
    def reduction_method(self) -> GradientAccumulationReductionMethod:
        return self._reduction_method

    def mini_batches_added(self) -> tf.Tensor:
        """How many mini-batches of the current group were added (this replica's count)."""
        return self._accumulation.counter().read_value()

    def apply_gradients(
        self,
        grads_and_vars: Iterable[tuple[tf.Tensor | tf.IndexedSlices | None, tf.Variable]],
        global_step: tf.Variable | None = None,
        name: str | None = None,
    ) -> tf.Operation:
        if self._reduction_method is GradientAccumulationReductionMethod.RUNNING_MEAN:
            _running_mean_step(self._num_mini_batches)
        pairs = ipu_optimizer.check_grads_and_vars(grads_and_vars)
        pairs = [(g, v) for g, v in pairs if g is not None]
        for _, variable in pairs:
            self._accumulation.accumulator_dtype(variable)  # checks the dtype rule first
        count = self._count_for_update()
        self._accumulation.count = count
        _check_loop_count(count)
        # The wrapper cannot see the loop around it: the update is due inside the step,
        # after every `num_mini_batches`-th call (the engine's counter says when).
        added = self._accumulation.add(pairs)
        complete = self._accumulation.complete_after(added)
        loss = getattr(self._losses, "loss", None)
        self._losses.loss = None
        if loss is not None and getattr(complete, "graph", None) is loss.graph:
            # The update must not overtake this step's forward pass: a last layer's weight
            # gradient does not depend on that weight's read, so without this edge a TF1
            # graph may read the weight for the loss after the update wrote it (the IPU runs
            # its program in order; the original's loss of the group's last step is the
            # weights' before the update).
            with tf.control_dependencies([loss]):
                complete = tf.identity(complete)

        def apply_accumulated() -> tf.Operation:
            return self._accumulation.apply_and_restart(
                lambda accumulated: ipu_optimizer.apply_on_each_replica(
                    self._opt, accumulated, global_step, name
                )
            )

        return tf.group(replicas.cond_in_replicas(complete, apply_accumulated))


class CrossReplicaGradientAccumulationOptimizerV2(GradientAccumulationOptimizerV2):
    """`GradientAccumulationOptimizerV2` whose replicas average the accumulated gradients."""

    def __init__(
        self,
        opt: Optimizer,
        num_mini_batches: int,
        offload_weight_update_variables: bool | None = None,
        replicated_optimizer_state_sharding: bool | None = False,
        dtype: AccumulatorDType = None,
        reduction_method: GradientAccumulationReductionMethod | str = (
            GradientAccumulationReductionMethod.SUM
        ),
        name: str = "CrossReplicaGradientAccumulationOptimizerV2",
    ) -> None:
        if replicated_optimizer_state_sharding is None:
            replicated_optimizer_state_sharding = offload_weight_update_variables
        super().__init__(
            CrossReplicaOptimizer(opt),
            num_mini_batches,
            offload_weight_update_variables,
            replicated_optimizer_state_sharding,
            dtype,
            reduction_method,
            name,
        )


class GradientAccumulationOptimizer(GradientAccumulationOptimizerV2):
    """Sums the gradients of `num_mini_batches` calls, then applies them (V1).

    It supports `GradientDescentOptimizer` and `MomentumOptimizer`; with
    `verify_usage=False` any optimizer is accepted (the original warned that
    its results might then be wrong; here they are those of the V2 optimizer).
    """

    def __init__(
        self,
        opt: Optimizer,
        num_mini_batches: int,
        verify_usage: bool = True,
        name: str = "GradientAccumulationOptimizer",
    ) -> None:
        super().__init__(opt, num_mini_batches, name=name)
        self._verify_usage = verify_usage
        self._leaf = opt

    def _count_for_update(self) -> int:
        return _int_attribute(self._num_mini_batches, "num_mini_batches")

    def apply_gradients(self, grads_and_vars, global_step=None, name=None) -> tf.Operation:
        pairs = _v1_accumulation_checks(self, grads_and_vars)
        return super().apply_gradients(pairs, global_step, name)


class CrossReplicaGradientAccumulationOptimizer(GradientAccumulationOptimizerV2):
    """`GradientAccumulationOptimizer` whose replicas average the summed gradients (V1)."""

    def __init__(
        self,
        opt: Optimizer,
        num_mini_batches: int,
        verify_usage: bool = True,
        name: str = "CrossReplicaGradientAccumulationOptimizer",
    ) -> None:
        super().__init__(CrossReplicaOptimizer(opt), num_mini_batches, name=name)
        self._verify_usage = verify_usage
        self._leaf = opt

    def _count_for_update(self) -> int:
        return _int_attribute(self._num_mini_batches, "num_mini_batches")

    def apply_gradients(self, grads_and_vars, global_step=None, name=None) -> tf.Operation:
        pairs = _v1_accumulation_checks(self, grads_and_vars)
        return super().apply_gradients(pairs, global_step, name)


_V1_SUPPORTED = (tf.compat.v1.train.GradientDescentOptimizer, tf.compat.v1.train.MomentumOptimizer)


def _v1_accumulation_checks(
    optimizer: GradientAccumulationOptimizer | CrossReplicaGradientAccumulationOptimizer,
    grads_and_vars,
) -> list:
    """The V1 optimizers' checks when gradients are applied, in the original's order.

    The original makes an `IpuStatefulGradientAccumulate` op for each gradient
    (optimizers/gradient_accumulation_optimizer.py:327-337): its int attribute takes the
    count truncated, its bool attribute refuses a `verify_usage` that is not a bool (None
    is the attribute's default, True). Without any gradient no op is made, so neither
    is checked. The supported optimizers are checked once the graph is optimised for
    running (rule E66, graph_optimizer_passes/verify_gradient_accumulation_pass.cc); here
    when gradients are applied.
    """
    pairs = list(grads_and_vars)  # a TypeError for what is not iterable, as the original's loop
    if any(gradient is not None for gradient, _ in pairs):
        _int_attribute(optimizer.num_mini_batches, "num_mini_batches")
        verify_usage = optimizer._verify_usage  # noqa: SLF001
        if verify_usage is None:
            verify_usage = True
        if not isinstance(verify_usage, bool):
            raise TypeError(f"Expected bool for argument 'verify_usage' not {verify_usage!r}.")
        leaf = ipu_optimizer.leaf_optimizer(optimizer._leaf)  # noqa: SLF001
        if verify_usage and not isinstance(leaf, _V1_SUPPORTED):
            _refuse_unsupported(type(leaf).__name__, type(optimizer).__name__)
    return pairs


def _int_attribute(value: object, name: str) -> int:
    """`value` as an op's int attribute takes it: truncated (TensorFlow's `make_int`)."""
    if isinstance(value, str):
        raise TypeError(f"Expected int for argument '{name}' not {value!r}.")
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise TypeError(f"Expected int for argument '{name}' not {value!r}.") from None


def _running_mean_step(num_mini_batches: object) -> None:
    """The original's RUNNING_MEAN takes the int32 iteration counter modulo the count
    (optimizers/gradient_accumulation_optimizer.py:41-42) before anything else: a count
    an int32 tensor cannot take (a Python float) is TensorFlow's TypeError for `%`."""
    with tf.Graph().as_default():
        tf.zeros([], tf.int32) % num_mini_batches


def _refuse_unsupported(unsupported: str | None, what: str) -> None:
    if unsupported is not None:
        # The original's words and type (a FailedPrecondition status).
        raise tf.errors.FailedPreconditionError(
            None,
            None,
            "`GradientAccumulationOptimizer` is currently only supported with "
            "`GradientDescentOptimizer` and `MomentumOptimizer` optimizers. For any other "
            f"optimizers use `GradientAccumulationOptimizerV2`. ({what} wraps {unsupported}; "
            "pass verify_usage=False to use it anyway)",
        )


def _check_optional_bool(value: object, parameter: str, what: str) -> bool | None:
    # The original stores the value as given and reads it with `op_util.bool_to_three_state`:
    # None is undefined, a truthy value on, a falsy one off.
    del parameter, what
    if value is None:
        return None
    return bool(value)


def _check_accumulator_dtype_rule(dtype: object, what: str) -> AccumulatorDType:
    if dtype is None:
        return None
    try:
        as_dtype = tf.as_dtype(dtype)
    except TypeError:
        if callable(dtype):
            return dtype
        raise TypeError(
            f"{what}: dtype must be None, a floating DType or a callable returning one, "
            f"got {dtype!r}"
        ) from None
    return floating_accumulator_dtype(as_dtype, what)


def _check_loop_count(num_mini_batches: int) -> None:
    """The enclosing device loop's count must be a multiple of the mini-batches, as the
    original's compiler checks (gradient_accumulation_verifier.cc, its message)."""
    stack = device_loop.loop_stack()
    count = stack[-1].trip_count if stack else None
    if isinstance(count, int) and count % num_mini_batches:
        raise tf.errors.FailedPreconditionError(
            None,
            None,
            f"Detected a gradient accumulation operation with {num_mini_batches} number of "
            f"mini batches inside a loop with {count} iterations.\nIt is required that the "
            "number of mini batches to accumulate evenly divides the number of loop iterations.",
        )
