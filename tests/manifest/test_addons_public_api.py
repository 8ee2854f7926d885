"""Every name of the addons spec exists at its documented path (`ipu_tensorflow_addons.txt`,
generated from spec/ipu-tensorflow-addons-api.txt): its classes, the targets of its aliases,
and the methods the spec documents on each class, defined by our class rather than only
inherited from Keras."""

from __future__ import annotations

import inspect
import pathlib

import pytest
from test_public_api import _resolve

MANIFEST = pathlib.Path(__file__).with_name("ipu_tensorflow_addons.txt")

# The spec's aliases: the public name is the very class documented at the other path.
ALIASES = {
    "keras.layers.GRU": "keras.layers.rnn.PopnnGRU",
    "keras.layers.LSTM": "keras.layers.rnn.PopnnLSTM",
    "keras.layers.PopnnGRU": "keras.layers.rnn.PopnnGRU",
    "keras.layers.PopnnLSTM": "keras.layers.rnn.PopnnLSTM",
    "keras.layers.GroupNorm": "keras.layers.normalization.GroupNormalization",
    "keras.layers.GroupNormalization": "keras.layers.normalization.GroupNormalization",
    "keras.layers.InstanceNorm": "keras.layers.normalization.InstanceNormalization",
    "keras.layers.InstanceNormalization": "keras.layers.normalization.InstanceNormalization",
    "keras.layers.LayerNorm": "keras.layers.normalization.LayerNormalization",
    "keras.layers.LayerNormalization": "keras.layers.normalization.LayerNormalization",
}


def _names() -> list:
    lines = MANIFEST.read_text().splitlines()
    names = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return names


@pytest.mark.parametrize("name", _names())
def test_name_resolves(name):
    obj = _resolve(name)
    if inspect.isclass(obj):
        assert obj.__module__.startswith("openipu._src."), f"{name} is not our class"
        return
    owner = _resolve(name.rsplit(".", 1)[0])
    method = name.rsplit(".", 1)[1]
    defined_by = next(cls for cls in owner.__mro__ if method in vars(cls))
    assert defined_by.__module__.startswith("openipu._src."), (
        f"{name} is only {defined_by.__module__}.{defined_by.__qualname__}.{method}"
    )


@pytest.mark.parametrize("alias, target", sorted(ALIASES.items()))
def test_aliases_are_the_documented_classes(alias, target):
    assert _resolve(f"ipu_tensorflow_addons.{alias}") is _resolve(f"ipu_tensorflow_addons.{target}")


def test_the_addons_layers_are_the_ipu_keras_layers():
    from tensorflow.python import ipu

    import ipu_tensorflow_addons

    for name in ("Dropout", "Embedding", "GroupNormalization", "LayerNormalization"):
        assert getattr(ipu_tensorflow_addons.keras.layers, name) is getattr(ipu.keras.layers, name)
