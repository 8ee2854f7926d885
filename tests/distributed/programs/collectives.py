"""Collectives between instances, run by `poprun` (see test_poprun_collectives.py).

Each instance writes what it computed, and the errors it got, to a JSON file.
"""

import json
import pathlib
import sys

import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import distributed
from tensorflow.python.ipu.distributed.ipu_horovod_strategy import IPUHorovodStrategy
from tensorflow.python.ipu.distributed.popdist_strategy import PopDistStrategy
from tensorflow.python.ipu.ipu_multi_worker_strategy import IPUMultiWorkerStrategy

import popdist
import popdist.tensorflow

out = pathlib.Path(sys.argv[1])
rank = popdist.getInstanceIndex()
results = {}

value = tf.constant([1.0, 2.0]) * (rank + 1)
results["average"] = distributed.allreduce(value).numpy().tolist()
results["sum"] = distributed.allreduce(value, op=distributed.Sum).numpy().tolist()
results["max"] = distributed.allreduce(value, op=distributed.Max).numpy().tolist()
results["min"] = distributed.allreduce(tf.Variable([3, 4]) * (rank + 1), op="min").numpy().tolist()
# Dimension 0 differs between instances: rank + 1 rows.
results["allgather"] = distributed.allgather(tf.fill([rank + 1, 2], float(rank))).numpy().tolist()
# A scalar per instance gives the vector of them (host_collective_ops_test.py test_allgather).
results["allgather_scalar"] = distributed.allgather(tf.constant(rank)).numpy().tolist()
results["broadcast"] = (
    distributed.broadcast(tf.constant([10, 20]) + rank, root_rank=1).numpy().tolist()
)
sparse = tf.IndexedSlices(tf.constant([[1.0, 1.0]]) * (rank + 1), tf.constant([rank]), [3, 2])
reduced = distributed.allreduce(sparse, op=distributed.Sum)
results["indexed_slices_sum"] = tf.convert_to_tensor(reduced).numpy().tolist()


@tf.function
def in_function(x):
    return distributed.allreduce(x, op=distributed.Sum), distributed.allgather(x[None])


for call in range(2):  # the second call reuses the traced function with fresh instance keys
    total, gathered = in_function(tf.constant(float(rank + call)))
    results[f"function_{call}"] = [float(total), gathered.numpy().tolist()]

# A strategy over the same instances: replica ids and reductions.
config = ipu.config.IPUConfig()
popdist.tensorflow.set_ipu_config(config)
config.configure_ipu_system()
strategy = PopDistStrategy()


def replica_sum():
    context = tf.distribute.get_replica_context()
    return context.all_reduce("sum", tf.cast(context.replica_id_in_sync_group, tf.float32) + 1)


per_replica = strategy.run(replica_sum)
results["replica_sum"] = [float(v) for v in strategy.experimental_local_results(per_replica)]
results["strategy_reduce"] = float(
    strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), None)
)


def global_replicas():
    # A program's replica indices and collectives span the instances.
    index = ipu.replication_ops.replication_index()
    total = ipu.cross_replica_ops.cross_replica_sum(tf.cast(index, tf.float32) + 1)
    gathered = ipu.cross_replica_ops.cross_replica_sum(
        tf.one_hot(index, 2) * tf.cast(index + 1, tf.float32)
    )
    return index, total, gathered


index, total, gathered = strategy.run(global_replicas)
results["global_replicas"] = [int(index), float(total), gathered.numpy().tolist()]


# The older strategies over the same cluster, in the same process.
def sgd_step(older):
    with older.scope():
        weight = tf.Variable(1.0)
        optimizer = tf.keras.optimizers.SGD(1.0)

    def update():
        context = tf.distribute.get_replica_context()
        gradient = tf.cast(context.replica_id_in_sync_group, tf.float32) + 1
        optimizer.apply_gradients([(gradient, weight)])

    older.run(update)
    return float(weight.numpy())


resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
results["older_strategies"] = [
    sgd_step(IPUMultiWorkerStrategy(resolver)),
    sgd_step(IPUHorovodStrategy()),
]

(out / f"collectives_{rank}.json").write_text(json.dumps(results))
