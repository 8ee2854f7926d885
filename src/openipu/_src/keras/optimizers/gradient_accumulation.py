"""Gradient accumulation as a Keras optimizer wrapper (`keras.ipu.optimizers.
GradientAccumulationOptimizer`, `ALSGradientAccumulationOptimizer`; graphcore/keras
keras/ipu/optimizers/gradient_accumulation_optimizer.py and als_optimizer.py).

Each `apply_gradients` call accumulates the mini-batch's gradients; every
`num_mini_batches`-th call the wrapped optimizer applies the accumulated ones
(the accumulation is that of `ipu.optimizers.GradientAccumulationOptimizerV2`). As
in the original, the sum is not divided by the number of mini-batches unless
`reduction_method` says so, and a count of 1 gives back the wrapped optimizer.
"""

from __future__ import annotations

from openipu._src.engine.gradient_accumulation import GradientAccumulationReductionMethod
from openipu._src.keras.delegation import delegated
from openipu._src.keras.optimizers.als_optimizer import ALSOptimizer
from openipu._src.keras.optimizers.optimizer_wrapper import OptimizerWrapper
from openipu._src.optimizers import gradient_accumulation_optimizer as ga


class GradientAccumulationOptimizer(OptimizerWrapper):
    """Applies the gradients of `num_mini_batches` calls at once with `opt`."""

    def __new__(cls, opt, num_mini_batches, *args, **kwargs):
        del args, kwargs
        if num_mini_batches == 1:
            return opt
        return super().__new__(cls)

    def __init__(
        self,
        opt,
        num_mini_batches,
        offload_weight_update_variables=None,
        replicated_optimizer_state_sharding=False,
        dtype=None,
        reduction_method=GradientAccumulationReductionMethod.SUM,
        name="GradientAccumulationOptimizer",
    ) -> None:
        if num_mini_batches < 1:
            raise ValueError("num_mini_batches must be >= 1")
        super().__init__(opt, name=name)
        self._num_mini_batches = num_mini_batches
        self._offload_weight_update_variables = offload_weight_update_variables
        self._replicated_optimizer_state_sharding = replicated_optimizer_state_sharding
        self._dtype = dtype
        self._reduction_method = reduction_method
        # The optimizer whose update the accumulated gradients reach: an ALS wrapper's
        # own optimizer, as the original's resource update calls its _resource_apply_dense.
        applying = opt._opt if isinstance(opt, ALSOptimizer) else opt  # noqa: SLF001
        self._accumulation = ga.GradientAccumulationOptimizerV2(
            applying,
            num_mini_batches,
            offload_weight_update_variables=_from_three_state(offload_weight_update_variables),
            replicated_optimizer_state_sharding=_from_three_state(
                replicated_optimizer_state_sharding
            ),
            dtype=dtype,
            reduction_method=reduction_method,
        )

    def apply_gradients(self, grads_and_vars, name=None, experimental_aggregate_gradients=True):
        del experimental_aggregate_gradients
        return self._accumulation.apply_gradients(list(grads_and_vars), name=name)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "num_mini_batches": self._num_mini_batches,
                "offload_weight_update_variables": self._offload_weight_update_variables,
                "replicated_optimizer_state_sharding": self._replicated_optimizer_state_sharding,
                "dtype": self._dtype,
                "reduction_method": self._reduction_method,
            }
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        del custom_objects
        if cls is not GradientAccumulationOptimizer:
            raise ValueError(
                "GradientAccumulationOptimizer.from_config can only be used to "
                "create a GradientAccumulationOptimizer instance. If subclassing, "
                "the child class must implement its own from_config method."
            )
        config = dict(config)
        inner = OptimizerWrapper.inner_from_config(config)
        return GradientAccumulationOptimizer(inner, **config)


