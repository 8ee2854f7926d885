"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/serving_export_test.py`.

`serving.export_single_step` and `serving.export_pipeline` write SavedModels whose
`serving_default` signature runs the step (with optional CPU pre- and post-processing);
they load with `tf.saved_model.load` and run in an IPUStrategy, and the function the
export returns runs the exported step locally.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.framework import function
from tensorflow.python.ops import gen_functional_ops

Spec = tf.TensorSpec


@pytest.fixture(autouse=True)
def one_ipu():
    # As the original's setUp (remote buffers, devices attached on demand).
    config = ipu.config.IPUConfig()
    config.device_connection.enable_remote_buffers = True
    config.device_connection.type = ipu.config.DeviceConnectionType.ON_DEMAND
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


def _load_and_run(path, inputs):
    loaded = tf.saved_model.load(str(path)).signatures["serving_default"]
    input_names = [t.name.split(":")[0] for t in loaded.inputs]
    if not isinstance(inputs, dict):
        inputs = {input_names[0]: inputs}
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        return strategy.run(loaded, kwargs=inputs)


def _listed(tensor):
    return list(np.asarray(tensor))


@pytest.mark.follows("test_export_simple_model_no_var_defunc")
def test_export_simple_model_no_var_defunc(tmp_path):
    @tf.function
    def my_net(x):
        return x * x

    ipu.serving.export_single_step(
        my_net, tmp_path, 16, (Spec((4,), np.float32, name="x"),), output_names="out0"
    )
    input_data = np.arange(4, dtype=np.float32)
    assert _listed(_load_and_run(tmp_path, input_data)["out0"]) == list(np.square(input_data))


@pytest.mark.follows("test_export_simple_model_no_var_no_defunc")
def test_export_simple_model_no_var_no_defunc(tmp_path):
    ipu.serving.export_single_step(
        lambda x: x * x, tmp_path, 16, (Spec((4,), np.float32, name="x"),), output_names="out0"
    )
    input_data = np.arange(4, dtype=np.float32)
    assert _listed(_load_and_run(tmp_path, input_data)["out0"]) == list(np.square(input_data))


def _square_with(tmp_path, step):
    """`x * x` exported with `x - 1` as its `step` ("preprocessing" or "postprocessing");
    returns what the loaded SavedModel gives for 0..14."""
    signature = (Spec((15,), np.float32, name="x"),)
    ipu.serving.export_single_step(
        tf.function(lambda x: x * x),
        tmp_path,
        4,
        signature,
        output_names="out0",
        **{f"{step}_step": tf.function(lambda x: x - 1.0), f"{step}_step_signature": signature},
    )
    return _listed(_load_and_run(tmp_path, np.arange(15, dtype=np.float32))["out0"])


@pytest.mark.follows("test_export_simple_model_no_var_preprocessing")
def test_export_simple_model_no_var_preprocessing(tmp_path):
    input_data = np.arange(15, dtype=np.float32)
    assert _square_with(tmp_path, "preprocessing") == list(np.square(input_data - 1.0))


@pytest.mark.follows("test_export_simple_model_no_var_postprocessing")
def test_export_simple_model_no_var_postprocessing(tmp_path):
    input_data = np.arange(15, dtype=np.float32)
    assert _square_with(tmp_path, "postprocessing") == list(np.square(input_data) - 1.0)


@pytest.mark.follows("test_export_simple_model_no_var_pre_post_processing_transform_strings")
def test_export_simple_model_no_var_pre_post_processing_transform_strings(tmp_path):
    @tf.function(input_signature=(Spec((2,), tf.string, name="input string"),))
    def preprocessing_step(input_tensor):
        def transform(value):
            return tf.constant(1.0) if value == "graphcore" else tf.constant(2.0)

        return tf.stack([transform(e) for e in tf.unstack(input_tensor)])

    @tf.function(input_signature=(Spec((2,), tf.float32, name="input"),))
    def postprocessing_step(x):
        return x - 1.0

    ipu.serving.export_single_step(
        tf.function(lambda x: x * x),
        tmp_path,
        4,
        (Spec((2,), np.float32, name="x"),),
        preprocessing_step=preprocessing_step,
        postprocessing_step=postprocessing_step,
        output_names="out0",
    )
    result = _load_and_run(tmp_path, tf.constant(["graphcore", "other"]))
    assert _listed(result["out0"]) == [0.0, 3.0]


