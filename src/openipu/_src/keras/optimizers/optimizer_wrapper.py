"""The base of the `keras.ipu.optimizers` wrappers (graphcore/keras
keras/ipu/optimizers/optimizer_v2_wrapper.py `_OptimizerV2Wrapper`).

A wrapper is a Keras (legacy, v2) optimizer, so `compile` takes it; the wrapped
optimizer, of either Keras optimizer kind, applies the gradients with its own
state. Attributes the wrapper does not have (`learning_rate`, `lr`, ...) are the
wrapped optimizer's, read and set through the wrapper, as in the original.
"""

from __future__ import annotations

import tf_keras


class OptimizerWrapper(tf_keras.optimizers.legacy.Optimizer):
    """A Keras optimizer that wraps `opt` (see the module)."""

    def __init__(self, opt, name=None, **kwargs) -> None:
        if not isinstance(
            opt, (tf_keras.optimizers.Optimizer, tf_keras.optimizers.legacy.Optimizer)
        ):
            # The original fails on the wrapped object's missing `_hyper` as soon as the
            # wrapper sets an attribute (optimizer_v2_wrapper.py `__setattr__`).
            raise AttributeError(f"{type(opt).__name__!r} object has no attribute '_hyper'")
        object.__setattr__(self, "_opt", opt)
        super().__init__(name=name, **kwargs)
        self._track_trackable(opt, name="inner_optimizer")

    def __getattr__(self, name: str):
        # Only called when the wrapper has no attribute `name` (nor hyperparameter).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.__dict__["_opt"], "learning_rate" if name == "lr" else name)

    def __setattr__(self, name: str, value) -> None:
        if name == "lr":
            name = "learning_rate"
        inner = self.__dict__.get("_opt")
        own = name in self.__dict__ or hasattr(type(self), name)
        if inner is not None and not name.startswith("_") and not own and hasattr(inner, name):
            setattr(inner, name, value)
        else:
            super().__setattr__(name, value)

    @property
    def iterations(self):
        return self._opt.iterations

    @iterations.setter
    def iterations(self, variable) -> None:
        self._opt.iterations = variable

    def _create_all_weights(self, var_list):
        return self._opt._create_all_weights(var_list)  # noqa: SLF001 - delegated as there

    def get_slot(self, var, slot_name):
        return self._opt.get_slot(var, slot_name)

    def get_slot_names(self):
        return self._opt.get_slot_names()

    def get_config(self) -> dict:
        return {
            "inner_optimizer_config": self._opt.get_config(),
            "inner_optimizer_type": type(self._opt),
            "name": self._name,
        }

    @staticmethod
    def inner_from_config(config: dict):
        """Pops the wrapped optimizer's entries from `config` and makes that optimizer."""
        if "inner_optimizer_config" not in config:
            raise ValueError(
                "_OptimizerV2Wrapper configuration dicts must contain "
                "a configuration dict for the wrapped optimizer, "
                "inner_optimizer_config."
            )
        if "inner_optimizer_type" not in config:
            raise ValueError(
                "_OptimizerV2Wrapper configuration dicts must contain a type "
                "for the wrapped optimizer, inner_optimizer_type."
            )
        inner_config = config.pop("inner_optimizer_config")
        return config.pop("inner_optimizer_type")(**inner_config)
