"""SplineBasis, SplineWeighting, MultiConv and CtcBeamSearchDecoder (ai.graphcore) against numpy
references written from the original's documented semantics."""

from __future__ import annotations

import collections
import itertools
import math

import numpy as np
import pytest
from single_node import run_lowered, single_node_model

RNG = np.random.default_rng(21)


def run_graphcore(op_type, inputs, num_outputs=1, compiled=(False, True), **attributes):
    """One ai.graphcore node on numpy inputs (None: a missing input), eagerly and under XLA;
    the eager outputs, after checking the compiled ones equal them."""
    named = {f"in{index}": value for index, value in enumerate(inputs)}
    model = single_node_model(
        op_type, named, outputs=num_outputs, opset=11, domain="ai.graphcore", **attributes
    )
    feeds = {name: value for name, value in named.items() if value is not None}
    results = [run_lowered(model, feeds, compiled=each) for each in compiled]
    for other in results[1:]:
        for first, second in zip(results[0], other, strict=True):
            np.testing.assert_allclose(first, second, rtol=1e-5, atol=1e-5)
    return results[0]


# -- splines: torch_spline_conv's loops (the original's tests use that package as reference) ----


def _piece(v, k, degree):
    if degree == 0:
        return 1.0
    if degree == 1:
        return 1 - v - k + 2 * v * k
    if degree == 2:
        return [0.5 * v * v - v + 0.5, -v * v + v + 0.5, 0.5 * v * v][k]
    return [
        (1 - v) ** 3 / 6,
        (3 * v**3 - 6 * v**2 + 4) / 6,
        (-3 * v**3 + 3 * v**2 + 3 * v + 1) / 6,
        v**3 / 6,
    ][k]


