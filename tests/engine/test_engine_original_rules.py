"""Errors of the engine that a program's arguments reach are the original's, and the engine
refuses nothing the original takes."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


@pytest.mark.parametrize("mode", [None, 0, False])
def test_a_falsy_outfeed_mode_is_all(strategy, mode):
    # ipu_outfeed_queue.py: `outfeed_mode or IPUOutfeedMode.ALL`.
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=mode)

    @tf.function(experimental_compile=True)
    def program():
        return ipu.loops.repeat(3, lambda i: (i + 1, outfeed.enqueue(i * 10)), [0])

    strategy.run(program)
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [0, 10, 20])


def test_an_outfeed_mode_of_another_type_is_a_value_error():
    with pytest.raises(ValueError, match="Expected `outfeed_mode` value to be of"):
        ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode="all")
