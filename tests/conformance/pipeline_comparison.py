"""Pipelines compared with the same model trained on the CPU (stock TensorFlow).

The original's pipelining tests (`pipelining_test_util.PipelineTester`) run a list of
stages as a pipeline on the IPU and compare its outfed losses with the stages run one
after the other on the CPU, where the gradients of `gradient_accumulation_count`
batches are accumulated (SUM, MEAN or RUNNING_MEAN, as the pipeline's
`reduction_method`) before the optimizer applies them once. Its
`compare_pipeline_to_sharding` compares with the same model sharded on the IPU under a
gradient-accumulation optimizer, which computes what the CPU reference computes; here
both comparisons are with the CPU. Not a test module: imported by the pipelining ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu

v1 = tf.compat.v1
GA = ipu.gradient_accumulation.GradientAccumulationReductionMethod
Schedule = ipu.pipelining_ops.PipelineSchedule


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _ipus_for(device_mapping) -> int:
    """The original's device size: the next power of two over the highest IPU named."""
    if not device_mapping:
        return 4
    flat = [i for entry in device_mapping for i in _as_list(entry)]
    return max(1, 1 << (max(flat)).bit_length()) if max(flat) > 0 else 1


def pipeline_losses(
    stages: Sequence[Callable],
    inputs_fn: Callable[[], list],
    input_values: list,
    repeat_count: int,
    gradient_accumulation_count: int,
    dataset_fn: Callable[[], tf.data.Dataset],
    optimizer_fn: Callable | None,
    schedule,
    device_mapping=None,
    batch_serialization_iterations: int = 1,
    recomputation_mode=None,
    recomp: bool = False,
    reduction_method=GA.RUNNING_MEAN,
    offload_activations=None,
    number_of_io_tiles: int = 0,
    replication_factor: int = 1,
):
    """The pipeline's outfed losses, built before the configuration as the original's.

    With `replication_factor` > 1 the IPUs are that many times the pipeline's and the
    optimizer is wrapped in a cross-replica one, as the original's tester does."""
    graph = tf.Graph()
    with graph.as_default():
        dataset = dataset_fn()
        inputs = inputs_fn()
        optimizer = optimizer_fn() if optimizer_fn else None
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def optimizer_function(loss):
            opt = optimizer
            if replication_factor > 1:
                opt = ipu.cross_replica_optimizer.CrossReplicaOptimizer(optimizer)
            return ipu.pipelining_ops.OptimizerFunctionOutput(opt, loss)

        def my_net(*args):
            with v1.variable_scope("ipu", use_resource=True, reuse=False):
                return ipu.pipelining_ops.pipeline(
                    list(stages),
                    gradient_accumulation_count,
                    repeat_count=repeat_count,
                    batch_serialization_iterations=batch_serialization_iterations,
                    inputs=list(args),
                    optimizer_function=optimizer_function if optimizer else None,
                    infeed_queue=infeed,
                    outfeed_queue=outfeed,
                    pipeline_schedule=schedule,
                    recomputation_mode=recomputation_mode,
                    device_mapping=device_mapping,
                    offload_activations=offload_activations,
                    reduction_method=reduction_method,
                )

        with tf.device("/device:IPU:0"):
            compiled = ipu.ipu_compiler.compile(my_net, inputs=inputs)
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = _ipus_for(device_mapping) * replication_factor
        if recomp:
            config.allow_recompute = True
        if number_of_io_tiles:
            # The original's tester reserves I/O tiles and places the feeds' operations there.
            config.io_tiles.num_io_tiles = number_of_io_tiles
            config.io_tiles.place_ops_on_io_tiles = True
        config.configure_ipu_system()
        try:
            ipu.utils.move_variable_initialization_to_cpu()
            dequeued = outfeed.dequeue()
            with v1.Session(graph=graph) as sess:
                sess.run(v1.global_variables_initializer())
                sess.run(infeed.initializer)
                sess.run(compiled, dict(zip(inputs, input_values, strict=True)))
                out = sess.run(dequeued)
        finally:
            ipu.config.reset_ipu_configuration()
    # A training pipeline outfeeds its last stage's outputs, here the loss.
    return out[0] if optimizer and isinstance(out, (list, tuple)) else out


