"""No silent wrong answers: declared types that contradict the ops, attributes out of range,
opsets a session cannot run, out-of-range indices and NaNs each give an error or the answer
of an independent reference (numpy, onnx's reference implementation, onnxruntime)."""

from __future__ import annotations

from unittest import mock

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import popart


def model_of(nodes, inputs, outputs, opset=13, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def session_for(model, anchors=("y",), options=None):
    return popart.InferenceSession(
        model.SerializeToString(),
        popart.DataFlow(1, list(anchors)),
        popart.DeviceManager().createIpuModelDevice({}),
        userOptions=options,
    )


def run(model, feeds, anchors=("y",)):
    session = session_for(model, anchors)
    session.prepareDevice()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO(feeds, arrays))
    return arrays


def softmax_model(output_type=TensorProto.FLOAT, output_shape=(2, 3), axis=1):
    return model_of(
        [helper.make_node("Softmax", ["x"], ["y"], name="the_softmax", axis=axis)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", output_type, list(output_shape))],
    )


# -- declared types and attributes -------------------------------------------------------------


def test_an_output_declared_with_the_wrong_type_is_an_error_naming_it():
    with pytest.raises(popart.popart_exception, match=r"the_softmax.*'y' declared as INT32"):
        session_for(softmax_model(output_type=TensorProto.INT32))


def test_an_output_declared_with_the_wrong_shape_is_an_error_naming_it():
    with pytest.raises(
        popart.popart_exception, match=r"the_softmax.*'y' declared as FLOAT \[2, 4\]"
    ):
        session_for(softmax_model(output_shape=(2, 4)))


def test_an_attribute_out_of_range_is_an_error_naming_it():
    with pytest.raises(popart.popart_exception, match=r"the_softmax.*'axis'.*17"):
        session_for(softmax_model(axis=17))


def test_the_builder_loads_what_the_session_refuses():
    # The original's Builder checks a loaded model's structure only (onnx's checker, in
    # willow/src/builder_impl.cpp); the session's full check names the wrong declaration.
    data = softmax_model(output_type=TensorProto.INT32).SerializeToString()
    builder = popart.Builder(modelProtoOrFilename=data)
    with pytest.raises(popart.popart_exception, match="the_softmax"):
        session_for(onnx.load_from_string(builder.getModelProto()))


def test_a_correct_model_still_gives_numpys_answer():
    x = np.array([[1, 2, 3], [0, 0, 5]], np.float32)
    expected = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(run(softmax_model(), {"x": x})["y"], expected, rtol=1e-6)


# -- strictOpVersions --------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [1, 5, 99])
def test_strict_op_versions_refuses_opsets_the_session_cannot_run(opset):
    with pytest.raises(popart.popart_exception, match=f"ai.onnx {opset} in opsets"):
        session_for(onnx.ModelProto.FromString(_with_opset(softmax_model(), opset)))


def test_without_strict_op_versions_ops_fall_back_to_the_newest_implementation():
    options = popart.SessionOptions()
    options.strictOpVersions = False
    model = onnx.ModelProto.FromString(_with_opset(softmax_model(), 99))
    session_for(model, options=options)  # loads: Softmax-13 stands in


def test_strict_op_versions_refuses_an_op_whose_version_is_not_implemented():
    # Every ai.onnx op the lowering has is implemented at every opset, so pretend that Mod's
    # newest implementation is Mod-13: at opset 28 the spec stipulates Mod-28.
    from openipu._src.popart.lowering import registry
    from openipu._src.popart.session import op_versions

    model = model_of(
        [helper.make_node("Mod", ["x", "x"], ["y"], name="the_mod")],
        [helper.make_tensor_value_info("x", TensorProto.INT32, [2])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [2])],
        opset=28,
    )
    model.ir_version = 13
    session_for(model)  # Mod-28 is implemented

    def without_mod_28(domain, op_type, version):
        return registry.find_op(domain, op_type, 13 if op_type == "Mod" else version)

    with mock.patch.object(op_versions, "find_op", without_mod_28):
        with pytest.raises(popart.popart_exception, match=r"Mod op must be version 28.*is 13"):
            session_for(model)


def _with_opset(model, opset):
    model.opset_import[0].version = opset
    return model.SerializeToString()


# -- out-of-range indices --------------------------------------------------------------------


def gather_model(op_type, data_shape, indices_shape, output_shape, **attributes):
    return model_of(
        [helper.make_node(op_type, ["data", "i"], ["y"], name="the_gather", **attributes)],
        [
            helper.make_tensor_value_info("data", TensorProto.FLOAT, list(data_shape)),
            helper.make_tensor_value_info("i", TensorProto.INT64, list(indices_shape)),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(output_shape))],
    )


