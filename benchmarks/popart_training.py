"""PopART training: a TrainingSession against stock tf_keras `fit`, same models, data, batch
and optimizer.

Two models, the ones of `keras_fit.py`: an MNIST-sized MLP (784-128-10) and a small CNN (two
3x3 convolutions with pooling). Each is built with tf_keras; the PopART model is built with
`popart.Builder` from the Keras model's initial weights (NCHW), with a log-softmax and
`nllloss` where Keras has sparse categorical cross-entropy on logits. Each is trained by
- openipu: a `popart.TrainingSession` with `batchesPerStep` batches per `session.run`;
- stock tf_keras `fit` with its defaults;
- stock tf_keras `fit` with `jit_compile=True, steps_per_execution=N`;
with SGD, one epoch per timed run after a warm-up epoch. The three alternate (best of
`--repeats`), so that a busy machine slows them alike. Prints samples/s and the ratio of
openipu to the faster stock setting, after checking that a training step of each gives the
same weights.

    python benchmarks/popart_training.py [--batch-size 32] [--batches-per-step 125]
        [--repeats 3] [--compile auto|xla|graph]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np
import tf_keras as keras

import popart
from timing import best_rates

LEARNING_RATE = 0.01


def keras_mlp() -> keras.Model:
    return keras.Sequential(
        [
            keras.layers.Flatten(input_shape=(28, 28, 1)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )


def keras_cnn() -> keras.Model:
    return keras.Sequential(
        [
            keras.layers.Conv2D(16, 3, activation="relu", input_shape=(28, 28, 1)),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )


def popart_model(kind: str, weights: list[np.ndarray], batch_size: int):
    """The Keras model as ONNX: (proto, image id, label id, loss id, weight ids)."""
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    images = builder.addInputTensor(popart.TensorInfo("FLOAT", [batch_size, 1, 28, 28]), "x")
    labels = builder.addInputTensor(popart.TensorInfo("INT32", [batch_size]), "labels")
    onnx_ops, names = builder.aiOnnx, []

    def weight(value: np.ndarray) -> str:
        names.append(builder.addInitializedInputTensor(np.ascontiguousarray(value)))
        return names[-1]

    h = images
    weights = list(weights)
    if kind == "cnn":
        for _ in range(2):
            kernel, bias = weights.pop(0), weights.pop(0)
            h = onnx_ops.conv([h, weight(np.transpose(kernel, (3, 2, 0, 1))), weight(bias)])
            h = onnx_ops.relu([h])
            h = onnx_ops.maxpool([h], num_outputs=1, kernel_shape=[2, 2], strides=[2, 2])[0]
        h = onnx_ops.transpose([h], perm=[0, 2, 3, 1])  # flatten in Keras' (h, w, c) order
    h = onnx_ops.flatten([h], axis=1)
    while weights:
        kernel, bias = weights.pop(0), weights.pop(0)
        h = onnx_ops.gemm([h, weight(kernel), weight(bias)])
        if weights:
            h = onnx_ops.relu([h])
    log_probabilities = onnx_ops.logsoftmax([h], axis=1)
    loss = builder.aiGraphcore.nllloss([log_probabilities, labels], inputIsLogProbability=True)
    return builder.getModelProto(), images, labels, loss, names


def data(samples: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (
        rng.random((samples, 28, 28, 1), dtype=np.float32),
        rng.integers(0, 10, samples).astype(np.int32),
    )


def keras_trainer(build, x, y, batch_size, **compile_kwargs) -> tuple[Callable, keras.Model]:
    keras.utils.set_random_seed(0)
    model = build()
    model.compile(
        optimizer=keras.optimizers.SGD(LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        **compile_kwargs,
    )

    def epoch() -> None:
        model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0)

    return epoch, model


def popart_trainer(kind, initial, x, y, batch_size, batches_per_step):
    proto, images, labels, loss, names = popart_model(kind, initial, batch_size)
    session = popart.TrainingSession(
        proto,
        popart.DataFlow(batches_per_step, {}),
        loss,
        popart.SGD({"defaultLearningRate": (LEARNING_RATE, True)}),
        popart.DeviceManager().createIpuModelDevice({"tilesPerIPU": 1472}),  # a whole Mk2 IPU
    )
    session.prepareDevice()
    session.weightsFromHost()
    per_run = batch_size * batches_per_step
    runs = len(x) // per_run
    # NHWC with one channel is NCHW in memory: the same arrays serve both.
    stepios = [
        popart.PyStepIO(
            {
                images: x[r * per_run : (r + 1) * per_run].reshape(
                    batches_per_step, batch_size, 1, 28, 28
                ),
                labels: y[r * per_run : (r + 1) * per_run].reshape(batches_per_step, batch_size),
            },
            {},
        )
        for r in range(runs)
    ]

    def epoch() -> None:
        for stepio in stepios:
            session.run(stepio)

    def weights() -> list[np.ndarray]:
        session.weightsToHost()
        values = {name: np.zeros(session.getInfo(name).shape(), np.float32) for name in names}
        session.readWeights(popart.PyWeightsIO(values))
        return [values[name] for name in names]

    return epoch, weights


def check_same_step(kind, build, initial, x, y) -> None:
    """One training step of both, from the same weights, gives the same weights."""
    keras.utils.set_random_seed(0)
    model = build()
    model.set_weights(initial)
    model.compile(
        optimizer=keras.optimizers.SGD(LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.train_on_batch(x, y)
    step, weights = popart_trainer(kind, initial, x, y, len(x), 1)
    step()
    for mine, theirs in zip(weights(), model.get_weights(), strict=True):
        if mine.ndim == 4:  # ONNX [out, in, h, w] -> Keras [h, w, in, out]
            mine = np.transpose(mine, (2, 3, 1, 0))
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches-per-step", type=int, default=125)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compile", choices=["auto", "xla", "graph"], default="auto",
                        help="force how sessions compile (OPENIPU_COMPILE); auto: the session's choice")  # fmt: skip
    args = parser.parse_args()
    os.environ["OPENIPU_COMPILE"] = args.compile
    n, batch_size = args.batches_per_step, args.batch_size
    print(f"batch {batch_size}, batches per step {n}; samples/s, best of {args.repeats} epochs")
    for kind, build, samples in [("mlp", keras_mlp, 60000), ("cnn", keras_cnn, 24000)]:
        x, y = data(samples)
        stock_default, stock_model = keras_trainer(build, x, y, batch_size)
        stock_xla, _ = keras_trainer(
            build, x, y, batch_size, jit_compile=True, steps_per_execution=n
        )
        initial = stock_model.get_weights()
        check_same_step(kind, build, initial, x[:batch_size], y[:batch_size])
        ours, _ = popart_trainer(kind, initial, x, y, batch_size, n)
        ours(), stock_default(), stock_xla()  # trace, compile, warm up
        rates = best_rates(
            {"ours": ours, "default": stock_default, "xla": stock_xla}, samples, args.repeats
        )
        best_stock = max(rates["default"], rates["xla"])
        print(f"{kind.upper()} ({samples} samples)")
        print(f"  openipu TrainingSession:            {rates['ours']:9.0f} samples/s")
        print(f"  stock tf_keras fit (default):       {rates['default']:9.0f} samples/s")
        print(f"  stock tf_keras fit (XLA, spe {n}): {rates['xla']:9.0f} samples/s")
        print(f"  ratio vs best stock: {rates['ours'] / best_stock:.2f}")


if __name__ == "__main__":
    main()
