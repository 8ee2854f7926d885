"""Collectives in a plain TF1 `ipu_scope` (outside `ipu_compiler.compile`).

The original clusters such ops into one program replicated over the configured device's
IPUs, every replica fed the same values, and a fetched tensor is replica 0's
(graphcore/tensorflow tensorflow/python/ipu/tests/replicated_seed_control_test.py).
The programs here are written as users write them: the graph built before or after
`configure_ipu_system`, then run in a session; results are checked against numpy.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.plugin.poplar.ops import gen_popops_ops, gen_poputil_ops
from tensorflow.python import ipu

v1 = tf.compat.v1
X = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]], np.float32)


@pytest.fixture
def unconfigured(tf1_graph):
    ipu.config.reset_ipu_configuration()
    yield tf1_graph
    ipu.config.reset_ipu_configuration()


def _configure(ipus: int, prng_stability: bool = False) -> None:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    config.experimental.enable_prng_stability = prng_stability
    config.configure_ipu_system()


def _build_and_run(graph, ipus: int, configure_first: bool, build, runs: int = 1):
    """`build(x)` in `ipu_scope("/device:IPU:0")`, x a placeholder fed X; the fetched values."""
    if configure_first:
        _configure(ipus)
    x = v1.placeholder(np.float32, X.shape)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        outputs = build(x)
    if not configure_first:
        _configure(ipus)
    with v1.Session(graph=graph) as session:
        return [session.run(outputs, {x: X}) for _ in range(runs)][-1]


@pytest.mark.parametrize("configure_first", [False, True], ids=["built_first", "configured_first"])
@pytest.mark.parametrize("ipus", [2, 4])
def test_all_gather_and_cross_replica_sum_see_the_devices_replicas(
    unconfigured, ipus, configure_first
):
    def build(x):
        return {
            "gathered": ipu.ops.all_to_all_op.all_gather(x, ipus),
            "gathered_pairs": gen_popops_ops.ipu_all_gather([x], replication_factor=2)[0],
            "sum": ipu.ops.cross_replica_ops.cross_replica_sum(x),
            "pair_sum": ipu.ops.cross_replica_ops.cross_replica_sum(x, replica_group_size=2),
            "mean": ipu.ops.cross_replica_ops.cross_replica_mean(x),
        }

    # Run twice: the graph finished at the first run runs as it is at the second.
    got = _build_and_run(unconfigured, ipus, configure_first, build, runs=2)
    # Every replica computes the same x: the groups combine copies of it.
    np.testing.assert_array_equal(got["gathered"], np.stack([X] * ipus))
    np.testing.assert_array_equal(got["gathered_pairs"], np.stack([X, X]))
    np.testing.assert_array_equal(got["sum"], X * ipus)
    np.testing.assert_array_equal(got["pair_sum"], X * 2)
    np.testing.assert_array_equal(got["mean"], X)


@pytest.mark.parametrize("configure_first", [False, True], ids=["built_first", "configured_first"])
def test_replica_zero_views_of_the_other_collectives(unconfigured, configure_first):
    def build(x):
        return {
            "index": ipu.replication_ops.replication_index(),
            "scattered": ipu.ops.reduce_scatter_op.reduce_scatter(x[0], 2),
            "to_all": ipu.ops.all_to_all_op.all_to_all(x, 1, 0, 2),
            "normalised": gen_poputil_ops.ipu_replication_normalise(x),
            # Each replica gathers its own index alone: replica 0's is 0.
            "own_index": ipu.ops.all_to_all_op.all_gather(
                ipu.replication_ops.replication_index(), 1
            ),
        }

    got = _build_and_run(unconfigured, 4, configure_first, build)
    assert got["index"] == 0
    # Replica 0 keeps the first half of the sum of its pair's (equal) rows.
    np.testing.assert_array_equal(got["scattered"], 2 * X[0, :2])
    # Replica 0 receives the first column block of both replicas of its pair.
    np.testing.assert_array_equal(got["to_all"], np.concatenate([X[:, :2], X[:, :2]], axis=0))
    np.testing.assert_allclose(got["normalised"], X / 4)
    np.testing.assert_array_equal(got["own_index"], [0])


def test_a_group_size_not_dividing_the_replicas_fails_at_the_first_run(unconfigured):
    x = v1.placeholder(np.float32, X.shape)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        summed = ipu.ops.cross_replica_ops.cross_replica_sum(x, replica_group_size=3)
    _configure(4)
    with (
        v1.Session(graph=unconfigured) as session,
        pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"The replica group size \(got 3\) does not evenly divide the total number "
            r"of replicas \(got 4\)",
        ),
    ):
        session.run(summed, {x: X})


def test_a_group_size_not_dividing_the_configured_replicas_is_refused_when_built(unconfigured):
    # As in a program compiled after the configuration (collectives.py, rule E59).
    _configure(4)
    x = v1.placeholder(np.float32, X.shape)
    with (
        ipu.scopes.ipu_scope("/device:IPU:0"),
        pytest.raises(ValueError, match=r"does not evenly divide the total number"),
    ):
        ipu.ops.all_to_all_op.all_gather(x, 3)


_DIFFER = r"openipu computes the replicas of a plain ipu_scope as identical"


@pytest.mark.parametrize("configure_first", [False, True], ids=["built_first", "configured_first"])
def test_gathering_the_replica_index_is_not_implemented(unconfigured, configure_first):
    def build(x):
        index = tf.cast(ipu.replication_ops.replication_index(), np.float32)
        return ipu.ops.all_to_all_op.all_gather(x + index, 2)

    # Refused when built: the group's size is known then.
    with pytest.raises(NotImplementedError, match=_DIFFER):
        _build_and_run(unconfigured, 2, configure_first, build)


@pytest.mark.parametrize("configure_first", [False, True], ids=["built_first", "configured_first"])
def test_summing_the_replica_index_over_all_replicas_is_not_implemented(
    unconfigured, configure_first
):
    def build(x):
        index = tf.cast(ipu.replication_ops.replication_index(), np.float32)
        return ipu.ops.cross_replica_ops.cross_replica_sum(x + index)

    # Built before the configuration, the default group (every replica) is known at the
    # first run: the sum is refused there.
    with pytest.raises(NotImplementedError, match=_DIFFER):
        _build_and_run(unconfigured, 2, configure_first, build)


@pytest.mark.parametrize("configure_first", [False, True], ids=["built_first", "configured_first"])
def test_summing_random_numbers_of_the_ipu_is_not_implemented(unconfigured, configure_first):
    def build(x):
        return ipu.ops.cross_replica_ops.cross_replica_sum(x + tf.random.uniform(X.shape))

    # Each replica draws its own numbers (prng stability is off): refused when built, or
    # at the first run when the configuration says so.
    with pytest.raises(NotImplementedError, match=r"RandomUniform"):
        _build_and_run(unconfigured, 2, configure_first, build)


def test_random_numbers_of_the_host_or_with_prng_stability_are_summed(unconfigured):
    _configure(2, prng_stability=True)
    host_noise = tf.random.uniform([3], seed=1)  # drawn once on the host, fed to both
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        ipu_noise = tf.random.uniform([3], seed=2)
        sums = [ipu.ops.cross_replica_ops.cross_replica_sum(n) for n in (host_noise, ipu_noise)]
    with v1.Session(graph=unconfigured) as session:
        noises, got = session.run([[host_noise, ipu_noise], sums])
    for noise, summed in zip(noises, got, strict=True):
        np.testing.assert_allclose(summed, 2 * noise)


def test_collectives_in_v1_control_flow_built_before_the_configuration(tmp_path):
    # `disable_v2_behavior()` builds TF1's own while loops and conds, whose contexts the
    # collectives are built in again at the first run (a process of its own: it is global).
    script = tmp_path / "tf1_control_flow.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import tensorflow as tf
            from tensorflow.python import ipu

            tf.compat.v1.disable_v2_behavior()
            x = tf.compat.v1.placeholder(np.float32, [3])
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                def body(i, total):
                    return i + 1, total + ipu.cross_replica_ops.cross_replica_sum(x)

                _, total = tf.compat.v1.while_loop(
                    lambda i, _: i < 3, body, [0, tf.zeros([3])]
                )
                summed = tf.compat.v1.cond(
                    x[0] > 0, lambda: ipu.cross_replica_ops.cross_replica_sum(x), lambda: x
                )
            config = ipu.config.IPUConfig()
            config.auto_select_ipus = 2
            config.configure_ipu_system()
            with tf.compat.v1.Session() as session:
                got = session.run([total, summed], {x: [1.0, 2.0, 3.0]})
                print("got", [v.tolist() for v in got])
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # 3 iterations of the sum over 2 replicas; the cond's branch sums once.
    assert "got [[6.0, 12.0, 18.0], [2.0, 4.0, 6.0]]" in done.stdout
