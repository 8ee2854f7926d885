"""`dataset_benchmark` and `infeed_benchmark`: real iteration, statistics, errors E32-E34."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.data import dataset_benchmark, infeed_benchmark
from openipu._src.feeds.infeed import IPUInfeedQueue

EPOCH_KEYS = [
    "elements_processed",
    "total_bytes_processed",
    "time_elapsed",
    "elements_per_second",
    "bandwidth",
]
# One element: float32 [3, 4] (48 bytes) and int32 [5] (20 bytes).
ELEMENT_BYTES = 3 * 4 * 4 + 5 * 4


def _two_component_dataset() -> tf.data.Dataset:
    element = (tf.ones([3, 4], tf.float32), tf.zeros([5], tf.int32))
    return tf.data.Dataset.from_tensors(element).repeat()


@pytest.mark.parametrize("do_memcpy", [True, False])
@pytest.mark.parametrize("apply_options", [True, False])
def test_counts_elements_and_bytes_per_epoch(do_memcpy, apply_options):
    stats = json.loads(
        dataset_benchmark(
            _two_component_dataset(),
            3,
            10,
            print_stats=False,
            apply_options=apply_options,
            do_memcpy=do_memcpy,
        )
    )
    assert list(stats) == ["epochs"] and len(stats["epochs"]) == 3
    for epoch in stats["epochs"]:
        assert list(epoch) == EPOCH_KEYS
        assert epoch["elements_processed"] == 10
        assert epoch["total_bytes_processed"] == 10 * ELEMENT_BYTES
        seconds = epoch["time_elapsed"]
        assert seconds > 0
        assert epoch["elements_per_second"] == pytest.approx(10 / seconds)
        assert epoch["bandwidth"] == pytest.approx(10 * ELEMENT_BYTES / seconds / 1e9)


def test_time_covers_a_known_cost_per_element():
    delay, count = 0.02, 5

    def slow_elements():
        while True:
            time.sleep(delay)
            yield np.float32(1.0)

    dataset = tf.data.Dataset.from_generator(
        slow_elements, output_signature=tf.TensorSpec([], tf.float32)
    )
    stats = json.loads(dataset_benchmark(dataset, 2, count, print_stats=False))
    for epoch in stats["epochs"]:
        # The generator is sequential: an epoch cannot beat its sleeps
        # (minus a sliver for an element started just before the clock).
        assert epoch["time_elapsed"] >= 0.9 * delay * count
        assert epoch["elements_per_second"] <= count / (0.9 * delay * count)


def test_string_elements_count_their_bytes():
    dataset = tf.data.Dataset.from_tensor_slices([b"abc", b"de", b"f"])
    stats = json.loads(dataset_benchmark(dataset, 1, 3, print_stats=False))
    assert stats["epochs"][0]["total_bytes_processed"] == 6


def test_the_result_also_reads_like_the_original_string_tensor():
    stats = dataset_benchmark(_two_component_dataset(), 1, 2, print_stats=False)
    assert isinstance(stats, str)
    assert json.loads(stats.numpy()[0]) == json.loads(stats)


def test_print_stats_prints_the_returned_json(capsys):
    stats = dataset_benchmark(_two_component_dataset(), 1, 2, print_stats=True)
    assert capsys.readouterr().out.strip() == stats.strip()
    dataset_benchmark(_two_component_dataset(), 1, 2, print_stats=False)
    assert capsys.readouterr().out == ""


def test_a_dataset_that_runs_out_is_an_error():
    with pytest.raises(tf.errors.OutOfRangeError, match="ran out of elements in epoch 1"):
        dataset_benchmark(tf.data.Dataset.range(15), 2, 10, print_stats=False)


def test_infeed_benchmark_reads_the_queue_dataset():
    infeed = IPUInfeedQueue(_two_component_dataset())
    stats = json.loads(infeed_benchmark(infeed, 2, 6, print_stats=False))
    assert [e["total_bytes_processed"] for e in stats["epochs"]] == [6 * ELEMENT_BYTES] * 2
    assert not infeed.dequeued


def test_graph_mode_returns_an_op_that_benchmarks(tf1_graph):
    result = dataset_benchmark(_two_component_dataset(), 2, 4, print_stats=False)
    assert isinstance(result, tf.Tensor) and result.shape == [1]
    with tf.compat.v1.Session() as session:
        stats = json.loads(session.run(result)[0])
    assert [e["elements_processed"] for e in stats["epochs"]] == [4, 4]


@pytest.mark.parametrize("run_benchmark", [dataset_benchmark, infeed_benchmark])
@pytest.mark.parametrize("not_a_feed", [[1, 2, 3], np.zeros(3), "dataset"])
def test_e32_wrong_input_type(run_benchmark, not_a_feed):
    with pytest.raises(TypeError, match="needs a"):
        run_benchmark(not_a_feed, 1, 1)


def test_e32_infeed_benchmark_wants_a_queue_not_a_dataset():
    with pytest.raises(TypeError, match="IPUInfeedQueue"):
        infeed_benchmark(_two_component_dataset(), 1, 1)


@pytest.mark.parametrize(
    ("epochs", "elements", "name"),
    [(0, 5, "number_of_epochs"), (-1, 5, "number_of_epochs"), (2, 0, "elements_per_epochs")],
)
@pytest.mark.parametrize("use_infeed", [False, True])
def test_e33_counts_below_one(epochs, elements, name, use_infeed):
    feed = _two_component_dataset()
    with pytest.raises(ValueError, match=f"{name} must be at least 1"):
        if use_infeed:
            infeed_benchmark(IPUInfeedQueue(feed), epochs, elements)
        else:
            dataset_benchmark(feed, epochs, elements)


def test_counts_must_be_integers():
    with pytest.raises(TypeError, match="number_of_epochs must be an int"):
        dataset_benchmark(_two_component_dataset(), 1.5, 2)


@pytest.mark.parametrize("use_infeed", [False, True])
def test_e34_static_empty_dimension(use_infeed):
    dataset = tf.data.Dataset.from_tensors((tf.ones([2]), tf.zeros([0, 3]))).repeat()
    with pytest.raises(tf.errors.InvalidArgumentError, match="dimension of size 0"):
        if use_infeed:
            infeed_benchmark(IPUInfeedQueue(dataset), 1, 1)
        else:
            dataset_benchmark(dataset, 1, 1)


def test_e34_empty_element_at_run_time():
    # The shape is only known when the element arrives.
    dataset = tf.data.Dataset.range(3).map(lambda n: tf.zeros([2 - n]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape \[0\]"):
        dataset_benchmark(dataset, 1, 3, print_stats=False)
