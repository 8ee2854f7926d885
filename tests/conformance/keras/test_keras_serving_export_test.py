"""Conformance: graphcore/keras `keras/ipu/serving_export_test.py`.

Keras models made in an IPUStrategy (Sequential, functional with two inputs, subclassed,
and their pipelined forms) export for serving with `ipu.serving.export_keras` or
`model.export_for_ipu_serving` at a batch size of their own, with pre- and
postprocessing steps given as tf.functions or with signatures (and variables inside); the
returned function and the SavedModel loaded back give the original's values (a Conv1D of
kernel 3 with ReLU on fixed inputs). Exporting refuses a model made outside an
IPUStrategy and a non-empty directory, with the original's errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu
from tensorflow.python.eager import def_function
from tensorflow.python.framework import function
from tensorflow.python.ops import gen_functional_ops

INPUT = np.array([[[-1.0], [2.0], [-3.0]]], np.float32)
INPUT_PAIR = np.array([[[-1.0], [2.0], [-3.0]], [[-0.5], [0.0], [-2.0]]], np.float32)
SECOND_INPUT_PAIR = np.array([[2.0], [4.0]], np.float32)
# The Conv1D (kernel 3) + input2 + ReLU of INPUT_PAIR and SECOND_INPUT_PAIR.
TWO_INPUTS_RESULT = np.array([[[5.0, 5.0], [0.0, 0.0]], [[2.5, 2.5], [0.0, 0.0]]], np.float32)


def _conv():
    return keras.layers.Conv1D(
        filters=2, kernel_size=2, kernel_initializer=keras.initializers.Constant(value=3)
    )


def _sequential(strategy, batch_size, stages=False):
    with strategy.scope():
        model = keras.Sequential([_conv(), keras.layers.Activation("relu")])
        if stages:
            model.set_pipeline_stage_assignment([0, 1])
            model.set_pipelining_options(device_mapping=[0, 1])
        model.build((batch_size, 3, 1))
        model.compile(steps_per_execution=16)
    return model


def _functional_two_inputs(strategy, batch_size, stages=False):
    """Conv1D(x1) + x2, ReLU; and that summed over its last axis."""
    with strategy.scope():
        input1 = keras.layers.Input(shape=(3, 1), name="x1", batch_size=batch_size)
        input2 = keras.layers.Input(shape=(1,), name="x2", batch_size=batch_size)
        if stages:
            with keras.ipu.PipelineStage(0):
                x = _conv()(input1)
            with keras.ipu.PipelineStage(1):
                x = keras.layers.Add()([x, input2])
                out_0 = keras.layers.Activation("relu")(x)
                out_1 = tf.math.reduce_sum(out_0, 2)
            model = keras.Model(inputs=(input1, input2), outputs=[out_0, out_1])
            model.set_pipelining_options(device_mapping=[0, 1])
        else:
            x = keras.layers.Add()([_conv()(input1), input2])
            out_0 = keras.layers.Activation("relu")(x)
            model = keras.Model([input1, input2], [out_0, tf.math.reduce_sum(out_0, 2)])
        model.build([(batch_size, 3, 1), (batch_size, 1)])
        model.compile(steps_per_execution=16)
    return model


class SimpleModel(keras.Model):
    def __init__(self, stages=False):
        super().__init__()
        self.conv = _conv()
        self.relu = keras.layers.Activation("relu")
        self.add = keras.layers.Add()
        self.stages = stages

    def call(self, inputs):
        if not self.stages:
            return self.relu(self.add([self.conv(inputs[0]), inputs[1]]))
        with keras.ipu.PipelineStage(0):
            x = self.conv(inputs[0])
        with keras.ipu.PipelineStage(1):
            out0 = self.relu(self.add([x, inputs[1]]))
            out1 = tf.math.reduce_sum(out0, 1)
        return out0, out1


def _subclassed(strategy, batch_size, stages=False):
    with strategy.scope():
        model = SimpleModel(stages)
        model.build([(batch_size, 3, 1), (batch_size, 1)])
        if stages:
            model.set_pipelining_options(device_mapping=[0, 1])
        model.compile(steps_per_execution=16)
    return model


def _load_and_run(path, inputs):
    """Runs the loaded SavedModel's serving signature on the IPU, as the original's helper:
    a list of inputs goes to the inputs Keras named input_<n>, in their order."""
    loaded = tf.saved_model.load(str(path)).signatures[
        tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
    ]
    names = [tensor.name.split(":")[0] for tensor in loaded.inputs]
    if isinstance(inputs, list):
        names = sorted((n for n in names if "input_" in n), key=lambda n: int(n.split("_")[1]))
        assert len(names) == len(inputs)
        inputs = dict(zip(names, inputs, strict=True))
    elif not isinstance(inputs, dict):
        inputs = {names[0]: inputs}
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        return strategy.run(loaded, kwargs=inputs)


@pytest.mark.follows("test_export_keras_sequential_one_input")
def test_export_keras_sequential_one_input(strategy_on, tmp_path):
    strategy = strategy_on(1)
    model = _sequential(strategy, 4)
    runtime_func = ipu.serving.export_keras(model, str(tmp_path), 1, output_names="result")
    expected = np.array([[[3.0, 3.0], [0.0, 0.0]]], np.float32)
    with strategy.scope():
        result = strategy.run(runtime_func, args=(tf.constant(INPUT),))
    np.testing.assert_allclose(result["result"], expected)
    np.testing.assert_allclose(_load_and_run(tmp_path, INPUT)["result"], expected)


def _check_pre_and_post_processing(strategy, runtime_func, tmp_path):
    expected = np.array([[[30.0, 30.0], [0.0, 0.0]]], np.float32)
    with strategy.scope():
        result = strategy.run(runtime_func, args=(tf.constant(INPUT),))
    loaded = _load_and_run(tmp_path, INPUT)
    for outputs in (result, loaded):
        np.testing.assert_allclose(outputs["result"], expected)
        np.testing.assert_allclose(outputs["result_reduced"], expected.sum())


@pytest.mark.follows("test_export_keras_sequential_one_input_post_pre_processing")
def test_export_keras_sequential_one_input_post_pre_processing(strategy_on, tmp_path):
    strategy = strategy_on(1)
    model = _sequential(strategy, 4)

    @tf.function(input_signature=(tf.TensorSpec(shape=(1, 3, 1), dtype=np.float32),))
    def preprocessing_step(x):
        return x * 10

    @tf.function(input_signature=(tf.TensorSpec(shape=(1, 2, 2), dtype=np.float32),))
    def postprocessing_step(x):
        return x, tf.reduce_sum(x)

    runtime_func = model.export_for_ipu_serving(
        str(tmp_path),
        1,
        output_names=["result", "result_reduced"],
        preprocessing_step=preprocessing_step,
        postprocessing_step=postprocessing_step,
    )
    _check_pre_and_post_processing(strategy, runtime_func, tmp_path)


@pytest.mark.follows("test_export_keras_tensorflow_api_sequential_one_input_post_pre_processing")
def test_export_keras_tensorflow_api_sequential_one_input_post_pre_processing(
    strategy_on, tmp_path
):
    strategy = strategy_on(1)
    model = _sequential(strategy, 4)
    runtime_func = ipu.serving.export_keras(
        model,
        str(tmp_path),
        1,
        output_names=["result", "result_reduced"],
        preprocessing_step=lambda x: x * 10,
        preprocessing_step_signature=(tf.TensorSpec(shape=(1, 3, 1), dtype=np.float32),),
        postprocessing_step=lambda x: (x, tf.reduce_sum(x)),
        postprocessing_step_signature=(tf.TensorSpec(shape=(1, 2, 2), dtype=np.float32),),
    )
    _check_pre_and_post_processing(strategy, runtime_func, tmp_path)


@pytest.mark.follows("test_export_keras_functional_two_inputs")
def test_export_keras_functional_two_inputs(strategy_on, tmp_path):
    model = _functional_two_inputs(strategy_on(1), 4)
    ipu.serving.export_keras(model, str(tmp_path), 1, output_names=["result_0", "result_1"])
    result = _load_and_run(tmp_path, {"x1": INPUT, "x2": np.array([[2.0]], np.float32)})
    expected = np.array([[[5.0, 5.0], [0.0, 0.0]]], np.float32)
    np.testing.assert_allclose(result["result_0"], expected)
    np.testing.assert_allclose(result["result_1"], expected.sum(2))


@pytest.mark.follows("test_export_keras_functional_two_inputs_preprocessing")
def test_export_keras_functional_two_inputs_preprocessing(strategy_on, tmp_path):
    model = _functional_two_inputs(strategy_on(1), 4)
    model.export_for_ipu_serving(
        str(tmp_path),
        1,
        output_names=["result_0", "result_1"],
        preprocessing_step_signature=(
            tf.TensorSpec(shape=(1, 3, 1), dtype=np.float32),
            tf.TensorSpec(shape=(1, 1), dtype=np.float32),
        ),
        preprocessing_step=lambda x1, x2: (tf.abs(x1), x2 * 2),
    )
    result = _load_and_run(tmp_path, {"x1": INPUT, "x2": np.array([[2.0]], np.float32)})
    expected = np.array([[[13.0, 13.0], [19.0, 19.0]]], np.float32)
    np.testing.assert_allclose(result["result_0"], expected)
    np.testing.assert_allclose(result["result_1"], expected.sum(2))


def _no_batch_size_model(strategy):
    with strategy.scope():
        inputs = keras.layers.Input(shape=(3, 1), name="input")
        model = keras.Model([inputs], [keras.layers.Activation("relu")(_conv()(inputs))])
        # The input layer has no batch size and build cannot set one: export does.
        model.build((4, 3, 1))
        model.compile(steps_per_execution=16)
    return model


@pytest.mark.follows("test_export_keras_no_bs_in_input")
def test_export_keras_no_bs_in_input(strategy_on, tmp_path):
    model = _no_batch_size_model(strategy_on(1))
    ipu.serving.export_keras(model, str(tmp_path), 1, output_names=["result"])
    np.testing.assert_allclose(_load_and_run(tmp_path, INPUT)["result"], [[[3.0, 3.0], [0.0, 0.0]]])


@pytest.mark.follows("test_export_keras_no_bs_in_input_postprocessing")
def test_export_keras_no_bs_in_input_postprocessing(strategy_on, tmp_path):
    model = _no_batch_size_model(strategy_on(1))
    w = tf.Variable(np.float32(1.0))
    model.export_for_ipu_serving(
        str(tmp_path),
        1,
        output_names=["result"],
        postprocessing_step_signature=(tf.TensorSpec(shape=(1, 2, 2), dtype=np.float32, name="x"),),
        postprocessing_step=lambda x: x - w,
    )
    np.testing.assert_allclose(
        _load_and_run(tmp_path, INPUT)["result"], [[[2.0, 2.0], [-1.0, -1.0]]]
    )


@pytest.mark.follows("test_export_keras_subclass_model_two_inputs")
def test_export_keras_subclass_model_two_inputs(strategy_on, tmp_path):
    model = _subclassed(strategy_on(1), 8)
    ipu.serving.export_keras(model, str(tmp_path), 2)
    result = _load_and_run(tmp_path, {"input_1": INPUT_PAIR, "input_2": SECOND_INPUT_PAIR})
    np.testing.assert_allclose(result["output_0"], TWO_INPUTS_RESULT)


@pytest.mark.follows("test_export_keras_subclass_model_two_inputs_pre_post_preocessing")
def test_export_keras_subclass_model_two_inputs_pre_post_preocessing(strategy_on, tmp_path):
    model = _subclassed(strategy_on(1), 8)
    w = tf.Variable(np.float32(4.0))
    model.export_for_ipu_serving(
        str(tmp_path),
        2,
        preprocessing_step=lambda input_1, input_2: (input_1 * 2, input_2 * w),
        preprocessing_step_signature=(
            tf.TensorSpec(shape=(2, 3, 1), dtype=np.float32),
            tf.TensorSpec(shape=(2, 1), dtype=np.float32),
        ),
        postprocessing_step=lambda input_1: tf.reduce_sum(input_1),
        postprocessing_step_signature=(tf.TensorSpec(shape=(2, 2, 2), dtype=np.float32),),
    )
    result = _load_and_run(tmp_path, {"input_1": INPUT_PAIR, "input_2": SECOND_INPUT_PAIR})
    # relu(conv(2 x1) + 4 x2): [[20, 20], [0, 0]] and [[13, 13], [0, 0]].
    assert float(np.asarray(result["output_0"])) == pytest.approx(66.0)


@pytest.mark.follows("test_export_keras_without_ipu_strategy")
def test_export_keras_without_ipu_strategy(strategy_on, tmp_path):
    strategy_on(1)
    model = keras.Sequential([keras.layers.Activation("relu")])
    model.build((1,))
    model.compile(steps_per_execution=16)
    with pytest.raises(ValueError, match="IPU strategy"):
        ipu.serving.export_keras(model, str(tmp_path))


@pytest.mark.follows("test_export_keras_fails_for_non_empty_dir")
def test_export_keras_fails_for_non_empty_dir(strategy_on, tmp_path):
    strategy = strategy_on(1)
    with strategy.scope():
        model = keras.models.Sequential([keras.layers.Activation("relu")])
        model.build((1,))
        model.compile(steps_per_execution=16)
    (tmp_path / "dummy_file").touch()
    with pytest.raises(ValueError, match="is not empty"):
        ipu.serving.export_keras(model, str(tmp_path))
    with pytest.raises(ValueError, match="is not empty"):
        model.export_for_ipu_serving(str(tmp_path))


PIPELINED_SEQUENTIAL_RESULT = np.array([[[3.0, 3.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]])


@pytest.mark.follows("test_export_keras_pipelined_sequential_one_input")
def test_export_keras_pipelined_sequential_one_input(strategy_on, tmp_path):
    model = _sequential(strategy_on(2), 5, stages=True)
    ipu.serving.export_keras(model, str(tmp_path), 2)
    result = _load_and_run(tmp_path, INPUT_PAIR)
    np.testing.assert_allclose(result["output_0"], PIPELINED_SEQUENTIAL_RESULT)


@pytest.mark.follows("test_export_keras_pipelined_sequential_preprocessing_one_input")
def test_export_keras_pipelined_sequential_preprocessing_one_input(strategy_on, tmp_path):
    model = _sequential(strategy_on(2), 5, stages=True)

    @tf.function(input_signature=(tf.TensorSpec(shape=(2, 3, 1), dtype=np.float32),))
    def preprocessing_step(x):
        return x * 10

    model.export_for_ipu_serving(str(tmp_path), 2, preprocessing_step=preprocessing_step)
    result = _load_and_run(tmp_path, INPUT_PAIR)
    np.testing.assert_allclose(result["output_0"], 10 * PIPELINED_SEQUENTIAL_RESULT)


@pytest.mark.follows("test_export_keras_pipelined_functional_two_inputs")
def test_export_keras_pipelined_functional_two_inputs(strategy_on, tmp_path):
    model = _functional_two_inputs(strategy_on(2), 8, stages=True)
    ipu.serving.export_keras(model, str(tmp_path), 2, output_names=["out_0", "out_1"])
    result = _load_and_run(tmp_path, {"x1": INPUT_PAIR, "x2": SECOND_INPUT_PAIR})
    np.testing.assert_allclose(result["out_0"], TWO_INPUTS_RESULT)
    np.testing.assert_allclose(result["out_1"], TWO_INPUTS_RESULT.sum(2))


@pytest.mark.follows("test_export_keras_pipelined_functional_two_inputs_postprocessing")
def test_export_keras_pipelined_functional_two_inputs_postprocessing(strategy_on, tmp_path):
    model = _functional_two_inputs(strategy_on(2), 8, stages=True)

    @tf.function(
        input_signature=(
            tf.TensorSpec(shape=(2, 2, 2), dtype=np.float32),
            tf.TensorSpec(shape=(2, 2), dtype=np.float32),
        )
    )
    def postprocessing_step(x1, x2):
        return tf.add(x1, x1), x2

    model.export_for_ipu_serving(
        str(tmp_path), 2, output_names=["out_0", "out_1"], postprocessing_step=postprocessing_step
    )
    result = _load_and_run(tmp_path, {"x1": INPUT_PAIR, "x2": SECOND_INPUT_PAIR})
    np.testing.assert_allclose(result["out_0"], 2 * TWO_INPUTS_RESULT)
    np.testing.assert_allclose(result["out_1"], TWO_INPUTS_RESULT.sum(2))


@pytest.mark.follows("test_export_keras_pipelined_subclass_model_two_inputs")
def test_export_keras_pipelined_subclass_model_two_inputs(strategy_on, tmp_path):
    model = _subclassed(strategy_on(2), 1, stages=True)
    ipu.serving.export_keras(model, str(tmp_path), 2, output_names=["out0", "out1"])
    result = _load_and_run(tmp_path, [INPUT_PAIR, SECOND_INPUT_PAIR])
    np.testing.assert_allclose(result["out0"], TWO_INPUTS_RESULT)
    np.testing.assert_allclose(result["out1"], TWO_INPUTS_RESULT.sum(1))


@pytest.mark.follows("test_export_keras_stateful_partition_call")
def test_export_keras_stateful_partition_call(strategy_on, tmp_path):
    strategy = strategy_on(1)
    shape = (1, 4)
    w = tf.Variable(np.float32(10.0))
    x = np.arange(4, dtype=np.float32).reshape(shape)
    y = np.ones(shape, dtype=np.float32)

    @function.Defun(tf.float32, tf.float32)
    def partition_call_body(constant, var):
        return (constant + constant) * var

    @def_function.function(input_signature=(tf.TensorSpec(shape=shape, dtype=tf.float32),))
    def partition_call_step(x):
        # TensorFlow 2.21 no longer has functional_ops.partitioned_call (the original's
        # helper): the op it built.
        partition_call_body.add_to_graph(tf.compat.v1.get_default_graph())
        (result,) = gen_functional_ops.stateful_partitioned_call(
            args=[x, tf.convert_to_tensor(w)], Tout=[tf.float32], f=partition_call_body
        )
        return tf.reshape(result, shape)

    with strategy.scope():
        input1 = keras.layers.Input(shape=shape[1:], batch_size=1, name="input_1")
        input2 = keras.layers.Input(shape=shape[1:], batch_size=1, name="input_2")
        scaled = keras.layers.Lambda(partition_call_step)(input2)
        output = keras.layers.Add()([keras.layers.Lambda(tf.abs)(input1), scaled])
        model = keras.Model(inputs=[input1, input2], outputs=output)
        model.build([shape, shape])
        model.compile(steps_per_execution=10)
    runtime_func = ipu.serving.export_keras(model, str(tmp_path), 1, output_names="result")
    np.testing.assert_allclose(runtime_func(x, y)["result"], np.abs(x) + 2 * y * 10.0)
