"""normalization_ops against a numpy group normalisation written from the definition."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.ops import normalization_ops, tf1_variables

RNG = np.random.default_rng(7)


def numpy_group_norm(x, groups, channels_axis, epsilon, strided, gamma=None, beta=None):
    """Per entry and group: (x - mean) / sqrt(var + eps); channel c in group c % G if strided."""
    x = np.moveaxis(x.astype(np.float64), channels_axis, -1)
    channels = x.shape[-1]
    group_of = [c % groups if strided else c // (channels // groups) for c in range(channels)]
    out = np.empty_like(x)
    for n in range(x.shape[0]):
        for g in range(groups):
            members = [c for c in range(channels) if group_of[c] == g]
            values = x[n][..., members]
            out[n][..., members] = (values - values.mean()) / np.sqrt(values.var() + epsilon)
    if gamma is not None:
        out = out * gamma
    if beta is not None:
        out = out + beta
    return np.moveaxis(out, -1, channels_axis)


@pytest.fixture(autouse=True)
def _fresh_tf2_store():
    tf1_variables.forget_all()
    yield
    tf1_variables.forget_all()


@pytest.mark.parametrize("strided", [True, False])
@pytest.mark.parametrize(
    "shape, channels_axis, groups",
    [
        ((3, 8), -1, 2),
        ((2, 5, 6), -1, 3),
        ((2, 4, 4, 8), -1, 4),
        ((2, 6, 3, 3), 1, 2),
        ((2, 8, 5), 1, 4),
    ],
)
def test_group_norm_matches_numpy(shape, channels_axis, groups, strided):
    x = RNG.normal(size=shape).astype(np.float32) * 3 + 1
    got = normalization_ops.group_norm(
        x, groups=groups, channels_axis=channels_axis, strided_channel_grouping=strided
    )
    expected = numpy_group_norm(x, groups, channels_axis, 1.53e-05, strided)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_numpy_ints_for_groups_and_channels_axis():
    # The original only compares them, so NumPy ints work as ints.
    x = RNG.normal(size=(2, 6, 3, 3)).astype(np.float32)
    got = normalization_ops.group_norm(x, groups=np.int64(2), channels_axis=np.int32(1))
    expected = numpy_group_norm(x, 2, 1, 1.53e-05, True)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_strided_and_contiguous_grouping_differ():
    x = RNG.normal(size=(2, 3, 8)).astype(np.float32)
    strided = normalization_ops.group_norm(x, groups=2, strided_channel_grouping=True)
    contiguous = normalization_ops.group_norm(x, groups=2, strided_channel_grouping=False)
    assert not np.allclose(strided, contiguous)


def test_contiguous_group_norm_matches_keras_group_normalization():
    x = RNG.normal(size=(4, 5, 12)).astype(np.float32)
    reference = tf_keras.layers.GroupNormalization(groups=3, epsilon=1.53e-05)(x)
    got = normalization_ops.group_norm(x, groups=3, strided_channel_grouping=False)
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-5)


def test_instance_norm_matches_numpy_with_a_group_per_channel():
    x = RNG.normal(size=(2, 4, 4, 3)).astype(np.float32)
    got = normalization_ops.instance_norm(x, epsilon=1e-3)
    np.testing.assert_allclose(got, numpy_group_norm(x, 3, -1, 1e-3, True), rtol=1e-4, atol=1e-5)
    first = normalization_ops.instance_norm(np.moveaxis(x, -1, 1), channels_axis=1)
    np.testing.assert_allclose(
        first, np.moveaxis(numpy_group_norm(x, 3, -1, 1.53e-05, True), -1, 1), rtol=1e-4, atol=1e-5
    )


def test_layer_norm_normalises_over_spatial_and_channel_dimensions():
    x = RNG.normal(size=(2, 3, 3, 4)).astype(np.float32)
    got = normalization_ops.layer_norm(x)
    np.testing.assert_allclose(
        got, numpy_group_norm(x, 1, -1, 1.53e-05, True), rtol=1e-4, atol=1e-5
    )


def test_layer_norm_of_features_matches_keras_layer_normalization():
    x = RNG.normal(size=(6, 10)).astype(np.float32)
    reference = tf_keras.layers.LayerNormalization(epsilon=1.53e-05)(x)
    np.testing.assert_allclose(normalization_ops.layer_norm(x), reference, rtol=1e-4, atol=1e-5)


def test_param_initializers_set_beta_and_gamma():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    gamma = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    beta = np.array([0.5, -0.5, 1.0, 0.0], np.float32)
    got = normalization_ops.group_norm(
        x,
        groups=2,
        param_initializers={
            "gamma": tf.constant_initializer(gamma),
            "beta": tf.constant_initializer(beta),
        },
    )
    expected = numpy_group_norm(x, 2, -1, 1.53e-05, True, gamma=gamma, beta=beta)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_float16_inputs_keep_their_dtype():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float16)
    got = normalization_ops.group_norm(x, groups=2)
    assert got.dtype == tf.float16
    expected = numpy_group_norm(x.astype(np.float32), 2, -1, 1.53e-05, True)
    np.testing.assert_allclose(got.numpy().astype(np.float32), expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "op, kwargs",
    [
        (normalization_ops.group_norm, {"groups": 2}),
        (normalization_ops.group_norm, {"groups": 2, "strided_channel_grouping": False}),
        (normalization_ops.instance_norm, {}),
        (normalization_ops.layer_norm, {}),
    ],
)
def test_jit_matches_eager(op, kwargs):
    x = RNG.normal(size=(2, 5, 4)).astype(np.float32)
    eager = op(x, **kwargs)
    jitted = tf.function(lambda v: op(v, **kwargs), jit_compile=True)(x)
    np.testing.assert_allclose(jitted, eager, rtol=1e-5, atol=1e-6)


def test_gradients_match_keras_layer_normalization():
    x = tf.constant(RNG.normal(size=(4, 6)).astype(np.float32))
    reference_layer = tf_keras.layers.LayerNormalization(epsilon=1.53e-05)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = normalization_ops.layer_norm(x, scope="grad_check")
        reference = reference_layer(x)
        weights = tf.constant(RNG.normal(size=(4, 6)).astype(np.float32))
        ours_loss, reference_loss = (
            tf.reduce_sum(ours * weights),
            tf.reduce_sum(reference * weights),
        )
    np.testing.assert_allclose(
        tape.gradient(ours_loss, x), tape.gradient(reference_loss, x), rtol=1e-4, atol=1e-5
    )


# --- variables ---------------------------------------------------------------------------------


def _names(variables):
    return sorted(v.name for v in variables)


def test_tf1_graph_creates_beta_and_gamma_in_the_scope(tf1_graph):
    x = tf.compat.v1.placeholder(tf.float32, [2, 3, 4])
    y = normalization_ops.group_norm(x, groups=2)
    normalization_ops.layer_norm(x, scope="ln")
    normalization_ops.instance_norm(x, center=False, trainable=False)
    assert _names(tf.compat.v1.trainable_variables()) == [
        "GroupNorm/beta:0",
        "GroupNorm/gamma:0",
        "ln/beta:0",
        "ln/gamma:0",
    ]
    assert "InstanceNorm/gamma:0" in _names(tf.compat.v1.global_variables())
    model_variables = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.MODEL_VARIABLES)
    assert len(model_variables) == 5
    values = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        np.testing.assert_allclose(
            session.run(y, {x: values}),
            numpy_group_norm(values, 2, -1, 1.53e-05, True),
            rtol=1e-4,
            atol=1e-5,
        )


def test_tf1_graph_reuse_shares_and_missing_reuse_fails(tf1_graph):
    x = tf.compat.v1.placeholder(tf.float32, [2, 4])
    normalization_ops.group_norm(x, scope="shared")
    normalization_ops.group_norm(x, scope="shared", reuse=True)
    assert len(tf.compat.v1.global_variables()) == 2
    with pytest.raises(ValueError, match="shared/beta already exists"):
        normalization_ops.group_norm(x, scope="shared")
    with pytest.raises(ValueError, match="missing/beta does not exist"):
        normalization_ops.group_norm(x, scope="missing", reuse=True)


def test_tf1_graph_variables_collections(tf1_graph):
    x = tf.compat.v1.placeholder(tf.float32, [2, 4])
    normalization_ops.layer_norm(x, variables_collections={"beta": ["betas"]})
    normalization_ops.layer_norm(x, variables_collections=["everything"])
    assert _names(tf.compat.v1.get_collection("betas")) == ["LayerNorm/beta:0"]
    assert _names(tf.compat.v1.get_collection("everything")) == [
        "LayerNorm_1/beta:0",
        "LayerNorm_1/gamma:0",
    ]


def test_tf2_function_keeps_its_variables_across_calls_and_retraces():
    traces = []

    @tf.function
    def normalise(x):
        traces.append(1)
        return normalization_ops.group_norm(x, groups=2) + normalization_ops.layer_norm(x)

    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    first = normalise(x)
    normalise(x)
    normalise(x[:1])  # a retrace
    assert len(traces) >= 2
    assert sorted(tf1_variables._variables) == [  # noqa: SLF001
        "GroupNorm/beta",
        "GroupNorm/gamma",
        "LayerNorm/beta",
        "LayerNorm/gamma",
    ]
    expected = numpy_group_norm(x, 2, -1, 1.53e-05, True) + numpy_group_norm(
        x, 1, -1, 1.53e-05, True
    )
    np.testing.assert_allclose(first, expected, rtol=1e-4, atol=1e-5)


def test_tf2_function_trains_the_parameters():
    @tf.function
    def loss(x):
        return tf.reduce_sum(normalization_ops.group_norm(x, groups=2, scope="trained") * x)

    x = tf.constant(RNG.normal(size=(2, 3, 4)).astype(np.float32))
    loss(x)
    variables = tf1_variables._variables  # noqa: SLF001
    beta, gamma = variables["trained/beta"], variables["trained/gamma"]
    with tf.GradientTape() as tape:
        value = loss(x)
    beta_grad, gamma_grad = tape.gradient(value, [beta, gamma])
    normalized = numpy_group_norm(x.numpy(), 2, -1, 1.53e-05, True)
    np.testing.assert_allclose(beta_grad, x.numpy().sum(axis=(0, 1)), rtol=1e-4)
    np.testing.assert_allclose(gamma_grad, (normalized * x.numpy()).sum(axis=(0, 1)), rtol=1e-3)


def test_tf2_explicit_scope_shares_with_reuse_true():
    x = RNG.normal(size=(2, 4)).astype(np.float32)
    normalization_ops.group_norm(x, scope="explicit")
    normalization_ops.group_norm(x, scope="explicit", reuse=True)
    assert len(tf1_variables._variables) == 2  # noqa: SLF001
    with pytest.raises(ValueError, match="absent/beta does not exist"):
        normalization_ops.group_norm(x, scope="absent", reuse=True)


# --- errors (E51-E58) --------------------------------------------------------------------------


def _unknown_rank_call(op):
    traced = tf.function(op, input_signature=[tf.TensorSpec(None, tf.float32)])
    traced.get_concrete_function()


@pytest.mark.parametrize(
    "op",
    [normalization_ops.group_norm, normalization_ops.instance_norm, normalization_ops.layer_norm],
)
def test_undefined_rank_is_rejected(op):  # E51, E56, E58
    with pytest.raises(ValueError, match="undefined rank"):
        _unknown_rank_call(op)


@pytest.mark.parametrize(
    "op",
    [normalization_ops.group_norm, normalization_ops.instance_norm, normalization_ops.layer_norm],
)
def test_undefined_channels_are_rejected(op):  # E52, E57, E58
    traced = tf.function(op, input_signature=[tf.TensorSpec([2, 3, None], tf.float32)])
    with pytest.raises(
        ValueError, match=r"undefined channel dimension: -1\. .*dimension 2, shape \(2, 3, None\)"
    ):
        traced.get_concrete_function()


@pytest.mark.parametrize(
    "op",
    [normalization_ops.group_norm, normalization_ops.instance_norm, normalization_ops.layer_norm],
)
def test_channels_must_be_dimension_1_or_last(op):  # E53, E55
    with pytest.raises(ValueError, match="^Unsupported data format.*channels_axis 2"):
        op(tf.zeros([2, 3, 4, 5]), channels_axis=2)


def test_channels_axis_out_of_bounds():
    with pytest.raises(
        ValueError, match="^Axis is out of bounds.*channels_axis 3 is out of bounds for rank 3"
    ):
        normalization_ops.group_norm(tf.zeros([2, 3, 4]), channels_axis=3)


@pytest.mark.parametrize(
    "groups, message",
    [(3, "4 channels is not commensurate with 3 groups"), (8, "Invalid groups 8 for 4 channels")],
)
def test_groups_must_divide_channels(groups, message):  # E54
    with pytest.raises(ValueError, match=message):
        normalization_ops.group_norm(tf.zeros([2, 4]), groups=groups)


def test_groups_given_as_a_whole_float_work_as_in_the_original():
    # The original compares groups with the channels and hands int(groups) to the op.
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    got = normalization_ops.group_norm(x, groups=2.0, strided_channel_grouping=False)
    expected = numpy_group_norm(x, 2, -1, 1.53e-05, False)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="groups must be an int, got 'two'"):
        normalization_ops.group_norm(x, groups="two")


def test_tf2_default_names_count_across_loop_bodies_of_one_function():
    @tf.function
    def model(x):
        x = normalization_ops.group_norm(x, groups=2)
        return tf.while_loop(
            lambda i, v: i < 2,
            lambda i, v: (i + 1, normalization_ops.group_norm(v, groups=4)),
            [0, x],
        )[1]

    model(RNG.normal(size=(2, 8)).astype(np.float32))
    assert sorted(tf1_variables._variables) == [  # noqa: SLF001
        "GroupNorm/beta",
        "GroupNorm/gamma",
        "GroupNorm_1/beta",
        "GroupNorm_1/gamma",
    ]
