"""Gradient accumulation optimizers against a numpy reference over several weight updates.

N mini-batches accumulate per update; the variables stay put in between. The
cross-replica variants average the accumulated gradients over 1, 2 and 4
replicas when they apply them.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from optimizer_references import INITIAL, REFERENCES, SGD, Adam, gradient, problem, tf_loss

from openipu._src.engine.gradient_accumulation import GradientAccumulationReductionMethod
from openipu._src.optimizers.cross_replica_optimizer import CrossReplicaOptimizer
from openipu._src.optimizers.gradient_accumulation_optimizer import (
    CrossReplicaGradientAccumulationOptimizer,
    CrossReplicaGradientAccumulationOptimizerV2,
    GradientAccumulationOptimizer,
    GradientAccumulationOptimizerV2,
)

METHODS = ["SUM", "MEAN", "RUNNING_MEAN"]
STEPS, N = 7, 3  # two updates and a partial accumulation


def train(replicas, make_optimizer, a, b, jit_compile=False):
    """Runs one step per mini-batch; returns w after each step (per replica) and the optimizer."""
    with replicas.scope():
        w = tf.Variable(INITIAL)
        optimizer = make_optimizer()

    def step(replica, a_t, b_t):
        optimizer.minimize(tf_loss(w, a_t[replica], b_t[replica]), var_list=[w])

    run = replicas.function(step, jit_compile=jit_compile)
    history = []
    for t in range(len(a)):
        run(tf.constant(a[t]), tf.constant(b[t]))
        history.append(replicas.local_values(w))
    return history, optimizer


def numpy_train(reference, a, b, num_mini_batches, method="SUM"):
    """w after each step; each replica accumulates its own gradients, updates use their mean."""
    w = INITIAL.astype(np.float64)
    accumulators = np.zeros((a.shape[1], *w.shape))
    history = []
    for t in range(len(a)):
        n = t % num_mini_batches
        for r in range(a.shape[1]):
            g = gradient(w, a[t, r], b[t, r])
            if method == "SUM":
                accumulators[r] += g
            elif method == "MEAN":
                accumulators[r] += g / num_mini_batches
            else:
                accumulators[r] = accumulators[r] * n / (n + 1) + g / (n + 1)
        if n == num_mini_batches - 1:
            w = reference.apply(w, accumulators.mean(axis=0))
            accumulators[:] = 0
        history.append(w)
    return history


def assert_histories_match(got, expected):
    for step, (replica_values, w) in enumerate(zip(got, expected, strict=True)):
        for value in replica_values:
            np.testing.assert_allclose(value, w, rtol=3e-5, atol=1e-6, err_msg=f"step {step}")


@pytest.mark.parametrize("count", [np.int64(N), float(N)])
@pytest.mark.parametrize(
    "wrapper", [GradientAccumulationOptimizer, CrossReplicaGradientAccumulationOptimizer]
)
def test_v1_num_mini_batches_may_be_any_whole_number(replicas, wrapper, count):
    """The original only checks num_mini_batches >= 1 and V1 gives the count to an int
    attribute: a NumPy int or 3.0 counts as 3. (V2 hands it to an int32 op input, which
    refuses both when gradients are applied: test_optimizers_original_rules.py.)"""
    a, b = problem(STEPS, 1)
    got, optimizer = train(replicas(1), lambda: wrapper(SGD(0.1).make(), count), a, b)
    assert_histories_match(got, numpy_train(SGD(0.1), a, b, N))
    assert optimizer.num_mini_batches is count  # kept as given


def test_v2_num_mini_batches_may_be_a_numpy_int32(replicas):
    a, b = problem(STEPS, 1)
    got, _ = train(
        replicas(1), lambda: GradientAccumulationOptimizerV2(SGD(0.1).make(), np.int32(N)), a, b
    )
    assert_histories_match(got, numpy_train(SGD(0.1), a, b, N))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", sorted(REFERENCES))
def test_v2_accumulates_then_applies(replicas, method, kind):
    a, b = problem(STEPS, 1)
    got, _ = train(
        replicas(1),
        lambda: GradientAccumulationOptimizerV2(
            REFERENCES[kind]().make(), N, reduction_method=method
        ),
        a,
        b,
    )
    assert_histories_match(got, numpy_train(REFERENCES[kind](), a, b, N, method))


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("method", METHODS)
def test_cross_replica_v2_averages_the_accumulations(replicas, count, method):
    a, b = problem(STEPS, count, seed=count)
    got, _ = train(
        replicas(count),
        lambda: CrossReplicaGradientAccumulationOptimizerV2(
            REFERENCES["momentum"]().make(), N, reduction_method=method
        ),
        a,
        b,
    )
    assert_histories_match(got, numpy_train(REFERENCES["momentum"](), a, b, N, method))


@pytest.mark.parametrize("count", [2, 4])
def test_cross_replica_v2_with_adam(replicas, count):
    a, b = problem(STEPS, count, seed=5)
    got, _ = train(
        replicas(count),
        lambda: CrossReplicaGradientAccumulationOptimizerV2(REFERENCES["adam"]().make(), 2),
        a,
        b,
    )
    assert_histories_match(got, numpy_train(REFERENCES["adam"](), a, b, 2))


@pytest.mark.parametrize("count", [2, 4])
def test_v2_on_replicas_with_equal_data_is_one_replica(replicas, count):
    a, b = problem(STEPS, 1, seed=6)
    a, b = np.repeat(a, count, axis=1), np.repeat(b, count, axis=1)
    got, _ = train(
        replicas(count),
        lambda: GradientAccumulationOptimizerV2(REFERENCES["sgd"]().make(), N),
        a,
        b,
    )
    assert_histories_match(got, numpy_train(REFERENCES["sgd"](), a[:, :1], b[:, :1], N))


@pytest.mark.parametrize("kind", ["sgd", "momentum"])
def test_v1_sums_then_applies(replicas, kind):
    a, b = problem(STEPS, 1, seed=7)
    got, _ = train(
        replicas(1), lambda: GradientAccumulationOptimizer(REFERENCES[kind]().make(), N), a, b
    )
    assert_histories_match(got, numpy_train(REFERENCES[kind](), a, b, N))


@pytest.mark.parametrize("count", [1, 2, 4])
def test_cross_replica_v1_averages_the_sums(replicas, count):
    a, b = problem(STEPS, count, seed=8)
    got, _ = train(
        replicas(count),
        lambda: CrossReplicaGradientAccumulationOptimizer(REFERENCES["momentum"]().make(), N),
        a,
        b,
    )
    assert_histories_match(got, numpy_train(REFERENCES["momentum"](), a, b, N))


@pytest.mark.parametrize(
    "wrapper", [GradientAccumulationOptimizer, CrossReplicaGradientAccumulationOptimizer]
)
def test_v1_refuses_other_optimizers_unless_told_not_to_check(replicas, wrapper):
    # As the original: building the wrapper works; applying gradients with it fails.
    unchecked = wrapper(tf.compat.v1.train.AdamOptimizer(0.1), N)
    variable = tf.Variable(1.0)
    with pytest.raises(
        tf.errors.FailedPreconditionError,
        match="only supported with `GradientDescentOptimizer` and `MomentumOptimizer`.*"
        "wraps AdamOptimizer",
    ):
        unchecked.apply_gradients([(tf.constant(0.5), variable)])
    a, b = problem(STEPS, 1, seed=9)
    got, _ = train(
        replicas(1), lambda: wrapper(REFERENCES["adam"]().make(), N, verify_usage=False), a, b
    )
    assert_histories_match(got, numpy_train(REFERENCES["adam"](), a, b, N))


def test_compiled_equals_built(replicas):
    a, b = problem(STEPS, 1, seed=10)

    def make():
        return GradientAccumulationOptimizerV2(
            REFERENCES["adam"]().make(), N, reduction_method="running_mean"
        )

    compiled, _ = train(replicas(1), make, a, b, jit_compile=True)
    built, _ = train(replicas(1), make, a, b)
    assert_histories_match(compiled, [values[0] for values in built])


def test_accumulation_counts_inside_a_compiled_loop():
    gradients = np.random.default_rng(11).normal(size=(STEPS, 3)).astype(np.float32)
    w = tf.Variable(INITIAL)
    optimizer = GradientAccumulationOptimizerV2(SGD(0.1).make(), N)

    @tf.function(jit_compile=True)
    def loop():
        for t in tf.range(STEPS):
            optimizer.apply_gradients([(tf.gather(gradients, t), w)])

    loop()
    expected = INITIAL - 0.1 * (gradients[:3].sum(0) + gradients[3:6].sum(0))
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-6)
    loop()  # the seventh mini-batch is still pending: one more, then an update, ...
    expected -= 0.1 * (gradients[6] + gradients[:2].sum(0))
    expected -= 0.1 * gradients[2:5].sum(0)
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-5)


def step_function(optimizer, variable):
    @tf.function
    def step(gradient):
        optimizer.apply_gradients([(gradient, variable)])

    return step


def test_state_is_made_once_across_traces():
    w = tf.Variable(INITIAL)
    optimizer = GradientAccumulationOptimizerV2(SGD(0.1).make(), 2)
    first, second = step_function(optimizer, w), step_function(optimizer, w)
    first(tf.ones(3))
    first(tf.ones([3], tf.float32) * 2)  # same signature: no retrace
    second(tf.ones(3))  # a new trace finds the accumulators (holding the third mini-batch)
    first(tf.constant([1.0, 1.0, 1.0]))
    # The accumulators are engine state: the optimizer's variables are the wrapped one's
    # (the original's IPUOptimizer.variables forwards to the wrapped optimizer).
    assert optimizer.variables() == optimizer._opt.variables()
    np.testing.assert_allclose(w.numpy(), INITIAL - 0.1 * 3 - 0.1 * 2, rtol=1e-6)


class CastingGradientDescent(tf.compat.v1.train.GradientDescentOptimizer):
    """Casts gradients to their variable's type, remembering the type it was given."""

    received = []

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        self.received.extend(g.dtype for g, _ in grads_and_vars)
        cast = [(tf.cast(g, v.dtype), v) for g, v in grads_and_vars]
        return super().apply_gradients(cast, global_step, name)


