"""Popnn recurrent neural network operators (`ipu_tensorflow_addons.v1.layers.rnn_ops`)."""

from openipu._src.addons.v1.layers.popnn_augru import PopnnAUGRU
from openipu._src.addons.v1.layers.popnn_dynamic_gru import PopnnDynamicGRU
from openipu._src.addons.v1.layers.popnn_dynamic_lstm import PopnnDynamicLSTM
from openipu._src.addons.v1.layers.popnn_gru import PopnnGRU
from openipu._src.addons.v1.layers.popnn_lstm import PopnnLSTM

__all__ = ["PopnnAUGRU", "PopnnDynamicGRU", "PopnnDynamicLSTM", "PopnnGRU", "PopnnLSTM"]
