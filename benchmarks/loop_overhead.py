"""Loop overhead: `loops.repeat` over an infeed against the same loop in stock TensorFlow.

Both loops run the same small body (a 32x32 matmul and a reduction) over the
same dataset, N iterations per host call. Stock TensorFlow: a `tf.function`
with `tf.while_loop` calling `next(iterator)`. openipu: `loops.repeat` with an
`IPUInfeedQueue`, run through `IPUStrategy.run`. Prints iterations per second
of each and the ratio (openipu / stock; higher is better).

    python benchmarks/loop_overhead.py [--iterations 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse

import numpy as np
import tensorflow as tf
from tensorflow.python import ipu

from timing import best_rate


def make_dataset() -> tf.data.Dataset:
    values = np.random.default_rng(0).normal(size=(1024, 32, 32)).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices(values).repeat()


def body(total, x):
    return total + tf.reduce_sum(tf.matmul(x, x))


def stock_rate(iterations: int, repeats: int) -> float:
    iterator = iter(make_dataset())

    @tf.function
    def loop():
        return tf.while_loop(
            lambda i, total: i < iterations,
            lambda i, total: (i + 1, body(total, next(iterator))),
            [0, 0.0],
        )[1]

    return best_rate(lambda: loop().numpy(), iterations, repeats)


def openipu_rate(iterations: int, repeats: int) -> float:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(make_dataset())

        @tf.function(jit_compile=True)
        def loop():
            return ipu.loops.repeat(iterations, body, [0.0], infeed)

        return best_rate(lambda: strategy.run(loop).numpy(), iterations, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    stock = stock_rate(args.iterations, args.repeats)
    ours = openipu_rate(args.iterations, args.repeats)
    print(f"stock TensorFlow tf.while_loop + iterator: {stock:10.0f} iterations/s")
    print(f"openipu loops.repeat + IPUInfeedQueue:     {ours:10.0f} iterations/s")
    print(f"ratio (openipu / stock): {ours / stock:.2f}")


if __name__ == "__main__":
    main()
