"""Programs run by `poprun` in 2 instances on loopback ports (each instance imports TensorFlow)."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

PROGRAMS = pathlib.Path(__file__).with_name("programs")


def _poprun(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "openipu._src.distributed.poprun", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _program_data():
    spec = importlib.util.spec_from_file_location("distributed_program_data", PROGRAMS / "data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stock_keras_weights(data, global_batch: int):
    import tf_keras as keras

    x, y = data.dataset()
    model = keras.Sequential([keras.layers.Dense(3, activation="tanh"), keras.layers.Dense(1)])
    model.build((None, x.shape[1]))
    model.set_weights(data.initial_weights())
    model.compile(optimizer=keras.optimizers.SGD(data.LEARNING_RATE), loss="mse")
    history = model.fit(x, y, batch_size=global_batch, epochs=data.EPOCHS, shuffle=False, verbose=0)
    return model.get_weights(), history.history["loss"]


def _numpy_linear_weights(data, global_batch: int):
    x, y = data.dataset()
    w = np.zeros((x.shape[1], 1))
    for start in range(0, len(x), global_batch):
        xb, yb = x[start : start + global_batch], y[start : start + global_batch]
        w -= data.LEARNING_RATE * 2 / global_batch * xb.T @ (xb @ w - yb)
    return w


@pytest.mark.slow
def test_two_instances_train_like_one_process_with_the_global_batch(tmp_path):
    # 4 replicas: 2 per instance, so reductions cross both the device and the processes.
    result = _poprun(
        "--num-instances", 2, "--num-replicas", 4, "--timeout", 240,
        sys.executable, PROGRAMS / "train.py", tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    data = _program_data()
    global_batch = data.BATCH * 4
    keras_weights, keras_losses = _stock_keras_weights(data, global_batch)
    linear = _numpy_linear_weights(data, global_batch)
    losses = []
    for instance in range(2):
        saved = np.load(tmp_path / f"weights_{instance}.npz")
        for index, expected in enumerate(keras_weights):
            np.testing.assert_allclose(saved[f"arr_{index}"], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(saved["linear"], linear, rtol=1e-5, atol=1e-6)
        losses.append(saved["losses"])
        values = json.loads((tmp_path / f"popdist_{instance}.json").read_text())
        assert values == {
            "isPopdistEnvSet": True,
            "getNumInstances": 2,
            "getInstanceIndex": instance,
            "getNumTotalReplicas": 4,
            "getNumLocalReplicas": 2,
            "getReplicaIndexOffset": 2 * instance,
            "getDeviceId": 2,  # the 2-IPU device of each instance's 2-IPU machine
            "num_replicas_in_sync": 4,
            "process_count": 2,
            "process_index": instance,
        }
    # Each instance reports its replicas' mean loss; over the instances, that is the global one.
    np.testing.assert_allclose(np.mean(losses, axis=0), keras_losses, rtol=1e-5)


@pytest.mark.slow
def test_collectives_between_two_instances(tmp_path):
    result = _poprun(
        "--num-instances", 2, "--timeout", 240,
        sys.executable, PROGRAMS / "collectives.py", tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in range(2):
        results = json.loads((tmp_path / f"collectives_{rank}.json").read_text())
        assert results["average"] == [1.5, 3.0]
        assert results["sum"] == [3.0, 6.0]
        assert results["max"] == [2.0, 4.0]
        assert results["min"] == [3, 4]
        assert results["allgather"] == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
        assert results["allgather_scalar"] == [0, 1]
        assert results["broadcast"] == [11, 21]  # instance 1's value
        assert results["indexed_slices_sum"] == [[1.0, 1.0], [2.0, 2.0], [0.0, 0.0]]
        assert results["function_0"] == [1.0, [0.0, 1.0]]
        assert results["function_1"] == [3.0, [1.0, 2.0]]
        # One tf.distribute replica per instance, replica_id_in_sync_group 0 in each
        # (tensorflow/python/ipu/distributed/popdist_strategy.py
        # `_call_for_each_replica`): 1 + 1 over the two instances' replicas.
        assert results["replica_sum"] == [2.0]
        assert results["strategy_reduce"] == 2.0
        # Replica indices are global: instance index * local replicas + local index.
        assert results["global_replicas"] == [rank, 3.0, [1.0, 2.0]]
        # replica_id_in_sync_group is 0 on each worker (tensorflow/python/ipu/
        # ipu_multi_worker_strategy.py `_call_for_each_replica`), so each gradient is 1,
        # summed by the optimizer over the two workers: 1 - (1 + 1).
        assert results["older_strategies"] == [-1.0, -1.0]
        # Shapes that differ across instances: test_distributed_original_rules.py.


@pytest.mark.slow
def test_replica_groups_spanning_some_instances(tmp_path):
    # 4 instances of 1 replica, groups of 2: each group spans two of the four instances.
    result = _poprun(
        "--num-instances", 4, "--num-replicas", 4, "--timeout", 400,
        sys.executable, PROGRAMS / "group_collectives.py", tmp_path,
        timeout=500,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    groups = (np.arange(1, 5) * 10.0).reshape(2, 2)  # replica r holds (r + 1) * 10
    for rank in range(4):
        results = json.loads((tmp_path / f"group_collectives_{rank}.json").read_text())
        # One step; one local replica, so the outfeed has no replica axis.
        assert results["sum"] == [groups[rank // 2].sum()]
        assert results["gather"] == [groups[rank // 2].tolist()]


@pytest.mark.slow
def test_a_killed_instance_ends_the_run_with_a_clear_error():
    start = time.monotonic()
    result = _poprun("--num-instances", 2, "--timeout", 240, sys.executable, PROGRAMS / "killed.py")
    elapsed = time.monotonic() - start
    assert result.returncode == 128 + 9
    assert "poprun: instance 1 was killed by signal 9 (SIGKILL); stopped instance(s) 0" in (
        result.stderr
    )
    # Instance 1 prints before it kills itself (instance 0 may be stopped before it prints).
    assert "[1,1]<stdout>:step done: 2.0" in result.stdout
    # TensorFlow starts in about 10 s here; the failure itself ends the run at once.
    assert elapsed < 90