@pytest.mark.parametrize("dtype", [tf.float32, lambda variable: tf.float32])
def test_accumulator_dtype(dtype):
    w = tf.Variable(np.zeros(2, np.float16))
    inner = CastingGradientDescent(1e-3)
    inner.received = []
    optimizer = GradientAccumulationOptimizerV2(inner, 4, dtype=dtype)
    step = step_function(optimizer, w)
    for _ in range(4):
        step(tf.constant([1000.0, 1.0], tf.float16))
    assert set(inner.received) == {tf.float32}  # once per trace
    np.testing.assert_allclose(w.numpy(), [-4.0, -4e-3], rtol=1e-3)


def test_running_mean_in_float16_follows_its_formula():
    gradients = np.random.default_rng(12).normal(size=(4, 5)).astype(np.float16)
    w = tf.Variable(np.zeros(5, np.float16))
    inner = tf.compat.v1.train.GradientDescentOptimizer(1.0)
    optimizer = GradientAccumulationOptimizerV2(inner, 4, reduction_method="RUNNING_MEAN")
    step = step_function(optimizer, w)
    accumulator = np.zeros(5, np.float16)
    for n, g in enumerate(gradients):
        step(tf.constant(g))
        n = np.float16(n)
        accumulator = accumulator * n / (n + 1) + g / (n + 1)
    np.testing.assert_array_equal(w.numpy(), -accumulator)
    np.testing.assert_allclose(w.numpy(), -gradients.astype(np.float32).mean(0), atol=2e-3)


