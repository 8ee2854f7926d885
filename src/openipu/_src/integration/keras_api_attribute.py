"""The `ipu` attribute of the Keras 2 API modules (`tf.keras.ipu`, `tf_keras.ipu`).

Why: IPU programs use `tf.keras.ipu.<name>` without importing openipu. The
start-up hook (`_openipu_startup`) wraps the loaders of `tf_keras`,
`tf_keras.api._v2.keras` and `tensorflow.keras` and, once such a module has
run, gives it a lazy `ipu` module (`openipu.keras_ipu`, imported on first use)
through `add_to(module)`. Checked with TensorFlow 2.21 and tf_keras 2.21, whose
API modules have no `ipu` attribute.

This module must stay as light as the start-up hook: no TensorFlow import.
"""

from __future__ import annotations

import sys
import types

import _openipu_startup
from openipu._src.integration.patching import Kind, Patch, apply, register


def _lazy_ipu_module(original: object) -> types.ModuleType:
    del original  # the stock module has none
    return _openipu_startup.LazyModule("openipu.keras_ipu")


IPU_ATTRIBUTES: dict[str, Patch] = {
    name: register(
        Patch(
            module=name,
            attribute="ipu",
            kind=Kind.NEW_ATTRIBUTE,
            replacement=_lazy_ipu_module,
            reason="`tf.keras.ipu` and `tf_keras.ipu` resolve to openipu.keras_ipu in "
            "unmodified IPU programs",
            tensorflow=("2.21",),
            tf_keras=("2.21",),
        )
    )
    for name in _openipu_startup.KERAS_API_MODULES
}


def add_to(module: types.ModuleType) -> None:
    """Gives the Keras API module `module` its `ipu` attribute, unless it has one already."""
    patch = IPU_ATTRIBUTES[module.__name__]
    if not hasattr(module, "ipu"):
        apply(patch)
    if "tf_keras.src.engine.base_layer" in sys.modules:
        # The original Keras fork's layer extension names, which programs use when their
        # layer classes are defined (imported here: tf_keras, so TensorFlow, is loaded).
        from openipu._src.integration import keras_layer_delegation

        keras_layer_delegation.install()
