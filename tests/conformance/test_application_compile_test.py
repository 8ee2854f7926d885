"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/application_compile_test.py`.

`application_compile_op` compiles a function into an executable whose signature lists
its start-up `inputs` (non-constant arguments, and variables unless frozen), its
`streamed_inputs` (infeed elements, one per call), its `outputs` (what the function
returns) and its `streamed_outputs` (outfeed elements). The original parses its
executable's protobuf; openipu's executable file holds the same signature.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

from openipu._src.engine.executable import executable_file


@pytest.fixture(autouse=True)
def compile_only_system():
    # As the original's setUp: compile only (no device attached), for an ipu2.
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.device_connection.type = ipu.config.DeviceConnectionType.NEVER
    config.device_connection.version = "ipu2"
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


def _signature(path):
    if isinstance(path, tf.Tensor):
        path = path.numpy()
    return executable_file.read(path.decode() if isinstance(path, bytes) else path).signature


def _counts(signature):
    return (
        len(signature.inputs),
        len(signature.streamed_inputs),
        len(signature.outputs),
        len(signature.streamed_outputs),
    )


compile_op = ipu.application_compile_op.experimental_application_compile_op


@pytest.mark.follows("test_compile_simple_model")
def test_compile_simple_model(tf1_graph):
    v = tf.compat.v1.placeholder(np.float32, shape=(2,))
    result = compile_op(lambda x: x * x, inputs=[v])
    assert result.dtype == tf.string
    with tf.compat.v1.Session() as session:
        path = session.run(result, {v: np.zeros(v.shape)})
    assert _counts(_signature(path)) == (1, 0, 1, 0)


@pytest.mark.follows("test_compile_op_with_defunc_constant")
def test_compile_op_with_defunc_constant():
    @tf.function
    def defunc():
        x = tf.constant([1.0, 1.0])
        return x * x

    path = compile_op(defunc, inputs=[], freeze_variables=True)
    assert _counts(_signature(path)) == (0, 0, 1, 0)  # the constant is in the graph


@pytest.mark.follows("test_compile_op_with_defunc_closure_constant")
def test_compile_op_with_defunc_closure_constant():
    x = tf.constant([1.0, 1.0])

    @tf.function
    def defunc():
        return x * x

    path = compile_op(defunc, inputs=[], freeze_variables=True)
    assert _counts(_signature(path)) == (0, 0, 1, 0)


