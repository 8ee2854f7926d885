"""The original's reduce-operator scenarios (operators_test/reduce*_test.py): every
combination of axes and keepdims, inference against numpy and training against
TensorFlow's gradients of the same reduction."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

import popart

DEFAULT_AXES = None  # the attribute left out: reduce over all axes
INFER_AXES = [[], [0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2], DEFAULT_AXES]
TRAIN_AXES = [[0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2], DEFAULT_AXES]


def _reduce(builder: Any, op_name: str, tensor: str, axes, keepdims: bool) -> str:
    kwargs: dict[str, Any] = {"keepdims": keepdims}
    if axes is not DEFAULT_AXES:
        kwargs["axes"] = axes
    return getattr(builder.aiOnnx, "reduce" + op_name)([tensor], **kwargs)


def check_reduce_inference(
    op_tester: Any, op_name: str, numpy_reduce: Callable[..., np.ndarray], data: np.ndarray
) -> None:
    """`numpy_reduce(data, axis=tuple|None, keepdims=bool)`; empty axes reduce nothing."""
    cases = list(itertools.product(INFER_AXES, [False, True]))

    def init_builder(builder):
        tensor = builder.addInputTensor(data)
        outs = [_reduce(builder, op_name, tensor, axes, keep) for axes, keep in cases]
        for out in outs:
            builder.addOutputTensor(out)
        return outs

    def reference(_):
        return [
            np.asarray(
                numpy_reduce(data, axis=None if a is DEFAULT_AXES else tuple(a), keepdims=k)
            ).astype(np.float32)
            for a, k in cases
        ]

    op_tester.rtol, op_tester.atol = 1e-5, 1e-6
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "infer")


def check_reduce_training(
    op_tester: Any,
    op_name: str,
    tf_reduce: Callable[..., Any],
    grad_of: Callable[..., list[np.ndarray]],
    data: np.ndarray,
    axes_list: list = TRAIN_AXES,
) -> None:
    """One input per case; the loss is the sum of all reductions. `tf_reduce(x, axis,
    keepdims)` gives the reference values and (by TensorFlow) the gradients."""
    g = popart.reservedGradientPrefix()
    cases = list(itertools.product(axes_list, [False, True]))

    def init_builder(builder):
        anchors, sums = [], []
        for axes, keep in cases:
            tensor = builder.addInputTensor(data)
            out = _reduce(builder, op_name, tensor, axes, keep)
            anchors += [out, g + tensor]
            sums.append(builder.aiOnnx.reducesum([out], keepdims=False))
        total = builder.aiOnnx.unsqueeze([builder.aiOnnx.sum(sums)], axes=[0])
        builder.addOutputTensor(total)
        return [total, g + total] + anchors

    def reference(ref_data):
        upstream = ref_data.getOutputTensorGrad(0)
        results, total = [], 0.0
        for axes, keep in cases:
            axis = None if axes is DEFAULT_AXES else list(axes)
            value = np.asarray(tf_reduce(data, axis, keep))
            total = total + value.sum()
            grad = grad_of(
                lambda x, axis=axis, keep=keep: tf_reduce(x, axis, keep),
                data,
                upstream=np.full(value.shape, upstream[0], np.float32),
            )[0]
            results += [value.astype(np.float32), grad]
        return [np.array([total], np.float32), upstream] + results

    op_tester.rtol, op_tester.atol = 1e-4, 1e-5
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")
