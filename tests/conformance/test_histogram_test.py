"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/histogram_test.py`.

`ipu.ops.statistics_ops.histogram` and `histogram_update`: their checks of dtypes, ranks
and shapes (with the original's messages), and the counts of the original's cases compiled
for the IPU (a histogram, then updated twice with the same values: three times the counts).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.ops.statistics_ops import histogram, histogram_update

v1 = tf.compat.v1

_ONES_F32 = np.ones((3,), dtype=np.float32)
_ONES_I32 = np.ones((3,), dtype=np.int32)
_ROW_F32 = np.ones((1, 3), dtype=np.float32)


@pytest.mark.follows("testInvalidInputDtype")
def test_invalid_input_dtype(tf1_graph):
    with pytest.raises(ValueError, match="Only float16 and float32 types are supported"):
        histogram(_ONES_I32, _ONES_F32)


@pytest.mark.follows("testInvalidLevelsDtype")
def test_invalid_levels_dtype(tf1_graph):
    with pytest.raises(ValueError, match="Only float16 and float32 types are supported"):
        histogram(_ONES_F32, _ONES_I32)


@pytest.mark.follows("testInvalidInputRank")
def test_invalid_input_rank(tf1_graph):
    with pytest.raises(ValueError, match="histogram expects rank-1 tensor inputs."):
        histogram(_ROW_F32, _ONES_F32)


@pytest.mark.follows("testInvalidLevelsRank")
def test_invalid_levels_rank(tf1_graph):
    with pytest.raises(ValueError, match="histogram expects rank-1 tensor inputs."):
        histogram(_ONES_F32, _ROW_F32)


@pytest.mark.follows("testInvalidHistDtypeUpdate")
def test_invalid_hist_dtype_update(tf1_graph):
    with pytest.raises(ValueError, match="hist must be of float32 type"):
        histogram_update(_ONES_I32, _ONES_F32, _ONES_F32)


@pytest.mark.follows("testInvalidInputDtypeUpdate")
def test_invalid_input_dtype_update(tf1_graph):
    with pytest.raises(ValueError, match="Only float16 and float32 types are supported"):
        histogram_update(_ONES_F32, _ONES_I32, _ONES_F32)


@pytest.mark.follows("testInvalidLevelsDtypeUpdate")
def test_invalid_levels_dtype_update(tf1_graph):
    with pytest.raises(ValueError, match="Only float16 and float32 types are supported"):
        histogram_update(_ONES_F32, _ONES_F32, _ONES_I32)


@pytest.mark.follows("testInvalidHistRankUpdate")
def test_invalid_hist_rank_update(tf1_graph):
    with pytest.raises(ValueError, match="histogram_update expects rank-1 tensor inputs."):
        histogram_update(_ROW_F32, _ONES_F32, _ONES_F32)


@pytest.mark.follows("testInvalidInputRankUpdate")
def test_invalid_input_rank_update(tf1_graph):
    with pytest.raises(ValueError, match="histogram_update expects rank-1 tensor inputs."):
        histogram_update(_ONES_F32, _ROW_F32, _ONES_F32)


@pytest.mark.follows("testInvalidLevelsRankUpdate")
def test_invalid_levels_rank_update(tf1_graph):
    with pytest.raises(ValueError, match="histogram_update expects rank-1 tensor inputs."):
        histogram_update(_ONES_F32, _ONES_F32, _ROW_F32)


@pytest.mark.follows("testHistLevelsShapeMismatchUpdate")
def test_hist_levels_shape_mismatch_update(tf1_graph):
    with pytest.raises(ValueError, match="hist and levels shapes are incompatible"):
        histogram_update(_ONES_F32, _ONES_F32, _ONES_F32)


_TENTHS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
_SIGNED_TENTHS = [-0.1, 0.2, -0.3, 0.4, -0.5, 0.6, -0.7, 0.8, -0.9, 1.0]
_CASES = [
    # (inputs, levels, absolute_of_input, expected counts)
    (_TENTHS, [0.25, 0.5, 0.75, 1.0], False, [2, 2, 3, 2, 1]),
    ([0, 0, 0, 1, 2, 5, 6, 6, 0, 10], [5, 10], False, [6, 3, 1]),
    ([0, 0, 0], [-1, 1], False, [0, 3, 0]),
    (_SIGNED_TENTHS, [0.25, 0.5, 0.75, 1.0], True, [2, 2, 3, 2, 1]),
]
_NAMES = ["AllPositive", "AllPositiveZeroTen", "AllZero", "PositiveNegativeAbsOfInput"]
_PARAMS = [
    pytest.param(np.array(i, dtype), np.array(lv, dtype), a, np.array(e), id=f"{n}{suffix}")
    for dtype, suffix in ((np.float16, "F16"), (np.float32, "F32"))
    for n, (i, lv, a, e) in zip(_NAMES, _CASES, strict=True)
]


@pytest.fixture
def configured(tf1_graph):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


def _run_on_ipu(f, inputs, levels):
    with tf.device("cpu"):
        inputs_ph = v1.placeholder(inputs.dtype, inputs.shape)
        levels_ph = v1.placeholder(levels.dtype, levels.shape)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(f, inputs=[inputs_ph, levels_ph])
    with v1.Session() as sess:
        return sess.run(compiled, {inputs_ph: inputs, levels_ph: levels})[0]


@pytest.mark.follows("testMakeHistogram")
@pytest.mark.parametrize(("inputs", "levels", "absolute_of_input", "expected"), _PARAMS)
def test_make_histogram(configured, inputs, levels, absolute_of_input, expected):
    result = _run_on_ipu(lambda x, lv: histogram(x, lv, absolute_of_input), inputs, levels)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.follows("testUpdateHistogram")
@pytest.mark.parametrize(("inputs", "levels", "absolute_of_input", "expected"), _PARAMS)
def test_update_histogram(configured, inputs, levels, absolute_of_input, expected):
    def f(x, lv):
        hist = histogram(x, lv, absolute_of_input)
        hist = histogram_update(hist, x, lv, absolute_of_input)
        return histogram_update(hist, x, lv, absolute_of_input)

    np.testing.assert_array_equal(_run_on_ipu(f, inputs, levels), 3.0 * expected)
