"""Models of the original's pipelining tests, shared by the schedules' test modules.

The original repeats its pipeline scenarios per schedule (pipelining_test.py for
Interleaved, pipelining_sequential_test.py, pipelining_grouped_test.py) and per
recomputation setting; here each scenario's model is written once. Each function
returns the keyword arguments of `pipeline_comparison.compare_to_cpu` but the
schedule. Not a test module.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from pipeline_comparison import increasing, placeholder_inputs

v1 = tf.compat.v1
layers = tf.keras.layers


def _constant(value):
    return v1.constant_initializer(value)


def _images_dataset():
    dataset = increasing(7, [4, 4, 2]).batch(2, drop_remainder=True)
    return dataset.map(lambda value: (value / 7, value[0][0][0][0]))


def compare1(gradient_accumulation_count=8, repeat_count=2, print_in_stage2=False):
    """testPipelineCompare1: a 1x1 convolution, a scaling, two dense layers; SGD. With
    `print_in_stage2` (the recomputation tests' testPipelineCompare4) the second stage
    also prints its input, a stateful op."""

    def stage1(c, img, label):
        with v1.variable_scope("stage1", use_resource=True):
            y = layers.Conv2D(
                2,
                1,
                use_bias=True,
                kernel_initializer=_constant(0.5),
                bias_initializer=_constant(0.5),
                name="conv1",
            )(img)
            return y, c, label

    def stage2(x, c, label):
        with v1.variable_scope("stage2", use_resource=True):
            return x * 20, c, label

    def stage3(x, c, label):
        with v1.variable_scope("stage3", use_resource=True):
            dense = layers.Dense(
                2, kernel_initializer=_constant(0.5), bias_initializer=_constant(0.5)
            )
            return dense(x), c, label

    def stage4(x, c, label):
        with v1.variable_scope("stage4", use_resource=True):
            dense = layers.Dense(
                2, kernel_initializer=_constant(0.5), bias_initializer=_constant(0.5)
            )
            return tf.reduce_sum(dense(x)) + c + label

    return dict(
        stages=[stage1, stage2, stage3, stage4],
        inputs_fn=placeholder_inputs(([], np.float32)),
        input_values=[10.01],
        repeat_count=repeat_count,
        gradient_accumulation_count=gradient_accumulation_count,
        dataset_fn=_images_dataset,
        optimizer_fn=lambda: v1.train.GradientDescentOptimizer(0.01),
    )


def _print_tensor(x):
    from tensorflow.python import ipu

    return ipu.internal_ops.print_tensor(x)


def _dense_half(x):
    return layers.Dense(2, kernel_initializer=_constant(0.5), bias_initializer=_constant(0.5))(x)


def compare5(gradient_accumulation_count=8, repeat_count=2, scale=1.0):
    """The recomputation tests' testPipelineCompare5: stages 1 and 2 have no variables
    (no backward stage), the second prints its input (and scales it: the grouped
    recomputation tests' testPipelineCompare7 by 20); SGD."""

    def stage1(c, img, label):
        with v1.variable_scope("stage1", use_resource=True):
            return img, c, label

    def stage2(x, c, label):
        with v1.variable_scope("stage2", use_resource=True):
            with tf.control_dependencies([_print_tensor(x)]):
                return x * scale, c, label

    def stage3(x, c, label):
        with v1.variable_scope("stage3", use_resource=True):
            return _dense_half(x), c, label

    def stage4(x, c, label):
        with v1.variable_scope("stage4", use_resource=True):
            return tf.reduce_sum(x) + c + label

    return dict(
        stages=[stage1, stage2, stage3, stage4],
        inputs_fn=placeholder_inputs(([], np.float32)),
        input_values=[10.01],
        repeat_count=repeat_count,
        gradient_accumulation_count=gradient_accumulation_count,
        dataset_fn=_images_dataset,
        optimizer_fn=lambda: v1.train.GradientDescentOptimizer(0.01),
    )


def _conv(x, ksize, stride, filters_out):
    return layers.Conv2D(
        filters_out,
        ksize,
        stride,
        "SAME",
        kernel_initializer=_constant(0.1),
        bias_initializer=_constant(0.0),
    )(x)


def _residual_block(name, first_stride, out_filters, count, x):
    for i in range(count):
        shape_in = x.shape
        stride = first_stride if i == 0 else 1
        if stride > 1:  # the original's fixed padding for a 3x3 kernel
            x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
        shortcut = x
        with v1.variable_scope(f"{name}/{i}/1"):
            x = tf.nn.relu(_conv(x, 3, stride, out_filters))
        with v1.variable_scope(f"{name}/{i}/2"):
            x = _conv(x, 3, 1, out_filters)
            if stride != 1:
                shortcut = tf.strided_slice(
                    shortcut, [0, 0, 0, 0], shortcut.shape, strides=[1, stride, stride, 1]
                )
            pad = int(x.shape[3] - shape_in[3])
            if pad:
                shortcut = tf.pad(shortcut, [[0, 0], [0, 0], [0, 0], [0, pad]])
            x = tf.nn.relu(x + shortcut)
    return x


def compare2(gradient_accumulation_count=6, repeat_count=2, classes=51):
    """testPipelineCompare2: a small ResNet-like network in 3 stages; SGD."""

    def dataset_fn():
        dataset = increasing(100, [4]).batch(32, drop_remainder=True)
        dataset = dataset.batch(32, drop_remainder=True).batch(2, drop_remainder=True)

        def parse(img):
            return img, tf.cast(tf.reduce_mean(img, axis=[1, 2, 3]), np.int32)

        return dataset.map(parse)

    def stage1(img, label):
        with v1.variable_scope("stage1", use_resource=True):
            x = tf.nn.relu(_conv(img, 3, 2, 4))
            return layers.MaxPooling2D(3, 2, padding="SAME")(x), label

    def stage2(x, label):
        with v1.variable_scope("stage2", use_resource=True):
            return _residual_block("b", 2, 4, 1, x), label

    def stage3(x, label):
        with v1.variable_scope("stage3", use_resource=True):
            x = tf.reduce_mean(x, axis=[1, 2])
            # 51 classes where the original has 50: its labels (image means) reach 50, which
            # the IPU takes without a check and TensorFlow's CPU kernels refuse.
            x = layers.Dense(
                classes, kernel_initializer=_constant(0.1), bias_initializer=_constant(0.0)
            )(x)
            return tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(logits=x, labels=label)
            )

    return dict(
        stages=[stage1, stage2, stage3],
        inputs_fn=placeholder_inputs(),
        input_values=[],
        repeat_count=repeat_count,
        gradient_accumulation_count=gradient_accumulation_count,
        dataset_fn=dataset_fn,
        optimizer_fn=lambda: v1.train.GradientDescentOptimizer(0.01),
    )


def compare3(gradient_accumulation_count=8, repeat_count=2, width=12):
    """testPipelineCompare3: an embedding lookup of a trained table (`width` wide: 12, or
    1216 in the recomputation tests), then a softmax; SGD."""
    from tensorflow.python import ipu

    def dataset_fn():
        dataset = increasing(10, [4]).batch(2, drop_remainder=True)

        def parse(value):
            label = tf.reduce_mean(value, axis=[1])
            return tf.cast(value, np.int32), tf.cast(label / 10, np.int32)

        return dataset.map(parse)

    def stage1(idx, label):
        with v1.variable_scope("stage1", use_resource=True):
            embedding = v1.get_variable(
                "c", shape=[10, width], dtype=np.float32, initializer=_constant(10.01)
            )
            return ipu.embedding_ops.embedding_lookup(embedding, idx), label

    def passing(name):
        def stage(x, label):
            with v1.variable_scope(name, use_resource=True):
                return x, label

        return stage

    def stage4(x, label):
        with v1.variable_scope("stage4", use_resource=True):
            logits = tf.reduce_sum(x, axis=[-1])
            return tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
            )

    return dict(
        stages=[stage1, passing("stage2"), passing("stage3"), stage4],
        inputs_fn=placeholder_inputs(),
        input_values=[],
        repeat_count=repeat_count,
        gradient_accumulation_count=gradient_accumulation_count,
        dataset_fn=dataset_fn,
        optimizer_fn=lambda: v1.train.GradientDescentOptimizer(0.01),
    )


