"""Shared by the ports of graphcore/popart's scatterreduce tests (their
`scatterreduce_test_basic.py` helpers): the model builder and numpy references of a scatter
reduction and its gradients, standing in for torch / torch_scatter."""

from __future__ import annotations

import numpy as np

import popart

REDUCTIONS = ["sum", "max", "min", "mul"]
REDUCTION = {
    "sum": popart.ScatterReduction.Sum,
    "max": popart.ScatterReduction.Max,
    "min": popart.ScatterReduction.Min,
    "mul": popart.ScatterReduction.Mul,
    "none": popart.ScatterReduction.NoReduction,
}
_UFUNC = {"sum": np.add, "max": np.maximum, "min": np.minimum, "mul": np.multiply}


def _targets(index: np.ndarray, dim: int) -> tuple[tuple[np.ndarray, ...], tuple]:
    """Where each position of `index` scatters to, and the positions themselves."""
    positions = np.indices(index.shape)
    target = list(positions)
    target[dim] = index
    return tuple(target), tuple(positions)


def scatter_reduce(src, index, dim, dim_size, reduce="sum", initial=None):
    """torch.scatter_reduce (include_self when `initial` is given) over the positions of
    `index`, which may be smaller than `src`; "none" is torch.scatter."""
    dim = dim % src.ndim
    if initial is None:
        shape = list(index.shape)
        shape[dim] = dim_size
        out = np.full(shape, 1 if reduce == "mul" else 0, src.dtype)
    else:
        out = initial.copy()
    target, positions = _targets(index, dim)
    values = src[positions]
    if reduce == "none":
        out[target] = values
        return out
    if initial is None and reduce in ("max", "min"):
        touched = np.zeros(out.shape, bool)
        touched[target] = True
        limit = np.inf if reduce == "min" else -np.inf
        if np.issubdtype(out.dtype, np.integer):
            info = np.iinfo(out.dtype)
            limit = info.max if reduce == "min" else info.min
        out = np.where(touched, limit, out).astype(src.dtype)
    _UFUNC[reduce].at(out, target, values)
    return out


def scatter_reduce_grads(d_out, src, index, dim, dim_size, reduce="sum", initial=None):
    """The output and the gradients of src (and initial) for upstream d_out, without ties
    among the reduced values (torch's amax/amin share a tie's gradient, PopART does not)."""
    dim = dim % src.ndim
    out = scatter_reduce(src, index, dim, dim_size, reduce, initial)
    target, _ = _targets(index, dim)
    upstream = d_out[target]
    if reduce == "sum":
        d_src, d_initial = upstream, d_out
    elif reduce == "mul":
        d_src = upstream * out[target] / src
        d_initial = None if initial is None else d_out * out / initial
    elif reduce == "none":
        d_src = upstream
        d_initial = None if initial is None else d_out.copy()
        if initial is not None:
            d_initial[target] = 0
    else:
        d_src = np.where(src == out[target], upstream, 0).astype(src.dtype)
        d_initial = None if initial is None else np.where(initial == out, d_out, 0)
    return out, d_src, d_initial


def build(
    builder,
    src,
    index,
    dim,
    dim_size,
    reduce="sum",
    initial=None,
    group_size=1,
    broadcast=True,
    backward=False,
):
    """Adds the scatter reduction (grouped for group_size > 1: src, index, initial then carry
    the group as their leading dim) and returns the anchors: output, then with `backward` the
    gradients of src, initial and output."""
    if group_size > 1:
        function = builder.aiGraphcore.groupedscatterreduce
        extra = {"group_size": group_size}
        dim = dim + 1 if dim >= 0 else dim
    else:
        function, extra = builder.aiGraphcore.scatterreduce, {}
    data = builder.addInputTensor(src)
    inputs = [data, builder.addInputTensor(index.astype(np.uint32))]
    if initial is not None:
        inputs.append(builder.addInputTensor(initial))
    out = function(
        inputs,
        axis=dim,
        axis_size=dim_size,
        reduction=REDUCTION[reduce],
        enable_index_broadcast=int(broadcast),
        **extra,
    )
    builder.addOutputTensor(out)
    if not backward:
        return [out]
    g = popart.reservedGradientPrefix()
    return [out, g + data, *([g + inputs[2]] if initial is not None else []), g + out]


def reference(src_group, index_group, dim, dim_size, reduce, initial_group=None, d_out=None):
    """Per group references stacked (as the grouped op returns them): the output, then with
    d_out the gradients as `build(backward=True)` anchors them."""
    grouped = len(src_group) > 1
    initials = initial_group or [None] * len(src_group)
    if d_out is None:
        outs = [
            scatter_reduce(s, i, dim, dim_size, reduce, v)
            for s, i, v in zip(src_group, index_group, initials, strict=True)
        ]
        return [np.stack(outs) if grouped else outs[0]]
    d_outs = d_out if grouped else [d_out]
    results = [
        scatter_reduce_grads(d, s, i, dim, dim_size, reduce, v)
        for d, s, i, v in zip(d_outs, src_group, index_group, initials, strict=True)
    ]
    columns = [np.stack(c) if grouped else c[0] for c in zip(*results, strict=True)]
    if initial_group is None:
        columns = columns[:2]
    return [*columns, d_out]
