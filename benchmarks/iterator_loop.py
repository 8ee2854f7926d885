"""The published TF2 training loop: `next(iterator)` in a `for _ in tf.range(steps)` loop.

An MNIST-sized MLP (784-128-10, batch 32, SGD) trained with the program shape of
the IPU TensorFlow 2 examples: a `tf.function` whose loop reads a `tf.data`
iterator, computes the gradients, applies them and enqueues the loss to an
outfeed. Stock TensorFlow runs it as a plain `tf.function` (stock XLA cannot
compile `IteratorGetNext`) with the loss appended to a `tf.TensorArray`;
openipu runs it through `IPUStrategy.run`, which fuses the loop into one XLA
computation (see `engine/autograph_loops.py`), and once more with the fusion
turned off. Prints samples per second and the ratios (higher is better).

    python benchmarks/iterator_loop.py [--steps 100] [--repeats 20]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu

from timing import best_rates

BATCH = 32
FUSE_ENV = "OPENIPU_FUSE_ITERATOR_LOOPS"


def make_dataset() -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    images = rng.random((60 * BATCH, 784), dtype=np.float32)
    labels = rng.integers(0, 10, 60 * BATCH).astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    return dataset.batch(BATCH, drop_remainder=True).repeat()


def make_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [keras.layers.Dense(128, activation="relu", input_shape=(784,)), keras.layers.Dense(10)]
    )


def train_step(model, optimizer, x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
    return loss


def stock_program(steps: int) -> Callable[[], object]:
    model, optimizer = make_model(), keras.optimizers.SGD(0.01)
    iterator = iter(make_dataset())

    @tf.function
    def training_loop(iterator, steps):
        losses = tf.TensorArray(tf.float32, size=steps)
        for step in tf.range(steps):
            x, y = next(iterator)
            losses = losses.write(step, train_step(model, optimizer, x, y))
        return losses.stack()

    steps_tensor = tf.constant(steps)
    return lambda: training_loop(iterator, steps_tensor).numpy()


def openipu_program(steps: int, fused: bool) -> Callable[[], object]:
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model, optimizer = make_model(), keras.optimizers.SGD(0.01)
        iterator = iter(make_dataset())
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def training_loop(iterator, steps):
            for _ in tf.range(steps):
                x, y = next(iterator)
                outfeed.enqueue(train_step(model, optimizer, x, y))

    steps_tensor = tf.constant(steps)

    def run():
        strategy.run(training_loop, args=[iterator, steps_tensor])
        return outfeed.dequeue().numpy()

    previous = os.environ.get(FUSE_ENV)
    os.environ[FUSE_ENV] = "1" if fused else "0"
    try:
        run()  # traced (fused or not) and compiled now
    finally:
        if previous is None:
            del os.environ[FUSE_ENV]
        else:
            os.environ[FUSE_ENV] = previous
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()

    programs = {
        "stock": stock_program(args.steps),
        "fused": openipu_program(args.steps, fused=True),
        "unfused": openipu_program(args.steps, fused=False),
    }
    rates = best_rates(programs, args.steps * BATCH, args.repeats)
    print(f"stock TensorFlow tf.function:            {rates['stock']:10.0f} samples/s")
    print(f"openipu IPUStrategy.run, fused loop:     {rates['fused']:10.0f} samples/s")
    print(f"openipu IPUStrategy.run, fusion off:     {rates['unfused']:10.0f} samples/s")
    print(f"ratio fused / stock:   {rates['fused'] / rates['stock']:.2f}")
    print(f"ratio unfused / stock: {rates['unfused'] / rates['stock']:.2f}")


if __name__ == "__main__":
    main()
