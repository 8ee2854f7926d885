"""graphcore/popart tests/integration/operators_test/tile_test.py: Tile by constant repeats,
its gradient, and the errors for non-constant, negative or wrongly sized repeats (Cpu)."""

import numpy as np
import pytest

import popart

OPSETS = {"ai.onnx": 10, "ai.graphcore": 1}


def _tile(op_tester, repeats, constant=True, opsets=OPSETS):
    data = np.random.rand(2, 4, 3).astype(np.float32)

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        r = builder.aiOnnx.constant(repeats) if constant else builder.addInputTensor(repeats)
        o = builder.aiOnnx.tile([i1, r])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [np.tile(data, repeats)], "infer", opsets=opsets)


@pytest.mark.follows("test_tile")
def test_tile(op_tester):
    _tile(op_tester, np.array([2, 4, 6], np.int64))


@pytest.mark.follows("test_tile_variable_repeats")
def test_tile_variable_repeats(op_tester):
    with pytest.raises(popart.popart_exception) as e_info:
        _tile(op_tester, np.array([2, 4, 6], np.int64), constant=False, opsets=None)
    assert e_info.value.args[0].endswith("must be of type Constant")


@pytest.mark.follows("test_tile_invalid_repeat_vals")
def test_tile_invalid_repeat_vals(op_tester):
    with pytest.raises(popart.popart_exception) as e_info:
        _tile(op_tester, np.array([1, 1, -4], np.int64))
    assert "Values must be non-negative in each shape dimension" in e_info.value.args[0]


@pytest.mark.follows("test_tile_invalid_repeats_size")
def test_tile_invalid_repeats_size(op_tester):
    with pytest.raises(popart.popart_exception) as e_info:
        _tile(op_tester, np.array([2, 1, 4, 5], np.int64))
    assert e_info.value.args[0].endswith(
        "should have one element for each dimension of the data tensor"
    )


@pytest.mark.follows("test_tile_grad")
def test_tile_grad(op_tester):
    data = np.random.rand(2, 4, 3).astype(np.float32)
    repeats = np.array([2, 4, 1], np.int64)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        o = builder.aiOnnx.tile([i1, builder.aiOnnx.constant(repeats)])
        builder.addOutputTensor(o)
        return [o, g + i1, g + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        # Each input element's gradient sums its copies: split the output into tiles.
        tiles = d__o.reshape(2, 2, 4, 4, 1, 3)
        return [np.tile(data, repeats), tiles.sum(axis=(0, 2, 4)), None]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train", opsets=OPSETS)
