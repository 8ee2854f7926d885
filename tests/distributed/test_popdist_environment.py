"""`popdist`: an instance's place in the run, read from the variables `poprun` sets."""

from __future__ import annotations

import pytest

import popdist
import popdist.tensorflow
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.distributed import environment

NAMES = environment.POPDIST_VARIABLES


@pytest.fixture
def run_environment(monkeypatch):
    """Sets the PopDist variables of one instance, as `poprun` would."""
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)

    def place(instances: int, index: int, replicas: int, ipus_per_replica: int = 1, ipus=None):
        placement = environment.Placement(instances, index, replicas, ipus_per_replica)
        for name, value in placement.as_environment().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("OPENIPU_NUM_IPUS", str(ipus or placement.num_local_ipus))

    return place


def test_without_poprun_the_run_is_one_instance_with_one_replica(monkeypatch):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    assert not popdist.isPopdistEnvSet()
    assert popdist.getNumInstances() == 1
    assert popdist.getInstanceIndex() == 0
    assert popdist.getNumTotalReplicas() == 1
    assert popdist.getNumLocalReplicas() == 1
    assert popdist.getReplicaIndexOffset() == 0
    assert popdist.getNumIpusPerReplica() == 1


def test_values_of_an_instance(run_environment):
    run_environment(instances=4, index=2, replicas=8, ipus_per_replica=2)
    assert popdist.isPopdistEnvSet()
    assert popdist.getNumInstances() == 4
    assert popdist.getInstanceIndex() == 2
    assert popdist.getNumTotalReplicas() == 8
    assert popdist.getNumLocalReplicas() == 2
    assert popdist.getReplicaIndexOffset() == 4
    assert popdist.getNumIpusPerReplica() == 2
    # The instance's machine has 4 IPUs: the 4-IPU device is the last of its listing.
    assert popdist.getDeviceId() == 6
    assert popdist.getDeviceId(2) == 4
    assert popdist.getDeviceId(1) == 0


def test_device_ids_that_cannot_exist(run_environment):
    run_environment(instances=2, index=0, replicas=2)
    with pytest.raises(ValueError, match=r"no device of 2 IPU\(s\): this instance's emulated "):
        popdist.getDeviceId(2)
    with pytest.raises(ValueError, match="no device of 3 IPU.*power-of-two"):
        popdist.getDeviceId(3)
    with pytest.raises(ValueError, match="numIpus must be a positive int, got 0"):
        popdist.getDeviceId(0)


def test_set_ipu_config_writes_the_instance_and_its_device(run_environment):
    run_environment(instances=2, index=1, replicas=4)
    config = IPUConfig()
    assert popdist.tensorflow.set_ipu_config(config) is config
    distribution = config.experimental.multi_replica_distribution
    assert (distribution.process_count, distribution.process_index) == (2, 1)
    assert list(config.select_ipus) == [2]  # the 2-IPU device of a 2-IPU machine


def test_set_ipu_config_without_device_selection(run_environment):
    run_environment(instances=2, index=0, replicas=2)
    config = IPUConfig()
    popdist.tensorflow.set_ipu_config(config, configure_device=False)
    assert config.experimental.multi_replica_distribution.process_count == 2
    assert list(config.select_ipus) == []


def test_set_ipu_config_with_more_ipus_per_replica_than_poprun_gave(run_environment):
    run_environment(instances=2, index=0, replicas=2)
    with pytest.raises(ValueError, match=r"no device of 2 IPU\(s\).*--ipus-per-replica"):
        popdist.tensorflow.set_ipu_config(IPUConfig(), ipus_per_replica=2)
    with pytest.raises(ValueError, match="ipus_per_replica must be at least 1, got 0"):
        popdist.tensorflow.set_ipu_config(IPUConfig(), ipus_per_replica=0)
    with pytest.raises(TypeError, match="needs an IPUConfig"):
        popdist.tensorflow.set_ipu_config(object())


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"POPDIST_NUM_TOTAL_REPLICAS": "3"},
            r"3 replica\(s\) cannot be split evenly over 2 instances",
        ),
        ({"POPDIST_INSTANCE_INDEX": "2"}, r"instance index 2 is not in \[0, 2\)"),
        ({"POPDIST_NUM_INSTANCES": "zero"}, "POPDIST_NUM_INSTANCES='zero' is not an integer"),
        ({"POPDIST_NUM_INSTANCES": "0"}, "POPDIST_NUM_INSTANCES=0 must be at least 1"),
        (
            {"POPDIST_NUM_LOCAL_REPLICAS": "3"},
            "POPDIST_NUM_LOCAL_REPLICAS=3 disagrees with .* which make it 2",
        ),
    ],
)
def test_an_inconsistent_environment_is_an_error(run_environment, monkeypatch, changes, message):
    run_environment(instances=2, index=1, replicas=4)
    for name, value in changes.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        popdist.getNumLocalReplicas()
