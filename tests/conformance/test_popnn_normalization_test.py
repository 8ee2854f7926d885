"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/popnn_normalization_test.py`.

`ipu.normalization_ops` group, layer and instance norms in TF1 graphs: their checks of
the inputs (with the original's messages), the variables they create (names, reuse), and
that their outputs have zero mean and unit variance over each group (the original's three
test classes share their scenario names; each test here runs one norm).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import function
from tensorflow.python.ipu import normalization_ops

v1 = tf.compat.v1

GROUP, LAYER, INSTANCE = "group", "layer", "instance"
_OPS = {
    GROUP: normalization_ops.group_norm,
    LAYER: normalization_ops.layer_norm,
    INSTANCE: normalization_ops.instance_norm,
}
_SCOPES = {GROUP: "GroupNorm", LAYER: "LayerNorm", INSTANCE: "InstanceNorm"}
_ALL = pytest.mark.parametrize("norm", [GROUP, LAYER, INSTANCE])


def _get_variables(given_name):
    return v1.get_collection(v1.GraphKeys.GLOBAL_VARIABLES, f".*/{given_name}:|^{given_name}:")


def _norm(norm, inputs, **kwargs):
    if norm == GROUP and "groups" not in kwargs:
        kwargs["groups"] = 2
    return _OPS[norm](inputs, **kwargs)


@pytest.mark.follows("testInvalidGroupSize")
def test_invalid_group_size(tf1_graph):
    inputs = v1.placeholder(tf.float32, shape=(5, 2, 10, 10))
    with pytest.raises(ValueError, match="Invalid groups 10 for 2 channels."):
        normalization_ops.group_norm(inputs, groups=10, channels_axis=-3)


@pytest.mark.follows("testBadCommensurateGroup")
def test_bad_commensurate_group(tf1_graph):
    inputs = v1.placeholder(tf.float32, shape=(5, 4, 10, 10))
    with pytest.raises(ValueError, match="4 channels is not commensurate with 3 groups."):
        normalization_ops.group_norm(inputs, groups=3, channels_axis=-3)


@pytest.mark.follows("testAxisIsBad")
@_ALL
def test_axis_is_bad(tf1_graph, norm):
    inputs = v1.placeholder(tf.float32, shape=(1, 2, 4, 5))
    with pytest.raises(ValueError, match="Axis is out of bounds."):
        _norm(norm, inputs, channels_axis=5)


@pytest.mark.follows("testUnknownShape")
@_ALL
def test_unknown_shape(tf1_graph, norm):
    with pytest.raises(ValueError, match="undefined rank"):
        _norm(norm, v1.placeholder(tf.float32))


@pytest.mark.follows("testParamsShapeNotFullyDefinedChannelsAxis")
@_ALL
def test_params_shape_not_fully_defined_channels_axis(tf1_graph, norm):
    inputs = v1.placeholder(tf.float32, shape=(1, 3, 4, None))
    with pytest.raises(ValueError, match="undefined channel dimension"):
        _norm(norm, inputs, channels_axis=-1)


@pytest.mark.follows("testCreateOp")
@_ALL
def test_create_op(tf1_graph, norm):
    channels = 8 if norm == GROUP else 2
    images = v1.random_uniform((5, 3, 3, channels), seed=1)
    output = _norm(norm, images, channels_axis=-1, **({"groups": 4} if norm == GROUP else {}))
    assert output.shape.as_list() == [5, 3, 3, channels]


@pytest.mark.follows("testCreateOpNoScaleCenter")
@_ALL
def test_create_op_no_scale_center(tf1_graph, norm):
    channels, extra = (21, {"groups": 7}) if norm == GROUP else (3, {})
    images = v1.random_uniform((5, 3, 3, channels), dtype=tf.float32, seed=1)
    output = _norm(norm, images, center=False, scale=False, **extra)
    assert output.shape.as_list() == [5, 3, 3, channels]
    assert _get_variables("beta") == []
    assert _get_variables("gamma") == []


def _check_variables(norm, images, channels_axis):
    extra = {"groups": 4} if norm == GROUP else {}
    _norm(norm, images, channels_axis=channels_axis, center=True, scale=True, **extra)
    assert _get_variables("beta")[0].op.name == f"{_SCOPES[norm]}/beta"
    assert _get_variables("gamma")[0].op.name == f"{_SCOPES[norm]}/gamma"


@pytest.mark.follows("testCreateVariables_NHWC")
@_ALL
def test_create_variables_nhwc(tf1_graph, norm):
    _check_variables(norm, v1.random_uniform((5, 3, 3, 8), seed=1), -1)


@pytest.mark.follows("testCreateVariables_NCHW")
@_ALL
def test_create_variables_nchw(tf1_graph, norm):
    channels = 8 if norm == GROUP else 2
    _check_variables(norm, v1.random_uniform((5, channels, 3, 3), seed=1), -3)


@pytest.mark.follows("testReuseVariables")
@_ALL
def test_reuse_variables(tf1_graph, norm):
    images = v1.random_uniform((5, 3, 3, 4), seed=1)
    _norm(norm, images, scale=True, scope="IN")
    _norm(norm, images, scale=True, scope="IN", reuse=True)
    assert len(_get_variables("beta")) == 1
    assert len(_get_variables("gamma")) == 1


@pytest.mark.follows("testValueCorrectWithReuseVars")
@_ALL
def test_value_correct_with_reuse_vars(tf1_graph, norm):
    images = v1.random_uniform((10, 3, 3, 4), seed=1)
    output_train = _norm(norm, images, scope="IN")
    output_eval = _norm(norm, images, scope="IN", reuse=True)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        train_np, eval_np = sess.run([output_train, output_eval])
    np.testing.assert_allclose(train_np, eval_np, rtol=1e-6)


def _check_output(norm, input_shape, channels_axis, reduction_axes, groups=2, tol=1e-1):
    """Each group of each example has mean 0 and variance 1 (the original's check: layer
    norm is one group, instance norm one group per channel; Popnn's groups are strided)."""
    rank = len(input_shape)
    channels_axis %= rank
    channels = input_shape[channels_axis]
    groups = {GROUP: groups, LAYER: 1, INSTANCE: channels}[norm]
    group_size = channels // groups
    reduced_axes = [channels_axis + 1] + [
        a % rank if a % rank < channels_axis else a % rank + 1 for a in reduction_axes
    ]
    outputs_shape = (
        input_shape[:channels_axis] + [groups, group_size] + input_shape[channels_axis + 1 :]
    )
    reduced_shape = [a for i, a in enumerate(outputs_shape) if i not in reduced_axes]

    inputs = v1.random_normal(input_shape, seed=0) + 1.0
    extra = {"groups": groups} if norm == GROUP else {}
    output_op = _OPS[norm](
        inputs, center=False, scale=False, channels_axis=channels_axis, training=True, **extra
    )
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        outputs = sess.run(output_op)
    assert not np.isnan(outputs).any()
    outputs = np.swapaxes(outputs, 0, channels_axis)
    reshuffled = np.empty(outputs.shape, outputs.dtype)
    for from_idx in range(channels):
        reshuffled[(from_idx % groups) * group_size + from_idx // groups] = outputs[from_idx]
    outputs = np.reshape(np.swapaxes(reshuffled, 0, channels_axis), outputs_shape)
    mean = np.mean(outputs, axis=tuple(reduced_axes), dtype=np.float32)
    var = np.var(outputs, axis=tuple(reduced_axes), dtype=np.float32)
    np.testing.assert_allclose(mean, np.zeros(reduced_shape), rtol=tol, atol=tol)
    np.testing.assert_allclose(var, np.ones(reduced_shape), rtol=tol, atol=tol)


@pytest.mark.follows("testOutput4D_NHWC")
@_ALL
def test_output_4d_nhwc(tf1_graph, norm):
    _check_output(norm, [10, 10, 10, 30], 3, [1, 2])
    _check_output(norm, [10, 10, 10, 30], -1, [-3, -2])


@pytest.mark.follows("testOutput3D_NHWC")
@_ALL
def test_output_3d_nhwc(tf1_graph, norm):
    _check_output(norm, [10, 10, 30], 2, [0, 1])
    _check_output(norm, [10, 10, 30], -1, [-3, -2])


@pytest.mark.follows("testOutput4D_NCHW")
@_ALL
def test_output_4d_nchw(tf1_graph, norm):
    _check_output(norm, [10, 10, 10, 30], 1, [2, 3])
    _check_output(norm, [10, 10, 10, 30], -3, [-2, -1])


@pytest.mark.follows("testOutput3D_NCHW")
@_ALL
def test_output_3d_nchw(tf1_graph, norm):
    _check_output(norm, [10, 10, 30], 1, [0, 2])
    _check_output(norm, [10, 10, 30], -2, [-3, -1])


@pytest.mark.follows("testOutput2D_NC")
@pytest.mark.parametrize("norm", [GROUP, LAYER])
def test_output_2d_nc(tf1_graph, norm):
    _check_output(norm, [10, 7 * 100], 1, [], groups=7)


@pytest.mark.follows("testOutput5D_NCXXX")
@_ALL
def test_output_5d_ncxxx(tf1_graph, norm):
    _check_output(norm, [4, 4, 4, 10, 4], 1, [2, 3, 4])


@pytest.mark.follows("testDefunInput")
def test_defun_input(tf1_graph):
    shape = [10, 10, 10, 30]

    @function.Defun()
    def f():
        return tf.ones(shape)

    inputs = f()
    inputs.set_shape(shape)
    output_op = normalization_ops.group_norm(
        inputs, groups=5, center=False, scale=False, channels_axis=-1, training=True
    )
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        outputs = sess.run(output_op)
    np.testing.assert_allclose(outputs, np.zeros(shape))
