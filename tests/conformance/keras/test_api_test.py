"""Conformance: graphcore/keras `keras/ipu/api_test.py`.

`tf.keras.ipu` is the Keras package's `ipu` module, marked as built with IPU support,
and holds the pipeline-stage helpers.
"""

from __future__ import annotations

import pytest
import tensorflow as tf
from tf_keras import ipu as keras_ipu


@pytest.mark.follows("testKerasExport")
def test_keras_export():
    assert tf.keras.ipu
    assert tf.keras.ipu.__ipu__built__ == "1"
    for name in (
        "PipelineStage",
        "FunctionalLayerPipelineStageAssignment",
        "SequentialLayerPipelineStageAssignment",
        "ModelLayerPipelineStageAssignment",
    ):
        assert getattr(tf.keras.ipu, name) is getattr(keras_ipu, name)
