"""The Keras documentation's examples (graphcore/keras `keras/ipu/docs/*.py`), as user programs.

Each test does what one example does (the same API calls, model structure and options) on
small synthetic data in place of the downloaded MNIST (random arrays of the same shapes and
dtypes), with fewer steps. Where the example's model can be built with stock Keras, the
test trains a stock copy (outside the IPU strategy, same initial weights, same data) the
same way and compares losses and weights; gradient accumulation over `n` batches of 32
(the sum of their mean-loss gradients) is compared with stock Keras on batches of `32 * n`
with `n` times the loss. The exported
SavedModels are served by the returned runtime function and by stock TensorFlow (a Python
without openipu), and compared with the values the examples' models compute.

The pipelining examples (7, 8, 11, 12) end in a one-unit `Dense` applied to 28x28 inputs,
so their outputs are (32, 28, 1); with MNIST's (32,) labels stock Keras rejects their
`SparseCategoricalCrossentropy` ("labels.shape must equal logits.shape except for the last
dimension"), and with labels it would take (the only class of a one-unit output) the
loss is 0 whatever the weights (Keras normalizes the one probability to 1). The tests keep
the models, optimizer and options, with the mean squared error to label / 10 as the loss.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu
from tests.serving import stock_tensorflow
from tf_keras.ipu.layers import CaptureActivationGradients
from tf_keras.ipu.optimizers import ALSGradientAccumulationOptimizer, ALSOptimizer
from tf_keras.optimizers.legacy import SGD

BATCH = 32


def _configure(ipus: int, remote_buffers: bool = False) -> None:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    if remote_buffers:
        config.device_connection.enable_remote_buffers = True
        config.device_connection.type = ipu.config.DeviceConnectionType.ON_DEMAND
    config.configure_ipu_system()


@pytest.fixture(autouse=True)
def _reset_after():
    keras.utils.set_random_seed(0)  # the same initial weights whichever tests ran before
    yield
    ipu.config.reset_ipu_configuration()


def _mnist_like(batches: int, seed: int = 0):
    """Random arrays shaped and typed as `mnist.load_data()`'s training images and labels."""
    rng = np.random.RandomState(seed)
    n = batches * BATCH
    # About a fifth of the pixels lit, as in MNIST's digits.
    images = rng.randint(0, 256, (n, 28, 28)) * (rng.rand(n, 28, 28) < 0.2)
    return images.astype(np.uint8), rng.randint(0, 10, n).astype(np.uint8)


def _dataset(x, y, repeat: bool = True, batch: int = BATCH, channel: bool = False):
    """The examples' `create_dataset` (without the shuffle, so stock Keras sees the same order)."""
    x = x / 255.0
    if channel:
        x = np.expand_dims(x, -1)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)
    ds = ds.map(lambda d, t: (tf.cast(d, tf.float32), tf.cast(t, tf.int32)))
    if repeat:
        ds = ds.repeat()
    return ds.prefetch(16)


def _pipeline_data(batches: int, batch: int = BATCH, seed: int = 0):
    """MNIST-like images with targets of the (28, 1) outputs: label / 10 at each position."""
    x, y = _mnist_like(batches, seed)
    targets = np.broadcast_to((y / 10.0).reshape(-1, 1, 1), (len(x), 28, 1))
    ds = tf.data.Dataset.from_tensor_slices((x / 255.0, targets)).batch(batch, drop_remainder=True)
    ds = ds.map(lambda d, t: (tf.cast(d, tf.float32), tf.cast(t, tf.float32)))
    return ds.repeat().prefetch(16)


def _compile_pipelined(model, accumulated: int = 1, **kwargs):
    """The pipelining examples' compile with the mean squared error for their loss (see the
    module's docstring); `accumulated` as for `_compile`."""
    loss = keras.losses.MeanSquaredError()
    model.compile(
        loss=loss if accumulated == 1 else lambda y, p: accumulated * loss(y, p),
        optimizer="rmsprop",
        **kwargs,
    )


def _sequential():
    return keras.Sequential(
        [
            keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )


def _functional():
    inputs = keras.layers.Input((28, 28))
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(256, activation="relu")(x)
    x = keras.layers.Dense(128, activation="relu")(x)
    return keras.Model(inputs=inputs, outputs=keras.layers.Dense(10)(x))


def _compile(model, accumulated: int = 1, **kwargs):
    """The examples' compile; `accumulated`: a stock twin's loss for gradient accumulation
    over that many batches, done here as one big batch (the accumulation sums the batches'
    mean-loss gradients: the gradient of `accumulated` times the big batch's mean loss)."""
    loss = keras.losses.SparseCategoricalCrossentropy()
    model.compile(
        loss=loss if accumulated == 1 else lambda y, p: accumulated * loss(y, p),
        optimizer="rmsprop",
        metrics=["accuracy"],
        **kwargs,
    )


def _stock_twin(make, ipu_model, build_shape=None):
    """A stock Keras model (outside any IPU strategy) with `ipu_model`'s weights."""
    stock = make()
    if build_shape is not None:
        stock.build(build_shape)
    stock.set_weights(ipu_model.get_weights())
    _compile(stock)
    return stock


def _assert_same_training(
    ipu_history, ipu_model, stock_history, stock_model, rtol=1e-4, accumulated=1
):
    assert len(ipu_history.history["loss"]) == len(stock_history.history["loss"])
    # RMSprop divides by the gradients' root mean square: where that is tiny, rounding
    # differences between a sum of batches and one big batch grow (gradient accumulation),
    # and may move a prediction across a class boundary (one in 800 moves the accuracy
    # by 0.00125).
    accumulates = accumulated > 1
    np.testing.assert_allclose(
        accumulated * np.array(ipu_history.history["loss"]),
        stock_history.history["loss"],
        rtol=1e-3 if accumulates else rtol,
        atol=1e-6,
    )
    if "accuracy" in ipu_history.history:
        np.testing.assert_allclose(
            ipu_history.history["accuracy"],
            stock_history.history["accuracy"],
            atol=0.005 if accumulates else 1e-6,
        )
    for got, want in zip(ipu_model.get_weights(), stock_model.get_weights(), strict=True):
        if not accumulates:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-5)
            continue
        # A weight whose squared-gradient average is near zero moves by RMSprop's full step
        # either way: a few in a thousand differ by more than rounding.
        close = np.isclose(got, want, rtol=rtol, atol=5e-4)
        assert close.mean() > 0.99, f"{(~close).sum()} of {close.size} weights differ"
        np.testing.assert_allclose(got, want, atol=1e-2)


