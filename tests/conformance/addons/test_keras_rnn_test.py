"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/layers/rnn_test.py`.

`PopnnLSTM` and `PopnnGRU` run on the IPU give stock Keras's LSTM and GRU results for
the same initializers (batch or time major, whole sequences or the last output, with or
without states, stateful across calls, GRU `reset_after`), take Keras's weights, train
in a functional model like Keras's layers, keep their weights' dtype (layer dtype or
`floatx`), round-trip their config, train in pipelines, and refuse PopLibs options the
library refuses when the graph is built.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from ipu_tensorflow_addons.keras import layers

BATCH, INPUTS, TIMESTEPS, HIDDEN = 1, 3, 4, 5


@pytest.fixture
def strategy(strategy_on):
    return strategy_on(1)


def _layer(cls, *, kernel="constant", **kwargs):
    """A layer with the original's constant initializers (or Keras's random ones)."""
    if kernel == "constant":
        initializers = dict(
            kernel_initializer=tf.constant_initializer(0.1),
            recurrent_initializer=tf.constant_initializer(0.2),
            bias_initializer=tf.constant_initializer(0.3),
        )
    elif kernel == "keras":
        initializers = dict(
            kernel_initializer=keras.initializers.Constant(0.1),
            recurrent_initializer=keras.initializers.Constant(0.2),
            bias_initializer=keras.initializers.Constant(0.3),
        )
    else:
        initializers = dict(
            kernel_initializer="truncated_normal",
            recurrent_initializer="normal",
            bias_initializer="truncated_normal",
        )
    kwargs.setdefault("return_state", True)
    return cls(HIDDEN, dtype=np.float32, recurrent_activation="sigmoid", **initializers, **kwargs)


def _inputs(seed, samples=1, time_major=False, states=2):
    rng = np.random.RandomState(seed)
    state = [rng.rand(BATCH, HIDDEN).astype(np.float32) for _ in range(states)]
    shape = [TIMESTEPS, BATCH, INPUTS] if time_major else [BATCH, TIMESTEPS, INPUTS]
    xs = [rng.rand(*shape).astype(np.float32) for _ in range(samples)]
    return xs, state


def _results(layer, xs, state, strategy=None):
    """The layer's outputs for each of `xs` (on the IPU when a strategy is given)."""
    state = [tf.constant(s) for s in state]
    initial = None if layer.stateful else (state if len(state) > 1 else state[0])

    def call(x):
        return layer(x, initial_state=initial, training=True)

    if strategy is None:
        return [tf.nest.map_structure(np.asarray, call(x)) for x in xs]
    with strategy.scope():
        step = tf.function(call)
        return [tf.nest.map_structure(np.asarray, strategy.run(step, args=(x,))) for x in xs]


