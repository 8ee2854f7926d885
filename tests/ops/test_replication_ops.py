"""replication_index: the replica's index on 1, 2 and 4 replicas, built and compiled."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import replication_ops


@pytest.mark.parametrize("replicas", [1, 2, 4])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_each_replica_gets_its_index(run_on_replicas, replicas, jit_compile):
    got = run_on_replicas(
        lambda replica: replication_ops.replication_index(), replicas, jit_compile=jit_compile
    )
    assert [int(index) for index in got] == list(range(replicas))
    assert all(np.asarray(index).dtype == np.int32 for index in got)


def test_without_replication_it_is_zero():
    index = replication_ops.replication_index(name="where")
    assert index.dtype == tf.int32 and int(index) == 0