def test_tf1_session_program_with_global_step(tf1_graph):
    a, b = problem(STEPS, 1, seed=13)
    a_in = tf.compat.v1.placeholder(tf.float32, [3])
    b_in = tf.compat.v1.placeholder(tf.float32, [3])
    w = tf.compat.v1.get_variable("w", initializer=INITIAL)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = GradientAccumulationOptimizerV2(REFERENCES["momentum"]().make(), N)
    train_op = optimizer.minimize(tf_loss(w, a_in, b_in), global_step=global_step)
    expected = numpy_train(REFERENCES["momentum"](), a, b, N)
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        for t in range(STEPS):
            session.run(train_op, {a_in: a[t, 0], b_in: b[t, 0]})
            np.testing.assert_allclose(session.run(w), expected[t], rtol=3e-5, atol=1e-6)
        assert session.run(global_step) == STEPS // N


def test_device_loop_in_a_compiled_tf1_program(ipu_system, tf1_graph):
    from tensorflow.python import ipu

    # A loop count that is a multiple of N, as the original requires of loops around the
    # optimizer (gradient_accumulation_verifier.cc).
    steps = 2 * N
    a, b = problem(steps, 1, seed=14)
    a_all, b_all = tf.constant(a[:, 0]), tf.constant(b[:, 0])
    optimizer = GradientAccumulationOptimizerV2(REFERENCES["sgd"]().make(), N)

    def program():
        w = tf.compat.v1.get_variable("w", initializer=INITIAL)

        def body(t):
            train = optimizer.minimize(tf_loss(w, a_all[t], b_all[t]), var_list=[w])
            with tf.control_dependencies([train]):
                return t + 1

        return ipu.loops.repeat(steps, body, [tf.constant(0)])

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(program)
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(run)
        (w,) = [v for v in tf.compat.v1.global_variables() if v.name == "w:0"]
        np.testing.assert_allclose(
            session.run(w), numpy_train(REFERENCES["sgd"](), a, b, N)[-1], rtol=3e-5
        )


