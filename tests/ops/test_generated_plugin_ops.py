"""The generated op modules of the original's Poplar plugin
(`tensorflow.compiler.plugin.poplar.ops.gen_popops_ops`, `gen_poputil_ops`,
`gen_poprand_ops`) in user programs on replicated IPUs, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.plugin.poplar.ops import gen_popops_ops, gen_poprand_ops, gen_poputil_ops
from tensorflow.python import ipu

RNG = np.random.default_rng(20)


@pytest.fixture
def on_replicas():
    """Runs `step(*args)` `steps` times on `replicas` IPUs (IPUStrategy, XLA), returning
    what it outfed as numpy arrays of shape [steps, replicas, ...] ([steps, ...] for one
    replica)."""

    def run(step, replicas: int, args=(), steps: int = 1):
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = replicas
        config.configure_ipu_system()
        try:
            strategy = ipu.ipu_strategy.IPUStrategy()
            with strategy.scope():
                outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

                @tf.function(jit_compile=True)
                def program(*values):
                    outfeed.enqueue(step(*values))

                for _ in range(steps):
                    strategy.run(program, args=args)
                return tf.nest.map_structure(np.asarray, outfeed.dequeue())
        finally:
            ipu.config.reset_ipu_configuration()

    return run


def _run_compiled(model, inputs=(), feeds=None, runs: int = 1) -> list:
    """`model` compiled for one IPU in a TF1 graph, run `runs` times (variables initialized)."""
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        out = ipu.ipu_compiler.compile(model, list(inputs))
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    try:
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return [sess.run(out, feeds) for _ in range(runs)]
    finally:
        ipu.config.reset_ipu_configuration()


def _replica_values(shape):
    """Each replica's own input: a different slice of one numpy array."""
    data = RNG.normal(size=(4, *shape)).astype(np.float32)
    return data, lambda: tf.gather(tf.constant(data), gen_poputil_ops.replication_index())


# -- gen_popops_ops ------------------------------------------------------------------------------


def test_all_gather_infers_its_shape_outside_programs_and_fails_to_run_there(tf1_graph):
    x = tf.compat.v1.placeholder(np.float32, shape=(2, 4))
    (y,) = gen_popops_ops.ipu_all_gather([x], replication_factor=8)
    assert y.shape == (8, 2, 4)
    with tf.compat.v1.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError):
        sess.run(y, {x: np.zeros((2, 4))})


