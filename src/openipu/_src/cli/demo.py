"""`openipu demo`: train a small Keras model on an emulated IPU, as an IPU program would.

The data is generated (no download): 28x28 "digit" images made from ten
random class prototypes plus noise, a task a small MLP learns in an epoch.
The program is written exactly like a published IPU Keras program:
configure the system, build and compile the model in an IPUStrategy scope
with `steps_per_execution`, and `fit`. A second part trains the same model
split into two pipeline stages on a device of four IPUs: two data-parallel
replicas of a two-IPU pipeline, with gradient accumulation.
"""

from __future__ import annotations

import math
import time

import numpy as np


def make_dataset(samples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Images of ten classes: a fixed random prototype per class plus heavy Gaussian noise."""
    prototypes = np.random.default_rng(1234).uniform(0.0, 1.0, size=(10, 28, 28))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=samples).astype(np.int32)
    noise = rng.normal(0.0, 2.5, size=(samples, 28, 28))
    return (prototypes[labels] + noise).astype(np.float32), labels


def run(epochs: int, batch_size: int, steps_per_execution: int, samples: int) -> int:
    import tensorflow as tf
    from tensorflow.python import ipu

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()

    samples -= samples % (batch_size * steps_per_execution)
    images, labels = make_dataset(samples)
    test_images, test_labels = make_dataset(batch_size * steps_per_execution * 4, seed=1)
    print(
        f"openipu demo: {samples} generated 28x28 images, batch size {batch_size}, "
        f"{steps_per_execution} steps per execution on /device:IPU:0"
    )

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.layers.Flatten(input_shape=(28, 28)),
                tf.keras.layers.Dense(128, activation="relu"),
                tf.keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(
            optimizer=tf.keras.optimizers.SGD(0.01),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
            steps_per_execution=steps_per_execution,
        )
        start = time.perf_counter()
        model.fit(images, labels, batch_size=batch_size, epochs=epochs, shuffle=True)
        elapsed = time.perf_counter() - start
        _, accuracy = model.evaluate(test_images, test_labels, batch_size=batch_size, verbose=0)

    print(
        f"Trained {epochs * samples} samples in {elapsed:.1f} s: "
        f"{epochs * samples / elapsed:,.0f} samples/s (including compilation); "
        f"test accuracy {accuracy:.3f}"
    )
    _pipelined_replicas(images, labels, test_images, test_labels, batch_size, steps_per_execution)
    return 0


def _pipelined_replicas(images, labels, test_images, test_labels, batch_size, steps_per_execution):
    """The model in two pipeline stages, replicated over a device of four IPUs."""
    import tensorflow as tf
    from tensorflow.python import ipu

    ipu.config.reset_ipu_configuration()
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 4
    config.configure_ipu_system()
    accumulation = math.gcd(steps_per_execution, 4)
    replicas = 2
    usable = len(images) - len(images) % (batch_size * steps_per_execution * replicas)
    images, labels = images[:usable], labels[:usable]
    print(
        "\nThe same model as a 2-stage pipeline on a 4-IPU device (2 replicas), "
        f"gradients accumulated over {accumulation} batches:"
    )
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        inputs = tf.keras.Input((28, 28))
        with tf.keras.ipu.PipelineStage(0):
            hidden = tf.keras.layers.Flatten()(inputs)
            hidden = tf.keras.layers.Dense(128, activation="relu")(hidden)
        with tf.keras.ipu.PipelineStage(1):
            outputs = tf.keras.layers.Dense(10, activation="softmax")(hidden)
        model = tf.keras.Model(inputs, outputs)
        model.compile(
            optimizer=tf.keras.optimizers.SGD(0.01),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
            steps_per_execution=steps_per_execution,
        )
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=accumulation)
        model.set_replication_options("MEAN")
        start = time.perf_counter()
        model.fit(images, labels, batch_size=batch_size, epochs=2, verbose=2)
        elapsed = time.perf_counter() - start
        _, accuracy = model.evaluate(test_images, test_labels, batch_size=batch_size, verbose=0)
    print(
        f"Trained {2 * len(images)} samples in {elapsed:.1f} s: "
        f"{2 * len(images) / elapsed:,.0f} samples/s (including compilation); "
        f"test accuracy {accuracy:.3f}"
    )
