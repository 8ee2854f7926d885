"""DataFlow and AnchorReturnType: constructors, errors, and anchor host shapes and values.

The expected shapes are written out by hand from the fact sheet (section 13.6): the host
buffer is [bps, af, rf, *shape] for All, [bps/N, af, rf, *shape] for EveryN, [rf, *shape]
for Final and Sum, with each bps / af / rf dimension dropped when it is 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from small_model import reference_outputs

import popart
from openipu._src.popart.session.anchors import host_shape

ART = popart.AnchorReturnType

# -- AnchorReturnType ------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["ALL", "All", "all", "aLl"])
def test_return_type_strings_are_case_insensitive(spelling):
    assert ART(spelling).id() is popart.AnchorReturnTypeId.All


def test_return_type_members():
    every = ART("EVERYN", 4)
    assert every.id() is popart.AnchorReturnTypeId.EveryN and every.rp() == 4
    assert every.tileSet() is popart.TileSet.Compute
    assert every.exchangeStrategy() is popart.ExchangeStrategy.JustInTime
    io = ART("Final", popart.TileSet.IO, popart.ExchangeStrategy.OverlapInnerLoop)
    assert io.tileSet() is popart.TileSet.IO
    assert io.exchangeStrategy() is popart.ExchangeStrategy.OverlapInnerLoop
    assert ART("sum") == ART("SUM") and ART("sum") != ART("all")


@pytest.mark.parametrize(
    "args, message",
    [
        (("EVERYN",), "Must specify return period with option 'EVERYN'"),
        (("EVERYN", 0), "Anchor return period must be greater than zero"),
        (("EVERYN", -2), "Anchor return period must be greater than zero"),
        (("ALL", 2), "A return period should not be supplied for this anchor return type"),
        (("MOST",), "Invalid anchor return type ID supplied: MOST"),
    ],
)
def test_return_type_errors(args, message):
    with pytest.raises(popart.popart_exception, match=message):
        ART(*args)


def test_return_period_of_other_types():
    with pytest.raises(popart.popart_exception, match="should not be supplied"):
        ART("FINAL").rp()


# -- DataFlow --------------------------------------------------------------------------------


def test_data_flow_from_a_dict_and_from_a_list():
    flow = popart.DataFlow(4, {"a": ART("FINAL"), "b": ART("EVERYN", 2)})
    assert flow.anchors() == ["a", "b"] and flow.nAnchors() == 2 and flow.batchesPerStep() == 4
    assert flow.art("b").rp() == 2 and flow.isAnchored("a") and not flow.isAnchored("c")
    listed = popart.DataFlow(3, ["a", "b"])
    assert listed.art("a") == ART("ALL")
    summed = popart.DataFlow(3, ["a"], ART("SUM"))
    assert summed.art("a") == ART("SUM")
    flow.setBatchesPerStep(8)
    assert flow.batchesPerStep() == 8


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, ["a"]), "'Batches per step' must be greater than zero"),
        (
            (2, {"a": ART("EVERYN", 3)}),
            "Return period must be <= to the number of batches per step",
        ),
        ((6, {"a": ART("EVERYN", 4)}), "Return period must be a factor of the number of batches"),
    ],
)
def test_data_flow_errors(args, message):
    with pytest.raises(popart.popart_exception, match=message):
        popart.DataFlow(*args)


def test_data_flow_argument_types():
    # pybind11's TypeError, naming the argument the closest overload refused.
    with pytest.raises(TypeError, match="batchesPerStep must be int"):
        popart.DataFlow(2.0, ["a"])
    with pytest.raises(
        TypeError, match=r"anchorTensors\['a'\] must be popart_core.AnchorReturnType"
    ):
        popart.DataFlow(2, {"a": "ALL"})
    with pytest.raises(TypeError, match=r"anchorIds\[0\] must be str"):
        popart.DataFlow(2, [3])
    with pytest.raises(popart.popart_exception, match="Tensor b is not an anchor"):
        popart.DataFlow(2, ["a"]).art("b")


# -- host shapes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bps, af, rf, expected",
    [
        (1, 1, 1, [2, 3]),
        (4, 1, 1, [4, 2, 3]),
        (1, 5, 1, [5, 2, 3]),
        (1, 1, 2, [2, 2, 3]),
        (4, 5, 2, [4, 5, 2, 2, 3]),
        (4, 1, 2, [4, 2, 2, 3]),
    ],
)
def test_host_shape_drops_outer_dimensions_of_size_one(bps, af, rf, expected):
    assert host_shape([2, 3], bps, af, rf) == expected


def test_tensor_dimensions_of_size_one_are_kept():
    assert host_shape([1, 3, 1], 4, 1, 1) == [4, 1, 3, 1]
    assert host_shape([], 1, 1, 1) == []


BPS = 6


@pytest.fixture
def all_return_types(small_model, ipu_model_device):
    anchors = {
        small_model.y: ART("ALL"),
        small_model.hidden: ART("EVERYN", 3),
        small_model.x: ART("FINAL"),
        small_model.w: ART("SUM"),
    }
    session = popart.InferenceSession(
        small_model.proto, popart.DataFlow(BPS, anchors), ipu_model_device
    )
    session.prepareDevice()
    return session


def test_host_shapes_of_every_return_type(small_model, all_return_types):
    arrays = all_return_types.initAnchorArrays()
    # Written out by hand: y and hidden are [2, 3], x is [2, 4], w is [4, 3]; bps = 6.
    assert arrays[small_model.y].shape == (6, 2, 3)  # All: [bps, *shape]
    assert arrays[small_model.hidden].shape == (2, 2, 3)  # EveryN 3: [bps / 3, *shape]
    assert arrays[small_model.x].shape == (2, 4)  # Final: [*shape]
    assert arrays[small_model.w].shape == (4, 3)  # Sum: [*shape]
    assert all(array.dtype == np.float32 for array in arrays.values())


def test_values_of_every_return_type(small_model, all_return_types):
    arrays = all_return_types.initAnchorArrays()
    x = np.random.default_rng(5).normal(size=(BPS, 2, 4)).astype(np.float32)
    all_return_types.run(popart.PyStepIO({small_model.x: x}, arrays))
    expected = reference_outputs(small_model, x)
    np.testing.assert_allclose(arrays[small_model.y], expected[small_model.y], 1e-5, 1e-6)
    # EveryN 3 returns the 3rd and the 6th batch (indices 2 and 5).
    np.testing.assert_allclose(
        arrays[small_model.hidden], expected[small_model.hidden][[2, 5]], 1e-5
    )
    np.testing.assert_array_equal(arrays[small_model.x], x[-1])  # Final: the last batch
    np.testing.assert_allclose(
        arrays[small_model.w], BPS * small_model.weights[small_model.w], 1e-5
    )


def test_final_only_sessions_return_the_last_batch(small_model, ipu_model_device):
    flow = popart.DataFlow(3, {small_model.y: ART("FINAL")})
    session = popart.InferenceSession(small_model.proto, flow, ipu_model_device)
    session.prepareDevice()
    arrays = session.initAnchorArrays()
    x = np.stack([np.full((2, 4), value, np.float32) for value in (1.0, 2.0, 3.0)])
    session.run(popart.PyStepIO({small_model.x: x}, arrays))
    np.testing.assert_allclose(
        arrays[small_model.y], reference_outputs(small_model, x[2])[small_model.y], 1e-6
    )


def test_sum_of_a_computed_tensor(small_model, ipu_model_device):
    flow = popart.DataFlow(4, {small_model.y: ART("SUM")})
    session = popart.InferenceSession(small_model.proto, flow, ipu_model_device)
    session.prepareDevice()
    arrays = session.initAnchorArrays()
    x = np.random.default_rng(2).normal(size=(4, 2, 4)).astype(np.float32)
    session.run(popart.PyStepIO({small_model.x: x}, arrays))
    expected = reference_outputs(small_model, x)[small_model.y].sum(axis=0)
    np.testing.assert_allclose(arrays[small_model.y], expected, rtol=1e-5, atol=1e-6)


def replicated_session(model, anchors, batches_per_step=4):
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 2})
    options = popart.SessionOptions()
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = 2
    return popart.InferenceSession(
        model.proto, popart.DataFlow(batches_per_step, anchors), device, userOptions=options
    )


def test_replicated_host_shapes(small_model):
    anchors = {
        small_model.y: ART("ALL"),
        small_model.hidden: ART("EVERYN", 2),
        small_model.x: ART("FINAL"),
        small_model.w: ART("SUM"),
    }
    arrays = replicated_session(small_model, anchors).initAnchorArrays()
    # rf = 2 and bps = 4, written out by hand.
    assert arrays[small_model.y].shape == (4, 2, 2, 3)  # [bps, rf, *shape]
    assert arrays[small_model.hidden].shape == (2, 2, 2, 3)  # [bps / 2, rf, *shape]
    assert arrays[small_model.x].shape == (2, 2, 4)  # [rf, *shape]
    assert arrays[small_model.w].shape == (2, 4, 3)  # [rf, *shape]


def test_every_n_with_a_changed_batches_per_step_is_a_runtime_error(small_model, ipu_model_device):
    flow = popart.DataFlow(4, {small_model.y: ART("EVERYN", 2)})
    session = popart.InferenceSession(small_model.proto, flow, ipu_model_device)
    session._anchors[0] = type(session._anchors[0])(
        small_model.y, ART("EVERYN", 3), session._anchors[0].signature, 4, 1, 1
    )
    with pytest.raises(RuntimeError, match="return period 3 is not a factor of the 4 batches"):
        session.initAnchorArrays()


def test_input_settings():
    settings = popart.InputSettings(popart.ReplicatedStreamMode.Broadcast)
    assert settings.replicatedStreamMode() is popart.ReplicatedStreamMode.Broadcast
    default = popart.InputSettings()
    assert default.tileSet() is popart.TileSet.Compute
    assert default.exchangeStrategy() is popart.ExchangeStrategy.JustInTime
    assert default.replicatedStreamMode() is popart.ReplicatedStreamMode.Replicate
    with pytest.raises(TypeError, match="tileSet must be a TileSet"):
        popart.InputSettings("IO")


def test_input_shape_info():
    info = popart.InputShapeInfo()
    info.add("x", popart.TensorInfo("FLOAT16", [3]))
    assert info.has("x") and not info.has("y")
    assert info.get("x") == popart.TensorInfo("FLOAT16", [3])
    with pytest.raises(popart.popart_exception, match="No input shape info for Tensor `y'"):
        info.get("y")
    with pytest.raises(TypeError, match="must be a TensorInfo"):
        info.add("x", [3])


def test_broadcast_inputs_are_read_once_for_all_replicas():
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    settings = popart.InputSettings(popart.ReplicatedStreamMode.Broadcast)
    shared = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]), settings, "shared")
    own = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]), "own")
    y = builder.aiOnnx.add([shared, own])
    builder.addOutputTensor(y)

    class Model:
        proto = builder.getModelProto()

    session = replicated_session(Model, [y], batches_per_step=4)
    fetches = {plan.tensor_id: plan.fetches for plan in session._inputs}
    assert fetches == {shared: 4, own: 8}  # bps, and bps * rf
