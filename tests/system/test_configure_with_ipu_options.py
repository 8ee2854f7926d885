"""`configure_ipu_system` given the `IpuOptions` protobuf instead of an `IPUConfig`.

The original's `configure_ipu_system` (tensorflow/python/ipu/config.py, re-exported by
utils.py) takes either; the protobuf reaches its backend as it is, which refuses one not made
by an `IPUConfig` (poplar_platform.cc, `ConfigurePoplarDevices`) and gives it back from
`get_ipu_config`. References: the protobuf itself, the configuration the same `IPUConfig`
gives, numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.plugin.poplar.driver import config_pb2
from tensorflow.compiler.plugin.poplar.driver.config_pb2 import IpuOptions
from tensorflow.python import ipu

v1 = tf.compat.v1


@pytest.fixture(autouse=True)
def _reset():
    yield
    ipu.config.reset_ipu_configuration()


def _rich_config() -> ipu.config.IPUConfig:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [2, 1]
    config.selection_order = ipu.config.SelectionOrder.SNAKE
    config.allow_recompute = True
    config.floating_point_behaviour.nanoo = True
    config.floating_point_behaviour.esr = ipu.config.StochasticRoundingBehaviour.ON
    config.matmuls.poplar_options = {"availableMemoryProportion": "0.3"}
    config.compilation_poplar_options = {"opt.enableInlining": "false"}
    config.optimizations.enable_graph_outlining = False
    config.optimizations.merge_remote_buffers = ipu.config.MergeRemoteBuffersBehaviour.MERGE
    config.optimizations.math.dot_strength = False
    config.scheduling.algorithm = ipu.config.SchedulingAlgorithm.POST_ORDER
    config.io_tiles.available_memory_proportion = 0.5
    config.norms.use_stable_statistics = True
    return config


def test_configuring_with_the_protobuf_configures_as_the_ipu_config():
    config = _rich_config()
    config.configure_ipu_system()
    from_config = ipu.config.get_ipu_config()

    options = config._create_protobuf()
    ipu.config.configure_ipu_system(options)
    from_options = ipu.config.get_ipu_config()

    # One protobuf per device, each the one configured (and the same as from the IPUConfig).
    assert len(from_options) == 2
    assert all(device_options == options for device_options in from_options)
    assert from_options == from_config
    assert [ipu.utils.get_num_of_ipus_in_device(f"/device:IPU:{i}") for i in (0, 1)] == [2, 1]


def test_utils_configure_ipu_system_takes_the_protobuf_too():
    config = ipu.config.IPUConfig()
    config.select_ipus = [0, 1]
    options = config._create_protobuf()
    ipu.utils.configure_ipu_system(options)
    assert ipu.utils.get_ipu_config() == [options, options]
    assert [d.cfg_index for d in ipu.utils.get_ipu_config()[0].device_config] == [0, 1]


def test_fields_an_ipu_config_lacks_are_kept():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    options = config._create_protobuf()
    options.profiling.enable_ipu_trace_events = True
    options.profiling.report_directory = "reports"
    ipu.config.configure_ipu_system(options)
    (configured,) = ipu.config.get_ipu_config()
    assert configured == options
    assert configured.profiling.report_directory == "reports"


def test_a_program_runs_with_the_floating_point_behaviour_of_the_protobuf(tf1_graph):
    # nanoo: a float16 product that overflows is NaN; without it, the largest float16.
    def overflow() -> np.ndarray:
        x = v1.placeholder(np.float16, [1])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            (result,) = ipu.ipu_compiler.compile(lambda x: x * x, inputs=[x])
        with v1.Session() as sess:
            return sess.run(result, {x: [10000.0]})

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    options = config._create_protobuf()
    ipu.config.configure_ipu_system(options)
    np.testing.assert_array_equal(overflow(), np.array([65504.0], np.float16))

    options.floating_point_behaviour.nanoo = True
    ipu.config.configure_ipu_system(options)
    assert np.isnan(overflow()).all()


def test_a_protobuf_not_made_by_an_ipu_config_is_refused_as_by_the_original_backend():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Badly initialized IpuOptions"):
        ipu.config.configure_ipu_system(IpuOptions(device_config=[{"auto_count": 1}]))
    options = IpuOptions(creator_id=config_pb2.IPU_UTILS, device_config=[{"auto_count": 1}])
    ipu.config.configure_ipu_system(options)
    assert ipu.config.get_ipu_config() == [options]


def test_neither_an_ipu_config_nor_a_protobuf_is_a_type_error():
    with pytest.raises(TypeError, match="IPUConfig or an IpuOptions protobuf, got str"):
        ipu.config.configure_ipu_system("auto_select_ipus=1")