@pytest.mark.follows("test_export_simple_model_with_variable")
def test_export_simple_model_with_variable(tmp_path):
    dataset = tf.data.Dataset.from_tensors(tf.zeros((3,), np.float16))
    w = tf.Variable(np.float16(4.0))
    ipu.serving.export_single_step(
        tf.function(lambda x: x * w), tmp_path, 16, input_dataset=dataset
    )
    input_data = np.arange(3, dtype=np.float16)
    result = _load_and_run(tmp_path, input_data)["output_0"]
    assert _listed(result) == list(input_data * np.float16(4.0))


@pytest.mark.follows("test_export_simple_model_with_variable_pre_post_processing")
def test_export_simple_model_with_variable_pre_post_processing(tmp_path):
    signature = (Spec((17,), np.float16),)
    dataset = tf.data.Dataset.from_tensors(tf.zeros((17,), np.float16))
    w, p = tf.Variable(np.float16(4.0)), tf.Variable(np.float16(2.0))
    ipu.serving.export_single_step(
        tf.function(lambda x: x * w, input_signature=signature),
        tmp_path,
        16,
        input_dataset=dataset,
        preprocessing_step=tf.function(lambda x: x * p),
        postprocessing_step=tf.function(lambda x: x / p, input_signature=signature),
    )
    input_data = np.arange(17, dtype=np.float16)
    result = _load_and_run(tmp_path, input_data)["output_0"]
    assert _listed(result) == list(input_data * np.float16(4.0))


@pytest.mark.follows("test_export_simple_model_two_inputs")
def test_export_simple_model_two_inputs(tmp_path):
    @tf.function(input_signature=(Spec((3,), np.float32), Spec((), np.float32)))
    def my_net(x1, x2):
        return x1 * x2, x1 + x2

    ipu.serving.export_single_step(my_net, tmp_path, 16, output_names=["result0", "result1"])
    x1, x2 = np.arange(3, dtype=np.float32), np.float32(3.0)
    result = _load_and_run(tmp_path, {"x1": x1, "x2": x2})
    assert _listed(result["result0"]) == list(x1 * x2)
    assert _listed(result["result1"]) == list(x1 + x2)


@pytest.mark.follows("test_export_simple_model_two_inputs_pre_post_processing")
def test_export_simple_model_two_inputs_pre_post_processing(tmp_path):
    signature = (Spec((3,), np.float32), Spec((), np.float32))

    @tf.function(input_signature=signature)
    def preprocessing_step(x1, x2):
        return x1 - 2, x2 + 5

    @tf.function(input_signature=signature)
    def my_net(x1, x2):
        return x1 * x2, x1 + x2

    @tf.function(input_signature=(Spec((3,), np.float32), Spec((3,), np.float32)))
    def postprocessing_step(x1, x2):
        return tf.reduce_sum(x1), tf.abs(x2)

    ipu.serving.export_single_step(
        my_net,
        tmp_path,
        16,
        preprocessing_step=preprocessing_step,
        postprocessing_step=postprocessing_step,
        output_names=["result0", "result1"],
    )
    x1, x2 = np.arange(3, dtype=np.float32), np.float32(3.0)
    result = _load_and_run(tmp_path, {"x1": x1, "x2": x2})
    x1, x2 = x1 - 2, x2 + 5
    assert float(result["result0"]) == np.sum(x1 * x2)
    assert _listed(result["result1"]) == list(np.absolute(x1 + x2))


@pytest.mark.follows("test_purge_model_dir")
def test_purge_model_dir(tmp_path):
    model_fn = tf.function(lambda x1: x1 * 2.0, input_signature=(Spec([], np.float32),))
    ipu.serving.export_single_step(model_fn, tmp_path, iterations=16, output_names=["result0"])
    ipu.serving.export_single_step(
        model_fn, tmp_path, iterations=16, output_names=["result0"], purge_export_dir=True
    )


@pytest.mark.follows("test_pipeline_purge_model_dir")
def test_pipeline_purge_model_dir(tmp_path):
    stages = [lambda x1: x1 * 2.0, lambda x1: x1 * 3.0]
    arguments = {
        "iterations": 16,
        "device_mapping": [0, 0],
        "predict_step_signature": (Spec([], np.float32),),
        "output_names": ["out0"],
    }
    ipu.serving.export_pipeline(stages, tmp_path, **arguments)
    ipu.serving.export_pipeline(stages, tmp_path, purge_export_dir=True, **arguments)


def _run_locally(runtime_func, x1, x2):
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        return strategy.run(runtime_func, args=(tf.constant(x1), tf.constant(x2)))[0]


