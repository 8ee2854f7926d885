"""A training pipeline's captured upstream gradients: accumulated over the group (or the
last mini-batch's, with gradient_accumulation_for_captured_grads=False), handed to an
optimizer that takes `captured_grads`, and pushed to the captured_gradient_outfeed, as the
original's pipelining_ops.py. The reference is numpy: d(loss)/d(tagged) of
loss = sum(w * x) with the tag on `w * x` is ones, times the stage-1 scale."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.eager.backprop import GradientCaptureContext
from tensorflow.python.ipu.ops import pipelining_ops
from tensorflow.python.ipu.ops.grad_util_ops import capture_upstream_gradients

COUNT = 4
SCALES = np.array([1.0, 2.0, 3.0, 4.0], np.float32)  # stage 1 multiplies by the element


class _RecordingSGD(tf.keras.optimizers.legacy.SGD):
    """An optimizer that takes captured gradients: it records them in a variable."""

    supports_captured_grads = True

    def __init__(self, record: tf.Variable) -> None:
        super().__init__(0.0)
        self._record = record

    def apply_gradients(self, grads_and_vars, captured_grads=None, **kwargs):
        update = super().apply_gradients(grads_and_vars, **kwargs)
        with tf.control_dependencies([update]):
            return self._record.assign(captured_grads["product"][0])


def _train(accumulate: bool, reduction: str):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    try:
        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():
            w = tf.Variable(tf.ones([3]))
            record = tf.Variable(tf.zeros([3]))
            dataset = tf.data.Dataset.from_tensor_slices(SCALES).repeat()
            infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
            outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
            captured_outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
            opt = _RecordingSGD(record)

            def stage_0(scale):
                return capture_upstream_gradients(w * 2.0, tag="product"), scale

            def stage_1(product, scale):
                return tf.reduce_sum(product * scale)

            @tf.function(jit_compile=True)
            def step():
                with GradientCaptureContext() as context:

                    def optimizer_function(loss):
                        return pipelining_ops.OptimizerFunctionOutput(
                            opt, loss, variables=[w], gradient_capture_context=context,
                            captured_gradient_outfeed=captured_outfeed,
                        )  # fmt: skip

                    return pipelining_ops.pipeline(
                        [stage_0, stage_1], COUNT, infeed_queue=infeed, outfeed_queue=outfeed,
                        optimizer_function=optimizer_function, device_mapping=[0, 1],
                        gradient_accumulation_for_captured_grads=accumulate,
                        reduction_method=reduction,
                    )  # fmt: skip

            strategy.run(step)
            outfeed.dequeue()
            return captured_outfeed.dequeue()["product"][0].numpy(), record.numpy()
    finally:
        ipu.config.reset_ipu_configuration()


@pytest.mark.parametrize(
    ("accumulate", "reduction", "expected"),
    [
        (True, "SUM", SCALES.sum()),
        (True, "MEAN", SCALES.mean()),
        (False, "SUM", SCALES[-1]),
    ],
)
def test_captured_gradients_reach_the_outfeed_and_the_optimizer(accumulate, reduction, expected):
    outfed, recorded = _train(accumulate, reduction)
    want = np.full([1, 3], expected, np.float32)  # one weight update: one outfeed element
    np.testing.assert_allclose(outfed, want, rtol=1e-6)
    np.testing.assert_allclose(recorded, want[0], rtol=1e-6)
