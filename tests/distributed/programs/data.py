"""The data and initial weights shared by the training program and its reference."""

import numpy as np

BATCH = 4  # per replica
EPOCHS = 2
LEARNING_RATE = 0.1
FEATURES = 4
SAMPLES = 64


def dataset():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.25).astype(np.float32)
    return x, y


def initial_weights():
    rng = np.random.default_rng(11)
    return [
        rng.normal(size=(FEATURES, 3)).astype(np.float32) * 0.5,
        np.zeros(3, np.float32),
        rng.normal(size=(3, 1)).astype(np.float32) * 0.5,
        np.zeros(1, np.float32),
    ]