class ALSGradientAccumulationOptimizer(GradientAccumulationOptimizer):
    """Gradient accumulation for an `ALSOptimizer`: the loss scaling statistics and factor
    follow every mini-batch; the accumulated unscaled gradients are applied at once."""

    def __init__(
        self,
        als_optimizer,
        num_mini_batches,
        name="ALSGradientAccumulationOptimizer",
        **accumulation,
    ) -> None:
        """`accumulation`: GradientAccumulationOptimizer's other arguments."""
        if not isinstance(als_optimizer, ALSOptimizer):
            raise ValueError(
                "ALSGradientAccumulationOptimizer can only be used with instances of ALSOptimizer."
            )
        super().__init__(als_optimizer, num_mini_batches, name=name, **accumulation)

    @property
    def als_optimizer(self):
        return self._opt

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """The reverse of `get_config` (as the original's, for an ALSOptimizer inside)."""
        del custom_objects
        config = dict(config)
        if "inner_optimizer_config" not in config or "inner_optimizer_type" not in config:
            OptimizerWrapper.inner_from_config(config)  # raises the wrapper's error
        inner_config = config.pop("inner_optimizer_config")
        if config.pop("inner_optimizer_type") is not ALSOptimizer:
            raise ValueError(
                "ALSGradientAccumulationOptimizer.from_config can only be used with "
                "configurations that have ALSOptimizer as the specified inner_type."
            )
        return ALSGradientAccumulationOptimizer(ALSOptimizer.from_config(inner_config), **config)

    @property
    def supports_captured_grads(self) -> bool:
        return True

    def get_gradients(self, loss, params):
        return self.als_optimizer.get_gradients(loss, params)

    def _transform_loss(self, loss):
        return self.als_optimizer.get_scaled_loss(super()._transform_loss(loss))

    def apply_gradients(  # type: ignore[override]  # Keras's signature, not the TF1 optimizer's
        self, grads_and_vars, captured_grads=None, name=None, experimental_aggregate_gradients=True
    ):
        als = self.als_optimizer
        rescaled = []
        for gradient, variable in grads_and_vars:
            als._add_grads(gradient)  # noqa: SLF001 - the original's calls
            rescaled.append((als._unscaled(gradient), variable))  # noqa: SLF001
        # Every mini-batch adds to the statistics; the factor's update period counts weight
        # updates (the original's als_optimizer_test.py: with 2 mini-batches per update, the
        # factor changes after `update_frequency` executions of 2 mini-batches each).
        weight_update = self._accumulation.mini_batches_added() + 1 >= self._num_mini_batches
        als._do_lsf_update(captured_grads, weight_update=weight_update)  # noqa: SLF001
        return super().apply_gradients(rescaled, name, experimental_aggregate_gradients)

    histogram = delegated("als_optimizer", "histogram")
    normalized_histogram = delegated("als_optimizer", "normalized_histogram")
    loss_scaling_factor = delegated("als_optimizer", "loss_scaling_factor")
    previous_loss_scaling_factor = delegated("als_optimizer", "previous_loss_scaling_factor")
    update_counter = delegated("als_optimizer", "update_counter")
    update_frequency = delegated("als_optimizer", "update_frequency")
    increase_factor = delegated("als_optimizer", "increase_factor")
    decrease_factor = delegated("als_optimizer", "decrease_factor")
    initial_loss_scaling_factor = delegated("als_optimizer", "initial_loss_scaling_factor")
    max_loss_scaling_factor = delegated("als_optimizer", "max_loss_scaling_factor")
    accumulate_statistics_over_update_period = delegated(
        "als_optimizer", "accumulate_statistics_over_update_period"
    )
    ratio_threshold = delegated("als_optimizer", "ratio_threshold")


#: Poplar's ThreeState names, in which the original's Keras optimizer keeps these options
#: (keras/ipu/optimizers/gradient_accumulation_optimizer.py `bool_to_three_state`), so its
#: configs, and programs that pass them on, give them as strings.
_THREE_STATES = {"THREESTATE_ON": True, "THREESTATE_OFF": False, "THREESTATE_UNDEFINED": None}


def _from_three_state(value):
    """A bool option given as a ThreeState name becomes the bool (or None) it names."""
    if isinstance(value, str) and value in _THREE_STATES:
        return _THREE_STATES[value]
    return value
