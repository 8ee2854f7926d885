"""Pipelining: counts, OptimizerFunctionOutput and stage options as the original takes them.

The original is graphcore/tensorflow, tensorflow/python/ipu/ops/pipelining_ops.py (cited as
"pipelining_ops.py"), with TensorFlow's op wrapper (framework/op_def_library.py) for the
pipeline op's int attributes (ops/functional/pipelining.cc:31-32, `int >= 1`).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

pipelining_ops = ipu.pipelining_ops

# A message's start: raised inside a tf.function, it follows "in user code: ... Error: ".
_START = r"(?:^|Error: )"


def _train(strategy, count=4, repeats=1, optimizer_function=None, **kwargs):
    """Two linear stages over 8 mini-batches of 2 rows, trained with SGD in an IPUStrategy;
    returns the outfed losses and the final weights."""
    kwargs.setdefault("device_mapping", [0, 0])
    x = np.arange(32, dtype=np.float32).reshape(16, 2) / 16.0
    y = x.sum(axis=1, keepdims=True)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2, drop_remainder=True)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        w = tf.Variable(tf.ones([2, 1]))

        def stage1(features, labels):
            return tf.matmul(features, w), labels

        def stage2(prediction, labels):
            return tf.reduce_mean(tf.square(prediction - labels))

        def sgd(loss):
            return pipelining_ops.OptimizerFunctionOutput(
                tf.compat.v1.train.GradientDescentOptimizer(0.1), loss
            )

        @tf.function(jit_compile=True)
        def net():
            return pipelining_ops.pipeline(
                [stage1, stage2],
                gradient_accumulation_count=count,
                repeat_count=repeats,
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                optimizer_function=optimizer_function or sgd,
                outfeed_loss=True,
                pipeline_schedule=pipelining_ops.PipelineSchedule.Sequential,
                **kwargs,
            )

        strategy.run(net)
    return outfeed.dequeue().numpy(), w.numpy()


# gradient_accumulation_count --------------------------------------------------------------


def test_a_missing_count_is_the_originals_value_error(strategy_on):
    # pipelining_ops.py:783-784.
    with pytest.raises(
        ValueError, match=_START + r"gradient_accumulation_count must be specified\."
    ):
        _train(strategy_on(1), count=None)


@pytest.mark.parametrize(
    "count, message",
    [
        (-1, _START + r"gradient_accumulation_count must be >= 0\.$"),
        (2**31, _START + r"gradient_accumulation_count must be < max int32\.$"),
    ],
)
def test_a_python_int_count_out_of_int32_range_is_a_value_error(strategy_on, count, message):
    # pipelining_ops.py:786-790: checked only for a Python int.
    with pytest.raises(ValueError, match=message):
        _train(strategy_on(1), count=count)


@pytest.mark.parametrize(
    "count",
    [4.0, 4.7, np.int64(4), np.float32(4.0), "tensor", "float tensor"],
    ids=["float", "float-truncated", "numpy-int", "numpy-float", "tensor", "float-tensor"],
)
def test_any_count_the_int32_cast_takes_trains_as_that_count(strategy_on, count):
    # pipelining_ops.py:792-794: the count is tf.cast(convert_to_tensor(count), int32), so
    # a float (truncated), a numpy value or a tensor of any number type goes.
    if count == "tensor":
        count = tf.constant(4)
    elif count == "float tensor":
        count = tf.constant(4.0)
    losses, w = _train(strategy_on(1), count=count, repeats=2)
    expected_losses, expected_w = _train(strategy_on(1), count=4, repeats=2)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    np.testing.assert_allclose(w, expected_w, rtol=1e-6)


@pytest.mark.parametrize("count", [0, False], ids=["zero", "false"])
def test_a_zero_count_is_refused_by_the_compiler_not_by_python(strategy_on, count):
    # 0 passes pipelining_ops.py:786-790 (a bool is an int there); the original's compiler
    # then refuses it when the program first runs (pipeline_visitor.cc, fixed count).
    with pytest.raises(
        tf.errors.FailedPreconditionError,
        match=_START
        + r"The number of iterations of the pipeline must be at least 1, but it is 0\.",
    ):
        _train(strategy_on(1), count=count)


# repeat_count and batch_serialization_iterations: the op's `int >= 1` attributes ---------


@pytest.mark.parametrize(
    "name, value, error, message",
    [
        (
            "repeat_count",
            "2",
            TypeError,
            _START + r"Expected int for argument 'repeat_count' not '2'\.$",
        ),
        (
            "repeat_count",
            None,
            TypeError,
            _START + r"Expected int for argument 'repeat_count' not None\.$",
        ),
        (
            "repeat_count",
            0,
            ValueError,
            _START + r"Attr 'repeat_count' of 'Pipeline' Op passed 0 less than minimum 1\.$",
        ),
        (
            "repeat_count",
            0.5,  # int(0.5) is 0
            ValueError,
            _START + r"Attr 'repeat_count' of 'Pipeline' Op passed 0 less than minimum 1\.$",
        ),
        (
            "batch_serialization_iterations",
            0,
            ValueError,
            _START + r"Attr 'batch_serialization_iterations' of 'Pipeline' Op passed 0 less than "
            r"minimum 1\.$",
        ),
        # Compared `> 1` in Python before the op is made (pipelining_ops.py:831).
        ("batch_serialization_iterations", None, TypeError, "'>' not supported"),
        ("batch_serialization_iterations", "2", TypeError, "'>' not supported"),
    ],
)
def test_int_attributes_as_the_op_wrapper_takes_them(strategy_on, name, value, error, message):
    # framework/op_def_library.py:171-179 (_MakeInt) and :81-84 (the minimum).
    arguments = {"repeats": value} if name == "repeat_count" else {name: value}
    with pytest.raises(error, match=message):
        _train(strategy_on(1), **arguments)


def test_a_float_repeat_count_is_truncated(strategy_on):
    # _MakeInt is int(): 2.9 repeats twice.
    losses, w = _train(strategy_on(1), repeats=2.9)
    expected_losses, expected_w = _train(strategy_on(1), repeats=2)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    np.testing.assert_allclose(w, expected_w, rtol=1e-6)


def test_batch_serialization_with_another_reduction_than_sum_is_refused(strategy_on):
    # pipelining_ops.py:800-804.
    with pytest.raises(
        ValueError,
        match=_START
        + r"batch_serialization_iterations != 1 is only supported when reduction_method "
        r"is GradientAccumulationReductionMethod.SUM$",
    ):
        _train(strategy_on(1), batch_serialization_iterations=2, reduction_method="mean")


def test_batch_serialization_with_mean_trains_when_not_serialized(strategy_on):
    losses, _ = _train(strategy_on(1), batch_serialization_iterations=1, reduction_method="mean")
    assert losses.shape == (4,)


def test_an_inference_pipeline_does_not_parse_reduction_method(strategy_on):
    # pipelining_ops.py:796-798 parse it for a training pipeline only: an inference
    # pipeline takes any value (but :800 still compares it with SUM).
    strategy = strategy_on(1)
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32)).batch(
        2, drop_remainder=True
    )
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def net(serialization):
            return pipelining_ops.pipeline(
                [lambda x: x * 2.0, lambda x: x + 1.0],
                gradient_accumulation_count=4,
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                reduction_method="median",
                batch_serialization_iterations=serialization,
                pipeline_schedule=pipelining_ops.PipelineSchedule.Sequential,
                device_mapping=[0, 0],
            )

        strategy.run(net, args=(1,))
        np.testing.assert_allclose(
            outfeed.dequeue().numpy(), np.arange(8, dtype=np.float32).reshape(4, 2) * 2 + 1
        )
        with pytest.raises(ValueError, match=_START + "batch_serialization_iterations != 1"):
            strategy.run(net, args=(2,))


# optimizer_function's result --------------------------------------------------------------


class _Output:
    """Not an OptimizerFunctionOutput: the attributes the original's pipeline reads."""

    def __init__(self, opt, loss):
        self.opt = opt
        self.loss = loss
        self.compute_gradients_args = ()
        self.compute_gradients_kwargs = {}
        self.apply_gradients_args = ()
        self.apply_gradients_kwargs = {}
        self.tape = None
        self.gradient_capture_context = None


