"""Shared shapes of the original's random-op tests (randomnormal_test.py,
randomuniform_test.py and their -like variants): statistics of many draws, the same draws
after the same seed, distinct draws per op and per replica, and the refused attributes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest

import popart
from conftest import create_test_device

SUPPORTED_DTYPES = [
    (np.float32, onnx.helper.TensorProto.FLOAT),
    (np.float16, onnx.helper.TensorProto.FLOAT16),
]
SEED_ERROR = "Optional seed attribute is not supported. Use session::setRandomSeed instead."


def check_normal_stats(op_tester: Any, draw: Callable[[Any], str], dtype: type) -> None:
    """Mean 1 and standard deviation 2 of 10000 draws of `draw(builder)`, within 0.1."""
    expected_mean, expected_stddev = np.array(1.0, dtype), np.array(2.0, dtype)

    def init_builder(builder):
        rn = draw(builder)
        mean = builder.aiOnnx.reducemean([rn], keepdims=False)
        builder.addOutputTensor(mean)
        diff = builder.aiOnnx.sub([rn, mean])
        sum_squares = builder.aiOnnx.reducesumsquare([diff], keepdims=False)
        var = builder.aiOnnx.div([sum_squares, builder.addInputTensor(np.array(9999, dtype))])
        stddev = builder.aiOnnx.sqrt([var])
        builder.addOutputTensor(stddev)
        return [mean, stddev]

    op_tester.atol = 1e-01
    op_tester.run(init_builder, lambda _: [expected_mean, expected_stddev], seed=42)


def check_uniform_stats(op_tester: Any, draw: Callable[[Any], str], dtype: type) -> None:
    """Minimum -1, maximum 1 and mean 0 of 10000 draws of `draw(builder)`, within 0.01."""
    low, high = np.array(-1.0, dtype), np.array(1.0, dtype)

    def init_builder(builder):
        ru = draw(builder)
        outputs = [
            builder.aiOnnx.reducemin([ru], keepdims=False),
            builder.aiOnnx.reducemax([ru], keepdims=False),
            builder.aiOnnx.reducemean([ru], keepdims=False),
        ]
        for o in outputs:
            builder.addOutputTensor(o)
        return outputs

    op_tester.atol = 1e-02
    op_tester.run(init_builder, lambda _: [low, high, (low + high) / np.array(2, dtype)], seed=42)


def check_repeatable(make: Callable[[Any], str]) -> None:
    """The same seed twice gives the same draws."""
    builder = popart.Builder()
    out = make(builder)
    builder.addOutputTensor(out)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        patterns=popart.Patterns(popart.PatternsLevel.All),
        deviceInfo=create_test_device("IpuModel"),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    stepio = popart.PyStepIO({}, anchors)
    runs = []
    for _ in range(2):
        session.setRandomSeed(8)
        session.weightsFromHost()
        session.run(stepio)
        runs.append(np.copy(anchors[out]))
    assert np.array_equal(*runs)


def check_multi(op_tester: Any, make: Callable[[Any, str], str], dtype: type) -> None:
    """Two ops of the same shape draw different values: sum(|x1 - x2|) > 0."""

    def init_builder(builder):
        diff = builder.aiOnnx.sub([make(builder, "r1"), make(builder, "r2")])
        loss = builder.aiOnnx.reducel1([diff], keepdims=False)
        out = builder.aiOnnx.greater([loss, builder.addInputTensor(np.array(0.0, dtype))])
        builder.addOutputTensor(out)
        return [out]

    op_tester.run(init_builder, lambda _: [np.array(True)], seed=42)


def check_distinct_per_replica(make: Callable[[Any], str]) -> None:
    """Two replicas draw different values."""
    builder = popart.Builder()
    out = make(builder)
    loss = builder.aiGraphcore.identityloss([out])
    builder.addOutputTensor(loss)
    opts = popart.SessionOptions()
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = 2
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        patterns=popart.Patterns(popart.PatternsLevel.All),
        deviceInfo=create_test_device("IpuModel", num_ipus=2),
        userOptions=opts,
        optimizer=popart.ConstSGD(0.1),
        loss=loss,
    )
    session.prepareDevice()
    session.setRandomSeed(8)
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({}, anchors))
    for a, b in itertools.combinations(range(2), 2):
        assert not np.allclose(anchors[out][a], anchors[out][b])


def check_refused(op_tester: Any, make: Callable[[Any], str], message: str, at_end: bool) -> None:
    """Running a model of `make(builder)` raises a popart_exception with `message` (at the
    end of the exception's text, or anywhere in it)."""

    def init_builder(builder):
        out = make(builder)
        builder.addOutputTensor(out)
        return [out]

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, None)
    text = e_info.value.args[0]
    assert text.endswith(message) if at_end else message in text


def check_like_replaced(make: Callable[[Any, str], str], dtype: type, replaced_by: str) -> None:
    """A -like op draws its input's shape and type, and the IR holds the plain op instead."""
    data = np.zeros((1, 2, 10, 5), dtype=dtype)
    builder = popart.Builder()
    out = make(builder, builder.addInitializedInputTensor(data))
    builder.addOutputTensor(out)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        deviceInfo=create_test_device("IpuModel"),
    )
    session.prepareDevice()
    session.setRandomSeed(8)
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({}, anchors))
    assert anchors[out].shape == data.shape
    assert anchors[out].dtype == data.dtype
    graph = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))["maingraph"]
    assert not [op for op in graph if op["type"] == replaced_by + "Like"]
    assert len([op for op in graph if op["type"] == replaced_by]) == 1