def test_all_gather_all_to_all_and_cross_replica_reductions(on_replicas):
    data, mine = _replica_values([4, 3])

    def step():
        x = mine()
        (gathered,) = gen_popops_ops.ipu_all_gather([x], replication_factor=4)
        return {
            "gathered": gathered,
            "to_all": gen_popops_ops.ipu_all_to_all(x, 0, 1, 4),
            "sum": gen_popops_ops.ipu_cross_replica_sum(x),
            "pair_sum": gen_popops_ops.ipu_cross_replica_sum(x, replica_group_size=2),
            "mean": gen_popops_ops.ipu_cross_replica_mean(x),
            "normalised": gen_poputil_ops.ipu_replication_normalise(x),
            "index": gen_poputil_ops.replication_index(),
        }

    got = tf.nest.map_structure(lambda v: v[0], on_replicas(step, 4))
    for r in range(4):
        np.testing.assert_array_equal(got["gathered"][r], data)
        # Replica r receives row r of every replica's input, side by side.
        np.testing.assert_array_equal(got["to_all"][r], np.concatenate(data[:, r : r + 1], 1))
        np.testing.assert_allclose(got["sum"][r], data.sum(0), rtol=1e-6)
        pair = data[2 * (r // 2) : 2 * (r // 2) + 2]
        np.testing.assert_allclose(got["pair_sum"][r], pair.sum(0), rtol=1e-6)
        np.testing.assert_allclose(got["mean"][r], data.mean(0), rtol=1e-6)
        np.testing.assert_allclose(got["normalised"][r], data[r] / 4, rtol=1e-6)
    np.testing.assert_array_equal(got["index"], np.arange(4))


def test_multi_slice_and_updates_match_numpy(on_replicas):
    table = RNG.normal(size=(10, 3)).astype(np.float32)
    indices = np.array([[1, 7], [7, 0], [9, 1]], np.int32)
    updates = RNG.normal(size=(3, 2, 3)).astype(np.float32)

    def step():
        return {
            "slice": gen_popops_ops.ipu_multi_slice(table, indices),
            "add": gen_popops_ops.ipu_multi_update_add(
                table, indices=indices, updates=updates, scale=0.5
            ),
            "update": gen_popops_ops.ipu_multi_update(
                table, indices=indices[:1], updates=updates[:1]
            ),
            # An index outside the table changes nothing.
            "outside": gen_popops_ops.ipu_multi_update(
                table, indices=[[10, 3]], updates=updates[:1]
            ),
        }

    got = tf.nest.map_structure(lambda v: v[0], on_replicas(step, 1))
    np.testing.assert_array_equal(got["slice"], table[indices])
    added = table.copy()
    np.add.at(added, indices.reshape(-1), 0.5 * updates.reshape(-1, 3))
    np.testing.assert_allclose(got["add"], added, rtol=1e-6)
    replaced = table.copy()
    replaced[indices[0]] = updates[0]
    np.testing.assert_array_equal(got["update"], replaced)
    replaced = table.copy()
    replaced[3] = updates[0, 1]
    np.testing.assert_array_equal(got["outside"], replaced)


def test_multi_slice_and_update_shapes():
    table = tf.zeros([10, 3])
    assert gen_popops_ops.ipu_multi_slice(table, tf.zeros([4, 2], tf.int32)).shape == (4, 2, 3)
    with pytest.raises(ValueError, match="rank 2"):
        gen_popops_ops.ipu_multi_slice(tf.zeros([10]), tf.zeros([4], tf.int32))
    with pytest.raises(ValueError, match="updates"):
        gen_popops_ops.ipu_multi_update_add(
            table, indices=tf.zeros([4], tf.int32), updates=tf.zeros([3, 3]), scale=1.0
        )


def test_sequence_slice_and_unpack_match_numpy(on_replicas):
    src = RNG.normal(size=(6, 2)).astype(np.float32)
    dst = RNG.normal(size=(5, 2)).astype(np.float32)
    num_elems, src_offsets, dst_offsets = [2, 1], [0, 4], [3, 0]

    def step():
        return {
            "slice": gen_popops_ops.ipu_sequence_slice(
                dst, src, num_elems, src_offsets, dst_offsets, zero_unused=True
            ),
            "unpack": gen_popops_ops.ipu_sequence_slice_unpack(
                src, num_elems, src_offsets, [0, 2], total_elements=3
            ),
        }

    got = tf.nest.map_structure(lambda v: v[0], on_replicas(step, 1))
    expected = np.zeros_like(dst)
    expected[3:5] = src[0:2]
    expected[0:1] = src[4:5]
    np.testing.assert_array_equal(got["slice"], expected)
    np.testing.assert_array_equal(got["unpack"], np.concatenate([src[0:2], src[4:5]]))


# -- gen_poputil_ops: stateful gradient accumulation ---------------------------------------------


def test_stateful_gradient_accumulate_gives_each_group_s_sum(on_replicas):
    grads = RNG.normal(size=(6, 2)).astype(np.float32)

    def step():
        def body(i, outputs):
            out = gen_poputil_ops.ipu_stateful_gradient_accumulate(
                tf.gather(grads, i), num_mini_batches=3
            )
            return i + 1, outputs.write(i, out)

        _, outputs = tf.while_loop(
            lambda i, _: i < 6, body, (0, tf.TensorArray(tf.float32, size=6))
        )
        return outputs.stack()

    got = on_replicas(step, 2)[0]
    expected = np.zeros_like(grads)
    expected[2], expected[5] = grads[:3].sum(0), grads[3:].sum(0)
    for replica in range(2):
        np.testing.assert_allclose(got[replica], expected, rtol=1e-5)


def test_stateful_gradient_accumulate_with_momentum_keeps_the_sum_in_the_variable(tf1_graph):
    # Groups of 2 mini-batches with momentum 0.5: the variable holds 0.5 * previous + sum.
    grads = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)

    def my_net():
        var = tf.compat.v1.get_variable(
            "accum", [1], tf.float32, tf.compat.v1.zeros_initializer(), use_resource=True
        )

        def body(i, outputs):
            # One op, run once per iteration: its counter numbers the mini-batches.
            out = gen_poputil_ops.ipu_stateful_gradient_accumulate_with_momentum(
                var.handle, tf.gather(grads, i), momentum=0.5, num_mini_batches=2
            )
            return i + 1, outputs.write(i, out)

        _, outputs = tf.compat.v1.while_loop(
            lambda i, _: i < 4, body, (0, tf.TensorArray(tf.float32, size=4))
        )
        with tf.control_dependencies([outputs.flow]):
            return outputs.stack(), var.read_value()

    ((got, held),) = _run_compiled(my_net)
    first = grads[0] + grads[1]
    second = 0.5 * first + grads[2] + grads[3]
    np.testing.assert_allclose(got, [[0.0], first, [0.0], second])
    np.testing.assert_allclose(held, second)


# -- gen_poprand_ops ----------------------------------------------------------------------------

X = RNG.uniform(1, 2, size=(32, 32)).astype(np.float32)


def test_dropout_outputs_keep_probability_scale_and_reproducible_seed(on_replicas):
    def step():
        out, seed, reference = gen_poprand_ops.ipu_dropout(X, rate=0.75, scale=2.0)
        assert reference.dtype == tf.variant and reference.shape == ()
        again = gen_poprand_ops.ipu_dropout_with_seed(X, seed, rate=0.75, scale=2.0)
        return {"out": out, "seed": seed, "again": again.output, "again_seed": again.output_seed}

    got = on_replicas(step, 2, steps=2)
    kept = got["out"] != 0
    # `rate` is the probability of keeping; kept elements are multiplied by `scale`.
    assert abs(kept.mean() - 0.75) < 0.03
    np.testing.assert_allclose(got["out"][kept], np.broadcast_to(2 * X, kept.shape)[kept])
    assert got["seed"].dtype == np.int32 and got["seed"].shape == (2, 2, 2)
    # The seed output is the seed the mask came from.
    np.testing.assert_array_equal(got["again"], got["out"])
    np.testing.assert_array_equal(got["again_seed"], got["seed"])
    # A fresh seed for every replica and every run.
    seeds = {tuple(s) for s in got["seed"].reshape(-1, 2)}
    assert len(seeds) == 4


def test_dropout_with_a_user_seed_matches_rand_ops_dropout(tf1_graph):
    def model(x):
        dropped = gen_poprand_ops.ipu_dropout_with_seed(x, [10, 10], rate=0.6, scale=1 / 0.6)
        no_ref = gen_poprand_ops.ipu_dropout_with_seed_no_ref(x, [10, 10], rate=0.6, scale=1.0)
        with_ref = gen_poprand_ops.ipu_dropout_with_seed_and_reference(
            x, [10, 10], dropped.reference, rate=0.6, scale=1 / 0.6
        )
        public = ipu.rand_ops.dropout(x, rate=0.4, seed=[10, 10])
        return dropped.output, dropped.output_seed, no_ref.output, with_ref.output, public

    with tf.device("cpu"):
        inp = tf.compat.v1.placeholder(np.float32, X.shape)
    first, second = _run_compiled(model, [inp], {inp: X}, runs=2)
    dropped, seed, no_ref, with_ref, public = first
    np.testing.assert_array_equal(seed, [10, 10])
    np.testing.assert_allclose(dropped, public, rtol=1e-6)
    np.testing.assert_allclose(with_ref, public, rtol=1e-6)
    np.testing.assert_allclose(no_ref * (1 / 0.6), public, rtol=1e-6)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_unseeded_dropout_draws_new_seeds_per_call_and_run(tf1_graph):
    def model(x):
        first = gen_poprand_ops.ipu_dropout(x, rate=0.5, scale=1.0)
        second = gen_poprand_ops.ipu_dropout_no_ref(first.output, rate=0.5, scale=1.0)
        return first.seed, second.seed

    with tf.device("cpu"):
        inp = tf.compat.v1.placeholder(np.float32, [2])
    runs = _run_compiled(model, [inp], {inp: [2, 4]}, runs=2)
    seeds = {tuple(s) for run in runs for s in run}
    assert len(seeds) == 4


def test_dropout_gradient_uses_the_forward_mask(tf1_graph):
    def model():
        w = tf.compat.v1.get_variable(
            "w", X.shape, initializer=tf.compat.v1.constant_initializer(X), use_resource=True
        )
        out, _, _ = gen_poprand_ops.ipu_dropout(w, rate=0.5, scale=3.0)
        (grad,) = tf.gradients(tf.reduce_sum(out), [w])
        return out, grad

    ((out, grad),) = _run_compiled(model)
    # d out / d w is `scale` where the element was kept, else 0.
    np.testing.assert_array_equal(grad, np.where(out != 0, 3.0, 0.0))


def test_dropout_rejects_bad_attributes():
    with pytest.raises(TypeError, match="rate"):
        gen_poprand_ops.ipu_dropout(X, rate=None, scale=1.0)
    with pytest.raises(TypeError, match="scale"):
        gen_poprand_ops.ipu_dropout(X, rate=0.5, scale="big")
    with pytest.raises(ValueError, match="shape"):
        gen_poprand_ops.ipu_dropout_with_seed(X, [1, 2, 3], rate=0.5, scale=1.0)


# -- the other ops the original's library calls ------------------------------------------------


def test_reduce_scatter_execution_counter_and_layout_ops(on_replicas):
    data, mine = _replica_values([5])

    def step():
        x = mine()

        def body(digits):
            # Appends the iteration (1-based) as a decimal digit.
            return digits * 10 + gen_poputil_ops.execution_counter() + 1

        (scattered,) = gen_popops_ops.ipu_reduce_scatter(
            [x], op="COLLECTIVE_OP_ADD", replication_factor=2
        )
        return {
            "scattered": scattered,
            "digits": ipu.loops.repeat(3, body, [tf.constant(0)]),
            "remapped": gen_poputil_ops.ipu_remap(gen_poputil_ops.ipu_remap_deduce(x)),
        }

    got = tf.nest.map_structure(lambda v: v[0], on_replicas(step, 2))
    # The sum over the 2 replicas, padded to 6 elements; replica r keeps elements 3r..3r+2.
    total = np.pad(data[:2].sum(0), [0, 1])
    for r in range(2):
        np.testing.assert_allclose(got["scattered"][r], total[3 * r : 3 * r + 3], rtol=1e-6)
        np.testing.assert_array_equal(got["remapped"][r], data[r])
    np.testing.assert_array_equal(got["digits"], [123, 123])


def test_fifo_normalise_image_and_device_sync(on_replicas):
    image = RNG.integers(0, 255, size=(2, 2, 3)).astype(np.float32)
    offsets, scales = np.array([1, 2, 3], np.float32), np.array([0.5, 0.25, 2], np.float32)

    def step():
        def body(x, seen):
            return x + 1, seen * 10 + gen_poputil_ops.ipu_fifo(x, depth=1, offload=False)

        _, seen = ipu.loops.repeat(3, body, [tf.constant(1), tf.constant(0)])
        return {
            "seen": seen,
            "image": gen_popops_ops.normalise_image(image, offsets, scales, scale=2.0),
        }

    got = tf.nest.map_structure(lambda v: v[0], on_replicas(step, 1))
    # One call late: zeros first, then the values 1, 2.
    np.testing.assert_array_equal(got["seen"], 12)
    expected = np.concatenate([(image * 2.0 - offsets) * scales, np.zeros((2, 2, 1))], -1)
    np.testing.assert_allclose(got["image"], expected, rtol=1e-6)
    with tf.Graph().as_default():
        assert gen_poputil_ops.device_sync().type == "NoOp"  # an operation without outputs


def test_histogram_and_barrier(on_replicas):
    values = RNG.normal(size=[50]).astype(np.float32)
    levels = np.array([-1.0, 0.0, 0.5], np.float32)

    def step():
        hist = gen_popops_ops.ipu_histogram(values, levels, absolute_of_input=True)
        first, second = gen_poputil_ops.ipu_barrier([values, levels])
        return {
            "hist": hist,
            "updated": gen_popops_ops.ipu_histogram_update(
                hist, values, levels, absolute_of_input=False
            ),
            "first": first,
            "second": second,
        }

    got = tf.nest.map_structure(lambda v: v[0], on_replicas(step, 1))
    # Bins (-inf, -1], (-1, 0], (0, 0.5], (0.5, inf), as np.digitize with right=True.
    absolute = np.bincount(np.digitize(np.abs(values), levels, right=True), minlength=4)
    signed = np.bincount(np.digitize(values, levels, right=True), minlength=4)
    np.testing.assert_array_equal(got["hist"], absolute)
    np.testing.assert_array_equal(got["updated"], absolute + signed)
    np.testing.assert_array_equal(got["first"], values)
    np.testing.assert_array_equal(got["second"], levels)
