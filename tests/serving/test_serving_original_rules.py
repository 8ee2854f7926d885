"""ipu.serving's refusals as the original's (tensorflow/python/ipu/serving.py, the
pipeline it builds with pipelining_ops.py, keras extensions_base.py): same exception
types, messages starting with the original's words, and no refusal the original lacks."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _step(x):
    return x * 2.0


def test_signature_values_are_refused_with_the_originals_messages(ipu_system, tmp_path):
    export = ipu.serving.export_single_step
    with pytest.raises(TypeError, match="`predict_step_signature` must be an instance of tuple"):
        export(_step, str(tmp_path / "a"), 1, predict_step_signature="x")
    with pytest.raises(ValueError, match="`predict_step_signature` must be not empty"):
        export(_step, str(tmp_path / "b"), 1, predict_step_signature=[])
    with pytest.raises(
        TypeError, match=r"`predict_step_signature\[0\]` is not an instance of TensorSpec"
    ):
        export(_step, str(tmp_path / "c"), 1, predict_step_signature=[1])
    with pytest.raises(
        TypeError, match="If `input_dataset` is provided, it should be an instance of tf.Dataset"
    ):
        export(_step, str(tmp_path / "d"), 1, input_dataset=[1.0, 2.0])
    with pytest.raises(
        ValueError, match="`input_signature` deduction from given `predict_step` is not possible"
    ):
        export(_step, str(tmp_path / "e"), 1)
    with pytest.raises(
        ValueError, match="Empty `input_signature` inside provided tf.function `predict_step`"
    ):
        export(tf.function(_step), str(tmp_path / "f"), 1)


def test_preprocessing_outputs_not_fitting_the_step(ipu_system, tmp_path):
    def preprocessing_step(x):
        return x, x

    with pytest.raises(
        ValueError,
        match="The number of the `preprocessing_step` outputs does not match the number of "
        "`tf.TensorSpec` objects in the signature of `predict_step`",
    ):
        ipu.serving.export_single_step(
            _step,
            str(tmp_path / "a"),
            1,
            predict_step_signature=[tf.TensorSpec([2], tf.float32)],
            preprocessing_step=preprocessing_step,
            preprocessing_step_signature=[tf.TensorSpec([2], tf.float32)],
        )

    def casting_step(x):
        return (tf.cast(x, tf.int32),)

    with pytest.raises(
        ValueError,
        match="`preprocessing_step` returned Tensor at postion 0 does not match required "
        "`predict_step` TensorSpec",
    ):
        ipu.serving.export_single_step(
            _step,
            str(tmp_path / "b"),
            1,
            predict_step_signature=[tf.TensorSpec([2], tf.float32)],
            preprocessing_step=casting_step,
            preprocessing_step_signature=[tf.TensorSpec([2], tf.float32)],
        )


def test_pipeline_arguments_are_refused_as_the_originals_pipeline(ipu_system, tmp_path):
    signature = [tf.TensorSpec([2], tf.float32)]
    export = ipu.serving.export_pipeline
    with pytest.raises(ValueError, match="Pipeline requires at least two computational stages"):
        export([_step], str(tmp_path / "a"), 2, predict_step_signature=signature)
    with pytest.raises(
        TypeError, match="computational_stages argument needs to be a list or a tuple"
    ):
        export(iter([_step, _step]), str(tmp_path / "b"), 2, predict_step_signature=signature)
    with pytest.raises(
        ValueError, match="Each stage must be mapped to an IPU: 1 mappings != 2 stages"
    ):
        export(
            [_step, _step],
            str(tmp_path / "c"),
            2,
            device_mapping=[0],
            predict_step_signature=signature,
        )
    with pytest.raises(TypeError, match="device_mapping argument needs to be a list or a tuple"):
        export(
            [_step, _step],
            str(tmp_path / "d"),
            2,
            device_mapping=np.array([0, 1]),
            predict_step_signature=signature,
        )
    with pytest.raises(
        ValueError,
        match="forward_propagation_stages_poplar_options must be a list or a tuple of "
        "PipelineStageOptions objects of length 2",
    ):
        export(
            [_step, _step],
            str(tmp_path / "e"),
            2,
            poplar_options=[ipu.pipelining_ops.PipelineStageOptions()],
            predict_step_signature=signature,
        )


def test_iterations_may_be_a_numpy_integer(ipu_system, tmp_path):
    # The original hands `iterations` to its loop's maximum_iterations, which takes it.
    runtime_predict = ipu.serving.export_single_step(
        _step,
        str(tmp_path / "model"),
        np.int64(2),
        predict_step_signature=[tf.TensorSpec([3], tf.float32)],
    )
    x = np.array([1.0, -2.0, 0.5], np.float32)
    (result,) = runtime_predict(x)
    np.testing.assert_allclose(result.numpy(), x * 2.0)


def _keras_model():
    inputs = tf.keras.Input(shape=(4,), name="features")
    outputs = tf.keras.layers.Dense(2, name="dense")(inputs)
    return tf.keras.Model(inputs, outputs)


def test_keras_batch_size_is_taken_as_a_tf_dimension(strategy_on, tmp_path):
    strategy = strategy_on(1)
    with strategy.scope():
        model = _keras_model()
        with pytest.raises(TypeError, match="Dimension value must be integer"):
            ipu.serving.export_keras(model, str(tmp_path / "a"), batch_size=2.0)
        with pytest.raises(ValueError, match="Dimension -1 must be >= 0"):
            ipu.serving.export_keras(model, str(tmp_path / "b"), batch_size=-1)
        # A NumPy integer is a batch size there.
        runtime_predict = ipu.serving.export_keras(model, str(tmp_path / "c"), np.int64(3))
        x = np.random.RandomState(5).rand(3, 4).astype(np.float32)
        (result,) = runtime_predict(x)
    kernel, bias = model.get_layer("dense").get_weights()
    np.testing.assert_allclose(result.numpy(), x @ kernel + bias, rtol=1e-5)


def test_keras_model_without_known_inputs(strategy_on, tmp_path):
    strategy = strategy_on(1)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        with pytest.raises(RuntimeError, match="Cannot get model's input signature"):
            ipu.serving.export_keras(model, str(tmp_path / "m"), batch_size=2)
