"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/io_tiles_test.py`.

Programs on IPUs with I/O tiles reserved (`io_tiles.num_io_tiles`,
`place_ops_on_io_tiles`, the memory proportion for their buffers) give the results of
numpy: feeds and matmuls on one IPU, a small fed tensor squared, and two sharded IPUs
of which only one has feeds (infeed before the copy between the IPUs, or outfeed
after it). The original mainly checks which tiles Poplar maps each tensor to and the
exchanges between tile sets, read from its tensor map and report; the emulated IPUs
have no tiles, so those checks are left out. Smaller matrices than the original's.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compat import v1
from tensorflow.python import ipu

SIZE = 64


@pytest.fixture
def configure():
    def with_io_tiles(ipus, proportion=None):
        config = ipu.config.IPUConfig()
        config.io_tiles.num_io_tiles = 32
        config.io_tiles.place_ops_on_io_tiles = True
        if proportion is not None:
            config.io_tiles.available_memory_proportion = proportion
        config.auto_select_ipus = ipus
        config.configure_ipu_system()

    yield with_io_tiles
    ipu.config.reset_ipu_configuration()


def _data():
    return np.random.RandomState(0).uniform(-1, 1, (SIZE, SIZE)).astype(np.float32)


@pytest.mark.follows("testTensorPlacementAndExchanges")
@pytest.mark.parametrize("buffer_fits_on_io_tiles", [True, False])
def test_tensor_placement_and_exchanges(tf1_graph, configure, buffer_fits_on_io_tiles):
    data = _data()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensors((data, data)))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_net():
        with tf.name_scope("infeed"):
            a, b = infeed._dequeue()  # noqa: SLF001 - the original's test dequeues directly
        with tf.name_scope("matmul"):
            ab = tf.matmul(a, b)
        with tf.name_scope("outfeed"):
            return outfeed.enqueue(ab)

    with tf.device("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(my_net, inputs=[])
    configure(1, proportion=100.0 if buffer_fits_on_io_tiles else 0.1)
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(compiled)
        [result] = sess.run(dequeued)
    np.testing.assert_allclose(result, data @ data, rtol=1e-5, atol=1e-5)


@pytest.mark.follows("testTensorLayoutOnIoTiles")
def test_tensor_layout_on_io_tiles(tf1_graph, configure):
    data = np.arange(128, dtype=np.float16)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensors(data))

    def my_net():
        with tf.name_scope("infeed"):
            a = infeed._dequeue()  # noqa: SLF001
        with tf.name_scope("multiply"):
            return tf.multiply(a, a)

    with tf.device("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(my_net, inputs=[])
    configure(1)
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        [result] = sess.run(compiled)
    np.testing.assert_array_equal(result, data * data)


def _sharded_infeed_program(second):
    data = _data()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensors(data))

    def my_net():
        with ipu.scopes.ipu_shard(0):
            with tf.name_scope("infeed"):
                a = infeed._dequeue()  # noqa: SLF001
            with tf.name_scope("matmul1"):
                aa = tf.matmul(a, a)
        with ipu.scopes.ipu_shard(1):
            with tf.name_scope("matmul2"):
                return tf.matmul(aa, second(a, aa))

    with tf.device("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(my_net, inputs=[])
    return data, infeed, compiled


@pytest.mark.follows("testIoTilesOnlyCreatedOnDevicesWithIoInstructions")
def test_io_tiles_only_created_on_devices_with_io_instructions(tf1_graph, configure):
    data, infeed, compiled = _sharded_infeed_program(lambda a, aa: a)
    configure(2)
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        (result,) = sess.run(compiled)
    np.testing.assert_allclose(result, (data @ data) @ data, rtol=1e-4, atol=1e-4)


@pytest.mark.follows("testCopyFromDeviceWithIoTilesToDeviceWithoutIoTiles")
def test_copy_from_device_with_io_tiles_to_device_without_io_tiles(tf1_graph, configure):
    data, infeed, compiled = _sharded_infeed_program(lambda a, aa: aa)
    configure(2)
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        (result,) = sess.run(compiled)
    expected = data @ data
    np.testing.assert_allclose(result, expected @ expected, rtol=1e-4, atol=1e-4)


@pytest.mark.follows("testCopyFromDeviceWithoutIoTilesToDeviceWithIoTiles")
def test_copy_from_device_without_io_tiles_to_device_with_io_tiles(tf1_graph, configure):
    data = _data()
    a = v1.placeholder(np.float32, data.shape)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_net(a):
        with ipu.scopes.ipu_shard(0):
            with tf.name_scope("matmul1"):
                a = tf.matmul(a, a)
        with ipu.scopes.ipu_shard(1):
            with tf.name_scope("matmul2"):
                a = tf.matmul(a, a)
            with tf.name_scope("outfeed"):
                return outfeed.enqueue(a)

    with tf.device("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(my_net, inputs=[a])
    configure(2)
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        sess.run(compiled, {a: data})
        (result,) = sess.run(dequeued)
    expected = data @ data
    np.testing.assert_allclose(result, expected @ expected, rtol=1e-4, atol=1e-4)
