"""Scoping contexts (spec 21.3) and their error rules E2, E3."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.python import ipu


def _frontend_attributes(op) -> dict[str, str]:
    try:
        raw = op.get_attr("_XlaFrontendAttributes")
    except ValueError:
        return {}
    proto = xla_data_pb2.FrontendAttributes()
    proto.ParseFromString(raw)
    return dict(proto.map)


def test_frontend_attribute_marks_ops_and_nests(tf1_graph):
    with ipu.scopes.frontend_attribute("a", "1"):
        outer = tf.constant(1.0) + 1
        with ipu.scopes.frontend_attribute("b", "2"):
            inner = outer * 2
    after = inner - 1
    assert _frontend_attributes(outer.op) == {"a": "1"}
    assert _frontend_attributes(inner.op) == {"a": "1", "b": "2"}
    assert _frontend_attributes(after.op) == {}


def test_frontend_attribute_restore_to_applies_when_undefined_before(tf1_graph):
    with ipu.scopes.frontend_attribute("mode", "inner", restore_to="outer"):
        inside = tf.constant(1.0) + 1
    after = inside * 2
    assert _frontend_attributes(inside.op) == {"mode": "inner"}
    assert _frontend_attributes(after.op) == {"mode": "outer"}


def test_frontend_attribute_checks_types(tf1_graph):
    with pytest.raises(TypeError, match="attribute_value must be a string"):
        with ipu.scopes.frontend_attribute("a", 3):
            pass


def test_partials_type_sets_attribute_and_rejects_other_types(tf1_graph):
    with ipu.scopes.partials_type(np.float16):
        product = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))
    assert _frontend_attributes(product.op) == {"PARTIALS_TYPE": "float16"}
    with pytest.raises(ValueError, match="Only support float16, float32, provided int32"):
        with ipu.scopes.partials_type(np.int32):
            pass


def test_stochastic_rounding_sets_attribute(tf1_graph):
    with ipu.scopes.stochastic_rounding(True):
        on = tf.constant(1.0) + 1
    with ipu.scopes.stochastic_rounding(False):
        off = tf.constant(1.0) + 1
    assert _frontend_attributes(on.op) == {"STOCHASTIC_ROUNDING": "THREESTATE_ON"}
    assert _frontend_attributes(off.op) == {"STOCHASTIC_ROUNDING": "THREESTATE_OFF"}
    # The original takes any truth value (scopes.py: `ON if override else OFF`).
    with ipu.scopes.stochastic_rounding(1):
        truthy = tf.constant(1.0) + 1
    with ipu.scopes.stochastic_rounding(np.bool_(False)):
        falsy = tf.constant(1.0) + 1
    assert _frontend_attributes(truthy.op) == {"STOCHASTIC_ROUNDING": "THREESTATE_ON"}
    assert _frontend_attributes(falsy.op) == {"STOCHASTIC_ROUNDING": "THREESTATE_OFF"}


def test_ipu_shard_records_sharding(tf1_graph):
    with ipu.scopes.ipu_shard(1):
        value = tf.constant(1.0) + 1
    sharding = xla_data_pb2.OpSharding()
    sharding.ParseFromString(value.op.get_attr("_XlaSharding"))
    assert sharding.type == xla_data_pb2.OpSharding.MAXIMAL
    assert list(sharding.tile_assignment_devices) == [1]
    with ipu.scopes.ipu_shard(np.int64(1)):  # any integer, as the original's proto field
        numpy_index = tf.constant(1.0) + 1
    sharding.ParseFromString(numpy_index.op.get_attr("_XlaSharding"))
    assert list(sharding.tile_assignment_devices) == [1]
    with pytest.raises(ValueError, match="shard index must be an int >= 0"):
        with ipu.scopes.ipu_shard(-1):
            pass


def test_ipu_jit_scope_marks_ops_for_compilation(tf1_graph):
    with ipu.scopes.ipu_jit_scope("0"):
        value = tf.constant(1.0) + 1
    assert value.op.get_attr("_XlaCompile") is True
    assert value.op.get_attr("_XlaScope") == b"jit_scope_ipu_0"


def test_ipu_scope_places_on_the_ipus_host_device(ipu_system, tf1_graph):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        value = tf.constant(1.0) + 1
    assert value.device == ipu_system.device(0).host_device().replace("/device:", "/device:")


def test_ipu_scope_places_ops_on_another_device_as_the_original(ipu_system, tf1_graph):
    # The original's ipu_scope is ops.device(device) in a JIT scope, for any device.
    with ipu.scopes.ipu_scope("/device:CPU:0"):
        x = tf.constant([[1.0, 2.0]])
        y = tf.matmul(x, x, transpose_b=True)
    assert y.device.endswith("device:CPU:0")
    with tf.compat.v1.Session() as session:
        assert session.run(y).tolist() == [[5.0]]


def test_outside_compilation_scope_outside_a_compilation_raises(ipu_system, tf1_graph):
    # The original's message (tensorflow/python/ipu/scopes.py).
    with pytest.raises(
        ValueError, match="outside_compilation_scope is only allowed in XLA context"
    ):
        with ipu.scopes.outside_compilation_scope():
            pass


def test_outside_compilation_scope_runs_on_the_host(ipu_system, tf1_graph):
    """The spec's example: b on the IPU, c = b + 2 on the host, d = b + c on the IPU."""
    placed = {}

    def my_net(a):
        b = a * a
        with ipu.scopes.outside_compilation_scope():
            c = b + 2
            placed["c"] = c
        return b + c

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        (result,) = ipu.ipu_compiler.compile(my_net, [tf.constant(3.0)])
    assert placed["c"].device.endswith("CPU:0")
    assert placed["c"].op.get_attr("_xla_outside_compilation") == b"outside"
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        assert session.run(result) == 3.0 * 3.0 + (3.0 * 3.0 + 2)


def test_outside_compilation_scope_cannot_nest(ipu_system, tf1_graph):
    def my_net(a):
        with ipu.scopes.outside_compilation_scope():
            with ipu.scopes.outside_compilation_scope():
                return a

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        with pytest.raises(ValueError, match="Illegal nesting of outside_compilation_scope"):
            ipu.ipu_compiler.compile(my_net, [tf.constant(3.0)])


def test_outside_compilation_allows_host_only_ops(ipu_system):
    """A host-only op (a Python function) inside a compiled TF2 program."""

    @tf.function
    def program(x):
        def body(a):
            with ipu.scopes.outside_compilation_scope():
                host = tf.numpy_function(lambda v: v * 10, [a], tf.float32)
            return a + tf.reshape(host, [])

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            return ipu.ipu_compiler.compile(body, [x])

    assert program(tf.constant(2.0))[0].numpy() == 22.0