# Single-IPU training ---------------------------------------------------------------------------


def test_example1_sequential_fit():
    """keras/ipu/docs/example1.py: a Sequential model created and fitted in an IPUStrategy."""
    _configure(1)
    x, y = _mnist_like(20)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _sequential()
        model.build((BATCH, 28, 28))
        _compile(model)
        initial = model.get_weights()
        history = model.fit(_dataset(x, y), epochs=2, steps_per_epoch=10, verbose=0)
    stock = _sequential()
    stock.build((BATCH, 28, 28))
    stock.set_weights(initial)
    _compile(stock)
    stock_history = stock.fit(_dataset(x, y), epochs=2, steps_per_epoch=10, verbose=0)
    _assert_same_training(history, model, stock_history, stock)


def test_example2_steps_per_execution_is_the_dataset_cardinality():
    """keras/ipu/docs/example2.py: steps_per_execution=dataset.cardinality() (a tensor), a
    finite dataset, two epochs."""
    _configure(1)
    x, y = _mnist_like(12)
    dataset = _dataset(x, y, repeat=False)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _sequential()
        model.build((BATCH, 28, 28))
        initial = model.get_weights()
        _compile(model, steps_per_execution=dataset.cardinality())
        history = model.fit(dataset, epochs=2, verbose=0)
    stock = _sequential()
    stock.build((BATCH, 28, 28))
    stock.set_weights(initial)
    _compile(stock)
    stock_history = stock.fit(_dataset(x, y, repeat=False), epochs=2, verbose=0)
    _assert_same_training(history, model, stock_history, stock)


def test_example3_gradient_accumulation_over_a_truncated_dataset():
    """keras/ipu/docs/example3.py: the dataset truncated to a multiple of the accumulation
    count, which is steps_per_execution; set_gradient_accumulation_options(10)."""
    _configure(1)
    x, y = _mnist_like(25)
    dataset = _dataset(x, y, repeat=False)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _sequential()
        model.build((BATCH, 28, 28))
        initial = model.get_weights()
        accumulation = 10
        steps_per_execution = dataset.cardinality() // accumulation * accumulation
        dataset = dataset.take(steps_per_execution)
        _compile(model, steps_per_execution=steps_per_execution)
        model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=10)
        history = model.fit(dataset, epochs=2, verbose=0)
    assert int(steps_per_execution) == 20
    # Two weight updates per epoch, each over 10 batches of 32: stock Keras on batches of 320.
    stock = _sequential()
    stock.build((BATCH, 28, 28))
    stock.set_weights(initial)
    _compile(stock, accumulated=10)
    big = _dataset(x[: 20 * BATCH], y[: 20 * BATCH], repeat=False, batch=10 * BATCH)
    stock_history = stock.fit(big, epochs=2, verbose=0)
    _assert_same_training(history, model, stock_history, stock, accumulated=10)


def test_example4_functional_fit():
    """keras/ipu/docs/example4.py: a functional model created and fitted in an IPUStrategy."""
    _configure(1)
    x, y = _mnist_like(20)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _functional()
        _compile(model)
        initial = model.get_weights()
        history = model.fit(_dataset(x, y), epochs=2, steps_per_epoch=10, verbose=0)
    stock = _functional()
    stock.set_weights(initial)
    _compile(stock)
    stock_history = stock.fit(_dataset(x, y), epochs=2, steps_per_epoch=10, verbose=0)
    _assert_same_training(history, model, stock_history, stock)


def test_example5_functional_with_steps_per_execution():
    """keras/ipu/docs/example5.py: a functional model, steps_per_execution dividing
    steps_per_epoch (50 of 100 there, 5 of 10 here)."""
    _configure(1)
    x, y = _mnist_like(20)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _functional()
        _compile(model, steps_per_execution=5)
        initial = model.get_weights()
        history = model.fit(_dataset(x, y), epochs=2, steps_per_epoch=10, verbose=0)
    stock = _functional()
    stock.set_weights(initial)
    _compile(stock)
    stock_history = stock.fit(_dataset(x, y), epochs=2, steps_per_epoch=10, verbose=0)
    _assert_same_training(history, model, stock_history, stock)


