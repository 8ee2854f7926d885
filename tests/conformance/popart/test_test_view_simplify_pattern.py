"""graphcore/popart tests/integration/pattern_tests/test_view_simplify_pattern.py: with
outlining on (ViewSimplify runs then), a Reshape or Identity of a Reshape or Identity is one
op producing the output, a Reshape unless both were Identities (Cpu)."""

import numpy as np
import pytest
from popart_ir_checks import ir_of, run_inference

import popart


def reshape(builder, x, outshape):
    return builder.reshape_const(builder.aiOnnx, [x], outshape)


def identity(builder, x, _):
    return builder.aiOnnx.identity([x])


@pytest.mark.follows("test_view_simplify")
@pytest.mark.parametrize(
    "a, b, target",
    [
        [reshape, reshape, "Reshape"],
        [identity, identity, "Identity"],
        [reshape, identity, "Reshape"],
        [identity, reshape, "Reshape"],
    ],
)
def test_view_simplify(a, b, target):
    d1 = np.random.randn(10, 20).astype(np.float32)
    builder = popart.Builder()
    d = builder.addInputTensor("FLOAT", d1.shape)
    o = a(builder, d, [1, *d1.shape])
    o = b(builder, o, [*reversed(d1.shape)])
    opts = popart.SessionOptions()
    opts.enableOutlining = True
    opts.outlineThreshold = 100000
    session, anchors = run_inference(builder, [o], {d: d1}, options=opts)

    def matches_target(op):
        return target in op["type"] and o in [t["name"] for t in op["outputs"]]

    assert len([op for op in ir_of(session)["maingraph"] if matches_target(op)]) == 1
    np.testing.assert_array_equal(anchors[o].flatten(), d1.flatten())
