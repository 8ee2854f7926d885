"""Conformance: graphcore/keras `keras/ipu/optimizers/als_optimizer_specializations_test.py`.

The ALS optimizers that keep their state in loss-scaled units (ALSOptimizerAdam,
ALSOptimizerRMSProp plain, centred and with momentum, ALSOptimizerSGD plain and with
momentum) train the original's convolutional classifier (float16 convolutions, float32
classifier) with a loss that is finite and falls every epoch. Random sparse 28x28 patterns,
one per class, replace the original's MNIST download (there is no network), and 3 epochs of
21 steps its 3 epochs of 128 (the suite must stay fast): the factor's first update, due
after 64 steps, is not reached here (tests/keras/test_als_specializations.py checks the
updates with the factor changing against the original's formulas).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tf_keras.ipu.optimizers import ALSOptimizerAdam, ALSOptimizerRMSProp, ALSOptimizerSGD

STEPS_PER_EPOCH = 21  # 63 steps: before the factor's first update (update_frequency=64)


def _dataset():
    """MNIST-like: each class a sparse pattern of bright pixels (about a tenth of the image,
    as MNIST's digits), each image its class's pattern with a few pixels dropped."""
    rng = np.random.default_rng(3)
    templates = (rng.uniform(size=(10, 28, 28, 1)) < 0.1).astype(np.float32)
    y = rng.integers(0, 10, size=32 * STEPS_PER_EPOCH)
    x = templates[y] * (rng.uniform(size=(len(y), 28, 28, 1)) > 0.2)
    labels = keras.utils.to_categorical(y, 10)
    ds = tf.data.Dataset.from_tensor_slices((x.astype(np.float32), labels))
    ds = ds.batch(32, drop_remainder=True)
    return ds.map(lambda d, label: (d, tf.cast(label, tf.int32))).repeat()


def _model(opt):
    init = keras.initializers.Constant(0.5)
    inputs = keras.Input(shape=(28, 28, 1))
    x = keras.layers.Conv2D(
        32, (3, 3), activation="relu", dtype=tf.float16, kernel_initializer=init
    )(inputs)
    x = keras.layers.MaxPooling2D(pool_size=(2, 2))(x)
    x = keras.layers.Conv2D(
        64, (3, 3), activation="relu", dtype=tf.float16, kernel_initializer=init
    )(x)
    x = keras.layers.MaxPooling2D(pool_size=(2, 2))(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dropout(0.5)(x)
    x = keras.layers.Dense(10, activation="softmax", dtype=tf.float32, kernel_initializer=init)(x)
    model = keras.Model(inputs, x)
    model.compile(optimizer=opt, loss="categorical_crossentropy")
    return model


CASES = {
    "Adam": lambda: ALSOptimizerAdam(update_frequency=64),
    "RMSProp": lambda: ALSOptimizerRMSProp(update_frequency=64),
    "RMSPropCentredMomentum": lambda: ALSOptimizerRMSProp(
        update_frequency=64, centered=True, momentum=0.01
    ),
    "RMSPropMomentum": lambda: ALSOptimizerRMSProp(update_frequency=64, momentum=0.01),
    "SGD": lambda: ALSOptimizerSGD(update_frequency=64),
    "SGDMomentum": lambda: ALSOptimizerSGD(update_frequency=64, momentum=0.01),
}


@pytest.mark.slow
@pytest.mark.follows("testConvergence")
@pytest.mark.parametrize("make_optimizer", CASES.values(), ids=CASES.keys())
def test_convergence(strategy_on, make_optimizer):
    keras.utils.set_random_seed(1)  # the dropout's masks
    strategy = strategy_on(1)
    with strategy.scope():
        model = _model(make_optimizer())
        history = model.fit(_dataset(), epochs=3, steps_per_epoch=STEPS_PER_EPOCH, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)), losses
    assert np.all(np.diff(losses) < 0), losses