@pytest.mark.follows("test_compile_op_with_defunc_module_resource")
@pytest.mark.parametrize("freeze_variables", [False, True])
def test_compile_op_with_defunc_module_resource(freeze_variables):
    class MyModule(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable([2.0, 2.0])

        @tf.function
        def defunc(self):
            return self.v * self.v

    module = MyModule()
    path = compile_op(module.defunc, inputs=[], freeze_variables=freeze_variables)
    # Frozen: the variable is a constant; else an input given at start-up.
    assert _counts(_signature(path)) == (0 if freeze_variables else 1, 0, 1, 0)


@pytest.mark.follows("test_compile_op_with_defunc_closure_resource")
@pytest.mark.parametrize("freeze_variables", [False, True])
def test_compile_op_with_defunc_closure_resource(freeze_variables):
    v = tf.Variable([2.0, 2.0])

    @tf.function(jit_compile=True)
    def defunc():
        return v * v

    path = compile_op(defunc, freeze_variables=freeze_variables)
    assert _counts(_signature(path)) == (0 if freeze_variables else 1, 0, 1, 0)


@pytest.mark.follows("test_compile_op_with_defunc_closure_resource_cond")
@pytest.mark.parametrize("freeze_variables", [False, True])
def test_compile_op_with_defunc_closure_resource_cond(freeze_variables):
    dataset = tf.data.Dataset.from_tensors(
        (tf.constant(10.0, shape=(3,), name="x"), tf.constant(10.0, shape=(), name="p"))
    )
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    v = tf.Variable(3.0)

    @tf.function(jit_compile=True)
    def defunc():
        (x, p) = infeed._dequeue()  # noqa: SLF001 - as the original's test
        y = x * v
        if v < 0:
            z = y**2 + p
        elif v == 0:
            z = y * 2 - p
        else:
            z = y - 2
        outfeed.enqueue(z - x)

    path = compile_op(defunc, freeze_variables=freeze_variables)
    assert _counts(_signature(path)) == (0 if freeze_variables else 1, 2, 0, 1)


@pytest.mark.follows("test_compile_op_with_defunc_closure_resource_while")
@pytest.mark.parametrize("freeze_variables", [False, True])
def test_compile_op_with_defunc_closure_resource_while(freeze_variables):
    dataset = tf.data.Dataset.from_tensors(tf.constant(10.0, shape=(3,)))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    v = tf.Variable(3.0)

    @tf.function(jit_compile=True)
    def defunc(x):
        res = x * v * 10
        outfeed.enqueue(res)
        return x

    @tf.function(jit_compile=True)
    def run_loop():
        return ipu.loops.repeat(10, defunc, infeed_queue=infeed)

    path = compile_op(run_loop, freeze_variables=freeze_variables)
    assert _counts(_signature(path)) == (0 if freeze_variables else 1, 1, 0, 1)


@pytest.mark.follows("test_compile_op_with_defunc_inputs")
def test_compile_op_with_defunc_inputs():
    @tf.function
    def defunc(x, y):
        return x * y

    with pytest.raises(TypeError, match="missing 2 required positional arguments"):
        compile_op(defunc, inputs=[], freeze_variables=True)


@pytest.mark.follows("test_compile_op_with_defunc_infeed_outfeed")
def test_compile_op_with_defunc_infeed_outfeed():
    dataset = tf.data.Dataset.from_tensor_slices(np.ones(10, dtype=np.float32))
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    @tf.function
    def defunc():
        outfeed_queue.enqueue(infeed_queue._dequeue() * 2.0)  # noqa: SLF001

    path = compile_op(defunc, inputs=[], freeze_variables=True)
    assert _counts(_signature(path)) == (0, 1, 0, 1)


@pytest.mark.follows("test_compile_op_with_defunc_infeed_iterator_outfeed")
def test_compile_op_with_defunc_infeed_iterator_outfeed():
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with ipu.ipu_strategy.IPUStrategy().scope():
        iterator = iter(tf.data.Dataset.from_tensor_slices(np.ones(10, dtype=np.float32)))

    @tf.function
    def defunc():
        for _ in tf.range(10):
            x = next(iterator)
            outfeed_queue.enqueue(x * 2.0)

    path = compile_op(defunc, inputs=[], freeze_variables=True)
    assert _counts(_signature(path)) == (0, 1, 0, 1)


@pytest.mark.follows("test_compile_op_with_defunc_pipeline_closure_resource")
@pytest.mark.parametrize("freeze_variables", [False, True])
def test_compile_op_with_defunc_pipeline_closure_resource(freeze_variables):
    dataset = tf.data.Dataset.from_tensor_slices((np.ones((10, 5), dtype=np.float32),))
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(1, drop_remainder=True))
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    v = tf.Variable([[2.0, 3.0, 4.0, 5.0, 6.0]], name="eagervar")

    @tf.function
    def defunc():
        ipu.pipelining_ops.pipeline(
            computational_stages=[lambda c, x: c + x + v, lambda x: x + x],
            gradient_accumulation_count=4,
            infeed_queue=infeed_queue,
            inputs=[42.0],
            outfeed_queue=outfeed_queue,
            device_mapping=[0, 0],
        )

    path = compile_op(defunc, inputs=[], freeze_variables=freeze_variables)
    assert _counts(_signature(path)) == (0 if freeze_variables else 1, 1, 0, 1)


@pytest.mark.follows("test_compile_nonexistent_directory")
def test_compile_nonexistent_directory(tf1_graph, tmp_path):
    path = tmp_path / "nonexistent" / "file.poplar_exec"
    v = tf.compat.v1.placeholder(np.float32, shape=(2,))
    result = compile_op(lambda x: x * x, inputs=[v], output_path=str(path))
    with tf.compat.v1.Session() as session:
        with pytest.raises(Exception, match="Failed to open file for writing"):
            session.run(result, {v: np.zeros(v.shape)})


@pytest.mark.follows("test_compile_unsupported_dtype")
def test_compile_unsupported_dtype(tf1_graph):
    v = tf.compat.v1.placeholder(np.float64, shape=(2,))
    result = compile_op(lambda x: x * x, inputs=[v])
    with tf.compat.v1.Session() as session:
        with pytest.raises(Exception, match="Detected unsupported operations"):
            session.run(result, {v: np.zeros(v.shape)})


@pytest.mark.follows("test_compile_scalar_elementwise_graph")
def test_compile_scalar_elementwise_graph(tf1_graph):
    v = tf.compat.v1.placeholder(np.float32, shape=())
    result = compile_op(lambda x: x + x, inputs=[v])
    with tf.compat.v1.Session() as session:
        with pytest.raises(Exception, match="Cannot serialize a scalar elementwise graph"):
            session.run(result, {v: np.zeros(v.shape)})