def test_a_device_loop_count_not_a_multiple_of_the_mini_batches_is_refused(ipu_system, tf1_graph):
    from tensorflow.python import ipu

    optimizer = GradientAccumulationOptimizerV2(REFERENCES["sgd"]().make(), N)

    def program():
        w = tf.compat.v1.get_variable("w", initializer=INITIAL)
        return ipu.loops.repeat(
            STEPS, lambda: optimizer.minimize(tf.reduce_sum(w * w), var_list=[w])
        )

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        with pytest.raises(tf.errors.FailedPreconditionError, match="evenly divides"):
            ipu.ipu_compiler.compile(program)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        # Below 1 and not comparable with 1 ("4" < 1, a TypeError): more cases in
        # test_optimizers_original_rules.py.
        ({"num_mini_batches": 0}, ValueError, r"^num_mini_batches must be a positive number\.$"),
        ({"num_mini_batches": None}, TypeError, "'<' not supported"),
        ({"dtype": tf.int32}, TypeError, "accumulators must have a floating dtype"),
        ({"dtype": "no such type"}, TypeError, "dtype must be None, a floating DType"),
        ({"reduction_method": "median"}, ValueError, "reduction_method must be one of"),
    ],
)
@pytest.mark.parametrize(
    "wrapper", [GradientAccumulationOptimizerV2, CrossReplicaGradientAccumulationOptimizerV2]
)
def test_bad_arguments(wrapper, kwargs, error, message):
    arguments = {"num_mini_batches": 2, **kwargs}
    with pytest.raises(error, match=message):
        wrapper(SGD(0.1).make(), **arguments)


@pytest.mark.parametrize(
    "wrapper", [GradientAccumulationOptimizerV2, CrossReplicaGradientAccumulationOptimizerV2]
)
def test_a_fractional_count_is_built_and_kept(wrapper):
    # Only a count below 1 is refused when built; the int32 count op refuses 2.5 when
    # gradients are applied (test_optimizers_original_rules.py).
    assert wrapper(SGD(0.1).make(), 2.5).num_mini_batches == 2.5


