"""graphcore/popart tests/integration/codelet_tests/codelet_test.py: a session whose
`SessionOptions.customCodelets` names a C++ codelet file (a vertex the model does not use)
prepares and runs; the model's fp16 add gives its sum. The original runs it on an IPU
Model; here on one (no Poplar compiles the codelet: the emulation runs no vertices)."""

import numpy as np
import pytest

import popart

VERTEX_SOURCE = """
#include <poplar/Vertex.hpp>
using namespace poplar;
namespace testops {
template <typename T> class TestVertex : public Vertex {
public:
  Output<Vector<T, VectorLayout::ONE_PTR>> out;
  int size;
  bool compute() { for (int i = 0; i < size; ++i) out[i] = static_cast<T>(1); return true; }
};
}
"""


@pytest.mark.follows("test_codelet")
def test_codelet(tmp_path):
    codelet = tmp_path / "test_vertex.cpp"
    codelet.write_text(VERTEX_SOURCE)
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT16", [2])
    i1, i2 = builder.addInputTensor(shape), builder.addInputTensor(shape)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    opts = popart.SessionOptions()
    opts.customCodelets = [str(codelet)]
    device = popart.DeviceManager().createIpuModelDevice({"tilesPerIPU": 4})
    with device:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
            userOptions=opts,
            deviceInfo=device,
        )
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        inputs = {i1: np.array([1.0, 3.0], np.float16), i2: np.array([7.0, 8.0], np.float16)}
        session.run(popart.PyStepIO(inputs, anchors))
    np.testing.assert_array_equal(anchors[o], np.array([8.0, 11.0], np.float16))