def test_an_object_with_the_attributes_trains_like_an_optimizer_function_output(strategy_on):
    # pipelining_ops.py:1092-1098: the result is read, never type-checked.
    def duck(loss):
        return _Output(tf.compat.v1.train.GradientDescentOptimizer(0.1), loss)

    losses, w = _train(strategy_on(1), optimizer_function=duck, repeats=2)
    expected_losses, expected_w = _train(strategy_on(1), repeats=2)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    np.testing.assert_allclose(w, expected_w, rtol=1e-6)


@pytest.mark.parametrize("missing", ["loss", "apply_gradients_kwargs", "tape"])
def test_a_result_without_an_attribute_is_an_attribute_error(strategy_on, missing):
    def duck(loss):
        output = _Output(tf.compat.v1.train.GradientDescentOptimizer(0.1), loss)
        delattr(output, missing)
        return output

    # `tape` is read for the captured gradients (pipelining_ops.py:1038), even with a
    # TF1 optimizer.
    with pytest.raises(AttributeError, match=missing):
        _train(strategy_on(1), optimizer_function=duck)


def test_a_loss_returned_as_is_is_an_attribute_error(strategy_on):
    with pytest.raises(AttributeError, match="'loss'"):
        _train(strategy_on(1), optimizer_function=lambda loss: loss)


