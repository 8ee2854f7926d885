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
from tf_keras.src.engine import functional, training
from tf_keras.src.utils import generic_utils

from openipu._src.integration import (
    keras_from_config,
    keras_input_batch_sizes,
    keras_input_messages,
    keras_internals,
    keras_layer_delegation,
    keras_loss_scaling,
    keras_model_new,
)
from openipu._src.keras.extensions import pipeline_stages
from openipu._src.keras.extensions.model_extensions import (
    LEGACY_SAVED_OPTIONS_KEY,
    SAVED_OPTION_KEYS,
    KerasExtensions,
)
from openipu._src.strategy.ipu_strategy import IPUStrategyV1

_lock = threading.Lock()
_loading = threading.local()  # errors of from_config while a SavedModel loads
_extended_classes: dict[type, type] = {}


def extended_class(cls: type) -> type:
    """`cls` with the IPU methods mixed in (made once per class)."""
    if issubclass(cls, KerasExtensions):
        return cls
    with _lock:
        extended = _extended_classes.get(cls)
        if extended is None:
            # A subclassed model with Keras's own `build` traces its call when built, as the
            # original's; from a base class, so that Keras still sees no `build` of its own.
            mixin = _BuildTracing if _builds_by_default(cls) else KerasExtensions
            extended = type(
                cls.__name__,
                (mixin, cls),
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


def _builds_by_default(cls: type) -> bool:
    """Whether `cls` is a subclassed model with Keras's own `build`."""
    return (
        not issubclass(cls, functional.Functional)
        and getattr(cls, "build", None) is training.Model.build
    )


class _BuildTracing(KerasExtensions):
    """The IPU methods, and `Model.build`, then as the original's model_extensions.py `_build_delegate`: the call
    is traced (its PipelineStage scopes read) and the model can be saved."""

    @generic_utils.default  # Keras calls it only as it calls its own: when asked to build
    def build(self, input_shape=None):
        with pipeline_stages.building(self):
            training.Model.build(self, input_shape)
        self._ipu_built_from_shape()


def _init_set_name_as_model(self, name, zero_based: bool = True) -> None:
    """An unnamed functional model is "model", "model_1", ... as in stock Keras, which names
    it so only when its class is exactly `Functional` (functional.py `_init_set_name`)."""
    if name:
        self._name = name
    else:
        self._name = backend.unique_object_name("model", zero_based=zero_based)


@generic_utils.default  # Keras treats the config as its own (not a user override)
def _get_config_with_options(self):
    before = keras_from_config.base_get_config_calls()
    config = super(type(self), self).get_config()
    if not isinstance(config, dict):
        return config
    if pipeline_stages.kind_of(self) != "model":
        # The original merges its options into the model's config (functional_extensions.py
        # `_get_config_delegate`), so a model saved by either loads in the other.
        return {**config, **self._ipu_saved_options()}
    if keras_from_config.base_get_config_calls() == before:
        return config  # its own get_config left the base's out: no options (as the original)
    # The original's marker (model_extensions.py `_get_config_delegate`).
    return {**config, **self._ipu_saved_options(), "get_config_has_been_called": True}


def _overrides_get_config(cls: type) -> bool:
    """Whether a class of the user's (not openipu's extended class) defines `get_config`
    below `keras.Model`."""
    for klass in cls.__mro__:
        if klass is training.Model:
            return False
        if "get_config" in klass.__dict__ and not issubclass(klass, KerasExtensions):
            return True
    return False


def _check_get_config_override(cls: type, options) -> None:
    """model_extensions.py `_verify_get_config_override`: a subclassed model whose own
    get_config did not call the base's saved no IPU options; loading it says so."""
    if (
        options is None
        and not issubclass(cls, functional.Functional)
        and _overrides_get_config(cls)
        and _ipu_strategy_ordinal() is not None
    ):
        raise RuntimeError(
            "get_config() has been overridden on a subclassed Model but IPU-specific "
            "properties have not been saved since the implementation does not call "
            "super().get_config(). In the get_config() override, add `config = "
            "super().get_config()` and merge your configuration with this config dict to "
            "ensure these options are saved along with the rest of your model."
        )


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
    keras_from_config.install_get_config_count()
    keras_loss_scaling.install()
    keras_layer_delegation.install()
    keras_input_batch_sizes.install()
    keras_input_messages.install()


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
    try:
        _check_get_config_override(cls, options)
    except RuntimeError as error:
        refused = getattr(_loading, "refused", None)
        if refused is None:
            raise
        # The SavedModel loader would revive a plain model instead: it raises it after.
        refused.append(error)
    model = stock(cls, config, custom_objects)
    if options and isinstance(model, KerasExtensions):
        model._ipu_restore_options(options)  # noqa: SLF001
    return model


def _saved_model_load_with_options(stock, *args, **kwargs):
    """A model revived from a SavedModel gets the options in its metadata's config back
    (the original's keras/saving/saved_model/load.py `load`, its "IPU specific changes")."""
    outer = getattr(_loading, "refused", None)
    _loading.refused = []
    try:
        model = stock(*args, **kwargs)
        if _loading.refused:
            raise _loading.refused[0]
    finally:
        _loading.refused = outer
    if isinstance(model, KerasExtensions):
        _, options = _split_options(keras_internals.saved_model_config(model))
        if options:
            model._ipu_restore_options(options)  # noqa: SLF001
    return model
