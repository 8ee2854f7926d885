"""The training programs of the original's `v1/layers/{lstm,gru}_training_test.py`.

A recurrent layer (zero weights) reads `[SEQ_LEN, BATCH, 1]` inputs; the softmax cross
entropy of its last output against one-hot labels is minimised by gradient descent
(learning rate 10). `losses` runs such a program, compiled for the IPU or on the CPU for
TensorFlow's own cells, and returns the loss of each step.
"""

from __future__ import annotations

import numpy as np
from tensorflow.compat import v1
from tensorflow.python import ipu

SEQ_LEN = 3
BATCH = 40 - SEQ_LEN
HIDDEN = 64
LEARNING_RATE = 10.0


def inputs(seq_len=SEQ_LEN, batch=BATCH, features=1) -> np.ndarray:
    n = seq_len * batch * features
    return (np.arange(n).reshape(seq_len, batch, features) / n).astype(np.float32)


def labels(batch=BATCH, hidden=HIDDEN) -> np.ndarray:
    result = np.zeros([batch, hidden], np.float32)
    result[:, 0] = 1.0
    return result


def counting_task():
    """The LSTM test's task: three numbers to the next one, one-hot in the labels."""
    nums = np.arange(BATCH + SEQ_LEN)
    windows = np.stack([nums[i : i + SEQ_LEN] for i in range(BATCH)])
    x = (windows.reshape(SEQ_LEN, BATCH, 1) / float(len(nums))).astype(np.float32)
    y = np.zeros([BATCH, HIDDEN], np.float32)
    y[np.arange(BATCH), nums[SEQ_LEN:]] = 1.0
    return x, y


def train_op(outputs, y):
    loss = v1.reduce_mean(
        v1.nn.softmax_cross_entropy_with_logits_v2(logits=outputs[-1], labels=v1.stop_gradient(y))
    )
    return [loss, v1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)]


def losses(program, x, y, states, seq_lens=None, steps=20, on_ipu=True):
    """The loss of each of `steps` training steps of `program(x, *states, y, seq_lens)`."""
    with v1.Graph().as_default():
        with v1.device("cpu"):
            feeds = {v1.placeholder(np.float32, x.shape): x}
            feeds.update({v1.placeholder(np.float32, s.shape): s for s in states})
            feeds[v1.placeholder(np.float32, y.shape)] = y
            if seq_lens is not None:
                feeds[v1.placeholder(np.int32, seq_lens.shape)] = seq_lens
        placeholders = list(feeds)
        if on_ipu:
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                result = ipu.ipu_compiler.compile(program, inputs=placeholders)
            ipu.utils.move_variable_initialization_to_cpu()
        else:
            result = program(*placeholders)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            return [float(np.ravel(sess.run(result, feeds)[0])[0]) for _ in range(steps)]
