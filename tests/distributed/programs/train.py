"""Trains two small models under PopDistStrategy; each instance saves its weights.

Run by `poprun` (see test_poprun_training.py): Keras `fit`, and a custom loop
(`strategy.run` around a device loop fed by an infeed). Every instance feeds
its own data: replica g of R at step i gets batch i * R + g of the global
sequence, so step i of the run covers global batch i, as one process would.
"""

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.distributed.popdist_strategy import PopDistStrategy

import popdist
import popdist.tensorflow
from data import BATCH, EPOCHS, LEARNING_RATE, dataset, initial_weights

out = pathlib.Path(sys.argv[1])
popdist.init()
instance = popdist.getInstanceIndex()

config = ipu.config.IPUConfig()
popdist.tensorflow.set_ipu_config(config)
config.configure_ipu_system()
strategy = PopDistStrategy()

total = popdist.getNumTotalReplicas()
local = popdist.getNumLocalReplicas()
first = popdist.getReplicaIndexOffset()
x, y = dataset()
batches_x = x.reshape(-1, BATCH, x.shape[1])
batches_y = y.reshape(-1, BATCH, 1)
# The batches of this instance's replicas, in the order its replicas read them.
mine = [b for b in range(len(batches_x)) if first <= b % total < first + local]
local_x = batches_x[mine].reshape(-1, x.shape[1])
local_y = batches_y[mine].reshape(-1, 1)

# Keras fit.
with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.layers.Dense(3, activation="tanh"), tf.keras.layers.Dense(1)]
    )
    model.build((None, x.shape[1]))
    model.set_weights(initial_weights())
    model.compile(optimizer=tf.keras.optimizers.SGD(LEARNING_RATE), loss="mse")
    # Report the mean of this instance's replicas (the default is the last replica's).
    model.set_replication_options(replicated_metric_reduction_method="MEAN")
history = model.fit(local_x, local_y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0)

# A custom loop: a linear model trained by a device loop over an infeed.
steps = len(mine) // local
with strategy.scope():
    w = tf.Variable(np.zeros([x.shape[1], 1], np.float32))
    optimizer = tf.keras.optimizers.SGD(LEARNING_RATE)
infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
    tf.data.Dataset.from_tensor_slices((local_x, local_y)).batch(BATCH, drop_remainder=True)
)


@tf.function(jit_compile=True)
def training_loop():
    def step(features, labels):
        with tf.GradientTape() as tape:
            per_example = tf.square(tf.matmul(features, w) - labels)[:, 0]
            loss = tf.nn.compute_average_loss(per_example)
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])

    ipu.loops.repeat(steps, step, infeed_queue=infeed)


strategy.run(training_loop)

np.savez(
    out / f"weights_{instance}.npz",
    *model.get_weights(),
    linear=w.numpy(),
    losses=np.array(history.history["loss"]),
)
(out / f"popdist_{instance}.json").write_text(
    json.dumps(
        {
            "isPopdistEnvSet": popdist.isPopdistEnvSet(),
            "getNumInstances": popdist.getNumInstances(),
            "getInstanceIndex": instance,
            "getNumTotalReplicas": total,
            "getNumLocalReplicas": local,
            "getReplicaIndexOffset": first,
            "getDeviceId": popdist.getDeviceId(),
            "num_replicas_in_sync": strategy.num_replicas_in_sync,
            "process_count": config.experimental.multi_replica_distribution.process_count,
            "process_index": config.experimental.multi_replica_distribution.process_index,
        }
    )
)