def zeros_out_of_range(gathered, indices, size):
    return np.where((indices >= -size) & (indices < size), gathered, 0)


def test_gather_gives_zeros_for_out_of_range_indices_never_a_clamped_row():
    data = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    indices = np.array([0, -1, 4, 99, -5, 2], np.int64)
    got = run(gather_model("Gather", [4, 3], [6], [6, 3], axis=0), {"data": data, "i": indices})
    safe = np.where((indices >= -4) & (indices < 4), indices, 0)
    expected = zeros_out_of_range(data[safe], indices[:, None], 4)
    np.testing.assert_array_equal(got["y"], expected)


def test_gather_elements_gives_zeros_for_out_of_range_indices():
    data = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    indices = np.array([[0, 3, -1], [7, 1, -4]], np.int64)
    model = gather_model("GatherElements", [2, 3], [2, 3], [2, 3], axis=1)
    got = run(model, {"data": data, "i": indices})
    safe = np.where((indices >= -3) & (indices < 3), indices, 0)
    expected = zeros_out_of_range(np.take_along_axis(data, safe % 3, axis=1), indices, 3)
    np.testing.assert_array_equal(got["y"], expected)


def test_scatter_nd_drops_updates_at_out_of_range_indices():
    data = np.arange(8, dtype=np.float32)
    indices = np.array([[1], [9], [-2], [-9]], np.int64)
    updates = np.array([10, 20, 30, 40], np.float32)
    model = model_of(
        [helper.make_node("ScatterND", ["data", "i", "u"], ["y"], name="the_scatter")],
        [
            helper.make_tensor_value_info("data", TensorProto.FLOAT, [8]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [4, 1]),
            helper.make_tensor_value_info("u", TensorProto.FLOAT, [4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])],
    )
    got = run(model, {"data": data, "i": indices, "u": updates})
    expected = data.copy()
    expected[1], expected[-2] = 10, 30  # 9 and -9 are outside [-8, 8): dropped
    np.testing.assert_array_equal(got["y"], expected)


# -- NaNs ------------------------------------------------------------------------------------

NAN_ROWS = np.array([[1, np.nan, 3], [4, 5, 6], [np.nan, 2, np.nan]], np.float32)


def one_input_model(op_type, output_type, output_shape, **attributes):
    return model_of(
        [helper.make_node(op_type, ["x"], ["y"], name="the_op", **attributes)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", output_type, output_shape)],
    )


def onnxruntime_outputs(model, feeds):
    import onnxruntime

    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)[0]


@pytest.mark.parametrize("op_type", ["Max", "Min"])
def test_max_and_min_propagate_nans_as_onnxruntime_does(op_type):
    model = model_of(
        [helper.make_node(op_type, ["x", "z"], ["y"], name="the_op")],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [3, 3]) for name in "xz"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])],
    )
    feeds = {"x": NAN_ROWS, "z": NAN_ROWS[::-1].copy()}
    np.testing.assert_array_equal(run(model, feeds)["y"], onnxruntime_outputs(model, feeds))


@pytest.mark.parametrize(
    "op_type, output_type, attributes",
    [
        ("ReduceMax", TensorProto.FLOAT, {"axes": [1], "keepdims": 0}),
        ("ReduceMin", TensorProto.FLOAT, {"axes": [1], "keepdims": 0}),
        ("ArgMax", TensorProto.INT64, {"axis": 1, "keepdims": 0}),
        ("ArgMin", TensorProto.INT64, {"axis": 1, "keepdims": 0}),
        ("ArgMax", TensorProto.INT64, {"axis": 1, "keepdims": 0, "select_last_index": 1}),
    ],
)
def test_reductions_over_nans_match_onnx_and_onnxruntime(op_type, output_type, attributes):
    model = one_input_model(op_type, output_type, [3], **attributes)
    got = run(model, {"x": NAN_ROWS})["y"]
    reference = ReferenceEvaluator(model).run(None, {"x": NAN_ROWS})[0]
    np.testing.assert_array_equal(got, reference)
    # onnxruntime's answer depends on where the NaN is (row 0: the NaN is skipped); where a
    # NaN leads a row (row 2) it agrees, except for select_last_index, where it gives 0.
    rows = [1] if attributes.get("select_last_index") else [1, 2]
    onnxruntime_answer = onnxruntime_outputs(model, {"x": NAN_ROWS})
    np.testing.assert_array_equal(got[rows], onnxruntime_answer[rows])
