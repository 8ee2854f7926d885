"""A TF1 program (eager execution disabled) exports with the spec's arguments: its step
creates its variables with tf.compat.v1.get_variable, `variable_initializer` gets a
tf.Session of a graph holding them, the returned function runs in the program's session, and stock
TensorFlow serves the SavedModel."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from tests.serving import stock_tensorflow

PROGRAM = """
import numpy as np
import tensorflow as tf
from tensorflow.python import ipu

tf.compat.v1.disable_eager_execution()
config = ipu.config.IPUConfig()
config.auto_select_ipus = 1
config.configure_ipu_system()


def predict_step(x):
    w = tf.compat.v1.get_variable(
        "w", shape=[4, 2], initializer=tf.compat.v1.constant_initializer(0.5), use_resource=True
    )
    return tf.nn.relu(tf.matmul(x, w) - 1.0)


initialized = []


def variable_initializer(session):
    session.run(tf.compat.v1.global_variables_initializer())
    initialized.append(True)


predict = ipu.serving.export_single_step(
    predict_step,
    {export_dir!r},
    iterations=4,
    predict_step_signature=[tf.TensorSpec([1, 4], tf.float32)],
    variable_initializer=variable_initializer,
    output_names="y",
)
assert initialized
x = tf.compat.v1.placeholder(tf.float32, [1, 4])
y = predict(x)["y"]
with tf.compat.v1.Session() as session:
    print("RESULT=" + ",".join(str(v) for v in session.run(y, {{x: [[1.0, 2.0, 3.0, 4.0]]}}).ravel()))
"""


@pytest.mark.slow
def test_a_tf1_program_exports_and_stock_tensorflow_serves_it(tmp_path):
    export_dir = tmp_path / "model"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    completed = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(export_dir=str(export_dir))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    line = [x for x in completed.stdout.splitlines() if x.startswith("RESULT=")][-1]
    want = np.maximum(np.array([[1.0, 2.0, 3.0, 4.0]]) @ np.full([4, 2], 0.5) - 1.0, 0).ravel()
    np.testing.assert_allclose([float(v) for v in line[7:].split(",")], want)
    served = stock_tensorflow.run(
        f"""
        import tensorflow as tf
        serve = tf.saved_model.load({str(export_dir)!r}).signatures["serving_default"]
        result = serve(x=tf.constant([[1.0, 2.0, 3.0, 4.0]]))["y"].numpy().ravel().tolist()
        """
    )
    np.testing.assert_allclose(served, want)
