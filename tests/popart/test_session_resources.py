"""Resources: a huge declared tensor is an out-of-memory error before anything is allocated,
and a file write that fails or is interrupted leaves neither a half file nor a temporary."""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper

import popart
from openipu._src.popart.session import executable_file, memory_budget


def relu_model(rows: int) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]).SerializeToString()


def session_for(rows: int) -> popart.InferenceSession:
    return popart.InferenceSession(
        relu_model(rows), popart.DataFlow(1, ["y"]), popart.DeviceManager().createIpuModelDevice({})
    )


def test_a_huge_declared_input_is_out_of_memory_before_allocating():
    session = session_for(2**40)  # 16 TiB of x and as much of y
    with pytest.raises(popart.OutOfMemoryException, match="input 'x'"):
        session.prepareDevice()


def test_the_budget_counts_inputs_and_anchors():
    session = session_for(1000)
    needed = 2 * 1000 * 4 * 4  # x and y, float32
    memory_budget.check_fits(session._inputs, session._anchors, needed)
    with pytest.raises(popart.OutOfMemoryException, match=f"need {needed} bytes"):
        memory_budget.check_fits(session._inputs, session._anchors, needed - 1)


def test_a_model_that_fits_still_runs():
    session = session_for(2)
    session.prepareDevice()
    x = np.array([[-1, 2, -3, 4], [5, -6, 7, -8]], np.float32)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({"x": x}, anchors))
    np.testing.assert_array_equal(anchors["y"], np.maximum(x, 0))


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, OSError])
def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, interruption):
    target = tmp_path / "model.onnx"
    target.write_bytes(b"old")
    with pytest.raises(interruption):
        with executable_file.atomic_output(str(target)) as stream:
            stream.write(b"half of the new")
            raise interruption()
    assert target.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["model.onnx"]
