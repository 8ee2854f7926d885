"""PopART's utility classes: DebugContext converts to its name where builder methods take one,
DebugInfo ids and values, OperatorIdentifier, and the NetWriter base class."""

from __future__ import annotations

import numpy as np
import pytest

import popart


def _ids_built_with(name_of):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), name_of("images"))
    y = builder.aiOnnx.relu([x], name_of("act"))
    return x, y


def test_debug_context_is_taken_where_a_name_is():
    assert _ids_built_with(popart.DebugContext) == _ids_built_with(str)
    assert _ids_built_with(popart.DebugContext)[0] == "images"
    assert popart.DebugContext() == ""
    with pytest.raises(TypeError, match="name must be a str"):
        popart.DebugContext(3)


def test_debug_info_ids_are_unique_and_values_keep_the_first():
    first, second = popart.DebugInfo("a"), popart.DebugInfo("b")
    assert first.getId() != second.getId()
    assert first.setValue("shape", [2, 3]) is True
    assert first.setValue("shape", [4]) is False
    assert first.values == {"shape": [2, 3]}


def test_operator_identifier():
    op = popart.OperatorIdentifier("ai.onnx", "Relu", 6, 1, 1)
    assert (op.domain, op.type, op.version) == ("ai.onnx", "Relu", 6)
    assert op == popart.OperatorIdentifier("ai.onnx", "Relu", 6, 1, 1)
    assert str(op) == "ai.onnx.Relu:6"
    with pytest.raises(ValueError, match="version must be a positive int, got 0"):
        popart.OperatorIdentifier("ai.onnx", "Relu", 0)
    definition = popart.OpDefinition(["X"], ["Y"], {"alpha": float})
    assert list(definition.inputs) == ["X"]


def test_net_writer_dispatches_a_step_to_train_or_infer():
    class DoublingWriter(popart.writer.NetWriter):
        def infer(self, inputsMap):
            return {name: 2 * value for name, value in inputsMap.items()}

    dataflow = popart.DataFlow(1, {"y": popart.AnchorReturnType("All")})
    writer = DoublingWriter(["x"], ["y"], None, dataflow, popart.InputShapeInfo())
    assert writer.trainMode is False
    np.testing.assert_array_equal(writer.step({"x": np.arange(3)})["x"], [0, 2, 4])
    trainer = popart.writer.NetWriter(["x"], ["y"], popart.ConstSGD(0.1), dataflow, None)
    with pytest.raises(NotImplementedError, match="must implement NetWriter.train"):
        trainer.step({})
