"""TensorFlow layers made for IPU TensorFlow (time-major TF1 Popnn recurrent layers)."""

from ipu_tensorflow_addons.v1.layers import rnn_ops
from ipu_tensorflow_addons.v1.layers.rnn_ops import (
    PopnnAUGRU,
    PopnnDynamicGRU,
    PopnnDynamicLSTM,
    PopnnGRU,
    PopnnLSTM,
)

__all__ = [
    "PopnnAUGRU",
    "PopnnDynamicGRU",
    "PopnnDynamicLSTM",
    "PopnnGRU",
    "PopnnLSTM",
    "rnn_ops",
]
