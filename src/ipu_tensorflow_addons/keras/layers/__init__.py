"""Keras layers made for IPU TensorFlow."""

from ipu_tensorflow_addons.keras.layers.normalization import (
    GroupNorm,
    GroupNormalization,
    InstanceNorm,
    InstanceNormalization,
    LayerNorm,
    LayerNormalization,
)
from ipu_tensorflow_addons.keras.layers.rnn import GRU, LSTM, PopnnGRU, PopnnLSTM
from openipu._src.addons.keras.layers.ctc_inference_layer import CTCInferenceLayer
from openipu._src.addons.keras.layers.ctc_loss import CTCLoss
from openipu._src.addons.keras.layers.ctc_predictions_layer import CTCPredictionsLayer
from openipu._src.addons.keras.layers.effective_transformer import EffectiveTransformer
from openipu._src.addons.keras.layers.f8_convert import ConvertFromF8, ConvertToF8
from openipu._src.addons.keras.layers.f8_dense import Dense
from openipu._src.addons.keras.layers.serial_dense import SerialDense
from openipu._src.keras.layers.assume_equal_across_replicas import AssumeEqualAcrossReplicas
from openipu._src.keras.layers.dropout import Dropout
from openipu._src.keras.layers.embedding import Embedding
from openipu._src.keras.layers.recomputation_checkpoint import RecomputationCheckpoint

__all__ = [
    "AssumeEqualAcrossReplicas",
    "CTCInferenceLayer",
    "CTCLoss",
    "CTCPredictionsLayer",
    "ConvertFromF8",
    "ConvertToF8",
    "Dense",
    "Dropout",
    "EffectiveTransformer",
    "Embedding",
    "GRU",
    "GroupNorm",
    "GroupNormalization",
    "InstanceNorm",
    "InstanceNormalization",
    "LSTM",
    "LayerNorm",
    "LayerNormalization",
    "PopnnGRU",
    "PopnnLSTM",
    "RecomputationCheckpoint",
    "SerialDense",
]
