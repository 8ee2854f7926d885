"""Proof that training learns: MNIST-like classifiers built with the Builder (a linear model
and a small conv net), trained by a TrainingSession on generated, learnable data, reach the
accuracy of the same models (same initial weights, data order, batch and optimizer)
trained by stock tf_keras `fit`, within one point."""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras

import popart

SIZE, CLASSES, BATCH, LEARNING_RATE, EPOCHS = 12, 10, 32, 0.05, 2


def learnable_data(samples: int, seed: int):
    """Each class is a fixed random image; a sample is its class's image, faded, plus noise."""
    templates = np.random.default_rng(1234).normal(size=(CLASSES, SIZE, SIZE, 1))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, samples).astype(np.int32)
    images = 0.5 * templates[labels] + rng.normal(size=(samples, SIZE, SIZE, 1))
    return images.astype(np.float32), labels


def keras_model(kind: str) -> keras.Model:
    keras.utils.set_random_seed(0)
    layers = [keras.layers.Input((SIZE, SIZE, 1))]
    if kind == "conv":
        layers += [
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
        ]
    layers += [keras.layers.Flatten(), keras.layers.Dense(CLASSES)]
    return keras.Sequential(layers)


def popart_model(kind: str, weights: list[np.ndarray]):
    """The Keras model in ONNX (NCHW), with the Keras model's initial weights."""
    builder = popart.Builder()
    images = builder.addInputTensor(popart.TensorInfo("FLOAT", [BATCH, SIZE, SIZE, 1]), "images")
    labels = builder.addInputTensor(popart.TensorInfo("INT32", [BATCH]), "labels")
    x = images
    if kind == "conv":
        kernel, bias = weights[:2]
        weights = weights[2:]
        k = builder.addInitializedInputTensor(np.transpose(kernel, (3, 2, 0, 1)).copy(), "conv_w")
        b = builder.addInitializedInputTensor(bias, "conv_b")
        x = builder.aiOnnx.transpose([x], perm=[0, 3, 1, 2])  # NHWC -> NCHW
        x = builder.aiOnnx.relu([builder.aiOnnx.conv([x, k, b], kernel_shape=[3, 3])])
        x = builder.aiOnnx.maxpool([x], 1, [2, 2], strides=[2, 2])[0]
        x = builder.aiOnnx.transpose([x], perm=[0, 2, 3, 1])  # flatten in Keras' (h, w, c) order
    x = builder.aiOnnx.flatten([x], axis=1)
    w = builder.addInitializedInputTensor(weights[0], "dense_w")
    b = builder.addInitializedInputTensor(weights[1], "dense_b")
    logits = builder.aiOnnx.add([builder.aiOnnx.matmul([x, w]), b])
    log_probabilities = builder.aiOnnx.logsoftmax([logits], axis=1)
    loss = builder.aiGraphcore.nllloss([log_probabilities, labels], inputIsLogProbability=True)
    builder.addOutputTensor(logits)
    return builder.getModelProto(), images, labels, logits, loss


def popart_accuracy(kind, initial, train, test, tmp_path) -> float:
    proto, images, labels, logits, loss = popart_model(kind, initial)
    steps_per_run = 16
    session = popart.TrainingSession(
        proto,
        popart.DataFlow(steps_per_run, {}),
        loss,
        popart.SGD({"defaultLearningRate": (LEARNING_RATE, True)}),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    session.prepareDevice()
    session.weightsFromHost()
    x, y = train
    per_run = BATCH * steps_per_run
    for _ in range(EPOCHS):
        for start in range(0, len(x), per_run):
            batch_x = x[start : start + per_run].reshape(steps_per_run, BATCH, SIZE, SIZE, 1)
            batch_y = y[start : start + per_run].reshape(steps_per_run, BATCH)
            session.run(popart.PyStepIO({images: batch_x, labels: batch_y}, {}))
    path = str(tmp_path / f"{kind}.onnx")
    session.modelToHost(path)
    # The trained model, evaluated by an inference session.
    test_x, test_y = test
    batches = len(test_x) // BATCH
    inference = popart.InferenceSession(
        path,
        popart.DataFlow(batches, {logits: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    inference.prepareDevice()
    arrays = inference.initAnchorArrays()
    inference.run(
        popart.PyStepIO(
            {
                images: test_x.reshape(batches, BATCH, SIZE, SIZE, 1),
                labels: test_y.reshape(batches, BATCH),
            },
            arrays,
        )
    )
    predictions = arrays[logits].reshape(-1, CLASSES).argmax(axis=1)
    return float(np.mean(predictions == test_y))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_builder_classifier_learns_as_well_as_keras(kind, tmp_path):
    train = learnable_data(2048, seed=0)
    test = learnable_data(512, seed=1)
    model = keras_model(kind)
    initial = [w.copy() for w in model.get_weights()]
    model.compile(
        optimizer=keras.optimizers.SGD(LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(*train, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0)
    keras_accuracy = model.evaluate(*test, batch_size=BATCH, verbose=0)[1]
    accuracy = popart_accuracy(kind, initial, train, test, tmp_path)
    assert keras_accuracy > 0.7  # the data is learnable (chance is 0.1)
    assert abs(accuracy - keras_accuracy) <= 0.01, (accuracy, keras_accuracy)
