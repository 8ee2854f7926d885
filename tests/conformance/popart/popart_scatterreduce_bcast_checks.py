"""Shared by the ports of graphcore/popart's scatterreduce_bcast_test_{0,1}.py (their
`scatterreduce_bcast_test_basic.py`): a [8, 1, 1]-like index broadcast along `axis` over an
[8, 16, 7]-like source, scattered into 8 slots or into larger initial values."""

from __future__ import annotations

import numpy as np
from popart_scatterreduce_checks import build, reference


def scatterreduce_bcast_enabled(
    op_tester, input_axis_dim, input_other_dim, group_size, axis, include_self, reduction
):
    rng = np.random.default_rng(42)
    src_shape, input_shape, index_shape = [16, 7], [input_other_dim, 7], [1, 1]
    src_shape.insert(axis, 8)
    input_shape.insert(axis, input_axis_dim)
    index_shape.insert(axis, 8)
    srcs = [rng.standard_normal(src_shape).astype(np.float32) for _ in range(group_size)]
    indices = [rng.integers(0, 8, index_shape) for _ in range(group_size)]
    fill = np.ones if reduction == "mul" else np.zeros
    initials = [fill(input_shape, np.float32) for _ in range(group_size)] if include_self else None

    def init_builder(builder):
        stack = (lambda a: np.stack(a)) if group_size > 1 else (lambda a: a[0])
        initial = None if initials is None else stack(initials)
        return build(builder, stack(srcs), stack(indices), axis, 8, reduction, initial, group_size)

    expanded = [np.broadcast_to(i, s.shape) for i, s in zip(indices, srcs, strict=True)]
    op_tester.run(init_builder, lambda _: reference(srcs, expanded, axis, 8, reduction, initials))
