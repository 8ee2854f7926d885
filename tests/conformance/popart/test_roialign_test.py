"""graphcore/popart tests/integration/operators_test/roialign_test.py: ONNX RoiAlign (as
torchvision's RoIAlign, aligned=False: ONNX's output_half_pixel) and its input gradient, in
float32 and float16 (IpuModel2). Smaller images and fewer regions than the original's; the
output against onnx.reference, the gradient by RoiAlign's linearity: for any v,
<d_input, v> = <d_out, RoiAlign(v)>."""

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import popart

DEVICE = "IpuModel2"
POOL, SCALE, RATIO = 3, 0.5, 2


def _reference_roialign(x, rois, batch_index):
    node = helper.make_node(
        "RoiAlign",
        ["x", "rois", "i"],
        ["y"],
        output_height=POOL,
        output_width=POOL,
        sampling_ratio=RATIO,
        spatial_scale=SCALE,
        coordinate_transformation_mode="output_half_pixel",
    )
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None),
            helper.make_tensor_value_info("rois", onnx.TensorProto.FLOAT, None),
            helper.make_tensor_value_info("i", onnx.TensorProto.INT64, None),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    return ReferenceEvaluator(model).run(
        None,
        {
            "x": x.astype(np.float32),
            "rois": rois.astype(np.float32),
            "i": batch_index.astype(np.int64),
        },
    )[0]


def _roialign(op_tester, dtype, tolerance):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 2, (2, 2, 10, 10)).astype(dtype)
    rois = rng.uniform(0, 20, (6, 4)).astype(dtype)
    batch_index = rng.integers(0, 2, 6).astype(np.int32)
    g = popart.reservedGradientPrefix()
    ids = {}

    def init_builder(builder):
        ids["x"] = builder.addInputTensor(x)
        i2 = builder.addInputTensor(rois)
        i3 = builder.addInputTensor(batch_index)
        o = builder.aiOnnx.roialign(
            [ids["x"], i2, i3],
            sampling_ratio=RATIO,
            spatial_scale=SCALE,
            output_height=POOL,
            output_width=POOL,
            debugContext="roialign",
        )
        builder.addOutputTensor(o)
        return [o, g + ids["x"], g + o]

    def reference(ref_data):
        d_out = ref_data.getOutputTensorGrad(0).astype(np.float32)
        d_in = ref_data._anchors[g + ids["x"]].astype(np.float32)
        for _ in range(3):  # RoiAlign is linear in x: its gradient is the transposed map
            v = rng.standard_normal(x.shape).astype(np.float32)
            expected = np.sum(d_out * _reference_roialign(v, rois, batch_index))
            np.testing.assert_allclose(np.sum(d_in * v), expected, rtol=tolerance, atol=tolerance)
        return [_reference_roialign(x, rois, batch_index).astype(dtype), None, d_out.astype(dtype)]

    op_tester.atol = op_tester.rtol = tolerance
    # openipu's tile-memory estimate of RoiAlign's gradient (gathers and segment sums) is far
    # above Poplar's: on the fixture's 4 tiles it reports out of memory where the original
    # compiled a larger case, so this port gives the model more tiles.
    op_tester.tilesPerIPU = 64
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_roialign_fp32")
def test_roialign_fp32(op_tester):
    _roialign(op_tester, np.float32, 1e-3)


@pytest.mark.follows("test_roialign_fp16")
def test_roialign_fp16(op_tester):
    _roialign(op_tester, np.float16, 2e-2)
