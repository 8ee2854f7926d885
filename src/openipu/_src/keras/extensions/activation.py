"""Giving Keras models created in an IPUStrategy scope their IPU methods.

The original patched Keras itself. openipu does the smallest equivalent:
`Model.__new__` is wrapped (`integration/keras_model_new.py`) so that a model
created while an IPUStrategy with Keras extensions is the current strategy
becomes an instance of a subclass of its own class that mixes in
`KerasExtensions`. The subclass keeps the class name, so `isinstance`,
`type(model).__name__` and saved configurations are unchanged, and the model
loads into stock Keras. The subclass defines no constructor, so Keras still
recognises functional models by their `__init__`. `from_config` is wrapped
(`integration/keras_from_config.py`) so that the IPU options saved in a
model's config come back with it.
"""

from __future__ import annotations

import threading

import tensorflow as tf
from tf_keras.src import backend
from tf_keras.src.engine import functional
from tf_keras.src.utils import generic_utils

from openipu._src.integration import (
    keras_from_config,
    keras_internals,
    keras_loss_scaling,
    keras_model_new,
)
from openipu._src.keras.extensions.model_extensions import (
    LEGACY_SAVED_OPTIONS_KEY,
    SAVED_OPTION_KEYS,
    KerasExtensions,
)
from openipu._src.strategy.ipu_strategy import IPUStrategyV1

_lock = threading.Lock()
_extended_classes: dict[type, type] = {}


def extended_class(cls: type) -> type:
    """`cls` with the IPU methods mixed in (made once per class)."""
    if issubclass(cls, KerasExtensions):
        return cls
    with _lock:
        extended = _extended_classes.get(cls)
        if extended is None:
            extended = type(
                cls.__name__,
                (KerasExtensions, cls),
                {
                    "__module__": cls.__module__,
                    "__qualname__": cls.__qualname__,
                    "get_config": _get_config_with_options,
                    # Keras asks whether a model's own class defines `build` (an unbuilt
                    # one then has no weights to read, `Model._assert_weights_created`).
                    **({"build": cls.__dict__["build"]} if "build" in cls.__dict__ else {}),
                    **(
                        {"_init_set_name": _init_set_name_as_model}
                        if cls is functional.Functional
                        else {}
                    ),
                },
            )
            _extended_classes[cls] = extended
        return extended


def _init_set_name_as_model(self, name, zero_based: bool = True) -> None:
    """An unnamed functional model is "model", "model_1", ... as in stock Keras, which names
    it so only when its class is exactly `Functional` (functional.py `_init_set_name`)."""
    if name:
        self._name = name
    else:
        self._name = backend.unique_object_name("model", zero_based=zero_based)


@generic_utils.default  # Keras treats the config as its own (not a user override)
def _get_config_with_options(self):
    config = super(type(self), self).get_config()
    if isinstance(config, dict):
        # The original merges its options into the model's config (functional_extensions.py
        # `_get_config_delegate`), so a model saved by either loads in the other.
        config = {**config, **self._ipu_saved_options()}
    return config


def _ipu_strategy_ordinal() -> int | None:
    strategy = tf.distribute.get_strategy()
    if isinstance(strategy, IPUStrategyV1) and strategy.enable_keras_extensions:
        return strategy.extended.ipu_ordinal
    return None


def install() -> None:
    """Wraps `Model.__new__` and `from_config` (once per process)."""
    keras_model_new.install(_extend_in_ipu_scope)
    keras_from_config.install(_from_config_with_options)
    keras_from_config.install_saved_model_load(_saved_model_load_with_options)
    keras_loss_scaling.install()


def _extend_in_ipu_scope(instance) -> None:
    """A model created in an IPUStrategy scope gains the IPU methods."""
    ordinal = _ipu_strategy_ordinal()
    if ordinal is not None and not isinstance(instance, KerasExtensions):
        instance.__class__ = extended_class(type(instance))
        instance.__dict__["_ipu_device_ordinal"] = ordinal


def _split_options(config):
    """(the model's own config, its saved IPU options or None)."""
    if not isinstance(config, dict):
        return config, None
    options = {k: config[k] for k in SAVED_OPTION_KEYS if k in config}
    legacy = config.get(LEGACY_SAVED_OPTIONS_KEY)
    if isinstance(legacy, dict):  # saved by an earlier openipu
        options = {**legacy, **options}
    if not options and legacy is None:
        return config, None
    own = {
        k: v
        for k, v in config.items()
        if k not in SAVED_OPTION_KEYS and k != LEGACY_SAVED_OPTIONS_KEY
    }
    return own, options


def _from_config_with_options(stock, cls, config, custom_objects=None):
    config, options = _split_options(config)
    model = stock(cls, config, custom_objects)
    if options and isinstance(model, KerasExtensions):
        model._ipu_restore_options(options)  # noqa: SLF001
    return model


def _saved_model_load_with_options(stock, *args, **kwargs):
    """A model revived from a SavedModel gets the options in its metadata's config back
    (the original's keras/saving/saved_model/load.py `load`, its "IPU specific changes")."""
    model = stock(*args, **kwargs)
    if isinstance(model, KerasExtensions):
        _, options = _split_options(keras_internals.saved_model_config(model))
        if options:
            model._ipu_restore_options(options)  # noqa: SLF001
    return model
