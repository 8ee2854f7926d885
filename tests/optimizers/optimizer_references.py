"""Numpy references for the optimizer tests: quadratic losses and the stock update rules.

The loss of replica r at step t is sum(a[t, r] * (w - b[t, r]) ** 2) / 2, so its
gradient is a[t, r] * (w - b[t, r]).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

SHAPE = (3,)
INITIAL = np.array([0.5, -1.0, 2.0], np.float32)


def problem(steps: int, replicas: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 1.5, size=(steps, 4, *SHAPE)).astype(np.float32)[:, :replicas]
    b = rng.normal(size=(steps, 4, *SHAPE)).astype(np.float32)[:, :replicas]
    return a, b


def tf_loss(w, a, b):
    return tf.reduce_sum(a * (w - b) ** 2) / 2


def gradient(w, a, b):
    return a * (w - b)


class SGD:
    def __init__(self, lr: float) -> None:
        self.lr = lr

    def make(self):
        return tf.compat.v1.train.GradientDescentOptimizer(self.lr)

    def apply(self, w, g):
        return w - self.lr * g


class Momentum:
    def __init__(self, lr: float, momentum: float) -> None:
        self.lr, self.momentum, self.accumulator = lr, momentum, 0.0

    def make(self):
        return tf.compat.v1.train.MomentumOptimizer(self.lr, self.momentum)

    def apply(self, w, g):
        self.accumulator = self.momentum * self.accumulator + g
        return w - self.lr * self.accumulator


class Adam:
    def __init__(self, lr: float, beta1=0.9, beta2=0.999, epsilon=1e-8) -> None:
        self.lr, self.beta1, self.beta2, self.epsilon = lr, beta1, beta2, epsilon
        self.m = self.v = 0.0
        self.t = 0

    def make(self):
        return tf.compat.v1.train.AdamOptimizer(self.lr, self.beta1, self.beta2, self.epsilon)

    def apply(self, w, g):
        self.t += 1
        lr = self.lr * np.sqrt(1 - self.beta2**self.t) / (1 - self.beta1**self.t)
        self.m = self.beta1 * self.m + (1 - self.beta1) * g
        self.v = self.beta2 * self.v + (1 - self.beta2) * g * g
        return w - lr * self.m / (np.sqrt(self.v) + self.epsilon)


REFERENCES = {
    "sgd": lambda: SGD(0.1),
    "momentum": lambda: Momentum(0.05, 0.9),
    "adam": lambda: Adam(0.05),
}
