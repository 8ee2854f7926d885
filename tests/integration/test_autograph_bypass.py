"""Autograph converts a user's functions, never openipu's, as it never converted the
original's IPU API (part of the `tensorflow` package: autograph/core/config.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.autograph.impl import conversion


def test_openipu_functions_are_not_converted_and_user_functions_are(ipu_system):
    def users_body(x):
        return x

    repeat, enqueue = ipu.loops.repeat, ipu.ipu_outfeed_queue.IPUOutfeedQueue().enqueue
    # Looked up after the API's first use, as autograph looks it up for every call.
    assert conversion.is_allowlisted(repeat)
    assert conversion.is_allowlisted(enqueue)
    assert not conversion.is_allowlisted(users_body)


def test_a_loop_body_runs_as_plain_python_as_in_the_original(ipu_system):
    # The original's loops.py calls the body from its while_loop's body function, which
    # autograph does not convert: Python control flow on a tensor fails there.
    def python_if_body(x):
        if x > 100.0:
            x = x - 1.0
        return x + 1.0

    def cond_body(x):
        return tf.cond(x > 100.0, lambda: x, lambda: x + 1.0)

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        with pytest.raises(tf.errors.OperatorNotAllowedInGraphError):
            strategy.run(tf.function(lambda: ipu.loops.repeat(3, python_if_body, [0.0])))
        result = strategy.run(tf.function(lambda: ipu.loops.repeat(3, cond_body, [0.0])))
    np.testing.assert_equal(float(result), 3.0)


def test_the_users_own_function_is_still_converted(ipu_system):
    # Python control flow in the user's tf.function around the API call is autograph's.
    @tf.function
    def program(x):
        if x > 0.0:
            x = ipu.loops.repeat(2, lambda v: v * 2.0, [x])
        else:
            x = -x
        return x

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        positive = strategy.run(program, args=(tf.constant(1.5),))
        negative = strategy.run(program, args=(tf.constant(-1.5),))
    np.testing.assert_allclose([float(positive), float(negative)], [6.0, 1.5])
