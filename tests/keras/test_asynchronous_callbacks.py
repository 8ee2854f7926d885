"""`set_asynchronous_callbacks` and the infeed/outfeed queue options of Keras models.

Follows the original's keras/ipu/asynchronous_callbacks_test.py (callback counts, and the
same numbers as a CPU model) and keras/ipu/feed_options_test.py; the per-step logs are
checked against stock Keras (each batch's logs), and the device running ahead of the
callbacks as the original's polling thread lets it.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import tf_keras as keras
from tensorflow.python import ipu

BATCH = 8


class Counting(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.counts = dict.fromkeys(
            ["train_begin", "train_end", "test_begin", "test_end", "predict_begin", "predict_end"],
            0,
        )
        self.train_logs: list = []

    def on_train_batch_begin(self, batch, logs=None):
        self.counts["train_begin"] += 1

    def on_train_batch_end(self, batch, logs=None):
        self.counts["train_end"] += 1
        self.train_logs.append((batch, float(logs["loss"])))

    def on_test_batch_begin(self, batch, logs=None):
        self.counts["test_begin"] += 1

    def on_test_batch_end(self, batch, logs=None):
        self.counts["test_end"] += 1

    def on_predict_batch_begin(self, batch, logs=None):
        self.counts["predict_begin"] += 1

    def on_predict_batch_end(self, batch, logs=None):
        self.counts["predict_end"] += 1


def _data(n=128):
    rng = np.random.default_rng(0)
    return (
        rng.normal(size=(n, 6)).astype(np.float32),
        rng.normal(size=(n, 2)).astype(np.float32),
    )


def _sequential():
    return keras.Sequential(
        [
            keras.layers.Dense(4, activation="relu", input_shape=(6,), kernel_initializer="ones"),
            keras.layers.Dense(2, kernel_initializer=keras.initializers.Constant(0.5)),
        ]
    )


def _functional():
    inputs = keras.Input((6,))
    hidden = keras.layers.Dense(4, activation="relu", kernel_initializer="ones")(inputs)
    outputs = keras.layers.Dense(2, kernel_initializer=keras.initializers.Constant(0.5))(hidden)
    return keras.Model(inputs, outputs)


def _assert_same_weights(model, reference):
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def _configure(ipus: int):
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = ipus
    cfg.configure_ipu_system()
    return ipu.ipu_strategy.IPUStrategy()


@pytest.fixture(autouse=True)
def _reset():
    yield
    ipu.config.reset_ipu_configuration()


@pytest.mark.parametrize("model_fn", [_sequential, _functional], ids=["sequential", "functional"])
def test_each_step_calls_the_callbacks_with_its_own_logs(model_fn):
    x, y = _data()
    cpu = model_fn()
    cpu.compile(keras.optimizers.SGD(0.01), "mse")
    cpu_cb = Counting()
    cpu.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0, callbacks=[cpu_cb])
    cpu_eval = cpu.evaluate(x, y, batch_size=BATCH, verbose=0)
    cpu_predict = cpu.predict(x, batch_size=BATCH, verbose=0)

    strategy = _configure(1)
    with strategy.scope():
        model = model_fn()
        model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=4)
        model.set_asynchronous_callbacks(True)
        cb = Counting()
        model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0, callbacks=[cb])
        ipu_eval = model.evaluate(x, y, batch_size=BATCH, verbose=0, callbacks=[cb])
        ipu_predict = model.predict(x, batch_size=BATCH, verbose=0, callbacks=[cb])
    steps = len(x) // BATCH
    assert cb.counts == {
        "train_begin": 2 * steps,
        "train_end": 2 * steps,
        "test_begin": steps,
        "test_end": steps,
        "predict_begin": steps,
        "predict_end": steps,
    }
    # Step i's logs are those stock Keras reports after batch i.
    assert [b for b, _ in cb.train_logs] == [b for b, _ in cpu_cb.train_logs]
    np.testing.assert_allclose(
        [loss for _, loss in cb.train_logs], [loss for _, loss in cpu_cb.train_logs], rtol=1e-5
    )
    _assert_same_weights(model, cpu)
    np.testing.assert_allclose(ipu_eval, cpu_eval, rtol=1e-5)
    np.testing.assert_allclose(ipu_predict, cpu_predict, rtol=1e-5, atol=1e-6)


def test_without_asynchronous_callbacks_they_run_once_per_execution():
    x, y = _data()
    strategy = _configure(1)
    with strategy.scope():
        model = _sequential()
        model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=4)
        cb = Counting()
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[cb])
    assert cb.counts["train_begin"] == cb.counts["train_end"] == len(x) // BATCH // 4
    assert [b for b, _ in cb.train_logs] == [3, 7, 11, 15]


def test_replicas_each_report_every_step():
    # asynchronous_callbacks_test.py "sequential_replicated": a callback call per step and
    # replica, and the weights of a CPU model with the replicas' batches in one.
    x, y = _data()
    strategy = _configure(2)
    with strategy.scope():
        model = _sequential()
        model.compile(keras.optimizers.SGD(0.01 / 2), "mse", steps_per_execution=4)
        model.set_gradient_accumulation_options(
            gradient_accumulation_steps_per_replica=4, gradient_accumulation_reduction_method="mean"
        )
        model.set_asynchronous_callbacks(True)
        cb = Counting()
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[cb])
        model.predict(x, batch_size=BATCH, verbose=0, callbacks=[cb])
    batches = len(x) // BATCH
    assert cb.counts["train_begin"] == cb.counts["train_end"] == batches
    assert cb.counts["predict_end"] == batches
    # Keras counts steps per replica: each step number comes once per replica.
    assert [b for b, _ in cb.train_logs] == [s for s in range(batches // 2) for _ in range(2)]
    # As the original's test: the replicas' gradients are summed, so the IPU model's learning
    # rate is the CPU's over the replicas, and the CPU takes a whole update's batches at once.
    cpu = _sequential()
    cpu.compile(keras.optimizers.SGD(0.01), "mse")
    cpu.fit(x, y, batch_size=BATCH * 8, epochs=1, shuffle=False, verbose=0)
    _assert_same_weights(model, cpu)


def test_a_pipeline_accumulating_its_outfeed_calls_back_per_execution():
    # extensions_base.py: no per-step results to call back with when the outfeed accumulates.
    x, y = _data()
    strategy = _configure(2)
    with strategy.scope():
        model = _sequential()
        model.set_pipeline_stage_assignment([0, 1])
        model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=4)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        model.set_asynchronous_callbacks(True)
        cb = Counting()
        model.evaluate(x, y, batch_size=BATCH, verbose=0, callbacks=[cb])
        assert cb.counts["test_end"] == len(x) // BATCH
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=4, accumulate_outfeed=True
        )
        cb = Counting()
        model.evaluate(x, y, batch_size=BATCH, verbose=0, callbacks=[cb])
        assert cb.counts["test_end"] == len(x) // BATCH // 4
        cb = Counting()
        model.predict(x, batch_size=BATCH, verbose=0, callbacks=[cb])
        assert cb.counts["predict_end"] == len(x) // BATCH  # predict still per step


class SlowFirstStep(keras.callbacks.Callback):
    """Sleeps in the first step's callback, then reads the first layer's kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.kernel_seen = None
        self.threads: set = set()

    def on_train_batch_end(self, batch, logs=None):
        self.threads.add(threading.get_ident())
        if self.kernel_seen is None:
            time.sleep(1.0)
            self.kernel_seen = self.model.layers[0].kernel.numpy().copy()