# OptimizerFunctionOutput's arguments ------------------------------------------------------


@pytest.mark.parametrize(
    "name, value",
    [
        ("compute_gradients_args", ["x"]),
        ("compute_gradients_kwargs", [("name", "x")]),
        ("apply_gradients_args", ["x"]),
        ("apply_gradients_kwargs", [("name", "x")]),
    ],
)
def test_gradient_arguments_must_be_a_tuple_or_a_dict(name, value):
    # pipelining_ops.py:198-250: TypeError for a non-empty list, whatever the optimizer.
    sgd = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    kind = "tuple" if name.endswith("_args") else "dict"
    with pytest.raises(
        TypeError, match=_START + rf"OptimizerFunctionOutput.{name} must be a {kind}\.$"
    ):
        pipelining_ops.OptimizerFunctionOutput(sgd, tf.constant(1.0), **{name: value})
    output = pipelining_ops.OptimizerFunctionOutput(sgd, tf.constant(1.0))
    with pytest.raises(
        TypeError, match=_START + rf"OptimizerFunctionOutput.{name} must be a {kind}\.$"
    ):
        setattr(output, name, value)
    # A falsy value is the default (pipelining_ops.py:162-169).
    output = pipelining_ops.OptimizerFunctionOutput(sgd, tf.constant(1.0), **{name: []})
    assert getattr(output, name) == (() if kind == "tuple" else {})


def test_a_list_of_compute_gradients_args_is_a_type_error_before_the_keras_refusal():
    # pipelining_ops.py:203-210: the type is checked first.
    keras = tf.keras.optimizers.SGD(0.1)
    with pytest.raises(TypeError, match="compute_gradients_args must be a tuple"):
        pipelining_ops.OptimizerFunctionOutput(keras, tf.constant(1.0), compute_gradients_args=[1])
    with pytest.raises(ValueError, match="compute_gradients_args may not be used with OptimizerV2"):
        pipelining_ops.OptimizerFunctionOutput(keras, tf.constant(1.0), compute_gradients_args=(1,))


def test_apply_gradients_arguments_given_as_tuple_and_dict_reach_the_optimizer(strategy_on):
    seen = []

    class Recording(tf.compat.v1.train.GradientDescentOptimizer):
        def apply_gradients(self, grads_and_vars, global_step=None, name=None):
            seen.append(name)
            return super().apply_gradients(grads_and_vars, global_step, name)

    def optimizer_function(loss):
        return pipelining_ops.OptimizerFunctionOutput(
            Recording(0.1), loss, apply_gradients_args=(None,), apply_gradients_kwargs={"name": "u"}
        )

    _train(strategy_on(1), optimizer_function=optimizer_function)
    assert seen and set(seen) == {"u"}