def test_example6_functional_with_gradient_accumulation():
    """keras/ipu/docs/example6.py: steps_per_execution and gradient accumulation over 10
    batches (50 and 100 steps there, 20 and 20 here)."""
    _configure(1)
    x, y = _mnist_like(40)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _functional()
        _compile(model, steps_per_execution=20)
        model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=10)
        initial = model.get_weights()
        history = model.fit(_dataset(x, y), epochs=2, steps_per_epoch=20, verbose=0)
    stock = _functional()
    stock.set_weights(initial)
    _compile(stock, accumulated=10)
    big = _dataset(x, y, batch=10 * BATCH)
    stock_history = stock.fit(big, epochs=2, steps_per_epoch=2, verbose=0)
    _assert_same_training(history, model, stock_history, stock, accumulated=10)


def test_example10_infeed_and_outfeed_queue_options():
    """keras/ipu/docs/example10.py: set_infeed_queue_options(prefetch_depth=2) and
    set_outfeed_queue_options(buffer_depth=2); here the model then also trains and predicts,
    as stock Keras does."""
    _configure(1)
    x, y = _mnist_like(8)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _sequential()
        model.set_infeed_queue_options(prefetch_depth=2)
        model.set_outfeed_queue_options(buffer_depth=2)
        model.build((BATCH, 28, 28))
        initial = model.get_weights()
        _compile(model, steps_per_execution=4)
        history = model.fit(_dataset(x, y), epochs=2, steps_per_epoch=4, verbose=0)
        predictions = model.predict(x[: 4 * BATCH] / 255.0, batch_size=BATCH)
    stock = _sequential()
    stock.build((BATCH, 28, 28))
    stock.set_weights(initial)
    _compile(stock)
    stock_history = stock.fit(_dataset(x, y), epochs=2, steps_per_epoch=4, verbose=0)
    _assert_same_training(history, model, stock_history, stock)
    want = stock.predict(x[: 4 * BATCH] / 255.0, batch_size=BATCH, verbose=0)
    assert predictions.shape == (4 * BATCH, 10)
    np.testing.assert_allclose(predictions, want, rtol=1e-4, atol=1e-5)


# Pipelining ------------------------------------------------------------------------------------


def _four_dense_sequential():
    return keras.Sequential(
        [
            keras.layers.Dense(8),
            keras.layers.Dense(16),
            keras.layers.Dense(16),
            keras.layers.Dense(1),
        ]
    )


def test_example7_pipelined_sequential_interleaved():
    """keras/ipu/docs/example7.py: a Sequential model on two stages
    (set_pipeline_stage_assignment([0, 0, 1, 1])), the Interleaved schedule, gradient
    accumulation (16 and steps_per_execution 256 there, 8 and 32 here), steps_per_epoch
    smaller than steps_per_execution."""
    _configure(2)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _four_dense_sequential()
        model.set_pipeline_stage_assignment([0, 0, 1, 1])
        _compile_pipelined(model, steps_per_execution=32)
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=8,
            pipeline_schedule=ipu.ops.pipelining_ops.PipelineSchedule.Interleaved,
        )
        model.build((BATCH, 28, 28))
        initial = model.get_weights()
        history = model.fit(_pipeline_data(32), epochs=2, steps_per_epoch=16, verbose=0)
    stock = _four_dense_sequential()
    stock.build((BATCH, 28, 28))
    stock.set_weights(initial)
    _compile_pipelined(stock, accumulated=8)
    stock_history = stock.fit(
        _pipeline_data(32, batch=8 * BATCH), epochs=2, steps_per_epoch=2, verbose=0
    )
    _assert_same_training(history, model, stock_history, stock, accumulated=8)


def _four_dense_functional(stage=None):
    stage = stage or (lambda _: contextlib.nullcontext())
    inputs = keras.layers.Input((28, 28))
    with stage(0):
        x = keras.layers.Dense(8)(inputs)
        x = keras.layers.Dense(16)(x)
    with stage(1):
        x = keras.layers.Dense(16)(x)
        x = keras.layers.Dense(1)(x)
    return keras.Model(inputs=inputs, outputs=x)


def test_example8_pipelined_functional_with_pipeline_stage_scopes():
    """keras/ipu/docs/example8.py: a functional model whose layer calls are made in
    `keras.ipu.PipelineStage` scopes, the default (Grouped) schedule, gradient accumulation."""
    _configure(2)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _four_dense_functional(keras.ipu.PipelineStage)
        _compile_pipelined(model, steps_per_execution=32)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
        initial = model.get_weights()
        history = model.fit(_pipeline_data(32), epochs=2, steps_per_epoch=16, verbose=0)
    stock = _four_dense_functional()
    stock.set_weights(initial)
    _compile_pipelined(stock, accumulated=8)
    stock_history = stock.fit(
        _pipeline_data(32, batch=8 * BATCH), epochs=2, steps_per_epoch=2, verbose=0
    )
    _assert_same_training(history, model, stock_history, stock, accumulated=8)


