"""`tf_keras` `Model.from_config`, `Sequential.from_config` and the SavedModel loader, wrapped;
`Model.get_config` counted.

Why: the IPU options of a model (gradient accumulation, pipelining, ...) are
saved in its config under the original's keys (`keras/extensions/activation.py`),
which stock Keras would pass to a subclassed model's constructor. The wrapper
hands the stock classmethod to openipu's handler, which removes the keys and
restores the options on the loaded model. A model revived from a SavedModel is
not built by `from_config`: the loader's wrapper restores its options from the
config in its metadata. Checked with tf_keras 2.21 (both classes define
`from_config` in their own `__dict__`; Sequential does not call Model's; `load_model`
calls the loader through its module, `saved_model_load.load`). `Model.get_config` counts its
calls per thread: a subclassed model's own `get_config` that does not call it saves no IPU
options, and the original refuses to load such a model (its model_extensions.py
`_verify_get_config_override`); the count tells.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, delegating, register

_calls = threading.local()


def _counting(stock: Callable) -> Callable:
    @functools.wraps(stock)  # keeps Keras's `_is_default` mark
    def get_config(self):
        _calls.count = getattr(_calls, "count", 0) + 1
        return stock(self)

    return get_config


MODEL_GET_CONFIG = register(
    Patch(
        module="tf_keras.src.engine.training",
        attribute="Model.get_config",
        kind=Kind.METHOD,
        replacement=_counting,
        reason="whether a subclassed model's own get_config calls the base's (the IPU options "
        "are saved only then, as the original's)",
        tf_keras=("2.21",),
    )
)


def base_get_config_calls() -> int:
    """How many times `Model.get_config` ran in this thread (`install_get_config_count`)."""
    return getattr(_calls, "count", 0)


def install_get_config_count() -> None:
    apply(MODEL_GET_CONFIG)


_handler: list[Callable] = []


def _wrap_from_config(stock: classmethod) -> classmethod:
    return classmethod(delegating(stock.__func__, lambda: _handler[0] if _handler else None))


def _from_config_patch(module: str, owner: str) -> Patch:
    return register(
        Patch(
            module=f"tf_keras.src.engine.{module}",
            attribute=f"{owner}.from_config",
            kind=Kind.CLASSMETHOD,
            replacement=_wrap_from_config,
            reason=f"the IPU options saved in a {owner} model's config come back with the model",
            tf_keras=("2.21",),
        )
    )


MODEL_FROM_CONFIG = _from_config_patch("training", "Model")
SEQUENTIAL_FROM_CONFIG = _from_config_patch("sequential", "Sequential")


def install(from_config: Callable) -> None:
    """Routes both `from_config`s to `from_config(stock, cls, config, custom_objects=None)`.

    `stock` is the stock classmethod's function (call it as `stock(cls, config,
    custom_objects)`). Idempotent; the first handler installed stays.
    """
    if not _handler:
        _handler.append(from_config)
    apply(MODEL_FROM_CONFIG)
    apply(SEQUENTIAL_FROM_CONFIG)


_saved_model_handler: list[Callable] = []

SAVED_MODEL_LOAD = register(
    Patch(
        module="tf_keras.src.saving.legacy.saved_model.load",
        attribute="load",
        kind=Kind.FUNCTION,
        replacement=lambda stock: delegating(
            stock, lambda: _saved_model_handler[0] if _saved_model_handler else None
        ),
        reason=(
            "a model revived from a SavedModel is not built by from_config: its IPU options "
            "are restored from the config in its metadata afterwards, as the original's "
            "keras/saving/saved_model/load.py does"
        ),
        tf_keras=("2.21",),
    )
)


def install_saved_model_load(load: Callable) -> None:
    """Routes the SavedModel loader to `load(stock, path, compile=True, options=None)`."""
    if not _saved_model_handler:
        _saved_model_handler.append(load)
    apply(SAVED_MODEL_LOAD)
