"""The distributed strategies and collectives in one process (a world of one instance).

Without a multi-process cluster, `PopDistStrategy` runs the device's replicas
like `IPUStrategy`, and the collectives between instances return their input.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu
from tensorflow.python.distribute.cluster_resolver import SimpleClusterResolver
from tensorflow.python.ipu import distributed
from tensorflow.python.ipu.distributed.ipu_horovod_strategy import (
    IPUHorovodExtended,
    IPUHorovodStrategy,
)
from tensorflow.python.ipu.distributed.popdist_strategy import (
    IPUMirroredVariable,
    IPUSyncOnReadVariable,
    PopDistStrategy,
)
from tensorflow.python.ipu.ipu_multi_worker_strategy import (
    IPUMultiWorkerExtended,
    IPUMultiWorkerStrategy,
)
from tensorflow.python.training.server_lib import ClusterSpec

from openipu._src.distributed import environment


@pytest.fixture(autouse=True)
def _alone(monkeypatch):
    """No poprun variables, no cluster; the IPU configuration is reset afterwards."""
    for name in (*environment.POPDIST_VARIABLES, environment.TF_CONFIG):
        monkeypatch.delenv(name, raising=False)
    yield
    ipu.config.reset_ipu_configuration()


def _configure(ipus: int, process_count: int = 0) -> None:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    config.experimental.multi_replica_distribution.process_count = process_count
    config.configure_ipu_system()


def _replica_sum():
    context = tf.distribute.get_replica_context()
    return context.all_reduce("sum", tf.cast(context.replica_id_in_sync_group, tf.float32) + 1)


def test_popdist_strategy_alone_runs_the_device_replicas():
    _configure(2)
    strategy = PopDistStrategy()
    assert strategy.num_replicas_in_sync == 2
    assert strategy.extended.local_replica_count == 2
    assert (strategy.extended.process_count, strategy.extended.process_index) == (1, 0)
    # One tf.distribute replica per process (replica_id_in_sync_group 0), whose programs
    # replicate on the device: `run` returns replica 0's value (tensorflow/python/ipu/
    # distributed/popdist_strategy.py, PopDistExtendedV1._call_for_each_replica).
    results = strategy.experimental_local_results(strategy.run(_replica_sum))
    assert [float(r) for r in results] == [2.0]
    config = strategy.update_ipu_config(ipu.config.IPUConfig())
    distribution = config.experimental.multi_replica_distribution
    assert (distribution.process_count, distribution.process_index) == (1, 0)


def test_popdist_strategy_without_ipu_cross_replica_reductions():
    # tensorflow/python/ipu/distributed/popdist_strategy.py `_reduce_to`: on the IPU,
    # without the flag a reduction returns the replica's own value.
    _configure(2)
    strategy = PopDistStrategy(add_ipu_cross_replica_reductions=False)
    results = strategy.experimental_local_results(strategy.run(_replica_sum))
    assert [float(r) for r in results] == [1.0]


def _fit(strategy, x, y):
    with strategy.scope():
        keras.utils.set_random_seed(3)
        model = keras.Sequential(
            [keras.layers.Dense(8, activation="tanh", input_shape=(4,)), keras.layers.Dense(1)]
        )
        model.compile(keras.optimizers.SGD(0.1), "mse", steps_per_execution=2)
        model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


def test_keras_fit_under_popdist_strategy_alone_averages_over_all_replicas():
    # The original's PopDistStrategy counts every instance's replicas in
    # num_replicas_in_sync (popdist.getNumTotalReplicas()), so Keras scales the loss by
    # it and the IPU's cross-replica sum makes the update the replicas' mean: one
    # replica of the global batch with the same learning rate (IPUStrategy, whose
    # num_replicas_in_sync is 1, sums instead). tensorflow/python/ipu/distributed/
    # popdist_strategy.py.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = rng.normal(size=(32, 1)).astype(np.float32)
    _configure(2)
    ours = _fit(PopDistStrategy(), x, y)
    keras.utils.set_random_seed(3)
    reference = keras.Sequential(
        [keras.layers.Dense(8, activation="tanh", input_shape=(4,)), keras.layers.Dense(1)]
    )
    reference.compile(keras.optimizers.SGD(0.1), "mse")
    reference.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(ours, reference.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_variables_have_the_ipu_classes():
    _configure(2)
    strategy = PopDistStrategy()
    with strategy.scope():
        mirrored = tf.Variable(1.0)
        on_read = tf.Variable(
            0.0,
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.SUM,
        )
    assert isinstance(mirrored, IPUMirroredVariable)
    assert isinstance(on_read, IPUSyncOnReadVariable)

    def count():
        on_read.assign_add(1.0)

    strategy.run(count)
    # One tf.distribute replica per process (tensorflow/python/ipu/distributed/
    # popdist_strategy.py): reading sums the processes' copies, and the host holds
    # replica 0's copy of the device's replicas.
    assert float(strategy.extended.read_var(on_read)) == 1.0


def test_poprun_placement_must_match_the_device(monkeypatch):
    placement = environment.Placement(num_instances=1, num_total_replicas=2)
    for name, value in placement.as_environment().items():
        monkeypatch.setenv(name, value)
    _configure(1)
    with pytest.raises(ValueError, match=r"runs 2 replica\(s\) .* has 1 IPU\(s\)"):
        PopDistStrategy()


def test_multi_worker_strategies_with_one_worker(caplog):
    _configure(2)
    resolver = SimpleClusterResolver(ClusterSpec({}), task_type="worker", task_id=0)
    with caplog.at_level(logging.WARNING):
        strategy = IPUMultiWorkerStrategy(resolver, variables_on_host=True)
    assert "IPUMultiWorkerStrategyV1 is deprecated: use PopDistStrategy" in caplog.text
    assert strategy.extended.variables_on_host
    assert isinstance(strategy.extended, IPUMultiWorkerExtended)
    assert strategy.cluster_resolver is resolver
    # One tf.distribute replica per worker (replica id 0), its program's replicas summed:
    # tensorflow/python/ipu/distributed/ipu_multi_worker_strategy.py.
    results = strategy.experimental_local_results(strategy.run(_replica_sum))
    assert [float(r) for r in results] == [2.0]
    horovod = IPUHorovodStrategy()
    assert isinstance(horovod.extended, IPUHorovodExtended)
    assert horovod.num_replicas_in_sync == 2


def test_collectives_of_a_single_instance_return_their_input():
    value = tf.constant([1.0, 2.0])
    for op in (None, distributed.Sum, distributed.Max, "min", tf.distribute.ReduceOp.MEAN):
        np.testing.assert_array_equal(distributed.allreduce(value, op=op), value)
    np.testing.assert_array_equal(distributed.allgather(value), value)
    np.testing.assert_array_equal(distributed.broadcast(value, root_rank=0), value)
    sparse = tf.IndexedSlices(tf.constant([[1.0]]), tf.constant([1]), [2, 1])
    np.testing.assert_array_equal(tf.convert_to_tensor(distributed.allreduce(sparse)), [[0], [1]])
    assert (ipu.horovod.size(), ipu.horovod.rank()) == (1, 0)


def test_bad_collective_arguments():
    value = tf.constant([1.0])
    with pytest.raises(
        ValueError, match=r"root_rank=1 does not exist: the run has 1 instance\(s\)"
    ):
        distributed.broadcast(value, root_rank=1)
    with pytest.raises(ValueError, match="root_rank=-1 does not exist"):
        distributed.broadcast(value, root_rank=-1)
    with pytest.raises(TypeError, match="root_rank must be an int, got '0'"):
        distributed.broadcast(value, root_rank="0")
    with pytest.raises(ValueError, match="op='median' is not one of Average"):
        distributed.allreduce(value, op="median")


def test_allgather_of_a_scalar_is_the_vector_of_the_instances_scalars():
    # The original's ipu.distributed.allgather (host_collective_ops.py, PopdistAllGather)
    # inserts the instance dimension: a scalar gives shape [instances], here [1].
    gathered = distributed.allgather(tf.constant(7.0))
    np.testing.assert_array_equal(gathered.numpy(), np.array([7.0], np.float32))

    @tf.function
    def gather(x):
        return distributed.allgather(x)

    np.testing.assert_array_equal(gather(tf.constant(3, tf.int32)).numpy(), np.array([3]))


def test_adasum_is_exported_but_refused_as_by_the_original():
    # The original (distributed/__init__.py before "Drop Horovod") exported Adasum and
    # raised NotImplementedError for it in allreduce.
    with pytest.raises(NotImplementedError, match="The Adasum reduction is not implemented."):
        distributed.allreduce(tf.constant([1.0]), op=distributed.Adasum)
    assert ipu.horovod.Adasum == distributed.Adasum


def test_the_deprecated_horovod_module_holds_the_same_names():
    assert ipu.horovod.popdist_strategy.PopDistStrategy is PopDistStrategy
    assert ipu.horovod.ipu_horovod_strategy.IPUHorovodStrategy is IPUHorovodStrategy
    assert ipu.horovod.allreduce is distributed.allreduce


def test_host_collective_broadcast_takes_any_root_rank_and_sends_instance_0s_value():
    # The original's kernel always broadcasts from rank 0 (kernels/popdist/broadcast.cc), so
    # a root_rank that names no instance is no error there.
    from tensorflow.python.ipu.distributed import host_collective_ops

    value = tf.constant([1.0, 2.0])
    for root_rank in (0, 3):
        np.testing.assert_array_equal(host_collective_ops.broadcast(value, root_rank), [1.0, 2.0])
