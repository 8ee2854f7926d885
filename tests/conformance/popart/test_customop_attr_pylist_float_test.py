"""graphcore/popart tests/integration/customop_attr_pylist_tests/customop_attr_pylist_float_test.py:
a C++ custom op (com.acme CustomopAttrPylist, an identity, loaded from the test's own shared
library) given its `values` attribute as a Python list of floats or ints, a string, an int
or a float. The builder records each with its ONNX type here as in the original; running
it needs the op's C++ library, which openipu cannot load (no lowering for the op)."""

import numpy as np
import onnx
import pytest
from onnx import AttributeProto

import popart


def _run(values, attribute_type):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    out = builder.customOp(
        opName="CustomopAttrPylist", opVersion=1, inputs=[x], domain="com.acme",
        attributes={"values": values},
    )[0]  # fmt: skip
    builder.addOutputTensor(out)
    proto = builder.getModelProto()
    # Beside the builder's '__debug_info_id', which every node gets.
    (attribute,) = (
        a for a in onnx.load_from_string(proto).graph.node[0].attribute if a.name == "values"
    )
    assert attribute.type == attribute_type
    session = popart.InferenceSession(
        proto,
        popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": 4}),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    data = np.random.default_rng(0).random(1).astype(np.float32)
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_allclose(anchors["CustomopAttrPylist:0"], data)


NO_LIBRARY = (
    "openipu cannot load the original's C++ custom op library "
    "(libattr_pylist_float_customOp.so): com.acme CustomopAttrPylist has no lowering"
)


@pytest.mark.follows("test_customOp_python_floats")
@pytest.mark.xfail(strict=True, raises=popart.popart_exception, reason=NO_LIBRARY)
def test_customOp_python_floats():
    _run([1.0, 2.0, 3.0], AttributeProto.FLOATS)


@pytest.mark.follows("test_customOp_python_ints")
@pytest.mark.xfail(strict=True, raises=popart.popart_exception, reason=NO_LIBRARY)
def test_customOp_python_ints():
    _run([1, 2, 3], AttributeProto.INTS)


@pytest.mark.follows("test_customOp_python_string")
@pytest.mark.xfail(strict=True, raises=popart.popart_exception, reason=NO_LIBRARY)
def test_customOp_python_string():
    _run("Foo_Bar", AttributeProto.STRING)


@pytest.mark.follows("test_customOp_python_int")
@pytest.mark.xfail(strict=True, raises=popart.popart_exception, reason=NO_LIBRARY)
def test_customOp_python_int():
    _run(10, AttributeProto.INT)


@pytest.mark.follows("test_customOp_python_float")
@pytest.mark.xfail(strict=True, raises=popart.popart_exception, reason=NO_LIBRARY)
def test_customOp_python_float():
    _run(10.0, AttributeProto.FLOAT)
