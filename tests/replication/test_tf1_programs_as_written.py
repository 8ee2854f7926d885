"""TF1 programs as written for the original: built before the system is configured,
run without initializing the feeds, after `disable_eager_execution()`.

The original's TF1 tests and tutorials build the graph (`ipu_scope`, `compile`,
infeeds and outfeeds), then configure the IPU system, then run a session; only the
user's variables and the infeed need initializing (graphcore/tensorflow
tensorflow/python/ipu/tests/replicated_graph_test.py, infeed_outfeed_test.py).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


@pytest.fixture
def unconfigured(tf1_graph):
    ipu.config.reset_ipu_configuration()
    yield tf1_graph
    ipu.config.reset_ipu_configuration()


def _configure(ipus: int) -> None:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    config.configure_ipu_system()


def _summing_program(values):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.from_tensor_slices(np.array(values, np.float32))
    )
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        return outfeed.enqueue(ipu.cross_replica_ops.cross_replica_sum(x))

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(2, body, [], infeed), [])
    return infeed, outfeed, run


@pytest.mark.parametrize("ipus", [1, 2, 4])
def test_graph_built_before_the_configuration_replicates_over_its_ipus(unconfigured, ipus):
    values = np.arange(8, dtype=np.float32)
    infeed, outfeed, run = _summing_program(values)
    dequeued = outfeed.dequeue()
    _configure(ipus)
    with tf.compat.v1.Session() as session:
        session.run(infeed.initializer)
        session.run(run)
        result = session.run(dequeued)
    # Iteration i of replica r reads element i * R + r; every replica gets the sum.
    expected = [[values[i * ipus : (i + 1) * ipus].sum()] * ipus for i in range(2)]
    if ipus == 1:
        expected = [row[0] for row in expected]
    np.testing.assert_array_equal(result, expected)


def test_dequeue_built_after_the_configuration_follows_the_pending_program(unconfigured):
    infeed, outfeed, run = _summing_program([1.0, 2.0, 3.0, 4.0])
    _configure(2)
    dequeued = outfeed.dequeue()
    with tf.compat.v1.Session() as session:
        session.run(infeed.initializer)
        session.run(run)
        np.testing.assert_array_equal(session.run(dequeued), [[3.0, 3.0], [7.0, 7.0]])


def test_training_built_before_the_configuration_averages_the_replicas_gradients(unconfigured):
    # Each replica computes loss = w * x on its own element; the cross-replica optimizer
    # applies the replicas' mean gradient (as the original's code does): w -= 0.1 * mean(x).
    data = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))

    def body(x):
        with tf.compat.v1.variable_scope("model", use_resource=True):
            w = tf.compat.v1.get_variable("w", shape=[], initializer=tf.constant_initializer(1.0))
        optimizer = ipu.optimizers.CrossReplicaOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.1)
        )
        return optimizer.minimize(w * x)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        train = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(2, body, [], infeed), [])
    with tf.compat.v1.variable_scope("model", reuse=True, use_resource=True):
        weight = tf.compat.v1.get_variable("w", shape=[])
    _configure(2)
    with tf.compat.v1.Session() as session:
        session.run(infeed.initializer)
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(train)
        assert session.run(weight) == pytest.approx(1.0 - 0.1 * 1.5 - 0.1 * 3.5)


def test_outfeeds_need_no_initializer_and_are_not_saved(unconfigured):
    _configure(1)
    infeed, outfeed, run = _summing_program([5.0, 6.0])
    dequeued = outfeed.dequeue()
    # The engine's buffers are not user variables: savers and initializers do not see them.
    assert tf.compat.v1.global_variables() == []
    with tf.compat.v1.Session() as session:
        session.run(infeed.initializer)
        session.run(run)
        np.testing.assert_array_equal(session.run(dequeued), [5.0, 6.0])


def test_a_graph_run_before_the_configuration_cannot_change_after(unconfigured):
    infeed, _, run = _summing_program([1.0, 2.0, 3.0, 4.0])
    with tf.compat.v1.Session() as session:
        session.run(infeed.initializer)  # the graph is run before any configuration
        _configure(2)
        with pytest.raises(RuntimeError, match="Configure the IPU system before the first"):
            session.run(run)


@pytest.mark.slow
def test_a_tf1_script_with_eager_execution_disabled(tmp_path):
    # The original's TF1 tutorials: disable eager execution first, build, configure, run.
    script = tmp_path / "tf1_script.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import tensorflow as tf
            from tensorflow.python import ipu

            tf.compat.v1.disable_eager_execution()
            dataset = tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32))
            infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.repeat())
            outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

            def body(total, x):
                total = total + ipu.cross_replica_ops.cross_replica_sum(x)
                return total, outfeed.enqueue(total)

            with ipu.scopes.ipu_scope("/device:IPU:0"):
                run = ipu.ipu_compiler.compile(
                    lambda: ipu.loops.repeat(3, body, [0.0], infeed), []
                )
            dequeued = outfeed.dequeue()
            config = ipu.config.IPUConfig()
            config.auto_select_ipus = 2
            config.configure_ipu_system()
            with tf.compat.v1.Session() as session:
                session.run(infeed.initializer)
                print("total", session.run(run)[0])
                print("outfeed", session.run(dequeued).tolist())
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Sums of (0, 1), (2, 3), (4, 5): 1, 5, 9 -> running totals 1, 6, 15.
    assert "total 15.0" in done.stdout
    assert "outfeed [[1.0, 1.0], [6.0, 6.0], [15.0, 15.0]]" in done.stdout
