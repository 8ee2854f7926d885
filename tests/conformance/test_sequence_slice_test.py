"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/sequence_slice_test.py`.

`ipu.ops.slicing_ops.sequence_slice`, `sequence_slice_unpack` and `sequence_slice_pack`
compiled for the IPU on the original's cases (float16, float32 and int32 rows, with and
without zeroing the rows no slice writes): the copied rows, the gradients' shapes, the
refused argument lists and shapes (the original's messages), and slices with offsets that
a `loops.repeat` advances.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import loops
from tensorflow.python.ipu.ops.slicing_ops import (
    sequence_slice,
    sequence_slice_pack,
    sequence_slice_unpack,
)

v1 = tf.compat.v1


def _sequences(num_sequences, sequence_length, dtype):
    return np.vstack([np.ones(sequence_length) * i for i in range(num_sequences)]).astype(dtype)


_SIX = dict(output_shape=[6, 6], num_elems=[2, 2], src_offsets=[2, 1], dst_offsets=[0, 4])
_CASES = {
    "TestCase1": dict(sequences=_sequences(6, 6, np.float16), zero_unused=False, **_SIX),
    "TestCase2": dict(sequences=_sequences(6, 6, np.float32), zero_unused=False, **_SIX),
    "TestCase3": dict(sequences=_sequences(6, 6, np.int32), zero_unused=False, **_SIX),
    "TestCase4": dict(sequences=_sequences(6, 6, np.float16), zero_unused=True, **_SIX),
    "TestCase5": dict(sequences=_sequences(6, 6, np.float32), zero_unused=True, **_SIX),
    "TestCase6": dict(sequences=_sequences(6, 6, np.int32), zero_unused=True, **_SIX),
    # The identity.
    "TestCase7": dict(
        sequences=_sequences(3, 3, np.float16), output_shape=[3, 3], num_elems=[1, 1, 1],
        src_offsets=[0, 1, 2], dst_offsets=[0, 1, 2], zero_unused=True,
    ),
    # A larger output.
    "TestCase8": dict(
        sequences=_sequences(3, 3, np.float16), output_shape=[9, 3], num_elems=[1, 1, 1],
        src_offsets=[0, 1, 2], dst_offsets=[1, 3, 5], zero_unused=True,
    ),
}  # fmt: skip
_ALL_CASES = pytest.mark.parametrize("case", list(_CASES))
# The original skips the backward passes of integer cases.
_FLOAT_CASES = pytest.mark.parametrize(
    "case", [name for name, c in _CASES.items() if c["sequences"].dtype != np.int32]
)


@pytest.fixture
def configured(tf1_graph):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


def _run(f, placeholders, values):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(f, inputs=placeholders)
    with v1.Session() as sess:
        return sess.run(compiled, dict(zip(placeholders, values, strict=True)))


def _placeholders(c, with_dst=True):
    sequences = c["sequences"]
    with tf.device("cpu"):
        src = v1.placeholder(sequences.dtype, sequences.shape)
        if not with_dst:
            return [src], [sequences]
        dst = v1.placeholder(sequences.dtype, c["output_shape"])
    return [dst, src], [np.zeros(c["output_shape"], sequences.dtype), sequences]


def _backward(out_fn, c, with_dst=True):
    """The gradient of sum(out^2) with respect to the sequences has their shape."""
    opt = v1.train.GradientDescentOptimizer(learning_rate=0.1)

    def f(*args):
        out = out_fn(*args)
        return out, opt.compute_gradients(tf.square(out), args[-1])

    placeholders, values = _placeholders(c, with_dst)
    res = _run(f, placeholders, values)
    assert res[1][0][0].shape == c["sequences"].shape


@pytest.mark.follows("testSlice")
@_ALL_CASES
def test_slice(configured, case):
    c = _CASES[case]
    placeholders, values = _placeholders(c)

    def f(dst, src):
        return sequence_slice(
            dst, src, c["num_elems"], c["src_offsets"], c["dst_offsets"], c["zero_unused"]
        )

    (out,) = _run(f, placeholders, values)
    # numpy: the rows copied; the rest zero (zero_unused) or dst's (zeros here too).
    expected = np.zeros(c["output_shape"], c["sequences"].dtype)
    for n, s, d in zip(c["num_elems"], c["src_offsets"], c["dst_offsets"], strict=True):
        expected[d : d + n] = c["sequences"][s : s + n]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.follows("testSliceBackwardPass")
@_FLOAT_CASES
def test_slice_backward_pass(configured, case):
    c = _CASES[case]
    _backward(
        lambda dst, src: sequence_slice(
            dst, src, c["num_elems"], c["src_offsets"], c["dst_offsets"], c["zero_unused"]
        ),
        c,
    )


def _unpack(c):
    return lambda src: sequence_slice_unpack(
        src, c["num_elems"], c["src_offsets"], sum(c["num_elems"])
    )


@pytest.mark.follows("testUnpack")
@_ALL_CASES
def test_unpack(configured, case):
    c = _CASES[case]
    placeholders, values = _placeholders(c, with_dst=False)
    (out,) = _run(_unpack(c), placeholders, values)
    expected = np.concatenate(
        [c["sequences"][s : s + n] for n, s in zip(c["num_elems"], c["src_offsets"], strict=True)]
    )
    np.testing.assert_array_equal(out, expected)


@pytest.mark.follows("testUnpackBackwardPass")
@_FLOAT_CASES
def test_unpack_backward_pass(configured, case):
    c = _CASES[case]
    _backward(_unpack(c), c, with_dst=False)


@pytest.mark.follows("testPack")
@_ALL_CASES
def test_pack(configured, case):
    c = _CASES[case]
    sequences = c["sequences"]
    placeholders, values = _placeholders(c, with_dst=False)
    (unpacked,) = _run(_unpack(c), placeholders, values)
    # Packing at the unpack's source offsets puts the rows back.
    with tf.device("cpu"):
        pack_src = v1.placeholder(sequences.dtype, unpacked.shape)
        pack_dst = v1.placeholder(sequences.dtype, sequences.shape)

    def g(dst, src):
        return sequence_slice_pack(dst, src, c["num_elems"], c["src_offsets"], c["zero_unused"])

    (out,) = _run(g, [pack_dst, pack_src], [np.zeros(sequences.shape, sequences.dtype), unpacked])
    for n, s in zip(c["num_elems"], c["src_offsets"], strict=True):
        np.testing.assert_array_equal(out[s : s + n], sequences[s : s + n])


@pytest.mark.follows("testPackBackwardPass")
@_FLOAT_CASES
def test_pack_backward_pass(configured, case):
    c = _CASES[case]
    _backward(
        lambda dst, src: sequence_slice_pack(
            dst, src, c["num_elems"], c["src_offsets"], c["zero_unused"]
        ),
        c,
    )


def _compile_refused(f, shapes, message):
    placeholders = [v1.placeholder(np.float16, shape) for shape in shapes]
    with pytest.raises(ValueError, match=message):
        ipu.ipu_compiler.compile(f, inputs=placeholders)


@pytest.mark.follows("testMismatchedArgsSlice")
def test_mismatched_args_slice(tf1_graph):
    _compile_refused(
        lambda y, x: sequence_slice(y, x, [0, 1], [0], [0, 1], False),
        [[3, 3], [3, 3]],
        "num_elems, src_offsets and dst_offsets must have ",
    )


@pytest.mark.follows("testMismatchedArgsUnpack")
def test_mismatched_args_unpack(tf1_graph):
    _compile_refused(
        lambda x: sequence_slice_unpack(x, [0, 1], [0], 0),
        [[3, 3]],
        "num_elems and src_offsets must have matching",
    )


@pytest.mark.follows("testMismatchedArgsPack")
def test_mismatched_args_pack(tf1_graph):
    _compile_refused(
        lambda y, x: sequence_slice_pack(y, x, [0], [0, 1], False),
        [[3, 3], [3, 3]],
        "num_elems and dst_offsets must have matching",
    )


@pytest.mark.follows("testShapeMismatchSlice")
def test_shape_mismatch_slice(tf1_graph):
    _compile_refused(
        lambda y, x: sequence_slice(y, x, [0, 1], [0, 1], [0, 1], False),
        [[3, 2], [3, 3]],
        "src and dst inner shapes must match.",
    )


@pytest.mark.follows("testShapeMismatchPack")
def test_shape_mismatch_pack(tf1_graph):
    _compile_refused(
        lambda y, x: sequence_slice_pack(y, x, [0, 1], [0, 1], False),
        [[3, 2], [3, 3]],
        "src and dst inner shapes must match.",
    )


@pytest.mark.follows("testSequenceSliceRepeatLoop")
def test_sequence_slice_repeat_loop(configured):
    sequences = _sequences(1024, 128, np.float16)
    # Each iteration copies 4 slices of 4 rows; after 64, src and dst match.
    num_elems = np.array([4] * 4, dtype=np.int32)
    src_offsets = np.insert(np.cumsum(num_elems[:-1], dtype=np.int32), 0, 0)
    with tf.device("cpu"):
        placeholders = [
            v1.placeholder(sequences.dtype, sequences.shape),
            v1.placeholder(sequences.dtype, sequences.shape),
            v1.placeholder(num_elems.dtype, num_elems.shape),
            v1.placeholder(src_offsets.dtype, src_offsets.shape),
            v1.placeholder(src_offsets.dtype, src_offsets.shape),
        ]

    def loop_body(dst, src, num_elems, src_offsets, dst_offsets):
        res = sequence_slice(dst, src, num_elems, src_offsets, dst_offsets, False)
        return res, src, num_elems, src_offsets + 16, src_offsets + 16

    def f(*args):
        return loops.repeat(64, loop_body, inputs=list(args))

    values = [np.zeros_like(sequences), sequences, num_elems, src_offsets, src_offsets]
    res = _run(f, placeholders, values)
    np.testing.assert_array_equal(res[0], sequences)
