"""The strategy's registry of Keras layer extensions, as the original's IPUStrategy had.

The original's IPUStrategy (tensorflow/python/ipu/keras_extensions.py `KerasExtensions`)
keeps extension classes by (layer class, extension base class): every Keras layer made
while the strategy is current is given a class that mixes the registered extension into
its own (graphcore/keras calls `_patch_keras_extension` at the end of
`Layer.__init__`), and `base_layer.extension_delegate` methods then call the extension's
`_<name>_delegate` where its `_<name>_supported` agrees
(`integration/keras_layer_delegation.py`). It is a private mechanism that the original's own tests use; no
Keras class is needed here, so the strategy does not depend on Keras.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from openipu._src.integration import keras_layer_delegation


class KerasLayerExtensions:
    """Mixed into IPUStrategy: `_register_keras_extension` and the methods around it."""

    _enable_keras_extensions: bool

    @property
    def _layer_extensions(self) -> OrderedDict[tuple[type, type], type]:
        registry = self.__dict__.get("_keras_layer_extensions")
        if registry is None:
            registry = self.__dict__["_keras_layer_extensions"] = OrderedDict()
        return registry

    def _register_keras_extension(
        self, class_type: type, extension_type: type, extension: type
    ) -> None:
        self._layer_extensions[(class_type, extension_type)] = extension
        keras_layer_delegation.install_layer_hook()

    def _get_keras_extension(self, class_type: type, extension_type: type) -> type | None:
        return self._layer_extensions.get((class_type, extension_type))

    def _delete_keras_extension(self, class_type: type, extension_type: type) -> None:
        self._layer_extensions.pop((class_type, extension_type), None)

    def _iterate_keras_extensions(self) -> Iterator[tuple[tuple[type, type], type]]:
        yield from list(self._layer_extensions.items())

    def _patch_keras_extension(self, instance: Any) -> None:
        """Gives `instance` (a layer just made) a class mixing in its registered extension:
        the first registration whose layer class it is an instance of."""
        if not self._enable_keras_extensions:
            return
        for (class_type, extension_type), extension in self._iterate_keras_extensions():
            if not isinstance(instance, class_type):
                continue
            if isinstance(instance, extension_type):
                if not isinstance(instance, extension):
                    # The original's message (keras_extensions.py).
                    raise RuntimeError(
                        "KerasExtension patching failed - already patched with a "
                        "different extension."
                    )
                return
            own_class = type(instance)
            # The class keeps its name: Keras compares class names in places.
            patched = type(own_class.__name__, (own_class, extension), {})
            patched.__init__ = _patched_init(own_class, extension)  # type: ignore[misc]
            instance.__class__ = patched
            instance.__dict__["__original_class__"] = own_class
            _construct(extension, instance)
            return


def _construct(klass: Any, instance: Any, *args: Any, **kwargs: Any) -> None:
    """Runs `klass`'s own constructor on `instance` (a part of its class)."""
    klass.__init__(instance, *args, **kwargs)


def _patched_init(own_class: type, extension: type) -> Callable[..., None]:
    """The mixed class's constructor (`from_config` makes new instances): both parts."""

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        _construct(own_class, self, *args, **kwargs)
        _construct(extension, self)

    return init