def _shared_weights_dataset():
    dataset = increasing(7, [4, 4])
    dataset = dataset.map(lambda value: (value, tf.cast(value[0][0] % 4, np.int32)))
    return dataset.batch(2, drop_remainder=True)


def _matmul_weight(name, x, reuse=None):
    with v1.variable_scope("vs", use_resource=True, reuse=reuse):
        weight = v1.get_variable(
            name, shape=[4, 4], dtype=np.float32, initializer=v1.ones_initializer()
        )
        return tf.matmul(x, weight)


def _loss_with_w0(x, label):
    x = _matmul_weight("w0", x, reuse=True)
    logits = tf.reduce_mean(x, axis=[1])
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
    )


def _relu_stage(x, label):
    return tf.nn.relu(x), label


def shared_weights(variant=1, gradient_accumulation_count=8, repeat_count=2):
    """testPipelineCompareSharedWeights(1, 2, 3): the first stage's weight used again by
    the last stage (variant 3: also by the middle one); Momentum."""

    def stage1(x, label):
        return _matmul_weight("w0", x), label

    def weight_stage(name):
        return lambda x, label: (_matmul_weight(name, x), label)

    def stage3_reusing(x, label):
        return tf.nn.relu(_matmul_weight("w0", x, reuse=True)), label

    if variant == 1:
        stages = [stage1, weight_stage("w1"), weight_stage("w2"), weight_stage("w3")]
        device_mapping = [0, 0, 2, 3, 0]
    elif variant == 2:
        stages = [stage1, _relu_stage, _relu_stage, _relu_stage]
        device_mapping = [0, 1, 0, 2, 0]
    else:
        stages = [stage1, _relu_stage, stage3_reusing, _relu_stage]
        device_mapping = [0, 1, 0, 2, 0]
    return dict(
        stages=[*stages, _loss_with_w0],
        inputs_fn=placeholder_inputs(),
        input_values=[],
        repeat_count=repeat_count,
        gradient_accumulation_count=gradient_accumulation_count,
        dataset_fn=_shared_weights_dataset,
        optimizer_fn=lambda: v1.train.MomentumOptimizer(0.01, 0.98),
        device_mapping=device_mapping,
    )


