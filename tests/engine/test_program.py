"""`LoopProgram`: the engine entry for Python-driven programs (Keras, PopART)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.engine import compile_policy
from openipu._src.engine.program import LoopProgram


def test_runs_n_steps_and_returns_stacked_outputs(ipu_system):
    total = tf.Variable(0.0)

    def step(element):
        total.assign_add(tf.reduce_sum(element["x"]))
        return {"running": total.read_value(), "double": element["x"] * 2}

    program = LoopProgram(step, iterations=4)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    outputs = program({"x": tf.constant(x)})
    np.testing.assert_allclose(outputs["running"].numpy(), np.cumsum(x.sum(axis=1)))
    np.testing.assert_allclose(outputs["double"].numpy(), x * 2)
    outputs = program({"x": tf.constant(x)})
    assert float(outputs["running"][-1]) == 2 * x.sum()
    assert program.compiled_mode is compile_policy.CompileMode.XLA


def test_last_mode_returns_only_the_final_step(ipu_system):
    program = LoopProgram(lambda e: e * 10, iterations=3, outputs="last")
    np.testing.assert_array_equal(program(tf.constant([[1.0], [2.0], [3.0]])).numpy(), [30.0])


def test_step_without_outputs(ipu_system):
    counter = tf.Variable(0)

    def step(element):
        counter.assign_add(element)

    assert LoopProgram(step, iterations=5)(tf.ones([5], tf.int32)) is None
    assert int(counter.numpy()) == 5


def test_input_length_must_match_the_step_count(ipu_system):
    with pytest.raises(
        ValueError,
        match="runs 4 steps per call on 1 replica.*need 4 elements .* got shape \\(3, 2\\)",
    ):
        LoopProgram(lambda e: e, iterations=4)(tf.ones([3, 2]))


def test_compile_mode_can_be_requested(ipu_system):
    program = LoopProgram(
        lambda e: e + 1, iterations=2, compile_mode=compile_policy.CompileMode.GRAPH
    )
    np.testing.assert_array_equal(program(tf.constant([1.0, 2.0])).numpy(), [2.0, 3.0])
    assert program.compiled_mode is compile_policy.CompileMode.GRAPH


def test_outputs_argument_is_checked():
    with pytest.raises(ValueError, match="outputs must be 'all' or 'last'"):
        LoopProgram(lambda e: e, iterations=1, outputs="some")
