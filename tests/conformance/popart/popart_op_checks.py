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