def test_example9_resnet50_split_at_conv4_block2_add(capsys):
    """keras/ipu/docs/example9.py: ResNet50's layer invocations (post-order) assigned to stage
    0 up to `conv4_block2_add` and to stage 1 after it; the summary printed. (weights=None:
    no download.)"""
    from tf_keras.applications import resnet

    _configure(1)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = resnet.ResNet50(weights=None)
        assignments = model.get_pipeline_stage_assignment()
        stage_id = 0
        for assignment in assignments:
            assignment.pipeline_stage = stage_id
            if assignment.layer.name.startswith("conv4_block2_add"):
                stage_id = 1
        model.set_pipeline_stage_assignment(assignments)
        model.print_pipeline_stage_assignment_summary()
        stages = {a.layer.name: a.pipeline_stage for a in model.get_pipeline_stage_assignment()}
    # Every layer but the input is invoked once.
    assert len(assignments) == len(model.layers) - 1
    names = [a.layer.name for a in assignments]
    split = names.index("conv4_block2_add")
    assert all(stages[name] == 0 for name in names[: split + 1])
    assert all(stages[name] == 1 for name in names[split + 1 :])
    assert stages["conv1_conv"] == 0 and stages["predictions"] == 1
    printed = capsys.readouterr().out
    assert "conv4_block2_add" in printed and "predictions" in printed


class _PipelinedSubclass(keras.Model):
    """example11.py's MyModel; `staged=False` makes its stock twin (no PipelineStage)."""

    def __init__(self, staged=True):
        super().__init__(self)
        self._staged = staged
        self.dense_layer_1 = keras.layers.Dense(8)
        self.dense_layer_2 = keras.layers.Dense(8)
        self.concat_layer = keras.layers.Concatenate()
        self.dense_layer_3 = keras.layers.Dense(1)

    def _stage(self, stage):
        return keras.ipu.PipelineStage(stage) if self._staged else contextlib.nullcontext()

    def call(self, inputs):
        with self._stage(0):
            x = self.dense_layer_1(inputs)
        with self._stage(1):
            x1 = self.dense_layer_2(x)
            x2 = self.dense_layer_2(x)
        with self._stage(2):
            x1 = self.dense_layer_2(x1)
            x2 = self.dense_layer_2(x2)
            x = self.concat_layer([x1, x2])
        with self._stage(3):
            x = self.dense_layer_3(x)
        return x


class _ExistingSubclass(keras.Model):
    """example12.py's ExistingModel: the same layers, no stages in `call`."""

    def __init__(self):
        super().__init__(self)
        self.dense_layer_1 = keras.layers.Dense(8)
        self.dense_layer_2 = keras.layers.Dense(8)
        self.concat_layer = keras.layers.Concatenate()
        self.dense_layer_3 = keras.layers.Dense(1)

    def call(self, inputs):
        x = self.dense_layer_1(inputs)
        x1 = self.dense_layer_2(x)
        x2 = self.dense_layer_2(x)
        x1 = self.dense_layer_2(x1)
        x2 = self.dense_layer_2(x2)
        x = self.concat_layer([x1, x2])
        return self.dense_layer_3(x)


def _fit_subclass_like_stock(model, initial, make_stock, history):
    stock = make_stock()
    stock(np.zeros((BATCH, 28, 28), np.float32))
    stock.set_weights(initial)
    _compile_pipelined(stock, accumulated=8)
    stock_history = stock.fit(
        _pipeline_data(32, batch=8 * BATCH), epochs=2, steps_per_epoch=2, verbose=0
    )
    _assert_same_training(history, model, stock_history, stock, accumulated=8)


def test_example11_pipelined_model_subclass():
    """keras/ipu/docs/example11.py: a Model subclass calling its layers in PipelineStage
    scopes (four stages, one layer shared by two), device_mapping=[0, 1, 1, 0] on two IPUs."""
    _configure(2)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _PipelinedSubclass()
        _compile_pipelined(model, steps_per_execution=32)
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=8, device_mapping=[0, 1, 1, 0]
        )
        model(np.zeros((BATCH, 28, 28), np.float32))
        initial = model.get_weights()
        history = model.fit(_pipeline_data(32), epochs=2, steps_per_epoch=16, verbose=0)
    _fit_subclass_like_stock(model, initial, lambda: _PipelinedSubclass(staged=False), history)


def test_example12_pipeline_stage_assignment_of_an_existing_subclass():
    """keras/ipu/docs/example12.py: build((28, 28)), then the blank assignments of each layer
    invocation set (dense_layer_2's first two invocations to stage 1, the next two to 2)."""
    _configure(2)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _ExistingSubclass()
        model.build((28, 28))
        assignments = model.get_pipeline_stage_assignment()
        assert [a.pipeline_stage for a in assignments] == [None] * 7
        for assignment in assignments:
            if assignment.layer == model.dense_layer_1:
                assignment.pipeline_stage = 0
            elif assignment.layer == model.dense_layer_2 and assignment.node_index < 2:
                assignment.pipeline_stage = 1
            elif assignment.layer == model.dense_layer_2 and assignment.node_index < 4:
                assignment.pipeline_stage = 2
            elif assignment.layer == model.concat_layer:
                assignment.pipeline_stage = 2
            elif assignment.layer == model.dense_layer_3:
                assignment.pipeline_stage = 3
        model.set_pipeline_stage_assignment(assignments)
        got = [(a.layer.name, a.node_index, a.pipeline_stage) for a in assignments]
        _compile_pipelined(model, steps_per_execution=32)
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=8, device_mapping=[0, 1, 1, 0]
        )
        initial = model.get_weights()
        history = model.fit(_pipeline_data(32), epochs=2, steps_per_epoch=16, verbose=0)
    stages = sorted(stage for _, _, stage in got)
    assert stages == [0, 1, 1, 2, 2, 2, 3], got
    _fit_subclass_like_stock(model, initial, _ExistingSubclass, history)


