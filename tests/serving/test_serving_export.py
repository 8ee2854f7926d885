"""ipu.serving exports, as the original's serving tutorial writes them: the SavedModel must
load and serve in stock TensorFlow (a Python without openipu), with the same outputs as
the model here and as numpy."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tests.serving import stock_tensorflow

WEIGHTS = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.0) / 7.0


def _serve_in_stock_tensorflow(export_dir, inputs: dict[str, np.ndarray]):
    """The serving_default signature's outputs in a Python without openipu."""
    arrays = {name: value.tolist() for name, value in inputs.items()}
    dtypes = {name: str(value.dtype) for name, value in inputs.items()}
    return stock_tensorflow.run(
        f"""
        import numpy as np, tensorflow as tf
        model = tf.saved_model.load({str(export_dir)!r})
        serve = model.signatures["serving_default"]
        feeds = {{k: tf.constant(np.array(v, dtype={dtypes!r}[k])) for k, v in {arrays!r}.items()}}
        outputs = serve(**feeds)
        result = {{
            "outputs": {{k: v.numpy().tolist() for k, v in outputs.items()}},
            "inputs": sorted(serve.structured_input_signature[1]),
        }}
        """
    )


def test_export_single_step_serves_in_stock_tensorflow(ipu_system, tmp_path):
    w = tf.Variable(WEIGHTS)

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
    def predict_step(x):
        return tf.nn.relu(tf.matmul(x, w) + 0.5)

    export_dir = tmp_path / "model"
    runtime_predict = ipu.serving.export_single_step(
        predict_step, str(export_dir), iterations=4, output_names="probabilities"
    )
    x = np.random.RandomState(1).rand(2, 4).astype(np.float32)
    want = np.maximum(x @ WEIGHTS + 0.5, 0.0)
    # The returned function runs the exported executable with the embedded runtime.
    np.testing.assert_allclose(runtime_predict(x)["probabilities"].numpy(), want, rtol=1e-5)
    assets = os.listdir(export_dir / "assets")
    assert len(assets) == 1 and assets[0].startswith("application_")
    served = _serve_in_stock_tensorflow(export_dir, {"x": x})
    assert served["inputs"] == ["x"]
    np.testing.assert_allclose(np.array(served["outputs"]["probabilities"]), want, rtol=1e-5)


def test_pre_and_postprocessing_run_around_the_step(ipu_system, tmp_path):
    @tf.function(input_signature=[tf.TensorSpec([3], tf.int32)])
    def preprocessing_step(tokens):
        return (tf.cast(tokens, tf.float32) * 2.0,)

    def predict_step(values):
        return values + 1.0, values * values

    def postprocessing_step(plus, square):
        return tf.reduce_sum(plus), tf.sqrt(square)

    export_dir = tmp_path / "model"
    signature = [tf.TensorSpec([3], tf.float32)]
    runtime_predict = ipu.serving.export_single_step(
        predict_step,
        str(export_dir),
        iterations=2,
        predict_step_signature=signature,
        output_names=["total", "root"],
        preprocessing_step=preprocessing_step,
        postprocessing_step=postprocessing_step,
        postprocessing_step_signature=[tf.TensorSpec([3], tf.float32)] * 2,
    )
    tokens = np.array([1, 2, 3], np.int32)
    values = tokens * 2.0
    want_total, want_root = (values + 1).sum(), np.abs(values)
    outputs = runtime_predict(tokens)
    np.testing.assert_allclose(outputs["total"].numpy(), want_total)
    np.testing.assert_allclose(outputs["root"].numpy(), want_root, rtol=1e-6)
    served = _serve_in_stock_tensorflow(export_dir, {"tokens": tokens})
    np.testing.assert_allclose(served["outputs"]["total"], want_total)
    np.testing.assert_allclose(served["outputs"]["root"], want_root, rtol=1e-6)


