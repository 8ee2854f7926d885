"""`OnnxRuntimeProgram`: a call's batches run one by one, shared out among cores, or bound
to arrays give numpy's results, step by step and replica by replica."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper

from openipu._src.engine.compiled_program import StepSchedule
from openipu._src.engine.onnx_runtime_program import OnnxRuntimeProgram

pytest.importorskip("onnxruntime")
WEIGHT = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)


def tanh_matmul_model(batch: int = 4) -> bytes:
    """y = tanh(x @ W), x: [batch, 5] float."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Tanh", ["h"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, [5, 3], WEIGHT.ravel())],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return model.SerializeToString()


def expected(x: np.ndarray) -> np.ndarray:
    return np.tanh(x @ WEIGHT)


@pytest.mark.parametrize("cores", [1, 2, 3])
@pytest.mark.parametrize("replicas", [1, 2])
def test_shared_out_batches_give_each_steps_results(cores, replicas):
    steps = 5  # not a multiple of the cores: shares of different sizes
    program = OnnxRuntimeProgram(tanh_matmul_model(), ["y"], steps, replicas=replicas, cores=cores)
    expected_schedule = StepSchedule.SHARED_OUT if cores > 1 else StepSchedule.LOOP
    assert program.compiled.step_schedule is expected_schedule
    x = np.random.default_rng(1).normal(size=(steps * replicas, 4, 5)).astype(np.float32)
    y = program({"x": x})["y"]
    lead = [steps, replicas] if replicas > 1 else [steps]
    assert y.shape == (*lead, 4, 3)
    np.testing.assert_allclose(y.reshape(-1, 4, 3), expected(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cores", [1, 2])
def test_a_bound_call_reads_new_values_and_writes_in_place(cores):
    steps = 4
    program = OnnxRuntimeProgram(tanh_matmul_model(), ["y"], steps, cores=cores)
    x = np.zeros((steps, 4, 5), np.float32)
    y = np.full((steps, 4, 3), np.nan, np.float32)
    call = program.bind({"x": x}, {"y": y})
    assert call is not None
    rng = np.random.default_rng(2)
    for _ in range(3):
        x[...] = rng.normal(size=x.shape)
        call()
        np.testing.assert_allclose(y, expected(x), rtol=1e-5, atol=1e-6)


def test_arrays_that_cannot_be_bound_are_refused():
    program = OnnxRuntimeProgram(tanh_matmul_model(), ["y"], 2, cores=2)
    x = np.zeros((2, 4, 5), np.float32)
    assert program.bind({"x": x}, {"y": np.zeros((2, 3, 4), np.float32).transpose(0, 2, 1)}) is None
    assert program.bind({"x": x}, {"y": np.zeros((3, 4, 3), np.float32)}) is None  # steps
    assert program.bind({"x": x[::2]}, {"y": np.zeros((2, 4, 3), np.float32)}) is None


def test_an_error_in_one_share_is_raised_after_every_share_ends():
    program = OnnxRuntimeProgram(tanh_matmul_model(), ["y"], 4, cores=2)
    ended = threading.Event()

    def slow_share() -> None:
        ended.wait(0.2)
        ended.set()

    def failing_share() -> None:
        raise RuntimeError("share failed")

    with pytest.raises(RuntimeError, match="share failed"):
        program._run_at_once([failing_share, slow_share])  # noqa: SLF001
    assert ended.is_set()  # the other share had ended when the error came
    x = np.ones((4, 4, 5), np.float32)
    np.testing.assert_allclose(program({"x": x})["y"], expected(x), rtol=1e-5)  # still usable
