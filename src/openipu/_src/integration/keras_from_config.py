"""`tf_keras` `Model.from_config` and `Sequential.from_config`, wrapped.

Why: the IPU options of a model (gradient accumulation, pipelining, ...) are
saved in its config under a key of openipu's (`keras/extensions/activation.py`),
which stock Keras would pass to the constructor. The wrapper hands the stock
classmethod to openipu's handler, which removes the key and restores the
options on the loaded model. Checked with tf_keras 2.21 (both classes define
`from_config` in their own `__dict__`; Sequential does not call Model's).
"""

from __future__ import annotations

from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, delegating, register

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
