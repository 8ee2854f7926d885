"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/floating_point_control_bits_test.py`.

The IPU's floating-point behaviour under `IPUConfig.floating_point_behaviour`, on float16
programs compiled for the IPU: what an invalid operation (NaN cast to int32), a division
by zero and an overflow give with the exceptions off (the chip's values: the smallest
int32, NaN, the largest float16 or NaN with `nanoo`), and that each raises ("Tiles in
excepted state") with its exception on. The stochastic rounding scenarios need the
IPU's stochastic rounding, which the emulated IPUs do not have.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1


@pytest.fixture
def configure(tf1_graph):
    def configure_system(inv=False, div0=False, oflo=False, nanoo=False):
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = 1
        config.floating_point_behaviour.inv = inv
        config.floating_point_behaviour.div0 = div0
        config.floating_point_behaviour.oflo = oflo
        config.floating_point_behaviour.nanoo = nanoo
        config.configure_ipu_system()

    yield configure_system
    ipu.config.reset_ipu_configuration()


def _run(model, values):
    placeholders = [v1.placeholder(np.float16, [len(v)]) for v in values]
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(model, inputs=placeholders)
    with v1.Session() as sess:
        return sess.run(r, dict(zip(placeholders, values, strict=True)))


def _invalid_operation():
    return _run(lambda x: tf.cast(x, dtype=np.int32), [[np.nan]])


def _division_by_zero():
    return _run(lambda x, y: x / y, [[10000.0], [0.0]])


def _overflow():
    return _run(lambda x, y: x * y, [[10000.0], [10000.0]])


@pytest.mark.follows("test_invalid_operation")
def test_invalid_operation(configure):
    configure()
    assert _invalid_operation() == [-2147483648]


@pytest.mark.follows("test_invalid_operation_exception")
def test_invalid_operation_exception(configure):
    configure(inv=True)
    with pytest.raises(Exception, match="Tiles in excepted state"):
        _invalid_operation()


@pytest.mark.follows("test_division_by_zero")
def test_division_by_zero(configure):
    configure()
    assert np.isnan(_division_by_zero())


@pytest.mark.follows("test_division_by_zero_exception")
def test_division_by_zero_exception(configure):
    configure(div0=True)
    with pytest.raises(Exception, match="Tiles in excepted state"):
        _division_by_zero()


@pytest.mark.follows("test_overflow")
def test_overflow(configure):
    configure()
    assert _overflow() == np.array([65500.0], dtype=np.float16)


@pytest.mark.follows("test_overflow_exception")
def test_overflow_exception(configure):
    configure(oflo=True)
    with pytest.raises(Exception, match="Tiles in excepted state"):
        _overflow()


@pytest.mark.follows("test_nan_overflow")
def test_nan_overflow(configure):
    configure()
    assert _overflow() == np.array([65500.0], dtype=np.float16)


@pytest.mark.follows("test_nan_overflow_enabled")
def test_nan_overflow_enabled(configure):
    configure(nanoo=True)
    assert np.isnan(_overflow())


@pytest.mark.follows("test_stochastic_rounding")
def test_stochastic_rounding(configure):
    # Stochastic rounding off (the default): 1 + 0.001 rounds to nearest, the same every time.
    configure()
    out = _run(lambda x, y: x + y, [np.full([4096], 1), np.full([4096], 1e-3)])
    hist = np.histogram(out, bins=2)[0]
    assert hist[0] == 0 and hist[1] == 4096
    np.testing.assert_array_equal(out[0], np.float16(1) + np.float16(1e-3))
