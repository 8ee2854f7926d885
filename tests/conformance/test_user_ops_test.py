"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/user_ops_test.py`.

A precompiled user operation whose shared library does not exist is refused with a
NotFoundError. The original's other scenarios load the Poplar graph builders and
host callbacks of libraries built with its SDK (listed in the manifest).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compat import v1
from tensorflow.python import ipu


@pytest.mark.follows("testUserOpLoadNonExistentSharedLibrary")
def test_user_op_load_non_existent_shared_library(tf1_graph, ipu_system, tmp_path):
    outputs = {"output_types": [tf.float32], "output_shapes": [tf.TensorShape([20])]}
    lib_path = str(tmp_path / "and-now-for-something-completely-different.so")

    def my_net(x):
        return ipu.custom_ops.precompiled_user_op([x], lib_path, outs=outputs)

    with pytest.raises(tf.errors.NotFoundError, match="completely-different"):
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            x = v1.placeholder(np.float32, shape=[20])
            model = ipu.ipu_compiler.compile(my_net, inputs=[x])
        with v1.Session() as sess:
            sess.run(model, {x: np.ones([20])})