@pytest.mark.follows("test_compile_with_resource")
def test_compile_with_resource(tf1_graph, tmp_path):
    output_path = tmp_path / "resource.poplar_exec"
    output_path.write_bytes(b"")

    def my_net(x):
        with tf.compat.v1.variable_scope("vs", use_resource=True):
            w = tf.compat.v1.get_variable("w", shape=(2,))
            return w * x

    v = tf.compat.v1.placeholder(np.float32, shape=(2,))
    result = compile_op(my_net, inputs=[v], output_path=str(output_path))
    assert result.dtype == tf.string
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        assert output_path.stat().st_size == 0  # written when the op runs
        path = session.run(result, {v: np.zeros(v.shape)})
    # The placeholder and the resource variable.
    assert _counts(_signature(path)) == (2, 0, 1, 0)


@pytest.mark.follows("test_compile_with_constant")
def test_compile_with_constant(tf1_graph, tmp_path):
    output_path = tmp_path / "constant.poplar_exec"
    output_path.write_bytes(b"")
    v = tf.compat.v1.placeholder(np.float32, shape=(2,))
    result = compile_op(lambda x, y: x * y, inputs=[v, 42.0], output_path=str(output_path))
    assert result.dtype == tf.string
    assert output_path.stat().st_size == 0
    with tf.compat.v1.Session() as session:
        path = session.run(result, {v: np.zeros(v.shape)})
    assert _counts(_signature(path)) == (1, 0, 1, 0)  # the constant is embedded


@pytest.mark.follows("test_compile_infeed_and_outfeed")
def test_compile_infeed_and_outfeed(tf1_graph):
    dataset = tf.data.Dataset.from_tensor_slices(np.ones(10, dtype=np.float32))
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(v, x):
        v = v + x
        return v, outfeed_queue.enqueue(v)

    result = compile_op(lambda v: ipu.loops.repeat(10, body, v, infeed_queue), inputs=[0.0])
    with tf.compat.v1.Session() as session:
        path = session.run(result)
    assert _counts(_signature(path)) == (0, 1, 1, 1)


@pytest.mark.follows("test_compile_training_loop")
def test_compile_training_loop(tf1_graph):
    dataset = tf.data.Dataset.from_tensor_slices(
        (np.ones((10, 5), dtype=np.float32), np.ones((10, 1), dtype=np.float32))
    )
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(1, drop_remainder=True))

    def body(lr, x, y):
        with tf.compat.v1.variable_scope("vs", use_resource=True):
            predictions = tf.compat.v1.layers.Dense(units=1)(x)
        loss = tf.compat.v1.losses.mean_squared_error(labels=y, predictions=predictions)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss)
        return lr, train_op

    result = compile_op(lambda lr: ipu.loops.repeat(10, body, lr, infeed_queue), inputs=[0.1])
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        path = session.run(result)
    # The two resource variables are inputs; the loop's value and their updates outputs.
    assert _counts(_signature(path)) == (2, 2, 3, 0)


def _compile_pipeline(stage1, freeze_variables, device=None):
    """The original's two-stage pipeline of Dense layers, compiled in a TF1 session;
    returns the signature counts and the graph's variables."""
    dataset = tf.data.Dataset.from_tensor_slices((np.ones((10, 5), dtype=np.float32),))
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(1, drop_remainder=True))
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def stage2(x):
        return tf.keras.layers.Dense(10, activation="softmax")(x)

    def my_net():
        return ipu.pipelining_ops.pipeline(
            computational_stages=[stage1, stage2],
            gradient_accumulation_count=4,
            infeed_queue=infeed_queue,
            inputs=[42.0],
            outfeed_queue=outfeed_queue,
            device_mapping=[0, 0],
        )

    if device is None:
        result = compile_op(my_net, freeze_variables=freeze_variables)
    else:
        with ipu.scopes.ipu_scope(device):
            result = compile_op(my_net, freeze_variables=freeze_variables)
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        path = session.run(result)
        variables = tf.compat.v1.global_variables()
    return _counts(_signature(path)), variables


@pytest.mark.follows("test_compile_pipeline")
@pytest.mark.parametrize("freeze_variables", [False, True])
def test_compile_pipeline(tf1_graph, freeze_variables):
    def stage1(offset, x):
        return tf.keras.layers.Dense(5, activation="relu")(x) + offset

    counts, variables = _compile_pipeline(stage1, freeze_variables)
    assert counts == (0 if freeze_variables else len(variables), 1, 0, 1)


@pytest.mark.follows("test_compile_op_placed_on_ipu")
@pytest.mark.parametrize("freeze_variables", [False, True])
def test_compile_op_placed_on_ipu(tf1_graph, freeze_variables):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()

    def stage1(x0, x1):
        return tf.keras.layers.Dense(10, activation="relu")(x1) + x0

    counts, variables = _compile_pipeline(stage1, freeze_variables, "/device:IPU:0")
    assert counts == (0 if freeze_variables else len(variables), 1, 0, 1)