def spline_basis_reference(pseudo, kernel_size, is_open, degree):
    edges, dims = pseudo.shape
    splines = (degree + 1) ** dims
    basis = np.zeros((edges, splines), np.float64)
    index = np.zeros((edges, splines), np.int32)
    for e in range(edges):
        for s in range(splines):
            k, wi, offset, b = s, 0, 1, 1.0
            for d in range(dims):
                k_mod = k % (degree + 1)
                k //= degree + 1
                v = float(pseudo[e, d]) * (int(kernel_size[d]) - degree * int(is_open[d]))
                wi += ((int(v) + k_mod) % int(kernel_size[d])) * offset
                offset *= int(kernel_size[d])
                b *= _piece(v - math.floor(v), k_mod, degree)
            basis[e, s], index[e, s] = b, wi
    return basis, index


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_splinebasis(degree, dims):
    pseudo = RNG.random((13, dims)).astype(np.float32)
    kernel_size = RNG.integers(degree + 1, 7, dims).astype(np.int32)
    is_open = RNG.integers(0, 2, dims).astype(np.uint8)
    basis, index = run_graphcore(
        "SplineBasis", [pseudo, kernel_size, is_open], num_outputs=2, degree=degree
    )
    expected_basis, expected_index = spline_basis_reference(pseudo, kernel_size, is_open, degree)
    assert basis.dtype == np.float32 and index.dtype == np.int32
    np.testing.assert_allclose(basis, expected_basis, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(index, expected_index)


def test_splineweighting_of_splinebasis():
    pseudo = RNG.random((9, 2)).astype(np.float32)
    kernel_size = np.array([3, 4], np.int32)
    is_open = np.array([1, 0], np.uint8)
    basis, index = spline_basis_reference(pseudo, kernel_size, is_open, 1)
    x = RNG.normal(size=(9, 5)).astype(np.float32)
    weight = RNG.normal(size=(12, 5, 6)).astype(np.float32)
    basis = basis.astype(np.float32)
    (y,) = run_graphcore("SplineWeighting", [x, weight, basis, index])
    expected = np.zeros((9, 6))
    for e in range(9):
        for s in range(basis.shape[1]):
            expected[e] += basis[e, s] * (x[e] @ weight[index[e, s]])
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


# -- MultiConv ------------------------------------------------------------------------------


def conv_reference(x, w, b, strides, pads, dilations, in_dilations, out_pads):
    """Direct loops: x dilated by in_dilations, padded, convolved, biased, output padded."""
    spatial = x.ndim - 2
    for axis, factor in enumerate(in_dilations):
        if factor > 1:
            size = x.shape[2 + axis]
            shape = list(x.shape)
            shape[2 + axis] = (size - 1) * factor + 1
            dilated = np.zeros(shape, x.dtype)
            index = [slice(None)] * x.ndim
            index[2 + axis] = slice(None, None, factor)
            dilated[tuple(index)] = x
            x = dilated
    x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + spatial]) for i in range(spatial)])
    n, c = x.shape[:2]
    m, per_group = w.shape[:2]
    groups = c // per_group
    kernel = w.shape[2:]
    out = [
        (x.shape[2 + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1
        for i in range(spatial)
    ]
    y = np.zeros([n, m, *out])
    for o in range(m):
        g = o // (m // groups)
        for position in itertools.product(*[range(size) for size in out]):
            for offset in itertools.product(*[range(k) for k in kernel]):
                where = tuple(
                    p * s + k * d
                    for p, s, k, d in zip(position, strides, offset, dilations, strict=True)
                )
                patch = x[(slice(None), slice(g * per_group, (g + 1) * per_group), *where)]
                y[(slice(None), o, *position)] += patch @ w[(o, slice(None), *offset)]
    if b is not None:
        y += b.reshape([1, -1] + [1] * spatial)
    return np.pad(
        y, [(0, 0), (0, 0)] + [(out_pads[i], out_pads[i + spatial]) for i in range(spatial)]
    )


def test_multiconv_of_three_convolutions():
    convolutions = [
        # x shape, w shape, bias, strides, pads, dilations, inDilations, outPads
        ((2, 4, 7, 6), (6, 4, 3, 3), True, [1, 1], [1, 1, 1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
        ((1, 4, 8, 9), (4, 2, 2, 3), False, [2, 1], [0, 1, 2, 0], [1, 2], [2, 1], [1, 0, 0, 2]),
        ((2, 3, 10), (5, 3, 3), True, [3], [2, 1], [2], [1], [0, 1]),
    ]
    inputs, expected = [], []
    attributes = collections.defaultdict(list)
    for (
        x_shape,
        w_shape,
        with_bias,
        strides,
        pads,
        dilations,
        in_dilations,
        out_pads,
    ) in convolutions:
        x = RNG.normal(size=x_shape).astype(np.float32)
        w = RNG.normal(size=w_shape).astype(np.float32)
        b = RNG.normal(size=w_shape[0]).astype(np.float32) if with_bias else None
        inputs += [x, w, b]
        expected.append(conv_reference(x, w, b, strides, pads, dilations, in_dilations, out_pads))
        for name, values in zip(
            ("strides", "pads", "dilations", "inDilations", "outPads"),
            (strides, pads, dilations, in_dilations, out_pads),
            strict=True,
        ):
            attributes[name] += values
    outputs = run_graphcore("MultiConv", inputs, num_outputs=3, **attributes)
    for actual, wanted in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(actual, wanted, rtol=1e-4, atol=1e-4)


def test_multiconv_defaults():
    x = RNG.normal(size=(1, 2, 5, 5)).astype(np.float32)
    w = RNG.normal(size=(3, 2, 2, 2)).astype(np.float32)
    (y,) = run_graphcore("MultiConv", [x, w, None])
    ones, zeros = [1, 1], [0, 0, 0, 0]
    np.testing.assert_allclose(
        y, conv_reference(x, w, None, ones, zeros, ones, ones, zeros), rtol=1e-4, atol=1e-4
    )


# -- CTC beam search: the prefix beam search of the original's test
# -- (tests/integration/operators_test/ctc_beam_search_decoder.py) -------------------------


def _logsumexp(*values):
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


def prefix_beam_search(log_probs, beam_width, top_paths, blank):
    beam = [((), (0.0, -math.inf))]
    for t in range(log_probs.shape[0]):
        following = collections.defaultdict(lambda: (-math.inf, -math.inf))
        for s in range(log_probs.shape[1]):
            p = float(log_probs[t, s])
            for prefix, (p_blank, p_label) in beam:
                if s == blank:
                    b, n = following[prefix]
                    following[prefix] = (_logsumexp(b, p_blank + p, p_label + p), n)
                    continue
                extended = (*prefix, s)
                b, n = following[extended]
                if prefix and prefix[-1] == s:
                    following[extended] = (b, _logsumexp(n, p_blank + p))
                    b, n = following[prefix]
                    following[prefix] = (b, _logsumexp(n, p_label + p))
                else:
                    following[extended] = (b, _logsumexp(n, p_blank + p, p_label + p))
        beam = sorted(following.items(), key=lambda item: _logsumexp(*item[1]), reverse=True)
        beam = beam[:beam_width]
    return [(prefix, _logsumexp(*scores)) for prefix, scores in beam[:top_paths]]


# A beam wider than the number of prefixes (4 steps of 3 labels: 121) prunes nothing, so
# both searches are exact; a narrow one still finds the same best path on these inputs.
@pytest.mark.parametrize(
    "blank, beam_width, top_paths, steps", [(0, 10, 1, 6), (3, 10, 1, 6), (2, 200, 3, 4)]
)
def test_ctcbeamsearchdecoder(blank, beam_width, top_paths, steps):
    rng = np.random.default_rng(blank)
    batch, classes = 3, 4
    logits = rng.normal(size=(steps, batch, classes)) * 2
    log_probs = (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype(np.float32)
    lengths = np.array([steps, steps - 2, steps - 1], np.uint32)
    probabilities, label_lengths, labels = run_graphcore(
        "CtcBeamSearchDecoder",
        [log_probs, lengths],
        num_outputs=3,
        compiled=(False,),
        blank=blank,
        beam_width=beam_width,
        top_paths=top_paths,
    )
    assert probabilities.shape == label_lengths.shape == (batch, top_paths)
    assert labels.shape == (batch, top_paths, steps) and labels.dtype == np.uint32
    for n in range(batch):
        best = prefix_beam_search(log_probs[: lengths[n], n], beam_width, top_paths, blank)
        for p, (prefix, score) in enumerate(best):
            assert label_lengths[n, p] == len(prefix)
            assert labels[n, p, : len(prefix)].tolist() == list(prefix)
            np.testing.assert_allclose(probabilities[n, p], score, rtol=1e-4)


# -- PackedDataBlock: the reference of the original's packed_data_test.py --------------------


def _unpack(data, offsets, lengths, width):
    return np.stack(
        [
            np.pad(data[o : o + n], [(0, width - n)] + [(0, 0)] * (data.ndim - 1))
            for o, n in zip(offsets, lengths, strict=True)
        ]
    )


def packed_data_block_reference(inputs, max_lengths, result_size, batch, func):
    result_offsets, result_lengths = inputs[-2], inputs[-1]
    unpacked = [
        _unpack(inputs[3 * i], inputs[3 * i + 1], inputs[3 * i + 2], max_lengths[i])
        for i in range((len(inputs) - 2) // 3)
    ]
    results = [
        func(*[values[start : start + batch] for values in unpacked])
        for start in range(0, len(unpacked[0]), batch)
    ]
    destination = np.zeros([result_size, *results[0].shape[2:]], results[0].dtype)
    for index, (offset, length) in enumerate(zip(result_offsets, result_lengths, strict=True)):
        destination[offset : offset + length] = results[index // batch][index % batch][:length]
    return destination


@pytest.mark.parametrize("batch", [1, 2, 3])
def test_packeddatablock_runs_the_callback_on_unpacked_sequences(batch):
    from onnx import TensorProto, helper

    lengths = np.array([3, 5, 7, 4, 6, 2], np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths[:-1])]).astype(np.int32)
    data = RNG.random((int(lengths.sum()), 4)).astype(np.float32)
    other = RNG.random((int(lengths.sum()), 4)).astype(np.float32)
    width = 8
    # callback(d, e) = d @ e^T + 1, per sequence: [batch, width, width]
    callback = helper.make_graph(
        [
            helper.make_node("Transpose", ["e"], ["et"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["d", "et"], ["m"]),
            helper.make_node(
                "Constant", [], ["one"], value=helper.make_tensor("v", TensorProto.FLOAT, [], [1.0])
            ),
            helper.make_node("Add", ["m", "one"], ["r"]),
        ],
        "callback",
        [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch, width, 4])
            for name in ("d", "e")
        ],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [batch, width, width])],
    )
    inputs = [data, offsets, lengths, other, offsets, lengths, offsets, lengths]
    (result,) = run_graphcore(
        "PackedDataBlock",
        inputs,
        maxSequenceLengths=[width, width],
        resultSize=len(data),
        callbackBatchSize=batch,
        callback=callback,
    )
    expected = packed_data_block_reference(
        inputs,
        [width, width],
        len(data),
        batch,
        lambda d, e: d @ np.transpose(e, [0, 2, 1]) + 1,
    )
    np.testing.assert_allclose(result, expected, rtol=1e-6)
