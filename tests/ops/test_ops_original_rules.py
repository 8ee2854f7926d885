"""User programs checking the ops' errors against the original's rules and words.

Each case is something the original (graphcore/tensorflow r2.6, tensorflow/python/ipu/ops)
accepts, or refuses with a given exception type and message.
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.ops import within_replica_ops

functional_ops = ipu.functional_ops
image_ops = ipu.image_ops
internal_ops = ipu.internal_ops
math_ops = ipu.math_ops
nn_ops = ipu.nn_ops

RNG = np.random.default_rng(7)


# --- internal_ops.fifo ---------------------------------------------------------------------------


def test_fifo_without_a_queue_takes_any_offload():
    # The original returns x for depth < 1 before making the op whose bool attribute offload is.
    x = tf.constant([1.0, 2.0])
    np.testing.assert_array_equal(internal_ops.fifo(x, 0, offload="yes"), [1.0, 2.0])


# --- functional_ops.outlined_function / nn_ops.multi_conv -----------------------------------------


def test_outlined_function_checks_its_bool_options_when_called_not_when_decorated():
    # Bool attributes of the original's Function op, made when the function is called.
    outlined = functional_ops.outlined_function(lambda x: x * 2.0, unique_sharding="yes")
    with pytest.raises(TypeError, match="unique_sharding must be a bool"):
        outlined(tf.ones([2]))
    fine = functional_ops.outlined_function(lambda x: x * 2.0, keep_input_layouts=False)
    np.testing.assert_array_equal(fine(tf.constant([1.0, 3.0])), [2.0, 6.0])


def test_multi_conv_checks_its_options_when_called_with_the_original_words():
    decorated = nn_ops.multi_conv(options="planType=serial")(lambda x: x + 1.0)
    with pytest.raises(
        TypeError,
        match=r"Expected the multi_conv `options` to be a `dict`, but got planType=serial instead",
    ):
        decorated(tf.ones([2]))
    ok = nn_ops.multi_conv(options={"planType": "serial"})(lambda x: x + 1.0)
    np.testing.assert_array_equal(ok(tf.constant([1.0])), [2.0])


# --- math_ops.serialized_matmul --------------------------------------------------------------------


def test_serialized_matmul_errors_are_the_original_s():
    a, b = tf.zeros([4, 6]), tf.zeros([6, 2])
    with pytest.raises(ValueError, match="serialization_factor has to be at least 1, but was 0"):
        math_ops.serialized_matmul(a, b, 0, "a_columns")
    with pytest.raises(ValueError, match="Expected tensor 'b' to have a minimum rank of 2"):
        math_ops.serialized_matmul(a, tf.zeros([6]), 1, "a_columns")
    with pytest.raises(
        ValueError,
        match="Invalid serialization_dimension=rows, expected one of: 'a_columns', "
        "'a_rows_b_columns', 'b_rows'.",
    ):
        math_ops.serialized_matmul(a, b, 1, "rows")
    with pytest.raises(
        ValueError,
        match=r"Expected the number of columns in 'a' \(6\) to match the number of rows in "
        r"'b' \(5\)",
    ):
        math_ops.serialized_matmul(a, tf.zeros([5, 2]), 1, "a_rows_b_columns")
    for dimension, words in (
        ("a_columns", r"columns dimension of 'a' \(4\)"),
        ("a_rows_b_columns", r"rows dimension of 'a' \(6\)"),
        ("b_rows", r"rows dimension of 'b' \(2\)"),
    ):
        with pytest.raises(
            ValueError, match=r"Expected 'serialization_factor' \(5\) to divide the " + words
        ):
            math_ops.serialized_matmul(a, b, 5, dimension)


def test_serialized_matmul_checks_the_factor_before_the_dimension_as_the_original():
    with pytest.raises(ValueError, match="serialization_factor has to be at least 1"):
        math_ops.serialized_matmul(tf.zeros([2, 2]), tf.zeros([2, 2]), 0, "nonsense")


@pytest.mark.parametrize("dimension", ["a_columns", "a_rows_b_columns", "b_rows"])
def test_serialized_matmul_still_multiplies(dimension):
    a = RNG.normal(size=(4, 6)).astype(np.float32)
    b = RNG.normal(size=(6, 2)).astype(np.float32)
    got = math_ops.serialized_matmul(a, b, 2, dimension)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-6)


# --- within_replica_ops ----------------------------------------------------------------------------


@pytest.mark.parametrize("function", ["all_reduce", "reduce_scatter"])
def test_within_replica_reductions_refuse_mixed_ranks_as_the_original(function):
    # The original's _validate_inputs checks one rank for every op, before it reshapes scalars.
    with pytest.raises(ValueError, match="Expected tensors to all be of the same rank."):
        getattr(within_replica_ops, function)(
            [tf.constant(1.0), tf.constant([2.0, 3.0])], "COLLECTIVE_OP_ADD"
        )


def test_within_replica_messages_start_with_the_original_s():
    with pytest.raises(ValueError, match="Expected tensors to all be of the same type."):
        within_replica_ops.all_gather([tf.ones([2]), tf.ones([2], tf.int32)])
    shard = tf.ones([2])
    with pytest.raises(ValueError, match="input_shards should not contain any duplicate entries."):
        within_replica_ops.all_reduce([shard, shard], "COLLECTIVE_OP_ADD")
    with pytest.raises(
        ValueError,
        match=r"Expecting tensor dimensions to all have the same sizes, except for dim 1, but got "
        r"shapes \[2, 1\] and \[3, 1\] for tensors 0 and 1",
    ):
        within_replica_ops.all_gather([tf.ones([2, 1]), tf.ones([3, 1])], axis=1)


def test_within_replica_scalars_still_reduce():
    got = within_replica_ops.all_reduce([tf.constant(1.0), tf.constant(2.0)], "COLLECTIVE_OP_ADD")
    for shard in got:
        np.testing.assert_array_equal(shard, [3.0])


# --- image_ops.normalise_image ---------------------------------------------------------------------


def test_normalise_image_dtype_error_is_the_original_s():
    with pytest.raises(
        TypeError,
        match="The input `image` to `normalise_image` must be either float16, float32 or uint8.",
    ):
        image_ops.normalise_image(tf.ones([2, 3], tf.int32), [0.0] * 3, [1.0] * 3)


def test_sequence_slice_refuses_a_src_tensor_of_another_type_as_the_ops_type_attribute():
    dst = tf.zeros([2, 3], tf.float32)
    src = tf.ones([2, 3], tf.float16)
    counts = tf.constant([1], tf.int32)
    starts = tf.constant([0], tf.int32)
    with pytest.raises(TypeError, match="Input 'src' of 'SequenceSlice' Op has type float16"):
        ipu.slicing_ops.sequence_slice(dst, src, counts, starts, starts, False)
    # Values that are not tensors convert to dst's type, as TensorFlow's op builder does.
    result = ipu.slicing_ops.sequence_slice(
        dst, np.ones([2, 3], np.float64), counts, starts, starts, False
    )
    np.testing.assert_array_equal(result, [[1, 1, 1], [0, 0, 0]])


# --- gen_popops_ops / gen_poputil_ops: the kernels' errors -----------------------------------------


def test_multi_update_add_scale_must_be_a_scalar_in_the_kernel_s_words():
    # kernels/popops/multi_slice.cc: InvalidArgument("scale must be a scalar, but got: ", ...).
    from tensorflow.compiler.plugin.poplar.ops import gen_popops_ops

    table = tf.zeros([4, 2])
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"^scale must be a scalar, but got: \[2\]$"
    ):
        gen_popops_ops.ipu_multi_update_add(
            table, indices=tf.constant([1], tf.int32), updates=tf.ones([1, 2]), scale=[1.0, 2.0]
        )


def test_stateful_gradient_accumulate_needs_a_mini_batch_in_the_kernel_s_words():
    # kernels/poputil/stateful_gradient_accumulate.cc: FailedPrecondition.
    from tensorflow.compiler.plugin.poplar.ops import gen_poputil_ops

    with pytest.raises(
        tf.errors.FailedPreconditionError, match=r"^num_mini_batches needs to be at least 1\.$"
    ):
        gen_poputil_ops.ipu_stateful_gradient_accumulate(tf.ones([2]), num_mini_batches=0)


# --- embedding_ops.HostEmbedding -------------------------------------------------------------------


def test_host_embedding_unknown_partition_strategy_in_the_original_s_words():
    # embedding_ops.py: ValueError("Unknown partition strategy " + str(partition_strategy)).
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"^Unknown partition strategy ROWS"):
            ipu.embedding_ops.HostEmbedding("e", tf.zeros([2, 2]), partition_strategy="ROWS")


# --- popfloat_cast_to_gfloat: sr_density is only read by stochastic rounding ---------------------


def test_gfloat_cast_ignores_the_sr_density_of_other_round_modes():
    # The original's kernel (kernels/popfloat/cast_to_gfloat.cc) parses sr_density without
    # checking the parse; only the SR round mode uses it.
    from tensorflow.python.ipu.ops.experimental import popfloat_cast_to_gfloat as gf

    half = gf.GenericFloat(man=10, exp=5, bias=15)
    x = np.array([1.0, -2.5, 3.140625, 65504.0], np.float32)
    out = half.cast_native_to_gfloat(tf.constant(x), round_mode="RN", sr_density="Gaussian")
    np.testing.assert_array_equal(
        np.asarray(out, np.float32), x.astype(np.float16).astype(np.float32)
    )
