"""Conformance: graphcore/keras
`keras/ipu/layers/capture_activation_gradients_compatability_test.py`.

`keras.ipu.layers.CaptureActivationGradients` wraps any Keras layer whose config holds
activation functions, replacing each of them by a capturing activation (the number the
original expects per layer: custom layers with 0 to 3 activations, the core,
convolution, recurrent and locally connected layers); it refuses, with the original's
error, the layers without one (pooling, preprocessing, normalization, regularization,
attention, reshaping and merging layers). The original's cases, all of them, run here.
"""

from __future__ import annotations

import pytest
import tf_keras as keras
from tf_keras import activations
from tf_keras.ipu.layers import CaptureActivationGradients

from openipu._src.keras.layers.capture_gradients import _ActivationCapture


class CustomLayerNoAct(keras.layers.Layer):
    def call(self, inputs):
        return inputs


class CustomLayer1Act(keras.layers.Layer):
    def __init__(self, activation="relu", **kwargs):
        super().__init__(**kwargs)
        self._activation = activations.get(activation)

    def call(self, inputs):
        return self._activation(inputs)

    def get_config(self):
        return {**super().get_config(), "activation": self._activation}


class CustomLayer2Act(keras.layers.Layer):
    def __init__(self, activation="relu", second_activation="sigmoid", **kwargs):
        super().__init__(**kwargs)
        self._activation = activations.get(activation)
        self._second_activation = activations.get(second_activation)

    def call(self, inputs):
        return self._activation(inputs) + self._second_activation(inputs)

    def get_config(self):
        return {
            **super().get_config(),
            "activation": self._activation,
            "second_activation": self._second_activation,
        }


class CustomLayer3Act(keras.layers.Layer):
    def __init__(
        self,
        activation="relu",
        activation_second="sigmoid",
        third_activation_fn="linear",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._activation = activations.get(activation)
        self._activation_second = activations.get(activation_second)
        self._third_activation_fn = activations.get(third_activation_fn)

    def call(self, inputs):
        return (
            self._activation(inputs)
            + self._activation_second(inputs)
            + self._third_activation_fn(inputs)
        )

    def get_config(self):
        return {
            **super().get_config(),
            "activation": self._activation,
            "activation_second": self._activation_second,
            "third_activation_fn": self._third_activation_fn,
        }


L = keras.layers

# (layer type, its arguments, how many activations it has), as the original lists them.
CASES = [
    (CustomLayerNoAct, (), 0),
    (CustomLayer1Act, (), 1),
    (CustomLayer2Act, (), 2),
    (CustomLayer3Act, (), 3),
    (L.Dense, (1,), 1),
    (L.Embedding, (2, 1), 0),
    (L.Masking, (), 0),
    (L.Lambda, (lambda x: x,), 0),
]
CASES += [
    (layer, (1, 3), 1)
    for layer in [
        L.Conv1D,
        L.Conv2D,
        L.Conv3D,
        L.Conv1DTranspose,
        L.Conv2DTranspose,
        L.Conv3DTranspose,
        L.SeparableConv1D,
        L.SeparableConv2D,
        L.DepthwiseConv2D,
    ]
]
CASES += [
    (layer, (), 0)
    for layer in [
        L.MaxPooling1D,
        L.MaxPooling2D,
        L.MaxPooling3D,
        L.AveragePooling1D,
        L.AveragePooling2D,
        L.AveragePooling3D,
        L.GlobalMaxPooling1D,
        L.GlobalMaxPooling2D,
        L.GlobalMaxPooling3D,
        L.GlobalAveragePooling1D,
        L.GlobalAveragePooling2D,
        L.GlobalAveragePooling3D,
    ]
]
CASES += [
    (L.LSTM, (2,), 2),
    (L.GRU, (2,), 2),
    (L.SimpleRNN, (2,), 1),
    (L.TimeDistributed, (L.Dense(1),), 0),
    (L.Bidirectional, (L.SimpleRNN(2),), 0),
    (L.ConvLSTM1D, (2, 2), 2),
    (L.ConvLSTM2D, (2, 2), 2),
    (L.ConvLSTM3D, (2, 2), 2),
]
CASES += [
    (L.TextVectorization, (), 0),
    (L.Normalization, (), 0),
    (L.Discretization, (), 0),
    (L.CategoryEncoding, (2,), 0),
    (L.Hashing, (2,), 0),
    (L.StringLookup, (), 0),
    (L.IntegerLookup, (), 0),
    (L.Resizing, (2, 2), 0),
    (L.Rescaling, (2,), 0),
    (L.CenterCrop, (2, 2), 0),
    (L.RandomCrop, (2, 2), 0),
    (L.RandomFlip, (), 0),
    (L.RandomTranslation, (1, 1), 0),
    (L.RandomRotation, (1.0,), 0),
    (L.RandomZoom, (1,), 0),
    (L.RandomHeight, (1,), 0),
    (L.RandomWidth, (1,), 0),
    (L.RandomContrast, (1,), 0),
]
CASES += [(layer, (), 0) for layer in [L.BatchNormalization, L.LayerNormalization]]
CASES += [
    (layer, (0.5,), 0)
    for layer in [
        L.Dropout,
        L.SpatialDropout1D,
        L.SpatialDropout2D,
        L.SpatialDropout3D,
        L.GaussianDropout,
        L.GaussianNoise,
        L.ActivityRegularization,
        L.AlphaDropout,
    ]
]
CASES += [(L.MultiHeadAttention, (2, 2), 0), (L.Attention, (), 0), (L.AdditiveAttention, (), 0)]
CASES += [(L.Reshape, ((2, 2),), 0), (L.RepeatVector, (2,), 0), (L.Permute, ((1, 2),), 0)]
CASES += [
    (layer, (), 0)
    for layer in [
        L.Flatten,
        L.Cropping1D,
        L.Cropping2D,
        L.Cropping3D,
        L.UpSampling1D,
        L.UpSampling2D,
        L.UpSampling3D,
        L.ZeroPadding1D,
        L.ZeroPadding2D,
        L.ZeroPadding3D,
    ]
]
CASES += [(L.Dot, (1,), 0)]
CASES += [
    (layer, (), 0)
    for layer in [L.Concatenate, L.Average, L.Maximum, L.Minimum, L.Add, L.Subtract, L.Multiply]
]
CASES += [(layer, (1, 1), 1) for layer in [L.LocallyConnected1D, L.LocallyConnected2D]]


@pytest.mark.follows("testLayerCompatability")
@pytest.mark.parametrize(
    ("layer_type", "layer_args", "num_activations"), CASES, ids=[c[0].__name__ for c in CASES]
)
def test_layer_compatability(layer_type, layer_args, num_activations):
    layer = layer_type(*layer_args)
    if num_activations == 0:
        with pytest.raises(ValueError, match="does not use an activation function"):
            CaptureActivationGradients(layer)
        return
    assert CaptureActivationGradients.layer_is_supported(layer)
    wrapped = CaptureActivationGradients(layer)
    captures = wrapped._wrapped_activations  # noqa: SLF001 - what the original checks
    assert len(captures) == num_activations
    assert all(type(capture) is _ActivationCapture for capture in captures.values())
