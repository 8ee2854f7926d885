"""TF1 sessions for IPU tests (tensorflow/python/ipu/test_utils/session_utils.py)."""

from __future__ import annotations

import contextlib

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

from openipu._src.utils.variables import move_variable_initialization_to_cpu

__all__ = ["ipu_session", "move_variable_initialization_to_cpu"]


@contextlib.contextmanager
def ipu_session(disable_grappler_optimizers=None):
    """A `tf.compat.v1.Session`, with the named grappler optimizers turned off."""
    config = None
    if disable_grappler_optimizers and isinstance(disable_grappler_optimizers, list):
        config = config_pb2.ConfigProto()
        for optimizer in disable_grappler_optimizers:
            assert hasattr(config.graph_options.rewrite_options, optimizer), (
                f"Tried to disable grappler optimizer '{optimizer}' but it's not an"
                " attribute of the RewriterConfig proto"
            )
            setattr(
                config.graph_options.rewrite_options,
                optimizer,
                rewriter_config_pb2.RewriterConfig.OFF,
            )
    with tf.compat.v1.Session(config=config) as session:
        yield session
