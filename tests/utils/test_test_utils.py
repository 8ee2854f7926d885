"""`tensorflow.python.ipu.test_utils` and the utils re-exports, used as the original's own tests
use them."""

from __future__ import annotations

import unittest

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu


def test_increasing_datasets():
    dataset = tu.create_dual_increasing_dataset(3, data_shape=[2], label_shape=[1], repeat=False)
    elements = [(data.numpy(), label.numpy()) for data, label in dataset]
    assert len(elements) == 3
    for i, (data, label) in enumerate(elements):
        np.testing.assert_array_equal(data, [i, i])
        np.testing.assert_array_equal(label, [i])
    single = tu.create_single_increasing_dataset(2, shape=[1], dtype=np.int32)
    assert [int(x[0][0]) for x in single.take(5)] == [0, 1, 0, 1, 0]  # repeats by default
    multi = tu.create_multi_increasing_dataset(
        4, shapes=[[2, 2], [3]], dtypes=[np.float16, np.int64]
    )
    first = next(iter(multi.skip(3)))
    assert [t.dtype for t in first] == [tf.float16, tf.int64]
    np.testing.assert_array_equal(first[1], [3, 3, 3])


def test_ipu_session_runs_a_compiled_tf1_program(tf1_graph):
    with tf.device("cpu"):
        a = tf.compat.v1.placeholder(tf.float32, [2])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(lambda x: x * 2.0, [a])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    try:
        with tu.ipu_session(disable_grappler_optimizers=["arithmetic_optimization"]) as session:
            (value,) = session.run(result, {a: [1.0, 3.0]})
    finally:
        ipu.config.reset_ipu_configuration()
    np.testing.assert_array_equal(value, [2.0, 6.0])


def test_hardware_decorators_read_tf_ipu_count(monkeypatch):
    class HardwareTests(unittest.TestCase):
        @tu.test_uses_ipus(num_ipus=2)
        def test_needs_hardware(self):
            pass

        @tu.test_may_use_ipus_or_model(num_ipus=2)
        def test_runs_on_the_model(self):
            pass

    monkeypatch.delenv("TF_IPU_COUNT", raising=False)
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(HardwareTests).run(result)
    assert [t.id().rsplit(".", 1)[1] for t, _ in result.skipped] == ["test_needs_hardware"]
    assert result.wasSuccessful() and result.testsRun == 2
    monkeypatch.setenv("TF_IPU_COUNT", "2")
    assert tu.has_ci_ipus() and tu.get_ci_num_ipus() == 2


def test_helpers_that_need_report_files_say_so():
    with pytest.raises(NotImplementedError, match="report files.*writes its own estimates"):
        tu.ReportHelper()
    with pytest.raises(NotImplementedError, match="report files"):
        tu.ReportJSON(None)
    with pytest.raises(NotImplementedError, match="report files"):
        tu.enable_ipu_events(ipu.config.IPUConfig())
    with pytest.raises(NotImplementedError, match="assert_total_tile_memory"):
        tu.TestCaseExtensions().assert_total_tile_memory(None, 0)


def test_missing_whitelist_entries_in_names():
    names = ["Matmul/conv", "host-exchange", "add"]
    assert tu.missing_whitelist_entries_in_names(names, ["conv", "add", "relu"]) == ["*relu*"]


def test_utils_reexports_the_configuration_api():
    config = ipu.utils.IPUConfig()
    config.auto_select_ipus = 1
    config.device_connection.type = ipu.utils.DeviceConnectionType.ON_DEMAND
    config.selection_order = ipu.utils.SelectionOrder.SNAKE
    ipu.utils.configure_ipu_system(config)
    try:
        (configured,) = ipu.utils.get_ipu_config()
    finally:
        ipu.config.reset_ipu_configuration()
    assert configured.device_connection_type == ipu.config.DeviceConnectionType.ON_DEMAND.value
    assert configured.selection_order == ipu.utils.SelectionOrder.SNAKE.value
    assert ipu.utils.MergeRemoteBuffersBehaviour is ipu.config.MergeRemoteBuffersBehaviour


def test_outlined_function_at_the_top_level(ipu_system):
    @ipu.outlined_function
    def dense(x):
        return tf.matmul(x, tf.ones([2, 2])) + 1.0

    @tf.function(experimental_compile=True)
    def program(x):
        return dense(dense(x))

    x = np.array([[1.0, 2.0]], np.float32)
    result = ipu.ipu_strategy.IPUStrategy().run(program, args=(x,))
    once = x @ np.ones((2, 2)) + 1.0
    np.testing.assert_allclose(result, once @ np.ones((2, 2)) + 1.0)
