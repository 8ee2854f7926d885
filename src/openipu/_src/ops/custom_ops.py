"""User operations (`ipu.custom_ops`).

`codelet_expression_op` is an element-wise expression written in Python, so
it runs here as TensorFlow operations. The two user-library operations load
compiled code whose calling convention the specification does not give
(Poplar graph builders and host callbacks taking C++ containers): their
arguments are checked, then they raise `HardwareOnlyError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import tensorflow as tf

from openipu._src.errors import HardwareOnlyError
from openipu._src.int_like import as_attr_int


def codelet_expression_op(vertex_expression: Callable, *args) -> tf.Tensor:
    """Applies the element-wise expression `vertex_expression(*args)`.

    Like the IPU's fused expression, it has no gradient: differentiating
    through it raises `LookupError`.
    """
    if not callable(vertex_expression):
        raise TypeError(
            f"codelet_expression_op: vertex_expression must be a function, got {vertex_expression!r}"
        )
    if not args:
        raise ValueError("codelet_expression_op: at least one input tensor is needed")
    with tf.name_scope("codelet_expression_op"):
        inputs = [tf.convert_to_tensor(a) for a in args]
        shape = inputs[0].shape
        for tensor in inputs[1:]:
            try:
                shape = tf.broadcast_static_shape(shape, tensor.shape)
            except ValueError:
                raise ValueError(
                    "codelet_expression_op: the inputs must be element-wise compatible, got "
                    f"shapes {[t.shape.as_list() for t in inputs]}"
                ) from None
        return _without_gradient(vertex_expression, inputs)


def _without_gradient(expression: Callable, inputs: list[tf.Tensor]) -> tf.Tensor:
    @tf.custom_gradient
    def expression_op(*tensors):
        result = tf.convert_to_tensor(expression(*tensors))
        dynamic_shape = tf.shape(tensors[0])
        for tensor in tensors[1:]:
            dynamic_shape = tf.broadcast_dynamic_shape(dynamic_shape, tf.shape(tensor))
        result = tf.broadcast_to(result, dynamic_shape)

        def gradient(*_):
            raise LookupError(
                "No gradient defined for codelet_expression_op: the IPU's fused element-wise "
                "expressions cannot be used for training"
            )

        return result, gradient

    return expression_op(*inputs)


def cpu_user_operation(
    inputs,
    library_path: str,
    outs: dict | None = None,
    name: str = "UserOp",
    op_name: str = "Callback",
    separate_gradients: bool = False,
    inputs_with_gradients=None,
    attributes: str | None = None,
    gradient_attributes: str | None = None,
):
    """Calls a host function from a shared library (needs the IPU runtime's C++ calling convention)."""
    _check_user_op_arguments(
        "cpu_user_operation",
        inputs,
        library_path,
        outs,
        op_name,
        inputs_with_gradients,
        attributes,
        gradient_attributes,
    )
    raise HardwareOnlyError(
        "custom_ops.cpu_user_operation",
        f"calling {op_name!r} in {library_path!r} uses the IPU runtime's C++ host-callback "
        "interface, which openipu does not provide",
    )


def precompiled_user_op(
    inputs,
    library_path: str,
    gp_path: str = "",
    outs: dict | None = None,
    name: str = "UserOp",
    op_name: str = "Build",
    separate_gradients: bool = False,
    inputs_with_gradients=None,
    attributes: str | None = None,
    gradient_attributes: str | None = None,
):
    """Adds a Poplar graph built by a shared library (Poplar code cannot run on an emulated IPU)."""
    _check_user_op_arguments(
        "precompiled_user_op",
        inputs,
        library_path,
        outs,
        op_name,
        inputs_with_gradients,
        attributes,
        gradient_attributes,
    )
    if not isinstance(gp_path, str):
        raise TypeError(f"precompiled_user_op: gp_path must be a str, got {gp_path!r}")
    if gp_path and not os.path.isfile(gp_path):
        raise ValueError(f"precompiled_user_op: gp_path {gp_path!r} is not a file")
    raise HardwareOnlyError(
        "custom_ops.precompiled_user_op",
        f"{op_name!r} in {library_path!r} builds Poplar graph code for IPU tiles",
    )


def _check_user_op_arguments(
    what: str,
    inputs,
    library_path,
    outs,
    op_name,
    inputs_with_gradients,
    attributes,
    gradient_attributes,
) -> None:
    for label, value in (("attributes", attributes), ("gradient_attributes", gradient_attributes)):
        # The original's check (custom_ops.py), made before its op is built: only a value
        # that is set must be a str.
        if value and not isinstance(value, str):
            raise ValueError(
                f"Expected {label} to be a 'str' type, but was {type(value)}. ({what})"
            )
    flat_inputs = tf.nest.flatten(inputs)
    for value in flat_inputs:
        tf.convert_to_tensor(value)
    if not isinstance(library_path, (str, os.PathLike)):
        raise TypeError(f"{what}: library_path must be a path, got {library_path!r}")
    if not os.path.isfile(library_path):
        # The original fails to load it with a NotFoundError (user_ops_test.py).
        raise tf.errors.NotFoundError(
            None, None, f"{what}: library_path {os.fspath(library_path)!r} is not a file"
        )
    if not isinstance(op_name, str):
        # A string attribute of the original's op: TensorFlow refuses anything else.
        raise TypeError(f"{what}: op_name must be a str, got {op_name!r}")
    if outs is not None:
        _check_outs(what, outs)
    if inputs_with_gradients is not None:
        for index in inputs_with_gradients:
            # A list(int) attribute of the original's op, converted with int().
            index = as_attr_int(index, f"{what}: inputs_with_gradients")
            if not 0 <= index < len(flat_inputs):
                raise ValueError(
                    f"{what}: inputs_with_gradients index {index} is out of range for "
                    f"{len(flat_inputs)} inputs"
                )


def _check_outs(what: str, outs) -> None:
    # The original passes `**outs` to its op: other keys, missing keys or a non-mapping
    # are TypeErrors of that call, and so are types and shapes that are not lists.
    if not isinstance(outs, dict) or set(outs) != {"output_types", "output_shapes"}:
        raise TypeError(
            f"{what}: outs must be a dict with the keys 'output_types' and 'output_shapes', "
            f"got {outs!r}"
        )
    types, shapes = outs["output_types"], outs["output_shapes"]
    if not isinstance(types, (list, tuple)) or not isinstance(shapes, (list, tuple)):
        raise TypeError(f"{what}: outs['output_types'] and outs['output_shapes'] must be lists")
    if len(types) != len(shapes):
        raise ValueError(
            f"{what}: outs has {len(types)} output types but {len(shapes)} output shapes"
        )
    for dtype in types:
        tf.as_dtype(dtype)
    for shape in shapes:
        tf.TensorShape(shape)