@pytest.mark.follows("test_export_simple_model_run_locally")
def test_export_simple_model_run_locally(tmp_path):
    inputs = (tf.zeros((3,), np.float32), tf.zeros((3,), np.float32))
    w = tf.Variable(np.float32(4.0))
    runtime_func = ipu.serving.export_single_step(
        tf.function(lambda x1, x2: (x1 + x2) * w),
        tmp_path,
        16,
        input_dataset=tf.data.Dataset.from_tensors(inputs),
    )
    x1 = np.arange(3, dtype=np.float32)
    assert _listed(_run_locally(runtime_func, x1, x1 * 2)) == list((x1 + x1 * 2) * 4.0)


@pytest.mark.follows("test_export_simple_model_run_locally_pre_post_processing")
def test_export_simple_model_run_locally_pre_post_processing(tmp_path):
    inputs = (tf.zeros((3,), np.float32), tf.zeros((3,), np.float32))
    w = tf.Variable(np.float32(4.0))
    runtime_func = ipu.serving.export_single_step(
        tf.function(
            lambda x1, x2: (x1 + x2) * w,
            input_signature=(Spec((3,), np.float32), Spec((3,), np.float32)),
        ),
        tmp_path,
        16,
        preprocessing_step=tf.function(lambda x1, x2: (x1 - 2, x2 + 5)),
        postprocessing_step=tf.function(
            lambda x: x * 10, input_signature=(Spec((3,), np.float32),)
        ),
        input_dataset=tf.data.Dataset.from_tensors(inputs),
    )
    x1 = np.arange(3, dtype=np.float32)
    expected = ((x1 - 2) + (x1 * 2 + 5)) * 4.0 * 10
    assert _listed(_run_locally(runtime_func, x1, x1 * 2)) == list(expected)


@pytest.mark.follows("test_export_single_step_fails_for_non_empty_dir")
def test_export_single_step_fails_for_non_empty_dir(tmp_path):
    (tmp_path / "dummy_file").touch()
    with pytest.raises(ValueError, match="is not empty"):
        ipu.serving.export_single_step(
            tf.function(lambda x: x * x), tmp_path, 16, (Spec((4,), np.float32, name="x"),)
        )


def _stages(w):
    return [lambda x1, x2: x1 * x2 + w, lambda x: x - 2 * w + 2]


@pytest.mark.follows("test_export_pipeline")
def test_export_pipeline(tmp_path):
    w = tf.Variable(np.float32(4.0))
    ipu.serving.export_pipeline(
        _stages(w),
        tmp_path,
        iterations=16,
        device_mapping=[0, 0],
        predict_step_signature=(Spec((4,), np.float32), Spec((4,), np.float32)),
    )
    x1 = np.arange(4, dtype=np.float32)
    result = _load_and_run(tmp_path, {"x1": x1, "x2": x1 * 2})
    assert _listed(result["output_0"]) == list(x1 * x1 * 2 - 4.0 + 2)


@pytest.mark.follows("test_export_pipeline_pre_post_processing")
def test_export_pipeline_pre_post_processing(tmp_path):
    signature = (Spec((4,), np.float32), Spec((4,), np.float32))
    w = tf.Variable(np.float32(4.0))
    ipu.serving.export_pipeline(
        _stages(w),
        tmp_path,
        iterations=16,
        device_mapping=[0, 0],
        predict_step_signature=signature,
        preprocessing_step=lambda x1, x2: (x1 * 10, x2 * x2),
        preprocessing_step_signature=signature,
        postprocessing_step=lambda x: tf.reduce_sum(x),
        postprocessing_step_signature=(Spec((4,), np.float32),),
    )
    x1 = np.arange(4, dtype=np.float32)
    result = _load_and_run(tmp_path, {"x1": x1, "x2": x1 * 2})
    expected = np.sum((x1 * 10) * np.square(x1 * 2) - 4.0 + 2)
    assert float(result["output_0"]) == float(expected)


def _f16_stages():
    @tf.function(input_signature=(Spec((), np.float16), Spec((4,), np.float16)))
    def stage1(x1, x2):
        return x1 * x2

    return [stage1, lambda x: (x + 2, x * 3)]


@pytest.mark.follows("test_export_pipeline_tffunction_signature")
def test_export_pipeline_tffunction_signature(tmp_path):
    ipu.serving.export_pipeline(
        _f16_stages(),
        tmp_path,
        iterations=16,
        inputs=[np.float16(42.0)],
        device_mapping=[0, 0],
        output_names=["out0", "out1"],
    )
    x2 = np.arange(4, dtype=np.float16)
    result = _load_and_run(tmp_path, x2)
    assert _listed(result["out0"]) == list(42.0 * x2 + 2)
    assert _listed(result["out1"]) == list(42.0 * x2 * 3)