# Inference pipelines and refusals (the first scenarios of each schedule's file).


def _cpu_placeholder(shape, dtype=np.float32):
    with tf.device("cpu"):
        return v1.placeholder(dtype, shape=shape)


def compile_in_ipu_scope(my_net, inputs):
    from tensorflow.python import ipu

    with tf.device("/device:IPU:0"):
        return ipu.ipu_compiler.compile(my_net, inputs=inputs)


def no_outfeed_pipeline(schedule, training: bool):
    """testPipelineNoOutfeedInference / ...WithOutputsTraining: builds a pipeline whose last
    stage returns a tensor and which has no outfeed (the original refuses it)."""
    from tensorflow.python import ipu

    def stage1(x):
        with v1.variable_scope("vs", use_resource=True):
            return x + 1

    def stage2(x):
        if training:
            x = layers.Conv2D(
                2, 1, use_bias=True, bias_initializer="ones", kernel_initializer="ones"
            )(x)
        return tf.reduce_sum(x)

    def optimizer_function(loss):
        return ipu.pipelining_ops.OptimizerFunctionOutput(
            v1.train.GradientDescentOptimizer(0.01), loss
        )

    def my_net(x):
        return ipu.pipelining_ops.pipeline(
            [stage1, stage2],
            10,
            inputs=[x],
            optimizer_function=optimizer_function if training else None,
            pipeline_schedule=schedule,
        )

    compile_in_ipu_scope(my_net, [_cpu_placeholder([1, 4, 4, 2])])


def dict_infeed():
    """Batches of 2 of the increasing values 0..4 ([4, 4, 2] each), as {"a": v, "b": (v + 10) / 2}."""
    from tensorflow.python import ipu

    dataset = increasing(5, [4, 4, 2]).batch(2, drop_remainder=True)
    dataset = dataset.map(lambda value: {"a": value, "b": (value + 10.0) / 2.0})
    return ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)


def conv_stage(c, **kwargs):
    with v1.variable_scope("vs", use_resource=True):
        y = layers.Conv2D(2, 1, use_bias=True, kernel_initializer="ones", name="conv1")(kwargs["a"])
        return y + kwargs["b"], c


def sum_stage(x, c):
    return tf.reduce_sum(x) + c


def identity_stage(x):
    return x


def invalid_device_mappings():
    """(device_mapping, error, message) that the original refuses for 3 stages."""
    return [
        (1, TypeError, "device_mapping argument needs to be a list or a tuple"),
        (list(range(4)), ValueError, "Each stage must be mapped to an IPU"),
        (tuple(range(1)), ValueError, "Each stage must be mapped to an IPU"),
    ]