def cpu_losses(
    stages: Sequence[Callable],
    inputs_fn: Callable[[], list],
    input_values: list,
    repeat_count: int,
    batches_to_accumulate: int,
    dataset_fn: Callable[[], tf.data.Dataset],
    optimizer_fn: Callable | None,
    reduction_method=GA.RUNNING_MEAN,
) -> np.ndarray:
    """The stages one after the other on the CPU, with gradients accumulated as the
    pipeline's reduction method says and applied once per `batches_to_accumulate`."""
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(1)  # asked for by op determinism; nothing here is random
        inputs = inputs_fn()
        element = v1.data.make_one_shot_iterator(dataset_fn()).get_next()
        with v1.variable_scope("cpu", use_resource=True, reuse=False):
            values = list(inputs) + _as_list(element)
            for stage in stages:
                if isinstance(stage, list):
                    # Parallel functions (the original's list stage): each takes the
                    # stage's arguments; their outputs, one after the other, feed the next.
                    values = [v for function in stage for v in _as_list(function(*values))]
                else:
                    values = _as_list(stage(*values))
            loss = values[0] if len(values) == 1 else values
            if optimizer_fn is None:
                grads, apply, fed = [], None, []
            else:
                optimizer = optimizer_fn()
                variables = v1.trainable_variables()
                grads = [
                    tf.convert_to_tensor(g) for g, _ in optimizer.compute_gradients(loss, variables)
                ]
                fed = [v1.placeholder(v.dtype.base_dtype, v.shape) for v in variables]
                apply = optimizer.apply_gradients(zip(fed, variables, strict=True))
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            feed = dict(zip(inputs, input_values, strict=True))
            losses = []
            for _ in range(repeat_count):
                total = [np.zeros(g.shape, np.float64) for g in grads]
                for n in range(batches_to_accumulate):
                    value, grad_values = sess.run([loss, grads], feed)
                    losses.append(value)
                    if reduction_method == GA.RUNNING_MEAN:
                        total = [
                            t * (n / (n + 1.0)) + g / (n + 1.0)
                            for t, g in zip(total, grad_values, strict=True)
                        ]
                    else:
                        total = [t + g for t, g in zip(total, grad_values, strict=True)]
                if apply is not None:
                    scale = 1.0 / batches_to_accumulate if reduction_method == GA.MEAN else 1.0
                    sess.run(
                        apply,
                        dict(
                            zip(fed, [(t * scale).astype(np.float32) for t in total], strict=True)
                        ),
                    )
    return np.array(losses)


def compare_to_cpu(
    stages,
    inputs_fn,
    input_values,
    repeat_count,
    gradient_accumulation_count,
    dataset_fn,
    optimizer_fn,
    schedule,
    rtol=1e-5,
    atol=1e-5,
    **pipeline_options,
):
    """The original's compare_pipeline_to_cpu (and compare_pipeline_to_sharding)."""
    batch_serialization = pipeline_options.get("batch_serialization_iterations", 1)
    if batch_serialization > 1 and pipeline_options.get("device_mapping") is None:
        pipeline_options["device_mapping"] = [0] * len(stages)
    got = pipeline_losses(
        stages,
        inputs_fn,
        input_values,
        repeat_count,
        gradient_accumulation_count,
        dataset_fn,
        optimizer_fn,
        schedule,
        **pipeline_options,
    )
    expected = cpu_losses(
        stages,
        inputs_fn,
        input_values,
        repeat_count,
        gradient_accumulation_count * batch_serialization,
        dataset_fn,
        optimizer_fn,
        pipeline_options.get("reduction_method", GA.RUNNING_MEAN),
    )
    np.testing.assert_allclose(np.reshape(got, np.shape(expected)), expected, rtol=rtol, atol=atol)


# Datasets of the original's tests.


def increasing(count: int, shape: list[int]) -> tf.data.Dataset:
    """The original's create_single_increasing_dataset: 0, 1, ..., count - 1, repeated."""
    return tu.create_single_increasing_dataset(count, shape=shape)


def placeholder_inputs(*shapes_and_dtypes) -> Callable[[], list]:
    def inputs_fn():
        with tf.device("cpu"):
            return [v1.placeholder(dtype, shape=shape) for shape, dtype in shapes_and_dtypes]

    return inputs_fn


no_inputs = functools.partial(placeholder_inputs)