# Automatic loss scaling ------------------------------------------------------------------------

ALS_IN = np.ones((128, 32), dtype=np.float16)
ALS_TARGETS = 2.0 * np.ones((128, 8), dtype=np.float16)
# The custom loops' rate: the examples' SGD(0.01) on the loss summed over 128 rows overflows
# float16 within a few steps (in stock TensorFlow too), leaving infinities and NaNs to compare.
CUSTOM_LOOP_RATE = 1e-4


def _als_model():
    inputs = keras.layers.Input(32)
    x = keras.layers.Dense(16)(inputs)
    return keras.Model(inputs, keras.layers.Dense(8)(x))


def test_als_example1_fit_with_als_sgd():
    """keras/ipu/docs/als_example1.py: ALSOptimizer(SGD(0.01)) in fit, float16 data; no
    gradient overflows, so training is SGD's (stock Keras's) and the factor doubles every
    8 (update_frequency's default) weight updates."""
    _configure(1)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        m = _als_model()
        initial = m.get_weights()
        opt = ALSOptimizer(SGD(0.01))
        m.compile(loss="mse", optimizer=opt)
        history = m.fit(ALS_IN, ALS_TARGETS, epochs=10, verbose=0)
        factor = float(opt.loss_scaling_factor)
    stock = _als_model()
    stock.set_weights(initial)
    stock.compile(loss="mse", optimizer=SGD(0.01))
    stock_history = stock.fit(ALS_IN, ALS_TARGETS, epochs=10, verbose=0)
    assert len(history.history["loss"]) == 10
    np.testing.assert_allclose(history.history["loss"], stock_history.history["loss"], rtol=1e-4)
    for got, want in zip(m.get_weights(), stock.get_weights(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    # 10 epochs of 4 batches: 40 updates. As in the original, the update counter counts to
    # update_frequency (8) and the factor changes at the next update, which restarts the count:
    # at updates 9, 18, 27 and 36, each a doubling.
    assert factor == 2.0**4


def _sum_mse():
    return keras.losses.MeanSquaredError(reduction=keras.losses.Reduction.SUM)


def _stock_sgd_steps(initial, steps: int, accumulate: int = 1):
    """Stock TensorFlow: `steps` mini-batches of SGD on the summed MSE, the gradients
    of `accumulate` mini-batches summed into each update; the last mini-batch's loss."""
    layer_0, layer_1 = keras.layers.Dense(16), keras.layers.Dense(8)
    layer_1(layer_0(tf.zeros((1, 32))))
    variables = layer_0.trainable_variables + layer_1.trainable_variables
    for v, value in zip(variables, initial, strict=True):
        v.assign(value)
    opt, mse = SGD(CUSTOM_LOOP_RATE), _sum_mse()
    total = None
    loss = None
    for step in range(steps):
        with tf.GradientTape() as tape:
            loss = mse(ALS_TARGETS, layer_1(layer_0(ALS_IN)))
        grads = tape.gradient(loss, variables)
        total = grads if total is None else [t + g for t, g in zip(total, grads, strict=True)]
        if (step + 1) % accumulate == 0:
            opt.apply_gradients(zip(total, variables, strict=True))
            total = None
    return float(loss), [v.numpy() for v in variables]


def _als_custom_loop(accumulate: int | None):
    _configure(1)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        opt = ALSOptimizer(SGD(CUSTOM_LOOP_RATE))
        if accumulate:
            opt = ALSGradientAccumulationOptimizer(opt, num_mini_batches=accumulate)
        layer_0 = keras.layers.Dense(16)
        layer_1 = keras.layers.Dense(8)
        mse = _sum_mse()

        @tf.function(jit_compile=True)
        def step(x, t, _):
            y = layer_1(layer_0(x))
            loss = mse(y_true=t, y_pred=y)
            v = layer_0.trainable_variables + layer_1.trainable_variables
            g = opt.get_gradients(loss, v)
            opt.apply_gradients(zip(g, v, strict=True))
            return x, t, loss

        @tf.function(jit_compile=True)
        def training_loop(x, t):
            _, _, loss = ipu.loops.repeat(10, step, inputs=[x, t, 0.0])
            return loss

        layer_1(layer_0(tf.zeros((1, 32))))
        variables = layer_0.trainable_variables + layer_1.trainable_variables
        initial = [v.numpy() for v in variables]
        loss = strategy.run(training_loop, args=[ALS_IN, ALS_TARGETS])
        final = [v.numpy() for v in variables]
    return float(loss), initial, final


def test_als_example1_non_keras_custom_loop():
    """keras/ipu/docs/als_example1_non_keras.py: ALSOptimizer's get_gradients and
    apply_gradients in a jit-compiled step repeated 10 times by ipu.loops.repeat, run by the
    strategy; the same as 10 steps of stock SGD."""
    loss, initial, final = _als_custom_loop(None)
    want_loss, want = _stock_sgd_steps(initial, 10)
    assert np.isfinite(loss)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-4)
    for got, expected in zip(final, want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_als_example2_fit_with_als_and_gradient_accumulation():
    """keras/ipu/docs/als_example2.py: ALSOptimizer in fit with steps_per_execution=8 and
    gradient accumulation over 4 batches; steps_per_epoch=8 (twice the arrays' 4 batches)."""
    _configure(1)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        m = _als_model()
        initial = m.get_weights()
        opt = ALSOptimizer(SGD(0.01))
        m.compile(loss="mse", optimizer=opt, steps_per_execution=8)
        m.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=4)
        history = m.fit(ALS_IN, ALS_TARGETS, epochs=10, steps_per_epoch=8, verbose=0)
    # Each update sums the gradients of 4 batches of 32 (the mean MSE of each): stock SGD on
    # the whole 128 rows with 4 times the learning rate, 2 updates an epoch.
    stock = _als_model()
    stock.set_weights(initial)
    stock.compile(loss="mse", optimizer=SGD(0.04))
    stock_history = stock.fit(
        np.concatenate([ALS_IN, ALS_IN]),
        np.concatenate([ALS_TARGETS, ALS_TARGETS]),
        batch_size=128,
        epochs=10,
        shuffle=False,
        verbose=0,
    )
    assert len(history.history["loss"]) == 10
    np.testing.assert_allclose(
        history.history["loss"], stock_history.history["loss"], rtol=1e-4, atol=1e-8
    )
    for got, want in zip(m.get_weights(), stock.get_weights(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_als_example2_non_keras_custom_loop_with_accumulation():
    """keras/ipu/docs/als_example2_non_keras.py: ALSGradientAccumulationOptimizer(ALSOptimizer(
    SGD), num_mini_batches=2) in the repeated step: 5 updates, each the sum of two
    mini-batches' gradients."""
    loss, initial, final = _als_custom_loop(2)
    want_loss, want = _stock_sgd_steps(initial, 10, accumulate=2)
    assert np.isfinite(loss)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-4)
    for got, expected in zip(final, want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_als_example3_pipelined_float16_convolutions_with_captured_activation_gradients():
    """keras/ipu/docs/als_example3.py: float16 convolutions wrapped in
    CaptureActivationGradients on two pipeline stages, set_pipelining_options inside
    create_model, ALSOptimizer(update_frequency=5, accumulate_statistics_over_update_period=
    False); 50 epochs there, 10 here: one weight update an execution (8 steps, accumulation
    8), so one factor update (at the 6th), a doubling (no gradient near float16's maximum)."""
    _configure(2)

    def create_model():
        inputs = keras.layers.Input((28, 28, 1))
        with keras.ipu.PipelineStage(0):
            conv = keras.layers.Conv2D(32, dtype=tf.float16, kernel_size=(3, 3), activation="relu")
            x = CaptureActivationGradients(conv)(inputs)
            x = keras.layers.MaxPooling2D(pool_size=(2, 2))(x)
            conv = keras.layers.Conv2D(64, dtype=tf.float16, kernel_size=(3, 3), activation="relu")
            x = CaptureActivationGradients(conv)(x)
        with keras.ipu.PipelineStage(1):
            x = keras.layers.MaxPooling2D(pool_size=(2, 2))(x)
            x = keras.layers.Flatten()(x)
            x = keras.layers.Dropout(0.5)(x)
            x = CaptureActivationGradients(keras.layers.Dense(10, activation="softmax"))(x)
        m = keras.Model(inputs=inputs, outputs=x)
        m.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
        return m

    x, y = _mnist_like(8)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = create_model()
        opt = ALSOptimizer(
            SGD(0.01), update_frequency=5, accumulate_statistics_over_update_period=False
        )
        model.compile(
            loss=keras.losses.SparseCategoricalCrossentropy(),
            optimizer=opt,
            metrics=["accuracy"],
            steps_per_execution=8,
        )
        history = model.fit(_dataset(x, y, channel=True), epochs=10, steps_per_epoch=8, verbose=0)
        factor = float(opt.loss_scaling_factor)
    losses = history.history["loss"]
    assert len(losses) == 10 and np.all(np.isfinite(losses))
    # The factor changes at the 6th update (the counter reached 5, see als_example1): 1 to 2.
    assert factor == 2.0
    assert model.layers[1].layer.kernel.dtype == tf.float16


# Exporting for TensorFlow Serving --------------------------------------------------------------

INPUT_SHAPE = (1, 4)
ITERATIONS = 16


def _single(outputs):
    """The one output of a serving call (a dict of one entry, or a tensor)."""
    if isinstance(outputs, dict):
        (outputs,) = outputs.values()
    elif isinstance(outputs, (list, tuple)):
        (outputs,) = outputs
    return np.asarray(outputs)


def _serve_in_stock_tensorflow(export_dir, inputs: list[np.ndarray]):
    """The serving_default signature's single output in a Python without openipu; the inputs
    fed by the signature's sorted input names."""
    arrays = [value.tolist() for value in inputs]
    dtypes = [str(value.dtype) if value.dtype.kind != "U" else "str" for value in inputs]
    result = stock_tensorflow.run(
        f"""
        import numpy as np, tensorflow as tf
        serve = tf.saved_model.load({str(export_dir)!r}).signatures["serving_default"]
        names = sorted(serve.structured_input_signature[1])
        values = [np.array(v, dtype=d) for v, d in zip({arrays!r}, {dtypes!r})]
        feeds = {{n: tf.constant(v) for n, v in zip(names, values)}}
        (output,) = serve(**feeds).values()
        result = {{"names": names, "output": output.numpy().tolist()}}
        """
    )
    return result["names"], np.array(result["output"])


def _two_inputs():
    return [
        keras.layers.Input(shape=INPUT_SHAPE[1:], batch_size=1, name="input_1"),
        keras.layers.Input(shape=INPUT_SHAPE[1:], batch_size=1, name="input_2"),
    ]


def _check_export(runtime_func, export_dir, want):
    """Serves inputs i and 2 (i < 16) with the runtime function, and the last in stock TF."""
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        for i in range(ITERATIONS):
            a = np.ones(INPUT_SHAPE, dtype=np.float32) * i
            b = np.ones(INPUT_SHAPE, dtype=np.float32) * 2
            np.testing.assert_allclose(_single(runtime_func(a, b)), want(a, b), rtol=1e-6)
    names, served = _serve_in_stock_tensorflow(export_dir, [a, b])
    assert names == ["input_1", "input_2"]
    np.testing.assert_allclose(served, want(a, b), rtol=1e-6)


def test_exporting_model_example(tmp_path):
    """keras/ipu/docs/exporting_model_example.py: a model adding two (1, 4) inputs, compiled
    with steps_per_execution=16, exported with export_for_ipu_serving on an ON_DEMAND
    connection with remote buffers; served 16 times."""
    _configure(1, remote_buffers=True)
    export_dir = tmp_path / "my_saved_model_ipu" / "007"
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        input1, input2 = _two_inputs()
        model = keras.Model(inputs=[input1, input2], outputs=keras.layers.Add()([input1, input2]))
        model.build([INPUT_SHAPE, INPUT_SHAPE])
        model.compile(steps_per_execution=ITERATIONS)
    runtime_func = model.export_for_ipu_serving(str(export_dir))
    _check_export(runtime_func, export_dir, lambda a, b: a + b)


def _abs_pre(lhs, rhs):
    abs_layer = keras.layers.Lambda(tf.abs)
    return abs_layer(lhs), abs_layer(rhs)


def _sum_post(result):
    return keras.layers.Lambda(tf.reduce_sum)(result)


def test_exporting_model_preprocessing_postprocessing_example(tmp_path):
    """keras/ipu/docs/exporting_model_preprocessing_postprocessing_example.py: |a| + |b|
    summed to a scalar, the abs and sum Lambda layers inside the model (on the IPU)."""
    _configure(1, remote_buffers=True)
    export_dir = tmp_path / "my_saved_model_ipu" / "009"
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        input1, input2 = _two_inputs()
        x = keras.layers.Add()(_abs_pre(input1, input2))
        model = keras.Model(inputs=[input1, input2], outputs=_sum_post(x))
        model.build([INPUT_SHAPE, INPUT_SHAPE])
        model.compile(steps_per_execution=ITERATIONS)
    runtime_func = model.export_for_ipu_serving(str(export_dir))
    _check_export(runtime_func, export_dir, lambda a, b: np.sum(np.abs(a) + np.abs(b)))


STRING_SHAPE = (1, 6)
LHS_WORDS = ["graphcore", "red", "blue", "yellow", "graphcore", "purple"]
RHS_WORDS = ["apple", "banana", "graphcore", "orange", "pineapple", "graphcore"]


def _string_steps():
    """The CPU examples' steps: "graphcore" is 1.0, any other word a uniform [0, 1) number;
    the postprocessing takes the absolute value."""
    signature = (
        tf.TensorSpec(shape=STRING_SHAPE, dtype=tf.string),
        tf.TensorSpec(shape=STRING_SHAPE, dtype=tf.string),
    )

    def to_number(word):
        if word == "graphcore":  # a tf.cond (AutoGraph)
            return tf.constant(1.0)
        return tf.random.uniform(shape=(), dtype=np.float32)

    def to_numbers(words):
        return tf.stack(
            [tf.stack([to_number(w) for w in tf.unstack(row)]) for row in tf.unstack(words)]
        )

    @tf.function(input_signature=signature)
    def preprocessing_step(lhs_input, rhs_input):
        return to_numbers(lhs_input), to_numbers(rhs_input)

    @tf.function(input_signature=(tf.TensorSpec(shape=STRING_SHAPE, dtype=np.float32),))
    def postprocessing_step(model_result):
        return tf.abs(model_result)

    return preprocessing_step, postprocessing_step


def _check_string_export(runtime_func, export_dir, check):
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        lhs = tf.constant(LHS_WORDS, shape=STRING_SHAPE, dtype=tf.string)
        rhs = tf.constant(RHS_WORDS, shape=STRING_SHAPE, dtype=tf.string)
        got = _single(runtime_func(lhs, rhs))
    assert got.shape == STRING_SHAPE
    check(got[0])
    words = [np.array([LHS_WORDS]), np.array([RHS_WORDS])]
    names, served = _serve_in_stock_tensorflow(export_dir, words)
    assert served.shape == STRING_SHAPE
    check(served[0])


def test_exporting_model_preprocessing_postprocessing_cpu_example(tmp_path):
    """keras/ipu/docs/exporting_model_preprocessing_postprocessing_cpu_example.py: string
    inputs turned into numbers by a preprocessing tf.function and the model's sum made
    absolute by a postprocessing one, both passed to export_for_ipu_serving (on the CPU)."""
    _configure(1, remote_buffers=True)
    export_dir = tmp_path / "my_saved_model_ipu" / "009"
    preprocessing_step, postprocessing_step = _string_steps()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        input1 = keras.layers.Input(shape=STRING_SHAPE[1:], batch_size=1, name="input_1")
        input2 = keras.layers.Input(shape=STRING_SHAPE[1:], batch_size=1, name="input_2")
        model = keras.Model(inputs=[input1, input2], outputs=keras.layers.Add()([input1, input2]))
        model.build([STRING_SHAPE, STRING_SHAPE])
        model.compile(steps_per_execution=ITERATIONS)
    runtime_func = model.export_for_ipu_serving(
        str(export_dir),
        preprocessing_step=preprocessing_step,
        postprocessing_step=postprocessing_step,
    )

    def check(values):
        # A "graphcore" on either side: 1 + [0, 1); none: [0, 2).
        assert np.all((values >= 1.0) & (values < 2.0) | ~np.isin(range(6), [0, 2, 4, 5]))
        assert np.all((values >= 0.0) & (values < 2.0))

    _check_string_export(runtime_func, export_dir, check)


def test_exporting_pipelined_model_example(tmp_path):
    """keras/ipu/docs/exporting_pipelined_model_example.py: a * b on stage 0 and + b on
    stage 1 (device_mapping=[0, 1]), exported with export_for_ipu_serving."""
    _configure(2, remote_buffers=True)
    export_dir = tmp_path / "my_saved_model_ipu" / "010"
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        input1, input2 = _two_inputs()
        with keras.ipu.PipelineStage(0):
            x = keras.layers.Multiply()([input1, input2])
        with keras.ipu.PipelineStage(1):
            x = keras.layers.Add()([x, input2])
        model = keras.Model(inputs=[input1, input2], outputs=x)
        model.set_pipelining_options(device_mapping=[0, 1])
        model.build([INPUT_SHAPE, INPUT_SHAPE])
        model.compile(steps_per_execution=ITERATIONS)
    runtime_func = model.export_for_ipu_serving(str(export_dir))
    _check_export(runtime_func, export_dir, lambda a, b: a * b + b)


def test_exporting_pipelined_model_preprocessing_postprocessing_cpu_example(tmp_path):
    """keras/ipu/docs/exporting_pipelined_model_preprocessing_postprocessing_cpu_example.py:
    the two-stage a * b + b model between the string preprocessing and the abs
    postprocessing tf.functions (on the CPU)."""
    preprocessing_step, postprocessing_step = _string_steps()
    _configure(2, remote_buffers=True)
    export_dir = tmp_path / "my_saved_model_ipu" / "010"
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        input1 = keras.layers.Input(shape=STRING_SHAPE[1:], batch_size=1, name="input_1")
        input2 = keras.layers.Input(shape=STRING_SHAPE[1:], batch_size=1, name="input_2")
        with keras.ipu.PipelineStage(0):
            x = keras.layers.Multiply()([input1, input2])
        with keras.ipu.PipelineStage(1):
            x = keras.layers.Add()([x, input2])
        model = keras.Model(inputs=[input1, input2], outputs=x)
        model.set_pipelining_options(device_mapping=[0, 1])
        model.build([STRING_SHAPE, STRING_SHAPE])
        model.compile(steps_per_execution=ITERATIONS)
    runtime_func = model.export_for_ipu_serving(
        str(export_dir),
        preprocessing_step=preprocessing_step,
        postprocessing_step=postprocessing_step,
    )

    def check(values):
        # (a + 1) * b with a, b in [0, 1], and b = 1 where the right word is "graphcore".
        assert np.all((values >= 0.0) & (values < 2.0))
        assert np.all(values[[2, 5]] >= 1.0)

    _check_string_export(runtime_func, export_dir, check)


def test_exporting_pipelined_model_preprocessing_postprocessing_example(tmp_path):
    """keras/ipu/docs/exporting_pipelined_model_preprocessing_postprocessing_example.py: four
    stages on four IPUs: abs of the first input (used for both operands, as in the
    example), |a| * |a|, + |a|, summed; the second input is not used."""
    _configure(4, remote_buffers=True)
    export_dir = tmp_path / "my_saved_model_ipu" / "011"
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        input1_ph, input2_ph = _two_inputs()
        with keras.ipu.PipelineStage(0):
            input1, input2 = _abs_pre(input1_ph, input1_ph)
        with keras.ipu.PipelineStage(1):
            x = keras.layers.Multiply()([input1, input2])
        with keras.ipu.PipelineStage(2):
            x = keras.layers.Add()([x, input2])
        with keras.ipu.PipelineStage(3):
            x = _sum_post(x)
        model = keras.Model(inputs=[input1_ph, input2_ph], outputs=x)
        model.set_pipelining_options(device_mapping=[0, 1, 2, 3])
        model.build([INPUT_SHAPE, INPUT_SHAPE])
        model.compile(steps_per_execution=ITERATIONS)
    runtime_func = model.export_for_ipu_serving(str(export_dir))
    _check_export(runtime_func, export_dir, lambda a, b: np.sum(np.abs(a) * np.abs(a) + np.abs(a)))
