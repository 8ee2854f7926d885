"""CrossReplicaOptimizer and IpuOptimizer: several steps on 1, 2 and 4 replicas against numpy."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from optimizer_references import INITIAL, REFERENCES, gradient, problem, tf_loss

from openipu._src.optimizers.cross_replica_optimizer import CrossReplicaOptimizer
from openipu._src.optimizers.ipu_optimizer import IpuOptimizer

STEPS = 4


def train(replicas, make_optimizer, a, b, use_minimize=True, jit_compile=False):
    with replicas.scope():
        w = tf.Variable(INITIAL)
        optimizer = make_optimizer()

    def step(replica, a_t, b_t):
        if use_minimize:
            optimizer.minimize(tf_loss(w, a_t[replica], b_t[replica]), var_list=[w])
        else:
            with tf.GradientTape() as tape:
                loss = tf_loss(w, a_t[replica], b_t[replica])
            optimizer.apply_gradients([(tape.gradient(loss, w), w)])

    run = replicas.function(step, jit_compile=jit_compile)
    for t in range(len(a)):
        run(tf.constant(a[t]), tf.constant(b[t]))
    optimizer.trained_variable = w
    return replicas.local_values(w), optimizer


def numpy_train(reference, a, b, combine):
    w = INITIAL.astype(np.float64)
    for t in range(len(a)):
        w = reference.apply(w, combine([gradient(w, a[t, r], b[t, r]) for r in range(a.shape[1])]))
    return w


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("kind", sorted(REFERENCES))
def test_cross_replica_optimizer_applies_the_mean(replicas, count, kind):
    a, b = problem(STEPS, count)
    got, _ = train(replicas(count), lambda: CrossReplicaOptimizer(REFERENCES[kind]().make()), a, b)
    expected = numpy_train(REFERENCES[kind](), a, b, lambda gs: np.mean(gs, axis=0))
    for replica_value in got:
        np.testing.assert_allclose(replica_value, expected, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("count", [1, 2, 4])
def test_cross_replica_optimizer_over_a_keras_optimizer(replicas, count):
    a, b = problem(STEPS, count, seed=1)
    got, _ = train(
        replicas(count),
        lambda: CrossReplicaOptimizer(tf_keras.optimizers.SGD(0.1, momentum=0.9)),
        a,
        b,
        use_minimize=False,
    )
    velocity, w = 0.0, INITIAL.astype(np.float64)
    for t in range(STEPS):
        g = np.mean([gradient(w, a[t, r], b[t, r]) for r in range(count)], axis=0)
        velocity = 0.9 * velocity - 0.1 * g
        w = w + velocity
    for replica_value in got:
        np.testing.assert_allclose(replica_value, w, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("count", [2, 4])
def test_nested_wrappers_take_the_mean_once(replicas, count):
    a, b = problem(STEPS, count, seed=2)
    got, _ = train(
        replicas(count),
        lambda: CrossReplicaOptimizer(IpuOptimizer(REFERENCES["momentum"]().make())),
        a,
        b,
    )
    expected = numpy_train(REFERENCES["momentum"](), a, b, lambda gs: np.mean(gs, axis=0))
    for replica_value in got:
        np.testing.assert_allclose(replica_value, expected, rtol=2e-5, atol=1e-6)


def test_compiled_equals_built(replicas):
    a, b = problem(STEPS, 1, seed=3)
    make = lambda: CrossReplicaOptimizer(REFERENCES["adam"]().make())  # noqa: E731
    compiled, _ = train(replicas(1), make, a, b, jit_compile=True)
    built, _ = train(replicas(1), make, a, b)
    np.testing.assert_allclose(compiled[0], built[0], rtol=1e-6)


@pytest.mark.parametrize("count", [1, 2])
def test_ipu_optimizer_applies_each_replicas_gradients(replicas, count):
    # Replicas given equal gradients apply them as they are, as each IPU would.
    a, b = problem(STEPS, 1, seed=4)
    a, b = np.repeat(a, count, axis=1), np.repeat(b, count, axis=1)
    got, _ = train(replicas(count), lambda: IpuOptimizer(REFERENCES["sgd"]().make()), a, b)
    expected = numpy_train(REFERENCES["sgd"](), a, b, lambda gs: gs[0])
    for replica_value in got:
        np.testing.assert_allclose(replica_value, expected, rtol=2e-5, atol=1e-6)


def test_ipu_optimizer_forwards_to_the_wrapped_optimizer(replicas):
    a, b = problem(2, 1)
    momentum = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9, name="Inner")
    _, optimizer = train(replicas(1), lambda: IpuOptimizer(momentum), a, b)
    assert optimizer.get_name() == "Inner"
    assert optimizer.get_slot_names() == ["momentum"]
    slot = optimizer.get_slot(optimizer.trained_variable, "momentum")
    assert slot is momentum.get_slot(optimizer.trained_variable, "momentum")
    assert [v.ref() for v in optimizer.variables()] == [v.ref() for v in momentum.variables()]
    assert slot.ref() in {v.ref() for v in optimizer.variables()}


def test_keras_hyperparameters_are_forwarded():
    optimizer = IpuOptimizer(tf_keras.optimizers.SGD(0.25))
    assert float(optimizer.learning_rate) == 0.25
    with pytest.raises(AttributeError):
        optimizer._not_forwarded  # noqa: B018


def test_any_object_is_wrapped_and_fails_on_use():
    # As the original's IpuOptimizer: no type check, an AttributeError on use.
    optimizer = CrossReplicaOptimizer("sgd")
    with pytest.raises(AttributeError):
        optimizer.get_slot_names()


def _stock_error(grads_and_vars) -> Exception:
    try:
        tf.compat.v1.train.GradientDescentOptimizer(0.1).apply_gradients(grads_and_vars)
    except Exception as error:  # noqa: BLE001 - any error, compared below
        return error
    raise AssertionError("the stock optimizer applied the malformed gradients")


@pytest.mark.parametrize(
    "grads_and_vars, error, message",
    [
        # Eagerly, the stock v1 Optimizer.apply_gradients' errors (in a tf.function:
        # test_optimizers_original_rules.py). Python's for what is not (gradient, variable)
        # pairs; no dtype rule of the wrapper's own (the update fails on a string).
        ([], ValueError, r"^No variables provided\.$"),
        (None, TypeError, "^'NoneType' object is not iterable$"),
        ([(1.0,)], ValueError, r"^not enough values to unpack \(expected 2, got 1\)$"),
        ([(1.0, 2.0)], AttributeError, "^'float' object has no attribute 'handle'$"),
        ([(None, "VARIABLE")], ValueError, r"^No gradients provided for any variable: \[\"<tf"),
        ([("text", "VARIABLE")], tf.errors.UnimplementedError, "Cast float to string"),
        ([(object(), "VARIABLE")], ValueError, "^Attempt to convert a value .* to a Tensor"),
    ],
)
@pytest.mark.parametrize("wrapper", [IpuOptimizer, CrossReplicaOptimizer])
def test_malformed_grads_and_vars(wrapper, grads_and_vars, error, message):
    variable = tf.Variable([1.0])
    if grads_and_vars:
        grads_and_vars = [
            tuple(variable if item == "VARIABLE" else item for item in pair)
            for pair in grads_and_vars
        ]
    optimizer = wrapper(tf.compat.v1.train.GradientDescentOptimizer(0.1))
    with pytest.raises(error, match=message) as raised:
        optimizer.apply_gradients(grads_and_vars)
    stock = _stock_error(grads_and_vars)
    assert (type(raised.value), str(raised.value)) == (type(stock), str(stock))
    np.testing.assert_array_equal(variable.numpy(), [1.0])