def build_with_device_mapping(schedule, device_mapping, **options):
    from tensorflow.python import ipu

    ipu.pipelining_ops.pipeline(
        [conv_stage, sum_stage, identity_stage],
        3,
        inputs=[_cpu_placeholder([])],
        infeed_queue=dict_infeed(),
        outfeed_queue=ipu.ipu_outfeed_queue.IPUOutfeedQueue(),
        device_mapping=device_mapping,
        pipeline_schedule=schedule,
        **options,
    )


def expected_inference_losses(count, c=10.01):
    """The 3-stage inference pipeline's losses: batch k holds elements 2k, 2k+1 (mod 5) of
    value v; the 1x1 convolution of ones gives 2v per channel, plus (v + 10) / 2."""
    pairs = [(2 * k % 5, (2 * k + 1) % 5) for k in range(count)]
    return [sum(32 * (2 * v + (v + 10) / 2) for v in pair) + c for pair in pairs]


def inference_losses(schedule, device_mapping=None, count=12, reduction_method=None):
    """Runs the 3-stage inference pipeline (built before the configuration, 4 IPUs)."""
    from tensorflow.python import ipu

    graph = tf.Graph()
    with graph.as_default():
        infeed = dict_infeed()
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        options = {} if reduction_method is None else {"reduction_method": reduction_method}

        def my_net(c):
            return ipu.pipelining_ops.pipeline(
                [conv_stage, sum_stage, identity_stage],
                count,
                inputs=[c],
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                device_mapping=device_mapping,
                pipeline_schedule=schedule,
                **options,
            )

        c = _cpu_placeholder([])
        compiled = compile_in_ipu_scope(my_net, [c])
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = 4
        config.configure_ipu_system()
        try:
            ipu.utils.move_variable_initialization_to_cpu()
            dequeued = outfeed.dequeue()
            with v1.Session(graph=graph) as sess:
                sess.run(v1.global_variables_initializer())
                sess.run(infeed.initializer)
                sess.run(compiled, {c: 10.01})
                return sess.run(dequeued)
        finally:
            ipu.config.reset_ipu_configuration()


def illegal_capture(schedule):
    """testIllegalCapture: a stage uses a placeholder from outside the pipeline."""
    from tensorflow.python import ipu

    y = _cpu_placeholder([])

    def model_pipeline(x):
        return ipu.pipelining_ops.pipeline(
            [lambda x: x * y, identity_stage],
            10,
            inputs=[x],
            outfeed_queue=ipu.ipu_outfeed_queue.IPUOutfeedQueue(),
            pipeline_schedule=schedule,
        )

    compile_in_ipu_scope(model_pipeline, [_cpu_placeholder([1, 4, 4, 2])])


def only_one_stage(schedule):
    from tensorflow.python import ipu

    def my_net(x):
        return ipu.pipelining_ops.pipeline(
            [identity_stage], 10, inputs=[x], pipeline_schedule=schedule
        )

    compile_in_ipu_scope(my_net, [_cpu_placeholder([1, 4, 4, 2])])


def duplicate_inputs_outputs(schedule):
    """testDuplicateInputsOutputs: stages pass tensors on twice; the 12 outfed pairs."""
    from tensorflow.python import ipu

    graph = tf.Graph()
    with graph.as_default():
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def model_pipeline(x, y):
            return ipu.pipelining_ops.pipeline(
                [
                    lambda x, y: (x, y, y, x),
                    lambda x1, y1, y2, x2: (x1, y1, y2, x2),
                    lambda _x1, _y1, y2, x2: (x2, y2),
                ],
                12,
                inputs=[x, y],
                outfeed_queue=outfeed,
                pipeline_schedule=schedule,
            )

        x = _cpu_placeholder([1, 4, 4, 2])
        y = _cpu_placeholder([1, 2])
        compiled = compile_in_ipu_scope(model_pipeline, [x, y])
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = 4
        config.configure_ipu_system()
        try:
            dequeued = outfeed.dequeue()
            with v1.Session(graph=graph) as sess:
                sess.run(compiled, {x: np.ones(x.shape), y: np.ones(y.shape)})
                return sess.run(dequeued), x.shape, y.shape
        finally:
            ipu.config.reset_ipu_configuration()


