"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/pop_datastream_test.py`.

Outfeeds of single tensors and of tuples, run twice, then dequeued on the host: every
enqueued value stacked (mode ALL) or the last one only (mode LAST). The original
drives its generated datastream ops (`gen_pop_datastream_ops`) directly, which openipu
does not provide; the public `IPUOutfeedQueue`, which the original builds on them,
carries the same programs here.
"""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow.compat import v1
from tensorflow.python import ipu

ALL = ipu.ipu_outfeed_queue.IPUOutfeedMode.ALL
LAST = ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST


@pytest.fixture
def outfeed_program(tf1_graph, ipu_system):
    """Builds `compute(*placeholders)` enqueued on an outfeed of `mode`, and a runner."""
    sessions = []

    def build(shapes, compute, mode):
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=mode)
        with v1.device("cpu"):
            placeholders = [v1.placeholder(np.float32, shape) for shape in shapes]
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            compiled = ipu.ipu_compiler.compile(
                lambda *args: outfeed.enqueue(compute(*args)), inputs=placeholders
            )
        dequeued = outfeed.dequeue()
        sess = v1.Session()
        sessions.append(sess)

        def run_with(*values):
            sess.run(compiled, dict(zip(placeholders, values, strict=True)))

        def dequeue():
            return sess.run(dequeued)

        return run_with, dequeue

    yield build
    for sess in sessions:
        sess.close()


def _ones(shape, scale=1.0):
    return scale * np.ones(shape, np.float32)


@pytest.mark.follows("testSingleOutfeed")
def test_single_outfeed(outfeed_program):
    shape = [10, 10]
    run_with, dequeue = outfeed_program([shape, shape], lambda a, b: [a + b], ALL)
    run_with(_ones(shape), _ones(shape))
    outfed = dequeue()
    assert len(outfed) == 1 and len(outfed[0]) == 1
    np.testing.assert_allclose(outfed[0][0], _ones(shape, 2))


def _tuple_program(outfeed_program, mode):
    s1, s2 = [10, 10], [4, 4]
    run_with, dequeue = outfeed_program([s1, s1, s2, s2], lambda a, b, c, d: [a + b, c - d], mode)
    run_with(_ones(s1), _ones(s1), _ones(s2), _ones(s2))
    run_with(_ones(s1, 2), _ones(s1), _ones(s2, 2), _ones(s2))
    return dequeue()


@pytest.mark.follows("testTupleOutfeedGetAll")
def test_tuple_outfeed_get_all(outfeed_program):
    outfed = _tuple_program(outfeed_program, ALL)
    assert len(outfed) == 2
    assert outfed[0].shape == (2, 10, 10) and outfed[1].shape == (2, 4, 4)
    np.testing.assert_allclose(outfed[0], np.stack([_ones([10, 10], 2), _ones([10, 10], 3)]))
    np.testing.assert_allclose(outfed[1], np.stack([_ones([4, 4], 0), _ones([4, 4], 1)]))


@pytest.mark.follows("testTupleOutfeedGetLast")
def test_tuple_outfeed_get_last(outfeed_program):
    outfed = _tuple_program(outfeed_program, LAST)
    assert len(outfed) == 2
    np.testing.assert_allclose(outfed[0], _ones([10, 10], 3))
    np.testing.assert_allclose(outfed[1], _ones([4, 4], 1))


def _single_program(outfeed_program, mode):
    shape = [2, 2]
    run_with, dequeue = outfeed_program([shape, shape], lambda a, b: [a + b], mode)
    run_with(_ones(shape), _ones(shape))
    run_with(_ones(shape, 3.1), _ones(shape, 2))
    return dequeue()


@pytest.mark.follows("testOutfeedGetAll")
def test_outfeed_get_all(outfeed_program):
    outfed = _single_program(outfeed_program, ALL)
    assert len(outfed) == 1 and outfed[0].shape == (2, 2, 2)
    np.testing.assert_allclose(outfed[0], np.stack([_ones([2, 2], 2), _ones([2, 2], 5.1)]))


@pytest.mark.follows("testOutfeedGetLast")
def test_outfeed_get_last(outfeed_program):
    outfed = _single_program(outfeed_program, LAST)
    assert len(outfed) == 1 and outfed[0].shape == (2, 2)
    np.testing.assert_allclose(outfed[0], _ones([2, 2], 5.1))
