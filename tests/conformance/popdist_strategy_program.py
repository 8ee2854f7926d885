"""The PopDistStrategy scenarios of `test_popdist_strategy_test.py`, run by poprun."""

import numpy as np
import tensorflow as tf
from poprun_scenarios import main, scenario
from tensorflow.python import ipu
from tensorflow.python.ipu.distributed.popdist_strategy import (
    IPUMirroredVariable,
    IPUSyncOnReadVariable,
    PopDistStrategy,
)

import popdist

SUM = tf.distribute.ReduceOp.SUM
rank = popdist.getInstanceIndex()
size = popdist.getNumInstances()
strategy = PopDistStrategy()  # made once, as the original's setUpClass


def _configured():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    strategy.update_ipu_config(config)
    return config


@scenario
def test_update_ipu_config():
    config = _configured()
    assert config.experimental.multi_replica_distribution.process_count == size
    assert config.experimental.multi_replica_distribution.process_index == rank


@scenario
def test_strategy():
    _configured()
    with strategy.scope():
        v = tf.Variable(initial_value=rank + 1, dtype=np.float32)

        @tf.function
        def per_replica_fn(x):
            context = tf.distribute.get_replica_context()
            return context.all_reduce(SUM, v * x)

        per_replica_value = strategy.run(per_replica_fn, args=[tf.constant(2.0)])
        value_all_reduced = strategy.reduce(SUM, per_replica_value)
        assert float(v) == 1.0  # broadcast from instance 0
        assert float(value_all_reduced) == size * 2.0
        assert v.device.endswith("/device:IPU:0"), f"the variable is on {v.device}"


@scenario
def test_strategy_without_ipu_reduction():
    _configured()
    strategy._extended._add_ipu_cross_replica_reductions = False
    try:
        with strategy.scope():
            v = tf.Variable(initial_value=1.0, dtype=np.float32)

            @tf.function
            def per_replica_fn(x):
                y = v * x
                y_out = tf.distribute.get_replica_context().all_reduce(SUM, y)
                # Without the IPU's reductions, the all-reduce is an identity.
                assert y_out.op.type == "IdentityN", y_out.op.type
                assert y_out.op.inputs[0] is y
                return y_out

            strategy.run(per_replica_fn, args=[tf.constant(2.0)])
    finally:
        strategy._extended._add_ipu_cross_replica_reductions = True


@scenario
def test_strategy_with_sync_on_read_variable():
    _configured()
    with strategy.scope():
        w = tf.Variable(
            initial_value=float(rank + 1),
            dtype=np.float32,
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.MEAN,
        )

        @tf.function
        def per_replica_fn(x):
            assert isinstance(w, IPUSyncOnReadVariable), type(w)
            w.assign(x + w)
            return w

        tf.debugging.assert_equal([1.0], w)  # the value of instance 0
        strategy.run(per_replica_fn, args=[tf.constant(rank + 1.0)])
        tf.debugging.assert_equal([2.5], w.read_value())  # mean(1 + 1, 1 + 2)


@scenario
def test_strategy_with_mirrored_variable():
    _configured()
    with strategy.scope():
        w = tf.Variable(
            initial_value=float(rank + 1),
            dtype=np.float32,
            synchronization=tf.VariableSynchronization.ON_WRITE,
            aggregation=tf.VariableAggregation.SUM,
        )

        @tf.function
        def per_replica_fn():
            assert isinstance(w, IPUMirroredVariable), type(w)
            return w * w

        per_replica_ret = strategy.run(per_replica_fn, args=[])
        sum_ret = strategy.reduce(SUM, per_replica_ret, axis=None)
        assert float(per_replica_ret) == 1.0
        assert float(sum_ret) == 2.0


@scenario
def test_distribute_dataset():
    _configured()
    dataset = tf.data.Dataset.range(10, output_type=np.float32)
    dataset = dataset.shard(num_shards=size, index=rank)
    with strategy.scope():

        @tf.function
        def step_fn(iterator):
            x = next(iterator)
            return x * x

        dist_iterator = ipu.ipu_infeed_queue.IPUIterator(dataset=dataset)

        def run_fn(iterator):
            per_replica_y = strategy.run(step_fn, args=[iterator])
            return float(strategy.reduce(SUM, per_replica_y, axis=None))

        assert [run_fn(dist_iterator) for _ in range(3)] == [1.0, 13.0, 41.0]


@scenario
def test_all_reduce():
    _configured()
    with strategy.scope():

        @tf.function
        def per_replica_fn(x):
            return x * x

        per_replica_y = strategy.run(per_replica_fn, args=[rank + 1])
        assert int(strategy.reduce(SUM, per_replica_y, axis=None)) == 5  # 1*1 + 2*2


@scenario
def test_batch_normalization():
    _configured()
    with strategy.scope():
        batch_norm = tf.keras.layers.BatchNormalization(momentum=0.0)

        @tf.function
        def per_replica_fn(x):
            y = batch_norm(x, training=True)
            assert isinstance(batch_norm.beta, IPUMirroredVariable)
            assert isinstance(batch_norm.gamma, IPUMirroredVariable)
            assert isinstance(batch_norm.moving_mean, IPUSyncOnReadVariable)
            assert isinstance(batch_norm.moving_variance, IPUSyncOnReadVariable)
            return y

        x = tf.constant([[2.0 * (rank + 1)], [0.0]])
        per_replica_y = strategy.run(per_replica_fn, args=(x,))
        strategy.reduce(SUM, per_replica_y, axis=None)
        # mean(mean(2, 0), mean(4, 0)) = 1.5; mean(var(2, 0), var(4, 0)) = 2.5
        np.testing.assert_array_equal(batch_norm.moving_mean, [1.5])
        np.testing.assert_array_equal(batch_norm.moving_variance, [2.5])


@scenario
def test_dataset_infeed():
    _configured()
    dataset = tf.data.Dataset.from_tensor_slices([0.0]).repeat()
    dataset = dataset.map(lambda x: x + rank)  # a host operation in the dataset
    infeed_queue = iter(dataset)

    @tf.function
    def net(iterator):
        s = 0.0
        for _ in tf.range(10):
            s += 2 * next(iterator)
        return s

    with strategy.scope():
        assert float(strategy.run(net, args=(infeed_queue,))) == rank * 20


if __name__ == "__main__":
    main()
