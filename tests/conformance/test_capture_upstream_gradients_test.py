"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/capture_upstream_gradients_test.py`.

`ipu.ops.grad_util_ops.capture_upstream_gradients` with `GradientCaptureTape` and
`GradientCaptureContext` in `jit_compile` functions run by an IPUStrategy: refused under a
plain GradientTape, an identity in the forward pass (also in pipeline stages), and the
gradient reaching a tagged value captured: that of `tanh` (`tanh_grad` computed by hand),
with the variables' gradients unchanged (against a plain tape or `get_gradients`), also
through outlined functions and, summed over the steps, from a pipeline's optimizer function.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.eager.backprop import GradientCaptureContext, GradientCaptureTape
from tensorflow.python.ipu.ops import functional_ops, pipelining_ops
from tensorflow.python.ipu.ops.grad_util_ops import capture_upstream_gradients
from tensorflow.python.ops import gen_math_ops


@pytest.fixture
def strategy_of():
    def make(ipus):
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = ipus
        config.configure_ipu_system()
        return ipu.ipu_strategy.IPUStrategy()

    yield make
    ipu.config.reset_ipu_configuration()


def _tanh_grad(y):
    return gen_math_ops.tanh_grad(y, tf.ones_like(y))


@pytest.mark.follows("testWrongGradientTape")
def test_wrong_gradient_tape(strategy_of):
    strategy = strategy_of(1)
    with strategy.scope():
        x = tf.Variable(3.0)

        @tf.function(jit_compile=True)
        def f():
            with tf.GradientTape() as tape:
                z = tf.tanh(capture_upstream_gradients(x, tag="tanh_grad"))
            return z, tape.gradient(z, x)

    with pytest.raises(RuntimeError, match="may only be used within the context of "):
        strategy.run(f, [])


def _forward_pass(strategy, capture):
    with strategy.scope():

        @tf.function(jit_compile=True)
        def f(x):
            with capture():
                y = tf.tanh(capture_upstream_gradients(x, tag="tanh_grad"))
                z = tf.tanh(x)
            return y, z

        y, z = strategy.run(f, [np.ones(4, dtype=np.float16)])
    np.testing.assert_array_equal(np.squeeze(y), z)


@pytest.mark.follows("testForwardPassTape")
def test_forward_pass_tape(strategy_of):
    _forward_pass(strategy_of(1), GradientCaptureTape)


@pytest.mark.follows("testForwardPassContext")
def test_forward_pass_context(strategy_of):
    _forward_pass(strategy_of(1), GradientCaptureContext)


def _check_against_vanilla(strategy, x, opt, dfdx, dfda, dfda_manual):
    np.testing.assert_array_equal(np.squeeze(dfda["tanh_grad"]), dfda_manual)

    @tf.function(jit_compile=True)
    def g():
        return opt.get_gradients(tf.tanh(x**2), x)

    np.testing.assert_array_equal(dfdx, strategy.run(g))


@pytest.mark.follows("testVariableAndActivationTape")
def test_variable_and_activation_tape(strategy_of):
    strategy = strategy_of(1)
    with strategy.scope():
        x = tf.Variable(3.0)

        @tf.function(jit_compile=True)
        def f():
            with GradientCaptureTape() as tape:
                y = tf.tanh(capture_upstream_gradients(x**2, tag="tanh_grad"))
            return tape.gradient(y, x), tape.captured_gradients, _tanh_grad(y)

        dfdx, dfda, dfda_manual = strategy.run(f)
        np.testing.assert_array_equal(np.squeeze(dfda["tanh_grad"]), dfda_manual)

        @tf.function(jit_compile=True)
        def g():
            with tf.GradientTape() as tape:
                y = tf.tanh(x**2)
            return tape.gradient(y, x)

        np.testing.assert_array_equal(dfdx, strategy.run(g))


def _variable_and_activation(strategy, capture, outlined):
    with strategy.scope():
        opt = tf.keras.optimizers.legacy.SGD()
        x = tf.Variable(3.0)

        def h(v):
            return tf.tanh(capture_upstream_gradients(v**2, tag="tanh_grad"))

        if outlined:
            h = functional_ops.outlined_function(h)

        @tf.function(jit_compile=True)
        def f():
            with capture() as captured:
                y = h(x)
                dfdx = opt.get_gradients(y, x)
            return dfdx, captured.captured_gradients, _tanh_grad(y)

        dfdx, dfda, dfda_manual = strategy.run(f)
        _check_against_vanilla(strategy, x, opt, dfdx, dfda, dfda_manual)


