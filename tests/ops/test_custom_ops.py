"""custom_ops: the codelet expression against numpy; user-library ops check, then refuse."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.errors import HardwareOnlyError
from openipu._src.ops import custom_ops

RNG = np.random.default_rng(4)


def my_custom_op(x, y, z):
    return x * x + y * z


def test_codelet_expression_spec_example():
    a, b, c = (RNG.normal(size=(3, 4)).astype(np.float32) for _ in range(3))
    expected = a * a + b * c
    np.testing.assert_allclose(
        custom_ops.codelet_expression_op(my_custom_op, a, b, c), expected, rtol=1e-6
    )
    jitted = tf.function(
        lambda *args: custom_ops.codelet_expression_op(my_custom_op, *args), jit_compile=True
    )(a, b, c)
    np.testing.assert_allclose(jitted, expected, rtol=1e-6)


def test_codelet_expression_broadcasts_to_the_inputs_shape():
    got = custom_ops.codelet_expression_op(
        lambda x, y: x * 0 + 2.0, np.ones((2, 3), np.float32), np.ones(3, np.float32)
    )
    np.testing.assert_array_equal(got, np.full((2, 3), 2.0))
    got = custom_ops.codelet_expression_op(
        lambda x, y: x, np.ones(3, np.float32), np.ones((2, 3), np.float32)
    )
    assert got.shape == (2, 3)


def test_codelet_expression_has_no_gradient():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = custom_ops.codelet_expression_op(lambda v: v * v, x)
    with pytest.raises(LookupError, match="No gradient defined for codelet_expression_op"):
        tape.gradient(y, x)


def test_codelet_expression_rejects_incompatible_shapes():
    with pytest.raises(ValueError, match=r"element-wise compatible, got shapes \[\[2\], \[3\]\]"):
        custom_ops.codelet_expression_op(lambda x, y: x + y, tf.ones([2]), tf.ones([3]))


@pytest.fixture
def library(tmp_path):
    path = tmp_path / "libcustom.so"
    path.write_bytes(b"\x7fELF")
    return str(path)


OUTS = {"output_types": [tf.float32], "output_shapes": [tf.TensorShape([2])]}


def test_cpu_user_operation_needs_the_ipu_runtime(library):
    with pytest.raises(
        HardwareOnlyError, match="cpu_user_operation needs real IPU hardware.*'Callback'"
    ):
        custom_ops.cpu_user_operation([tf.ones([2])], library, outs=OUTS)


def test_precompiled_user_op_needs_the_ipu(library):
    with pytest.raises(
        HardwareOnlyError, match="precompiled_user_op needs real IPU hardware.*'Build'"
    ):
        custom_ops.precompiled_user_op(
            [tf.ones([2])], library, outs=OUTS, inputs_with_gradients=[0]
        )


@pytest.mark.parametrize("op", [custom_ops.cpu_user_operation, custom_ops.precompiled_user_op])
def test_user_ops_check_their_arguments_first(op, library, tmp_path):
    missing = str(tmp_path / "missing.so")
    with pytest.raises(tf.errors.NotFoundError, match=f"library_path '{missing}' is not a file"):
        op([tf.ones([2])], missing, outs=OUTS)
    # The original passes **outs to its op: a missing key is a TypeError of that call.
    with pytest.raises(TypeError, match="outs must be a dict with the keys"):
        op([tf.ones([2])], library, outs={"output_types": [tf.float32]})
    with pytest.raises(ValueError, match="1 output types but 2 output shapes"):
        op(
            [tf.ones([2])],
            library,
            outs={"output_types": [tf.float32], "output_shapes": [[2], [3]]},
        )
    with pytest.raises(
        ValueError, match="inputs_with_gradients index 3 is out of range for 1 inputs"
    ):
        op([tf.ones([2])], library, outs=OUTS, inputs_with_gradients=[3])
    # The original's own check and message (custom_ops.py), made before anything else.
    with pytest.raises(ValueError, match="Expected attributes to be a 'str' type, but was"):
        op([tf.ones([2])], missing, outs=OUTS, attributes=5)
    with pytest.raises(
        ValueError, match="Expected gradient_attributes to be a 'str' type, but was"
    ):
        op([tf.ones([2])], library, outs=OUTS, gradient_attributes=["a"])


@pytest.mark.parametrize("op", [custom_ops.cpu_user_operation, custom_ops.precompiled_user_op])
def test_user_op_arguments_in_the_forms_the_original_accepts(op, library):
    """Unset attributes given as "" or 0, gradient indices as other numbers (the op's list(int)
    attribute takes int()) and an empty op_name pass the checks: only the hardware is missing."""
    with pytest.raises(HardwareOnlyError):
        op(
            [tf.ones([2]), tf.ones([2])],
            library,
            outs=OUTS,
            op_name="",
            inputs_with_gradients=[np.int64(1), 0.0],
            attributes="",
            gradient_attributes=0,
        )
