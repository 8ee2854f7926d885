"""graphcore/popart tests/integration/operators_test/min_max_test.py: variadic Max and Min
over broadcast inputs, with gradients to each input (Cpu)."""

import functools

import numpy as np
import pytest
import tensorflow as tf

import popart

G = popart.reservedGradientPrefix()


def _run(op_tester, grad_of, op_name, tf_op, shapes):
    datas = [np.random.rand(*shape).astype(np.float32) for shape in shapes]

    def init_builder(builder):
        ids = [builder.addInputTensor(d) for d in datas]
        o = getattr(builder.aiOnnx, op_name)(ids, f"test_{op_name}")
        builder.addOutputTensor(o)
        return [o] + [G + i for i in ids] + [G + o]

    def combined(*xs):
        return functools.reduce(tf_op, xs)

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        out = combined(*datas).numpy()
        return [out, *grad_of(combined, *datas, upstream=d__o), d__o]

    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_max_training")
def test_max_training(op_tester, grad_of):
    _run(op_tester, grad_of, "max", tf.maximum, [[5, 7, 5], [7, 5], [5], [1, 1, 5], [5, 1, 5]])


@pytest.mark.follows("test_min_training_0")
def test_min_training_0(op_tester, grad_of):
    _run(op_tester, grad_of, "min", tf.minimum, [[3, 4], [4]])


@pytest.mark.follows("test_min_training_1")
def test_min_training_1(op_tester, grad_of):
    _run(op_tester, grad_of, "min", tf.minimum, [[2, 3, 4], [4], [1, 1, 4], [2, 1, 4], [1, 3, 4]])