def test_the_signature_may_come_from_a_dataset(ipu_system, tmp_path):
    dataset = tf.data.Dataset.from_tensors((tf.zeros([5]), tf.zeros([5]))).repeat()

    def predict_step(a, b):
        return a - b

    runtime_predict = ipu.serving.export_single_step(
        predict_step, str(tmp_path / "model"), iterations=1, input_dataset=dataset
    )
    a, b = np.arange(5, dtype=np.float32), np.ones(5, np.float32)
    (result,) = runtime_predict(a, b)
    np.testing.assert_allclose(result.numpy(), a - b)


@pytest.mark.slow
def test_export_pipeline_keeps_its_stages(ipu_system, tmp_path):
    w1, w2 = tf.Variable(WEIGHTS), tf.Variable(np.eye(3, dtype=np.float32) * 3.0)

    def stage1(offset, x):
        return tf.matmul(x, w1) + offset

    def stage2(hidden):
        return tf.nn.softmax(tf.matmul(hidden, w2))

    export_dir = tmp_path / "pipeline"
    runtime_predict = ipu.serving.export_pipeline(
        [stage1, stage2],
        str(export_dir),
        iterations=8,
        inputs=[tf.constant(0.25)],
        device_mapping=[0, 1],
        # As the original's: the first stage's signature covers its non-streamed inputs too.
        predict_step_signature=[tf.TensorSpec([], tf.float32), tf.TensorSpec([2, 4], tf.float32)],
        output_names="y",
    )
    x = np.random.RandomState(2).rand(2, 4).astype(np.float32)
    logits = (x @ WEIGHTS + 0.25) @ (np.eye(3) * 3.0)
    want = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(runtime_predict(x)["y"].numpy(), want, rtol=1e-5)
    served = _serve_in_stock_tensorflow(export_dir, {"x": x})
    np.testing.assert_allclose(np.array(served["outputs"]["y"]), want, rtol=1e-5)
    # The stages stay apart in the SavedModel's graph, as on the device.
    graph = tf.saved_model.load(str(export_dir)).signatures["serving_default"].graph
    text = str(graph.as_graph_def())
    assert "pipeline_stage_0" in text and "pipeline_stage_1" in text


def test_export_keras_model(strategy_on, tmp_path):
    strategy = strategy_on(1)
    with strategy.scope():
        inputs = tf.keras.Input(shape=(4,), batch_size=3, name="features")
        outputs = tf.keras.layers.Dense(2, activation="tanh", name="dense")(inputs)
        model = tf.keras.Model(inputs, outputs)
        model.compile(steps_per_execution=4)
        x = np.random.RandomState(3).rand(3, 4).astype(np.float32)
        want = model.predict(x, batch_size=3)
        export_dir = tmp_path / "keras"
        runtime_predict = ipu.serving.export_keras(model, str(export_dir), output_names="scores")
        np.testing.assert_allclose(runtime_predict(x)["scores"].numpy(), want, rtol=1e-5)
    kernel, bias = model.get_layer("dense").get_weights()
    np.testing.assert_allclose(want, np.tanh(x @ kernel + bias), rtol=1e-5)
    served = _serve_in_stock_tensorflow(export_dir, {"features": x})
    np.testing.assert_allclose(np.array(served["outputs"]["scores"]), want, rtol=1e-5)


def test_keras_export_refuses_a_model_from_outside_a_strategy(tmp_path):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="was not created inside an IPU strategy"):
        ipu.serving.export_keras(model, str(tmp_path / "m"))


