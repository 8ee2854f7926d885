"""`get_num_of_ipus_in_device` and `running_on_ipu_model`."""

from __future__ import annotations

import pytest
import tensorflow as tf

from openipu._src.system import configure
from openipu._src.utils import get_num_of_ipus_in_device, running_on_ipu_model


@pytest.mark.parametrize("ipu_system", [[2, 1, 4]], indirect=True)
def test_counts_the_ipus_of_each_configured_device(ipu_system):
    assert get_num_of_ipus_in_device("/device:IPU:0") == 2
    assert get_num_of_ipus_in_device("/device:IPU:1") == 1
    assert get_num_of_ipus_in_device("/device:IPU:2", device="/device:CPU:0") == 4


def test_accepts_fully_qualified_device_names(ipu_system):
    assert get_num_of_ipus_in_device("/job:localhost/replica:0/task:0/device:IPU:0") == 1


@pytest.mark.parametrize("ipu_system", [[2, 1]], indirect=True)
def test_reads_only_the_id_of_the_device_name_as_the_original(ipu_system):
    # The original's kernel (ipu_kernels.cc IpuGetNumDevicesOp) uses the parsed name's id.
    assert get_num_of_ipus_in_device("/device:CPU:0") == 2
    assert get_num_of_ipus_in_device("/gpu:1") == 1


@pytest.mark.parametrize("name", ["IPU", "garbage", "/device:IPU"])
def test_rejects_a_device_name_without_an_id(ipu_system, name):
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"Invalid device name {name}"):
        get_num_of_ipus_in_device(name)


def test_rejects_a_device_name_that_is_not_a_string(ipu_system):
    with pytest.raises(TypeError, match="device name"):
        get_num_of_ipus_in_device(0)


def test_rejects_a_device_the_system_does_not_have(ipu_system):
    # The kernel asks the platform for that ordinal's executor, whose Poplar target does
    # not exist (poplar_platform.cc GetNumIpusForDevice, poplar_executor.cc).
    with pytest.raises(tf.errors.InternalError, match="not in device configuration list"):
        get_num_of_ipus_in_device("/device:IPU:1")


def test_rejects_a_host_device_that_is_not_a_cpu(ipu_system):
    # The original's operation has only a CPU kernel: placed elsewhere, it fails to run.
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a CPU device"):
        get_num_of_ipus_in_device("/device:IPU:0", device="/device:IPU:0")
    with pytest.raises(ValueError, match="not a device name"):
        get_num_of_ipus_in_device("/device:IPU:0", device="host")


def test_an_unconfigured_device_is_one_ipu():
    # As the original (utils_get_config_test.py): before configuration a device is one IPU.
    configure.reset_ipu_configuration()
    assert get_num_of_ipus_in_device("/device:IPU:0") == 1


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (None, False),
        ("", False),
        ("--use_ipu_model", True),
        ("--max_compilation_threads=2 --use_ipu_model --use_synthetic_data", True),
        # The original's utils.py looks for the text "--use_ipu_model" in the variable.
        ("--use_ipu_model_no", True),
    ],
)
def test_running_on_ipu_model_reads_the_poplar_flags(monkeypatch, flags, expected):
    if flags is None:
        monkeypatch.delenv("TF_POPLAR_FLAGS", raising=False)
    else:
        monkeypatch.setenv("TF_POPLAR_FLAGS", flags)
    assert running_on_ipu_model() is expected