@pytest.mark.follows("testVariableAndActivationContext")
def test_variable_and_activation_context(strategy_of):
    _variable_and_activation(strategy_of(1), GradientCaptureContext, outlined=False)


@pytest.mark.follows("testVariableAndActivationOutlinedFunctionContext")
def test_variable_and_activation_outlined_function_context(strategy_of):
    _variable_and_activation(strategy_of(1), GradientCaptureContext, outlined=True)


@pytest.mark.follows("testVariableAndActivationOutlinedFunctionTape")
def test_variable_and_activation_outlined_function_tape(strategy_of):
    _variable_and_activation(strategy_of(1), GradientCaptureTape, outlined=True)


def _forward_pass_pipeline(strategy, capture):
    with strategy.scope():
        with capture():

            def stage_0(x):
                y = tf.tanh(capture_upstream_gradients(x, tag="tanh_grad_stage_0"))
                return y, tf.tanh(x)

            def stage_1(x, z):
                xp = tf.tanh(capture_upstream_gradients(x, tag="tanh_grad_stage_1"))
                return x, z, xp, tf.tanh(z)

            outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

            @tf.function(jit_compile=True)
            def f(x):
                pipelining_ops.pipeline(
                    [stage_0, stage_1], 4, inputs=[x], optimizer_function=None,
                    outfeed_queue=outfeed_queue,
                    pipeline_schedule=pipelining_ops.PipelineSchedule.Grouped,
                )  # fmt: skip

            strategy.run(f, [np.ones(16, dtype=np.float16)])
            y, z, yp, zp = outfeed_queue.dequeue()
    np.testing.assert_array_equal(np.squeeze(y), z)
    np.testing.assert_array_equal(np.squeeze(yp), zp)


@pytest.mark.follows("testForwardPassPipelineTape")
def test_forward_pass_pipeline_tape(strategy_of):
    _forward_pass_pipeline(strategy_of(2), GradientCaptureTape)


@pytest.mark.follows("testForwardPassPipelineContext")
def test_forward_pass_pipeline_context(strategy_of):
    _forward_pass_pipeline(strategy_of(2), GradientCaptureContext)


def _variable_and_activation_pipeline(strategy, use_tape):
    with strategy.scope():
        x = tf.Variable(3.0)
        outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        grad_outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        manual_grads_outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        opt = tf.keras.optimizers.legacy.SGD()

        def stage_0():
            y = tf.tanh(capture_upstream_gradients(x, tag="tanh_grad_stage_0"))
            return y, _tanh_grad(y)

        def stage_1(y, dy):
            yp = tf.tanh(capture_upstream_gradients(y, tag="tanh_grad_stage_1"))
            dyp = _tanh_grad(yp)
            manual_grads_outfeed_queue.enqueue([dy * dyp, dyp])
            return yp

        @tf.function(jit_compile=True)
        def f():
            capture = GradientCaptureTape if use_tape else GradientCaptureContext
            with capture() as captured:

                def opt_fn(loss):
                    if use_tape:
                        return pipelining_ops.OptimizerFunctionOutput(
                            opt, loss, tape=captured,
                            captured_gradient_outfeed=grad_outfeed_queue,
                        )  # fmt: skip
                    return pipelining_ops.OptimizerFunctionOutput(
                        opt, loss, variables=[x], gradient_capture_context=captured,
                        captured_gradient_outfeed=grad_outfeed_queue,
                    )  # fmt: skip

                pipelining_ops.pipeline(
                    [stage_0, stage_1], 4, inputs=[], optimizer_function=opt_fn,
                    outfeed_queue=outfeed_queue,
                    pipeline_schedule=pipelining_ops.PipelineSchedule.Grouped,
                )  # fmt: skip

        strategy.run(f)
        outfeed_queue.dequeue()
        dy, dyp = manual_grads_outfeed_queue.dequeue()
        captured_grads = grad_outfeed_queue.dequeue()
    np.testing.assert_allclose(
        np.squeeze(captured_grads["tanh_grad_stage_0"]), np.squeeze(np.sum(dy)), rtol=1e-6
    )
    np.testing.assert_allclose(
        np.squeeze(captured_grads["tanh_grad_stage_1"]), np.squeeze(np.sum(dyp)), rtol=1e-6
    )


@pytest.mark.follows("testVariableAndActivationPipelineTape")
def test_variable_and_activation_pipeline_tape(strategy_of):
    _variable_and_activation_pipeline(strategy_of(2), use_tape=True)


@pytest.mark.follows("testVariableAndActivationPipelineContext")
def test_variable_and_activation_pipeline_context(strategy_of):
    _variable_and_activation_pipeline(strategy_of(2), use_tape=False)
