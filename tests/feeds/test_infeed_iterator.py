"""IPUIterator and ScopedIPUOutfeedQueue: the original's rules for where they may be used."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def test_iterator_elements_are_read_in_programs_not_eagerly(strategy_on):
    strategy_on(1)
    iterator = ipu.ipu_infeed_queue.IPUIterator(
        dataset=tf.data.Dataset.range(4, output_type=tf.int32).repeat()
    )
    assert iter(iterator) is iterator
    with pytest.raises(RuntimeError, match="can not be accessed in eager mode"):
        next(iterator)
    with pytest.raises(ValueError, match="Either `dataset` or both"):
        ipu.ipu_infeed_queue.IPUIterator()
    with pytest.raises(ValueError, match="Either `dataset` or both"):
        ipu.ipu_infeed_queue.IPUIterator(
            tf.data.Dataset.range(2, output_type=tf.int32), element_spec=1
        )


def test_iterator_reads_the_next_element_each_call(strategy_on):
    strategy = strategy_on(1)
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32)).repeat()
    with strategy.scope():
        iterator = ipu.ipu_infeed_queue.IPUOwnedIterator(dataset=dataset)

        @tf.function(jit_compile=True)
        def total(iterator):
            return next(iterator) + 10 * next(iterator)

        assert float(strategy.run(total, args=(iterator,))) == 0 + 10 * 1
        assert float(strategy.run(total, args=(iterator,))) == 2 + 10 * 3


def test_an_iterator_rebuilt_from_specs_reads_the_same_feed(strategy_on):
    # ipu_infeed_queue.py: IPUIterator(infeed_spec=..., element_spec=...) rebuilds an
    # iterator (as tf.function does from its composite-tensor form) over the same feed.
    strategy = strategy_on(1)
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32)).repeat()
    with strategy.scope():
        iterator = ipu.ipu_infeed_queue.IPUIterator(dataset=dataset)
        rebuilt = ipu.ipu_infeed_queue.IPUIterator(
            infeed_spec=iterator.infeed_spec, element_spec=iterator.element_spec
        )
        assert rebuilt.infeed_spec == iterator.infeed_spec
        with pytest.raises(RuntimeError, match="cannot be deleted"):
            rebuilt.infeed_queue.deleter  # noqa: B018 - the feed belongs to `iterator`

        @tf.function(jit_compile=True)
        def total(first, second):
            return next(first) + 10 * next(second)

        assert float(strategy.run(total, args=(iterator, rebuilt))) == 0 + 10 * 1
        assert float(strategy.run(total, args=(rebuilt, iterator))) == 2 + 10 * 3


def test_scoped_outfeed_is_made_eagerly_only():
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError, match="can only be created in eager mode"):
            ipu.ipu_outfeed_queue.ScopedIPUOutfeedQueue()
    assert isinstance(
        ipu.ipu_outfeed_queue.ScopedIPUOutfeedQueue(), ipu.ipu_outfeed_queue.IPUOutfeedQueue
    )