@pytest.mark.follows("test_export_pipeline_tffunction_signature_pre_post_processing")
def test_export_pipeline_tffunction_signature_pre_post_processing(tmp_path):
    @tf.function(input_signature=(Spec((4,), np.float16),))
    def preprocessing_step(x2):
        return x2 * x2

    @tf.function(input_signature=(Spec((4,), np.float16), Spec((4,), np.float16)))
    def postprocessing_step(x1, x2):
        return tf.cast(x1, tf.float32), tf.cast(x2, tf.float32)

    ipu.serving.export_pipeline(
        _f16_stages(),
        tmp_path,
        iterations=16,
        inputs=[np.float16(42.0)],
        device_mapping=[0, 0],
        preprocessing_step=preprocessing_step,
        postprocessing_step=postprocessing_step,
        output_names=["out0", "out1"],
    )
    x2 = np.arange(4, dtype=np.float16)
    result = _load_and_run(tmp_path, x2)
    x2 = np.square(x2)
    assert _listed(result["out0"]) == list((42.0 * x2 + 2).astype(np.float32))
    assert _listed(result["out1"]) == list((42.0 * x2 * 3).astype(np.float32))


def _vector_and_scalar():
    return tf.data.Dataset.from_tensors((tf.zeros((4,), np.float32), tf.zeros((), np.float32)))


@pytest.mark.follows("test_export_pipeline_dataset_signature")
def test_export_pipeline_dataset_signature(tmp_path):
    ipu.serving.export_pipeline(
        [lambda x1, x2, x3: x1 * x2 + x3, lambda x: x + 2],
        tmp_path,
        iterations=16,
        inputs=[42.0],
        device_mapping=[0, 0],
        input_dataset=_vector_and_scalar(),
    )
    x2, x3 = np.arange(4, dtype=np.float32), np.float32(5.0)
    result = _load_and_run(tmp_path, {"x2": x2, "x3": x3})
    assert _listed(result["output_0"]) == list(42.0 * x2 + x3 + 2)


@pytest.mark.follows("test_export_pipeline_dataset_signature_pre_post_processing")
def test_export_pipeline_dataset_signature_pre_post_processing(tmp_path):
    @tf.function(
        input_signature=(Spec((), np.float32), Spec((4,), np.float32), Spec((), np.float32))
    )
    def stage1(x1, x2, x3):
        return x1 * x2 + x3

    ipu.serving.export_pipeline(
        [stage1, lambda x: x + 2],
        tmp_path,
        iterations=16,
        inputs=[42.0],
        device_mapping=[0, 0],
        input_dataset=_vector_and_scalar(),
        preprocessing_step=lambda x2, x3: (x2 * x3, x3 + 5),
        postprocessing_step=lambda x: x - 20,
        postprocessing_step_signature=(Spec((4,), np.float32),),
    )
    x2, x3 = np.arange(4, dtype=np.float32), np.float32(5.0)
    result = _load_and_run(tmp_path, {"x2": x2, "x3": x3})
    assert _listed(result["output_0"]) == list((42.0 * (x2 * x3) + (x3 + 5) + 2) - 20)


@pytest.mark.follows("test_export_pipeline_fails_for_non_empty_dir")
def test_export_pipeline_fails_for_non_empty_dir(tmp_path):
    (tmp_path / "dummy_file").touch()
    with pytest.raises(ValueError, match="is not empty"):
        ipu.serving.export_pipeline(
            [lambda x: x + 2, lambda x: x + 2],
            tmp_path,
            iterations=16,
            device_mapping=[0, 0],
            predict_step_signature=Spec((4,), np.float32),
        )


@pytest.mark.follows("test_export_simple_model_with_variables_stateful_partition_call")
def test_export_simple_model_with_variables_stateful_partition_call(tmp_path):
    w, z = tf.Variable(np.float32(10.0)), tf.Variable(np.float32(15.0))

    @function.Defun(tf.float32, tf.float32)
    def partition_call_body(constant, var):
        return (constant + constant) * var

    @tf.function(input_signature=(Spec((3,), tf.float32), Spec((3,), tf.float32)))
    def predict_step(x, y):
        # TensorFlow 2.21 no longer has functional_ops.partitioned_call (the original's
        # helper): the op it built.
        partition_call_body.add_to_graph(tf.compat.v1.get_default_graph())
        (call_result,) = gen_functional_ops.stateful_partitioned_call(
            args=[x, tf.convert_to_tensor(w)], Tout=[tf.float32], f=partition_call_body
        )
        return tf.reshape(call_result + y + z, (3,))

    ipu.serving.export_single_step(predict_step, tmp_path, 16)
    x = y = np.arange(3, dtype=np.float32)
    result = _load_and_run(tmp_path, {"x": x, "y": y})["output_0"]
    np.testing.assert_allclose(np.asarray(result), (x + x) * 10.0 + y + 15.0)