def _assert_close(ours, theirs):
    for a, b in zip(tf.nest.flatten(ours), tf.nest.flatten(theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


CELLS = {
    "lstm": (layers.PopnnLSTM, keras.layers.LSTM, 2),
    "gru": (layers.PopnnGRU, keras.layers.GRU, 1),
}


def _compare(strategy, cell, samples=1, time_major=False, **kwargs):
    ipu_cls, keras_cls, states = CELLS[cell]
    xs, state = _inputs(42, samples, time_major, states)
    ours = _results(_layer(ipu_cls, time_major=time_major, **kwargs), xs, state, strategy)
    theirs = _results(_layer(keras_cls, time_major=time_major, **kwargs), xs, state)
    _assert_close(ours, theirs)
    return ours


@pytest.mark.follows("test_lstm")
def test_lstm(strategy):
    _compare(strategy, "lstm")


@pytest.mark.follows("test_lstm_time_major")
def test_lstm_time_major(strategy):
    _compare(strategy, "lstm", time_major=True)


@pytest.mark.follows("test_lstm_unit_forget_bias")
def test_lstm_unit_forget_bias(strategy):
    _compare(strategy, "lstm", unit_forget_bias=True)


@pytest.mark.follows("test_lstm_all_seq")
def test_lstm_all_seq(strategy):
    ours = _compare(strategy, "lstm", return_sequences=True)
    assert ours[0][0].shape == (BATCH, TIMESTEPS, HIDDEN)


@pytest.mark.follows("test_gru")
def test_gru(strategy):
    _compare(strategy, "gru")


@pytest.mark.follows("test_gru_seq_major")
def test_gru_seq_major(strategy):
    _compare(strategy, "gru", time_major=True)


@pytest.mark.follows("test_gru_all_seq")
def test_gru_all_seq(strategy):
    ours = _compare(strategy, "gru", return_sequences=True)
    assert ours[0][0].shape == (BATCH, TIMESTEPS, HIDDEN)


@pytest.mark.follows("test_gru_reset_after")
def test_gru_reset_after(strategy):
    _compare(strategy, "gru", samples=3, reset_after=True)


@pytest.mark.follows("test_lstm_stateful")
def test_lstm_stateful(strategy):
    _compare(strategy, "lstm", samples=4, stateful=True)


@pytest.mark.follows("test_lstm_stateful_time_major")
def test_lstm_stateful_time_major(strategy):
    _compare(strategy, "lstm", samples=4, stateful=True, time_major=True)


@pytest.mark.follows("test_gru_stateful")
def test_gru_stateful(strategy):
    _compare(strategy, "gru", samples=4, stateful=True)


@pytest.mark.follows("test_gru_stateful_time_major")
def test_gru_stateful_time_major(strategy):
    _compare(strategy, "gru", samples=4, stateful=True, time_major=True)


@pytest.mark.follows("test_lstm_no_state")
@pytest.mark.follows("test_gru_no_state")
@pytest.mark.parametrize("cell", CELLS)
def test_no_state(strategy, cell):
    ipu_cls, _, states = CELLS[cell]
    xs, state = _inputs(42, states=states)
    (result,) = _results(_layer(ipu_cls, return_state=False), xs, state, strategy)
    assert isinstance(result, np.ndarray)
    assert result.shape == (BATCH, HIDDEN)


@pytest.mark.follows("test_class_alias")
def test_class_alias():
    assert isinstance(layers.LSTM, type) and isinstance(layers.GRU, type)
    assert layers.PopnnLSTM is layers.LSTM
    assert layers.PopnnGRU is layers.GRU


@pytest.mark.follows("test_lstm_dropout")
@pytest.mark.follows("test_gru_dropout")
@pytest.mark.parametrize("cell", CELLS)
def test_dropout(strategy, cell):
    ipu_cls, _, states = CELLS[cell]
    xs, state = _inputs(42, states=states)
    kept = _results(_layer(ipu_cls, return_state=False, dropout=0.0), xs, state, strategy)
    dropped = _results(_layer(ipu_cls, return_state=False, dropout=0.9), xs, state, strategy)
    assert not np.allclose(kept[0], dropped[0])


@pytest.mark.follows("test_can_call_without_state_change")
def test_can_call_without_state_change(strategy):
    xs, (h, c) = _inputs(42)
    layer = layers.PopnnLSTM(
        HIDDEN,
        dtype=np.float32,
        kernel_initializer=tf.random_uniform_initializer(seed=42),
        recurrent_initializer=tf.random_uniform_initializer(seed=42),
        bias_initializer=tf.zeros_initializer(),
    )
    layer.build(xs[0].shape)

    @tf.function
    def impl(x, c, h):
        return layer(inputs=x, initial_state=(c, h))

    assert layer.kernel.shape == [INPUTS, HIDDEN * 4]
    first = impl(xs[0], c, h)
    assert layer.kernel.shape == [INPUTS, HIDDEN * 4]
    np.testing.assert_allclose(impl(xs[0], c, h), first)


@pytest.mark.follows("test_lstm_save_load_weights")
@pytest.mark.follows("test_gru_save_load_weights")
@pytest.mark.parametrize("cell", CELLS)
def test_save_load_weights(cell):
    ipu_cls, keras_cls, _ = CELLS[cell]
    x = _inputs(42)[0][0]
    layer_cpu = _layer(keras_cls, kernel="random")
    expected = layer_cpu(x, training=True)
    layer_ipu = _layer(ipu_cls)
    layer_ipu.build((BATCH, TIMESTEPS, INPUTS))
    layer_ipu.set_weights(layer_cpu.get_weights())
    _assert_close(layer_ipu(x, training=True), expected)


@pytest.mark.follows("test_weight_type")
@pytest.mark.parametrize("cls", [layers.PopnnLSTM, layers.PopnnGRU])
def test_weight_type(cls):
    shape = (BATCH, TIMESTEPS, INPUTS)
    layer = cls(HIDDEN)
    layer.build(shape)
    assert all(w.dtype == tf.float32 for w in layer.weights)
    layer = cls(HIDDEN, dtype=tf.float16)
    layer.build(shape)
    assert all(w.dtype == tf.float16 for w in layer.weights)
    keras.backend.set_floatx("float16")
    try:
        layer = cls(HIDDEN)
        layer.build(shape)
    finally:
        keras.backend.set_floatx("float32")
    assert all(w.dtype == tf.float16 for w in layer.weights)


def _fit_and_predict(cell, ipu_layer, strategy=None):
    """Fits a model around one layer for one step, then predicts: results and weights."""
    ipu_cls, keras_cls, states = CELLS[cell]
    xs, state = _inputs(43, samples=2, states=states)
    y = np.random.RandomState(44).rand(BATCH, HIDDEN).astype(np.float32)
    kwargs = {"reset_after": True} if cell == "gru" else {}
    reference = _layer(keras_cls, kernel="random", return_state=False, **kwargs)
    reference.build((BATCH, TIMESTEPS, INPUTS))
    initial_weights = reference.get_weights()

    def run(layer):
        layer.build((BATCH, TIMESTEPS, INPUTS))
        layer.set_weights(initial_weights)
        initial = [keras.Input(batch_shape=(BATCH, HIDDEN)) for _ in range(states)]
        inputs = keras.Input(batch_shape=(BATCH, TIMESTEPS, INPUTS))
        outputs = layer(inputs, initial_state=initial if states > 1 else initial[0])
        model = keras.Model(inputs=(inputs, *initial), outputs=outputs)
        model.compile(loss="categorical_crossentropy", optimizer="adam")
        model.fit((xs[0], *state), y, batch_size=BATCH, verbose=0)
        return model.predict((xs[1], *state), batch_size=BATCH, verbose=0), layer.get_weights()

    theirs = run(reference)
    with strategy.scope():
        layer = _layer(ipu_cls if ipu_layer else keras_cls, return_state=False, **kwargs)
        ours = run(layer)
    _assert_close(ours, theirs)


@pytest.mark.follows("test_upstream_layer")
@pytest.mark.parametrize("cell", CELLS)
def test_upstream_layer(strategy, cell):
    # The original runs Keras's own layer on the IPU here.
    _fit_and_predict(cell, ipu_layer=False, strategy=strategy)


@pytest.mark.follows("test_gru_ipu_vs_cpu_results_reset_after")
def test_gru_ipu_vs_cpu_results_reset_after(strategy):
    _fit_and_predict("gru", ipu_layer=True, strategy=strategy)


@pytest.mark.follows("test_get_config")
@pytest.mark.parametrize("cls", [layers.PopnnLSTM, layers.PopnnGRU])
def test_get_config(cls):
    # Keras's own initializers: tf_keras records `tf.constant_initializer` under another
    # module than the Keras class it reads back (stock `keras.layers.LSTM` does the same).
    config = _layer(cls, kernel="keras").get_config()
    assert cls.from_config(config).get_config() == config


def _language_dataset(length):
    data = tf.constant(1, shape=[32], dtype=tf.int32)
    labels = tf.constant(2, shape=[32], dtype=tf.int32)
    return tf.data.Dataset.from_tensors((data, labels)).repeat(length).batch(1, drop_remainder=True)


@pytest.mark.slow
@pytest.mark.follows("testTrainPipelineWithLstm")
def test_train_pipeline_with_lstm(strategy_on):
    strategy = strategy_on(2)
    with strategy.scope():
        inputs = keras.layers.Input(shape=(32,), dtype=tf.int32, batch_size=1)
        with keras.ipu.PipelineStage(0):
            x = layers.Embedding(100, 16)(inputs)
        with keras.ipu.PipelineStage(1):
            x = layers.PopnnLSTM(16, dropout=0.2)(x)
            x = keras.layers.Dense(1, activation="sigmoid")(x)
        model = keras.Model(inputs, x)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
        model.compile("sgd", loss="mse", steps_per_execution=16)
        losses = model.fit(_language_dataset(32), epochs=3, verbose=0).history["loss"]
    assert losses[0] > losses[-1]


@pytest.mark.slow
@pytest.mark.follows("testTrainSequentialPipelineWithLstm")
def test_train_sequential_pipeline_with_lstm(strategy_on):
    strategy = strategy_on(2)
    with strategy.scope():
        model = keras.Sequential(
            [
                layers.Embedding(100, 16),
                layers.PopnnLSTM(16, dropout=0.2),
                keras.layers.Dense(1, activation="sigmoid"),
            ]
        )
        model.set_pipeline_stage_assignment([0, 1, 1])
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
        model.compile("sgd", loss="mse", steps_per_execution=16)
        losses = model.fit(_language_dataset(32), epochs=3, verbose=0).history["loss"]
    assert losses[0] > losses[-1]


@pytest.mark.follows("test_options")
@pytest.mark.parametrize("cell", CELLS)
def test_options(strategy, cell):
    ipu_cls, _, states = CELLS[cell]
    xs, state = _inputs(42, states=states)
    y = np.random.RandomState(45).rand(BATCH, HIDDEN).astype(np.float32)

    def run_layer(**options):
        with strategy.scope():
            layer = _layer(ipu_cls, return_state=False, **options)
            initial = [keras.Input(batch_shape=(BATCH, HIDDEN)) for _ in range(states)]
            inputs = keras.Input(batch_shape=(BATCH, TIMESTEPS, INPUTS))
            outputs = layer(inputs, initial_state=initial if states > 1 else initial[0])
            model = keras.Model(inputs=(inputs, *initial), outputs=outputs)
            model.compile(loss="categorical_crossentropy", optimizer="adam")
            return model.fit((xs[0], *state), y, batch_size=BATCH, verbose=0)

    message = r"\[Poplar\]\[Build graph\] invalid_option:"
    with pytest.raises(tf.errors.InternalError, match=message):
        run_layer(options={"availableMemoryProportion": -273.15})
    with pytest.raises(tf.errors.InternalError, match=message):
        run_layer(options_bwd={"availableMemoryProportion": -273.15})
    assert np.isfinite(run_layer(options={"availableMemoryProportion": 0.42}).history["loss"][0])
    assert np.isfinite(
        run_layer(options_bwd={"availableMemoryProportion": 0.42}).history["loss"][0]
    )
