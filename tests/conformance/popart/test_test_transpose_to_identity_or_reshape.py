"""graphcore/popart tests/integration/pattern_tests/test_transpose_to_identity_or_reshape.py:
two Transposes that undo each other become an Identity; Transposes around a Reshape that
moves data, or whose permutations do not cancel, stay (Cpu). The original skips its
`test_replace_with_reshape` (T70094)."""

import numpy as np
import pytest
from popart_ir_checks import ir_of, run_inference

import popart


def _count(session, word):
    return len([op for op in ir_of(session)["maingraph"] if word in op["type"]])


@pytest.mark.follows("test_replace_with_identity")
def test_replace_with_identity():
    d1 = np.random.randn(10, 20).astype(np.float32)
    builder = popart.Builder()
    d = builder.addInputTensor("FLOAT", d1.shape)
    o = builder.aiOnnx.transpose([builder.aiOnnx.transpose([d])])
    session, anchors = run_inference(builder, [o], {d: d1})
    assert _count(session, "Identity") > 0
    assert _count(session, "Transpose") < 1
    np.testing.assert_array_equal(anchors[o], d1)


@pytest.mark.follows("test_fail_due_to_non_trivial_reshape")
def test_fail_due_to_non_trivial_reshape():
    d1 = np.random.randn(10, 20).astype(np.float32)
    builder = popart.Builder()
    d = builder.addInputTensor("FLOAT", d1.shape)
    o = builder.aiOnnx.transpose([d], perm=(1, 0))
    o = builder.reshape_const(builder.aiOnnx, [o], (1, 5, 40))
    o = builder.aiOnnx.transpose([o], perm=(0, 2, 1))
    session, anchors = run_inference(builder, [o], {d: d1})
    assert _count(session, "Reshape") == 1
    assert _count(session, "Transpose") == 2
    np.testing.assert_array_equal(anchors[o], d1.T.reshape(1, 5, 40).transpose(0, 2, 1))


@pytest.mark.follows("test_fail_due_to_mismatch_permutation")
def test_fail_due_to_mismatch_permutation():
    d1 = np.random.randn(10, 20, 30).astype(np.float32)
    builder = popart.Builder()
    d = builder.addInputTensor("FLOAT", d1.shape)
    o = builder.aiOnnx.transpose([d], perm=(0, 2, 1))
    o = builder.aiOnnx.transpose([o], perm=(1, 2, 0))
    session, anchors = run_inference(builder, [o], {d: d1})
    assert _count(session, "Transpose") == 2
    np.testing.assert_array_equal(anchors[o], d1.transpose(0, 2, 1).transpose(1, 2, 0))
