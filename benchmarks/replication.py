"""Replicas on one host: Keras training throughput with 1, 2 and 4 replicas, and all-reduce cost.

1. The MLP of `keras_fit.py` (784-128-10, batch 32 per replica) trained with
   `fit` on IPU devices of 1, 2 and 4 IPUs (so 1, 2 and 4 replicas, each with
   its own batches), steps_per_execution 100: samples/s, and each as a ratio
   of the one-replica figure. This machine has 2 cores shared by all
   replicas, so no speed-up is expected; the ratio shows what replication
   costs.
2. One all-reduce (sum) of a 256k-float tensor across 4 replicas, 100 times
   in a device loop: openipu (IPUStrategy on a 4-IPU device) against stock
   tf.distribute (MirroredStrategy over 4 logical CPUs, `strategy.run` in a
   `tf.function` loop). Microseconds per all-reduce and the ratio
   (stock / openipu; higher is better).

    python benchmarks/replication.py
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu

SAMPLES = 64000
BATCH = 32
STEPS_PER_EXECUTION = 100
ALL_REDUCE_SIZE = 256 * 1024
ALL_REDUCES = 100


def mlp() -> keras.Model:
    return keras.Sequential(
        [
            keras.layers.Dense(128, activation="relu", input_shape=(784,)),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )


def keras_samples_per_second(strategy, x, y) -> float:
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = mlp()
        model.compile(
            keras.optimizers.SGD(0.01),
            "sparse_categorical_crossentropy",
            steps_per_execution=STEPS_PER_EXECUTION,
        )
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
        start = time.perf_counter()
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
        return len(x) / (time.perf_counter() - start)


def openipu_all_reduce_seconds(strategy) -> float:
    value = tf.ones([ALL_REDUCE_SIZE])

    def body(total):
        # Per replica and per iteration: nothing for the compiler to hoist or share, and
        # every element of the result is used (a compiler may compute only what is used).
        index = tf.cast(ipu.replication_ops.replication_index(), tf.float32)
        local = value * (total + index)
        return total + tf.reduce_sum(ipu.cross_replica_ops.cross_replica_sum(local)) * 1e-9

    @tf.function(jit_compile=True)
    def loop():
        return ipu.loops.repeat(ALL_REDUCES, body, [1.0])

    strategy.run(loop)
    return _best(lambda: strategy.run(loop)) / ALL_REDUCES


def stock_all_reduce_seconds() -> float:
    devices = [f"/device:CPU:{i}" for i in range(4)]
    strategy = tf.distribute.MirroredStrategy(devices)
    value = tf.ones([ALL_REDUCE_SIZE])

    def replica_step(total):
        context = tf.distribute.get_replica_context()
        local = value * (total + tf.cast(context.replica_id_in_sync_group, tf.float32))
        return tf.reduce_sum(context.all_reduce(tf.distribute.ReduceOp.SUM, local)) * 1e-9

    @tf.function
    def loop():
        def body(i, total):
            results = strategy.experimental_local_results(strategy.run(replica_step, (total,)))
            return i + 1, total + results[0]

        return tf.while_loop(lambda i, _: i < ALL_REDUCES, body, [0, 1.0])[1]

    loop()
    return _best(loop) / ALL_REDUCES


def _best(run, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        np.asarray(tf.nest.flatten(result)[0])
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [1, 2, 4]
    config.configure_ipu_system()
    rng = np.random.default_rng(0)
    x = rng.random((SAMPLES, 784), dtype=np.float32)
    y = rng.integers(0, 10, SAMPLES).astype(np.int32)

    rates = {}
    for ordinal, replicas in enumerate([1, 2, 4]):
        # One replica to tf.distribute; each program holds the device's replicas.
        strategy = ipu.ipu_strategy.IPUStrategy(f"/device:IPU:{ordinal}")
        rates[replicas] = keras_samples_per_second(strategy, x, y)
    for replicas, rate in rates.items():
        print(
            f"Keras MLP, {replicas} replica(s): {rate:9.0f} samples/s "
            f"({rate / rates[1]:.2f} of one replica)"
        )

    ours = openipu_all_reduce_seconds(ipu.ipu_strategy.IPUStrategy("/device:IPU:2"))
    stock = stock_all_reduce_seconds()
    print(
        f"All-reduce of {ALL_REDUCE_SIZE} floats over 4 replicas: openipu {ours * 1e6:8.1f} us, "
        f"stock tf.distribute {stock * 1e6:8.1f} us, ratio (stock / openipu) {stock / ours:.2f}"
    )


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    main()
