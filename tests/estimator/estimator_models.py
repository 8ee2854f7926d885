"""The estimator tests' model: a regression problem, and its plain-TF training as reference."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def regression_data(num_samples: int = 64, num_features: int = 5):
    """X and y = X @ w for a fixed random w (the original tests' regression set)."""
    rng = np.random.default_rng(1234)
    weights = rng.random((num_features, 1)).astype(np.float32)
    x = rng.random((num_samples, num_features)).astype(np.float32)
    return x, x @ weights


def dense_loss(features, labels):
    """A dense layer with fixed initial weights and its mean squared error."""
    with v1.variable_scope("vs", use_resource=True):
        kernel = v1.get_variable(
            "kernel", [features.shape[-1], 1], initializer=v1.constant_initializer(0.1)
        )
        bias = v1.get_variable("bias", [1], initializer=v1.zeros_initializer())
    predictions = tf.matmul(features, kernel) + bias
    return v1.losses.mean_squared_error(labels=labels, predictions=predictions)


def plain_tf_training(batches: list[tuple[np.ndarray, np.ndarray]], learning_rate: float):
    """The same model trained step by step in a plain TF1 session: (kernel, bias, losses)."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, batches[0][0].shape[1]])
        y = v1.placeholder(tf.float32, [None, 1])
        loss = dense_loss(x, y)
        train = v1.train.GradientDescentOptimizer(learning_rate).minimize(loss)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            losses = [sess.run([loss, train], {x: bx, y: by})[0] for bx, by in batches]
            variables = {v.name: v for v in v1.global_variables()}
            kernel, bias = sess.run([variables["vs/kernel:0"], variables["vs/bias:0"]])
    return kernel, bias, losses


class SessionRunCounter(v1.train.SessionRunHook):
    def __init__(self):
        self.num_session_runs = 0

    def after_run(self, run_context, run_values):
        self.num_session_runs += 1
