"""graphcore/popart tests/integration/ipu_copy_test.py: tensors copied between the virtual
graphs of a sharded inference (an input to several IPUs, one tensor to one IPU once, both
inputs of an op from one tensor, a constant on several IPUs, an op whose inputs repeat),
and an op on a virtual graph the device does not have refused in prepareDevice, naming the
op with its copied inputs (IpuModel2)."""

import numpy as np
import pytest
from popart_session_helpers import infer_on

import popart
from conftest import create_test_device


def _run(builder, output, num_ipus, feed):
    """Prepares and runs the sharded inference; the output's values."""
    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    device = create_test_device("IpuModel2", num_ipus)
    return infer_on(device, builder.getModelProto(), [output], feed, options)[output]


def _two_adds(builder):
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    o1 = builder.aiOnnx.add([i1, i2])
    o2 = builder.aiOnnx.add([i1, i2])
    return i1, i2, o1, o2


VALUES = {"a": np.array([0.25], np.float32), "b": np.array([1.5], np.float32)}


@pytest.mark.follows("test_ipu_copy_bca1")
def test_ipu_copy_bca1():
    builder = popart.Builder()
    i1, i2, o1, o2 = _two_adds(builder)
    o = builder.aiOnnx.add([o1, o2])
    for tensor, graph in ((o1, 0), (o2, 0), (o, 1)):
        builder.virtualGraph(tensor, graph)
    result = _run(builder, o, 3, {i1: VALUES["a"], i2: VALUES["b"]})
    np.testing.assert_allclose(result, 2 * (VALUES["a"] + VALUES["b"]))


@pytest.mark.follows("test_ipu_copy_aca1")
def test_ipu_copy_aca1():
    builder = popart.Builder()
    i1, i2, o1, o2 = _two_adds(builder)
    o = builder.aiOnnx.add([o1, o2])
    for tensor, graph in ((o1, 0), (o2, 0), (o, 10)):  # virtual graph 10 of 3 IPUs
        builder.virtualGraph(tensor, graph)
    with pytest.raises(popart.popart_exception) as error:
        _run(builder, o, 3, {i1: VALUES["a"], i2: VALUES["b"]})
    assert (
        f"inputs=[{o1}_c10, {o2}_c10], outputs=[{o}]) has been assigned to an invalid"
        " virtual graph 10" in error.value.args[0]
    )


@pytest.mark.follows("test_ipu_copy_bca4")
def test_ipu_copy_bca4():
    builder = popart.Builder()
    i1, i2, o1, o2 = _two_adds(builder)
    t1 = builder.aiOnnx.transpose([i1], [])
    o3 = builder.aiOnnx.add([o1, o2])
    o = builder.aiOnnx.add([o3, t1])
    for tensor, graph in ((o1, 0), (o2, 2), (t1, 2), (o3, 1), (o, 1)):
        builder.virtualGraph(tensor, graph)
    result = _run(builder, o, 3, {i1: VALUES["a"], i2: VALUES["b"]})
    np.testing.assert_allclose(result, 3 * VALUES["a"] + 2 * VALUES["b"])


@pytest.mark.follows("test_ipu_copy_bca2")
def test_ipu_copy_bca2():
    builder = popart.Builder()
    i1, i2, o1, o2 = _two_adds(builder)
    o3 = builder.aiOnnx.add([o1, o2])
    o4 = builder.aiOnnx.add([o1, o2])
    o = builder.aiOnnx.add([o3, o4])
    for tensor, graph in ((o1, 0), (o2, 0), (o3, 1), (o4, 1), (o, 2)):
        builder.virtualGraph(tensor, graph)
    result = _run(builder, o, 3, {i1: VALUES["a"], i2: VALUES["b"]})
    np.testing.assert_allclose(result, 4 * (VALUES["a"] + VALUES["b"]))


@pytest.mark.follows("test_ipu_copy_bca3")
def test_ipu_copy_bca3():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    o1 = builder.aiOnnx.add([i1, i2])
    o = builder.aiOnnx.add([o1, o1])
    builder.virtualGraph(o1, 0)
    builder.virtualGraph(o, 1)
    result = _run(builder, o, 2, {i1: VALUES["a"], i2: VALUES["b"]})
    np.testing.assert_allclose(result, 2 * (VALUES["a"] + VALUES["b"]))


@pytest.mark.follows("test_ipu_copy_bca5")
def test_ipu_copy_bca5():
    builder = popart.Builder()
    const_data = np.random.rand(2, 2).astype(np.float32)
    c1 = builder.aiOnnx.constant(const_data, "constShapeData")
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]))
    o1 = builder.aiOnnx.add([c1, i2])
    o2 = builder.aiOnnx.add([c1, i2])
    t1 = builder.aiOnnx.transpose([c1], [])
    o3 = builder.aiOnnx.add([o1, o2])
    o = builder.aiOnnx.add([o3, t1])
    for tensor, graph in ((o1, 0), (o2, 2), (t1, 2), (o3, 1), (o, 1)):
        builder.virtualGraph(tensor, graph)
    data = np.random.rand(2, 2).astype(np.float32)
    result = _run(builder, o, 3, {i2: data})
    np.testing.assert_allclose(result, 2 * (const_data + data) + const_data.T, rtol=1e-6)


@pytest.mark.follows("test_copy_to_op_with_duplicate_inputs")
def test_copy_to_op_with_duplicate_inputs():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    o1 = builder.aiOnnx.add([i1, i1])
    builder.virtualGraph(o1, 0)
    o2 = builder.aiOnnx.mul([i1, i1])
    builder.virtualGraph(o2, 1)
    o3 = builder.aiOnnx.add([o1, o2])
    builder.virtualGraph(o3, 1)
    x = VALUES["b"]
    np.testing.assert_allclose(_run(builder, o3, 3, {i1: x}), 2 * x + x * x)
