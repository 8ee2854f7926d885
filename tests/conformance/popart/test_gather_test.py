"""graphcore/popart tests/integration/operators_test/gather_test.py: Gather on each axis of
rank 1 to 3 data, by empty, repeated and multi-dim indices, and ai.graphcore GroupedGather
(one gather per group), with the data's gradient under a summed loss (Cpu)."""

import numpy as np
import pytest

import popart


def _take(d1, d2, axis, grouped):
    if grouped:
        return np.stack([np.take(a, i, axis=axis) for a, i in zip(d1, d2, strict=True)])
    return np.take(d1, d2, axis=axis)


def _gather(op_tester, grouped, d1, d2, axis, d_d1=None, group_size=2, patterns="PreUniRepl"):
    """Gather `d2` from `d1` along `axis`; with `d_d1`, train and compare the gradient."""
    if grouped:
        d1 = np.stack([d1] * group_size)
        d2 = np.stack([d2] * group_size)
        d_d1 = None if d_d1 is None else np.stack([d_d1] * group_size)
    train = d_d1 is not None

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        i2 = builder.addInputTensor(d2)
        if grouped:
            o = builder.aiGraphcore.groupedgather([i1, i2], axis + 1, group_size=group_size)
        else:
            o = builder.aiOnnx.gather([i1, i2], axis)
        builder.addOutputTensor(o)
        return [o, popart.reservedGradientPrefix() + i1] if train else [o]

    def reference(_):
        out = _take(d1, d2, axis, grouped)
        return [out, d_d1] if train else [out]

    op_tester.lossReduction = popart.ReductionType.Sum
    op_tester.setPatterns([patterns], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train" if train else "infer")


GROUPED = pytest.mark.parametrize("grouped", [True, False])
F32 = np.float32
RANK2 = np.array([[-1, -2, -3], [4, 5, 6], [7, 8, 9]], F32)
RANK1 = np.arange(1, 10).astype(F32)


@pytest.mark.follows("test_gather_id_pattern")
@GROUPED
def test_gather_id_pattern(op_tester, grouped):
    d1 = np.array([[-1, -2, -3]], F32)
    _gather(op_tester, grouped, d1, np.array([0], np.int32), 0, patterns="OpToIdentity")


@pytest.mark.follows("test_gather_rank2_1")
@GROUPED
def test_gather_rank2_1(op_tester, grouped):
    d_d1 = np.array([[1.0, 1.0, 1.0], [0, 0, 0], [1.0, 1.0, 1.0]], F32)
    _gather(op_tester, grouped, RANK2, np.array([0, 2], np.int32), 0, d_d1)


@pytest.mark.follows("test_gather_rank2_2")
@GROUPED
def test_gather_rank2_2(op_tester, grouped):
    d_d1 = np.array([[1.0, 1.0, 0], [1.0, 1.0, 0], [1.0, 1.0, 0]], F32)
    _gather(op_tester, grouped, RANK2, np.arange(2, dtype=np.int32).reshape(1, 2), 1, d_d1)


@pytest.mark.follows("test_gather_rank3_1")
@GROUPED
def test_gather_rank3_1(op_tester, grouped):
    d1 = np.random.RandomState(0).randn(3, 3, 3).astype(F32)
    indices = np.arange(2, dtype=np.int32)
    d_d1 = np.zeros((3, 3, 3), F32)
    d_d1[:, :, indices] = 1.0
    _gather(op_tester, grouped, d1, indices, 2, d_d1)


@pytest.mark.follows("test_gather_rank1_1")
@GROUPED
def test_gather_rank1_1(op_tester, grouped):
    d_d1 = np.array([1.0, 1.0, 0, 0, 0, 0, 0, 0, 0], F32)
    _gather(op_tester, grouped, RANK1, np.arange(2, dtype=np.int32), 0, d_d1, group_size=3)


@pytest.mark.follows("test_gather_rank1_0")
@GROUPED
def test_gather_rank1_0(op_tester, grouped):
    _gather(op_tester, grouped, RANK1, np.array([], np.int32), 0, np.zeros(9, F32))


@pytest.mark.follows("test_gather_example1")
@GROUPED
def test_gather_example1(op_tester, grouped):
    d1 = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], F32)
    _gather(op_tester, grouped, d1, np.array([[[0, 1], [1, 2]]], np.int32), 0)


@pytest.mark.follows("test_gather_example2")
@GROUPED
def test_gather_example2(op_tester, grouped):
    d1 = np.array([[1.0, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]], F32)
    d_d1 = np.array([[2.0, 0, 1.0], [2.0, 0, 1.0], [2.0, 0, 1.0]], F32)
    _gather(op_tester, grouped, d1, np.array([[0, 2, 0]], np.int32), 1, d_d1)
