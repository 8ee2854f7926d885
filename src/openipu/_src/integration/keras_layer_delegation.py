"""`tf_keras` `base_layer` gains the original's layer extension names.

Why: graphcore/keras added to `keras/engine/base_layer.py` a base class for extensions
(`KerasExtension`) and a decorator (`extension_delegate`): a method `x` decorated with it
calls `_x_delegate` instead when the layer (or, for a classmethod, the extension
registered for its class) is a `KerasExtension` with an `_x_supported` that returns True
for the call's arguments and an `_x_delegate` of the same signature;
`__extension_delegate=False` among the call's keyword arguments calls the method itself.
Its `Layer.__init__` ends by asking the current strategy to mix a registered extension
into the layer (`strategy/keras_layer_extensions.py`). Programs (the original's own
tests among them) decorate layer methods at import time, so the names are added when
tf_keras is imported (`keras_api_attribute.add_to`). Stock tf_keras 2.21 has none of
them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from openipu._src.integration import keras_node_init
from openipu._src.integration.patching import Kind, Patch, apply, register

_DISABLE_KEYWORD = "__extension_delegate"


class KerasExtension:
    """Base class of the extensions a strategy mixes into Keras layers."""


def _names(method_name: str) -> tuple[str, str]:
    prefix = "" if method_name.startswith("_") else "_"
    return f"{prefix}{method_name}_supported", f"{prefix}{method_name}_delegate"


def _is_classmethod_of(owner: type, name: str) -> bool:
    return any(isinstance(klass.__dict__.get(name), classmethod) for klass in owner.__mro__)


def _plain(function: Any) -> Any:
    """A method's function (bound or class-bound methods lose their binding)."""
    return getattr(function, "__func__", function)


def extension_delegate(method: Callable) -> Callable:
    """Lets an extension replace `method` where its `_<name>_supported` agrees."""

    @functools.wraps(method)
    def delegating(owner: Any, *args: Any, **kwargs: Any) -> Any:
        enabled = kwargs.pop(_DISABLE_KEYWORD, True)
        extension = None
        extended = isinstance(owner, KerasExtension)
        if isinstance(owner, type) and _is_classmethod_of(owner, method.__name__):
            strategy = tf.distribute.get_strategy()
            get = getattr(strategy, "_get_keras_extension", None)
            if get is not None:
                extension = next(
                    (e for c in owner.__mro__ if (e := get(c, KerasExtension)) is not None),
                    None,
                )
            extended = extension is not None
        if enabled and extended:
            supported_name, delegate_name = _names(method.__name__)
            source = extension if extension is not None else owner
            supported = _plain(getattr(source, supported_name, None))
            delegate = _plain(getattr(source, delegate_name, None))
            if (
                supported is not None
                and delegate is not None
                and inspect.getfullargspec(method) == inspect.getfullargspec(delegate)
                and supported(owner, *args, **kwargs)
            ):
                return delegate(owner, *args, **kwargs)
        return method(owner, *args, **kwargs)

    delegating.__original_func__ = method  # type: ignore[attr-defined]
    return delegating


def check_if_extension_delegate_exists(method_name: str, instance: Any) -> bool:
    """Whether `instance` is an extension with both functions for `method_name`."""
    supported_name, delegate_name = _names(method_name)
    return (
        isinstance(instance, KerasExtension)
        and hasattr(instance, supported_name)
        and hasattr(instance, delegate_name)
    )


def extension_delegate_if_exists(method_name: str, instance: Any, *args: Any, **kwargs: Any):
    """The extension's `_<name>_delegate(*args, **kwargs)` where it supports them, else None."""
    if not check_if_extension_delegate_exists(method_name, instance):
        return None
    supported_name, delegate_name = _names(method_name)
    if _plain(getattr(instance, supported_name))(instance, *args, **kwargs):
        return _plain(getattr(instance, delegate_name))(instance, *args, **kwargs)
    return None


def _patch_from_strategy(layer: Any) -> None:
    """After `Layer.__init__`: the current strategy mixes in a registered extension."""
    patch = getattr(tf.distribute.get_strategy(), "_patch_keras_extension", None)
    if patch is not None:
        patch(layer)


_OBJECTS: dict[str, Any] = {
    "KerasExtension": KerasExtension,
    "extension_delegate": extension_delegate,
    "check_if_extension_delegate_exists": check_if_extension_delegate_exists,
    "extension_delegate_if_exists": extension_delegate_if_exists,
}


def _constant(value: Any) -> Callable[[Any], Any]:
    def replacement(_stock: Any) -> Any:
        return value

    return replacement


BASE_LAYER_NAMES: dict[str, Patch] = {
    name: register(
        Patch(
            module="tf_keras.src.engine.base_layer",
            attribute=name,
            kind=Kind.NEW_ATTRIBUTE,
            replacement=_constant(value),
            reason="the original's Keras fork defines it in keras/engine/base_layer.py "
            "(layer methods delegated to strategy-registered extensions)",
            tf_keras=("2.21",),
        )
    )
    for name, value in _OBJECTS.items()
}


def install() -> None:
    """Adds the names to tf_keras' base_layer (idempotent)."""
    for patch in BASE_LAYER_NAMES.values():
        apply(patch)


def install_layer_hook() -> None:
    """Layers made from now on ask the current strategy for their extension (idempotent)."""
    install()
    keras_node_init.install_layer_hook(_patch_from_strategy)
