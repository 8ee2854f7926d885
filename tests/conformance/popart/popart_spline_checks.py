"""numpy references of torch_spline_conv's spline_basis and spline_weighting, which
graphcore/popart's splinebasis_test.py and splineweighting_test.py compare PopART with."""

from __future__ import annotations

import numpy as np


def _piece(v: np.ndarray, k: int, degree: int) -> np.ndarray:
    """The open B-spline basis function of `degree`, piece k, at the fraction v in [0, 1)."""
    if degree == 1:
        return 1 - v - k + 2 * v * k
    if degree == 2:
        return [0.5 * v * v - v + 0.5, -v * v + v + 0.5, 0.5 * v * v][k]
    if degree == 3:
        return [
            (1 - v) ** 3 / 6,
            (3 * v**3 - 6 * v**2 + 4) / 6,
            (-3 * v**3 + 3 * v**2 + 3 * v + 1) / 6,
            v**3 / 6,
        ][k]
    raise ValueError(f"degree {degree}")


def spline_basis(pseudo, kernel_size, is_open_spline, degree):
    """basis [E, S] and weight_index [E, S] (int32) for S = (degree + 1) ** D splines."""
    edges, dims = pseudo.shape
    splines = (degree + 1) ** dims
    basis = np.ones((edges, splines), np.float64)
    weight_index = np.zeros((edges, splines), np.int64)
    for s in range(splines):
        k, offset = s, 1
        for d in range(dims):
            k_mod, k = k % (degree + 1), k // (degree + 1)
            v = pseudo[:, d] * np.float32(kernel_size[d] - degree * int(is_open_spline[d]))
            # C++'s truncating conversion and %, as torch_spline_conv computes them.
            weight_index[:, s] += np.fmod(v.astype(np.int64) + k_mod, kernel_size[d]) * offset
            offset *= kernel_size[d]
            basis[:, s] *= _piece(v - np.floor(v), k_mod, degree)
    return basis, weight_index.astype(np.int32)


def spline_weighting(x, weight, basis, weight_index):
    """out[e, o] = sum over splines s and inputs i of basis[e, s] x[e, i] weight[wi[e, s], i, o]."""
    picked = weight.astype(np.float64)[weight_index]  # [E, S, I, O]
    return np.einsum("es,ei,esio->eo", basis.astype(np.float64), x.astype(np.float64), picked)
