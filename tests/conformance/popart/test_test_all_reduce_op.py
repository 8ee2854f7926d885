"""graphcore/popart tests/integration/test_all_reduce_op.py: PopXL's all-reduce across four
IPUs of one replica (each IPU's input summed; with identical inputs or identical gradient
inputs; forwards and through autodiff), run from a PopXL IR by an InferenceSession. openipu
has no PopXL, so these are expected failures. The original runs them on IPU hardware."""

import importlib

import numpy as np
import pytest

NO_POPXL = "openipu has no popxl module (PopART's Python IR-building API)"
INPUTS = np.arange(4 * 2 * 3, dtype=np.float32).reshape(4, 2, 3)


def _all_reduce(kind, backwards):
    popxl = importlib.import_module("popxl")
    ops = importlib.import_module("popxl.ops")
    ir = popxl.Ir()
    with ir.main_graph:
        xs = []
        for ipu in range(4):
            with popxl.ipu(ipu):
                stream = popxl.h2d_stream(INPUTS[ipu].shape, popxl.float32, name=f"x_{ipu}")
                xs.append(ops.host_load(stream, f"x_{ipu}"))
        reduce = getattr(ops.collectives, kind)
        if not backwards:
            return reduce(xs, ipus=list(range(4)), op="add")
        graph = ir.create_graph(lambda *t: reduce(t, ipus=list(range(4)), op="add"), *xs)
    grad = popxl.transforms.autodiff(graph).graph
    with ir.main_graph:
        return ops.call(grad, *xs)


@pytest.mark.follows("test_all_reduce_op")
@pytest.mark.xfail(strict=True, raises=ImportError, reason=NO_POPXL)
def test_all_reduce_op():
    _all_reduce("all_reduce", backwards=False)


@pytest.mark.follows("test_all_reduce_op_backwards")
@pytest.mark.xfail(strict=True, raises=ImportError, reason=NO_POPXL)
def test_all_reduce_op_backwards():
    _all_reduce("all_reduce", backwards=True)


@pytest.mark.follows("test_all_reduce_identical_inputs_op")
@pytest.mark.xfail(strict=True, raises=ImportError, reason=NO_POPXL)
def test_all_reduce_identical_inputs_op():
    _all_reduce("all_reduce_identical_inputs", backwards=False)


@pytest.mark.follows("test_all_reduce_identical_inputs_op_backwards")
@pytest.mark.xfail(strict=True, raises=ImportError, reason=NO_POPXL)
def test_all_reduce_identical_inputs_op_backwards():
    _all_reduce("all_reduce_identical_inputs", backwards=True)


@pytest.mark.follows("test_all_reduce_identical_grad_inputs_op")
@pytest.mark.xfail(strict=True, raises=ImportError, reason=NO_POPXL)
def test_all_reduce_identical_grad_inputs_op():
    _all_reduce("all_reduce_identical_grad_inputs", backwards=False)


@pytest.mark.follows("test_all_reduce_identical_grad_inputs_op_backwards")
@pytest.mark.xfail(strict=True, raises=ImportError, reason=NO_POPXL)
def test_all_reduce_identical_grad_inputs_op_backwards():
    _all_reduce("all_reduce_identical_grad_inputs", backwards=True)
