"""Popnn recurrent layers (`LSTM` and `GRU` are aliases of `PopnnLSTM` and `PopnnGRU`)."""

from openipu._src.addons.keras.layers.popnn_gru import PopnnGRU
from openipu._src.addons.keras.layers.popnn_lstm import PopnnLSTM

GRU = PopnnGRU
LSTM = PopnnLSTM

__all__ = ["GRU", "LSTM", "PopnnGRU", "PopnnLSTM"]
