"""Shared shapes of the original's operator tests: a unary op checked forward, in place
and with its gradient against numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import popart

Array = np.ndarray


def check_unary(
    op_tester: Any,
    data: Array,
    build: Callable[[Any, str], str],
    forward: Callable[[Array], Array],
    derivative: Callable[[Array], Array] | None = None,
    modes: tuple[str, ...] = ("infer", "inplace", "train"),
) -> None:
    """Run `build(builder, input) -> output` for inference (without then with the
    InPlace pattern) and training, as the original's activation tests do, comparing
    with `forward(data)` and `upstream * derivative(data)`."""
    g = popart.reservedGradientPrefix()
    for mode in modes:

        def init_builder(builder, mode=mode):
            i1 = builder.addInputTensor(data)
            o = build(builder, i1)
            builder.addOutputTensor(o)
            if mode == "inplace":
                op_tester.setPatterns(["InPlace"], enableRuntimeAsserts=False)
            return [o, g + i1, g + o] if mode == "train" else [o]

        def reference(ref_data, mode=mode):
            if mode != "train":
                return [forward(data)]
            assert derivative is not None
            d__o = ref_data.getOutputTensorGrad(0)
            return [forward(data), (d__o * derivative(data)).astype(data.dtype), None]

        op_tester.run(init_builder, reference, "train" if mode == "train" else "infer")


def unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `grad` over the axes broadcasting added or stretched to reach `shape`."""
    grad = np.asarray(grad)
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=stretched, keepdims=True).reshape(shape)


def check_binary_training(
    op_tester: Any,
    build: Callable[[Any, str, str], str],
    d1: Array,
    d2: Array,
    forward: Callable[[Array, Array], Array],
    partials: Callable[[Array, Array], tuple[Array, Array]],
) -> None:
    """Train through `build(builder, a, b)`; the input gradients are the upstream gradient
    times `partials(d1, d2)`, summed back to each input's shape."""
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1, i2 = builder.addInputTensor(d1), builder.addInputTensor(d2)
        o = build(builder, i1, i2)
        builder.addOutputTensor(o)
        return [o, g + i1, g + i2, g + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        assert not np.isnan(d__o).any()
        da, db = partials(d1, d2)
        return [
            forward(d1, d2),
            unbroadcast(d__o * da, d1.shape).astype(d1.dtype),
            unbroadcast(d__o * db, d2.shape).astype(d2.dtype),
            None,
        ]

    op_tester.run(init_builder, reference, "train")


def check_op(
    op_tester: Any,
    data: Array,
    add_op: Callable[[Any, str], str],
    forward: Callable[[Array], Array],
    gradient: Callable[[Array, Array], Array] | None = None,
) -> None:
    """Run `add_op(builder, input) -> output` on `data` and compare with `forward(data)`;
    with `gradient(data, upstream)`, train and compare the input's gradient too."""
    g = popart.reservedGradientPrefix()
    train = gradient is not None

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        o = add_op(builder, i1)
        builder.addOutputTensor(o)
        return [o, g + i1, g + o] if train else [o]

    def reference(ref_data):
        if gradient is None:
            return [forward(data)]
        return [forward(data), gradient(data, ref_data.getOutputTensorGrad(0)), None]

    op_tester.run(init_builder, reference, "train" if train else "infer")
