"""Collectives over replica groups that span some of the instances, run by `poprun`.

4 instances of 1 replica: groups of 2 replicas, {0, 1} and {2, 3}, each span two of the
four instances. Each instance writes its replica's results to a JSON file.
"""

import json
import pathlib
import sys

import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.distributed.popdist_strategy import PopDistStrategy
from tensorflow.python.ipu.ops import all_to_all_op

import popdist
import popdist.tensorflow

out = pathlib.Path(sys.argv[1])
rank = popdist.getInstanceIndex()

config = ipu.config.IPUConfig()
popdist.tensorflow.set_ipu_config(config)
config.configure_ipu_system()
strategy = PopDistStrategy()
outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()


def grouped():
    index = tf.cast(ipu.replication_ops.replication_index(), tf.float32)
    value = (index + 1.0) * 10.0
    total = ipu.cross_replica_ops.cross_replica_sum(value, replica_group_size=2)
    gathered = all_to_all_op.all_gather(value, replication_factor=2)
    with tf.control_dependencies([outfeed.enqueue({"sum": total, "gather": gathered})]):
        return tf.identity(total)


with strategy.scope():
    strategy.run(grouped)
results = {name: value.numpy().tolist() for name, value in outfeed.dequeue().items()}
(out / f"group_collectives_{rank}.json").write_text(json.dumps(results))
