"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/frontend_attributes_test.py`.

`ipu.scopes.frontend_attribute` records XLA frontend attributes (the
`FRONTEND_ATTRIBUTES_NAME` attribute, an `xla_data_pb2.FrontendAttributes`) on the
operations built inside it: nested scopes add or override names and restore them on
exit; `stochastic_rounding` records the STOCHASTIC_ROUNDING three-state, "undefined"
for operations built after its outermost scope; `partials_type` refuses other types
than float16 and float32 with the original's message. The original builds its own test
operation ("FloatOutput"); placeholders serve here.
"""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow.compat import v1
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.python import ipu

SR = "STOCHASTIC_ROUNDING"


def _attributes(op):
    try:
        value = op.get_attr(ipu.scopes.FRONTEND_ATTRIBUTES_NAME)
    except ValueError:
        return None
    attributes = xla_data_pb2.FrontendAttributes()
    attributes.ParseFromString(value)
    return dict(attributes.map)


def _op(name):
    return v1.placeholder(np.float32, [], name=name).op


@pytest.mark.follows("testSimpleSingleAttribute")
def test_simple_single_attribute(tf1_graph):
    with v1.device("/device:IPU:0"):
        op1 = _op("myop1")
        with ipu.scopes.frontend_attribute("attr_a", "a"):
            op2 = _op("myop2")
    assert _attributes(op1) is None
    assert _attributes(op2) == {"attr_a": "a"}


@pytest.mark.follows("testSimpleMultipleAttributes")
def test_simple_multiple_attributes(tf1_graph):
    with v1.device("/device:IPU:0"):
        op1 = _op("myop1")
        with ipu.scopes.frontend_attribute("attr_a", "a"):
            op2 = _op("myop2")
            with ipu.scopes.frontend_attribute("attr_b", "b"):
                op3 = _op("myop3")
    assert _attributes(op1) is None
    assert _attributes(op2) == {"attr_a": "a"}
    assert _attributes(op3) == {"attr_a": "a", "attr_b": "b"}


@pytest.mark.follows("testSingleAttributeWithScopes")
def test_single_attribute_with_scopes(tf1_graph):
    with v1.device("/device:IPU:0"):
        with ipu.scopes.frontend_attribute("attr_a", "a"):
            op1 = _op("myop1")
            with ipu.scopes.frontend_attribute("attr_a", "c"):
                op2 = _op("myop2")
            op3 = _op("myop3")
        op4 = _op("myop4")
    assert _attributes(op1) == {"attr_a": "a"}
    assert _attributes(op2) == {"attr_a": "c"}
    assert _attributes(op3) == {"attr_a": "a"}
    assert _attributes(op4) is None


@pytest.mark.follows("testMultipleAttributesWithScopes")
def test_multiple_attributes_with_scopes(tf1_graph):
    with v1.device("/device:IPU:0"):
        with ipu.scopes.frontend_attribute("attr_a", "a"):
            op1 = _op("myop1")
            with ipu.scopes.frontend_attribute("attr_a", "c"):
                with ipu.scopes.frontend_attribute("attr_b", "b"):
                    op2 = _op("myop2")
            op3 = _op("myop3")
        op4 = _op("myop4")
    assert _attributes(op1) == {"attr_a": "a"}
    assert _attributes(op2) == {"attr_a": "c", "attr_b": "b"}
    assert _attributes(op3) == {"attr_a": "a"}
    assert _attributes(op4) is None


@pytest.mark.follows("testStochasticRounding")
def test_stochastic_rounding(tf1_graph):
    with v1.device("/device:IPU:0"):
        with ipu.scopes.stochastic_rounding(False):
            with ipu.scopes.stochastic_rounding(True):
                op1 = _op("myop1")
                with ipu.scopes.stochastic_rounding(False):
                    with ipu.scopes.frontend_attribute("attr_b", "b"):
                        op2 = _op("myop2")
                op3 = _op("myop3")
            op4 = _op("myop4")
        op5 = _op("myop5")
    assert _attributes(op1) == {SR: "THREESTATE_ON"}
    assert _attributes(op2) == {SR: "THREESTATE_OFF", "attr_b": "b"}
    assert _attributes(op3) == {SR: "THREESTATE_ON"}
    assert _attributes(op4) == {SR: "THREESTATE_OFF"}
    assert _attributes(op5) == {SR: "THREESTATE_UNDEFINED"}


@pytest.mark.follows("testUnsupportedPartialsType")
def test_unsupported_partials_type():
    with pytest.raises(ValueError, match="Only support float16, float32, provided float64"):
        with ipu.scopes.partials_type(np.float64):
            pass
