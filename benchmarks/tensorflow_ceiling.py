"""How fast stock TensorFlow itself runs `popart_inference.py`'s MLP and CNN, against onnxruntime.

PopART sessions lower ONNX to TensorFlow, so TensorFlow's own CPU kernels bound their
speed. This writes the two models by hand as `tf.function`s (no openipu), with the same
weights, in the forms that favour TensorFlow most: the inputs already in device tensors (no
host copy), the batches of a step merged into one large batch or unrolled as independent
copies, as a TensorFlow graph and under XLA, the CNN channels-last with its dense weights
permuted so that no transpose is needed before it. The best form's rate, divided by
onnxruntime's, is the most a lowering to TensorFlow can reach.

    python benchmarks/tensorflow_ceiling.py [--batches-per-step 16] [--repeats 10]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
import onnx
import tensorflow as tf
from onnx import numpy_helper

import popart_inference
from timing import best_rates


def initializers(proto: bytes) -> list[np.ndarray]:
    """The model's weights, in the order the builder created them."""
    model = onnx.load_model_from_string(proto)
    return [numpy_helper.to_array(tensor) for tensor in model.graph.initializer]


def mlp_step(weights: list[np.ndarray]) -> Callable[[tf.Tensor], tf.Tensor]:
    w1, b1, w2, b2, w3, b3 = (tf.constant(w) for w in weights)

    def step(x):
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        h = tf.nn.relu(tf.matmul(h, w2) + b2)
        return tf.nn.softmax(tf.matmul(h, w3) + b3)

    return step


def cnn_step(weights: list[np.ndarray]) -> Callable[[tf.Tensor], tf.Tensor]:
    k1, b1, k2, b2, dense, dense_bias = weights
    k1, k2 = (tf.constant(k.transpose(2, 3, 1, 0)) for k in (k1, k2))  # OIHW -> HWIO
    b1, b2, dense_bias = (tf.constant(b) for b in (b1, b2, dense_bias))
    # The ONNX model flattens NCHW maps; channels-last maps flatten as HWC: permute the rows.
    channels, size = 32, 7
    order = np.arange(channels * size * size).reshape(channels, size, size).transpose(1, 2, 0)
    dense = tf.constant(dense[order.reshape(-1)])

    def step(x):  # x: NHWC
        h = x
        for kernel, bias in ((k1, b1), (k2, b2)):
            h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, kernel, 1, "SAME"), bias))
            h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        return tf.matmul(tf.reshape(h, [tf.shape(h)[0], -1]), dense) + dense_bias

    return step


def forms(step: Callable, batches: tf.Tensor) -> dict[str, Callable[[], object]]:
    """Ways to run `step` over `batches` ([steps, batch, ...]) with stock TensorFlow."""
    steps, batch = batches.shape[:2]

    def merged(x):
        return tf.reshape(step(tf.reshape(x, [steps * batch, *x.shape[2:]])), [steps, batch, -1])

    def unrolled(x):
        return tf.stack([step(x[i]) for i in range(steps)])

    runs = {}
    for name, body in (("merged", merged), ("unrolled", unrolled)):
        for compiler, jit in (("graph", False), ("XLA", True)):
            function = tf.function(body, jit_compile=jit)
            runs[f"{name} batches, {compiler}"] = lambda f=function: f(batches).numpy()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches-per-step", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    steps = args.batches_per_step
    print(f"batches per step: {steps}; samples/s, best of {args.repeats} runs")
    for model, make_step, to_tensorflow_layout in (
        (popart_inference.mlp(), mlp_step, lambda x: x),
        (popart_inference.cnn(), cnn_step, lambda x: x.transpose(0, 2, 3, 1)),
    ):
        step = make_step(initializers(model.proto))
        batches = tf.constant(np.stack([to_tensorflow_layout(model.batch)] * steps))
        runs = forms(step, batches)
        theirs, their_output = popart_inference.onnxruntime_runner(model, steps)
        for name, run in runs.items():
            np.testing.assert_allclose(run()[0], their_output(), rtol=1e-3, atol=1e-4, err_msg=name)
        theirs()
        rates = best_rates({**runs, "onnxruntime": theirs}, steps * len(model.batch), args.repeats)
        print(f"{model.name} (batch {len(model.batch)})")
        for name, rate in rates.items():
            print(f"  {name:28s} {rate:10.0f} samples/s  ({rate / rates['onnxruntime']:.2f}x)")
        best = max((rate, name) for name, rate in rates.items() if name != "onnxruntime")
        print(f"  best stock TensorFlow / onnxruntime: {best[0] / rates['onnxruntime']:.2f}"
              f" ({best[1]})")  # fmt: skip


if __name__ == "__main__":
    main()