def test_checkpoint_restore_dir_and_variable_initializer_set_the_values(ipu_system, tmp_path):
    w = tf.Variable(np.zeros([4, 3], np.float32), name="restored_w")
    saver = tf.compat.v1.train.Saver(var_list=[w])
    w.assign(WEIGHTS)
    saver.save(None, str(tmp_path / "checkpoints" / "ckpt"))
    w.assign(np.zeros([4, 3], np.float32))

    @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
    def predict_step(x):
        return tf.matmul(x, w)

    x = np.ones([1, 4], np.float32)
    restored = ipu.serving.export_single_step(
        predict_step,
        str(tmp_path / "a"),
        iterations=1,
        checkpoint_restore_dir=str(tmp_path / "checkpoints"),
    )
    np.testing.assert_allclose(restored(x)[0].numpy(), x @ WEIGHTS, rtol=1e-6)

    # As the spec's example: the initializer gets a tf.Session whose graph holds the
    # step's variables by name, and restores them with a Saver.
    def variable_initializer(session):
        assert session.graph is tf.compat.v1.get_default_graph()
        assert [v.name for v in tf.compat.v1.global_variables()] == ["restored_w:0"]
        saver = tf.compat.v1.train.Saver()
        saver.restore(session, str(tmp_path / "checkpoints" / "ckpt"))

    initialized = ipu.serving.export_single_step(
        predict_step, str(tmp_path / "b"), iterations=1, variable_initializer=variable_initializer
    )
    np.testing.assert_allclose(initialized(x)[0].numpy(), x @ WEIGHTS, rtol=1e-6)

    # Assignments run in the session give the values too.
    def assigning_initializer(session):
        (variable,) = tf.compat.v1.global_variables()
        session.run(variable.assign(np.full([4, 3], 2.0, np.float32)))

    assigned = ipu.serving.export_single_step(
        predict_step, str(tmp_path / "c"), iterations=1, variable_initializer=assigning_initializer
    )
    np.testing.assert_allclose(assigned(x)[0].numpy(), np.full([1, 3], 8.0))


def test_export_dir_rules(ipu_system, tmp_path):
    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def predict_step(x):
        return x * 2.0

    export_dir = tmp_path / "model"
    export_dir.mkdir()
    (export_dir / "old.txt").write_text("previous export")
    with pytest.raises(ValueError, match="is not empty"):
        ipu.serving.export_single_step(predict_step, str(export_dir), iterations=1)
    ipu.serving.export_single_step(
        predict_step, str(export_dir), iterations=1, purge_export_dir=True
    )
    assert "old.txt" not in os.listdir(export_dir)
    assert "saved_model.pb" in os.listdir(export_dir)
    # Nothing is left beside it (the SavedModel was written to a temporary and moved).
    assert [p for p in os.listdir(tmp_path) if p.startswith(".tmp")] == []
    empty = tmp_path / "empty_checkpoints"
    empty.mkdir()
    with pytest.raises(ValueError, match="checkpoint_restore_dir"):
        ipu.serving.export_single_step(
            predict_step, str(tmp_path / "c"), iterations=1, checkpoint_restore_dir=str(empty)
        )


def test_signature_arguments_are_checked(ipu_system, tmp_path):
    def plain_step(x):
        return x

    with pytest.raises(ValueError, match="input_signature"):
        ipu.serving.export_single_step(plain_step, str(tmp_path / "a"), iterations=1)
    with pytest.raises(TypeError, match="predict_step_signature"):
        ipu.serving.export_single_step(
            plain_step, str(tmp_path / "b"), iterations=1, predict_step_signature="x"
        )
    with pytest.raises(ValueError, match="must be not empty"):  # the original's words
        ipu.serving.export_single_step(
            plain_step, str(tmp_path / "c"), iterations=1, predict_step_signature=[]
        )
    with pytest.raises(ValueError, match="Both `predict_step_signature` and `input_dataset`"):
        ipu.serving.export_single_step(
            plain_step,
            str(tmp_path / "d"),
            iterations=1,
            predict_step_signature=[tf.TensorSpec([1])],
            input_dataset=tf.data.Dataset.from_tensors(tf.zeros([1])),
        )
    with pytest.raises(TypeError, match="output_names"):
        ipu.serving.export_single_step(
            plain_step,
            str(tmp_path / "e"),
            iterations=1,
            predict_step_signature=[tf.TensorSpec([1])],
            output_names=("a",),
        )


