"""Patch: in-place updates of variables (fused optimizer updates, `assign_add`/`assign_sub`),
built by the engine where it must.

Targets (TensorFlow 2.21): the functions of `tensorflow.python.ops.gen_training_ops` that
apply a dense update to resource variables (`resource_apply_adam`, `..._rms_prop`,
`..._centered_rms_prop`, `..._adagrad_v2`, `..._keras_momentum`, `..._momentum`,
`..._gradient_descent`; TF1 optimizers call them), and their raw-op forms
(`ResourceApplyAdam`, ...) in `gen_training_ops` and the `raw_ops` of `tf`, `tf.compat.v2`
and `tf.compat.v1` (Keras' legacy optimizers call `tf.raw_ops.ResourceApplyAdam` of
`tensorflow.compat.v2`); `BaseResourceVariable.assign_add`/`assign_sub` in
`tensorflow.python.ops.resource_variable_ops` and `ResourceVariable`'s own (TensorFlow's
weak_tensor_ops wraps them there), methods.

Why: on the IPU, half-precision overflows inside these updates saturate as in any other
operation; TensorFlow's fused kernels and in-place additions (ops without outputs, which
the engine's op callback cannot see) make infinities and then NaNs. The engine
(`engine/half_precision_updates.py`) builds such updates from elementwise operations when
its region saturates; its handler returns None to leave an update to TensorFlow's kernel.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, register

#: `handler(op function name, args, kwargs) -> the update, or None for the stock op`.
_handler: list[Callable] = []

#: The snake_case function of each fused dense update and its raw-op name.
OPS = {
    "resource_apply_adam": "ResourceApplyAdam",
    "resource_apply_rms_prop": "ResourceApplyRMSProp",
    "resource_apply_centered_rms_prop": "ResourceApplyCenteredRMSProp",
    "resource_apply_adagrad_v2": "ResourceApplyAdagradV2",
    "resource_apply_keras_momentum": "ResourceApplyKerasMomentum",
    "resource_apply_momentum": "ResourceApplyMomentum",
    "resource_apply_gradient_descent": "ResourceApplyGradientDescent",
}


def _dispatching(op: str) -> Callable[[Callable], Callable]:
    def replacement_of(stock: Callable) -> Callable:
        @functools.wraps(stock)
        def replacement(*args, **kwargs):
            for handle in _handler:
                update = handle(op, args, kwargs)
                if update is not None:
                    return update
            return stock(*args, **kwargs)

        return replacement

    return replacement_of


def _variable_dispatching(op: str) -> Callable[[Callable], Callable]:
    def replacement_of(stock: Callable) -> Callable:
        @functools.wraps(stock)
        def replacement(self, *args, **kwargs):
            for handle in _handler:
                update = handle(op, (self, *args), kwargs)
                if update is not None:
                    return update
            return stock(self, *args, **kwargs)

        return replacement

    return replacement_of


def _patches() -> list[Patch]:
    patches = [
        register(
            Patch(
                module="tensorflow.python.ops.resource_variable_ops",
                attribute=f"{owner}.{method}",
                kind=Kind.METHOD,
                replacement=_variable_dispatching(method),
                reason="half-precision overflows in in-place additions saturate as on the IPU "
                "(the engine builds them from a read, an addition and an assignment)",
                tensorflow=("2.21",),
            )
        )
        for method in ("assign_add", "assign_sub")
        # TensorFlow's weak_tensor_ops gives ResourceVariable wrapped methods of its own.
        for owner in ("BaseResourceVariable", "ResourceVariable")
    ]
    for op, raw in OPS.items():
        for module, attribute in (
            ("tensorflow.python.ops.gen_training_ops", op),
            ("tensorflow.python.ops.gen_training_ops", raw),
            ("tensorflow._api.v2.raw_ops", raw),
            ("tensorflow._api.v2.compat.v2.raw_ops", raw),
            ("tensorflow._api.v2.compat.v1.raw_ops", raw),
        ):
            patches.append(
                register(
                    Patch(
                        module=module,
                        attribute=attribute,
                        kind=Kind.FUNCTION,
                        replacement=_dispatching(op),
                        reason="half-precision overflows in fused optimizer updates saturate "
                        "as on the IPU (the engine builds them step by step)",
                        tensorflow=("2.21",),
                    )
                )
            )
    return patches


PATCHES = _patches()


def install(handler: Callable) -> None:
    """Fused updates and in-place additions pass through `handler` first (idempotent)."""
    if all(handler is not installed for installed in _handler):
        _handler.append(handler)
    for patch in PATCHES:
        apply(patch)
