"""Which Keras methods a user's model class overrides, and the original's rules on them.

As keras/ipu/extensions/extensions_base.py (`_make_ipu_*_function_wrapper`) and the
`_validate_call_function` of functional_extensions.py, sequential_extensions.py and
model_extensions.py: inside an IPUStrategy, fit/evaluate/predict build their own
functions, so a model class overriding `make_*_function` (or, for fit, `train_step`)
cannot be run; pipelined models also need Keras' own `test_step`, `predict_step` and
`call`; a subclassed model must implement `call`.
"""

from __future__ import annotations

from tf_keras.src.engine import functional, sequential, training

_STEP = {"fit": "train_step", "evaluate": "test_step", "predict": "predict_step"}
_MAKE = {
    "fit": "make_train_function",
    "evaluate": "make_test_function",
    "predict": "make_predict_function",
}
_NOT_SUPPORTED_IN_STRATEGY = (
    "This is not supported when using Keras within an IPUStrategy. Either remove the override "
    "from your model definition or set `enable_keras_extensions=False` when creating the "
    "IPUStrategy."
)


def user_class(model, extension_base: type) -> type:
    """The model's own class: the first in its MRO that is not an IPU extension class."""
    for cls in type(model).__mro__:
        if not issubclass(cls, extension_base):
            return cls
    return type(model)


def _keras_base(cls: type) -> type:
    if issubclass(cls, sequential.Sequential):
        return sequential.Sequential
    if issubclass(cls, functional.Functional):
        return functional.Functional
    return training.Model


def _overrides(cls: type, name: str, base: type) -> bool:
    return getattr(cls, name, None) is not getattr(base, name, None)


def check(model, cls: type, mode: str, pipelined: bool) -> None:
    """Raises as the original does before fit/evaluate/predict (`mode`) builds its function."""
    name = model.name
    make = _MAKE[mode]
    if _overrides(cls, make, training.Model):
        raise RuntimeError(
            f"The function `{make}` for the model {name} has been overridden. "
            + _NOT_SUPPORTED_IN_STRATEGY
        )
    step = _STEP[mode]
    if mode == "fit" and _overrides(cls, step, training.Model):
        raise RuntimeError(
            f"The function `{step}` for the model {name} has been overridden. "
            + _NOT_SUPPORTED_IN_STRATEGY
        )
    base = _keras_base(cls)
    if base is training.Model:
        if not _overrides(cls, "call", training.Model):
            raise NotImplementedError(
                f"The function `call` for the model {name} has not been implemented. When "
                "subclassing the `Model` class you must implement the `call` function."
            )
    elif pipelined and _overrides(cls, "call", base):
        kind = "Sequential" if base is sequential.Sequential else "Functional"
        raise RuntimeError(
            f"The function `call` for the model {name} has been overridden. This is not "
            f"supported for pipelined Keras {kind} models."
        )
    if mode != "fit" and pipelined and _overrides(cls, step, training.Model):
        raise RuntimeError(
            f"The function `{step}` for the model {name} has been overridden. This is not "
            "supported for pipelined Keras models."
        )
