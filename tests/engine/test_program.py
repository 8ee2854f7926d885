"""`compile_program(ProgramSpec)`: the engine entry for Python-driven programs (Keras, PopART)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.engine import compile_policy, compiled_program
from openipu._src.engine.compiled_program import StepSchedule
from openipu._src.engine.program import TIER_UP_STEPS, LoopProgram, compile_program
from openipu._src.engine.program_spec import ProgramSpec


def _compiled(step, steps_per_call: int, **options) -> LoopProgram:
    return compile_program(ProgramSpec(step, steps_per_call, **options))


def test_runs_n_steps_and_returns_stacked_outputs(ipu_system):
    total = tf.Variable(0.0)

    def step(element):
        total.assign_add(tf.reduce_sum(element["x"]))
        return {"running": total.read_value(), "double": element["x"] * 2}

    program = _compiled(step, steps_per_call=4)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    outputs = program({"x": tf.constant(x)})
    np.testing.assert_allclose(outputs["running"].numpy(), np.cumsum(x.sum(axis=1)))
    np.testing.assert_allclose(outputs["double"].numpy(), x * 2)
    outputs = program({"x": tf.constant(x)})
    assert float(outputs["running"][-1]) == 2 * x.sum()
    # A program starts as a graph (see test_programs_move_to_xla_after_their_first_steps).
    assert program.compiled_mode is compile_policy.CompileMode.GRAPH


def test_programs_move_to_xla_after_their_first_steps(ipu_system, monkeypatch):
    monkeypatch.delenv(compile_policy.COMPILE_MODE_ENV, raising=False)
    total = tf.Variable(0.0)

    def step(x):
        total.assign_add(tf.reduce_sum(x))
        return total.read_value()

    program = _compiled(step, steps_per_call=4)
    x = np.arange(4, dtype=np.float32).reshape(4, 1)
    calls = TIER_UP_STEPS // 4
    modes, running = [], []
    for _ in range(calls + 1):
        running.extend(program(tf.constant(x)).numpy())
        modes.append(program.compiled.executor)
    graph, xla = compile_policy.CompileMode.GRAPH, compile_policy.CompileMode.XLA
    assert modes == [graph] * calls + [xla]
    # The state carries over the switch: one running sum over every step of every call.
    np.testing.assert_allclose(running, np.cumsum(np.tile(x[:, 0], calls + 1)))
    assert compiled_program.recent(program.__name__)[-1].executor is xla


def test_programs_that_need_a_graph_stay_one_with_no_trace_again(ipu_system, monkeypatch):
    monkeypatch.delenv(compile_policy.COMPILE_MODE_ENV, raising=False)
    traces = []

    def step(x):
        traces.append(1)
        # A Python function: XLA cannot compile it, so the program stays a graph.
        doubled = tf.numpy_function(lambda v: v * 2, [x], tf.float32, stateful=False)
        return tf.ensure_shape(doubled, x.shape)

    program = _compiled(step, steps_per_call=4)
    x = np.arange(4, dtype=np.float32).reshape(4, 1)
    for _ in range(TIER_UP_STEPS // 4 + 2):
        np.testing.assert_allclose(program(tf.constant(x)).numpy(), x * 2)
        assert program.compiled.executor is compile_policy.CompileMode.GRAPH
    assert len(traces) == 1


def test_a_program_creating_its_state_on_its_first_trace_is_traced_once(ipu_system, monkeypatch):
    """An optimizer's slots or an accumulator are created when the step is first traced:
    stock tf.function traces such a function twice on its first call. The state still
    starts from its initial value once, and carries over the calls and the move to XLA."""
    monkeypatch.delenv(compile_policy.COMPILE_MODE_ENV, raising=False)
    traces, made = [], []

    def step(x):
        traces.append(1)
        if not made:
            made.append(tf.Variable(tf.ones([1]) * 10.0, name="lazy_state"))
        total = made[0]
        total.assign_add(x)
        return total.read_value()

    program = _compiled(step, steps_per_call=4)
    x = np.arange(4, dtype=np.float32).reshape(4, 1)
    calls = TIER_UP_STEPS // 4 + 1
    running = np.concatenate([program(tf.constant(x)).numpy() for _ in range(calls)])
    np.testing.assert_allclose(running[:, 0], 10.0 + np.cumsum(np.tile(x[:, 0], calls)))
    assert len(made) == 1
    assert len(traces) == 2  # one as a graph, one for XLA after the move
    assert program.compiled.executor is compile_policy.CompileMode.XLA


def test_programs_keep_a_forced_or_requested_executor(ipu_system, monkeypatch):
    monkeypatch.setenv(compile_policy.COMPILE_MODE_ENV, "xla")
    forced = _compiled(lambda e: e + 1, steps_per_call=2)
    forced(tf.constant([1.0, 2.0]))
    assert forced.compiled_mode is compile_policy.CompileMode.XLA
    monkeypatch.delenv(compile_policy.COMPILE_MODE_ENV)
    requested = _compiled(
        lambda e: e + 1, steps_per_call=2, executor=compile_policy.CompileMode.XLA
    )
    for _ in range(TIER_UP_STEPS):
        requested(tf.constant([1.0, 2.0]))
        assert requested.compiled_mode is compile_policy.CompileMode.XLA


def test_last_mode_returns_only_the_final_step(ipu_system):
    program = _compiled(lambda e: e * 10, steps_per_call=3, outputs="last")
    np.testing.assert_array_equal(program(tf.constant([[1.0], [2.0], [3.0]])).numpy(), [30.0])


def test_step_without_outputs(ipu_system):
    counter = tf.Variable(0)

    def step(element):
        counter.assign_add(element)

    assert _compiled(step, steps_per_call=5)(tf.ones([5], tf.int32)) is None
    assert int(counter.numpy()) == 5


def test_input_length_must_match_the_step_count(ipu_system):
    with pytest.raises(
        ValueError,
        match="runs 4 steps per call on 1 replica.*need 4 elements .* got shape \\(3, 2\\)",
    ):
        _compiled(lambda e: e, steps_per_call=4)(tf.ones([3, 2]))


def test_compile_mode_can_be_requested(ipu_system):
    program = _compiled(
        lambda e: e + 1, steps_per_call=2, executor=compile_policy.CompileMode.GRAPH
    )
    np.testing.assert_array_equal(program(tf.constant([1.0, 2.0])).numpy(), [2.0, 3.0])
    assert program.compiled_mode is compile_policy.CompileMode.GRAPH


def test_outputs_argument_is_checked():
    with pytest.raises(ValueError, match="outputs must be 'all' or 'last'"):
        _compiled(lambda e: e, steps_per_call=1, outputs="some")


def _mixed_step(weights: tf.Variable):
    """A step mixing ops the vectorizer turns into batched ops (a matmul with loop-invariant
    weights, reductions over the element's own first axis, a reshape to a constant shape)
    with one it cannot vectorize (Bitcast, which runs in a loop of its own)."""

    def step(element, index):
        x = element["x"]
        product = tf.matmul(x, weights)  # [3, 2]
        return {
            "softmax": tf.nn.softmax(product, axis=-1),
            "column_mean": tf.reduce_mean(x, axis=0),
            "flat": tf.reshape(product, [6]),
            "bits": tf.bitcast(x, tf.int32),
            "index": index * 10,
        }

    return step


def _mixed_step_reference(x: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    product = x @ weights
    exp = np.exp(product - product.max(axis=-1, keepdims=True))
    return {
        "softmax": exp / exp.sum(axis=-1, keepdims=True),
        "column_mean": x.mean(axis=1),
        "flat": product.reshape(len(x), 6),
        "bits": x.view(np.int32),
        "index": np.arange(len(x)) * 10,
    }


@pytest.mark.parametrize("outputs", ["all", "last"])
@pytest.mark.parametrize("compile_mode", [None, compile_policy.CompileMode.GRAPH])
def test_independent_steps_run_together_and_match_the_loop(ipu_system, outputs, compile_mode):
    """Vectorized under XLA (the engine's choice here), unrolled copies as a graph."""
    rng = np.random.default_rng(0)
    weights = tf.Variable(rng.normal(size=(4, 2)).astype(np.float32))
    x = rng.normal(size=(5, 3, 4)).astype(np.float32)
    results = {}
    for together in (True, False):
        program = _compiled(
            _mixed_step(weights),
            steps_per_call=5,
            outputs=outputs,
            indexed=True,
            independent_steps=together,
            executor=compile_mode,
        )
        results[together] = program({"x": tf.constant(x)})
        assert program.runs_steps_together is together
        graph = program.compiled_mode is compile_policy.CompileMode.GRAPH
        # The loop's first steps run as a graph whatever the engine chooses (its tiers).
        assert graph is (compile_mode is not None or not together)
        assert program.unrolls_steps is (together and graph)
    expected = _mixed_step_reference(x, weights.numpy())
    for name, value in expected.items():
        value = value if outputs == "all" else value[-1]
        np.testing.assert_allclose(results[True][name].numpy(), value, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            results[True][name].numpy(), results[False][name].numpy(), rtol=1e-6, atol=1e-6
        )


def test_one_independent_step_runs_without_a_loop(ipu_system):
    weights = tf.Variable(np.eye(4, 2, dtype=np.float32))
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    program = _compiled(
        _mixed_step(weights), steps_per_call=1, indexed=True, independent_steps=True
    )
    outputs = program({"x": tf.constant(x)})
    for name, value in _mixed_step_reference(x, weights.numpy()).items():
        np.testing.assert_allclose(outputs[name].numpy(), value, rtol=1e-6)
    assert program.runs_steps_together


def _counter_plus_index(counter: tf.Variable, element, index):
    return counter.read_value() + index


def test_after_group_of_independent_steps_runs_once_after_them(ipu_system):
    """The steps read the state as it was before the call; `after_group` moves it on once."""
    for together in (True, False):
        counter = tf.Variable(100)
        program = _compiled(
            functools.partial(_counter_plus_index, counter),
            steps_per_call=4,
            indexed=True,
            independent_steps=together,
            group_size=4,
            after_group=functools.partial(counter.assign_add, 4),
        )
        np.testing.assert_array_equal(program(tf.zeros([4])).numpy(), [100, 101, 102, 103])
        np.testing.assert_array_equal(program(tf.zeros([4])).numpy(), [104, 105, 106, 107])
        assert int(counter.numpy()) == 108
        assert program.runs_steps_together is together


def test_independent_steps_keep_the_loop_when_after_group_follows_each_step(ipu_system):
    counter = tf.Variable(0)
    program = _compiled(
        lambda element: counter.read_value(),
        steps_per_call=3,
        independent_steps=True,
        after_group=lambda: counter.assign_add(1),
    )
    np.testing.assert_array_equal(program(tf.zeros([3])).numpy(), [0, 1, 2])
    assert not program.runs_steps_together


def test_steps_that_cannot_run_together_run_in_the_loop(ipu_system, monkeypatch):
    from openipu._src.engine import independent_steps

    def cannot_vectorize(*args):
        raise ValueError("not vectorizable")

    monkeypatch.setattr(independent_steps, "run_together", cannot_vectorize)
    program = _compiled(lambda element: element * 2, steps_per_call=3, independent_steps=True)
    np.testing.assert_array_equal(program(tf.constant([1.0, 2.0, 3.0])).numpy(), [2.0, 4.0, 6.0])
    assert not program.runs_steps_together


def test_long_independent_graph_programs_keep_the_loop(ipu_system, monkeypatch):
    from openipu._src.engine import program as program_module

    monkeypatch.setattr(program_module, "MAX_UNROLLED_STEPS", 2)
    program = _compiled(
        lambda element: element * 2,
        steps_per_call=3,
        independent_steps=True,
        executor=compile_policy.CompileMode.GRAPH,
    )
    np.testing.assert_array_equal(program(tf.constant([1.0, 2.0, 3.0])).numpy(), [2.0, 4.0, 6.0])
    assert program.compiled_mode is compile_policy.CompileMode.GRAPH
    assert not program.runs_steps_together


def test_the_compiled_program_records_every_decision(ipu_system):
    # Two replicas of a one-IPU step, each reading its own elements (i * R + r).
    program = _compiled(lambda e: e * 2.0, steps_per_call=3, replicas=2, name="doubling")
    assert program.compiled is None  # nothing decided before the first call
    x = np.arange(6, dtype=np.float32).reshape(6, 1)
    outputs = program(tf.constant(x)).numpy()
    np.testing.assert_array_equal(outputs, (x * 2).reshape(3, 2, 1))
    compiled = program.compiled
    assert (compiled.name, compiled.replicas, compiled.ipus_per_replica) == ("doubling", 2, 1)
    assert compiled.steps_per_call == 3 and compiled.ipus == 2
    assert compiled.executor is compile_policy.CompileMode.GRAPH  # its first steps
    assert compiled_program.recent("doubling")[-1] == compiled  # recorded when compiled
    assert compiled.step_schedule is StepSchedule.LOOP
    assert "2 replica(s) of 1 IPU(s), 3 step(s) per call" in compiled.describe()


def test_independent_steps_are_recorded_as_run_together(ipu_system):
    program = _compiled(lambda e: e + 1.0, steps_per_call=4, independent_steps=True)
    program(tf.zeros([4, 2]))
    assert program.compiled.step_schedule is StepSchedule.VECTORIZED
    assert program.compiled.replicas == 1


def test_compiled_programs_serialise_and_compare(ipu_system):
    import json

    program = _compiled(lambda e: e * 3.0, steps_per_call=2, name="tripling")
    program(tf.constant([1.0, 2.0]))
    compiled = program.compiled
    restored = compiled_program.CompiledProgram.from_dict(
        json.loads(json.dumps(compiled.to_dict()))
    )
    assert restored == compiled and hash(restored) == hash(compiled)
    assert restored.describe() == compiled.describe()


def test_a_loop_outside_any_program_is_recorded(ipu_system):
    from tensorflow.python import ipu

    previous = compiled_program.recent()[-1:]
    total = ipu.loops.repeat(3, lambda x: x + 2.0, [tf.constant(1.0)])
    assert float(total) == 7.0
    last = compiled_program.recent()[-1]
    assert not previous or last is not previous[0]  # a new record
    assert last.name.startswith("ipu_cluster") and last.replicas == 1
    assert last.executor in (
        compile_policy.CompileMode.XLA,
        compile_policy.CompileMode.GRAPH,
    )


def test_program_specs_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="6 steps cannot run in groups of 4 steps"):
        ProgramSpec(lambda e: e, 6, group_size=4)
    with pytest.raises(ValueError, match="compiles with XLA or as a graph"):
        ProgramSpec(lambda e: e, 2, executor=compile_policy.CompileMode.ONNX_RUNTIME)