@pytest.mark.parametrize("asynchronous", [True, False])
def test_the_device_runs_the_next_execution_while_callbacks_run(asynchronous):
    x, y = _data(64)
    strategy = _configure(1)
    with strategy.scope():
        model = _sequential()
        model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=4)
        model.set_asynchronous_callbacks(asynchronous)
        cb = SlowFirstStep()
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[cb])
    reference = _sequential()
    reference.compile(keras.optimizers.SGD(0.01), "mse")
    # After one execution (4 batches) the host would see these weights; with asynchronous
    # callbacks the second execution has run by the time the slow callback reads them.
    reference.fit(x[: 4 * BATCH], y[: 4 * BATCH], batch_size=BATCH, shuffle=False, verbose=0)
    after_one = reference.layers[0].kernel.numpy()
    reference.fit(x[4 * BATCH :], y[4 * BATCH :], batch_size=BATCH, shuffle=False, verbose=0)
    after_two = reference.layers[0].kernel.numpy()
    expected = after_two if asynchronous else after_one
    np.testing.assert_allclose(cb.kernel_seen, expected, rtol=1e-5, atol=1e-6)


def test_stop_training_in_a_callback_ends_fit():
    x, y = _data()

    class Stop(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 5:
                self.model.stop_training = True

    strategy = _configure(1)
    with strategy.scope():
        model = _sequential()
        model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=4)
        model.set_asynchronous_callbacks(True)
        cb = Counting()
        history = model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0, callbacks=[Stop(), cb])
        assert cb.counts["train_end"] == 6 and len(history.history["loss"]) == 1
        # The model is usable afterwards (nothing of the stopped fit is left running).
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)


