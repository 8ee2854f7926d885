"""Keras `fit` on an emulated IPU against stock tf_keras, same model, batch and data.

Two models: an MNIST-sized MLP (784-128-10) and a small CNN (two 3x3
convolutions with pooling). Each is trained by
- openipu: built in an IPUStrategy scope, `compile(steps_per_execution=N)`;
- stock tf_keras with its defaults;
- stock tf_keras with `jit_compile=True, steps_per_execution=N`.
After a warm-up epoch (tracing, compilation), one timed epoch; samples/s and
the ratio of openipu to the faster stock setting are printed.

    python benchmarks/keras_fit.py [--batch-size 32] [--steps-per-execution 125]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu


def mlp() -> keras.Model:
    return keras.Sequential(
        [
            keras.layers.Flatten(input_shape=(28, 28, 1)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )


def cnn() -> keras.Model:
    return keras.Sequential(
        [
            keras.layers.Conv2D(16, 3, activation="relu", input_shape=(28, 28, 1)),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )


def data(samples: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (
        rng.random((samples, 28, 28, 1), dtype=np.float32),
        rng.integers(0, 10, samples).astype(np.int32),
    )


def samples_per_second(build, x, y, batch_size, **compile_kwargs) -> float:
    keras.utils.set_random_seed(0)
    model = build()
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        **compile_kwargs,
    )
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0)
    start = time.perf_counter()
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0)
    return len(x) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps-per-execution", type=int, default=125)
    args = parser.parse_args()
    n = args.steps_per_execution
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    strategy = ipu.ipu_strategy.IPUStrategy()

    for name, build, samples in [("MLP", mlp, 60000), ("CNN", cnn, 24000)]:
        x, y = data(samples)
        default = samples_per_second(build, x, y, args.batch_size)
        xla = samples_per_second(
            build, x, y, args.batch_size, jit_compile=True, steps_per_execution=n
        )
        with strategy.scope():
            ours = samples_per_second(build, x, y, args.batch_size, steps_per_execution=n)
        best_stock = max(default, xla)
        print(
            f"{name}: openipu {ours:9.0f} samples/s | stock default {default:9.0f} | "
            f"stock XLA+spe{n} {xla:9.0f} | ratio vs best stock {ours / best_stock:.2f}, "
            f"vs stock default {ours / default:.2f}"
        )


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    main()