def test_bad_arguments_of_v1():
    # verify_usage is the accumulation op's bool attribute: built, refused when gradients
    # are applied (and not checked when none is).
    optimizer = CrossReplicaGradientAccumulationOptimizer(SGD(0.1).make(), 2, verify_usage="no")
    variable = tf.Variable(INITIAL)
    with pytest.raises(TypeError, match=r"^Expected bool for argument 'verify_usage' not 'no'\.$"):
        optimizer.apply_gradients([(tf.ones(3), variable)])
    with pytest.raises(ValueError, match="^No gradients provided for any variable"):
        optimizer.apply_gradients([(None, variable)])
    # As the original: the wrapped object is not type-checked.
    CrossReplicaGradientAccumulationOptimizer(None, 2)


def test_a_dtype_callable_must_return_a_dtype():
    optimizer = GradientAccumulationOptimizerV2(SGD(0.1).make(), 2, dtype=lambda v: "nonsense")
    with pytest.raises(TypeError, match="the dtype callable must return a DType"):
        optimizer.apply_gradients([(tf.ones(3), tf.Variable(INITIAL))])


def test_options_are_kept():
    optimizer = CrossReplicaGradientAccumulationOptimizerV2(
        SGD(0.1).make(),
        4,
        offload_weight_update_variables=True,
        replicated_optimizer_state_sharding=None,
        reduction_method="mean",
    )
    assert optimizer.num_mini_batches == 4
    assert optimizer.reduction_method is GradientAccumulationReductionMethod.MEAN
    assert optimizer._replicated_optimizer_state_sharding is True


@pytest.mark.parametrize(
    "grads_and_vars, error, message",
    [
        # The stock v1 Optimizer.apply_gradients' errors (Python's for what is not pairs).
        ([], ValueError, r"^No variables provided\.$"),
        ([(tf.ones(3),)], ValueError, r"^not enough values to unpack \(expected 2, got 1\)$"),
        (5, TypeError, "^'int' object is not iterable$"),
    ],
)
def test_malformed_grads_and_vars(grads_and_vars, error, message):
    optimizer = CrossReplicaGradientAccumulationOptimizerV2(SGD(0.1).make(), 2)
    with pytest.raises(error, match=message):
        optimizer.apply_gradients(grads_and_vars)


@pytest.mark.parametrize("count", [1, 2])
def test_cross_replica_v2_over_a_keras_optimizer(replicas, count):
    a, b = problem(STEPS, count, seed=15)
    with replicas(count).scope():
        w = tf.Variable(INITIAL)
        optimizer = CrossReplicaGradientAccumulationOptimizerV2(
            tf_keras.optimizers.Adam(0.05, epsilon=1e-7), N, reduction_method="mean"
        )

    def step(replica, a_t, b_t):
        with tf.GradientTape() as tape:
            loss = tf_loss(w, a_t[replica], b_t[replica])
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])

    run = replicas(count).function(step)
    got = []
    for t in range(STEPS):
        run(tf.constant(a[t]), tf.constant(b[t]))
        got.append(replicas(count).local_values(w))
    assert_histories_match(got, numpy_train(Adam(0.05, epsilon=1e-7), a, b, N, "MEAN"))


@pytest.mark.parametrize("count", [2, 4])
def test_cross_replica_optimizer_over_accumulation_averages_each_mini_batch(replicas, count):
    a, b = problem(STEPS, count, seed=16)
    got, _ = train(
        replicas(count),
        lambda: CrossReplicaOptimizer(
            GradientAccumulationOptimizerV2(REFERENCES["sgd"]().make(), N)
        ),
        a,
        b,
    )
    # Averaging is linear: the mean of the sums is the sum of the means.
    assert_histories_match(got, numpy_train(REFERENCES["sgd"](), a, b, N))
