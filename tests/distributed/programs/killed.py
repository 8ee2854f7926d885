"""Instance 1 kills itself once training has started; instance 0 is then waiting on it."""

import os
import signal

import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.distributed.popdist_strategy import PopDistStrategy

import popdist
import popdist.tensorflow

config = ipu.config.IPUConfig()
popdist.tensorflow.set_ipu_config(config)
config.configure_ipu_system()
strategy = PopDistStrategy()
with strategy.scope():
    counter = tf.Variable(0.0)


def step():
    context = tf.distribute.get_replica_context()
    counter.assign_add(context.all_reduce("sum", tf.constant(1.0)))


strategy.run(step)
print(f"step done: {float(counter.numpy())}")
if popdist.getInstanceIndex() == 1:
    os.kill(os.getpid(), signal.SIGKILL)
for _ in range(1000):
    strategy.run(step)  # blocks: instance 1 never joins the collective
