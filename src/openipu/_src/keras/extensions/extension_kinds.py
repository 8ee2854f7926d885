"""The original's three extension classes, one per kind of Keras model.

The original mixes `SequentialExtension`, `FunctionalExtension` or `ModelExtension`
(keras/ipu/extensions/*_extensions.py) into a model created in an IPUStrategy scope, and
programs test `isinstance(model, ...)` against them. Here every such model mixes in
`KerasExtensions`; the three classes answer `isinstance`/`issubclass` by the model's
kind as it is now. (A subclass of `keras.Model` built from inputs and outputs only
becomes functional inside its `__init__`, after the model was extended.) A Sequential
model is not a `FunctionalExtension`, although Keras' Sequential is a Functional.
"""

from __future__ import annotations

from tf_keras.src.engine import functional, sequential

from openipu._src.keras.extensions.model_extensions import KerasExtensions


def _kind(cls: type) -> str:
    if issubclass(cls, sequential.Sequential):
        return "sequential"
    if issubclass(cls, functional.Functional):
        return "functional"
    return "model"


class _ByKind(type):
    kind: str

    def __instancecheck__(cls, instance) -> bool:
        return cls.__subclasscheck__(type(instance))

    def __subclasscheck__(cls, subclass) -> bool:
        return issubclass(subclass, KerasExtensions) and _kind(subclass) == cls.kind


class SequentialExtension(metaclass=_ByKind):
    """Extended `keras.Sequential` models (and their subclasses)."""

    kind = "sequential"


class FunctionalExtension(metaclass=_ByKind):
    """Extended functional models (and `Model` subclasses built from inputs and outputs)."""

    kind = "functional"


class ModelExtension(metaclass=_ByKind):
    """Extended subclassed `keras.Model`s."""

    kind = "model"