# PipelineStageOptions ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [0.3, 1, True, None, ["0.3"]])
def test_a_stage_option_value_that_is_not_a_string_is_a_type_error(value):
    # pipelining_ops.py:386-401: the values go into a protocol buffer's string fields.
    with pytest.raises(TypeError):
        pipelining_ops.PipelineStageOptions(matmul_options={"availableMemoryProportion": value})
    with pytest.raises(TypeError):
        pipelining_ops.PipelineStageOptions(convolution_options={value: "0.3"})


def test_stage_options_take_str_and_utf8_bytes(strategy_on):
    options = pipelining_ops.PipelineStageOptions(
        matmul_options={"availableMemoryProportion": "0.3"},
        slice_options={b"availableMemoryProportion": b"0.2"},
    )
    with pytest.raises(ValueError):
        pipelining_ops.PipelineStageOptions(slice_options={"option": b"\xff"})
    losses, _ = _train(
        strategy_on(1),
        forward_propagation_stages_poplar_options=[options, options],
        weight_update_poplar_options=options,
    )
    assert losses.shape == (4,)


# Keras optimizers and the options only a training pipeline reads --------------------------------


def test_a_keras_optimizer_without_variables_or_tape_is_the_originals_runtime_error(strategy_on):
    # pipelining_ops.py:1133-1141: an OptimizerV2 needs the variables or a GradientTape.
    def keras_sgd(loss):
        return pipelining_ops.OptimizerFunctionOutput(tf.keras.optimizers.SGD(0.1), loss)

    with pytest.raises(RuntimeError, match=_START + "No variables to optimize. When using"):
        _train(strategy_on(1), optimizer_function=keras_sgd)


def test_a_keras_optimizer_with_its_variables_trains_like_numpy(strategy_on):
    strategy = strategy_on(1)
    x = np.arange(16, dtype=np.float32).reshape(8, 2) / 8.0
    dataset = tf.data.Dataset.from_tensor_slices(x).batch(2, drop_remainder=True)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        w = tf.Variable(tf.ones([2, 1]))
        sgd = tf.keras.optimizers.SGD(0.1)

        def keras_sgd(loss):
            return pipelining_ops.OptimizerFunctionOutput(sgd, loss, variables=[w])

        @tf.function(jit_compile=True)
        def net():
            return pipelining_ops.pipeline(
                [lambda f: tf.matmul(f, w), lambda p: tf.reduce_sum(p)],
                gradient_accumulation_count=4,
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                optimizer_function=keras_sgd,
                outfeed_loss=True,
                device_mapping=[0, 0],
            )

        strategy.run(net)
    # The loss sums x @ w: its gradient is the column sums, accumulated over the 4 batches.
    np.testing.assert_allclose(w.numpy(), 1.0 - 0.1 * x.sum(axis=0)[:, None], rtol=1e-6)


def test_an_inference_pipeline_ignores_backward_and_weight_update_options(strategy_on):
    # pipelining_ops.py:937-949 read them only when there is an optimizer_function.
    strategy = strategy_on(1)
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32)).batch(
        2, drop_remainder=True
    )
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def net():
            return pipelining_ops.pipeline(
                [lambda x: x * 2.0, lambda x: x + 1.0],
                gradient_accumulation_count=4,
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                backward_propagation_stages_poplar_options=["not options"],
                weight_update_poplar_options={"not": "options"},
                device_mapping=[0, 0],
            )

        strategy.run(net)
    np.testing.assert_allclose(
        outfeed.dequeue().numpy(), np.arange(8, dtype=np.float32).reshape(4, 2) * 2 + 1
    )
    with pytest.raises(TypeError, match="weight_update_poplar_options to be of type"):
        _train(strategy, weight_update_poplar_options={"not": "options"})