@pytest.mark.slow
def test_saved_model_cli_shows_the_serving_signature(ipu_system, tmp_path):
    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
    def predict_step(x):
        return tf.reduce_sum(x, axis=1)

    export_dir = tmp_path / "model"
    ipu.serving.export_single_step(predict_step, str(export_dir), iterations=2, output_names="sum")
    # TensorFlow Serving's view of the model, from stock TensorFlow's own tool.
    shown = stock_tensorflow.run_program(
        "import sys\n"
        "from tensorflow.python.tools import saved_model_cli\n"
        f"sys.argv = ['saved_model_cli', 'show', '--dir', {str(export_dir)!r}, '--all']\n"
        "saved_model_cli.main()\n"
    )
    assert "signature_def['serving_default']" in shown
    assert "inputs['x'] tensor_info:" in shown and "shape: (2, 4)" in shown
    assert "outputs['sum'] tensor_info:" in shown
    assert "Method name is: tensorflow/serving/predict" in shown


def test_a_pipeline_with_preprocessing_and_non_streamed_inputs(ipu_system, tmp_path):
    def preprocessing_step(raw):
        return (tf.cast(raw, tf.float32) / 10.0,)

    def stage1(scale, x):
        return x * scale

    def stage2(x):
        return tf.reduce_sum(x)

    runtime_predict = ipu.serving.export_pipeline(
        [stage1, stage2],
        str(tmp_path / "pipeline"),
        iterations=2,
        inputs=[tf.constant(3.0)],
        predict_step_signature=[tf.TensorSpec([], tf.float32), tf.TensorSpec([4], tf.float32)],
        preprocessing_step=preprocessing_step,
        preprocessing_step_signature=[tf.TensorSpec([4], tf.int32)],
    )
    raw = np.array([1, 2, 3, 4], np.int32)
    (total,) = runtime_predict(raw)
    np.testing.assert_allclose(total.numpy(), (raw / 10.0 * 3.0).sum(), rtol=1e-6)


@pytest.mark.slow
def test_a_pipelined_keras_model_exports_with_its_stages(strategy_on, tmp_path):
    strategy = strategy_on(2)
    with strategy.scope():
        inputs = tf.keras.Input(shape=(4,), batch_size=2, name="x")
        hidden = tf.keras.layers.Dense(3, activation="relu", name="first")(inputs)
        outputs = tf.keras.layers.Dense(2, name="second")(hidden)
        model = tf.keras.Model(inputs, outputs)
        # As the original's functional models take it: the assignment's records, staged.
        assignment = model.get_pipeline_stage_assignment()
        for stage, record in enumerate(assignment):
            record.pipeline_stage = stage
        model.set_pipeline_stage_assignment(assignment)
        model.compile(steps_per_execution=2)
        x = np.random.RandomState(4).rand(2, 4).astype(np.float32)
        export_dir = tmp_path / "pipelined"
        runtime_predict = model.export_for_ipu_serving(str(export_dir), output_names="y")
        got = runtime_predict(x)["y"].numpy()
    (k1, b1), (k2, b2) = (
        model.get_layer("first").get_weights(),
        model.get_layer("second").get_weights(),
    )
    want = np.maximum(x @ k1 + b1, 0) @ k2 + b2
    np.testing.assert_allclose(got, want, rtol=1e-5)
    graph_def = (
        tf.saved_model.load(str(export_dir)).signatures["serving_default"].graph.as_graph_def()
    )
    text = str(graph_def)
    assert "pipeline_stage_0" in text and "pipeline_stage_1" in text
    served = _serve_in_stock_tensorflow(export_dir, {"x": x})
    np.testing.assert_allclose(np.array(served["outputs"]["y"]), want, rtol=1e-5)


def test_iterations_are_checked(ipu_system, tmp_path):
    signature = [tf.TensorSpec([1])]
    with pytest.raises(TypeError, match="iterations must be a Python int, got 2.0"):
        ipu.serving.export_single_step(
            lambda x: x, str(tmp_path / "a"), iterations=2.0, predict_step_signature=signature
        )
    with pytest.raises(ValueError, match="iterations must be at least 1, got 0"):
        ipu.serving.export_single_step(
            lambda x: x, str(tmp_path / "b"), iterations=0, predict_step_signature=signature
        )