def int8_shared_weights(gradient_accumulation_count=8, repeat_count=2):
    """The recomputation tests' testPipelineCompareSharedWeights: int8 images, the first
    stage's weight used again by the last stage (both on IPU 0); Momentum."""

    def dataset_fn():
        dataset = increasing(7, [4, 4])
        dataset = dataset.map(
            lambda value: (tf.cast(value, np.int8), tf.cast(value[0][0] % 4, np.int32))
        )
        return dataset.batch(2, drop_remainder=True)

    def stage1(x, label):
        return _matmul_weight("w0", tf.cast(x, np.float32)), label

    def stage4(x, label):
        logits = tf.reduce_sum(_matmul_weight("w0", x, reuse=True), axis=[1])
        return tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
        )

    return dict(
        stages=[stage1, lambda x, label: (x**2, label), lambda x, label: (x + 1, label), stage4],
        inputs_fn=placeholder_inputs(),
        input_values=[],
        repeat_count=repeat_count,
        gradient_accumulation_count=gradient_accumulation_count,
        dataset_fn=dataset_fn,
        optimizer_fn=lambda: v1.train.MomentumOptimizer(0.01, 0.98),
        device_mapping=[0, 1, 2, 0],
    )


def single_pixel_conv(gradient_accumulation_count=8, repeat_count=2):
    """The sequential recomputation tests' testPipelineCompare5: a 1x1 convolution of
    single-pixel images, two pass-through stages, a sum; SGD."""

    def dataset_fn():
        dataset = increasing(128, [1, 1, 1]).batch(1, drop_remainder=True)
        return dataset.map(lambda value: (value, value[0][0][0][0]))

    def stage1(c, img, label):
        with v1.variable_scope("stage1", use_resource=True):
            y = layers.Conv2D(
                2,
                1,
                use_bias=True,
                kernel_initializer=_constant(0.5),
                bias_initializer=_constant(0.5),
                name="conv1",
            )(img)
            return y, c, label

    def passing(name):
        def stage(x, c, label):
            with v1.variable_scope(name, use_resource=True):
                return x, c, label

        return stage

    def stage4(x, c, label):
        with v1.variable_scope("stage4", use_resource=True):
            return tf.reduce_sum(x) + c + label

    return dict(
        stages=[stage1, passing("stage2"), passing("stage3"), stage4],
        inputs_fn=placeholder_inputs(([], np.float32)),
        input_values=[10.01],
        repeat_count=repeat_count,
        gradient_accumulation_count=gradient_accumulation_count,
        dataset_fn=dataset_fn,
        optimizer_fn=lambda: v1.train.GradientDescentOptimizer(0.01),
    )


# The checks of the scenarios each schedule's file repeats.

ORIGINAL_INFERENCE_LOSSES = [410.01, 730.01, 650.01, 570.01, 890.01] * 2 + [410.01, 730.01]


def check_no_outfeed_refused(schedule, training: bool) -> None:
    import pytest

    with pytest.raises(ValueError, match="The last computational stage has tensor outputs"):
        no_outfeed_pipeline(schedule, training=training)


def check_inference_losses(schedule, device_mapping=None) -> None:
    """The 3-stage inference pipeline's losses are the original's (summed accumulation)."""
    from pipeline_comparison import GA

    losses = inference_losses(schedule, device_mapping, reduction_method=GA.SUM)
    np.testing.assert_allclose(losses, ORIGINAL_INFERENCE_LOSSES, rtol=1e-6)
    np.testing.assert_allclose(losses, expected_inference_losses(12), rtol=1e-6)


def check_illegal_capture_refused(schedule) -> None:
    import pytest

    with pytest.raises(ValueError, match="Trying to capture the tensor"):
        illegal_capture(schedule)


def check_only_one_stage_refused(schedule) -> None:
    import pytest

    with pytest.raises(ValueError, match="Pipeline requires at least two"):
        only_one_stage(schedule)


def check_duplicate_inputs_outputs(schedule) -> None:
    (xs, ys), x_shape, y_shape = duplicate_inputs_outputs(schedule)
    assert len(xs) == len(ys) == 12
    for x, y in zip(xs, ys, strict=True):
        np.testing.assert_array_equal(x, np.ones(x_shape))
        np.testing.assert_array_equal(y, np.ones(y_shape))
