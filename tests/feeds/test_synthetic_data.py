"""Synthetic data (`TF_POPLAR_FLAGS`): infeeds never read their dataset.

The original's docs/device_selection.rst: with `--use_synthetic_data` (or
`--synthetic_data_categories=infeed`) no data moves from the host; input tensors hold
undefined content unless `--synthetic_data_initializer` is uniform, normal or a number.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _counting_dataset(reads: list):
    def generate():
        reads.append(1)
        yield np.ones(2, np.float32)

    signature = tf.TensorSpec([2], tf.float32)
    return tf.data.Dataset.from_generator(generate, output_signature=signature).repeat()


def _run_summing_program(strategy, reads: list):
    """Sums 4 infeed elements (each enqueued); returns the total and the outfeed."""
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_counting_dataset(reads))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(total, x):
        total = total + tf.reduce_sum(x)
        return total, outfeed.enqueue(total)

    with strategy.scope():
        total = strategy.run(tf.function(lambda: ipu.loops.repeat(4, body, [0.0], infeed)))
    return total, outfeed


@pytest.mark.parametrize(
    "flags", ["--use_synthetic_data", "--synthetic_data_categories=infeed,outfeed"]
)
def test_infeeds_give_the_initializer_value_without_reading_the_dataset(
    monkeypatch, strategy_on, flags
):
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"{flags} --synthetic_data_initializer=3.7")
    reads: list = []
    total, outfeed = _run_summing_program(strategy_on(1), reads)
    # Four elements of [3, 3] (the number's integer part), none read from the dataset.
    assert float(total) == 24.0 and reads == []
    assert outfeed.dequeue().shape == (0,)  # nothing comes back to the host either


def test_normal_initializer_gives_floats_of_the_element_shape(monkeypatch, strategy_on):
    monkeypatch.setenv(
        "TF_POPLAR_FLAGS", "--use_synthetic_data --synthetic_data_initializer=normal"
    )
    strategy = strategy_on(1)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_counting_dataset([]))
    with strategy.scope():
        total = strategy.run(
            tf.function(
                lambda: ipu.loops.repeat(64, lambda t, x: t + tf.reduce_sum(x * x), [0.0], infeed)
            )
        )
    # 128 draws of a standard normal: their squares sum to about 128.
    assert 60.0 < float(total) < 220.0


def test_only_outfeeds_synthetic_still_reads_the_dataset(monkeypatch, strategy_on):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--synthetic_data_categories=outfeed")
    reads: list = []
    total, outfeed = _run_summing_program(strategy_on(1), reads)
    assert float(total) == 8.0 and reads  # the dataset's ones
    assert outfeed.dequeue().shape == (0,)


def test_an_unknown_initializer_is_refused(monkeypatch, strategy_on):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_synthetic_data --synthetic_data_initializer=x")
    with pytest.raises(ValueError, match="synthetic_data_initializer='x'"):
        _run_summing_program(strategy_on(1), [])


def test_null_data_feed_gives_infeeds_no_data_of_the_dataset(monkeypatch, strategy_on):
    # docs/device_selection.rst: "--null_data_feed: cause any infeed queues to copy garbage
    # data to the IPU rather than real data"; outfeeds still bring their data back.
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--null_data_feed")
    reads: list = []
    total, outfeed = _run_summing_program(strategy_on(1), reads)
    assert reads == []
    values = outfeed.dequeue().numpy()
    assert values.shape == (4,) and values[-1] == float(total)
