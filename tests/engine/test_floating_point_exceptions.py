"""`IPUConfig.floating_point_behaviour` inv/div0/oflo: a program that traps stops with the
chip's "Tiles in excepted state" error, an InternalError as the original's
(application_runtime_test.py); without the bits it computes as IEEE arithmetic.

Follows the scenarios of the original's tensorflow/python/ipu/tests/
floating_point_control_bits_test.py (the original asserts `Exception` with that text).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

TRAP = "Tiles in excepted state"


def _configure(ipus=1, **bits):
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = ipus
    for name, value in bits.items():
        setattr(cfg.floating_point_behaviour, name, value)
    cfg.configure_ipu_system()


@pytest.fixture(autouse=True)
def _reset():
    yield
    ipu.config.reset_ipu_configuration()


def _tf1_run(model, feeds, dtype=np.float32):
    graph = tf.Graph()
    with graph.as_default():
        placeholders = [tf.compat.v1.placeholder(dtype, [len(feeds[0])]) for _ in feeds]
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            result = ipu.ipu_compiler.compile(model, inputs=placeholders)
        with tf.compat.v1.Session(graph=graph) as session:
            return session.run(result, dict(zip(placeholders, feeds, strict=True)))[0]


CASES = {
    # name: (bit, model, inputs that trap, inputs that do not)
    "div0": ("div0", lambda x, y: x / y, ([10000.0], [0.0]), ([10000.0], [4.0])),
    "oflo": ("oflo", lambda x, y: x * y, ([1e30], [1e30]), ([1e3], [1e3])),
    "inv-sqrt": ("inv", lambda x, y: tf.sqrt(x) + y, ([-1.0], [1.0]), ([4.0], [1.0])),
    "inv-0/0": ("inv", lambda x, y: x / y, ([0.0], [0.0]), ([1.0], [2.0])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_trap_stops_the_session_run(case):
    bit, model, trapping, _ = CASES[case]
    _configure(**{bit: True})
    with pytest.raises(tf.errors.InternalError, match=TRAP) as raised:
        _tf1_run(model, trapping)
    assert f"floating_point_behaviour.{bit}" in raised.value.message


@pytest.mark.parametrize("case", sorted(CASES))
def test_with_the_bit_on_good_values_compute_normally(case):
    bit, model, _, fine = CASES[case]
    _configure(**{bit: True})
    x, y = (np.array(v, np.float32) for v in fine)
    expected = {"div0": x / y, "oflo": x * y, "inv-sqrt": np.sqrt(x) + y, "inv-0/0": x / y}[case]
    np.testing.assert_allclose(_tf1_run(model, fine), expected, rtol=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
def test_without_the_bit_the_host_arithmetic_is_ieee(case):
    _, model, trapping, _ = CASES[case]
    _configure()
    x, y = (np.array(v, np.float32) for v in trapping)
    with np.errstate(all="ignore"):
        expected = {"div0": x / y, "oflo": x * y, "inv-sqrt": np.sqrt(x) + y, "inv-0/0": x / y}[
            case
        ]
    np.testing.assert_array_equal(_tf1_run(model, trapping), expected)


def test_casting_a_nan_to_an_integer_is_an_invalid_operation():
    # floating_point_control_bits_test.py `_test_invalid_operation`.
    model = lambda x: tf.cast(x, np.int32)  # noqa: E731
    _configure()
    assert _tf1_run(model, [[3.0]], np.float16).tolist() == [3]
    _configure(inv=True)
    with pytest.raises(tf.errors.InternalError, match=TRAP):
        _tf1_run(model, [[np.nan]], np.float16)


def test_set_all_turns_every_trap_on():
    _configure(set_all=True)
    with pytest.raises(tf.errors.InternalError, match=TRAP):
        _tf1_run(lambda x, y: x / y, [[1.0], [0.0]])


def test_the_other_bits_do_not_trap_a_division_by_zero():
    _configure(inv=True, oflo=True)
    assert _tf1_run(lambda x, y: x / y, [[1.0], [0.0]]).tolist() == [np.inf]


def test_a_loop_over_an_infeed_stops_at_the_division_by_zero_of_any_replica():
    # application_runtime_test.py: 12 / x over an infeed with div0 on; here 2 replicas,
    # the zero reaches replica 1.
    def run():
        data = np.array([[1.0], [2.0], [0.0], [4.0]], np.float32)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def body(x):
            return outfeed.enqueue(12.0 / x)

        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():
            strategy.run(tf.function(lambda: ipu.loops.repeat(2, body, [], infeed)))
        return outfeed.dequeue().numpy()

    _configure(ipus=2)
    with np.errstate(divide="ignore"):
        expected = (12.0 / np.array([[1.0], [2.0], [0.0], [4.0]], np.float32)).reshape(2, 2, 1)
    np.testing.assert_array_equal(run(), expected)
    _configure(ipus=2, div0=True)
    with pytest.raises(tf.errors.InternalError, match=TRAP):
        run()


def test_a_keras_model_trains_with_the_traps_on_and_stops_on_a_nan_loss():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = rng.normal(size=(32, 1)).astype(np.float32)
    _configure(inv=True, div0=True, oflo=True)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
        model.compile(tf.keras.optimizers.SGD(0.01), "mse", steps_per_execution=4)
        history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
        assert np.all(np.isfinite(history.history["loss"]))
        bad = x.copy()
        bad[3, 0] = -1.0
        log_model = tf.keras.Sequential(
            [tf.keras.layers.Lambda(lambda t: tf.math.log(t), input_shape=(4,))]
        )
        log_model.compile(steps_per_execution=4)
        with pytest.raises(tf.errors.InternalError, match=TRAP):
            log_model.predict(np.abs(bad) * np.sign(bad), batch_size=8, verbose=0)


def test_nanoo_makes_a_half_precision_overflow_a_nan_and_raises_nothing():
    # floating_point_control_bits_test.py `test_nan_overflow_enabled`: 10000 * 10000 in half
    # precision is a NaN with nanoo; without it the chip saturates at 65504 (`test_overflow`).
    model = lambda x, y: x * y  # noqa: E731
    feeds = [[10000.0, 2.0], [10000.0, 3.0]]
    _configure(nanoo=True)
    result = _tf1_run(model, feeds, np.float16)
    assert np.isnan(result[0]) and result[1] == 6.0
    _configure()
    assert _tf1_run(model, feeds, np.float16).tolist() == [65504.0, 6.0]
    _configure(nanoo=True)  # single precision does not overflow here
    assert _tf1_run(model, feeds).tolist() == [1e8, 6.0]


def test_half_precision_overflows_saturate_in_optimizer_updates_and_accumulators():
    # Adam's fused update of a float16 variable squares a gradient of 65504: on the chip the
    # square saturates (the second step then stays finite); TensorFlow's fused kernel makes
    # inf and then inf - inf = NaN. Reference: the same steps in numpy, each result clipped.
    _configure()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        var = tf.Variable(np.ones([2], np.float16))
        total = tf.Variable(np.zeros([2], np.float16))
        opt = tf.keras.optimizers.legacy.Adam(0.1)

        @tf.function(jit_compile=True)
        def step():
            gradient = tf.fill([2], tf.constant(60000.0, tf.float16)) * 2.0  # saturates
            total.assign_add(gradient)  # an in-place addition saturates too
            opt.apply_gradients([(gradient, var)])

        for _ in range(2):
            strategy.run(step)
    half_max = np.finfo(np.float16).max
    np.testing.assert_array_equal(total.numpy(), [half_max, half_max])
    assert np.all(np.isfinite(var.numpy()))

    def clip(x):
        return np.clip(np.float16(x), -half_max, half_max).astype(np.float16)

    m = v = np.float16(0)
    w = np.float16(1)
    g = half_max
    with np.errstate(over="ignore"):  # numpy's float16 overflows before `clip`
        for t in (1, 2):
            lr = np.float16(0.1 * np.sqrt(1 - 0.999**t) / (1 - 0.9**t))
            m = clip(m + (g - m) * np.float16(1 - 0.9))
            v = clip(v + (clip(g * g) - v) * np.float16(1 - 0.999))
            w = clip(w - lr * m / (np.sqrt(v) + np.float16(1e-7)))
    np.testing.assert_allclose(var.numpy(), [w, w], rtol=2e-3)


def test_ops_that_cannot_overflow_keep_their_results_and_build_no_replacement():
    # |x|, relu and tanh of finite half values stay finite: only the doubling saturates.
    from openipu._src.engine import floating_point_checks

    model = lambda x, y: tf.nn.relu(tf.abs(x)) * y + tf.tanh(x)  # noqa: E731
    feeds = [[-40000.0, 2.0], [3.0, 0.5]]
    _configure()
    expected = np.minimum(np.abs(np.float32(feeds[0])) * feeds[1] + np.tanh(feeds[0]), 65504)
    np.testing.assert_allclose(_tf1_run(model, feeds, np.float16), expected, rtol=1e-3)

    def built(body):
        graph = tf.Graph()
        with graph.as_default(), floating_point_checks.checking(frozenset(), saturate=True):
            x = tf.compat.v1.placeholder(tf.float16, [2])
            body(x)
        return len(graph.get_operations())

    plain = tf.Graph()
    with plain.as_default():
        tf.abs(tf.tanh(tf.compat.v1.placeholder(tf.float16, [2])))
    assert built(lambda x: tf.abs(tf.tanh(x))) == len(plain.get_operations())
    assert built(lambda x: x * x) > 2  # a multiplication can overflow: replaced
