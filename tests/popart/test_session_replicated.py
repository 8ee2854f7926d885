"""Replicated sessions: each replica reads its own slice of the host data ([bps, af, rf, ...]),
anchors come back with the replica dimension, and training all-reduces gradients. Checked
against numpy per replica, and against one replica with R times the batch."""

from __future__ import annotations

import numpy as np
import pytest
from small_model import build_small_model, reference_outputs

import popart


def replicated_options(replicas: int) -> popart.SessionOptions:
    options = popart.SessionOptions()
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = replicas
    return options


@pytest.mark.parametrize("replicas", [2, 4])
def test_replicated_inference_gives_every_replica_its_slice(replicas):
    model = build_small_model()
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": replicas})
    anchors = {
        model.y: popart.AnchorReturnType("All"),
        model.hidden: popart.AnchorReturnType("Sum"),
    }
    session = popart.InferenceSession(
        model.proto,
        popart.DataFlow(3, anchors),
        device,
        userOptions=replicated_options(replicas),
    )
    session.prepareDevice()
    arrays = session.initAnchorArrays()
    assert arrays[model.y].shape == (3, replicas, 2, 3)
    assert arrays[model.hidden].shape == (replicas, 2, 3)
    x = np.random.default_rng(0).normal(size=(3, replicas, 2, 4)).astype(np.float32)
    session.run(popart.PyStepIO({model.x: x}, arrays))
    expected = reference_outputs(model, x)
    np.testing.assert_allclose(arrays[model.y], expected[model.y], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        arrays[model.hidden], expected[model.hidden].sum(axis=0), rtol=1e-5, atol=1e-5
    )


def test_replicated_final_and_every_n_anchors():
    model = build_small_model()
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 2})
    anchors = {
        model.y: popart.AnchorReturnType("Final"),
        model.hidden: popart.AnchorReturnType("EveryN", 2),
    }
    session = popart.InferenceSession(
        model.proto, popart.DataFlow(4, anchors), device, userOptions=replicated_options(2)
    )
    session.prepareDevice()
    arrays = session.initAnchorArrays()
    x = np.random.default_rng(1).normal(size=(4, 2, 2, 4)).astype(np.float32)
    session.run(popart.PyStepIO({model.x: x}, arrays))
    expected = reference_outputs(model, x)
    np.testing.assert_allclose(arrays[model.y], expected[model.y][-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        arrays[model.hidden], expected[model.hidden][1::2], rtol=1e-5, atol=1e-6
    )


def test_broadcast_inputs_reach_every_replica():
    rng = np.random.default_rng(2)
    weight = rng.normal(size=(4, 3)).astype(np.float32)
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
    scale = builder.addInputTensor(
        popart.TensorInfo("FLOAT", [3]),
        popart.InputSettings(popart.ReplicatedStreamMode.Broadcast),
        "scale",
    )
    w = builder.addInitializedInputTensor(weight, "w")
    y = builder.aiOnnx.mul([builder.aiOnnx.matmul([x, w]), scale])
    builder.addOutputTensor(y)
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(2, [y]),
        popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
        userOptions=replicated_options(2),
    )
    session.prepareDevice()
    arrays = session.initAnchorArrays()
    data = rng.normal(size=(2, 2, 2, 4)).astype(np.float32)
    scales = rng.normal(size=(2, 3)).astype(np.float32)  # [bps, 3]: no replica dimension
    session.run(popart.PyStepIO({x: data, scale: scales}, arrays))
    expected = (data @ weight) * scales[:, None, None, :]
    np.testing.assert_allclose(arrays[y], expected, rtol=1e-5, atol=1e-6)