# -- infeed and outfeed options ---------------------------------------------------------------


def test_queue_options_errors_as_the_original():
    strategy = _configure(1)
    with strategy.scope():
        model = _sequential()
    for name in ("dataset", "infeed_spec", "element_spec"):
        with pytest.raises(ValueError, match=f"Found `{name}` key in `kwargs`. This argument is "):
            model.set_infeed_queue_options(**{name: None})
    with pytest.raises(ValueError, match="`_internal_id` key .* not compatible with Keras"):
        model.set_infeed_queue_options(_internal_id="x")
    with pytest.raises(ValueError, match="prefetch_depth must be less than 256, but it is 300"):
        model.set_infeed_queue_options(prefetch_depth=300)
    for name in ("outfeed_mode", "device_ordinal"):
        with pytest.raises(ValueError, match=f"Found `{name}` key .* not compatible with Keras"):
            model.set_outfeed_queue_options(**{name: None})
    with pytest.raises(ValueError, match="Outfeed buffer depth cannot be less than 1"):
        model.set_outfeed_queue_options(buffer_depth=0)


def test_prefetch_depth_sets_how_far_the_host_reads_ahead():
    # feed_options_test.py sets prefetch_depth=2 and buffer_depth=2 and predicts; here the
    # batches the host has read while the first execution's callback waits show the depth.
    reads: list = []

    def dataset():
        import tensorflow as tf

        def note(i):
            reads.append(int(i))
            return np.float32(i)

        ds = tf.data.Dataset.range(64).map(
            lambda i: tf.reshape(tf.numpy_function(note, [i], tf.float32), [1])
        )
        # Only the prefetching under test reads ahead: tf.data's own injected prefetch
        # grows with the machine's load and would read further.
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        options.autotune.enabled = False
        return ds.batch(1, drop_remainder=True).with_options(options)

    class Wait(keras.callbacks.Callback):
        seen: list = []

        def on_predict_batch_end(self, batch, logs=None):
            if batch == 3:  # the first execution's end: wait until the host stops reading
                before, deadline = -1, time.monotonic() + 5.0
                while len(reads) != before and time.monotonic() < deadline:
                    before = len(reads)
                    time.sleep(0.3)
                self.seen.append(len(reads))

    strategy = _configure(1)

    def measure() -> list:
        counts = []
        for depth in (4, 16):
            reads.clear()
            Wait.seen = []
            with strategy.scope():
                model = keras.Sequential([keras.layers.Dense(1, input_shape=(1,))])
                model.compile(steps_per_execution=4)
                model.set_infeed_queue_options(prefetch_depth=depth)
                model.set_outfeed_queue_options(buffer_depth=2)
                model.predict(dataset(), steps=32, verbose=0, callbacks=[Wait()])
            counts.append(Wait.seen[0])
        return counts

    # One execution (4 batches) read, plus the executions prefetched (depth / 4 of them).
    # The count is read while the host runs on: a loaded machine may blur one measurement,
    # so it is taken up to three times; a depth that did not act would never show.
    attempts = []
    for _ in range(3):
        counts = measure()
        attempts.append(counts)
        if counts[0] < counts[1] and counts[0] <= 4 + 4 + 4:
            break
    # the execution run, one prefetched, one being prepared
    assert counts[0] < counts[1] and counts[0] <= 4 + 4 + 4, attempts
