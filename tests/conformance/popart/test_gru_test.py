"""graphcore/popart tests/integration/operators_test/gru_test.py: ONNX GRU forward (with
and without biases, linear_before_reset either way, an initial state and sequence lengths)
and its gradients with respect to every input, against onnx.reference's GRU and central
differences of it (Cpu)."""

import numpy as np
import pytest
from popart_onnx_reference import check_against_onnx

D1 = np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0], [10.0, 11.0, 12.0]]]).astype(
    np.float32
)


def _rand(*shape):
    return np.random.rand(*shape).astype(np.float32)


def _summed(builder, outputs):
    """Y (squeezed) + Y_h, the original's training output."""
    y, y_h = outputs
    return [builder.aiOnnx.add([builder.aiOnnx.squeeze([y], []), y_h])]


@pytest.mark.follows("test_gru")
def test_gru(op_tester):
    d1 = np.random.randint(0, 20, size=(2, 2, 3)).astype(np.float32)
    op_tester.atol, op_tester.rtol = 1e-06, 1e-03
    check_against_onnx(
        op_tester,
        [d1, _rand(1, 21, 3), _rand(1, 21, 7)],
        lambda b, ids: b.aiOnnx.gru(ids, 2, clip=None),
    )


@pytest.mark.follows("test_gru_torch")
def test_gru_torch(op_tester):
    op_tester.atol = 1e-06
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    check_against_onnx(
        op_tester,
        [D1, _rand(1, 9, 3), _rand(1, 9, 3)],
        lambda b, ids: b.aiOnnx.gru(ids, 2, clip=None, linear_before_reset=1),
    )


@pytest.mark.follows("test_gru_torch_grad")
def test_gru_torch_grad(op_tester):
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.atol, op_tester.rtol = 1e-06, 1e-04
    check_against_onnx(
        op_tester,
        [D1, _rand(1, 9, 3), _rand(1, 9, 3)],
        lambda b, ids: _summed(b, b.aiOnnx.gru(ids, 2, clip=None)),
        train_inputs=[0, 1, 2],
    )


@pytest.mark.follows("test_gru_biases")
def test_gru_biases(op_tester):
    d1 = np.random.randint(0, 20, size=(2, 2, 3)).astype(np.float32)
    op_tester.atol, op_tester.rtol = 1e-06, 1e-03
    check_against_onnx(
        op_tester,
        [d1, _rand(1, 15, 3), _rand(1, 15, 5), _rand(1, 30)],
        lambda b, ids: b.aiOnnx.gru(ids, 2, clip=None),
    )


@pytest.mark.follows("test_gru_biases_torch")
def test_gru_biases_torch(op_tester):
    op_tester.atol = 1e-06
    check_against_onnx(
        op_tester,
        [D1, _rand(1, 9, 3), _rand(1, 9, 3), _rand(1, 18)],
        lambda b, ids: b.aiOnnx.gru(ids, 2, clip=None, linear_before_reset=1),
    )


def _with_initial_state(hidden):
    seq_lens = np.asarray([2, 2]).astype(np.int32)
    return [
        D1,
        _rand(1, 3 * hidden, 3),
        _rand(1, 3 * hidden, hidden),
        _rand(1, 6 * hidden),
        seq_lens,
        _rand(1, 2, hidden),
    ]


@pytest.mark.follows("test_gru_initial_hc")
def test_gru_initial_hc(op_tester):
    op_tester.atol, op_tester.rtol = 1e-06, 1e-05
    check_against_onnx(op_tester, _with_initial_state(5), lambda b, ids: b.aiOnnx.gru(ids, 2))


@pytest.mark.follows("test_gru_torch_grad_all_inputs")
def test_gru_torch_grad_all_inputs(op_tester):
    op_tester.atol, op_tester.rtol = 1e-06, 1e-04
    check_against_onnx(
        op_tester,
        _with_initial_state(2),
        lambda b, ids: _summed(b, b.aiOnnx.gru(ids, 2, linear_before_reset=1)),
        train_inputs=[0, 1, 2, 3, 5],
    )
